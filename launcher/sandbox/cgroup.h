// cgroup v2 limits: memory (memory.max, memory.swap.max), processes (pids.max) and CPU bandwidth
// (cpu.max) for one sandbox, in a cgroup of its own below a delegated cgroup.
//
// Everything here runs in the parent (cagent): discovery and Create before clone, Attach as
// setup-from-parent before the child is released, Kill/ReadStats/removal after. Nothing runs in
// the child.
//
// Where the sandboxes' cgroups go. cagent needs a cgroup v2 directory ("the base") that it may
// write and whose cgroup.controllers lists the controllers it needs; below it cagent creates one
// child cgroup per sandbox. Two kernel rules shape this:
//  - A child only gets a controller if the base's cgroup.subtree_control enables it, and a
//    non-root cgroup that contains processes cannot enable controllers in its subtree_control
//    (the "no internal processes" rule; the write fails with EBUSY).
//  - Moving a process between cgroups needs write access to cgroup.procs of the common ancestor
//    of source and destination (delegation containment; cgroup-v2.rst "Delegation Containment").
// So the base is, in order of preference, the directory named by CAGENT_CGROUP (or the config),
// or cagent's own cgroup. The usual delegated setup is `systemd-run --user --scope -p Delegate=yes
// cagent ...`: the scope is writable and contains only cagent. Create then moves cagent itself
// into a leaf, <base>/cagent-supervisor, so the base holds no processes, enables the controllers
// in the base's subtree_control, and makes <base>/<name> for the sandbox. Every sandbox child is
// a sibling of the supervisor leaf, so the common ancestor is the base, which cagent may write.
// The hierarchy's root cgroup is exempt from the no-internal-processes rule (and has no
// cgroup.type file, which is how it is recognised), so there nothing is moved.
//
// What a machine gives decides the outcome, from discovery alone (DiscoverCgroup, DecideCgroup):
//  - cgroup v2 with the controllers delegated (a systemd user scope with Delegate=yes, or
//    CAGENT_CGROUP naming a writable cgroup whose cgroup.controllers lists them): the limits are
//    enforced in <base>/cagent-<pid>.
//  - no delegation: cgroup v2 whose base lacks a controller (the parent's subtree_control does not
//    enable it), is not writable or holds other processes; a hybrid layout, where cgroup2 is
//    mounted (e.g. at /sys/fs/cgroup/unified) but memory/pids/cpu are bound to cgroup v1; or no
//    cgroup2 at all. Discovery says why for each controller (CgroupDiscovery::WhyNot), and the
//    launch either degrades — the rlimits stay the only ceiling and the downgrade is reported —
//    or, when the profile requires the limit and the cgroup layer is not best effort, is refused
//    with Error::Code::kUnsupported (exit status setup-failed).
//
// Security note: the sandbox runs as the caller's uid, which owns the delegated files, including
// its own cgroup's memory.max. The sandbox must not reach them: the child roots its cgroup
// namespace at its own cgroup (unshare(CLONE_NEWCGROUP) after Attach, sandbox.cc step 3; the
// "cgroupns" layer) — with the nsdelegate mount option (systemd's default) the kernel then refuses
// writes to the namespace root's interface files from inside — and cgroupfs is not in the mount
// view (the view has no /sys unless a profile binds it).
#pragma once

#include <sys/types.h>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace cagent::launcher {

// The controllers cagent uses.
enum class CgroupController : unsigned { kMemory = 0, kPids = 1, kCpu = 2 };
inline constexpr std::size_t kCgroupControllerCount = 3;

// "memory", "pids", "cpu": the kernel's names.
std::string_view CgroupControllerName(CgroupController controller);

// A set of CgroupControllers. Value type.
class ControllerSet {
 public:
  constexpr ControllerSet() = default;
  static ControllerSet All() { return ControllerSet(0b111); }
  // From a cgroup.controllers / cgroup.subtree_control line ("cpuset cpu io memory pids"); names
  // cagent does not use are ignored.
  static ControllerSet Parse(std::string_view list);

  [[nodiscard]] bool Has(CgroupController c) const { return (bits_ & Bit(c)) != 0; }
  void Add(CgroupController c) { bits_ |= Bit(c); }
  [[nodiscard]] bool empty() const { return bits_ == 0; }
  [[nodiscard]] int size() const { return std::popcount(bits_); }
  [[nodiscard]] bool Contains(ControllerSet other) const {
    return (bits_ & other.bits_) == other.bits_;
  }
  [[nodiscard]] ControllerSet Intersect(ControllerSet other) const {
    return ControllerSet(bits_ & other.bits_);
  }
  [[nodiscard]] ControllerSet Minus(ControllerSet other) const {
    return ControllerSet(bits_ & ~other.bits_);
  }
  // "memory pids cpu" (this order), "" when empty.
  [[nodiscard]] std::string ToString() const;
  // "memory, pids and cpu": for messages.
  [[nodiscard]] std::string ToProse() const;
  // "+memory +pids +cpu": the line that enables these in cgroup.subtree_control.
  [[nodiscard]] std::string EnableLine() const;
  bool operator==(const ControllerSet&) const = default;

 private:
  constexpr explicit ControllerSet(unsigned bits) : bits_(bits) {}
  static constexpr unsigned Bit(CgroupController c) { return 1U << static_cast<unsigned>(c); }
  unsigned bits_ = 0;
};

// Written as "max" (no limit) wherever a value is accepted.
inline constexpr std::uint64_t kCgroupMax = UINT64_MAX;

// What a sandbox's cgroup enforces. An empty optional leaves the kernel default ("max").
struct CgroupLimits {
  std::optional<std::uint64_t> memory_max;     // bytes → memory.max
  std::optional<std::uint64_t> swap_max;       // bytes → memory.swap.max (needs swap accounting)
  std::optional<std::uint64_t> pids_max;       // → pids.max
  std::optional<std::uint64_t> cpu_quota_us;   // → cpu.max "<quota> <period>"
  std::optional<std::uint64_t> cpu_period_us;  // default 100000 (the kernel's) when only quota set

  // The controllers these limits need: memory for memory/swap, pids, cpu for quota or period.
  [[nodiscard]] ControllerSet Controllers() const;
  // These limits without those whose controller is not in `keep` (for a reported downgrade).
  [[nodiscard]] CgroupLimits RestrictedTo(ControllerSet keep) const;
};

// ---- discovery ----

// Test hooks: a temporary directory stands in for cgroupfs, where the kernel creates a new
// cgroup's interface files on mkdir and removes them on rmdir. Both are empty in production;
// the code never creates an interface file itself (no O_CREAT), so a missing file is an error.
struct CgroupFsHooks {
  std::function<void(const std::string& dir)> after_mkdir;
  std::function<void(const std::string& dir)> before_rmdir;
};

// Where discovery reads from. Every path is injectable for tests.
struct CgroupEnv {
  std::string mountinfo_path = "/proc/self/mountinfo";
  std::string proc_cgroup_path = "/proc/self/cgroup";
  // A cgroup directory to create sandboxes under instead of cagent's own (CAGENT_CGROUP or the
  // config); must be inside the cgroup2 mount. Empty: use cagent's own cgroup.
  std::string override_dir;
  // The process whose presence in the base's cgroup.procs is cagent's own; 0 = getpid().
  pid_t self = 0;
  CgroupFsHooks hooks;

  // The production environment: the paths above and CAGENT_CGROUP from the environment.
  static CgroupEnv FromProcess();
};

// What discovery found: the base directory, which controllers a sandbox can get there, and, for
// each one it cannot, why. Read-only: discovery changes nothing (doctor calls it too).
struct CgroupDiscovery {
  std::string mount_point;  // of cgroup2; "" when none is mounted
  std::string own_dir;      // cagent's cgroup directory; "" when unknown
  std::string base;         // where sandbox cgroups are created; "" when there is none
  bool from_override = false;
  bool is_root = false;          // base is the hierarchy's root: no internal-processes rule
  bool must_leave_base = false;  // cagent is in the base and moves to the supervisor leaf
  ControllerSet delegated;       // memory/pids/cpu listed in <base>/cgroup.controllers
  ControllerSet enabled;         // memory/pids/cpu already in <base>/cgroup.subtree_control
  ControllerSet available;       // what a sandbox can actually be given
  pid_t self = 0;                // cagent's pid (CgroupEnv::self resolved)
  std::string reason;            // why not all of memory, pids, cpu are available; "" when they are
  std::array<std::string, kCgroupControllerCount> why_not;  // per controller, "" if available
  CgroupFsHooks hooks;

  [[nodiscard]] const std::string& WhyNot(CgroupController c) const {
    return why_not[static_cast<std::size_t>(c)];
  }
};

// Finds the base and what it offers (see the top of this file). Parent, any time; never fails —
// every problem becomes `reason` and an empty `available`.
CgroupDiscovery DiscoverCgroup(const CgroupEnv& env);

// Parsed cgroup mounts of /proc/self/mountinfo.
struct CgroupMounts {
  struct V2 {
    std::string root;         // the mount's root within the hierarchy ("/" normally)
    std::string mount_point;  // e.g. "/sys/fs/cgroup" or "/sys/fs/cgroup/unified"
  };
  std::vector<V2> v2;
  // Controllers bound to a cgroup v1 hierarchy, with its mount point (hybrid/legacy layouts).
  std::vector<std::pair<CgroupController, std::string>> v1;
};
CgroupMounts ParseCgroupMounts(std::string_view mountinfo);

// The cgroup v2 path of the "0::<path>" line of /proc/<pid>/cgroup, if any.
std::optional<std::string> ParseUnifiedCgroupPath(std::string_view proc_cgroup);

// ---- the decision ----

// For doctor, --json and the run record: what the cgroup layer does for this launch.
struct CgroupReport {
  bool available = false;  // a usable base with at least one of memory/pids/cpu
  std::string path;        // the base directory ("" when none)
  ControllerSet enforced;  // wanted and available: what this launch gets
  ControllerSet degraded;  // wanted, not required, not available: reported, launch continues
  std::string reason;      // why something wanted is not enforced; "" when nothing is missing
};

// Decides the cgroup layer of a launch: enforce what is wanted and available, report the rest —
// or fail closed when a `required` controller is missing, with a message that says what to do:
//   "no delegated cgroup v2 with the memory controller (<why>): run under systemd-run --user
//    --scope -p Delegate=yes, set CAGENT_CGROUP to a delegated cgroup, or drop
//    `require memory-limit`"
// The refusal's code is Error::Code::kUnsupported. `required` is treated as a subset of `wanted`.
// Pure.
Result<CgroupReport> DecideCgroup(const CgroupDiscovery& discovery, ControllerSet wanted,
                                  ControllerSet required);

// ---- one sandbox's cgroup ----

// Resource counters of a sandbox's cgroup, for the run record. Absent files (older kernels, a
// controller not enabled) give nullopt.
struct CgroupStats {
  std::optional<std::uint64_t> memory_peak;      // memory.peak (Linux 5.19+), bytes
  std::optional<std::uint64_t> oom;              // memory.events "oom": times the limit was hit
  std::optional<std::uint64_t> oom_kill;         // memory.events "oom_kill": processes killed
  std::optional<std::uint64_t> pids_max_events;  // pids.events "max": forks refused by pids.max
};

// The cgroup of one sandbox: <base>/<name>. Move-only; owns the directory and an O_DIRECTORY fd
// to it. The destructor removes the directory (killing what is left, see Remove).
class SandboxCgroup {
 public:
  // The leaf cagent moves itself into when the base holds it (see the top of this file).
  static constexpr std::string_view kSupervisorLeaf = "cagent-supervisor";

  // Parent, before clone. Creates <base>/<name> and writes `limits` in the kernel's formats
  // (memory.max "<bytes>"|"max", memory.swap.max, pids.max, cpu.max "<quota>|max <period>").
  // First, as needed: moves cagent into the supervisor leaf (only if the base is not the root and
  // cagent is its only process) and enables the limits' controllers in the base's
  // cgroup.subtree_control. Fails — removing what it created — if a needed controller is not in
  // `discovery.available` or the base holds other processes (Error::Code::kUnsupported), the name
  // is not [A-Za-z0-9_-]{1,64} or a cpu value is out of the kernel's range (kInvalidInput), the
  // cgroup exists already, or a write is refused. Strip unavailable limits first with
  // CgroupLimits::RestrictedTo.
  static Result<SandboxCgroup> Create(const CgroupDiscovery& discovery, const std::string& name,
                                      const CgroupLimits& limits);

  SandboxCgroup(SandboxCgroup&& other) noexcept;
  SandboxCgroup& operator=(SandboxCgroup&& other) noexcept;
  SandboxCgroup(const SandboxCgroup&) = delete;
  SandboxCgroup& operator=(const SandboxCgroup&) = delete;
  ~SandboxCgroup();

  [[nodiscard]] const std::string& path() const { return path_; }
  // O_DIRECTORY|O_RDONLY fd of the cgroup, owned by this object; valid until it is destroyed.
  // Suitable for clone3's CLONE_INTO_CGROUP (which needs a non-O_PATH directory fd).
  [[nodiscard]] int dir_fd() const { return dir_.get(); }

  // Setup-from-parent: moves `pid` (its whole thread group) into this cgroup by writing it to
  // cgroup.procs. Call before the child is released, so nothing it runs is ever outside the
  // limits.
  [[nodiscard]] Status Attach(pid_t pid) const;

  // Kills every process in the cgroup: "1" to cgroup.kill (Linux 5.14+, atomic, no pid races).
  // Fallback on older kernels: freeze (cgroup.freeze, 5.2+, so nothing forks or exits and no pid
  // is reused meanwhile), SIGKILL each pid of cgroup.procs until no new one appears, thaw.
  [[nodiscard]] Status Kill() const;

  // Reads the counters; never fails (missing values are nullopt).
  [[nodiscard]] CgroupStats ReadStats() const;

  // Removes the directory: rmdir; if processes remain (EBUSY), Kill and retry for up to about
  // a second while they exit. Afterwards this object is empty. The destructor calls this and
  // drops the error; call it yourself to report a cgroup left behind.
  [[nodiscard]] Status Remove();

 private:
  SandboxCgroup(std::string path, UniqueFd dir, CgroupFsHooks hooks)
      : path_(std::move(path)), dir_(std::move(dir)), hooks_(std::move(hooks)) {}

  std::string path_;
  UniqueFd dir_;
  CgroupFsHooks hooks_;
};

}  // namespace cagent::launcher
