#include "launcher/profile_spec.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>

namespace cagent::launcher {
namespace {

using policy::Access;
using policy::Limit;
using policy::MountMode;
using policy::PathBase;
using policy::Verdict;

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Walks a tree (no symlinks followed) and applies deny globs to what exists.
class GlobWalker {
 public:
  enum class Kind : std::uint8_t { kDir, kLink, kOther };

  // Applies the deny rules written relative to `base` (the workspace, the home directory, or "/"
  // for absolute globs) whose matches lie under base_dir/start_rel.
  GlobWalker(std::vector<const policy::PathRule*> rules, std::string base_dir, LaunchSpec& spec,
             std::vector<std::string>& notes, std::size_t& entries)
      : base_dir_(std::move(base_dir)), spec_(spec), notes_(notes), rules_(std::move(rules)),
        entries_(entries) {}

  Status Run(const std::string& start_rel) {
    if (rules_.empty()) return Ok{};
    std::string start = start_rel.empty() ? base_dir_ : Join(base_dir_, start_rel);
    if (!start_rel.empty()) {
      // The starting point itself may match ("~/.ssh" for "~/.ssh/**").
      struct stat st {};
      if (::lstat(start.c_str(), &st) != 0) return Ok{};
      bool read_only = false;
      if (Apply(start, start_rel, S_ISLNK(st.st_mode), false, &read_only) || !S_ISDIR(st.st_mode)) {
        return Ok{};
      }
      return Walk(start, start_rel, read_only);
    }
    return Walk(start, start_rel, false);
  }

 private:
  static std::string Join(const std::string& dir, const std::string& rel) {
    return dir == "/" ? "/" + rel : dir + "/" + rel;
  }

  const std::string base_dir_;
  LaunchSpec& spec_;
  std::vector<std::string>& notes_;
  std::vector<const policy::PathRule*> rules_;
  std::size_t& entries_;

  // Hides or write-protects `abs` if a rule matches; true when nothing below needs visiting.
  bool Apply(const std::string& abs, const std::string& rel, bool is_link, bool under_read_only,
             bool* made_read_only) {
    int m = Match(abs, rel);
    // Below a tree already bound read-only, write rules add nothing; only hiding does.
    if (m == 1 && under_read_only && !is_link) m = 0;
    if (m == 0) return false;
    if (is_link) {
      // A mount cannot cover a symlink itself; cover what it points at, which is what reading
      // through it would reveal (a link to a file the view does not show reveals nothing).
      char* real = ::realpath(abs.c_str(), nullptr);
      if (real == nullptr) return true;
      std::string target = real;
      std::free(real);
      (m == 2 ? spec_.hidden_paths : spec_.read_only_paths).push_back(target);
      notes_.push_back(std::string(m == 2 ? "hidden " : "read-only ") + target + " (target of " +
                       rel + ", deny rule)");
      return true;
    }
    if (m == 2) {
      spec_.hidden_paths.push_back(abs);
      notes_.push_back("hidden " + rel + " (deny rule)");
      return true;  // nothing below a hidden path is visible
    }
    spec_.read_only_paths.push_back(abs);
    notes_.push_back("read-only " + rel + " (deny write rule)");
    if (made_read_only != nullptr) *made_read_only = true;
    return false;  // a read-only tree may still hold files that must be hidden
  }

  // The strongest deny for the entry at `abs` (`rel` below the walk's base): 2 = read and write
  // (hide), 1 = write (read-only), 0 = none. Absolute globs match the absolute path.
  int Match(std::string_view abs, std::string_view rel) const {
    int best = 0;
    for (const auto* r : rules_) {
      if (!r->glob.Match(r->base == PathBase::kAbsolute ? abs : rel)) continue;
      best = std::max(best, r->access == Access::kWrite ? 1 : 2);
    }
    return best;
  }

  Status Walk(const std::string& dir_abs, const std::string& dir_rel, bool under_read_only) {
    DIR* d = ::opendir(dir_abs.c_str());
    if (d == nullptr) {
      // An unreadable directory cannot hold anything the sandbox could read either.
      if (errno == EACCES) return Ok{};
      return ErrnoError("open directory '" + dir_abs + "'");
    }
    std::vector<std::pair<std::string, Kind>> children;
    while (dirent* e = ::readdir(d)) {
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      if (++entries_ > kMaxWorkspaceEntries) {
        ::closedir(d);
        return PlainError("the workspace has more than " + std::to_string(kMaxWorkspaceEntries) +
                              " entries",
                          "cagent cannot apply the profile's deny globs to all of them; use a "
                          "smaller workspace");
      }
      Kind kind = e->d_type == DT_DIR ? Kind::kDir : e->d_type == DT_LNK ? Kind::kLink : Kind::kOther;
      if (e->d_type == DT_UNKNOWN) {
        struct stat st {};
        std::string p = dir_abs + "/" + std::string(name);
        if (::lstat(p.c_str(), &st) == 0) {
          kind = S_ISDIR(st.st_mode) ? Kind::kDir : S_ISLNK(st.st_mode) ? Kind::kLink : Kind::kOther;
        }
      }
      children.emplace_back(std::string(name), kind);
    }
    ::closedir(d);
    std::sort(children.begin(), children.end());
    for (const auto& [name, type] : children) {
      std::string rel = dir_rel.empty() ? name : dir_rel + "/" + name;
      std::string abs = Join(dir_abs, name);
      bool read_only = false;
      if (Apply(abs, rel, type == Kind::kLink, under_read_only, &read_only)) continue;
      if (type == Kind::kDir) {
        if (auto s = Walk(abs, rel, under_read_only || read_only); !s) return s;
      }
    }
    return Ok{};
  }
};

// Deny rules for the workspace walk the whole workspace; rules for the home directory or absolute
// paths walk only from their glob's literal prefix ("~/.ssh/**" walks ~/.ssh), and must have one:
// a glob like "/**/id_rsa" would mean walking the host.
Status ApplyDenyGlobs(const policy::Policy& p, const std::string& workspace,
                      const std::string& home, LaunchSpec& spec, std::vector<std::string>& notes) {
  std::size_t entries = 0;
  std::vector<const policy::PathRule*> ws_rules;
  for (const auto& r : p.path_rules) {
    if (r.verdict != Verdict::kDeny) continue;
    if (r.base == PathBase::kWorkspace) {
      ws_rules.push_back(&r);
      continue;
    }
    if (r.base == PathBase::kHome && home.empty()) continue;
    std::string base_dir = r.base == PathBase::kHome ? home : "/";
    std::string prefix = r.glob.LiteralPrefix();
    if (r.base == PathBase::kAbsolute) {
      while (prefix.starts_with('/')) prefix.erase(0, 1);
    }
    if (prefix.empty()) {
      return PlainError("the rule 'deny " + r.text + "' (" + p.Where(r.loc) +
                            ") has no fixed directory to start from",
                        "outside the workspace, name a directory before any wildcard, e.g. "
                        "~/.config/**/token");
    }
    std::vector<const policy::PathRule*> one{&r};
    // Absolute globs walk with "/" as the base; Match() puts the leading '/' back.
    GlobWalker walker(std::move(one), base_dir, spec, notes, entries);
    if (auto s = walker.Run(prefix); !s) return s;
  }
  return GlobWalker(std::move(ws_rules), workspace, spec, notes, entries).Run("");
}

bool Matches(const std::vector<policy::EnvPattern>& patterns, std::string_view name) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const policy::EnvPattern& p) { return p.name.Match(name); });
}

}  // namespace

std::vector<std::string> CallerEnviron() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

std::string CallerHome() {
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/') return h;
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr) {
    return pw->pw_dir;
  }
  return {};
}

std::string ExpandHomeInValue(const std::string& value, const std::string& home) {
  if (home.empty()) return value;
  std::string out;
  std::size_t start = 0;
  while (true) {
    std::size_t end = value.find(':', start);
    std::string elem = value.substr(start, end == std::string::npos ? end : end - start);
    if (elem == "~") {
      elem = home;
    } else if (elem.starts_with("~/")) {
      elem = home + elem.substr(1);
    }
    out += elem;
    if (end == std::string::npos) break;
    out += ':';
    start = end + 1;
  }
  return out;
}

Result<ProfileLaunch> SpecFromPolicy(const policy::Policy& p, const std::string& workspace,
                                     std::vector<std::string> argv, const ProfileContext& ctx) {
  ProfileLaunch out;
  // Start from the launcher's defaults for what profiles do not describe (HOME, TMPDIR, /tmp and
  // HOME sizes, hostname), then replace the view, environment, network and limits.
  out.spec = DefaultLaunchSpec(workspace, std::move(argv));
  LaunchSpec& spec = out.spec;
  spec.read_only_paths.clear();
  // The launcher's hidden host secrets (/etc/shadow, /etc/ssh, ...) stay hidden whatever the
  // profile mounts; the engine's built-in views say the same.
  spec.env_pass.clear();
  spec.workspace_writable = p.workspace_writable.value;

  for (const auto& m : p.mounts) {
    std::string path = m.path.Resolve(workspace, ctx.home);
    if (path.empty()) {
      out.notes.push_back("skipped " + m.path.Text() + ": no home directory");
      continue;
    }
    if (path == workspace) continue;  // the checker refuses this; never remount the workspace
    if (!Exists(path)) {
      if (m.mode != MountMode::kHidden) out.notes.push_back("skipped " + m.path.Text() + ": absent");
      continue;
    }
    switch (m.mode) {
      case MountMode::kReadOnly:
        spec.read_only_paths.push_back(path);
        break;
      case MountMode::kReadWrite:
        spec.read_write_paths.push_back(path);
        break;
      case MountMode::kHidden:
        spec.hidden_paths.push_back(path);
        break;
    }
  }
  if (auto s = ApplyDenyGlobs(p, workspace, ctx.home, spec, out.notes); !s) {
    return std::move(s.error()).Context("apply the profile's deny rules");
  }
  // Mounts below a hidden tree would make part of it visible again: hidden wins (the engine judges
  // the same way).
  auto under_hidden = [&](const std::string& path) {
    return std::any_of(spec.hidden_paths.begin(), spec.hidden_paths.end(),
                       [&](const std::string& h) {
                         return path.size() > h.size() && path.starts_with(h) &&
                                path[h.size()] == '/';
                       });
  };
  for (auto* list : {&spec.read_only_paths, &spec.read_write_paths}) {
    std::erase_if(*list, [&](const std::string& path) {
      if (!under_hidden(path)) return false;
      out.notes.push_back("skipped " + path + ": inside a hidden path");
      return true;
    });
  }

  spec.network = p.network.value == policy::NetworkMode::kLoopback ? NetworkMode::kLoopback
                                                                   : NetworkMode::kNone;

  // Environment: the profile's `set` over the launcher's defaults; `pass` patterns matched against
  // the caller's environment; `scrub` removes names even when a pattern passes them.
  for (const auto& e : p.env_set) {
    std::string value = ExpandHomeInValue(e.value, ctx.home);
    auto it = std::find_if(spec.env_set.begin(), spec.env_set.end(),
                           [&](const EnvVar& v) { return v.name == e.name; });
    if (it != spec.env_set.end()) {
      it->value = value;
    } else {
      spec.env_set.push_back({e.name, value});
    }
  }
  std::set<std::string> passed;
  for (const auto& kv : ctx.environ) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = kv.substr(0, eq);
    if (!Matches(p.env_pass, name) || Matches(p.env_scrub, name)) continue;
    bool set_by_profile = std::any_of(p.env_set.begin(), p.env_set.end(),
                                      [&](const policy::EnvSetting& s) { return s.name == name; });
    if (set_by_profile) continue;
    // A passed variable replaces a launcher default of the same name (e.g. PATH).
    std::erase_if(spec.env_set, [&](const EnvVar& v) { return v.name == name; });
    passed.insert(name);
  }
  spec.env_pass.assign(passed.begin(), passed.end());
  std::erase_if(spec.env_set, [&](const EnvVar& v) {
    return Matches(p.env_scrub, v.name) &&
           std::none_of(p.env_set.begin(), p.env_set.end(),
                        [&](const policy::EnvSetting& s) { return s.name == v.name; });
  });

  // Limits. Unset or unlimited keep the launcher's defaults (audit reports unbounded limits).
  auto bounded = [&](Limit l) -> const policy::LimitValue* {
    const auto& v = p.limit(l);
    return v.bounded() ? &v : nullptr;
  };
  if (const auto* v = bounded(Limit::kCpuTime)) spec.limits.cpu_seconds = (v->value + 999) / 1000;
  if (const auto* v = bounded(Limit::kFileSize)) spec.limits.file_size_bytes = v->value;
  if (const auto* v = bounded(Limit::kOpenFiles)) spec.limits.open_files = v->value;
  if (const auto* v = bounded(Limit::kProcesses)) {
    spec.limits.processes = v->value;
    // RLIMIT_NPROC does not bind a root caller; pids.max does, where a cgroup is delegated. It is
    // asked for when the profile requires it (then a missing cgroup refuses the run) or accepts
    // the cgroup as best-effort (then a missing one is a reported downgrade); otherwise the
    // rlimit alone bounds processes, so a machine without delegation can still run the profile.
    if (p.Requires(policy::Requirement::kPidsLimit) ||
        p.IsBestEffort(policy::Requirement::kCgroup)) {
      spec.cgroup_limits.pids_max = v->value;
    }
  }
  if (const auto* v = bounded(Limit::kMemory)) {
    spec.cgroup_limits.memory_max = v->value;
    spec.cgroup_limits.swap_max = 0;
  }
  if (const auto* v = bounded(Limit::kWallTime)) {
    spec.timeout = std::chrono::milliseconds(v->value);
  }

  if (p.IsBestEffort(policy::Requirement::kLandlock)) spec.best_effort.Add(Layer::kLandlock);
  if (p.IsBestEffort(policy::Requirement::kCgroup)) spec.best_effort.Add(Layer::kCgroupLimits);
  if (p.Requires(policy::Requirement::kCgroup) && spec.cgroup_limits.Controllers().empty()) {
    // `require cgroup` without limits still means "run inside a delegated cgroup"; ask for pids,
    // the cheapest controller, so the launch fails closed without one.
    spec.cgroup_limits.pids_max = spec.limits.processes.value_or(4096);
  }
  return out;
}

}  // namespace cagent::launcher
