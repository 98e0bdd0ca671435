// seccomp: the last restriction before execve. A deny-list filter (default action: allow) that
// answers errno values rather than killing, so that programs which probe for a feature cope with
// its absence, and kills the process only for system calls of a foreign ABI (i386 `int $0x80`,
// x32), which no native program makes by accident.
//
// What the filter stops (DESIGN.md "The sandbox", step 6): namespaces and mounts, ptrace and
// cross-process memory, keyrings, bpf, perf, userfaultfd, io_uring, kernel modules, kexec, reboot,
// clock changes, terminal injection (TIOCSTI, TIOCLINUX), personality flags, and socket families
// beyond what the network mode needs. Ordinary work (threads, fork, exec, Unix and loopback
// sockets, terminal queries) is untouched.
//
// Three parts, following the module convention:
//   SeccompPolicy          the rules as data. A profile does not choose system calls: the
//                          launch (sandbox.cc) takes DefaultSeccompPolicy, with inet sockets
//                          when the spec's network mode is loopback, and switches
//                          deny_privileged_modes off with the setuid-guard layer; tests build
//                          their own
//   SeccompFilter::Prepare parent, before clone: libseccomp builds the program, which is exported
//                          to classic BPF held in memory
//   SeccompFilter::Apply   child, after no_new_privs: one seccomp(2) call on the prepared program;
//                          libseccomp is not used there
#pragma once

#include <linux/filter.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/sandbox/child_report.h"

namespace cagent::launcher {

// The step a failed Apply() reports (rendered "load seccomp filter").
inline constexpr ChildStep kSeccompStep = ChildStep::kSeccomp;

// One socket family the sandbox may create sockets of, with socket(2) or socketpair(2).
struct SocketFamilyRule {
  int family = 0;  // AF_*
  // Allowed socket types (`type & SOCK_TYPE_MASK`, i.e. without SOCK_NONBLOCK / SOCK_CLOEXEC),
  // each in [0, 15]. Empty: any type. Others fail with EPERM, as an unprivileged SOCK_RAW does.
  std::vector<int> types;
  // Allowed protocol numbers (the third argument). Empty: any protocol. Others fail with
  // EPROTONOSUPPORT.
  std::vector<int> protocols;

  bool operator==(const SocketFamilyRule&) const = default;
};

// The filter's rules as data. Every deny is an errno (the process lives on); only a foreign ABI
// kills. The fields are independent: each names one kind of rule.
struct SeccompPolicy {
  // Denied outright with EPERM. Names as libseccomp spells them ("umount2", "_sysctl"). A name that
  // no architecture known to libseccomp has is an error in Prepare (a misspelling, or a system call
  // newer than the installed libseccomp); a name that exists only on other architectures ("umount"
  // on x86_64) is skipped on this one and listed by SeccompFilter::SkippedSyscalls().
  // Must not name a system call that another field restricts by argument (clone, clone3,
  // personality, ioctl, socket, socketpair; chmod, open, mkdir and the other mode-taking calls of
  // deny_privileged_modes): Prepare rejects the ambiguity.
  std::vector<std::string> denied_syscalls;

  // The allow-list of socket families, at most one rule per family. socket(2) and socketpair(2)
  // of any other family fail with EAFNOSUPPORT (what a kernel without that family answers, so
  // programs fall back cleanly). Empty: no socket can be created at all.
  std::vector<SocketFamilyRule> socket_families;

  // ioctl(2) request numbers denied with EPERM. Compared on the low 32 bits only, as the kernel
  // reads them (CVE-2019-10063: a full 64-bit compare is bypassed by setting high bits).
  std::vector<std::uint32_t> denied_ioctls;

  // Namespace creation through clone: clone(2) with any CLONE_NEW* flag fails with EPERM, and
  // clone3(2), whose flags sit in a struct that seccomp cannot read, fails with ENOSYS so that
  // glibc (2.34+) falls back to clone(2). unshare(2) and setns(2) belong in denied_syscalls.
  bool deny_namespace_clone = true;

  // personality(2) only for 0 (PER_LINUX) and 0xffffffff (query); anything else (PER_LINUX32,
  // ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, ...) fails with EPERM.
  bool restrict_personality = true;

  // No setuid or setgid bit from inside: chmod, fchmod, fchmodat, fchmodat2 with S_ISUID or S_ISGID
  // in the mode, and creat, mkdir, mkdirat, mknod, mknodat, open and openat (the last two with
  // O_CREAT or O_TMPFILE) with either bit in the creation mode, fail with EPERM. Ordinary modes
  // are untouched. openat2(2) is not ruled: its mode and flags sit in a struct seccomp cannot
  // read, and the agent's file tools depend on it; a file created through it with a privileged
  // mode loses the bit on its first write or truncate (the kernel's file_remove_privs, since the
  // sandbox holds no CAP_FSETID), and the host-side sweep after the sandbox (leftovers.h) clears
  // whatever remains. Restricts the calls named in kModeCalls by argument.
  bool deny_privileged_modes = true;

  // true: only this machine's native ABI (x86_64 on x86_64, also excluding x32); a system call
  // through any other ABI kills the process with SIGSYS. false: the compatibility ABIs this
  // machine can run (x86 and x32 on x86_64, arm on aarch64) are added to the filter with the same
  // rules, as far as libseccomp can express them there (on i386, socket(2) through socketcall(2)
  // cannot be inspected, so every socketcall socket creation is then refused).
  bool reject_foreign_abis = true;

  bool operator==(const SeccompPolicy&) const = default;
};

// The built-in rules (DESIGN.md step 6). Denies mounts and the new mount API, namespace creation
// and joining, ptrace and cross-process memory and fds, keyrings, bpf, perf_event_open,
// userfaultfd, io_uring, kernel modules, kexec, reboot, swap, clock and time adjustment, acct,
// quotas, file handles, syslog, vhangup, port I/O, uselib, nfsservctl, sysfs and _sysctl; TIOCSTI
// and TIOCLINUX; personality flags; foreign ABIs. Socket families: AF_UNIX always; AF_NETLINK
// with NETLINK_ROUTE only (glibc's getifaddrs, `ip`); AF_INET and AF_INET6 only when `allow_inet`,
// with SOCK_STREAM and SOCK_DGRAM (never SOCK_RAW or the obsolete SOCK_PACKET) and protocols 0,
// TCP, UDP and ICMP / ICMPv6 (ping sockets); setuid/setgid modes (deny_privileged_modes). Pure.
SeccompPolicy DefaultSeccompPolicy(bool allow_inet);

// A syscall name with its number on this machine's native architecture.
struct ResolvedSyscall {
  std::string name;
  int nr = -1;
};

// A seccomp program built from a SeccompPolicy, ready to be installed. Move-only.
class SeccompFilter {
 public:
  // Prepare (parent, before clone; allocates): validates the policy, builds the rules with
  // libseccomp and exports them as classic BPF into memory (through a memfd, since libseccomp 2.5
  // cannot export to memory). Fails on an invalid policy, on a name unknown to libseccomp and on a
  // program longer than the kernel's BPF_MAXINSNS; the error says which.
  //
  // The default policies (DefaultSeccompPolicy, with and without inet, with and without
  // deny_privileged_modes) are not compiled per launch: the build ran this same code through
  // libseccomp once and embedded the programs (seccomp_prebuilt.h). A policy equal to one of them
  // takes its program, names and summary from there; any other policy is compiled. Compiling the
  // default filter was about 0.6 ms and a few dozen page faults of every launch
  // (docs/performance.md, "Launch latency").
  static Result<SeccompFilter> Prepare(const SeccompPolicy& policy);
  // Always compiles with libseccomp, never takes a prebuilt program (the build's generator, and
  // the test that the embedded programs are what libseccomp makes of the policies today).
  static Result<SeccompFilter> Compile(const SeccompPolicy& policy);
  // True when Prepare took the program from the build's table.
  [[nodiscard]] bool prebuilt() const { return prebuilt_; }

  SeccompFilter(SeccompFilter&& other) noexcept;
  SeccompFilter& operator=(SeccompFilter&& other) noexcept;
  SeccompFilter(const SeccompFilter&) = delete;
  SeccompFilter& operator=(const SeccompFilter&) = delete;
  ~SeccompFilter();

  // Apply-in-child: installs the prepared program on the calling thread with
  // seccomp(SECCOMP_SET_MODE_FILTER). The caller must have set no_new_privs (the kernel answers
  // EACCES otherwise, unless the caller holds CAP_SYS_ADMIN). One system call, no allocation, no
  // libseccomp; async-signal-safe. Irreversible for the calling process and everything it starts.
  [[nodiscard]] ChildResult Apply() const;

  // Parent: libseccomp's pseudo filter code (PFC), a readable rendering of the rules for audits
  // (`cagent exec --print-seccomp`). Fails only if a memfd cannot be created or read. A prebuilt
  // filter compiles its policy here, the first time it is asked.
  [[nodiscard]] Result<std::string> Pfc() const;

  // The names denied outright that exist on this architecture, sorted.
  [[nodiscard]] std::vector<std::string> DeniedSyscallNames() const;
  // The same with their native numbers, sorted by name.
  [[nodiscard]] const std::vector<ResolvedSyscall>& DeniedSyscalls() const { return denied_; }
  // Names of denied_syscalls that do not exist on this architecture, so no rule was needed; sorted.
  [[nodiscard]] const std::vector<std::string>& SkippedSyscalls() const { return skipped_; }
  // One line per argument-dependent rule and for the ABI rule, in words, for `cagent doctor` and
  // the run record (e.g. "ioctl: EPERM for request 0x5412 (TIOCSTI)").
  [[nodiscard]] const std::vector<std::string>& RuleSummary() const { return summary_; }
  // The prepared program (what Apply() installs).
  [[nodiscard]] const std::vector<sock_filter>& Program() const { return program_; }

 private:
  SeccompFilter() = default;
  void Release();

  void* ctx_ = nullptr;  // scmp_filter_ctx, kept for Pfc(); never used in the child
  bool prebuilt_ = false;
  std::optional<SeccompPolicy> policy_;  // a prebuilt filter's policy, compiled for Pfc()
  std::vector<sock_filter> program_;
  std::vector<ResolvedSyscall> denied_;
  std::vector<std::string> skipped_;
  std::vector<std::string> summary_;
};

}  // namespace cagent::launcher
