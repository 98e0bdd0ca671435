#include "launcher/guard/git_config_guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <utility>

#include "common/unique_fd.h"

namespace cagent::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// ---- the allow-list ----

struct KeyParts {
  std::string_view section, subsection, variable;
  bool has_subsection = false;
};

KeyParts Split(std::string_view key) {
  KeyParts k;
  const auto first = key.find('.');
  const auto last = key.rfind('.');
  k.section = key.substr(0, first);
  k.variable = key.substr(last + 1);
  if (last > first) {
    k.has_subsection = true;
    k.subsection = key.substr(first + 1, last - first - 1);
  }
  return k;
}

bool HasControl(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// A value git reads as a boolean: no value (true), or one of git's spellings.
bool IsBool(const std::optional<std::string>& v) {
  if (!v) return true;
  const std::string l = Lower(*v);
  return l.empty() || l == "true" || l == "false" || l == "yes" || l == "no" || l == "on" ||
         l == "off" || l == "1" || l == "0";
}

bool OneOf(const std::optional<std::string>& v, std::initializer_list<std::string_view> allowed) {
  if (!v) return false;
  const std::string l = Lower(*v);
  return std::find(allowed.begin(), allowed.end(), l) != allowed.end();
}

// A plain text value: present, printable, bounded.
bool Plain(const std::optional<std::string>& v, std::size_t max) {
  return v && !v->empty() && v->size() <= max && !HasControl(*v);
}

// A remote's URL: a plain value that names one of git's own transports. "<helper>::<address>"
// (ext::, fd::, or any git-remote-<helper> on PATH) is refused: ext:: runs a shell command, and a
// helper is a program chosen by the string. An option-like value ("-oProxyCommand=...") is
// refused too (git refuses such host names itself since 2.14.1; this does not rely on it).
bool SafeUrl(const std::optional<std::string>& v) {
  if (!Plain(v, 2048)) return false;
  const std::string_view url = *v;
  if (url.front() == '-') return false;
  const auto colons = url.find("::");
  const auto slash = url.find('/');
  if (colons != std::string_view::npos && (slash == std::string_view::npos || colons < slash)) {
    return false;
  }
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return true;  // scp-like "host:path" or a local path
  const std::string scheme = Lower(url.substr(0, scheme_end));
  return scheme == "https" || scheme == "http" || scheme == "ssh" || scheme == "git" ||
         scheme == "file" || scheme == "git+ssh" || scheme == "ssh+git";
}

bool SafeName(std::string_view s) { return !s.empty() && s.size() <= 256 && !HasControl(s); }

}  // namespace

std::optional<std::vector<GitConfigEntry>> ParseGitConfigListing(std::string_view listing) {
  std::vector<GitConfigEntry> out;
  if (listing.empty()) return out;
  if (listing.back() != '\0') return std::nullopt;
  std::size_t start = 0;
  while (start < listing.size()) {
    const auto end = listing.find('\0', start);
    const std::string_view field = listing.substr(start, end - start);
    start = end + 1;
    GitConfigEntry e;
    const auto nl = field.find('\n');
    e.key = std::string(field.substr(0, nl));
    if (nl != std::string_view::npos) e.value = std::string(field.substr(nl + 1));
    const auto dot = e.key.find('.');
    if (e.key.empty() || dot == 0 || dot == std::string::npos || e.key.back() == '.' ||
        HasControl(e.key)) {
      return std::nullopt;
    }
    out.push_back(std::move(e));
  }
  return out;
}

bool GitConfigEntryAllowed(const GitConfigEntry& entry, bool new_repository) {
  const KeyParts k = Split(entry.key);
  const auto& v = entry.value;
  if (!k.has_subsection) {
    const std::string key = entry.key;  // section and variable are lowercase already
    if (key == "user.name" || key == "user.email") return Plain(v, 256);
    if (key == "core.repositoryformatversion") return OneOf(v, {"0", "1"});
    if (key == "core.bare" || key == "core.filemode" || key == "core.ignorecase" ||
        key == "core.precomposeunicode") {
      return IsBool(v);
    }
    if (key == "core.logallrefupdates") return IsBool(v) || OneOf(v, {"always"});
    if (key == "core.autocrlf") return IsBool(v) || OneOf(v, {"input"});
    if (key == "core.eol") return OneOf(v, {"lf", "crlf", "native"});
    if (key == "core.safecrlf") return IsBool(v) || OneOf(v, {"warn"});
    // Not "interactive": that starts an editor on the host's next `git pull`.
    if (key == "pull.rebase") return IsBool(v) || OneOf(v, {"merges"});
    if (key == "init.defaultbranch") return Plain(v, 256);
    // `git init --object-format` writes it; in an existing repository it would make git misread
    // every object, so only the value it had before the launch stays there (FilterGitConfig).
    if (key == "extensions.objectformat") return new_repository && OneOf(v, {"sha1", "sha256"});
    return false;
  }
  if (!SafeName(k.subsection)) return false;
  if (k.section == "branch") {
    if (k.variable == "remote") return Plain(v, 256);
    if (k.variable == "merge") return Plain(v, 1024);
    if (k.variable == "rebase") return IsBool(v) || OneOf(v, {"merges"});
    return false;
  }
  if (k.section == "remote") {
    if (k.variable == "url" || k.variable == "pushurl") return SafeUrl(v);
    if (k.variable == "fetch") return Plain(v, 1024);
    return false;
  }
  return false;
}

GitConfigFilter FilterGitConfig(const std::vector<GitConfigEntry>& after,
                                const std::vector<GitConfigEntry>* before) {
  GitConfigFilter f;
  std::set<std::string> dropped;
  for (const GitConfigEntry& e : after) {
    const bool callers =
        before != nullptr && std::find(before->begin(), before->end(), e) != before->end();
    if (callers || GitConfigEntryAllowed(e, before == nullptr)) {
      f.kept.push_back(e);
    } else if (dropped.insert(e.key).second) {
      f.dropped.push_back(e.key);
    }
  }
  return f;
}

std::string RenderGitConfig(const std::vector<GitConfigEntry>& entries) {
  auto quoted = [](std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
      switch (c) {
        case '\\':
          out += "\\\\";
          break;
        case '"':
          out += "\\\"";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\b':
          out += "\\b";
          break;
        default:
          out += c;
      }
    }
    return out + "\"";
  };
  std::string out =
      "# Written by cagent after a sandbox changed this file: it keeps only the keys a\n"
      "# repository's own configuration may set, and what was here before (see cagent's\n"
      "# docs/threat-model.md, \"git metadata\").\n";
  std::string current;  // the key prefix of the open section, "" for none
  bool open = false;
  for (const GitConfigEntry& e : entries) {
    const KeyParts k = Split(e.key);
    const std::string prefix = e.key.substr(0, e.key.size() - k.variable.size());
    if (!open || prefix != current) {
      out += "[" + std::string(k.section);
      if (k.has_subsection) out += " " + quoted(k.subsection);
      out += "]\n";
      current = prefix;
      open = true;
    }
    out += "\t" + std::string(k.variable);
    if (e.value) out += " = " + quoted(*e.value);
    out += "\n";
  }
  return out;
}

// ---- running git on the bytes ----

std::vector<std::string> GitConfigListingEnvironment() {
  // The isolation of GitEnvironment (a test keeps the two in step), and no repository.
  const char* path = std::getenv("PATH");
  return {"GIT_CONFIG_NOSYSTEM=1",
          "GIT_CONFIG_GLOBAL=/dev/null",
          "GIT_TERMINAL_PROMPT=0",
          "GIT_OPTIONAL_LOCKS=0",
          "GIT_PAGER=cat",
          "PAGER=cat",
          "GIT_ATTR_NOSYSTEM=1",
          "GIT_NO_REPLACE_OBJECTS=1",
          "GIT_ASKPASS=/bin/false",
          "SSH_ASKPASS=/bin/false",
          "LC_ALL=C",
          "TZ=UTC",
          "GIT_PROTOCOL_FROM_USER=0",
          "GIT_NO_LAZY_FETCH=1",
          "HOME=/nonexistent",
          "GIT_DIR=/nonexistent",
          std::string("PATH=") + (path != nullptr && *path != '\0' ? path : "/usr/bin:/bin")};
}

namespace {

std::optional<std::string> FindGit() {
  const char* env = std::getenv("PATH");
  const std::string path = env != nullptr && *env != '\0' ? env : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    const auto end = std::min(path.find(':', start), path.size());
    const std::string dir = path.substr(start, end - start);
    start = end + 1;
    if (dir.empty() || dir[0] != '/') continue;  // never a relative PATH entry (the cwd)
    const std::string candidate = dir + "/git";
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return std::nullopt;
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::string ReadAllFrom(int fd, std::size_t max) {
  std::string out;
  std::array<char, 65536> buf{};
  ::lseek(fd, 0, SEEK_SET);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf.data(), static_cast<std::size_t>(n));
    if (out.size() > max) break;
  }
  return out;
}

// Moves `fd` to 10 or above (close-on-exec), so the child's dup2 onto 0..3 never overwrites the
// source of a later dup2.
UniqueFd High(int fd) {
  if (fd < 0) return UniqueFd();
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  return UniqueFd(moved);
}

constexpr std::size_t kMaxListing = 8 << 20;
constexpr auto kListTimeout = std::chrono::seconds(10);

}  // namespace

Result<std::vector<GitConfigEntry>> ListGitConfig(std::string_view bytes) {
  const auto git = FindGit();
  if (!git) return PlainError("list a git config file", "git is not on PATH");
  UniqueFd in = High(::memfd_create("cagent-git-config", MFD_CLOEXEC));
  UniqueFd out = High(::memfd_create("cagent-git-config-list", MFD_CLOEXEC));
  UniqueFd err = High(::memfd_create("cagent-git-config-err", MFD_CLOEXEC));
  UniqueFd null = High(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!in.valid() || !out.valid() || !err.valid() || !null.valid()) {
    return ErrnoError("prepare to list a git config file");
  }
  if (!WriteAll(in.get(), bytes) || ::lseek(in.get(), 0, SEEK_SET) != 0) {
    return ErrnoError("copy a git config file to list it");
  }
  std::vector<std::string> args = {"git",           "config", "--file", "/proc/self/fd/3",
                                   "--no-includes", "--list", "-z"};
  std::vector<std::string> env = GitConfigListingEnvironment();
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  struct Limit {
    int resource;
    rlim_t value;
  };
  std::array<Limit, 4> wanted = {{{RLIMIT_AS, rlim_t{1} << 30},
                                  {RLIMIT_CPU, 10},
                                  {RLIMIT_FSIZE, kMaxListing + 1},
                                  {RLIMIT_CORE, 0}}};
  std::array<struct rlimit, 4> limits{};
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    struct rlimit now {};
    rlim_t hard = wanted[i].value;
    if (::getrlimit(wanted[i].resource, &now) == 0) hard = std::min(hard, now.rlim_max);
    limits[i] = {hard, hard};
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork (to list a git config file)");
  if (pid == 0) {
    // The child: async-signal-safe calls only.
    (void)::setpgid(0, 0);
    (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) (void)::sigaction(sig, &dfl, nullptr);
    }
    sigset_t none;
    ::sigemptyset(&none);
    (void)::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (std::size_t i = 0; i < wanted.size(); ++i) {
      if (::setrlimit(wanted[i].resource, &limits[i]) != 0) ::_exit(127);
    }
    if (::dup2(null.get(), 0) < 0 || ::dup2(out.get(), 1) < 0 || ::dup2(err.get(), 2) < 0 ||
        ::dup2(in.get(), 3) < 0 || ::chdir("/") != 0) {
      ::_exit(127);
    }
    ::execve(git->c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  (void)::setpgid(pid, pid);
  const auto deadline = Clock::now() + kListTimeout;
  // Waits without reaping (WNOWAIT), so the group id is still git's when it is killed below.
  bool exited = false;
  long sleep_ns = 200000;  // NOLINT(google-runtime-int): timespec's type
  for (;;) {
    siginfo_t info{};
    const int w = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (w == 0 && info.si_pid == pid) {
      exited = true;
      break;
    }
    if (w < 0 && errno != EINTR) break;
    if (Clock::now() >= deadline) break;
    struct timespec ts {
      0, sleep_ns
    };
    ::nanosleep(&ts, nullptr);
    sleep_ns = std::min(sleep_ns * 2, 20000000L);
  }
  ::kill(-pid, SIGKILL);  // whatever it started goes with it
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!exited) return PlainError("git config --list", "did not finish within 10 s; it was killed");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string why = ReadAllFrom(err.get(), 512);
    while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
    if (why.size() > 300) why = why.substr(0, 300) + "...";
    return PlainError("git config --list",
                      (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                         : "killed by signal " + std::to_string(WTERMSIG(status))) +
                          (why.empty() ? "" : ": " + why));
  }
  const std::string listing = ReadAllFrom(out.get(), kMaxListing);
  if (listing.size() > kMaxListing) {
    return PlainError("git config --list", "printed more than 8 MiB");
  }
  auto entries = ParseGitConfigListing(listing);
  if (!entries) return PlainError("git config --list", "printed something that is not a listing");
  return std::move(*entries);
}

namespace {

// ---- the files ----

struct FileNow {
  bool exists = false;
  bool readable = false;
  std::string problem;  // why it is not readable, in words
  std::string bytes;
  dev_t dev = 0;
  ino_t ino = 0;
  mode_t mode = 0;
  off_t size = 0;
  long long mtime_ns = 0;  // NOLINT(google-runtime-int)
};

std::string KindOf(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device node";
  return "not a regular file";
}

// Reads `name` in the directory `dfd` without following a link, opening a FIFO or a device, or
// reading more than kMaxGitConfigBytes.
FileNow ReadFileAt(int dfd, const char* name) {
  FileNow f;
  struct stat st {};
  if (::fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return f;
    f.exists = true;
    f.problem = "cannot be inspected (" + ErrnoError("stat").Message() + ")";
    return f;
  }
  f.exists = true;
  f.dev = st.st_dev;
  f.ino = st.st_ino;
  f.mode = st.st_mode;
  f.size = st.st_size;
  f.mtime_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL +  // NOLINT
               st.st_mtim.tv_nsec;
  if (!S_ISREG(st.st_mode)) {
    f.problem = "is " + KindOf(st.st_mode);
    return f;
  }
  if (static_cast<std::size_t>(st.st_size) > kMaxGitConfigBytes) {
    f.problem = "is larger than 1 MiB";
    return f;
  }
  UniqueFd fd(::openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  struct stat again {};
  if (!fd.valid() || ::fstat(fd.get(), &again) != 0 || again.st_ino != st.st_ino ||
      again.st_dev != st.st_dev || !S_ISREG(again.st_mode)) {
    f.problem = "cannot be read";
    return f;
  }
  f.bytes = ReadAllFrom(fd.get(), kMaxGitConfigBytes);
  if (f.bytes.size() > kMaxGitConfigBytes) {
    f.problem = "is larger than 1 MiB";
    f.bytes.clear();
    return f;
  }
  f.readable = true;
  return f;
}

bool Under(const std::string& path, const std::vector<std::string>& roots) {
  return std::any_of(roots.begin(), roots.end(), [&](const std::string& r) {
    return path == r || (path.size() > r.size() && path.compare(0, r.size(), r) == 0 &&
                         (r == "/" || path[r.size()] == '/'));
  });
}

std::string Dirname(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// A small pointer file of git's (`commondir`, a `.git` file) read beneath `dfd` / at `path`:
// its first line, or nullopt.
std::optional<std::string> FirstLine(int dfd, const char* name) {
  FileNow f = ReadFileAt(dfd, name);
  if (!f.readable || f.bytes.size() > 4096) return std::nullopt;
  std::string line = f.bytes.substr(0, f.bytes.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  if (line.empty() || line.find('\0') != std::string::npos) return std::nullopt;
  return line;
}

// `target` (absolute, or relative to `base`) resolved on the host, if it lies inside `roots`.
std::optional<std::string> ResolveInside(const std::string& base, const std::string& target,
                                         const std::vector<std::string>& roots) {
  const std::string joined = target[0] == '/' ? target : base + "/" + target;
  char resolved[PATH_MAX];
  if (::realpath(joined.c_str(), resolved) == nullptr) return std::nullopt;
  std::string out = resolved;
  if (!Under(out, roots)) return std::nullopt;
  return out;
}

// Writes `text` as `name` in `dfd`: a new file beside it, renamed over it. A directory in the
// way is moved aside (to name.cagent-moved-PID) first; `moved` says so.
Status ReplaceAt(int dfd, const std::string& dir, const char* name, const std::string& text,
                 bool& moved) {
  const std::string tmp = std::string(name) + ".cagent-new-" + std::to_string(::getpid());
  ::unlinkat(dfd, tmp.c_str(), 0);
  UniqueFd fd(
      ::openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoError("create '" + dir + "/" + tmp + "'");
  auto fail = [&](const std::string& what) {
    Error e = ErrnoError(what);
    ::unlinkat(dfd, tmp.c_str(), 0);
    return e;
  };
  if (!WriteAll(fd.get(), text) || ::fsync(fd.get()) != 0) {
    return fail("write '" + dir + "/" + tmp + "'");
  }
  // A root caller's cagent writes the file for the directory's owner (whose git rewrites it).
  struct stat dst {};
  if (::geteuid() == 0 && ::fstat(dfd, &dst) == 0) (void)::fchown(fd.get(), dst.st_uid, dst.st_gid);
  fd.Reset();
  if (::renameat(dfd, tmp.c_str(), dfd, name) == 0) return Ok{};
  if (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST) {
    const std::string aside = std::string(name) + ".cagent-moved-" + std::to_string(::getpid());
    if (::renameat(dfd, name, dfd, aside.c_str()) == 0 &&
        ::renameat(dfd, tmp.c_str(), dfd, name) == 0) {
      moved = true;
      return Ok{};
    }
  }
  return fail("rename the new file over '" + dir + "/" + name + "'");
}

}  // namespace

std::optional<std::string> GitConfigGuard::GitdirTarget(const std::string& dot_git_file,
                                                        const std::vector<std::string>& roots) {
  const std::string dir = Dirname(dot_git_file);
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dfd.valid()) return std::nullopt;
  const auto line = FirstLine(dfd.get(), dot_git_file.substr(dir.size() + 1).c_str());
  if (!line || !line->starts_with("gitdir: ") || line->size() == 8) return std::nullopt;
  return ResolveInside(dir, line->substr(8), roots);
}

std::optional<std::string> GitConfigGuard::SymlinkTarget(const std::string& dot_git_symlink,
                                                         const std::vector<std::string>& roots) {
  const std::string dir = Dirname(dot_git_symlink);
  return ResolveInside(dir, dot_git_symlink.substr(dir.size() + 1), roots);
}

GitConfigGuard::HookState GitConfigGuard::HookOf(const struct stat& st) {
  return HookState{st.st_dev, st.st_ino, st.st_mode, st.st_size,
                   static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL +  // NOLINT
                       st.st_mtim.tv_nsec};
}

namespace {

// The most entries of one hooks/ directory looked at one by one; a bigger one the sandbox wrote
// is moved aside whole.
constexpr std::size_t kMaxHookEntries = 4096;
constexpr std::string_view kDisabledSuffix = ".cagent-disabled";

// The names in the directory `dfd`, at most `limit` + 1 of them (one more says "too many").
std::vector<std::string> NamesIn(int dfd, std::size_t limit) {
  std::vector<std::string> names;
  const int dup = ::fcntl(dfd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return names;
  DIR* d = ::fdopendir(dup);
  if (d == nullptr) {
    ::close(dup);
    return names;
  }
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    names.emplace_back(name);
    if (names.size() > limit) break;
  }
  ::closedir(d);
  return names;
}

// Renames `name` in `dfd` to `name.cagent-disabled` (or -2, -3 ... when taken), never over
// anything. The new name, or "" when it could not be renamed.
std::string RenameAside(int dfd, const std::string& name) {
  for (int n = 1; n <= 100; ++n) {
    std::string to =
        name + std::string(kDisabledSuffix) + (n == 1 ? std::string() : "-" + std::to_string(n));
    if (::renameat2(dfd, name.c_str(), dfd, to.c_str(), RENAME_NOREPLACE) == 0) return to;
    if (errno != EEXIST) return {};
  }
  return {};
}

}  // namespace

void GitConfigGuard::ReadHooks(int dfd, DirState& into) {
  struct stat st {};
  if (::fstatat(dfd, "hooks", &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  into.hooks_dir = HookOf(st);
  if (!S_ISDIR(st.st_mode)) return;
  UniqueFd hfd(::openat(dfd, "hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!hfd.valid()) return;
  for (const std::string& name : NamesIn(hfd.get(), kMaxHookEntries)) {
    struct stat est {};
    if (::fstatat(hfd.get(), name.c_str(), &est, AT_SYMLINK_NOFOLLOW) == 0) {
      into.hooks.emplace(name, HookOf(est));
    }
  }
}

void GitConfigGuard::DisableNewHooks(int dfd, const std::string& dir, const DirState* before,
                                     std::vector<std::string>& notes) {
  struct stat st {};
  if (::fstatat(dfd, "hooks", &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  const HookState now = HookOf(st);
  const bool same_dir = before != nullptr && before->hooks_dir && *before->hooks_dir == now;
  auto aside = [&](const std::string& parent_path, int parent, const std::string& name,
                   const std::string& what) {
    const std::string path = parent_path + "/" + name;
    const std::string to = RenameAside(parent, name);
    const int err = errno;
    if (to.empty()) {
      notes.push_back("could not disable " + what + " '" + path +
                      "', which the sandboxed command wrote (" + std::strerror(err) +
                      "); git on the host would run it: remove it before running git in '" + dir +
                      "' or its work tree");
      return;
    }
    notes.push_back("cagent disabled " + what + " '" + path +
                    "', which the sandboxed command wrote (git on the host would run it; "
                    "`git status` runs post-index-change): it is now '" +
                    parent_path + "/" + to + "'. Inspect it without running it, then delete it");
  };
  if (!S_ISDIR(st.st_mode)) {
    if (!same_dir) aside(dir, dfd, "hooks", "the hooks entry (" + KindOf(st.st_mode) + ")");
    return;
  }
  UniqueFd hfd(::openat(dfd, "hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!hfd.valid()) {
    if (!same_dir) aside(dir, dfd, "hooks", "the hooks directory (unreadable)");
    return;
  }
  const std::vector<std::string> names = NamesIn(hfd.get(), kMaxHookEntries);
  if (names.size() > kMaxHookEntries) {
    aside(dir, dfd, "hooks",
          "the hooks directory (more than " + std::to_string(kMaxHookEntries) + " entries)");
    return;
  }
  for (const std::string& name : names) {
    // Never run by git: its samples, and what cagent disabled before.
    if (name.ends_with(".sample") || name.find(kDisabledSuffix) != std::string::npos) continue;
    struct stat est {};
    if (::fstatat(hfd.get(), name.c_str(), &est, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (before != nullptr) {
      const auto it = before->hooks.find(name);
      if (it != before->hooks.end() && it->second == HookOf(est)) continue;  // the caller's own
    }
    aside(dir + "/hooks", hfd.get(), name, "the hook");
  }
}

GitConfigGuard GitConfigGuard::Snapshot(std::vector<std::string> git_dirs,
                                        const std::vector<std::string>& roots) {
  GitConfigGuard g;
  for (std::size_t i = 0; i < git_dirs.size() && g.before_.size() < kMaxGitConfigDirs; ++i) {
    const std::string dir = git_dirs[i];
    if (g.before_.count(dir) != 0) continue;
    UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!dfd.valid() || ::fstat(dfd.get(), &st) != 0) continue;
    if (const auto common = FirstLine(dfd.get(), "commondir")) {
      if (const auto target = ResolveInside(dir, *common, roots)) git_dirs.push_back(*target);
    }
    DirState s;
    s.dev = st.st_dev;
    s.ino = st.st_ino;
    const FileNow config = ReadFileAt(dfd.get(), "config");
    const FileNow worktree = ReadFileAt(dfd.get(), "config.worktree");
    auto keep = [](const FileNow& f) {
      return FileState{f.exists, f.readable, f.bytes, f.dev, f.ino, f.mode, f.size, f.mtime_ns};
    };
    s.config = keep(config);
    s.worktree = keep(worktree);
    struct stat lst {};
    s.lock = ::fstatat(dfd.get(), "config.lock", &lst, AT_SYMLINK_NOFOLLOW) == 0;
    ReadHooks(dfd.get(), s);
    g.before_.emplace(dir, std::move(s));
  }
  return g;
}

std::vector<GitConfigRewrite> GitConfigGuard::Neutralise(std::vector<std::string> git_dirs,
                                                         const std::vector<std::string>& roots,
                                                         std::vector<std::string>& notes) {
  std::vector<GitConfigRewrite> rewrites;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < git_dirs.size(); ++i) {
    const std::string dir = git_dirs[i];
    if (!seen.insert(dir).second) continue;
    if (seen.size() > kMaxGitConfigDirs) {
      notes.push_back("stopped checking git configuration after " +
                      std::to_string(kMaxGitConfigDirs) +
                      " git directories in the writable trees; inspect '" + dir +
                      "' and the rest without git before running git there");
      break;
    }
    UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!dfd.valid() || ::fstat(dfd.get(), &st) != 0) continue;  // gone, or not a directory
    const auto it = before_.find(dir);
    const DirState* before =
        it != before_.end() && it->second.dev == st.st_dev && it->second.ino == st.st_ino
            ? &it->second
            : nullptr;
    // Where git reads the repository's config from when this directory has a commondir.
    if (const auto common = FirstLine(dfd.get(), "commondir")) {
      if (const auto target = ResolveInside(dir, *common, roots)) git_dirs.push_back(*target);
    }
    for (const char* name : {"config", "config.worktree"}) {
      const bool is_config = std::string_view(name) == "config";
      const FileNow now = ReadFileAt(dfd.get(), name);
      if (!now.exists) continue;
      const FileState* was =
          before != nullptr ? (is_config ? &before->config : &before->worktree) : nullptr;
      if (was != nullptr && was->exists &&
          (was->readable ? now.readable && was->bytes == now.bytes
                         : !now.readable && was->dev == now.dev && was->ino == now.ino &&
                               was->mode == now.mode && was->size == now.size &&
                               was->mtime_ns == now.mtime_ns)) {
        continue;  // as it was before the launch (the caller's own, even when unreadable)
      }
      std::optional<std::vector<GitConfigEntry>> before_entries;
      if (was != nullptr) {
        before_entries.emplace();
        if (was->exists && was->readable) {
          auto listed = ListGitConfig(was->bytes);
          if (listed) before_entries = std::move(*listed);
        }
      }
      GitConfigRewrite r;
      r.path = dir + "/" + name;
      std::vector<GitConfigEntry> kept;
      if (!now.readable) {
        r.reason = now.problem;
      } else {
        auto listed = ListGitConfig(now.bytes);
        if (!listed) {
          r.reason = "is no configuration git can read (" + listed.error().Message() + ")";
        } else {
          GitConfigFilter f = FilterGitConfig(*listed, before_entries ? &*before_entries : nullptr);
          if (f.dropped.empty()) continue;  // everything in it may stay: left as it is
          kept = std::move(f.kept);
          r.dropped = std::move(f.dropped);
        }
      }
      if (!r.reason.empty()) {
        // Replaced whole: by what it held before the launch, or the least a repository needs.
        if (before_entries) {
          kept = *before_entries;
        } else if (is_config) {
          kept = {{"core.repositoryformatversion", "0"}};
        }
      }
      bool moved = false;
      if (auto s = ReplaceAt(dfd.get(), dir, name, RenderGitConfig(kept), moved); !s) {
        notes.push_back("could not rewrite '" + r.path +
                        "', which the sandboxed command changed: " + s.error().Message() +
                        "; do not run git in that repository before removing it");
        continue;
      }
      if (moved) {
        r.reason += "; the directory was moved to '" + r.path + ".cagent-moved-" +
                    std::to_string(::getpid()) + "'";
      }
      rewrites.push_back(std::move(r));
    }
    struct stat lst {};
    if ((before == nullptr || !before->lock) &&
        ::fstatat(dfd.get(), "config.lock", &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
        !S_ISDIR(lst.st_mode)) {
      if (::unlinkat(dfd.get(), "config.lock", 0) == 0) {
        notes.push_back("removed '" + dir +
                        "/config.lock', which the sandboxed command left behind (it would make "
                        "the next git config there fail)");
      }
    }
    DisableNewHooks(dfd.get(), dir, before, notes);
  }
  return rewrites;
}

}  // namespace cagent::launcher
