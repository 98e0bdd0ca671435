#include "launcher/run/git_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <optional>
#include <string_view>

#include "common/terminal_text.h"
#include "common/unique_fd.h"
#include "launcher/profile_spec.h"
#include "launcher/run/git.h"

namespace cagent::launcher::run {
namespace {

std::optional<std::string> Lookup(const std::vector<std::string>& env, std::string_view name) {
  for (const std::string& kv : env) {
    if (kv.size() > name.size() && kv.starts_with(name) && kv[name.size()] == '=') {
      return kv.substr(name.size() + 1);
    }
  }
  return std::nullopt;
}

// git's reading of a boolean environment variable, enough for GIT_CONFIG_NOSYSTEM.
bool Truthy(const std::optional<std::string>& v) {
  return v.has_value() && !v->empty() && *v != "0" && *v != "false" && *v != "no" && *v != "off";
}

// The files git reads for the system and global scopes, in its order.
std::vector<std::string> ConfigFiles(const std::vector<std::string>& env, const std::string& home) {
  std::vector<std::string> files;
  if (!Truthy(Lookup(env, "GIT_CONFIG_NOSYSTEM"))) {
    const auto sys = Lookup(env, "GIT_CONFIG_SYSTEM");
    files.push_back(sys.has_value() ? *sys : "/etc/gitconfig");
  }
  if (const auto global = Lookup(env, "GIT_CONFIG_GLOBAL"); global.has_value()) {
    files.push_back(*global);
    return files;
  }
  const auto xdg = Lookup(env, "XDG_CONFIG_HOME");
  if (xdg.has_value() && !xdg->empty()) {
    files.push_back(*xdg + "/git/config");
  } else if (!home.empty()) {
    files.push_back(home + "/.config/git/config");
  }
  if (!home.empty()) files.push_back(home + "/.gitconfig");
  return files;
}

std::string Shown(std::string_view text) { return TerminalSafe(text, TerminalLines::kOne); }

// Whether configuration file `path` can hold an identity: it mentions a `user` section or an
// include (git's section names are case-insensitive). A file that cannot is not handed to git,
// which saves a git process per file on every launch. Not a regular file (a FIFO would block git
// until its timeout): no, with a note. Larger than 1 MiB: yes, git reads it.
bool MayHoldIdentity(const std::string& path, std::vector<std::string>& notes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) return false;  // absent or unreadable: git would skip it too
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return false;
  if (!S_ISREG(st.st_mode)) {
    notes.push_back("git identity: skipped " + Shown(path) + ": not a regular file");
    return false;
  }
  constexpr std::size_t kMaxScan = 1 << 20;
  if (static_cast<std::size_t>(st.st_size) > kMaxScan) return true;
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text.find("user") != std::string::npos || text.find("include") != std::string::npos;
}

}  // namespace

std::vector<EnvVar> GitIdentity::Env() const {
  std::vector<EnvVar> out;
  if (!name.empty()) {
    out.push_back({"GIT_AUTHOR_NAME", name});
    out.push_back({"GIT_COMMITTER_NAME", name});
  }
  if (!email.empty()) {
    out.push_back({"GIT_AUTHOR_EMAIL", email});
    out.push_back({"GIT_COMMITTER_EMAIL", email});
  }
  return out;
}

std::string GitIdentityProblem(const std::string& value) {
  if (value.empty()) return "it is empty";
  if (value.size() > kMaxGitIdentityBytes) {
    return "it is longer than " + std::to_string(kMaxGitIdentityBytes) + " bytes";
  }
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return "it holds a control character";
    if (c == '<' || c == '>') return "it holds '<' or '>'";
  }
  return {};
}

GitIdentity ReadGitIdentity(const std::vector<std::string>& env, const std::string& home) {
  GitIdentity id;
  for (const std::string& file : ConfigFiles(env, home)) {
    if (file.empty() || file[0] != '/') continue;  // git resolves no relative path here either
    if (!MayHoldIdentity(file, id.notes)) continue;
    GitInvocation inv;
    // --file: this file (and what it includes) only, never a repository's config; cwd "/" and no
    // --git-dir, so there is no repository to discover and includeIf gitdir: matches nothing.
    inv.args = {
        "config", "--file", file, "--includes", "-z", "--get-regexp", "^user\\.(name|email)$"};
    inv.home = home;  // so that include.path = ~/... means the caller's file
    inv.max_output = 64 << 10;
    inv.timeout = std::chrono::milliseconds(5000);
    inv.max_memory = 256ULL << 20;
    inv.max_cpu_seconds = 5;
    inv.max_file_size = 1 << 20;
    auto r = RunGit(inv);
    if (!r) {
      id.notes.push_back("git identity: could not read " + Shown(file) + ": " +
                         r.error().Message());
      continue;
    }
    if (r->exit_code == 1) continue;  // neither key set in this file
    if (r->exit_code != 0) {
      id.notes.push_back("git identity: git could not read " + Shown(file) + " (exit " +
                         std::to_string(r->exit_code) + ")");
      continue;
    }
    // -z --get-regexp: "key\nvalue\0" per entry; the last entry of a key wins, as for --get.
    for (const std::string& entry : SplitNul(r->out)) {
      const std::size_t nl = entry.find('\n');
      if (nl == std::string::npos) continue;
      const std::string key = entry.substr(0, nl);
      const std::string value = entry.substr(nl + 1);
      std::string* slot = key == "user.name" ? &id.name : key == "user.email" ? &id.email : nullptr;
      if (slot == nullptr) continue;
      if (const std::string why = GitIdentityProblem(value); !why.empty()) {
        // git would use this value; pass none rather than an earlier file's.
        id.notes.push_back("git identity: skipped " + key + " from " + Shown(file) + ": " + why);
        slot->clear();
        continue;
      }
      *slot = value;
    }
  }
  return id;
}

const GitIdentity& CallerGitIdentity() {
  static const GitIdentity kIdentity = ReadGitIdentity(CallerEnviron(), CallerHome());
  return kIdentity;
}

}  // namespace cagent::launcher::run
