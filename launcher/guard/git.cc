#include "launcher/guard/git.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "common/unique_fd.h"

namespace cagent::launcher {
namespace {

using Clock = std::chrono::steady_clock;

std::string JoinArgs(const std::vector<std::string>& args) {
  std::string out = "git";
  for (const auto& a : args) out += " " + a;
  return out;
}

// What the child needs, all prepared before fork (nothing is allocated after it).
struct ChildPlan {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;
  int fds[3] = {-1, -1, -1};  // become 0, 1, 2
  int exec_fd = -1;           // {step, errno} goes here when exec fails
  pid_t parent = -1;
  struct Limit {
    int resource;
    struct rlimit value;
  };
  Limit limits[4] = {};
};

[[noreturn]] void ChildFail(const ChildPlan& plan, int step) {
  const int record[2] = {step, errno};
  (void)!::write(plan.exec_fd, record, sizeof(record));
  ::_exit(127);
}

// In the child after fork: async-signal-safe calls only (no allocation, no locks, no exceptions).
[[noreturn]] void ChildExec(const ChildPlan& plan) {
  (void)::setpgid(0, 0);
  // Dies with cagent; if cagent is already gone, do not run at all.
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != plan.parent) ::_exit(127);
  // Default dispositions, nothing blocked (cagent ignores SIGPIPE; git must not inherit that).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) (void)::sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  ::sigemptyset(&none);
  (void)::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (const auto& l : plan.limits) {
    if (::setrlimit(l.resource, &l.value) != 0) ChildFail(plan, 1);
  }
  for (int i = 0; i < 3; ++i) {
    if (::dup2(plan.fds[i], i) < 0) ChildFail(plan, 0);
  }
  if (::chdir(plan.cwd) != 0) ChildFail(plan, 2);
  ::execve(plan.path, plan.argv, plan.envp);
  ChildFail(plan, 3);
}

// Moves an fd above 0..2 (cagent may have been started with a standard stream closed), keeping
// O_CLOEXEC; -1 stays -1.
int AboveStdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

// git's absolute path, from PATH, resolved before fork (execvpe is not async-signal-safe).
Result<std::string> FindGit(const std::string& path) {
  std::size_t start = 0;
  while (start <= path.size()) {
    const auto end = std::min(path.find(':', start), path.size());
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/git";
    struct stat st {};
    if (dir[0] == '/' && ::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  Error e = ErrnoError("run git", ENOENT);
  e.detail = "git is not installed or not on PATH (" + path + ")";
  return e;
}

}  // namespace

std::vector<std::string> SplitNul(const std::string& out) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (start < out.size()) {
    const auto end = out.find('\0', start);
    if (end == std::string::npos) {
      fields.push_back(out.substr(start));
      break;
    }
    fields.push_back(out.substr(start, end - start));
    start = end + 1;
  }
  return fields;
}

std::string TrimLine(std::string out) {
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) {
    out.pop_back();
  }
  return out;
}

std::vector<std::string> HardeningOptions() {
  return {"-c", "core.hooksPath=/dev/null",
          "-c", "core.fsmonitor=false",
          "-c", "core.pager=cat",
          "-c", "core.editor=false",
          "-c", "core.sshCommand=false",
          "-c", "core.askPass=false",
          "-c", "core.attributesFile=/dev/null",
          "-c", "core.excludesFile=/dev/null",
          "-c", "core.quotePath=false",
          "-c", "core.symlinks=true",
          "-c", "diff.external=",
          "-c", "diff.noprefix=false",
          "-c", "diff.mnemonicPrefix=false",
          "-c", "diff.relative=false",
          "-c", "credential.helper=",
          "-c", "protocol.allow=never",
          "-c", "protocol.file.allow=always",
          "-c", "submodule.recurse=false",
          "-c", "gc.auto=0",
          "-c", "maintenance.auto=false",
          "-c", "advice.detachedHead=false",
          "-c", "init.defaultBranch=main",
          "-c", "user.name=cagent",
          "-c", "user.email=cagent@localhost",
          "-c", "commit.gpgSign=false"};
}

std::string_view NeutralAttributesLine() {
  // "!name" is "unspecified" and, being in the file of highest precedence, it is what git uses
  // (attr.c fills each attribute from the first file that mentions it, macros included): in-tree
  // "* text eol=crlf", "ident", "working-tree-encoding=UTF-16", "-whitespace", "binary" or a
  // "[attr]" macro setting them change nothing cagent records, checks or checks out.
  return "* !text !eol !crlf !ident !filter !diff !merge !working-tree-encoding !whitespace "
         "!conflict-marker-size !export-ignore !export-subst !delta !binary\n";
}

Status NeutraliseAttributes(const std::string& git_dir) {
  const std::string info = git_dir + "/info";
  if (::mkdir(info.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoError("mkdir " + info);
  const std::string path = info + "/attributes";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return ErrnoError("open " + path);
  const std::string_view line = NeutralAttributesLine();
  std::size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = ::write(fd.get(), line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("write " + path);
    off += static_cast<std::size_t>(n);
  }
  return Ok{};
}

namespace {

// The caller's PATH, or /usr/bin:/bin without one.
std::string CallerPath() {
  const char* path = std::getenv("PATH");
  return path != nullptr && *path != '\0' ? path : "/usr/bin:/bin";
}

}  // namespace

// A fixed environment: nothing of the caller's git configuration or hooks, nothing of a
// workspace's. PATH comes from the caller so the caller's git is found.
std::vector<std::string> GitEnvironment(const std::string& home) {
  std::vector<std::string> env = {"GIT_CONFIG_NOSYSTEM=1",
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
                                  "HOME=" + (home.empty() ? std::string("/nonexistent") : home)};
  env.push_back("PATH=" + CallerPath());
  return env;
}

namespace {

// Git's limits (address space, CPU, file size, no core), never above what cagent itself was given:
// raising a hard limit needs privilege, and a caller's tighter limit stays in force.
void SetLimits(ChildPlan& plan, const GitInvocation& inv) {
  plan.limits[0] = {RLIMIT_AS, {inv.max_memory, inv.max_memory}};
  plan.limits[1] = {RLIMIT_CPU, {inv.max_cpu_seconds, inv.max_cpu_seconds + 5}};
  plan.limits[2] = {RLIMIT_FSIZE, {inv.max_file_size, inv.max_file_size}};
  plan.limits[3] = {RLIMIT_CORE, {0, 0}};
  for (auto& l : plan.limits) {
    struct rlimit now {};
    if (::getrlimit(l.resource, &now) != 0) continue;
    l.value.rlim_max = std::min(l.value.rlim_max, now.rlim_max);
    l.value.rlim_cur = std::min(l.value.rlim_cur, l.value.rlim_max);
  }
}

// How watching git ended: its wait status, or the deadline passed, or its output grew too large.
struct Watched {
  bool timed_out = false;
  bool flooded = false;
  int status = 0;
};

// Reads git's stdout into result.out (up to inv.max_output) and its stderr into result.err (the
// first MiB kept), until git has exited and both pipes are closed (a process git started may hold
// them), or the deadline. git closing its output and then hanging is covered too: exit is polled.
// Whatever git started goes with it when it is killed (a hung helper, a pager someone configured
// anyway). On return git is reaped.
Watched Watch(pid_t pid, int out_fd, int err_fd, const GitInvocation& inv, GitResult& result) {
  Watched watched;
  const auto deadline = Clock::now() + inv.timeout;
  bool& flooded = watched.flooded;
  bool& timed_out = watched.timed_out;
  int& status = watched.status;
  bool exited = false;
  std::array<char, 65536> buf{};
  bool out_open = true, err_open = true;
  std::int64_t exit_poll_ms = 1;
  while (out_open || err_open || !exited) {
    if (!exited) {
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) exited = true;
      if (exited && !out_open && !err_open) break;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    std::int64_t wait_ms = std::min<std::int64_t>(left.count(), 1 << 30);
    if (!exited) {
      // With both pipes closed git is exiting: look again after 1, 2, 4 ... ms (at most 50), not
      // 50 ms at once, which every git call cagent makes (the git identity at each launch) paid.
      const bool piped = out_open || err_open;
      wait_ms = std::min<std::int64_t>(wait_ms, piped ? 50 : exit_poll_ms);
      if (!piped) exit_poll_ms = std::min<std::int64_t>(exit_poll_ms * 2, 50);
    }
    struct pollfd fds[2] = {{out_open ? out_fd : -1, POLLIN, 0},
                            {err_open ? err_fd : -1, POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(wait_ms));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      timed_out = true;  // cannot watch it any more: treat as a hang, kill and report
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      std::string& sink = i == 0 ? result.out : result.err;
      if (i == 1 && sink.size() > (1U << 20)) continue;  // keep reading, stop keeping
      sink.append(buf.data(), static_cast<size_t>(n));
      if (i == 0 && sink.size() > inv.max_output) {
        flooded = true;
        break;
      }
    }
    if (flooded) break;
  }
  // Whatever git started goes with it (a hung helper, a pager someone configured anyway). Before
  // git is reaped its zombie keeps the group id reserved; after, a member holding the pipes does.
  if (!exited || timed_out || flooded) ::kill(-pid, SIGKILL);
  while (!exited) {
    if (::waitpid(pid, &status, 0) == pid || errno != EINTR) exited = true;
  }
  return watched;
}

}  // namespace

Result<GitResult> RunGit(const GitInvocation& inv) {
  std::vector<std::string> argv = {"git"};
  for (auto& opt : HardeningOptions()) argv.push_back(std::move(opt));
  if (!inv.git_dir.empty()) argv.push_back("--git-dir=" + inv.git_dir);
  if (!inv.work_tree.empty()) argv.push_back("--work-tree=" + inv.work_tree);
  argv.insert(argv.end(), inv.args.begin(), inv.args.end());

  std::vector<std::string> env = GitEnvironment(inv.home);
  if (!inv.index_file.empty()) env.push_back("GIT_INDEX_FILE=" + inv.index_file);
  const std::string path = CallerPath();
  auto git_path = FindGit(path);
  if (!git_path) return git_path.error();

  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  cenv.reserve(env.size() + 1);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  const std::string cwd = inv.cwd.empty() ? "/" : inv.cwd;

  // Every fd the child dup2()s from is above 2, so no dup2 overwrites a later one's source.
  int out_pipe[2], err_pipe[2], exec_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  UniqueFd out_r(out_pipe[0]), out_w(AboveStdio(out_pipe[1]));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  UniqueFd err_r(err_pipe[0]), err_w(AboveStdio(err_pipe[1]));
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  UniqueFd exec_r(exec_pipe[0]), exec_w(exec_pipe[1]);
  UniqueFd null_in(AboveStdio(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
  if (!out_w.valid() || !err_w.valid() || !null_in.valid()) return ErrnoError("prepare git's fds");

  ChildPlan plan;
  plan.path = git_path->c_str();
  plan.argv = cargv.data();
  plan.envp = cenv.data();
  plan.cwd = cwd.c_str();
  plan.fds[0] = null_in.get();
  plan.fds[1] = out_w.get();
  plan.fds[2] = err_w.get();
  plan.exec_fd = exec_w.get();
  plan.parent = ::getpid();
  SetLimits(plan, inv);

  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork (to run git)");
  if (pid == 0) ChildExec(plan);  // never returns
  // Both sides set the group, so a kill(-pid) right after fork cannot miss the child.
  (void)::setpgid(pid, pid);
  out_w.Reset();
  err_w.Reset();
  exec_w.Reset();
  null_in.Reset();

  // The child writes {step, errno} when it could not exec; EOF means execve succeeded.
  int failure[2] = {0, 0};
  ssize_t got = 0;
  do {
    got = ::read(exec_r.get(), failure, sizeof(failure));
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof(failure))) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    static constexpr std::array<const char*, 4> kSteps = {"set up", "set a limit on", "chdir for",
                                                          "execute"};
    const std::string step = kSteps[static_cast<std::size_t>(failure[0]) % kSteps.size()];
    Error e = ErrnoError(step + " git (" + *git_path + ", in " + cwd + ")", failure[1]);
    if (failure[0] == 2) e.detail = "the working directory is missing or not accessible";
    return e;
  }

  GitResult result;
  const Watched watched = Watch(pid, out_r.get(), err_r.get(), inv, result);
  const bool timed_out = watched.timed_out, flooded = watched.flooded;
  const int status = watched.status;
  if (timed_out) {
    return PlainError(JoinArgs(inv.args),
                      "timed out after " + std::to_string(inv.timeout.count() / 1000) + " s");
  }
  if (flooded) {
    return PlainError(JoinArgs(inv.args),
                      "produced more than " + std::to_string(inv.max_output) + " bytes of output");
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    result.err +=
        std::string(result.err.empty() || result.err.back() == '\n' ? "" : "\n") +
        "git was killed by signal " + std::to_string(sig) +
        (sig == SIGXCPU || sig == SIGKILL
             ? " (its CPU time limit of " + std::to_string(inv.max_cpu_seconds) + " s, or killed)"
         : sig == SIGXFSZ
             ? " (its file size limit of " + std::to_string(inv.max_file_size >> 20) + " MiB)"
             : std::string());
  }
  return result;
}

Result<std::string> GitOutput(const GitInvocation& inv) {
  auto r = RunGit(inv);
  if (!r) return r.error();
  if (r->exit_code != 0) {
    std::string err = r->err;
    while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
    if (err.size() > 600) err = err.substr(0, 600) + "...";
    return PlainError(JoinArgs(inv.args),
                      "exit " + std::to_string(r->exit_code) + (err.empty() ? "" : ": " + err));
  }
  return std::move(r->out);
}

}  // namespace cagent::launcher
