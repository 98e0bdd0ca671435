// Resource limits (setrlimit): CPU time, file size, open files, processes, data and address space,
// and core dumps off.
//
// Prepared in the parent (reads cagent's own limits, may allocate), applied in the child after
// clone (setrlimit only). Limits only ever go down: a requested value above the caller's current
// hard limit is clamped to that hard limit, never raised — as root, setrlimit could raise a hard
// limit, which would let a profile hand the sandbox more than the person running cagent has.
//
// RLIMIT_NPROC and user namespaces. Since Linux 5.14 ("Reimplement RLIMIT_NPROC on top of
// ucounts") the count RLIMIT_NPROC is compared against is kept per (user namespace, uid). Applied
// in a process that is already inside the sandbox's fresh user namespace, the limit counts only
// the sandbox's own processes (the applying process included), not everything the caller's uid
// runs on the host, so it is a per-sandbox fork-bomb guard without cgroups. ApplyRlimits must
// therefore run in the child after clone(CLONE_NEWUSER), never on cagent itself. (The kernel also
// checks each ancestor namespace against the creator's RLIMIT_NPROC captured at unshare time, so
// the host-wide limit of the caller still holds.)
// Caveat, verified on Linux 6.18 (tests/launcher/sandbox/rlimits_test.cc): copy_process() exempts
// the global root user (kuid 0, INIT_USER) from RLIMIT_NPROC in every namespace, so when cagent
// runs as root with uid 0 mapped to itself the limit is accepted but has no effect; only a cgroup
// pids.max (launcher/sandbox/cgroup.h) bounds a root-run sandbox.
#pragma once

#include <sys/resource.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "launcher/sandbox/child_report.h"

namespace cagent::launcher {

// The ChildStep reported when a limit cannot be applied, with `detail` = the RLIMIT_* resource
// number. child_report.h belongs to the launch integrator, who adds ChildStep::kRlimits ("set
// resource limits") and points this at it; until then failures surface as kExec.
inline constexpr ChildStep kRlimitStep = ChildStep::kRlimits;

// What the profile asks for. An empty optional leaves the caller's limit as it is (inherited).
struct ResourceLimits {
  std::optional<std::uint64_t> cpu_seconds;          // RLIMIT_CPU
  std::optional<std::uint64_t> file_size_bytes;      // RLIMIT_FSIZE
  std::optional<std::uint64_t> open_files;           // RLIMIT_NOFILE
  std::optional<std::uint64_t> processes;            // RLIMIT_NPROC, per user namespace (above)
  std::optional<std::uint64_t> data_bytes;           // RLIMIT_DATA
  std::optional<std::uint64_t> address_space_bytes;  // RLIMIT_AS
  bool core_dumps = false;  // false: RLIMIT_CORE 0/0; true: the caller's core limit is inherited
};

// One setrlimit call, precomputed.
struct RlimitSetting {
  int resource = 0;  // RLIMIT_*
  rlim_t soft = 0;
  rlim_t hard = 0;
};

// Everything ApplyRlimits needs, in a fixed-size array so the child reads it without allocating.
struct PreparedRlimits {
  static constexpr std::size_t kMax = 7;
  std::array<RlimitSetting, kMax> settings{};
  std::size_t count = 0;

  // The prepared setting for `resource`, or nullptr when it is left inherited.
  [[nodiscard]] const RlimitSetting* Find(int resource) const;
};

// Prepare (parent, before clone). Reads cagent's own hard limits with getrlimit and clamps every
// request to them. Per resource:
//  - soft = min(request, caller's hard), hard = the same — except CPU, where hard = request + 1s so
//    the kernel sends SIGXCPU at the soft limit one second before SIGKILL at the hard limit; a
//    SIGXCPU death is then distinguishable from the hard-limit SIGKILL and from cagent's own
//    wall-clock kill. (If the caller's hard CPU limit leaves no room, soft == hard and the kernel
//    sends only SIGKILL.)
//  - core: 0/0 unless `core_dumps`; then inherited.
// A soft limit may end up above the caller's current soft limit (never above its hard limit):
// every process may raise its own soft limit that far, so this grants nothing.
PreparedRlimits PrepareRlimits(const ResourceLimits& limits);

// Apply-in-child, after clone(CLONE_NEWUSER) (see RLIMIT_NPROC above): one setrlimit per prepared
// setting. Syscalls only — no allocation, no exceptions, no logging; async-signal-safe. On failure
// returns kRlimitStep with errno and `detail` = the resource number.
[[nodiscard]] ChildResult ApplyRlimits(const PreparedRlimits& prepared);

// Words for a command killed by one of these ceilings, for the run record and stderr:
//   SIGXCPU → "CPU time limit of 10s reached (SIGXCPU)"
//   SIGXFSZ → "file size limit of 1.0 GiB reached (SIGXFSZ)"
// Without a configured value (an inherited limit) the "of ..." part is omitted. Returns "" for
// every other signal, including SIGKILL, which alone does not say which limit (if any) killed it.
std::string ExplainLimitSignal(int sig, const ResourceLimits& limits);

// Binary-unit size for people: "512 B", "1.5 KiB", "1.0 GiB" (one decimal from KiB up).
std::string HumanReadableSize(std::uint64_t bytes);

}  // namespace cagent::launcher
