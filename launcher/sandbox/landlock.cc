#include "launcher/sandbox/landlock.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <map>

namespace cagent::launcher {
namespace {

// ---- Kernel interface newer than the system headers ----
//
// Debian 12's <linux/landlock.h> describes ABI 1-2 only. The values below are the kernel's UAPI
// (include/uapi/linux/landlock.h); each comment names the ABI and the release that added it.

// The syscalls (Linux 5.13). 444-446 are the same on every architecture with the unified syscall
// table (all but alpha).
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

// ABI 1, Linux 5.13.
constexpr std::uint64_t kFsExecute = LANDLOCK_ACCESS_FS_EXECUTE;
constexpr std::uint64_t kFsWriteFile = LANDLOCK_ACCESS_FS_WRITE_FILE;
constexpr std::uint64_t kFsReadFile = LANDLOCK_ACCESS_FS_READ_FILE;
constexpr std::uint64_t kFsReadDir = LANDLOCK_ACCESS_FS_READ_DIR;
constexpr std::uint64_t kFsRemoveDir = LANDLOCK_ACCESS_FS_REMOVE_DIR;
constexpr std::uint64_t kFsRemoveFile = LANDLOCK_ACCESS_FS_REMOVE_FILE;
constexpr std::uint64_t kFsMakeChar = LANDLOCK_ACCESS_FS_MAKE_CHAR;
constexpr std::uint64_t kFsMakeDir = LANDLOCK_ACCESS_FS_MAKE_DIR;
constexpr std::uint64_t kFsMakeReg = LANDLOCK_ACCESS_FS_MAKE_REG;
constexpr std::uint64_t kFsMakeSock = LANDLOCK_ACCESS_FS_MAKE_SOCK;
constexpr std::uint64_t kFsMakeFifo = LANDLOCK_ACCESS_FS_MAKE_FIFO;
constexpr std::uint64_t kFsMakeBlock = LANDLOCK_ACCESS_FS_MAKE_BLOCK;
constexpr std::uint64_t kFsMakeSym = LANDLOCK_ACCESS_FS_MAKE_SYM;
// ABI 2, Linux 5.19: link/rename across directories. Below ABI 2 such operations are always
// denied (EXDEV) inside a domain that handles any filesystem right.
constexpr std::uint64_t kFsRefer = 1ULL << 13;
// ABI 3, Linux 6.2: truncate(2), ftruncate(2), open(O_TRUNC) of a regular file.
constexpr std::uint64_t kFsTruncate = 1ULL << 14;
// ABI 5, Linux 6.10: ioctl(2) on character and block devices (a few generic fd ioctls such as
// FIONREAD and FIOCLEX stay allowed).
constexpr std::uint64_t kFsIoctlDev = 1ULL << 15;
#ifdef LANDLOCK_ACCESS_FS_REFER
static_assert(kFsRefer == LANDLOCK_ACCESS_FS_REFER);
#endif
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
static_assert(kFsTruncate == LANDLOCK_ACCESS_FS_TRUNCATE);
#endif
#ifdef LANDLOCK_ACCESS_FS_IOCTL_DEV
static_assert(kFsIoctlDev == LANDLOCK_ACCESS_FS_IOCTL_DEV);
#endif

// ABI 4, Linux 6.7: TCP port rules.
constexpr int kRuleNetPort = 2;                      // LANDLOCK_RULE_NET_PORT
constexpr std::uint64_t kNetBindTcp = 1ULL << 0;     // LANDLOCK_ACCESS_NET_BIND_TCP
constexpr std::uint64_t kNetConnectTcp = 1ULL << 1;  // LANDLOCK_ACCESS_NET_CONNECT_TCP

// ABI 6, Linux 6.12: scopes.
constexpr std::uint64_t kScopeAbstractUnix = 1ULL << 0;  // LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
constexpr std::uint64_t kScopeSignal = 1ULL << 1;        // LANDLOCK_SCOPE_SIGNAL

// ABI 7, Linux 6.15, adds only LANDLOCK_RESTRICT_SELF_LOG_* flags for landlock_restrict_self
// (audit logging of denials); cagent does not use them.

// struct landlock_ruleset_attr as of ABI 6. The kernel accepts any prefix that covers what it
// knows, so the size passed is the one of the ABI in use (8 bytes: ABI 1-3, 16: ABI 4-5,
// 24: ABI 6+), which keeps older kernels from rejecting the larger struct.
struct RulesetAttr {
  std::uint64_t handled_access_fs;   // ABI 1
  std::uint64_t handled_access_net;  // ABI 4
  std::uint64_t scoped;              // ABI 6
};
static_assert(sizeof(RulesetAttr) == 24);

// struct landlock_net_port_attr (ABI 4). Not packed, unlike landlock_path_beneath_attr.
struct NetPortAttr {
  std::uint64_t allowed_access;
  std::uint64_t port;  // host byte order
};
static_assert(sizeof(NetPortAttr) == 16);

// The rights a rule on a non-directory may carry; anything else gives EINVAL from add_rule
// (security/landlock/fs.c, ACCESS_FILE).
constexpr std::uint64_t kFileRights =
    kFsExecute | kFsWriteFile | kFsReadFile | kFsTruncate | kFsIoctlDev;

// Every filesystem right of each ABI, as the kernel's handled set.
std::uint64_t HandledFs(int abi) {
  if (abi < 1) return 0;
  std::uint64_t mask = kFsExecute | kFsWriteFile | kFsReadFile | kFsReadDir | kFsRemoveDir |
                       kFsRemoveFile | kFsMakeChar | kFsMakeDir | kFsMakeReg | kFsMakeSock |
                       kFsMakeFifo | kFsMakeBlock | kFsMakeSym;
  if (abi >= 2) mask |= kFsRefer;
  if (abi >= 3) mask |= kFsTruncate;
  if (abi >= 5) mask |= kFsIoctlDev;
  return mask;
}

// Read-only trees: read files, list directories, execute. Nothing that changes the tree.
constexpr std::uint64_t kReadOnlyAccess = kFsReadFile | kFsReadDir | kFsExecute;

// Read-write trees: every right except creating device nodes (the sandbox cannot create usable
// ones anyway — nodev mounts, no CAP_MKNOD — but a handled-and-denied right makes that
// independent of the mount flags) and device ioctls (devices belong in device_paths; workspace
// and tmpfs mounts are nodev). Execute is included: build outputs and scripts in the workspace
// must run. Refer lets renames move files between read-write trees; the kernel still refuses a
// rename that would give a file more rights in its new place (EXDEV), e.g. into a read-only tree.
constexpr std::uint64_t kReadWriteAccess =
    kFsExecute | kFsWriteFile | kFsReadFile | kFsReadDir | kFsRemoveDir | kFsRemoveFile |
    kFsMakeDir | kFsMakeReg | kFsMakeSock | kFsMakeFifo | kFsMakeSym | kFsRefer | kFsTruncate;

// Device trees: open existing nodes for reading and writing, list the directory, ioctl on the
// devices (terminal and pty ioctls: tcgetattr, TIOCGPTN, TIOCSWINSZ, ...). No execute, no create
// or remove, no truncate (O_TRUNC is ignored for device files; regular files under /dev, such as
// /dev/shm, need a read-write rule of their own).
constexpr std::uint64_t kDeviceAccess = kFsReadFile | kFsWriteFile | kFsReadDir | kFsIoctlDev;

// Detail values of a failed Apply() that are not a rule index.
constexpr int kDetailCreateRuleset = -2;
constexpr int kDetailRestrictSelf = -3;

std::string AbiBelow(int abi, int needed) {
  return "Landlock ABI " + std::to_string(abi) + " < " + std::to_string(needed) + ": ";
}

// The "what to do" half of a missing required feature.
std::string MissingFeature(int abi, int needed, const char* what, const char* linux_version,
                           const char* rules_name) {
  std::string out;
  if (abi == 0) {
    out = "kernel lacks Landlock (ABI 0), needed for ";
  } else {
    out = "kernel's Landlock ABI " + std::to_string(abi) + " lacks ";
  }
  out += what;
  out += " (ABI " + std::to_string(needed) + "); run on Linux >= " + linux_version;
  if (abi == 0) out += " with landlock in the lsm= list";
  out += ", or mark the ";
  out += rules_name;
  out += " best-effort";
  return out;
}

int CreateRuleset(const RulesetAttr* attr, size_t size, std::uint32_t flags) {
  return static_cast<int>(::syscall(SYS_landlock_create_ruleset, attr, size, flags));
}

// Closes `fd` without disturbing errno (the caller reports the errno of the failure).
void CloseKeepErrno(int fd) {
  const int saved = errno;
  ::close(fd);
  errno = saved;
}

}  // namespace

int LandlockAbi() {
  const int abi = CreateRuleset(nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  // ENOSYS: not built in; EOPNOTSUPP: built in but not enabled at boot (lsm=).
  return abi < 0 ? 0 : abi;
}

std::string LandlockSummary::ToString() const {
  auto on = [](bool b) { return b ? "enforced" : "off"; };
  std::string out = "Landlock ABI " + std::to_string(abi) + ": filesystem " + on(fs) +
                    ", network " + on(net) + ", scopes " + on(scopes);
  for (const auto& d : downgrades) out += "; " + d;
  return out;
}

Result<LandlockRuleset> LandlockRuleset::Prepare(const LandlockRules& rules, int abi) {
  if (abi < 0) {
    return PlainError("prepare Landlock rules", "negative ABI version")
        .WithCode(Error::Code::kInvalidInput);
  }
  LandlockRuleset rs;
  rs.abi_ = abi;
  std::vector<std::string> missing;  // required features this ABI lacks

  // ---- filesystem ----
  const std::pair<const std::vector<std::string>*, const char*> classes[] = {
      {&rules.read_only, "read-only"},
      {&rules.read_write, "read-write"},
      {&rules.device_paths, "device"},
  };
  for (const auto& [paths, kind] : classes) {
    for (const auto& p : *paths) {
      // A relative path would be resolved against whatever the child's cwd is at apply time.
      if (p.empty() || p[0] != '/') {
        return PlainError("Landlock " + std::string(kind) + " path '" + p + "'",
                          "not an absolute path; rules name paths inside the sandbox view")
            .WithCode(Error::Code::kInvalidInput);
      }
    }
  }
  if (rules.restrict_fs) {
    if (abi < 1) {
      if (rules.require_fs) {
        missing.push_back(MissingFeature(abi, 1, "filesystem rules", "5.13", "filesystem rules"));
      } else {
        rs.downgrades_.push_back(
            "Landlock unavailable (ABI 0): filesystem rules not enforced (needs Linux >= 5.13 "
            "with landlock in the lsm= list)");
      }
    } else {
      rs.handled_fs_ = HandledFs(abi);
      if (abi < 2) {
        rs.downgrades_.push_back(AbiBelow(abi, 2) +
                                 "renames and links across directories are always denied (EXDEV), "
                                 "even within read-write trees (needs Linux >= 5.19)");
      }
      if (abi < 3) {
        rs.downgrades_.push_back(AbiBelow(abi, 3) +
                                 "truncate(2) is not restricted (needs Linux >= 6.2)");
      }
      if (abi < 5 && !rules.device_paths.empty()) {
        rs.downgrades_.push_back(
            AbiBelow(abi, 5) + "ioctl(2) on device files is not restricted (needs Linux >= 6.10)");
      }
      const std::uint64_t access[] = {kReadOnlyAccess, kReadWriteAccess, kDeviceAccess};
      for (size_t c = 0; c < 3; ++c) {
        for (const auto& p : *classes[c].first) {
          rs.paths_.push_back({p, access[c] & rs.handled_fs_, classes[c].second});
        }
      }
    }
  }

  // ---- network ----
  if (!rules.restrict_tcp && (!rules.tcp_bind_ports.empty() || !rules.tcp_connect_ports.empty())) {
    return PlainError("Landlock TCP rules",
                      "ports are listed but restrict_tcp is off; set restrict_tcp to enforce them")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (rules.restrict_tcp) {
    if (abi < 4) {
      if (rules.require_net) {
        missing.push_back(MissingFeature(abi, 4, "TCP bind/connect rules", "6.7", "network rules"));
      } else {
        rs.downgrades_.push_back(AbiBelow(abi, 4) +
                                 "TCP bind/connect rules not enforced (needs Linux >= 6.7)");
      }
    } else {
      rs.handled_net_ = kNetBindTcp | kNetConnectTcp;
      // One rule per port, with the union of its rights (the kernel would merge them too).
      std::map<std::uint16_t, std::uint64_t> ports;
      for (const std::uint16_t p : rules.tcp_bind_ports) ports[p] |= kNetBindTcp;
      for (const std::uint16_t p : rules.tcp_connect_ports) ports[p] |= kNetConnectTcp;
      for (const auto& [port, access] : ports) rs.ports_.push_back({port, access});
    }
  }

  // ---- scopes ----
  std::uint64_t scopes = 0;
  if (rules.scope_abstract_unix) scopes |= kScopeAbstractUnix;
  if (rules.scope_signals) scopes |= kScopeSignal;
  if (scopes != 0) {
    if (abi < 6) {
      const char* what = scopes == (kScopeAbstractUnix | kScopeSignal)
                             ? "abstract Unix socket and signal scoping"
                         : scopes == kScopeAbstractUnix ? "abstract Unix socket scoping"
                                                        : "signal scoping";
      if (rules.require_scopes) {
        missing.push_back(MissingFeature(abi, 6, what, "6.12", "scopes"));
      } else {
        rs.downgrades_.push_back(AbiBelow(abi, 6) + what + " not enforced (needs Linux >= 6.12)");
      }
    } else {
      rs.scoped_ = scopes;
    }
  }

  if (!missing.empty()) {
    std::string detail;
    for (const auto& m : missing) detail += (detail.empty() ? "" : "; ") + m;
    // Fail closed: the profile requires what this kernel does not have.
    return PlainError("Landlock", detail).WithCode(Error::Code::kUnsupported);
  }
  return rs;
}

ChildResult LandlockRuleset::Apply() const {
  if (handled_fs_ == 0 && handled_net_ == 0 && scoped_ == 0) return ChildResult::Success();

  const RulesetAttr attr{handled_fs_, handled_net_, scoped_};
  const size_t attr_size = abi_ >= 6 ? 24 : abi_ >= 4 ? 16 : 8;
  const int ruleset = CreateRuleset(&attr, attr_size, 0);
  if (ruleset < 0) return ChildResult::Failure(kLandlockStep, errno, kDetailCreateRuleset);

  int index = 0;
  for (const PathRule& rule : paths_) {
    const int fd = ::open(rule.path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) {
      // Not in this view (e.g. an optional bind that was skipped): nothing to grant.
      if (errno == ENOENT || errno == ENOTDIR) {
        ++index;
        continue;
      }
      const int err = errno;
      ::close(ruleset);
      return ChildResult::Failure(kLandlockStep, err, index);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      ::close(ruleset);
      return ChildResult::Failure(kLandlockStep, err, index);
    }
    // A rule on a file may only carry file rights (EINVAL otherwise).
    const std::uint64_t access = S_ISDIR(st.st_mode) ? rule.access : rule.access & kFileRights;
    if (access != 0) {  // an empty rule is ENOMSG; it would grant nothing anyway
      const struct landlock_path_beneath_attr beneath { access, fd };
      if (::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) != 0) {
        const int err = errno;
        ::close(fd);
        ::close(ruleset);
        return ChildResult::Failure(kLandlockStep, err, index);
      }
    }
    ::close(fd);
    ++index;
  }
  for (const PortRule& rule : ports_) {
    const NetPortAttr port{rule.access, rule.port};
    if (::syscall(SYS_landlock_add_rule, ruleset, kRuleNetPort, &port, 0) != 0) {
      CloseKeepErrno(ruleset);
      return ChildResult::Failure(kLandlockStep, errno, index);
    }
    ++index;
  }
  if (::syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
    CloseKeepErrno(ruleset);
    return ChildResult::Failure(kLandlockStep, errno, kDetailRestrictSelf);
  }
  ::close(ruleset);
  return ChildResult::Success();
}

std::string LandlockRuleset::DescribeFailure(int detail) const {
  if (detail == kDetailCreateRuleset) return "landlock_create_ruleset";
  if (detail == kDetailRestrictSelf) return "landlock_restrict_self";
  if (detail >= 0 && static_cast<size_t>(detail) < paths_.size()) {
    const PathRule& r = paths_[static_cast<size_t>(detail)];
    return "add Landlock rule for " + r.path + " (" + r.kind + ")";
  }
  const size_t port_index = static_cast<size_t>(detail) - paths_.size();
  if (detail >= 0 && port_index < ports_.size()) {
    const PortRule& r = ports_[port_index];
    std::string what;
    if (r.access & kNetBindTcp) what = "bind";
    if (r.access & kNetConnectTcp) what += what.empty() ? "connect" : "/connect";
    return "add Landlock rule for TCP port " + std::to_string(r.port) + " (" + what + ")";
  }
  return "apply Landlock rules";
}

LandlockSummary LandlockRuleset::Summary() const {
  LandlockSummary s;
  s.abi = abi_;
  s.fs = handled_fs_ != 0;
  s.net = handled_net_ != 0;
  s.scopes = scoped_ != 0;
  s.handled_fs = handled_fs_;
  s.handled_net = handled_net_;
  s.scoped = scoped_;
  s.downgrades = downgrades_;
  return s;
}

}  // namespace cagent::launcher
