#include "launcher/sandbox/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>

#include "common/text.h"

namespace cagent::launcher {
namespace {

constexpr std::array<CgroupController, kCgroupControllerCount> kAllControllers = {
    CgroupController::kMemory, CgroupController::kPids, CgroupController::kCpu};

// The kernel's defaults and bounds for cpu.max (kernel/sched/core.c: the period must be 1 ms to
// 1 s, the quota at least 1 ms).
constexpr std::uint64_t kDefaultCpuPeriodUs = 100000;
constexpr std::uint64_t kMinCpuUs = 1000;
constexpr std::uint64_t kMaxCpuPeriodUs = 1000000;

constexpr const char* kWhatToDo =
    "run under systemd-run --user --scope -p Delegate=yes, set CAGENT_CGROUP to a delegated "
    "cgroup";

std::string Join(const std::string& dir, std::string_view name) {
  std::string out = dir;
  if (out.empty() || out.back() != '/') out += '/';
  out += name;
  return out;
}

Result<std::string> ReadFd(int fd, const std::string& what) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("read " + what);
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

Result<std::string> ReadFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("open " + path);
  return ReadFd(fd.get(), path);
}

Result<std::string> ReadFileAt(int dir_fd, const std::string& dir, const char* name) {
  UniqueFd fd(::openat(dir_fd, name, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("open " + Join(dir, name));
  return ReadFd(fd.get(), Join(dir, name));
}

// Writes `value` with one write(2): cgroupfs parses each write on its own. O_TRUNC is accepted by
// cgroupfs (it is what `echo 1 > file` does) and keeps the test stand-in's regular files exact.
// Never O_CREAT: on cgroupfs the kernel creates interface files, and a missing one means the
// controller is not enabled, which must be an error, not a new regular file.
Status WriteFileAt(int dir_fd, const std::string& dir, const char* name, const std::string& value) {
  const std::string path = Join(dir, name);
  UniqueFd fd(::openat(dir_fd, name, O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("open " + path);
  ssize_t n;
  do {
    n = ::write(fd.get(), value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoError("write \"" + value + "\" to " + path);
  if (static_cast<size_t>(n) != value.size()) return ErrnoError("write " + path, EIO);
  return Ok{};
}

Status WriteFile(const std::string& path, const std::string& value) {
  const size_t slash = path.rfind('/');
  const std::string dir = path.substr(0, slash);
  const std::string name = path.substr(slash + 1);
  UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd.valid()) return ErrnoError("open " + dir);
  return WriteFileAt(dir_fd.get(), dir, name.c_str(), value);
}

std::optional<std::uint64_t> ParseU64(std::string_view s) {
  s = TrimSpace(s);
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// The value of `key` in a flat-keyed file ("oom 0\noom_kill 2\n").
std::optional<std::uint64_t> KeyedValue(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    const size_t space = line.find(' ');
    if (space != std::string_view::npos && line.substr(0, space) == key) {
      return ParseU64(line.substr(space + 1));
    }
  }
  return std::nullopt;
}

std::vector<pid_t> ParsePids(std::string_view text) {
  std::vector<pid_t> pids;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::optional<std::uint64_t> v = ParseU64(text.substr(0, eol));
    if (v && *v > 0 && *v <= static_cast<std::uint64_t>(INT_MAX)) {
      pids.push_back(static_cast<pid_t>(*v));
    }
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
  }
  return pids;
}

// "max" for kCgroupMax, else decimal: the kernel's format for every limit file used here.
std::string FormatLimit(std::uint64_t v) { return v == kCgroupMax ? "max" : std::to_string(v); }

// Undoes mountinfo's octal escapes (\040 space, \011 tab, \012 newline, \134 backslash).
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string_view oct = s.substr(i + 1, 3);
      if (std::all_of(oct.begin(), oct.end(), [](char c) { return c >= '0' && c <= '7'; })) {
        out += static_cast<char>((oct[0] - '0') * 64 + (oct[1] - '0') * 8 + (oct[2] - '0'));
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(sep, start);
    const std::string_view part =
        s.substr(start, end == std::string_view::npos ? s.npos : end - start);
    if (!part.empty()) out.push_back(part);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

// Whether `path` is `dir` or below it (component-wise).
bool IsUnder(const std::string& path, const std::string& dir) {
  if (dir == "/") return !path.empty() && path[0] == '/';
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         path[dir.size()] == '/');
}

// The deepest directory containing both absolute paths.
std::string CommonAncestor(const std::string& a, const std::string& b) {
  const std::vector<std::string_view> pa = Split(a, '/');
  const std::vector<std::string_view> pb = Split(b, '/');
  std::string out;
  for (size_t i = 0; i < pa.size() && i < pb.size() && pa[i] == pb[i]; ++i) {
    out += '/';
    out += pa[i];
  }
  return out.empty() ? "/" : out;
}

// The directory of cgroup `path` (as in /proc/self/cgroup) under one of the cgroup2 mounts.
std::optional<std::pair<std::string, std::string>> ResolveCgroupDir(const CgroupMounts& mounts,
                                                                    const std::string& path) {
  for (const CgroupMounts::V2& m : mounts.v2) {
    if (!IsUnder(path, m.root)) continue;
    const std::string rest = m.root == "/" ? path : path.substr(m.root.size());
    std::string dir = m.mount_point;
    if (rest != "/" && !rest.empty()) dir = Join(m.mount_point, rest.substr(1));
    return std::make_pair(m.mount_point, dir);
  }
  return std::nullopt;
}

std::string StripTrailingSlashes(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string PidList(const std::vector<pid_t>& pids) {
  std::string out;
  const size_t shown = std::min<size_t>(pids.size(), 5);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + std::to_string(pids[i]);
  if (pids.size() > shown) out += ", ...";
  return out;
}

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace

// ---- ControllerSet ----

std::string_view CgroupControllerName(CgroupController controller) {
  switch (controller) {
    case CgroupController::kMemory:
      return "memory";
    case CgroupController::kPids:
      return "pids";
    case CgroupController::kCpu:
      return "cpu";
  }
  return "unknown";
}

ControllerSet ControllerSet::Parse(std::string_view list) {
  ControllerSet out;
  for (std::string_view word : Split(TrimSpace(list), ' ')) {
    word = TrimSpace(word);
    for (CgroupController c : kAllControllers) {
      if (word == CgroupControllerName(c)) out.Add(c);
    }
  }
  return out;
}

std::string ControllerSet::ToString() const {
  std::string out;
  for (CgroupController c : kAllControllers) {
    if (!Has(c)) continue;
    if (!out.empty()) out += ' ';
    out += CgroupControllerName(c);
  }
  return out;
}

std::string ControllerSet::ToProse() const {
  std::vector<std::string_view> names;
  for (CgroupController c : kAllControllers) {
    if (Has(c)) names.push_back(CgroupControllerName(c));
  }
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

std::string ControllerSet::EnableLine() const {
  std::string out;
  for (CgroupController c : kAllControllers) {
    if (!Has(c)) continue;
    if (!out.empty()) out += ' ';
    out += '+';
    out += CgroupControllerName(c);
  }
  return out;
}

// ---- CgroupLimits ----

ControllerSet CgroupLimits::Controllers() const {
  ControllerSet out;
  if (memory_max || swap_max) out.Add(CgroupController::kMemory);
  if (pids_max) out.Add(CgroupController::kPids);
  if (cpu_quota_us || cpu_period_us) out.Add(CgroupController::kCpu);
  return out;
}

CgroupLimits CgroupLimits::RestrictedTo(ControllerSet keep) const {
  CgroupLimits out = *this;
  if (!keep.Has(CgroupController::kMemory)) out.memory_max = out.swap_max = std::nullopt;
  if (!keep.Has(CgroupController::kPids)) out.pids_max = std::nullopt;
  if (!keep.Has(CgroupController::kCpu)) out.cpu_quota_us = out.cpu_period_us = std::nullopt;
  return out;
}

// ---- parsing ----

// mountinfo line (proc(5)):
//   36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//   id par dev root mount-point options [optional fields...] - fstype source super-options
CgroupMounts ParseCgroupMounts(std::string_view mountinfo) {
  CgroupMounts out;
  for (std::string_view line : Split(mountinfo, '\n')) {
    const size_t sep = line.find(" - ");
    if (sep == std::string_view::npos) continue;
    const std::vector<std::string_view> left = Split(line.substr(0, sep), ' ');
    const std::vector<std::string_view> right = Split(line.substr(sep + 3), ' ');
    if (left.size() < 5 || right.empty()) continue;
    if (right[0] == "cgroup2") {
      out.v2.push_back({Unescape(left[3]), Unescape(left[4])});
    } else if (right[0] == "cgroup" && right.size() >= 3) {
      for (std::string_view opt : Split(right[2], ',')) {
        for (CgroupController c : kAllControllers) {
          if (opt == CgroupControllerName(c)) out.v1.emplace_back(c, Unescape(left[4]));
        }
      }
    }
  }
  return out;
}

std::optional<std::string> ParseUnifiedCgroupPath(std::string_view proc_cgroup) {
  for (std::string_view line : Split(proc_cgroup, '\n')) {
    if (line.substr(0, 3) == "0::") {
      const std::string_view path = TrimSpace(line.substr(3));
      if (!path.empty() && path[0] == '/') return std::string(path);
    }
  }
  return std::nullopt;
}

// ---- discovery ----

CgroupEnv CgroupEnv::FromProcess() {
  CgroupEnv env;
  if (const char* dir = std::getenv("CAGENT_CGROUP"); dir != nullptr) env.override_dir = dir;
  return env;
}

namespace {

// The base cgroup sandboxes are made under: CAGENT_CGROUP (inside the cgroup2 mount), or cagent's
// own cgroup (its parent once cagent stepped aside into the supervisor leaf). The reason it is
// unusable, or nullopt.
std::optional<std::string> ChooseBase(CgroupDiscovery& d, const CgroupEnv& env,
                                      const CgroupMounts& mounts) {
  if (!env.override_dir.empty()) {
    d.from_override = true;
    char resolved[PATH_MAX];
    if (::realpath(env.override_dir.c_str(), resolved) == nullptr) {
      return std::optional<std::string>(ErrnoError("CAGENT_CGROUP=" + env.override_dir).Message());
    }
    const std::string base = StripTrailingSlashes(resolved);
    const auto mount = std::find_if(mounts.v2.begin(), mounts.v2.end(),
                                    [&](const auto& m) { return IsUnder(base, m.mount_point); });
    if (mount == mounts.v2.end()) {
      return std::optional<std::string>("CAGENT_CGROUP=" + env.override_dir +
                                        " is not inside the cgroup2 mount at " +
                                        mounts.v2.front().mount_point);
    }
    d.mount_point = mount->mount_point;
    d.base = base;
  } else {
    if (d.own_dir.empty()) {
      return std::optional<std::string>(
          "cagent's cgroup v2 directory is unknown (no \"0::\" line in " + env.proc_cgroup_path +
          " under a cgroup2 mount)");
    }
    d.base = d.own_dir;
    // Once cagent has stepped aside into its supervisor leaf (an earlier Create in this process),
    // its own cgroup is that leaf; the base is still the leaf's parent.
    const std::string leaf_suffix = "/" + std::string(SandboxCgroup::kSupervisorLeaf);
    if (d.base.ends_with(leaf_suffix) && d.base.size() > leaf_suffix.size()) {
      d.base.resize(d.base.size() - leaf_suffix.size());
    }
  }

  return std::nullopt;
}

// Whether this user may make and move into cgroups below the base: write access (what systemd's
// Delegate=yes or a chown grants), a common ancestor whose cgroup.procs it can write, and no
// other processes in the base when controllers must be enabled there. The reason, or nullopt.
std::optional<std::string> CheckDelegation(CgroupDiscovery& d, const CgroupEnv& env) {
  for (const std::string& path :
       {d.base, Join(d.base, "cgroup.procs"), Join(d.base, "cgroup.subtree_control")}) {
    if (::access(path.c_str(), W_OK) != 0) {
      return std::optional<std::string>(
          path + " is not writable by this user (the cgroup is not delegated to it)");
    }
  }
  // Delegation containment: Attach moves a child of cagent from cagent's cgroup into one below
  // the base, which needs write access to cgroup.procs of their common ancestor.
  if (d.own_dir.empty()) {
    return std::optional<std::string>("cagent's own cgroup is unknown (no \"0::\" line in " +
                                      env.proc_cgroup_path +
                                      "), so no process could be moved into " + d.base);
  }
  const std::string ancestor = CommonAncestor(d.own_dir, d.base);
  if (::access(Join(ancestor, "cgroup.procs").c_str(), W_OK) != 0) {
    return std::optional<std::string>(
        "cagent's cgroup " + d.own_dir + " and " + d.base + " meet at " + ancestor +
        ", whose cgroup.procs this user cannot write, so the kernel refuses to move "
        "processes between them: start cagent inside " +
        d.base + " (e.g. systemd-run --user --scope -p Delegate=yes)");
  }
  // No internal processes: a non-root cgroup with processes cannot enable controllers for its
  // children. cagent itself can step aside into the supervisor leaf; anyone else cannot be moved.
  if (!d.is_root && !d.delegated.Minus(d.enabled).empty()) {
    auto procs = ReadFile(Join(d.base, "cgroup.procs"));
    if (!procs) return std::optional<std::string>(procs.error().Message());
    std::vector<pid_t> others;
    for (pid_t pid : ParsePids(*procs)) {
      if (pid == d.self) {
        d.must_leave_base = true;
      } else {
        others.push_back(pid);
      }
    }
    if (!others.empty()) {
      d.must_leave_base = false;
      return std::optional<std::string>(
          d.base + " holds other processes (pid " + PidList(others) +
          "), and a cgroup with processes cannot give controllers to child cgroups "
          "(the \"no internal processes\" rule): run cagent in a cgroup of its own "
          "(systemd-run --user --scope -p Delegate=yes cagent ...) or set "
          "CAGENT_CGROUP to an empty delegated cgroup");
    }
  }

  return std::nullopt;
}

// Why each controller the base lacks is missing (not delegated, or bound to cgroup v1), and the
// discovery's reason in one line.
void ExplainMissing(CgroupDiscovery& d,
                    const std::array<std::string, kCgroupControllerCount>& v1_mount,
                    std::string_view controllers, const std::string& v1_note_missing) {
  const ControllerSet missing = ControllerSet::All().Minus(d.available);
  for (CgroupController c : kAllControllers) {
    if (!missing.Has(c)) continue;
    const std::string name(CgroupControllerName(c));
    const std::string& v1 = v1_mount[static_cast<size_t>(c)];
    std::string& why = d.why_not[static_cast<size_t>(c)];
    why = name;
    if (v1.empty()) {
      why += " is not in " + Join(d.base, "cgroup.controllers");
      why += " (not enabled in the parent's cgroup.subtree_control: not delegated)";
    } else {
      why += " is bound to cgroup v1 at " + v1;
    }
  }
  if (!missing.empty()) {
    const std::string_view listed = TrimSpace(controllers);
    d.reason = listed.empty()
                   ? "no controllers delegated to " + d.base + " (its cgroup.controllers is empty)"
                   : missing.ToProse() + " not delegated to " + d.base +
                         " (its cgroup.controllers lists: " + std::string(listed) + ")";
    d.reason += v1_note_missing;
  }
}

}  // namespace

CgroupDiscovery DiscoverCgroup(const CgroupEnv& env) {
  CgroupDiscovery d;
  d.hooks = env.hooks;
  d.self = env.self != 0 ? env.self : ::getpid();
  // Every early return leaves `available` empty and gives each controller the same reason.
  auto unusable = [&d](std::string why) {
    d.available = ControllerSet();
    for (std::string& w : d.why_not) w = why;
    d.reason = std::move(why);
    return d;
  };

  auto mountinfo = ReadFile(env.mountinfo_path);
  if (!mountinfo) return unusable("cannot read " + mountinfo.error().Message());
  const CgroupMounts mounts = ParseCgroupMounts(*mountinfo);
  // Hybrid and legacy layouts: name the controllers cgroup v1 holds, since v2 cannot have them.
  ControllerSet on_v1;
  std::array<std::string, kCgroupControllerCount> v1_mount;
  for (const auto& [c, mount_point] : mounts.v1) {
    on_v1.Add(c);
    v1_mount[static_cast<size_t>(c)] = mount_point;
  }
  auto v1_note = [&on_v1](ControllerSet missing) -> std::string {
    const ControllerSet bound = missing.Intersect(on_v1);
    if (bound.empty()) return "";
    return "; " + bound.ToProse() + (bound.size() > 1 ? " are" : " is") + " bound to cgroup v1";
  };
  if (mounts.v2.empty()) {
    return unusable("no cgroup2 filesystem is mounted" + v1_note(ControllerSet::All()));
  }

  if (auto text = ReadFile(env.proc_cgroup_path); text) {
    if (const auto path = ParseUnifiedCgroupPath(*text)) {
      if (const auto dir = ResolveCgroupDir(mounts, *path)) {
        d.mount_point = dir->first;
        d.own_dir = dir->second;
      }
    }
  }

  if (auto why = ChooseBase(d, env, mounts)) return unusable(std::move(*why));

  auto controllers = ReadFile(Join(d.base, "cgroup.controllers"));
  if (!controllers) {
    return unusable(d.base + " is not a cgroup v2 directory: " + controllers.error().Message());
  }
  auto subtree = ReadFile(Join(d.base, "cgroup.subtree_control"));
  if (!subtree) return unusable(subtree.error().Message());
  d.delegated = ControllerSet::Parse(*controllers);
  d.enabled = ControllerSet::Parse(*subtree);
  // The root cgroup is the one without cgroup.type (CFTYPE_NOT_ON_ROOT).
  d.is_root = ::access(Join(d.base, "cgroup.type").c_str(), F_OK) != 0 && errno == ENOENT;

  if (auto why = CheckDelegation(d, env)) return unusable(std::move(*why));

  d.available = d.delegated;
  ExplainMissing(d, v1_mount, *controllers, v1_note(ControllerSet::All().Minus(d.available)));
  return d;
}

// ---- decision ----

Result<CgroupReport> DecideCgroup(const CgroupDiscovery& discovery, ControllerSet wanted,
                                  ControllerSet required) {
  wanted = ControllerSet::Parse(wanted.ToString() + " " + required.ToString());
  CgroupReport report;
  report.path = discovery.base;
  report.available = !discovery.base.empty() && !discovery.available.empty();
  report.enforced = wanted.Intersect(discovery.available);
  const ControllerSet missing = wanted.Minus(discovery.available);

  // Why each missing controller is missing, said once when they share the reason.
  auto why = [&discovery](ControllerSet set) {
    std::vector<std::string> parts;
    for (CgroupController c : kAllControllers) {
      if (set.Has(c)) parts.push_back(discovery.WhyNot(c));
    }
    if (std::all_of(parts.begin(), parts.end(), [&](const auto& p) { return p == parts[0]; })) {
      return parts.empty() ? std::string() : parts[0];
    }
    std::string out;
    for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
    return out;
  };

  const ControllerSet refused = missing.Intersect(required);
  if (!refused.empty()) {
    std::string drop;
    for (CgroupController c : kAllControllers) {
      if (!refused.Has(c)) continue;
      if (!drop.empty()) drop += " and ";
      drop += "`require " + std::string(CgroupControllerName(c)) + "-limit`";
    }
    const bool several = refused.size() > 1;
    return PlainError("cgroup limits", "no delegated cgroup v2 with the " + refused.ToProse() +
                                           (several ? " controllers (" : " controller (") +
                                           why(refused) + "): " + kWhatToDo +
                                           ", or accept the downgrade with --best-effort "
                                           "cgroup (in a profile: drop " +
                                           drop + ")")
        .WithCode(Error::Code::kUnsupported);
  }
  report.degraded = missing;
  if (!missing.empty()) report.reason = missing.ToProse() + " not enforced: " + why(missing);
  return report;
}

// ---- SandboxCgroup ----

namespace {

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == SandboxCgroup::kSupervisorLeaf) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

Status CheckCpuValues(const CgroupLimits& limits) {
  const std::uint64_t period = limits.cpu_period_us.value_or(kDefaultCpuPeriodUs);
  if (period < kMinCpuUs || period > kMaxCpuPeriodUs) {
    return PlainError("cpu.max", "period " + std::to_string(period) +
                                     " us is outside the kernel's 1000..1000000 us")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (limits.cpu_quota_us && *limits.cpu_quota_us != kCgroupMax &&
      *limits.cpu_quota_us < kMinCpuUs) {
    return PlainError("cpu.max", "quota " + std::to_string(*limits.cpu_quota_us) +
                                     " us is below the kernel's minimum of 1000 us")
        .WithCode(Error::Code::kInvalidInput);
  }
  return Ok{};
}

// Moves cagent out of the base into the supervisor leaf, so the base holds no processes and may
// enable controllers for its children. Refuses when anyone else is in the base.
Status LeaveBase(const CgroupDiscovery& d) {
  auto procs = ReadFile(Join(d.base, "cgroup.procs"));
  if (!procs) return procs.error();
  const std::vector<pid_t> pids = ParsePids(*procs);
  if (pids.empty()) return Ok{};
  for (pid_t pid : pids) {
    if (pid != d.self) {
      return PlainError(d.base, "holds process " + std::to_string(pid) +
                                    ", so it cannot give controllers to child cgroups")
          .WithCode(Error::Code::kUnsupported);
    }
  }
  const std::string leaf = Join(d.base, SandboxCgroup::kSupervisorLeaf);
  if (::mkdir(leaf.c_str(), 0755) == 0) {
    if (d.hooks.after_mkdir) d.hooks.after_mkdir(leaf);
  } else if (errno != EEXIST) {
    return ErrnoError("mkdir " + leaf);
  }
  return WriteFile(Join(leaf, "cgroup.procs"), std::to_string(d.self))
      .Context("move cagent into " + leaf);
}

}  // namespace

Result<SandboxCgroup> SandboxCgroup::Create(const CgroupDiscovery& discovery,
                                            const std::string& name, const CgroupLimits& limits) {
  if (!ValidName(name)) {
    return PlainError("cgroup name " + Quote(name),
                      "must be 1 to 64 of [A-Za-z0-9_-] and not " + std::string(kSupervisorLeaf))
        .WithCode(Error::Code::kInvalidInput);
  }
  if (discovery.base.empty()) {
    return PlainError("cgroup", discovery.reason).WithCode(Error::Code::kUnsupported);
  }
  const ControllerSet needed = limits.Controllers();
  if (const ControllerSet missing = needed.Minus(discovery.available); !missing.empty()) {
    std::string why;
    for (CgroupController c : kAllControllers) {
      if (missing.Has(c)) why += (why.empty() ? "" : "; ") + discovery.WhyNot(c);
    }
    return PlainError("cgroup " + discovery.base, missing.ToProse() + " unavailable: " + why)
        .WithCode(Error::Code::kUnsupported);
  }
  if (auto s = CheckCpuValues(limits); !s) return s.error();

  // Enable what the limits need in the base's subtree_control, stepping out of the base first if
  // cagent is in it (no internal processes).
  if (!needed.empty()) {
    auto subtree = ReadFile(Join(discovery.base, "cgroup.subtree_control"));
    if (!subtree) return subtree.error();
    const ControllerSet to_enable = needed.Minus(ControllerSet::Parse(*subtree));
    if (!to_enable.empty()) {
      if (!discovery.is_root) {
        if (auto s = LeaveBase(discovery); !s) return std::move(s.error()).Context("cgroup");
      }
      if (auto s =
              WriteFile(Join(discovery.base, "cgroup.subtree_control"), to_enable.EnableLine());
          !s) {
        return std::move(s.error()).Context("enable " + to_enable.ToProse() + " controllers");
      }
    }
  }

  const std::string path = Join(discovery.base, name);
  if (::mkdir(path.c_str(), 0755) != 0) {
    Error e = ErrnoError("mkdir " + path);
    if (e.err == EEXIST) {
      e.detail = "another sandbox uses this name, or a crashed run left it: rmdir it";
    }
    return e;
  }
  if (discovery.hooks.after_mkdir) discovery.hooks.after_mkdir(path);
  UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) {
    Error e = ErrnoError("open " + path);
    if (discovery.hooks.before_rmdir) discovery.hooks.before_rmdir(path);
    ::rmdir(path.c_str());
    return e;
  }
  // From here on the object owns the directory: any failure below removes it.
  SandboxCgroup cgroup(path, std::move(dir), discovery.hooks);
  const int fd = cgroup.dir_fd();
  if (limits.memory_max) {
    if (auto s = WriteFileAt(fd, path, "memory.max", FormatLimit(*limits.memory_max)); !s) {
      return s.error();
    }
  }
  if (limits.swap_max) {
    if (auto s = WriteFileAt(fd, path, "memory.swap.max", FormatLimit(*limits.swap_max)); !s) {
      Error e = s.error();
      if (e.err == ENOENT) e.detail = "swap accounting is off on this kernel; drop the swap limit";
      return e;
    }
  }
  if (limits.pids_max) {
    if (auto s = WriteFileAt(fd, path, "pids.max", FormatLimit(*limits.pids_max)); !s) {
      return s.error();
    }
  }
  if (limits.cpu_quota_us || limits.cpu_period_us) {
    const std::string value = FormatLimit(limits.cpu_quota_us.value_or(kCgroupMax)) + " " +
                              std::to_string(limits.cpu_period_us.value_or(kDefaultCpuPeriodUs));
    if (auto s = WriteFileAt(fd, path, "cpu.max", value); !s) return s.error();
  }
  return cgroup;
}

SandboxCgroup::SandboxCgroup(SandboxCgroup&& other) noexcept
    : path_(std::exchange(other.path_, std::string())),
      dir_(std::move(other.dir_)),
      hooks_(std::move(other.hooks_)) {}

SandboxCgroup& SandboxCgroup::operator=(SandboxCgroup&& other) noexcept {
  if (this != &other) {
    (void)Remove();
    path_ = std::exchange(other.path_, std::string());
    dir_ = std::move(other.dir_);
    hooks_ = std::move(other.hooks_);
  }
  return *this;
}

SandboxCgroup::~SandboxCgroup() { (void)Remove(); }

Status SandboxCgroup::Attach(pid_t pid) const {
  return WriteFileAt(dir_.get(), path_, "cgroup.procs", std::to_string(pid))
      .Context("attach " + std::to_string(pid));
}

Status SandboxCgroup::Kill() const {
  Status killed = WriteFileAt(dir_.get(), path_, "cgroup.kill", "1");
  if (killed || killed.error().err != ENOENT) return killed;

  // Before Linux 5.14. Freezing first (5.2+) stops forks and exits, so the pids read below stay
  // valid until they are signalled; without the freezer, repeat until no new pid shows up.
  const bool frozen = WriteFileAt(dir_.get(), path_, "cgroup.freeze", "1").ok();
  std::vector<pid_t> signalled;
  Status result = Ok{};
  for (int pass = 0; pass < 64; ++pass) {
    auto procs = ReadFileAt(dir_.get(), path_, "cgroup.procs");
    if (!procs) {
      result = procs.error();
      break;
    }
    bool any_new = false;
    for (pid_t pid : ParsePids(*procs)) {
      if (std::find(signalled.begin(), signalled.end(), pid) != signalled.end()) continue;
      any_new = true;
      signalled.push_back(pid);
      if (::kill(pid, SIGKILL) != 0 && errno != ESRCH) {
        result = ErrnoError("kill " + std::to_string(pid));
      }
    }
    if (!any_new) break;
  }
  // A frozen cgroup still delivers SIGKILL; thawing lets the dead finish exiting.
  if (frozen) (void)WriteFileAt(dir_.get(), path_, "cgroup.freeze", "0");
  return result;
}

CgroupStats SandboxCgroup::ReadStats() const {
  CgroupStats stats;
  if (auto peak = ReadFileAt(dir_.get(), path_, "memory.peak"); peak) {
    stats.memory_peak = ParseU64(*peak);
  }
  if (auto events = ReadFileAt(dir_.get(), path_, "memory.events"); events) {
    stats.oom = KeyedValue(*events, "oom");
    stats.oom_kill = KeyedValue(*events, "oom_kill");
  }
  if (auto events = ReadFileAt(dir_.get(), path_, "pids.events"); events) {
    stats.pids_max_events = KeyedValue(*events, "max");
  }
  return stats;
}

Status SandboxCgroup::Remove() {
  if (path_.empty()) return Ok{};
  if (hooks_.before_rmdir) hooks_.before_rmdir(path_);
  // A cgroup can be removed once it has no processes. The sandbox's processes are normally gone
  // (its init was reaped), but exiting tasks may linger for a moment; anything still alive is
  // killed first.
  Status result = Ok{};
  bool killed = false;
  auto delay = std::chrono::milliseconds(1);
  std::chrono::milliseconds waited(0);
  while (::rmdir(path_.c_str()) != 0 && errno != ENOENT) {
    if (errno != EBUSY || waited >= std::chrono::seconds(1)) {
      result = ErrnoError("rmdir " + path_);
      break;
    }
    if (!killed) {
      (void)Kill();
      killed = true;
    }
    std::this_thread::sleep_for(delay);
    waited += delay;
    delay = std::min(delay * 2, std::chrono::milliseconds(100));
  }
  dir_.Reset();
  path_.clear();
  return result;
}

}  // namespace cagent::launcher
