// Landlock: unprivileged access control attached to the sandbox's processes (Linux >= 5.13).
//
// prepare (parent, before clone): LandlockRuleset::Prepare() turns the profile's rules into the
//   access masks this kernel's Landlock ABI can enforce, builds every path string in advance,
//   records each right or feature the ABI lacks as a human-readable downgrade, and fails when a
//   feature marked required is missing.
// apply-in-child: LandlockRuleset::Apply() creates the ruleset, opens each path inside the
//   finished mount view, adds the rules and restricts the calling process — syscalls only.
//
// What Landlock adds on top of the mount view: rules attach to inodes, not to strings, and a
// domain is inherited by every descendant and can only ever be narrowed. Files created after the
// restriction (in a read-write tree or anywhere else) are covered by the rule of the directory
// they are created in. Network rules restrict TCP bind/connect by port (ABI 4); scopes cut the
// sandbox off from abstract Unix sockets and from signalling processes outside its domain
// (ABI 6). Independently of any rule, a Landlocked process cannot ptrace a process outside its
// domain (ABI 1).
//
// Semantics to keep in mind when writing rules:
//  - Only handled rights are restricted. Prepare() handles every filesystem right the ABI knows
//    (when `restrict_fs`), so a path not under any rule gets no access at all; rights the ABI does
//    not know (e.g. truncate before ABI 3) stay unrestricted and are reported as downgrades.
//  - Rules apply beneath a directory, through mount points. Lookup, stat, chdir, readlink and
//    O_PATH opens are never restricted; chmod/chown/utimes/xattrs are not restricted by any ABI.
//  - A path is resolved (symlinks followed) in the child when the ruleset is applied; the rule
//    attaches to the target. Access through a symlink is checked against the target's location.
//  - Open files keep the rights they were opened with: fds inherited across the restriction
//    (stdin/stdout/stderr, the report pipe) stay fully usable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/sandbox/child_report.h"

namespace cagent::launcher {

// The ChildStep reported when Apply() fails. child_report.h has no Landlock step yet; the
// integrator will add `ChildStep::kLandlock` (name: "apply Landlock rules") and change this alias
// to it. Until then failures are reported as kExec, with Apply()'s `detail` (see
// LandlockRuleset::DescribeFailure) telling them apart from a failed execve.
inline constexpr ChildStep kLandlockStep = ChildStep::kLandlock;

// The Landlock ABI version the running kernel supports: 0 when Landlock is not built in or not
// enabled at boot (ENOSYS / EOPNOTSUPP), else 1.. (1: Linux 5.13, 2: 5.19, 3: 6.2, 4: 6.7,
// 5: 6.10, 6: 6.12, 7: 6.15). Safe in any process; performs one syscall, no allocation.
int LandlockAbi();

// What the sandbox may do, as the profile states it. Paths are absolute paths inside the sandbox's
// mount view (they are opened in the child after pivot_root, not in the parent).
struct LandlockRules {
  // Filesystem. When `restrict_fs` is set every filesystem right the ABI knows is handled, so
  // everything not granted below is denied (empty lists deny all filesystem access).
  bool restrict_fs = true;
  // Read files, list directories, execute.
  std::vector<std::string> read_only;
  // Everything the ruleset handles except creating device nodes and device ioctls: read, write,
  // execute, create/remove files, directories, symlinks, fifos and sockets, truncate, and refer
  // (rename/link across directories, allowed only between read-write trees).
  std::vector<std::string> read_write;
  // Device trees such as /dev: read and write existing files, list directories, and ioctl on
  // device files (ABI 5; terminals and ptys need it). No create, remove or execute.
  std::vector<std::string> device_paths;

  // Network (ABI 4). When `restrict_tcp` is set every TCP bind/connect to a port not listed is
  // denied (EACCES). Port 0 in `tcp_bind_ports` allows binding to an ephemeral port. UDP and
  // other protocols are not covered by Landlock. Ports without `restrict_tcp` are an error.
  bool restrict_tcp = false;
  std::vector<std::uint16_t> tcp_bind_ports;
  std::vector<std::uint16_t> tcp_connect_ports;

  // Scopes (ABI 6): deny connecting/sending to abstract Unix sockets created outside the domain
  // (EPERM), and deny signals to processes outside the domain (EPERM).
  bool scope_abstract_unix = false;
  bool scope_signals = false;

  // Fail closed: when a requested feature is required and the ABI lacks it, Prepare() fails.
  // When not required, the feature is dropped and reported in Downgrades(). `require_fs` covers
  // Landlock itself (ABI >= 1); the finer filesystem rights added later (refer, truncate, device
  // ioctl) are always best effort and reported as downgrades.
  bool require_fs = true;
  bool require_net = true;
  bool require_scopes = true;
};

// What a prepared ruleset enforces, for `cagent doctor` and the run record.
struct LandlockSummary {
  int abi = 0;                    // the ABI Prepare() was given (0: no Landlock)
  bool fs = false;                // filesystem rules enforced
  bool net = false;               // TCP bind/connect rules enforced
  bool scopes = false;            // the requested scopes enforced (false when none was requested)
  std::uint64_t handled_fs = 0;   // LANDLOCK_ACCESS_FS_* bits handled
  std::uint64_t handled_net = 0;  // LANDLOCK_ACCESS_NET_* bits handled
  std::uint64_t scoped = 0;       // LANDLOCK_SCOPE_* bits
  std::vector<std::string> downgrades;  // as LandlockRuleset::Downgrades()

  // One line, e.g. "Landlock ABI 7: filesystem enforced, network enforced, scopes off".
  [[nodiscard]] std::string ToString() const;
};

// A ruleset prepared for one ABI: masks computed, every string built. Move-only; holds no fds
// (the ruleset fd exists only inside Apply()).
class LandlockRuleset {
 public:
  // Prepare (parent; allocates). `abi` is normally LandlockAbi(); tests pass lower values to see
  // the downgrades. Fails with Error::Code::kInvalidInput when a path is not absolute or ports are
  // given without `restrict_tcp`; with kUnsupported when a required feature is missing at this
  // ABI (the message names the feature, the kernel version that brings it and how to make it
  // best effort).
  static Result<LandlockRuleset> Prepare(const LandlockRules& rules, int abi);

  LandlockRuleset(LandlockRuleset&&) noexcept = default;
  LandlockRuleset& operator=(LandlockRuleset&&) noexcept = default;
  LandlockRuleset(const LandlockRuleset&) = delete;
  LandlockRuleset& operator=(const LandlockRuleset&) = delete;
  ~LandlockRuleset() = default;

  // Apply-in-child: restricts the calling process (and every descendant it creates later) with
  // syscalls only — no allocation, exceptions or logging; async-signal-safe, safe after clone or
  // fork. Requires no_new_privs (or CAP_SYS_ADMIN in the current user namespace); the caller sets
  // it. Does nothing when there is nothing to enforce (no Landlock, or nothing requested).
  //
  // Each path is opened O_PATH|O_CLOEXEC in the caller's mount view; a path that does not exist
  // there (ENOENT, ENOTDIR) is skipped — it grants nothing, and nothing can later appear at it
  // that a rule would cover, since creating it needs a rule on an ancestor. A path that exists
  // but is not a directory gets only the file rights of its class (read/write/execute/truncate/
  // device ioctl). Every fd opened here is closed before returning.
  //
  // On failure: step kLandlockStep, errno, and `detail` as explained by DescribeFailure().
  [[nodiscard]] ChildResult Apply() const;

  // Parent side: what failed, for a ChildResult `detail` returned by Apply(), e.g.
  // "add Landlock rule for /dev (device)" or "landlock_restrict_self".
  [[nodiscard]] std::string DescribeFailure(int detail) const;

  // The features and rights requested but not enforced at this ABI, one sentence each, e.g.
  // "Landlock ABI 3 < 4: TCP bind/connect rules not enforced (needs Linux >= 6.7)".
  [[nodiscard]] const std::vector<std::string>& Downgrades() const { return downgrades_; }

  // What this ruleset enforces.
  [[nodiscard]] LandlockSummary Summary() const;

 private:
  struct PathRule {
    std::string path;
    std::uint64_t access;  // the class's rights, already masked to handled_fs_
    const char* kind;      // "read-only", "read-write", "device"
  };
  struct PortRule {
    std::uint64_t port;
    std::uint64_t access;  // LANDLOCK_ACCESS_NET_* bits, already masked to handled_net_
  };

  LandlockRuleset() = default;

  int abi_ = 0;
  std::uint64_t handled_fs_ = 0;
  std::uint64_t handled_net_ = 0;
  std::uint64_t scoped_ = 0;
  std::vector<PathRule> paths_;
  std::vector<PortRule> ports_;
  std::vector<std::string> downgrades_;
};

}  // namespace cagent::launcher
