#include "launcher/sandbox/seccomp.h"

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "common/unique_fd.h"
#include "launcher/sandbox/seccomp_prebuilt.h"

// clone(2)'s flags are its first argument on every architecture cagent supports; s390 and cris
// swap the first two arguments, which the CLONE_NEW* rule would then miss.
#if defined(__s390__) || defined(__s390x__) || defined(__CRIS__)
#error "the clone rule in seccomp.cc assumes clone's flags are argument 0"
#endif

namespace cagent::launcher {
namespace {

// The namespace flags clone(2) can carry. CLONE_NEWTIME (0x80) is absent on purpose: in clone(2)
// the low byte is the exit signal (CSIGNAL), so that bit can never request a time namespace there;
// only clone3(2) and unshare(2) can, and both are refused as a whole.
constexpr std::uint64_t kCloneNamespaceFlags[] = {CLONE_NEWNS,    CLONE_NEWUTS, CLONE_NEWIPC,
                                                  CLONE_NEWUSER,  CLONE_NEWPID, CLONE_NEWNET,
                                                  CLONE_NEWCGROUP};

// Arguments the kernel reads as 32-bit `int`/`unsigned int` are compared on their low half only
// where a wider compare would let high garbage slip past a deny (CVE-2019-10063).
constexpr std::uint64_t kLow32 = 0xffffffffULL;
constexpr std::uint64_t kSocketTypeMask = 0xf;  // SOCK_TYPE_MASK in the kernel
constexpr int kMaxSocketFamily = 4095;          // sanity bound for policy values (AF_MAX is ~46)
constexpr int kMaxSocketProtocol = 65535;

// The system calls that other fields of the policy restrict by argument.
struct ArgumentRuled {
  const char* name;
  bool (*active)(const SeccompPolicy&);
  const char* owner;  // which field restricts it, for the error message
};
constexpr ArgumentRuled kArgumentRuled[] = {
    {"clone", [](const SeccompPolicy& p) { return p.deny_namespace_clone; },
     "deny_namespace_clone"},
    {"clone3", [](const SeccompPolicy& p) { return p.deny_namespace_clone; },
     "deny_namespace_clone"},
    {"personality", [](const SeccompPolicy& p) { return p.restrict_personality; },
     "restrict_personality"},
    {"ioctl", [](const SeccompPolicy& p) { return !p.denied_ioctls.empty(); }, "denied_ioctls"},
    {"socket", [](const SeccompPolicy&) { return true; }, "socket_families"},
    {"socketpair", [](const SeccompPolicy&) { return true; }, "socket_families"},
    {"chmod", [](const SeccompPolicy& p) { return p.deny_privileged_modes; },
     "deny_privileged_modes"},
    {"fchmod", [](const SeccompPolicy& p) { return p.deny_privileged_modes; },
     "deny_privileged_modes"},
    {"fchmodat", [](const SeccompPolicy& p) { return p.deny_privileged_modes; },
     "deny_privileged_modes"},
    {"fchmodat2", [](const SeccompPolicy& p) { return p.deny_privileged_modes; },
     "deny_privileged_modes"},
    {"creat", [](const SeccompPolicy& p) { return p.deny_privileged_modes; },
     "deny_privileged_modes"},
    {"open", [](const SeccompPolicy& p) { return p.deny_privileged_modes; },
     "deny_privileged_modes"},
    {"openat", [](const SeccompPolicy& p) { return p.deny_privileged_modes; },
     "deny_privileged_modes"},
    {"mkdir", [](const SeccompPolicy& p) { return p.deny_privileged_modes; },
     "deny_privileged_modes"},
    {"mkdirat", [](const SeccompPolicy& p) { return p.deny_privileged_modes; },
     "deny_privileged_modes"},
    {"mknod", [](const SeccompPolicy& p) { return p.deny_privileged_modes; },
     "deny_privileged_modes"},
    {"mknodat", [](const SeccompPolicy& p) { return p.deny_privileged_modes; },
     "deny_privileged_modes"},
};

// The system calls that take a file mode, with the index of the mode argument and, for open and
// openat, of the flags argument (the mode means something only with O_CREAT or O_TMPFILE; without
// them it is whatever was in the register). openat2(2) is absent: its mode and flags sit in a
// struct open_how that seccomp cannot read (see deny_privileged_modes).
struct ModeCall {
  const char* name;
  unsigned mode_arg;
  int flags_arg;  // -1: the mode always applies
};
constexpr ModeCall kModeCalls[] = {
    {"chmod", 1, -1},   {"fchmod", 1, -1}, {"fchmodat", 2, -1}, {"fchmodat2", 2, -1},
    {"creat", 1, -1},   {"mkdir", 1, -1},  {"mkdirat", 2, -1},  {"mknod", 1, -1},
    {"mknodat", 2, -1}, {"open", 2, 1},    {"openat", 3, 2},
};
// O_TMPFILE includes O_DIRECTORY; the bit of its own is what marks an unnamed file.
constexpr std::uint64_t kTmpfileBit = static_cast<std::uint64_t>(O_TMPFILE & ~O_DIRECTORY);
#ifndef __NR_fchmodat2
// NOLINTNEXTLINE(bugprone-reserved-identifier): the kernel header's own name, for older headers
#define __NR_fchmodat2 452  // Linux 6.6, the same number on every architecture
#endif

scmp_arg_cmp Cmp(unsigned arg, scmp_compare op, std::uint64_t a, std::uint64_t b = 0) {
  scmp_arg_cmp c{};
  c.arg = arg;
  c.op = op;
  c.datum_a = a;
  c.datum_b = b;
  return c;
}
scmp_arg_cmp Eq(unsigned arg, std::uint64_t value) { return Cmp(arg, SCMP_CMP_EQ, value); }
scmp_arg_cmp Gt(unsigned arg, std::uint64_t value) { return Cmp(arg, SCMP_CMP_GT, value); }
scmp_arg_cmp Masked(unsigned arg, std::uint64_t mask, std::uint64_t value) {
  return Cmp(arg, SCMP_CMP_MASKED_EQ, mask, value);
}

std::string Hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));  // NOLINT
  return buf;
}

std::string Join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

std::string FamilyName(int family) {
  switch (family) {
    case AF_UNIX:
      return "AF_UNIX";
    case AF_INET:
      return "AF_INET";
    case AF_INET6:
      return "AF_INET6";
    case AF_NETLINK:
      return "AF_NETLINK";
    case AF_PACKET:
      return "AF_PACKET";
    default:
      return "family " + std::to_string(family);
  }
}

std::string IoctlName(std::uint32_t request) {
  switch (request) {
    case TIOCSTI:
      return Hex(request) + " (TIOCSTI)";
    case TIOCLINUX:
      return Hex(request) + " (TIOCLINUX)";
    default:
      return Hex(request);
  }
}

std::string IntList(const std::vector<int>& values) {
  std::vector<std::string> parts;
  parts.reserve(values.size());
  for (int v : values) parts.push_back(std::to_string(v));
  return Join(parts, ",");
}

// An aligned block of 2^k integers [start, start + size): exactly the x with
// (x & ~(size - 1)) == start.
struct Block {
  std::uint64_t start;
  std::uint64_t size;
};

// The fewest aligned blocks, taken greedily from 0 upwards, that cover exactly the integers of
// [0, limit] not in `allowed` (sorted, unique). Lets one masked compare per block deny a range,
// since libseccomp accepts only one comparison per argument in a rule.
std::vector<Block> CoverComplement(const std::vector<std::uint64_t>& allowed, std::uint64_t limit) {
  std::vector<Block> out;
  std::uint64_t v = 0;
  while (v <= limit) {
    if (std::binary_search(allowed.begin(), allowed.end(), v)) {
      ++v;
      continue;
    }
    std::uint64_t size = 1;
    for (;;) {
      const std::uint64_t next = size * 2;
      if (v % next != 0 || v + next - 1 > limit) break;
      const auto it = std::lower_bound(allowed.begin(), allowed.end(), v);
      if (it != allowed.end() && *it < v + next) break;
      size = next;
    }
    out.push_back({v, size});
    v += size;
  }
  return out;
}

std::vector<std::uint64_t> SortedUnique(const std::vector<int>& values) {
  std::vector<std::uint64_t> out(values.begin(), values.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Reads everything `exporter` (seccomp_export_bpf / seccomp_export_pfc) writes, through a memfd.
Result<std::string> ExportToString(scmp_filter_ctx ctx, int (*exporter)(const scmp_filter_ctx, int),
                                   const char* what) {
  UniqueFd fd(::memfd_create("cagent-seccomp", MFD_CLOEXEC));
  if (!fd.valid()) return ErrnoError("memfd_create");
  if (const int rc = exporter(ctx, fd.get()); rc < 0) return ErrnoError(what, -rc);
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) return ErrnoError("lseek memfd");
  std::string out;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("read memfd");
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Builds the libseccomp rules; keeps what the filter reports about itself.
class Builder {
 public:
  Builder(scmp_filter_ctx ctx, std::vector<ResolvedSyscall>& denied,
          std::vector<std::string>& skipped, std::vector<std::string>& summary)
      : ctx_(ctx), denied_(denied), skipped_(skipped), summary_(summary) {}

  Status Build(const SeccompPolicy& policy) {
    if (auto s = Validate(policy); !s) return s;
    if (auto s = SetAttributes(policy); !s) return s;
    if (auto s = DenySyscalls(policy.denied_syscalls, policy.reject_foreign_abis); !s) return s;
    if (policy.deny_namespace_clone) {
      if (auto s = DenyNamespaceClone(); !s) return s;
    }
    if (policy.restrict_personality) {
      if (auto s = RestrictPersonality(); !s) return s;
    }
    if (!policy.denied_ioctls.empty()) {
      if (auto s = DenyIoctls(policy.denied_ioctls); !s) return s;
    }
    if (policy.deny_privileged_modes) {
      if (auto s = DenyPrivilegedModes(policy.reject_foreign_abis); !s) return s;
    }
    return RestrictSockets(policy.socket_families);
  }

 private:
  static Status Validate(const SeccompPolicy& policy) {
    for (const ArgumentRuled& r : kArgumentRuled) {
      if (!r.active(policy)) continue;
      if (std::find(policy.denied_syscalls.begin(), policy.denied_syscalls.end(), r.name) !=
          policy.denied_syscalls.end()) {
        return PlainError("check seccomp policy",
                          std::string("system call '") + r.name +
                              "' is both denied outright and restricted by argument (" + r.owner +
                              "); remove it from denied_syscalls or turn the other rule off");
      }
    }
    std::vector<int> families;
    for (const SocketFamilyRule& f : policy.socket_families) {
      if (f.family < 0 || f.family > kMaxSocketFamily) {
        return PlainError("check seccomp policy", "socket family " + std::to_string(f.family) +
                                                      " is out of range [0, " +
                                                      std::to_string(kMaxSocketFamily) + "]");
      }
      families.push_back(f.family);
      for (int t : f.types) {
        if (t < 0 || t > static_cast<int>(kSocketTypeMask)) {
          return PlainError("check seccomp policy",
                            "socket type " + std::to_string(t) + " of " + FamilyName(f.family) +
                                " is out of range [0, 15] (give it without SOCK_NONBLOCK / "
                                "SOCK_CLOEXEC)");
        }
      }
      for (int p : f.protocols) {
        if (p < 0 || p > kMaxSocketProtocol) {
          return PlainError("check seccomp policy", "socket protocol " + std::to_string(p) +
                                                        " of " + FamilyName(f.family) +
                                                        " is out of range [0, 65535]");
        }
      }
    }
    std::sort(families.begin(), families.end());
    if (const auto dup = std::adjacent_find(families.begin(), families.end());
        dup != families.end()) {
      return PlainError("check seccomp policy",
                        FamilyName(*dup) + " has more than one socket rule; merge them");
    }
    return Ok{};
  }

  Status SetAttributes(const SeccompPolicy& policy) {
    // A system call through an ABI the filter does not cover must not reach the kernel: its
    // numbers differ (i386 `int $0x80`: 26 is ptrace; x32: nr | 0x40000000), so none of the rules
    // below would apply. Killing is right here: no native program does this by accident.
    // libseccomp also sends x32 numbers to this action when the native arch is x86_64 and x32 was
    // not added (the tests check this on the exported program).
    const std::pair<scmp_filter_attr, std::uint32_t> attrs[] = {
        {SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS},
        // A binary tree of syscall numbers: an allowed call costs O(log n) jumps instead of a
        // linear walk over every denied name.
        {SCMP_FLTATR_CTL_OPTIMIZE, 2},
        {SCMP_FLTATR_API_SYSRAWRC, 1},
    };
    for (const auto& [attr, value] : attrs) {
      if (const int rc = seccomp_attr_set(ctx_, attr, value); rc < 0) {
        return ErrnoError("seccomp_attr_set " + std::to_string(static_cast<int>(attr)), -rc);
      }
    }
    if (policy.reject_foreign_abis) {
      summary_.push_back("other ABIs (i386 int $0x80, x32): process killed with SIGSYS");
      return Ok{};
    }
    std::vector<std::pair<std::uint32_t, const char*>> compat;
#if defined(__x86_64__)
    compat = {{SCMP_ARCH_X86, "x86"}, {SCMP_ARCH_X32, "x32"}};
#elif defined(__aarch64__)
    compat = {{SCMP_ARCH_ARM, "arm"}};
#endif
    std::vector<std::string> names;
    for (const auto& [arch, name] : compat) {
      const int rc = seccomp_arch_add(ctx_, arch);
      if (rc < 0 && rc != -EEXIST) return ErrnoError(std::string("seccomp_arch_add ") + name, -rc);
      names.emplace_back(name);
    }
    summary_.push_back("compatibility ABIs filtered with the same rules: " +
                       (names.empty() ? std::string("none on this machine") : Join(names, ", ")));
    return Ok{};
  }

  Status Add(std::uint32_t action, const char* name, std::initializer_list<scmp_arg_cmp> cmps) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) {
      return PlainError("resolve system call",
                        std::string("libseccomp does not know '") + name + "'");
    }
    const std::vector<scmp_arg_cmp> v(cmps);
    const int rc =
        seccomp_rule_add_array(ctx_, action, nr, static_cast<unsigned>(v.size()), v.data());
    if (rc < 0) return ErrnoError(std::string("seccomp_rule_add ") + name, -rc);
    return Ok{};
  }

  Status DenySyscalls(std::vector<std::string> names, bool native_only) {
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    for (const std::string& name : names) {
      const int nr = seccomp_syscall_resolve_name(name.c_str());
      if (nr == __NR_SCMP_ERROR) {
        return PlainError("check seccomp policy",
                          "libseccomp " + Version() + " knows no system call '" + name +
                              "' on any architecture; check the spelling, or upgrade libseccomp "
                              "if it is newer than that");
      }
      if (nr < 0) {
        // A libseccomp pseudo-number: the call exists on other architectures only. With foreign
        // ABIs in the filter the rule still matters there, and libseccomp maps it per arch.
        skipped_.push_back(name);
        if (native_only) continue;
      } else {
        denied_.push_back({name, nr});
      }
      const int rc = seccomp_rule_add_array(ctx_, SCMP_ACT_ERRNO(EPERM), nr, 0, nullptr);
      if (rc < 0) return ErrnoError("seccomp_rule_add " + name, -rc);
    }
    return Ok{};
  }

  Status DenyNamespaceClone() {
    // One rule per flag: rules for one system call are alternatives, so "any flag set" is their
    // union. The kernel reads only the low 32 bits of the flags, where all of these lie.
    for (const std::uint64_t flag : kCloneNamespaceFlags) {
      if (auto s = Add(SCMP_ACT_ERRNO(EPERM), "clone", {Masked(0, flag, flag)}); !s) return s;
    }
    // glibc's clone3 wrappers (pthread_create, posix_spawn, fork helpers) fall back to clone on
    // ENOSYS, where the flags are visible.
    if (auto s = Add(SCMP_ACT_ERRNO(ENOSYS), "clone3", {}); !s) return s;
    summary_.push_back(
        "clone: EPERM when flags contain CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, "
        "CLONE_NEWPID, CLONE_NEWNET or CLONE_NEWCGROUP");
    summary_.push_back("clone3: ENOSYS (its flags cannot be inspected; glibc falls back to clone)");
    return Ok{};
  }

  Status RestrictPersonality() {
    // Allowed: the low 32 bits (the kernel takes an unsigned int) all 0 (PER_LINUX) or all 1
    // (0xffffffff, the query). libseccomp allows one comparison per argument in a rule and ORs
    // rules, so "not all equal" is written as: some bit i is 1 while bit i+1 (mod 32) is 0. Any
    // mixed word has such a pair (walk the cycle of bits from a 1 until the first 0), and neither
    // constant word does: 32 masked compares.
    for (unsigned i = 0; i < 32; ++i) {
      const std::uint64_t bit = 1ULL << i;
      const std::uint64_t next = 1ULL << ((i + 1) % 32);
      if (auto s = Add(SCMP_ACT_ERRNO(EPERM), "personality", {Masked(0, bit | next, bit)}); !s) {
        return s;
      }
    }
    summary_.push_back("personality: EPERM unless 0 (PER_LINUX) or 0xffffffff (query)");
    return Ok{};
  }

  Status DenyIoctls(const std::vector<std::uint32_t>& requests) {
    std::vector<std::string> names;
    for (const std::uint32_t request : requests) {
      if (auto s = Add(SCMP_ACT_ERRNO(EPERM), "ioctl", {Masked(1, kLow32, request)}); !s) return s;
      names.push_back(IoctlName(request));
    }
    summary_.push_back("ioctl: EPERM for request " + Join(names, ", ") +
                       " (low 32 bits compared, as the kernel reads them)");
    return Ok{};
  }

  // A root caller's sandbox is uid 0 over files the host's root owns; with every capability
  // dropped it still may chmod its own files, so `chmod u+s` would leave a setuid-root executable
  // in the workspace for a later host step to run. Each mode bit gets its own rule because rules
  // for one call are alternatives (OR) and a rule may compare each argument once.
  Status DenyPrivilegedModes(bool native_only) {
    constexpr std::uint64_t kBits[] = {S_ISUID, S_ISGID};
    for (const ModeCall& call : kModeCalls) {
      int nr = seccomp_syscall_resolve_name(call.name);
      // libseccomp 2.5.4 predates fchmodat2 (Linux 6.6); the kernel's number is known here.
      if (nr == __NR_SCMP_ERROR && std::strcmp(call.name, "fchmodat2") == 0) nr = __NR_fchmodat2;
      if (nr == __NR_SCMP_ERROR) {
        return PlainError("resolve system call",
                          std::string("libseccomp does not know '") + call.name + "'");
      }
      if (nr < 0 && native_only) continue;  // e.g. open(2) and mkdir(2) do not exist on aarch64
      for (const std::uint64_t bit : kBits) {
        std::vector<std::vector<scmp_arg_cmp>> rules;
        if (call.flags_arg < 0) {
          rules.push_back({Masked(call.mode_arg, bit, bit)});
        } else {
          const auto flags = static_cast<unsigned>(call.flags_arg);
          for (const std::uint64_t creates : {static_cast<std::uint64_t>(O_CREAT), kTmpfileBit}) {
            rules.push_back({Masked(flags, creates, creates), Masked(call.mode_arg, bit, bit)});
          }
        }
        for (const auto& cmps : rules) {
          const int rc = seccomp_rule_add_array(ctx_, SCMP_ACT_ERRNO(EPERM), nr,
                                                static_cast<unsigned>(cmps.size()), cmps.data());
          if (rc < 0) return ErrnoError(std::string("seccomp_rule_add ") + call.name, -rc);
        }
      }
    }
    summary_.push_back(
        "chmod, fchmod, fchmodat, fchmodat2, creat, mkdir, mkdirat, mknod, mknodat, and "
        "open/openat "
        "with O_CREAT or O_TMPFILE: EPERM when the mode has S_ISUID or S_ISGID (openat2 is left to "
        "the host-side sweep)");
    return Ok{};
  }

  // Rules for socket(2) and socketpair(2), whose arguments are (family, type, protocol).
  Status RestrictSockets(const std::vector<SocketFamilyRule>& rules) {
    std::vector<std::string> described;
    for (const char* call : {"socket", "socketpair"}) {
      described.clear();
      if (rules.empty()) {
        if (auto s = Add(SCMP_ACT_ERRNO(EAFNOSUPPORT), call, {}); !s) return s;
        continue;
      }
      std::vector<int> families;
      families.reserve(rules.size());
      for (const SocketFamilyRule& r : rules) families.push_back(r.family);
      const std::vector<std::uint64_t> allowed = SortedUnique(families);
      // Families: everything in [0, max] that is not allowed, block by block, and everything
      // above max. The compares are on all 64 bits, so a family with high garbage bits (which
      // the kernel would truncate to an allowed one) is refused rather than let through.
      for (const Block& b : CoverComplement(allowed, allowed.back())) {
        if (auto s = Add(SCMP_ACT_ERRNO(EAFNOSUPPORT), call, {Masked(0, ~(b.size - 1), b.start)});
            !s) {
          return s;
        }
      }
      if (auto s = Add(SCMP_ACT_ERRNO(EAFNOSUPPORT), call, {Gt(0, allowed.back())}); !s) return s;

      for (const SocketFamilyRule& r : rules) {
        std::string text = FamilyName(r.family);
        if (!r.types.empty()) {
          // The type's low 4 bits, as the kernel masks it (SOCK_NONBLOCK / SOCK_CLOEXEC above).
          for (const Block& b : CoverComplement(SortedUnique(r.types), kSocketTypeMask)) {
            const std::uint64_t mask = kSocketTypeMask & ~(b.size - 1);
            if (auto s =
                    Add(SCMP_ACT_ERRNO(EPERM), call,
                        {Eq(0, static_cast<std::uint64_t>(r.family)), Masked(1, mask, b.start)});
                !s) {
              return s;
            }
          }
          text += " types " + IntList(r.types);
        }
        if (!r.protocols.empty()) {
          const std::vector<std::uint64_t> protos = SortedUnique(r.protocols);
          const scmp_arg_cmp family = Eq(0, static_cast<std::uint64_t>(r.family));
          for (const Block& b : CoverComplement(protos, protos.back())) {
            if (auto s = Add(SCMP_ACT_ERRNO(EPROTONOSUPPORT), call,
                             {family, Masked(2, ~(b.size - 1), b.start)});
                !s) {
              return s;
            }
          }
          if (auto s = Add(SCMP_ACT_ERRNO(EPROTONOSUPPORT), call, {family, Gt(2, protos.back())});
              !s) {
            return s;
          }
          text += " protocols " + IntList(r.protocols);
        }
        described.push_back(text);
      }
    }
    summary_.push_back(
        rules.empty() ? std::string("socket, socketpair: EAFNOSUPPORT for every family")
                      : "socket, socketpair: only " + Join(described, "; ") +
                            "; other families EAFNOSUPPORT, other types EPERM, other protocols "
                            "EPROTONOSUPPORT");
    return Ok{};
  }

  static std::string Version() {
    const scmp_version* v = seccomp_version();
    if (v == nullptr) return "?";
    return std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
           std::to_string(v->micro);
  }

  scmp_filter_ctx ctx_;
  std::vector<ResolvedSyscall>& denied_;
  std::vector<std::string>& skipped_;
  std::vector<std::string>& summary_;
};

}  // namespace

SeccompPolicy DefaultSeccompPolicy(bool allow_inet) {
  SeccompPolicy p;
  p.denied_syscalls = {
      // Mounts, the new mount API, changing root.
      "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
      "fsmount", "fspick", "mount_setattr",
      // Namespaces: creating (unshare; clone is ruled by flag below) and joining.
      "unshare", "setns",
      // Other processes: tracing, memory, descriptors (pidfd_getfd and process_madvise use the
      // same ptrace access check as process_vm_readv).
      "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise",
      // Keyrings are not namespaced: shared with the host user.
      "keyctl", "add_key", "request_key",
      // Large kernel attack surfaces reachable without privilege.
      "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
      "io_uring_register",
      // The host's kernel, clock and devices.
      "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
      "swapon", "swapoff", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "acct",
      "quotactl", "quotactl_fd", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
      "syslog", "vhangup", "iopl", "ioperm", "uselib", "nfsservctl", "sysfs", "_sysctl"};
  p.socket_families.push_back({AF_UNIX, {}, {}});
  if (allow_inet) {
    // Stream and datagram only: no SOCK_RAW, and no SOCK_PACKET, which the kernel turns into an
    // AF_PACKET socket for AF_INET. Protocols limited to what loopback work uses, so that e.g.
    // SCTP or DCCP modules are never autoloaded on the sandbox's behalf (CVE-2017-6074).
    p.socket_families.push_back(
        {AF_INET, {SOCK_STREAM, SOCK_DGRAM}, {0, IPPROTO_ICMP, IPPROTO_TCP, IPPROTO_UDP}});
    p.socket_families.push_back(
        {AF_INET6, {SOCK_STREAM, SOCK_DGRAM}, {0, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMPV6}});
  }
  // Route netlink only: glibc's getifaddrs and if_nameindex, `ip`. Not audit, uevents, etc.
  p.socket_families.push_back({AF_NETLINK, {}, {NETLINK_ROUTE}});
  p.denied_ioctls = {TIOCSTI, TIOCLINUX};
  p.deny_privileged_modes = true;
  return p;
}

Result<SeccompFilter> SeccompFilter::Prepare(const SeccompPolicy& policy) {
  for (const PrebuiltSeccomp& built : PrebuiltSeccompFilters()) {
    // The flag first: it rules out half the table without building a policy to compare.
    if (built.deny_privileged_modes != policy.deny_privileged_modes) continue;
    SeccompPolicy same = DefaultSeccompPolicy(built.allow_inet);
    same.deny_privileged_modes = built.deny_privileged_modes;
    if (!(same == policy)) continue;
    SeccompFilter f;
    f.prebuilt_ = true;
    f.policy_ = policy;
    f.program_.assign(built.program.begin(), built.program.end());
    for (const PrebuiltSyscall& d : built.denied) f.denied_.push_back({d.name, d.nr});
    f.skipped_.assign(built.skipped.begin(), built.skipped.end());
    f.summary_.assign(built.summary.begin(), built.summary.end());
    return f;
  }
  return Compile(policy);
}

Result<SeccompFilter> SeccompFilter::Compile(const SeccompPolicy& policy) {
  SeccompFilter f;
  f.ctx_ = seccomp_init(SCMP_ACT_ALLOW);
  if (f.ctx_ == nullptr) {
    return PlainError("seccomp_init", "libseccomp could not allocate a filter");
  }
  Builder builder(f.ctx_, f.denied_, f.skipped_, f.summary_);
  if (auto s = builder.Build(policy); !s) return std::move(s.error());
  std::sort(f.denied_.begin(), f.denied_.end(),
            [](const ResolvedSyscall& a, const ResolvedSyscall& b) { return a.name < b.name; });

  auto bpf = ExportToString(f.ctx_, seccomp_export_bpf, "seccomp_export_bpf");
  if (!bpf) return std::move(bpf.error());
  if (bpf->empty() || bpf->size() % sizeof(sock_filter) != 0) {
    return PlainError("seccomp_export_bpf",
                      "unexpected program size " + std::to_string(bpf->size()) + " bytes");
  }
  const size_t count = bpf->size() / sizeof(sock_filter);
  if (count > BPF_MAXINSNS) {
    return PlainError("seccomp_export_bpf", "the program has " + std::to_string(count) +
                                                " instructions, over the kernel's limit of " +
                                                std::to_string(BPF_MAXINSNS) +
                                                "; deny fewer values");
  }
  f.program_.resize(count);
  std::memcpy(f.program_.data(), bpf->data(), bpf->size());
  return f;
}

SeccompFilter::SeccompFilter(SeccompFilter&& other) noexcept
    : ctx_(std::exchange(other.ctx_, nullptr)),
      prebuilt_(std::exchange(other.prebuilt_, false)),
      policy_(std::exchange(other.policy_, std::nullopt)),
      program_(std::move(other.program_)),
      denied_(std::move(other.denied_)),
      skipped_(std::move(other.skipped_)),
      summary_(std::move(other.summary_)) {}

SeccompFilter& SeccompFilter::operator=(SeccompFilter&& other) noexcept {
  if (this != &other) {
    Release();
    ctx_ = std::exchange(other.ctx_, nullptr);
    prebuilt_ = std::exchange(other.prebuilt_, false);
    policy_ = std::exchange(other.policy_, std::nullopt);
    program_ = std::move(other.program_);
    denied_ = std::move(other.denied_);
    skipped_ = std::move(other.skipped_);
    summary_ = std::move(other.summary_);
  }
  return *this;
}

SeccompFilter::~SeccompFilter() { Release(); }

void SeccompFilter::Release() {
  if (ctx_ != nullptr) seccomp_release(ctx_);
  ctx_ = nullptr;
}

ChildResult SeccompFilter::Apply() const {
  if (program_.empty()) return ChildResult::Failure(kSeccompStep, EINVAL);
  struct sock_fprog prog {};
  prog.len = static_cast<unsigned short>(program_.size());  // NOLINT(google-runtime-int)
  // The kernel copies the program and never writes through this pointer.
  prog.filter = const_cast<sock_filter*>(program_.data());
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
    return ChildResult::Failure(kSeccompStep, errno);
  }
  return ChildResult::Success();
}

Result<std::string> SeccompFilter::Pfc() const {
  if (ctx_ != nullptr) return ExportToString(ctx_, seccomp_export_pfc, "seccomp_export_pfc");
  if (!policy_) return PlainError("export seccomp PFC", "the filter was moved from");
  auto compiled = Compile(*policy_);
  if (!compiled) return std::move(compiled.error());
  return compiled->Pfc();
}

std::vector<std::string> SeccompFilter::DeniedSyscallNames() const {
  std::vector<std::string> names;
  names.reserve(denied_.size());
  for (const ResolvedSyscall& s : denied_) names.push_back(s.name);
  return names;
}

}  // namespace cagent::launcher
