// Tests of the seccomp layer, in three kinds:
//
//   * Prepare: the policy checks and what the filter reports about itself.
//   * Program: the exported BPF run through a small classic-BPF interpreter (below) over many
//     argument values, including the ones no test could safely make live (reboot, kexec, modules)
//     and edge cases (high bits, every socket family and type).
//   * Live: the filter installed in a forked child, never in the test runner. Each denial is shown
//     twice, in a bare child (the call works, or at least does not answer EPERM) and in a filtered
//     one (it answers the filter's errno), so a guard is never only seen "working". Ordinary work
//     (threads, fork, exec, Unix and loopback sockets, terminal queries) is run filtered too.
#include "launcher/sandbox/seccomp.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace cagent::launcher {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

#if defined(__x86_64__)
constexpr std::uint32_t kNativeArch = AUDIT_ARCH_X86_64;
constexpr std::uint32_t kOtherArch = AUDIT_ARCH_AARCH64;
#elif defined(__aarch64__)
constexpr std::uint32_t kNativeArch = AUDIT_ARCH_AARCH64;
constexpr std::uint32_t kOtherArch = AUDIT_ARCH_X86_64;
#endif

using U64List = std::initializer_list<std::uint64_t>;

// Constants of newer UAPI headers, spelled out so the test does not depend on their presence.
constexpr unsigned kOpenTreeClone = 1;      // OPEN_TREE_CLONE
constexpr unsigned kFsopenCloexec = 1;      // FSOPEN_CLOEXEC
constexpr int kKeyctlGetKeyringId = 0;      // KEYCTL_GET_KEYRING_ID
constexpr int kKeySpecProcessKeyring = -2;  // KEY_SPEC_PROCESS_KEYRING
constexpr int kUffdUserModeOnly = 1;        // UFFD_USER_MODE_ONLY (5.11+)

// ---- the filters under test -------------------------------------------------------------------

SeccompFilter MustPrepare(const SeccompPolicy& policy) {
  auto f = SeccompFilter::Prepare(policy);
  if (!f.ok()) {
    ADD_FAILURE() << "Prepare failed: " << f.error().Message();
    std::abort();
  }
  return std::move(f).value();
}

// The default rules with AF_INET/AF_INET6 (network mode "loopback").
const SeccompFilter& InetFilter() {
  static const SeccompFilter f = MustPrepare(DefaultSeccompPolicy(/*allow_inet=*/true));
  return f;
}

// The default rules without them (network mode "none").
const SeccompFilter& NoInetFilter() {
  static const SeccompFilter f = MustPrepare(DefaultSeccompPolicy(/*allow_inet=*/false));
  return f;
}

// ---- a classic-BPF interpreter for seccomp programs -------------------------------------------

// Runs `prog` on `data` as the kernel would (linux/filter.h semantics: 32-bit A and X, 16 scratch
// words, forward jumps only) and returns the SECCOMP_RET_* value. Fails the test on an instruction
// a seccomp program may not contain.
std::uint32_t RunBpf(const std::vector<sock_filter>& prog, const seccomp_data& data) {
  std::uint32_t a = 0;
  std::uint32_t x = 0;
  std::uint32_t mem[BPF_MEMWORDS] = {};
  for (size_t pc = 0; pc < prog.size(); ++pc) {
    const sock_filter& in = prog[pc];
    const std::uint32_t src = BPF_SRC(in.code) == BPF_X ? x : in.k;
    switch (BPF_CLASS(in.code)) {
      case BPF_LD:
        if (BPF_MODE(in.code) == BPF_ABS && BPF_SIZE(in.code) == BPF_W &&
            in.k + 4 <= sizeof(data) && in.k % 4 == 0) {
          std::memcpy(&a, reinterpret_cast<const char*>(&data) + in.k, 4);
        } else if (BPF_MODE(in.code) == BPF_IMM) {
          a = in.k;
        } else if (BPF_MODE(in.code) == BPF_MEM && in.k < BPF_MEMWORDS) {
          a = mem[in.k];
        } else if (BPF_MODE(in.code) == BPF_LEN) {
          a = sizeof(data);
        } else {
          ADD_FAILURE() << "bad load at " << pc;
          return 0;
        }
        break;
      case BPF_LDX:
        if (BPF_MODE(in.code) == BPF_IMM) {
          x = in.k;
        } else if (BPF_MODE(in.code) == BPF_MEM && in.k < BPF_MEMWORDS) {
          x = mem[in.k];
        } else if (BPF_MODE(in.code) == BPF_LEN) {
          x = sizeof(data);
        } else {
          ADD_FAILURE() << "bad ldx at " << pc;
          return 0;
        }
        break;
      case BPF_ST:
      case BPF_STX:
        if (in.k >= BPF_MEMWORDS) {
          ADD_FAILURE() << "bad store at " << pc;
          return 0;
        }
        mem[in.k] = BPF_CLASS(in.code) == BPF_ST ? a : x;
        break;
      case BPF_ALU:
        switch (BPF_OP(in.code)) {
          case BPF_ADD:
            a += src;
            break;
          case BPF_SUB:
            a -= src;
            break;
          case BPF_MUL:
            a *= src;
            break;
          case BPF_DIV:
            a = src == 0 ? 0 : a / src;
            break;
          case BPF_MOD:
            a = src == 0 ? 0 : a % src;
            break;
          case BPF_OR:
            a |= src;
            break;
          case BPF_AND:
            a &= src;
            break;
          case BPF_XOR:
            a ^= src;
            break;
          case BPF_LSH:
            a = src >= 32 ? 0 : a << src;
            break;
          case BPF_RSH:
            a = src >= 32 ? 0 : a >> src;
            break;
          case BPF_NEG:
            a = 0U - a;
            break;
          default:
            ADD_FAILURE() << "bad alu at " << pc;
            return 0;
        }
        break;
      case BPF_JMP: {
        if (BPF_OP(in.code) == BPF_JA) {
          pc += in.k;
          break;
        }
        bool taken = false;
        switch (BPF_OP(in.code)) {
          case BPF_JEQ:
            taken = a == src;
            break;
          case BPF_JGT:
            taken = a > src;
            break;
          case BPF_JGE:
            taken = a >= src;
            break;
          case BPF_JSET:
            taken = (a & src) != 0;
            break;
          default:
            ADD_FAILURE() << "bad jump at " << pc;
            return 0;
        }
        pc += taken ? in.jt : in.jf;
        break;
      }
      case BPF_RET:
        return BPF_RVAL(in.code) == BPF_A ? a : in.k;
      case BPF_MISC:
        if (BPF_MISCOP(in.code) == BPF_TAX) {
          x = a;
        } else {
          a = x;
        }
        break;
      default:
        ADD_FAILURE() << "bad instruction class at " << pc;
        return 0;
    }
  }
  ADD_FAILURE() << "the program ran off its end";
  return 0;
}

// The verdict of `filter` on one system call, in words: "allow", "kill-process", or the errno's
// name ("EPERM").
std::string Verdict(const SeccompFilter& filter, std::uint64_t nr,
                    std::initializer_list<std::uint64_t> args = {},
                    std::uint32_t arch = kNativeArch) {
  seccomp_data data{};
  data.nr = static_cast<int>(nr);
  data.arch = arch;
  size_t i = 0;
  for (const std::uint64_t arg : args) data.args[i++] = arg;
  const std::uint32_t ret = RunBpf(filter.Program(), data);
  switch (ret & SECCOMP_RET_ACTION_FULL) {
    case SECCOMP_RET_ALLOW:
      return "allow";
    case SECCOMP_RET_KILL_PROCESS:
      return "kill-process";
    case SECCOMP_RET_ERRNO: {
      const char* name = strerrorname_np(static_cast<int>(ret & SECCOMP_RET_DATA));
      return name != nullptr ? name : "errno " + std::to_string(ret & SECCOMP_RET_DATA);
    }
    default:
      return "action " + std::to_string(ret);
  }
}

// ---- running a call in a forked child ---------------------------------------------------------

// Exit codes a child uses besides an operation's errno (which is below 134 on Linux).
constexpr int kSetupFailedCode = 200;  // the test's own preparation failed (see Setup callbacks)
constexpr int kApplyFailedCode = 201;  // installing the filter failed
constexpr int kUnexpectedCode = 202;   // the call "succeeded" with a wrong result

// How a forked child ended: `code` if it exited, else the signal that killed it.
struct Outcome {
  int code = -1;
  int signal = 0;
  bool operator==(const Outcome&) const = default;
};

Outcome Exit(int code) { return {code, 0}; }
Outcome Killed(int sig) { return {-1, sig}; }
const Outcome kSuccess = Exit(0);
const Outcome kSetupFailed = Exit(kSetupFailedCode);

void PrintTo(const Outcome& o, std::ostream* os) {
  if (o.signal != 0) {
    *os << "killed by SIG" << (sigabbrev_np(o.signal) ? sigabbrev_np(o.signal) : "?");
  } else if (o.code == 0) {
    *os << "exit 0 (success)";
  } else if (o.code == kSetupFailedCode) {
    *os << "exit " << o.code << " (test setup failed)";
  } else if (o.code == kApplyFailedCode) {
    *os << "exit " << o.code << " (filter not installed)";
  } else if (o.code == kUnexpectedCode) {
    *os << "exit " << o.code << " (unexpected result)";
  } else {
    const char* name = strerrorname_np(o.code);
    *os << "exit " << o.code << " (" << (name ? name : "?") << ")";
  }
}

// 0 if a system call returned success (r >= 0), else its errno.
int ErrnoOf(long r) { return r < 0 ? errno : 0; }  // NOLINT(google-runtime-int)

int NoSetup() { return 0; }

// Forks; the child runs `setup` (returning 0 or an errno), then installs `filter` (if not null)
// after no_new_privs, then exits with what `op` returns. Never touches the test runner.
template <typename Setup, typename Op>
Outcome RunInChild(const SeccompFilter* filter, Setup&& setup, Op&& op) {
  const pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return Exit(-1);
  }
  if (pid == 0) {
    const struct rlimit no_core { 0, 0 };
    ::setrlimit(RLIMIT_CORE, &no_core);  // SIGSYS would dump core otherwise
    ::alarm(60);                         // a hung child must not hang the suite
    if (setup() != 0) ::_exit(kSetupFailedCode);
    if (filter != nullptr) {
      if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(kApplyFailedCode);
      if (!filter->Apply().ok) ::_exit(kApplyFailedCode);
    }
    ::_exit(op());
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) return Killed(WTERMSIG(status));
  return Exit(WEXITSTATUS(status));
}

// The same call in a bare child and in a filtered one.
struct Twin {
  Outcome bare;
  Outcome filtered;
};

template <typename Setup, typename Op>
Twin RunTwin(const SeccompFilter& filter, Setup&& setup, Op&& op) {
  return {RunInChild(nullptr, setup, op), RunInChild(&filter, setup, op)};
}

template <typename Op>
Twin RunTwin(const SeccompFilter& filter, Op&& op) {
  return RunTwin(filter, NoSetup, op);
}

template <typename Op>
Outcome RunFiltered(Op&& op, const SeccompFilter& filter = InetFilter()) {
  return RunInChild(&filter, NoSetup, op);
}

// Setup: a new user namespace (the child holds every capability over it) plus `more` namespaces
// owned by it, so that privileged calls succeed in the bare twin without privilege on the host.
auto InNewUserNamespace(int more = 0) {
  return [more] { return ::unshare(CLONE_NEWUSER | more) == 0 ? 0 : errno; };
}

#define SKIP_WITHOUT_USER_NAMESPACES(twin)                                                 \
  if ((twin).bare == kSetupFailed) {                                                       \
    GTEST_SKIP() << "unprivileged user namespaces are unavailable on this kernel, so the " \
                    "bare twin cannot show the call working";                              \
  }

// ---- Prepare and what the filter reports ------------------------------------------------------

TEST(SeccompPolicyTest, DefaultPolicyDeniesTheDocumentedCallsAndFamilies) {
  const SeccompPolicy p = DefaultSeccompPolicy(true);
  for (const char* name :
       {"mount", "umount2", "pivot_root", "unshare", "setns", "ptrace", "process_vm_readv",
        "keyctl", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "init_module",
        "kexec_load", "reboot", "clock_settime", "open_by_handle_at", "_sysctl"}) {
    EXPECT_THAT(p.denied_syscalls, Contains(name));
  }
  std::vector<int> families;
  for (const SocketFamilyRule& r : p.socket_families) families.push_back(r.family);
  EXPECT_THAT(families, ElementsAre(AF_UNIX, AF_INET, AF_INET6, AF_NETLINK));
  EXPECT_THAT(p.denied_ioctls, ElementsAre(TIOCSTI, TIOCLINUX));
  EXPECT_TRUE(p.reject_foreign_abis);
  EXPECT_TRUE(p.deny_namespace_clone);
  EXPECT_TRUE(p.restrict_personality);

  families.clear();
  for (const SocketFamilyRule& r : DefaultSeccompPolicy(false).socket_families) {
    families.push_back(r.family);
  }
  EXPECT_THAT(families, ElementsAre(AF_UNIX, AF_NETLINK));
}

TEST(SeccompFilterTest, PrepareReportsWhatItFilters) {
  const SeccompFilter& f = InetFilter();
  const std::vector<std::string> names = f.DeniedSyscallNames();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_THAT(names, Contains("ptrace"));
  EXPECT_THAT(names, Contains("io_uring_setup"));
  EXPECT_THAT(names, Not(Contains("clone")));  // ruled by argument, not denied outright
  EXPECT_EQ(names.size(), DefaultSeccompPolicy(true).denied_syscalls.size());
  EXPECT_TRUE(f.SkippedSyscalls().empty());  // every default name exists on x86_64/aarch64
  for (const ResolvedSyscall& s : f.DeniedSyscalls()) {
    if (s.name == "ptrace") {
      EXPECT_EQ(s.nr, __NR_ptrace);
    }
  }
  EXPECT_FALSE(f.Program().empty());
  EXPECT_LE(f.Program().size(), static_cast<size_t>(BPF_MAXINSNS));
  const std::string summary = ::testing::PrintToString(f.RuleSummary());
  EXPECT_THAT(summary, HasSubstr("TIOCSTI"));
  EXPECT_THAT(summary, HasSubstr("CLONE_NEWUSER"));
  EXPECT_THAT(summary, HasSubstr("AF_NETLINK protocols 0"));
  EXPECT_THAT(summary, HasSubstr("SIGSYS"));
}

TEST(SeccompFilterTest, PfcShowsTheRulesForAudits) {
  auto pfc = InetFilter().Pfc();
  ASSERT_TRUE(pfc.ok()) << pfc.error().Message();
  EXPECT_THAT(*pfc, HasSubstr("\"ptrace\""));
  EXPECT_THAT(*pfc, HasSubstr("ERRNO(1)"));             // EPERM
  EXPECT_THAT(*pfc, HasSubstr("ERRNO(38)"));            // ENOSYS for clone3
  EXPECT_THAT(*pfc, HasSubstr("ERRNO(97)"));            // EAFNOSUPPORT
  EXPECT_THAT(*pfc, HasSubstr("action KILL_PROCESS"));  // foreign ABIs
}

TEST(SeccompFilterTest, UnknownSyscallNameIsAnError) {
  SeccompPolicy p;
  p.socket_families = {{AF_UNIX, {}, {}}};
  p.denied_syscalls = {"ptrace", "ptarce"};
  auto f = SeccompFilter::Prepare(p);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().Message(), HasSubstr("knows no system call 'ptarce'"));
  EXPECT_THAT(f.error().Message(), HasSubstr("check the spelling"));
}

TEST(SeccompFilterTest, SyscallOfAnotherArchitectureIsSkippedAndReported) {
  SeccompPolicy p;
  p.socket_families = {{AF_UNIX, {}, {}}};
  p.denied_syscalls = {"umount", "ptrace", "ptrace"};  // umount: i386, arm, ... but not x86_64
  auto f = SeccompFilter::Prepare(p);
  ASSERT_TRUE(f.ok()) << f.error().Message();
  EXPECT_THAT(f->SkippedSyscalls(), ElementsAre("umount"));
  EXPECT_THAT(f->DeniedSyscallNames(), ElementsAre("ptrace"));
}

TEST(SeccompFilterTest, ConflictingRulesAreRejected) {
  SeccompPolicy p = DefaultSeccompPolicy(true);
  p.denied_syscalls.push_back("socket");
  auto f = SeccompFilter::Prepare(p);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().Message(), HasSubstr("'socket' is both denied outright"));
  EXPECT_THAT(f.error().Message(), HasSubstr("socket_families"));

  p = DefaultSeccompPolicy(true);
  p.denied_syscalls.push_back("clone3");
  f = SeccompFilter::Prepare(p);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().Message(), HasSubstr("deny_namespace_clone"));
  // Without the clone rules, denying clone3 outright is unambiguous.
  p.deny_namespace_clone = false;
  f = SeccompFilter::Prepare(p);
  ASSERT_TRUE(f.ok()) << f.error().Message();
  EXPECT_EQ(Verdict(*f, __NR_clone3), "EPERM");
  EXPECT_EQ(Verdict(*f, __NR_clone, {CLONE_NEWUSER | SIGCHLD}), "allow");
}

TEST(SeccompFilterTest, InvalidSocketRulesAreRejected) {
  SeccompPolicy p;
  p.socket_families = {{AF_INET, {SOCK_STREAM | SOCK_CLOEXEC}, {}}};
  auto f = SeccompFilter::Prepare(p);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().Message(), HasSubstr("without SOCK_NONBLOCK / SOCK_CLOEXEC"));

  p.socket_families = {{-1, {}, {}}};
  f = SeccompFilter::Prepare(p);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().Message(), HasSubstr("socket family -1 is out of range"));

  p.socket_families = {{AF_UNIX, {}, {}}, {AF_INET, {}, {-3}}};
  f = SeccompFilter::Prepare(p);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().Message(), HasSubstr("socket protocol -3 of AF_INET"));

  p.socket_families = {{AF_UNIX, {}, {}}, {AF_UNIX, {SOCK_STREAM}, {}}};
  f = SeccompFilter::Prepare(p);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().Message(), HasSubstr("AF_UNIX has more than one socket rule"));
}

// The build's table (seccomp_prebuilt.h) is what libseccomp makes of the default policies now,
// instruction for instruction, with the same names and summary; and Prepare takes it for those
// policies only. The Program and Live tests above run through Prepare, so they check the
// prebuilt programs' behaviour.
TEST(SeccompFilterTest, PrebuiltProgramsAreWhatLibseccompCompiles) {
  int entries = 0;
  for (const bool inet : {false, true}) {
    for (const bool modes : {true, false}) {
      SeccompPolicy policy = DefaultSeccompPolicy(inet);
      policy.deny_privileged_modes = modes;
      SCOPED_TRACE(::testing::Message() << "allow_inet " << inet << ", modes " << modes);
      const SeccompFilter prepared = MustPrepare(policy);
      ASSERT_TRUE(prepared.prebuilt());
      auto compiled = SeccompFilter::Compile(policy);
      ASSERT_TRUE(compiled.ok()) << compiled.error().Message();
      EXPECT_FALSE(compiled->prebuilt());
      ASSERT_EQ(prepared.Program().size(), compiled->Program().size());
      EXPECT_EQ(0, std::memcmp(prepared.Program().data(), compiled->Program().data(),
                               prepared.Program().size() * sizeof(sock_filter)));
      EXPECT_EQ(prepared.DeniedSyscallNames(), compiled->DeniedSyscallNames());
      ASSERT_EQ(prepared.DeniedSyscalls().size(), compiled->DeniedSyscalls().size());
      for (size_t i = 0; i < prepared.DeniedSyscalls().size(); ++i) {
        EXPECT_EQ(prepared.DeniedSyscalls()[i].nr, compiled->DeniedSyscalls()[i].nr);
      }
      EXPECT_EQ(prepared.SkippedSyscalls(), compiled->SkippedSyscalls());
      EXPECT_EQ(prepared.RuleSummary(), compiled->RuleSummary());
      // The PFC of a prebuilt filter is compiled on demand: the same text.
      auto a = prepared.Pfc();
      auto b = compiled->Pfc();
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(*a, *b);
      ++entries;
    }
  }
  EXPECT_EQ(entries, 4);
}

TEST(SeccompFilterTest, OtherPoliciesAreCompiled) {
  SeccompPolicy policy = DefaultSeccompPolicy(false);
  policy.denied_ioctls.push_back(0x5413);  // TIOCGWINSZ: not in the default
  const SeccompFilter f = MustPrepare(policy);
  EXPECT_FALSE(f.prebuilt());
  const SeccompFilter d = MustPrepare(DefaultSeccompPolicy(false));
  EXPECT_TRUE(d.prebuilt());
  EXPECT_NE(f.Program().size(), d.Program().size());
  SeccompPolicy foreign = DefaultSeccompPolicy(true);
  foreign.reject_foreign_abis = false;
  EXPECT_FALSE(MustPrepare(foreign).prebuilt());
}

TEST(SeccompFilterTest, MovedFromFilterRefusesToApply) {
  SeccompFilter f = MustPrepare(DefaultSeccompPolicy(false));
  SeccompFilter g = std::move(f);
  EXPECT_FALSE(g.Program().empty());
  // NOLINTBEGIN(bugprone-use-after-move): the moved-from state is what is under test.
  // Returns before any system call: safe in the test runner.
  const ChildResult r = f.Apply();  // NOLINT(clang-analyzer-cplusplus.Move)
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.err, EINVAL);
  EXPECT_EQ(r.step, kSeccompStep);
  EXPECT_FALSE(f.Pfc().ok());  // NOLINT(clang-analyzer-cplusplus.Move)
  // NOLINTEND(bugprone-use-after-move)
  EXPECT_TRUE(g.Pfc().ok());
}

TEST(SeccompFilterTest, ApplyWithoutNoNewPrivsFailsWithEacces) {
  // Without no_new_privs and without CAP_SYS_ADMIN the kernel refuses a filter: the caller's
  // contract. Root drops to nobody first so that it lacks CAP_SYS_ADMIN too.
  const SeccompFilter& f = InetFilter();
  const Outcome o = RunInChild(
      nullptr,
      [] {
        if (::geteuid() == 0 && ::setresuid(65534, 65534, 65534) != 0) return errno;
        return 0;
      },
      [&f] {
        const ChildResult r = f.Apply();
        if (r.ok) return kUnexpectedCode;
        return r.step == kSeccompStep ? r.err : kUnexpectedCode;
      });
  EXPECT_EQ(o, Exit(EACCES));
}

// ---- the program, through the interpreter -----------------------------------------------------

TEST(SeccompProgramTest, EveryDeniedSyscallAnswersEperm) {
  const SeccompFilter& f = InetFilter();
  for (const ResolvedSyscall& s : f.DeniedSyscalls()) {
    EXPECT_EQ(Verdict(f, static_cast<std::uint64_t>(s.nr)), "EPERM") << s.name;
  }
  // Cross-checked against the C library's numbering, not only libseccomp's.
  for (const long nr : {__NR_mount,  // NOLINT(google-runtime-int)
                        __NR_umount2,
                        __NR_pivot_root,
                        __NR_unshare,
                        __NR_setns,
                        __NR_ptrace,
                        __NR_process_vm_writev,
                        __NR_keyctl,
                        __NR_bpf,
                        __NR_perf_event_open,
                        __NR_userfaultfd,
                        __NR_io_uring_setup,
                        __NR_io_uring_enter,
                        __NR_init_module,
                        __NR_finit_module,
                        __NR_kexec_load,
                        __NR_kexec_file_load,
                        __NR_reboot,
                        __NR_swapon,
                        __NR_settimeofday,
                        __NR_clock_settime,
                        __NR_open_by_handle_at,
                        __NR_fsopen,
                        __NR_move_mount,
                        __NR_pidfd_getfd}) {  // NOLINT
    EXPECT_EQ(Verdict(f, static_cast<std::uint64_t>(nr)), "EPERM") << "syscall " << nr;
  }
}

TEST(SeccompProgramTest, EverythingElseIsAllowed) {
  // Every other number up to well past the last system call, with all-zero arguments (which no
  // argument rule denies except socket family 0 and personality none), passes.
  const SeccompFilter& f = InetFilter();
  std::set<long> ruled = {__NR_socket, __NR_socketpair, __NR_clone3};  // NOLINT
  for (const ResolvedSyscall& s : f.DeniedSyscalls()) ruled.insert(s.nr);
  for (long nr = 0; nr < 1024; ++nr) {  // NOLINT(google-runtime-int)
    if (ruled.count(nr) != 0) continue;
    EXPECT_EQ(Verdict(f, static_cast<std::uint64_t>(nr)), "allow") << "syscall " << nr;
  }
  // Thread creation as glibc does it through clone, and plain fork.
  constexpr std::uint64_t kThreadFlags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
                                         CLONE_THREAD | CLONE_SYSVSEM | CLONE_SETTLS |
                                         CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
  EXPECT_EQ(Verdict(f, __NR_clone, {kThreadFlags}), "allow");
  EXPECT_EQ(Verdict(f, __NR_clone, {CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD}), "allow");
  EXPECT_EQ(Verdict(f, __NR_clone, {CLONE_VM | CLONE_VFORK | SIGCHLD}), "allow");
}

TEST(SeccompProgramTest, ForeignAbisKillTheProcess) {
  const SeccompFilter& f = InetFilter();
  EXPECT_EQ(Verdict(f, __NR_getpid), "allow");
#if defined(__x86_64__)
  EXPECT_EQ(Verdict(f, 20, {}, AUDIT_ARCH_I386), "kill-process");   // i386 getpid
  EXPECT_EQ(Verdict(f, 0x40000000 | 39), "kill-process");           // x32 getpid
  EXPECT_EQ(Verdict(f, 0x40000000 | __NR_ptrace), "kill-process");  // x32 ptrace
#endif
  EXPECT_EQ(Verdict(f, 172, {}, kOtherArch), "kill-process");
  EXPECT_EQ(Verdict(f, 0, {}, AUDIT_ARCH_ARM), "kill-process");
}

#if defined(__x86_64__)
TEST(SeccompProgramTest, CompatibilityAbisGetTheSameRulesWhenAllowed) {
  SeccompPolicy p = DefaultSeccompPolicy(true);
  p.denied_syscalls.push_back("umount");  // i386 only
  p.reject_foreign_abis = false;
  const SeccompFilter f = MustPrepare(p);
  EXPECT_THAT(f.SkippedSyscalls(), ElementsAre("umount"));
  EXPECT_EQ(Verdict(f, 20, {}, AUDIT_ARCH_I386), "allow");  // getpid
  EXPECT_EQ(Verdict(f, 26, {}, AUDIT_ARCH_I386), "EPERM");  // ptrace
  EXPECT_EQ(Verdict(f, 22, {}, AUDIT_ARCH_I386), "EPERM");  // umount
  EXPECT_EQ(Verdict(f, 0x40000000 | 39), "allow");          // x32 getpid
  EXPECT_EQ(Verdict(f, 0x40000000 | 521), "EPERM");         // x32 ptrace
  EXPECT_EQ(Verdict(f, __NR_ptrace), "EPERM");
  EXPECT_EQ(Verdict(f, 0, {}, AUDIT_ARCH_ARM), "kill-process");  // still not an ABI of this host
  EXPECT_THAT(::testing::PrintToString(f.RuleSummary()), HasSubstr("x86, x32"));
}
#endif

TEST(SeccompProgramTest, IoctlRequestsAreComparedOnTheirLow32Bits) {
  const SeccompFilter& f = InetFilter();
  EXPECT_EQ(Verdict(f, __NR_ioctl, {0, TIOCSTI}), "EPERM");
  EXPECT_EQ(Verdict(f, __NR_ioctl, {0, TIOCLINUX}), "EPERM");
  // The kernel truncates the request to 32 bits; so must the rule (CVE-2019-10063).
  EXPECT_EQ(Verdict(f, __NR_ioctl, {0, (1ULL << 32) | TIOCSTI}), "EPERM");
  EXPECT_EQ(Verdict(f, __NR_ioctl, {0, 0xffffffff00000000ULL | TIOCSTI}), "EPERM");
  for (const std::uint64_t ok :
       {TCGETS, TCSETS, TIOCGWINSZ, TIOCSWINSZ, FIONREAD, FIONBIO, TIOCGPGRP, TIOCSCTTY}) {
    EXPECT_EQ(Verdict(f, __NR_ioctl, {0, ok}), "allow") << std::hex << ok;
  }
}

TEST(SeccompProgramTest, PrivilegedModesAreRefusedOrdinaryModesAllowed) {
  const SeccompFilter& f = InetFilter();
  // chmod family: the mode argument.
  for (const std::uint64_t bad : {04755ULL, 02755ULL, 06000ULL, 04000ULL, 0xffffffff00000800ULL}) {
    EXPECT_EQ(Verdict(f, __NR_chmod, {0, bad}), "EPERM") << std::oct << bad;
    EXPECT_EQ(Verdict(f, __NR_fchmod, {3, bad}), "EPERM") << std::oct << bad;
    EXPECT_EQ(Verdict(f, __NR_fchmodat, {3, 0, bad}), "EPERM") << std::oct << bad;
    EXPECT_EQ(Verdict(f, 452 /* fchmodat2 */, {3, 0, bad, 0}), "EPERM") << std::oct << bad;
    EXPECT_EQ(Verdict(f, __NR_creat, {0, bad}), "EPERM") << std::oct << bad;
    EXPECT_EQ(Verdict(f, __NR_mkdir, {0, bad}), "EPERM") << std::oct << bad;
    EXPECT_EQ(Verdict(f, __NR_mkdirat, {3, 0, bad}), "EPERM") << std::oct << bad;
    EXPECT_EQ(Verdict(f, __NR_mknod, {0, S_IFREG | bad}), "EPERM") << std::oct << bad;
    EXPECT_EQ(Verdict(f, __NR_mknodat, {3, 0, S_IFREG | bad}), "EPERM") << std::oct << bad;
    // open/openat: only when the call creates (O_CREAT, O_TMPFILE).
    EXPECT_EQ(Verdict(f, __NR_open, {0, O_CREAT | O_WRONLY, bad}), "EPERM");
    EXPECT_EQ(Verdict(f, __NR_openat, {3, 0, O_CREAT | O_WRONLY, bad}), "EPERM");
    EXPECT_EQ(Verdict(f, __NR_openat, {3, 0, O_TMPFILE | O_WRONLY, bad}), "EPERM");
    EXPECT_EQ(Verdict(f, __NR_open, {0, O_RDONLY, bad}), "allow") << "no creation, mode unused";
    EXPECT_EQ(Verdict(f, __NR_openat, {3, 0, O_RDONLY | O_DIRECTORY, bad}), "allow");
  }
  for (const std::uint64_t ok : {0755ULL, 0644ULL, 01777ULL, 0ULL, 0777ULL}) {
    EXPECT_EQ(Verdict(f, __NR_chmod, {0, ok}), "allow") << std::oct << ok;
    EXPECT_EQ(Verdict(f, __NR_fchmodat, {3, 0, ok}), "allow") << std::oct << ok;
    EXPECT_EQ(Verdict(f, __NR_openat, {3, 0, O_CREAT | O_WRONLY, ok}), "allow") << std::oct << ok;
    EXPECT_EQ(Verdict(f, __NR_mkdir, {0, ok}), "allow") << std::oct << ok;
  }
  // openat2 is left to the host-side sweep: its mode lives in a struct.
  EXPECT_EQ(Verdict(f, __NR_openat2, {3, 0, 0, 24}), "allow");
  EXPECT_THAT(::testing::PrintToString(f.RuleSummary()), HasSubstr("S_ISUID or S_ISGID"));
}

TEST(SeccompPolicyTest, PrivilegedModeCallsCannotAlsoBeDeniedOutright) {
  SeccompPolicy p = DefaultSeccompPolicy(true);
  p.denied_syscalls.push_back("fchmodat");
  auto f = SeccompFilter::Prepare(p);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().Message(), HasSubstr("deny_privileged_modes"));
  p.deny_privileged_modes = false;
  EXPECT_TRUE(SeccompFilter::Prepare(p).ok());
}

TEST(SeccompProgramTest, PersonalityOnlyQueriesAndPerLinux) {
  const SeccompFilter& f = InetFilter();
  auto expected = [](std::uint64_t v) {
    const std::uint32_t low = static_cast<std::uint32_t>(v);
    return low == 0 || low == 0xffffffffU ? "allow" : "EPERM";
  };
  std::vector<std::uint64_t> values = {0,
                                       0xffffffffULL,
                                       ~0ULL,
                                       1ULL << 32,
                                       PER_LINUX32,
                                       ADDR_NO_RANDOMIZE,
                                       READ_IMPLIES_EXEC,
                                       std::uint64_t{PER_LINUX32} | ADDR_NO_RANDOMIZE,
                                       1,
                                       0x80000000ULL,
                                       0x7fffffffULL,
                                       0xfffffffeULL,
                                       0xffffffff00000001ULL};
  for (unsigned i = 0; i < 32; ++i) {
    values.push_back(1ULL << i);
    values.push_back(0xffffffffULL ^ (1ULL << i));
  }
  std::mt19937_64 rng(42);
  for (int i = 0; i < 20000; ++i) values.push_back(rng());
  for (const std::uint64_t v : values) {
    EXPECT_EQ(Verdict(f, __NR_personality, {v}), expected(v)) << std::hex << "0x" << v;
  }
}

TEST(SeccompProgramTest, CloneWithAnyNamespaceFlagIsDenied) {
  const SeccompFilter& f = InetFilter();
  for (const std::uint64_t flag : {CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
                                   CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP}) {
    EXPECT_EQ(Verdict(f, __NR_clone, {flag | SIGCHLD}), "EPERM") << std::hex << flag;
    EXPECT_EQ(Verdict(f, __NR_clone, {flag | CLONE_VM | CLONE_VFORK | (1ULL << 40)}), "EPERM")
        << std::hex << flag;
  }
  EXPECT_EQ(Verdict(f, __NR_clone3), "ENOSYS");
  EXPECT_EQ(Verdict(f, __NR_clone3, {0, 88}), "ENOSYS");
}

// The expected socket(2) verdict of the default policy, written independently of seccomp.cc.
std::string ExpectedSocketVerdict(bool inet, std::uint64_t family, std::uint64_t type,
                                  std::uint64_t protocol) {
  const std::uint64_t kind = type & 0xf;
  if (family == AF_UNIX) return "allow";
  if (family == AF_NETLINK) return protocol == NETLINK_ROUTE ? "allow" : "EPROTONOSUPPORT";
  if (inet && (family == AF_INET || family == AF_INET6)) {
    const bool type_ok = kind == SOCK_STREAM || kind == SOCK_DGRAM;
    const std::set<std::uint64_t> protos =
        family == AF_INET ? std::set<std::uint64_t>{0, IPPROTO_ICMP, IPPROTO_TCP, IPPROTO_UDP}
                          : std::set<std::uint64_t>{0, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMPV6};
    const bool proto_ok = protos.count(protocol) != 0;
    if (type_ok && proto_ok) return "allow";
    if (!type_ok && !proto_ok) return "EPERM or EPROTONOSUPPORT";
    return type_ok ? "EPROTONOSUPPORT" : "EPERM";
  }
  return "EAFNOSUPPORT";
}

TEST(SeccompProgramTest, SocketFamiliesTypesAndProtocolsFollowTheAllowList) {
  std::vector<std::uint64_t> families;
  for (std::uint64_t fam = 0; fam < 128; ++fam) families.push_back(fam);
  // High bits the kernel would truncate away (AF_UNIX, AF_PACKET) and negative values.
  for (const std::uint64_t v : {(1ULL << 32) | AF_UNIX, (1ULL << 32) | AF_PACKET, ~0ULL,
                                0xffffffffULL, 0x7fffffffULL, 1ULL << 63}) {
    families.push_back(v);
  }
  const std::uint64_t types[] = {SOCK_STREAM,
                                 SOCK_DGRAM,
                                 SOCK_RAW,
                                 SOCK_RDM,
                                 SOCK_SEQPACKET,
                                 SOCK_DCCP,
                                 SOCK_PACKET,
                                 0,
                                 15,
                                 SOCK_STREAM | SOCK_CLOEXEC,
                                 SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC};
  const std::uint64_t protocols[] = {0, 1, 2, 6, 9, 15, 16, 17, 58, 132, 255, 262, 1ULL << 32};
  for (const bool inet : {true, false}) {
    const SeccompFilter& f = inet ? InetFilter() : NoInetFilter();
    for (const long call : {__NR_socket, __NR_socketpair}) {  // NOLINT(google-runtime-int)
      for (const std::uint64_t fam : families) {
        for (const std::uint64_t type : types) {
          for (const std::uint64_t proto : protocols) {
            const std::string want = ExpectedSocketVerdict(inet, fam, type, proto);
            const std::string got =
                Verdict(f, static_cast<std::uint64_t>(call), {fam, type, proto});
            if (want.find(" or ") != std::string::npos) {
              EXPECT_THAT(want, HasSubstr(got)) << fam << " " << type << " " << proto;
            } else {
              EXPECT_EQ(got, want) << "inet=" << inet << " call=" << call << " family=" << fam
                                   << " type=" << type << " protocol=" << proto;
            }
          }
        }
      }
    }
  }
}

TEST(SeccompProgramTest, AnEmptyFamilyListRefusesEverySocket) {
  SeccompPolicy p;
  const SeccompFilter f = MustPrepare(p);
  EXPECT_EQ(Verdict(f, __NR_socket, {AF_UNIX, SOCK_STREAM, 0}), "EAFNOSUPPORT");
  EXPECT_EQ(Verdict(f, __NR_socketpair, {AF_UNIX, SOCK_STREAM, 0}), "EAFNOSUPPORT");
  EXPECT_EQ(Verdict(f, __NR_read), "allow");
}

// ---- live: each denial, bare and filtered -----------------------------------------------------

TEST(SeccompLiveTest, UnshareIsDenied) {
  const Twin t = RunTwin(InetFilter(), [] { return ErrnoOf(::unshare(CLONE_NEWUSER)); });
  if (t.bare != kSuccess) GTEST_SKIP() << "unshare(CLONE_NEWUSER) fails here without the filter";
  EXPECT_EQ(t.filtered, Exit(EPERM));
}

TEST(SeccompLiveTest, SetnsIsDenied) {
  int ns = -1;
  const Twin t = RunTwin(
      InetFilter(),
      [&ns] {
        if (::unshare(CLONE_NEWUSER | CLONE_NEWUTS) != 0) return errno;
        ns = ::open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);
        return ns < 0 ? errno : 0;
      },
      [&ns] { return ErrnoOf(::setns(ns, CLONE_NEWUTS)); });
  SKIP_WITHOUT_USER_NAMESPACES(t);
  EXPECT_EQ(t.bare, kSuccess);
  EXPECT_EQ(t.filtered, Exit(EPERM));
}

// clone(2) as a raw system call; the new child exits at once. 0, or the errno of clone.
int RawClone(std::uint64_t flags) {
  const long pid =  // NOLINT(google-runtime-int)
      ::syscall(__NR_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (pid < 0) return errno;
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(static_cast<pid_t>(pid), &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : kUnexpectedCode;
}

TEST(SeccompLiveTest, CloneWithNamespaceFlagsIsDeniedWhilePlainCloneWorks) {
  // CLONE_NEWUSER alone and with each other flag: the new user namespace owns the others, so the
  // bare twin needs no privilege.
  for (const std::uint64_t flag : U64List{0, CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID,
                                          CLONE_NEWNET, CLONE_NEWCGROUP}) {
    SCOPED_TRACE(::testing::Message() << "CLONE_NEWUSER | 0x" << std::hex << flag);
    const Twin t = RunTwin(InetFilter(), [flag] { return RawClone(CLONE_NEWUSER | flag); });
    if (t.bare != kSuccess) GTEST_SKIP() << "clone(CLONE_NEWUSER) fails here without the filter";
    EXPECT_EQ(t.filtered, Exit(EPERM));
  }
  EXPECT_EQ(RunFiltered([] { return RawClone(0); }), kSuccess);
}

struct CloneArgsV0 {  // struct clone_args as of Linux 5.3 (CLONE_ARGS_SIZE_VER0 = 64 bytes)
  std::uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

TEST(SeccompLiveTest, Clone3AnswersEnosys) {
  auto op = [] {
    CloneArgsV0 args{};
    args.exit_signal = SIGCHLD;
    const long pid = ::syscall(__NR_clone3, &args, sizeof(args));  // NOLINT(google-runtime-int)
    if (pid < 0) return errno;
    if (pid == 0) ::_exit(0);
    ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
    return 0;
  };
  const Twin t = RunTwin(InetFilter(), op);
  if (t.bare == Exit(ENOSYS)) GTEST_SKIP() << "this kernel has no clone3";
  EXPECT_EQ(t.bare, kSuccess);
  EXPECT_EQ(t.filtered, Exit(ENOSYS));
}

TEST(SeccompLiveTest, MountsAreDenied) {
  struct Case {
    const char* name;
    int (*op)();
  };
  const Case cases[] = {
      {"mount MS_PRIVATE",
       [] { return ErrnoOf(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr)); }},
      {"open_tree OPEN_TREE_CLONE|AT_RECURSIVE",  // a detached copy of the whole tree
       [] {
         return ErrnoOf(
             ::syscall(__NR_open_tree, AT_FDCWD, "/", kOpenTreeClone | AT_RECURSIVE | O_CLOEXEC));
       }},
      {"fsopen tmpfs", [] { return ErrnoOf(::syscall(__NR_fsopen, "tmpfs", kFsopenCloexec)); }},
      {"chroot /", [] { return ErrnoOf(::chroot("/")); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Twin t = RunTwin(InetFilter(), InNewUserNamespace(CLONE_NEWNS), c.op);
    SKIP_WITHOUT_USER_NAMESPACES(t);
    EXPECT_EQ(t.bare, kSuccess);
    EXPECT_EQ(t.filtered, Exit(EPERM));
  }
}

TEST(SeccompLiveTest, PtraceAndCrossProcessAccessAreDenied) {
  struct Case {
    const char* name;
    int (*op)();
  };
  const Case cases[] = {
      {"ptrace PTRACE_TRACEME",
       [] { return ErrnoOf(::syscall(__NR_ptrace, 0 /*TRACEME*/, 0, 0, 0)); }},
      {"process_vm_readv of itself",
       [] {
         char src[8] = "secret";
         char dst[8] = {};
         const struct iovec local { dst, sizeof(dst) };
         const struct iovec remote { src, sizeof(src) };
         const ssize_t n = ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
         if (n < 0) return errno;
         return std::strcmp(dst, "secret") == 0 ? 0 : kUnexpectedCode;
       }},
      {"pidfd_getfd of its own pidfd",
       [] {
         const int pidfd = static_cast<int>(::syscall(__NR_pidfd_open, ::getpid(), 0));
         if (pidfd < 0) return kSetupFailedCode;
         return ErrnoOf(::syscall(__NR_pidfd_getfd, pidfd, pidfd, 0));
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Twin t = RunTwin(InetFilter(), c.op);
    EXPECT_EQ(t.bare, kSuccess);
    EXPECT_EQ(t.filtered, Exit(EPERM));
  }
}

TEST(SeccompLiveTest, KeyringsAreDenied) {
  const Twin get = RunTwin(InetFilter(), [] {
    return ErrnoOf(::syscall(__NR_keyctl, kKeyctlGetKeyringId, kKeySpecProcessKeyring, 1));
  });
  if (get.bare != kSuccess) GTEST_SKIP() << "keyctl does not work here without the filter";
  EXPECT_EQ(get.filtered, Exit(EPERM));
  const Twin add = RunTwin(InetFilter(), [] {
    return ErrnoOf(
        ::syscall(__NR_add_key, "user", "cagent-seccomp-test", "x", 1, kKeySpecProcessKeyring));
  });
  EXPECT_EQ(add.bare, kSuccess);
  EXPECT_EQ(add.filtered, Exit(EPERM));
}

TEST(SeccompLiveTest, BpfIsDenied) {
  // An unknown command reaches the kernel's bpf dispatch (EINVAL) whatever the caller's privilege
  // and the unprivileged_bpf_disabled sysctl; the filter answers before it.
  const Twin t = RunTwin(InetFilter(), [] { return ErrnoOf(::syscall(__NR_bpf, 0x7fff, 0, 0)); });
  EXPECT_EQ(t.bare, Exit(EINVAL));
  EXPECT_EQ(t.filtered, Exit(EPERM));
}

TEST(SeccompLiveTest, PerfEventOpenIsDenied) {
  const Twin t = RunTwin(InetFilter(), [] {
    struct perf_event_attr attr {};
    attr.type = PERF_TYPE_SOFTWARE;
    attr.size = sizeof(attr);
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    return ErrnoOf(::syscall(__NR_perf_event_open, &attr, 0, -1, -1, 0));
  });
  if (t.bare != kSuccess) {
    GTEST_SKIP() << "perf_event_open of its own task clock fails here without the filter "
                    "(kernel.perf_event_paranoid?)";
  }
  EXPECT_EQ(t.filtered, Exit(EPERM));
}

TEST(SeccompLiveTest, UserfaultfdIsDenied) {
  const Twin t = RunTwin(InetFilter(), [] {
    return ErrnoOf(::syscall(__NR_userfaultfd, O_CLOEXEC | kUffdUserModeOnly));
  });
  if (t.bare != kSuccess) GTEST_SKIP() << "userfaultfd fails here without the filter";
  EXPECT_EQ(t.filtered, Exit(EPERM));
}

TEST(SeccompLiveTest, IoUringIsDenied) {
  const Twin t = RunTwin(InetFilter(), [] {
    std::array<std::uint8_t, 256> params{};  // struct io_uring_params, zeroed (120 bytes)
    return ErrnoOf(::syscall(__NR_io_uring_setup, 2, params.data()));
  });
  if (t.bare != kSuccess) {
    GTEST_SKIP() << "io_uring_setup fails here without the filter (kernel.io_uring_disabled?)";
  }
  EXPECT_EQ(t.filtered, Exit(EPERM));
}

TEST(SeccompLiveTest, ClockAndHostAdministrationAreDenied) {
  // Calls a test can make safely: read-only queries that succeed bare, and invalid arguments the
  // kernel rejects (not with EPERM) before any privilege check. The rest (reboot, kexec, modules,
  // swap) is covered through the interpreter above.
  struct Case {
    const char* name;
    int (*op)();
  };
  const Case cases[] = {
    {"adjtimex query",
     [] {
       struct timex tx {};
       return ErrnoOf(::adjtimex(&tx));
     }},
    {"clock_adjtime query",
     [] {
       struct timex tx {};
       return ErrnoOf(::syscall(__NR_clock_adjtime, CLOCK_REALTIME, &tx));
     }},
    {"clock_settime of an invalid clock",
     [] {
       const struct timespec ts {};
       return ErrnoOf(::syscall(__NR_clock_settime, 999, &ts));
     }},
    {"sysfs count", [] { return ErrnoOf(::syscall(__NR_sysfs, 3)); }},
#if defined(__x86_64__)
    {"iopl 0", [] { return ErrnoOf(::syscall(__NR_iopl, 0)); }},
    {"ioperm off", [] { return ErrnoOf(::syscall(__NR_ioperm, 0, 1, 0)); }},
#endif
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Twin t = RunTwin(InetFilter(), c.op);
    EXPECT_NE(t.bare, Exit(EPERM));
    EXPECT_NE(t.bare.code, kSetupFailedCode);
    EXPECT_EQ(t.filtered, Exit(EPERM));
  }
}

// A child-owned scratch file for the mode tests (removed by the caller).
std::string ScratchFile() {
  char path[] = "/tmp/cagent-seccomp-mode-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd >= 0) ::close(fd);
  return path;
}

TEST(SeccompLiveTest, SetuidAndSetgidModesAreDenied) {
  const std::string file = ScratchFile();
  const std::string dir = file + ".d";
  const std::string created = file + ".new";
  const Twin chmod_twin =
      RunTwin(InetFilter(), [&] { return ErrnoOf(::chmod(file.c_str(), 04755)); });
  EXPECT_EQ(chmod_twin.bare, kSuccess);
  EXPECT_EQ(chmod_twin.filtered, Exit(EPERM));
  const Twin fchmodat_twin =
      RunTwin(InetFilter(), [&] { return ErrnoOf(::fchmodat(AT_FDCWD, file.c_str(), 02755, 0)); });
  EXPECT_EQ(fchmodat_twin.bare, kSuccess);
  EXPECT_EQ(fchmodat_twin.filtered, Exit(EPERM));
  const Twin open_twin = RunTwin(InetFilter(), [&] {
    ::unlink(created.c_str());
    const int fd = ::open(created.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 04755);
    if (fd < 0) return errno;
    ::close(fd);
    return 0;
  });
  EXPECT_EQ(open_twin.bare, kSuccess);
  EXPECT_EQ(open_twin.filtered, Exit(EPERM));
  const Twin mkdir_twin = RunTwin(InetFilter(), [&] {
    ::rmdir(dir.c_str());
    return ErrnoOf(::mkdir(dir.c_str(), 02755));
  });
  EXPECT_EQ(mkdir_twin.bare, kSuccess);
  EXPECT_EQ(mkdir_twin.filtered, Exit(EPERM));
  // Ordinary modes still work filtered.
  EXPECT_EQ(RunFiltered([&] { return ErrnoOf(::chmod(file.c_str(), 0700)); }), kSuccess);
  EXPECT_EQ(RunFiltered([&] {
              ::unlink(created.c_str());
              const int fd = ::open(created.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
              if (fd < 0) return errno;
              ::close(fd);
              return 0;
            }),
            kSuccess);
  ::unlink(file.c_str());
  ::unlink(created.c_str());
  ::rmdir(dir.c_str());
}

TEST(SeccompLiveTest, PersonalityFlagsAreDeniedButQueriesWork) {
  for (const unsigned long persona :                       // NOLINT(google-runtime-int)
       {static_cast<unsigned long>(PER_LINUX32),           // NOLINT(google-runtime-int)
        static_cast<unsigned long>(ADDR_NO_RANDOMIZE),     // NOLINT(google-runtime-int)
        static_cast<unsigned long>(READ_IMPLIES_EXEC)}) {  // NOLINT(google-runtime-int)
    SCOPED_TRACE(::testing::Message() << "personality 0x" << std::hex << persona);
    const Twin t = RunTwin(InetFilter(), [persona] { return ErrnoOf(::personality(persona)); });
    EXPECT_EQ(t.bare, kSuccess);
    EXPECT_EQ(t.filtered, Exit(EPERM));
  }
  EXPECT_EQ(RunFiltered([] {
              const int current = ::personality(0xffffffff);
              if (current < 0) return errno;
              return ErrnoOf(::personality(PER_LINUX));
            }),
            kSuccess);
}

// A new pseudo-terminal whose slave becomes the child's controlling terminal (TIOCSTI needs
// that, or CAP_SYS_ADMIN). Returns 0 or an errno; fills the two fds.
int OpenControllingPty(int& master, int& slave) {
  master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) return errno;
  const char* name = ::ptsname(master);
  if (name == nullptr || ::setsid() < 0) return errno;
  slave = ::open(name, O_RDWR | O_CLOEXEC);  // no O_NOCTTY: becomes the controlling terminal
  if (slave < 0) return errno;
  // Raw mode: a single injected byte is readable at once, without waiting for a newline.
  struct termios tio {};
  if (::tcgetattr(slave, &tio) != 0) return errno;
  ::cfmakeraw(&tio);
  return ::tcsetattr(slave, TCSANOW, &tio) == 0 ? 0 : errno;
}

TEST(SeccompLiveTest, TerminalInjectionIsDenied) {
  int master = -1;
  int slave = -1;
  auto setup = [&] { return OpenControllingPty(master, slave); };
  // TIOCSTI pushes a byte into the terminal's input, as if typed: the sandbox escape of
  // CVE-2017-5226. With high bits set in the request the kernel still sees TIOCSTI
  // (CVE-2019-10063): the bare child shows it working, the filter still refuses it.
  auto inject = [&](std::uint64_t request) {
    const char c = 'x';
    if (::syscall(__NR_ioctl, slave, request, &c) != 0) return errno;
    struct pollfd pfd {
      slave, POLLIN, 0
    };
    char got = 0;
    if (::poll(&pfd, 1, 5000) != 1 || ::read(slave, &got, 1) != 1) return kUnexpectedCode;
    return got == 'x' ? 0 : kUnexpectedCode;
  };
  for (const std::uint64_t request : U64List{TIOCSTI, (1ULL << 32) | TIOCSTI}) {
    SCOPED_TRACE(::testing::Message() << "request 0x" << std::hex << request);
    const Twin t = RunTwin(InetFilter(), setup, [&] { return inject(request); });
    ASSERT_NE(t.bare, kSetupFailed) << "no pseudo-terminal";
    if (t.bare == Exit(EIO)) {
      // Linux 6.2+ with dev.tty.legacy_tiocsti=0 refuses TIOCSTI itself.
      std::cout << "note: the kernel already refuses TIOCSTI (dev.tty.legacy_tiocsti=0)\n";
    } else {
      EXPECT_EQ(t.bare, kSuccess);
    }
    EXPECT_EQ(t.filtered, Exit(EPERM));
  }
  // TIOCLINUX is for virtual consoles only; on a pty the kernel answers ENOTTY / EINVAL.
  const Twin linux_ioctl = RunTwin(InetFilter(), setup, [&] {
    char subcode = 6;  // TIOCL_GETSHIFTSTATE
    return ErrnoOf(::ioctl(slave, TIOCLINUX, &subcode));
  });
  EXPECT_NE(linux_ioctl.bare, Exit(EPERM));
  EXPECT_NE(linux_ioctl.bare, kSetupFailed);
  EXPECT_EQ(linux_ioctl.filtered, Exit(EPERM));
}

TEST(SeccompLiveTest, RawAndPacketSocketsAreDenied) {
  // In a new network namespace the child holds CAP_NET_RAW over it, so the bare twin can open
  // these sockets without privilege on the host.
  struct Case {
    const char* name;
    int family, type, protocol;
    int want;
  };
  const Case cases[] = {
      {"AF_PACKET SOCK_RAW", AF_PACKET, SOCK_RAW, 0, EAFNOSUPPORT},
      {"AF_PACKET SOCK_DGRAM", AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, 0, EAFNOSUPPORT},
      {"AF_INET SOCK_RAW", AF_INET, SOCK_RAW, IPPROTO_ICMP, EPERM},
      {"AF_INET SOCK_RAW|SOCK_NONBLOCK|SOCK_CLOEXEC", AF_INET,
       SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_ICMP, EPERM},
      {"AF_INET6 SOCK_RAW", AF_INET6, SOCK_RAW, IPPROTO_ICMPV6, EPERM},
      // The kernel turns (AF_INET, SOCK_PACKET) into an AF_PACKET socket.
      {"AF_INET SOCK_PACKET", AF_INET, SOCK_PACKET, 0, EPERM},
      {"AF_NETLINK NETLINK_GENERIC", AF_NETLINK, SOCK_RAW, NETLINK_GENERIC, EPROTONOSUPPORT},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Twin t = RunTwin(InetFilter(), InNewUserNamespace(CLONE_NEWNET),
                           [&c] { return ErrnoOf(::socket(c.family, c.type, c.protocol)); });
    SKIP_WITHOUT_USER_NAMESPACES(t);
    if (c.family == AF_INET6 && t.bare == Exit(EAFNOSUPPORT)) continue;  // no IPv6 here
    EXPECT_EQ(t.bare, kSuccess);
    EXPECT_EQ(t.filtered, Exit(c.want));
  }
}

TEST(SeccompLiveTest, OtherFamiliesAnswerEafnosupport) {
  // Whether these work bare depends on the kernel's configuration and loaded modules; the filter
  // must refuse each the same way, including with high bits that the kernel would truncate away.
  int worked_bare = 0;
  for (const std::uint64_t family : U64List{AF_VSOCK, AF_KEY, AF_ALG, AF_BLUETOOTH, AF_TIPC, AF_CAN,
                                            AF_RDS, AF_XDP, AF_X25, (1ULL << 32) | AF_UNIX}) {
    SCOPED_TRACE(::testing::Message() << "family 0x" << std::hex << family);
    const int type = family == AF_ALG ? SOCK_SEQPACKET : SOCK_DGRAM;
    const Twin t = RunTwin(InetFilter(), [family, type] {
      return ErrnoOf(::syscall(__NR_socket, family, type | SOCK_CLOEXEC, 0));
    });
    if (t.bare == kSuccess) ++worked_bare;
    EXPECT_EQ(t.filtered, Exit(EAFNOSUPPORT));
  }
  std::cout << "note: " << worked_bare << " of these families work here without the filter\n";
  EXPECT_GE(worked_bare, 1);  // at least the truncated AF_UNIX
}

TEST(SeccompLiveTest, InetIsDeniedWithoutNetwork) {
  for (const int family : {AF_INET, AF_INET6}) {
    const Twin t = RunTwin(NoInetFilter(), [family] {
      return ErrnoOf(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    });
    if (t.bare != kSuccess) continue;  // e.g. IPv6 disabled
    EXPECT_EQ(t.filtered, Exit(EAFNOSUPPORT)) << "family " << family;
  }
  EXPECT_EQ(RunFiltered([] { return ErrnoOf(::socket(AF_UNIX, SOCK_STREAM, 0)); }, NoInetFilter()),
            kSuccess);
}

#if defined(__x86_64__)
// getpid through the i386 ABI (`int $0x80`, number 20): 0 if it returned our pid.
int I386Getpid() {
  long ret = 20;  // NOLINT(google-runtime-int)
  asm volatile("int $0x80" : "+a"(ret) : : "memory", "rcx", "r8", "r9", "r10", "r11");
  if (ret == ::getpid()) return 0;
  return ret < 0 && ret > -4096 ? static_cast<int>(-ret) : kUnexpectedCode;
}

TEST(SeccompLiveTest, ForeignAbisKillTheProcess) {
  const Twin i386 = RunTwin(InetFilter(), I386Getpid);
  if (i386.bare == kSuccess) {
    EXPECT_EQ(i386.filtered, Killed(SIGSYS));
  } else {
    std::cout << "note: this kernel runs no i386 code (ia32_emulation off?)\n";
  }
  // x32: most kernels build it but leave it off (ENOSYS); the filter kills either way.
  const Twin x32 = RunTwin(InetFilter(), [] {
    const long r = ::syscall(0x40000000 | 39);  // NOLINT(google-runtime-int)
    return r < 0 ? errno : (r == ::getpid() ? 0 : kUnexpectedCode);
  });
  EXPECT_THAT(x32.bare, ::testing::AnyOf(kSuccess, Exit(ENOSYS)));
  EXPECT_EQ(x32.filtered, Killed(SIGSYS));
}
#endif

// ---- live: ordinary work under the filter -----------------------------------------------------

TEST(SeccompWorkTest, ThreadsWork) {
  EXPECT_EQ(RunFiltered([] {
              int value = 0;
              std::thread t([&value] { value = 1; });
              t.join();
              pthread_t p;
              if (::pthread_create(
                      &p, nullptr,
                      [](void* arg) -> void* {
                        *static_cast<int*>(arg) += 1;
                        return nullptr;
                      },
                      &value) != 0) {
                return kUnexpectedCode;
              }
              ::pthread_join(p, nullptr);
              return value == 2 ? 0 : kUnexpectedCode;
            }),
            kSuccess);
}

TEST(SeccompWorkTest, ForkVforkAndPosixSpawnWork) {
  EXPECT_EQ(RunFiltered([] {
              int status = 0;
              const pid_t a = ::fork();
              if (a == 0) ::_exit(7);
              if (a < 0 || ::waitpid(a, &status, 0) != a || WEXITSTATUS(status) != 7) return 1;
              const pid_t b = ::vfork();  // NOLINT(clang-analyzer-security.insecureAPI.vfork)
              if (b == 0) ::_exit(8);
              if (b < 0 || ::waitpid(b, &status, 0) != b || WEXITSTATUS(status) != 8) return 2;
              // posix_spawn (clone3 first, then clone in glibc) and execve of a real program,
              // which inherits the filter.
              pid_t c = 0;
              char* argv[] = {const_cast<char*>("sh"), const_cast<char*>("-c"),
                              const_cast<char*>("exit 9"), nullptr};
              if (::posix_spawn(&c, "/bin/sh", nullptr, nullptr, argv, environ) != 0) return 3;
              if (::waitpid(c, &status, 0) != c || WEXITSTATUS(status) != 9) return 4;
              return 0;
            }),
            kSuccess);
}

TEST(SeccompWorkTest, UnixSocketsPassDataAndDescriptors) {
  EXPECT_EQ(RunFiltered([] {
              int sv[2];
              if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return errno;
              // Send one byte with an fd attached (SCM_RIGHTS).
              char byte = 'a';
              struct iovec iov {
                &byte, 1
              };
              alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
              struct msghdr msg {};
              msg.msg_iov = &iov;
              msg.msg_iovlen = 1;
              msg.msg_control = control;
              msg.msg_controllen = sizeof(control);
              struct cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
              cmsg->cmsg_level = SOL_SOCKET;
              cmsg->cmsg_type = SCM_RIGHTS;
              cmsg->cmsg_len = CMSG_LEN(sizeof(int));
              const int passed = STDERR_FILENO;
              std::memcpy(CMSG_DATA(cmsg), &passed, sizeof(int));
              if (::sendmsg(sv[0], &msg, 0) != 1) return errno;
              char got = 0;
              struct iovec riov {
                &got, 1
              };
              alignas(struct cmsghdr) char rcontrol[CMSG_SPACE(sizeof(int))] = {};
              struct msghdr rmsg {};
              rmsg.msg_iov = &riov;
              rmsg.msg_iovlen = 1;
              rmsg.msg_control = rcontrol;
              rmsg.msg_controllen = sizeof(rcontrol);
              if (::recvmsg(sv[1], &rmsg, MSG_CMSG_CLOEXEC) != 1 || got != 'a') return errno;
              if (CMSG_FIRSTHDR(&rmsg) == nullptr) return kUnexpectedCode;
              // A datagram socket bound to an abstract name, with sendto/recvfrom.
              const int server = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
              const int client = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
              if (server < 0 || client < 0) return errno;
              struct sockaddr_un addr {};
              addr.sun_family = AF_UNIX;
              const char name[] = "\0cagent-seccomp-test";
              std::memcpy(addr.sun_path, name, sizeof(name));
              const socklen_t len = offsetof(struct sockaddr_un, sun_path) + sizeof(name);
              if (::bind(server, reinterpret_cast<sockaddr*>(&addr), len) != 0) return errno;
              if (::sendto(client, "hi", 2, 0, reinterpret_cast<sockaddr*>(&addr), len) != 2) {
                return errno;
              }
              char buf[4] = {};
              if (::recvfrom(server, buf, sizeof(buf), 0, nullptr, nullptr) != 2) return errno;
              return std::strcmp(buf, "hi") == 0 ? 0 : kUnexpectedCode;
            }),
            kSuccess);
}

TEST(SeccompWorkTest, LoopbackTcpAndUdpWork) {
  EXPECT_EQ(RunFiltered([] {
              const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
              if (server < 0) return errno;
              const int one = 1;
              if (::setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
                return errno;
              }
              struct sockaddr_in addr {};
              addr.sin_family = AF_INET;
              addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
              socklen_t len = sizeof(addr);
              if (::bind(server, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
                  ::listen(server, 1) != 0 ||
                  ::getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
                return errno;
              }
              const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
              if (client < 0) return errno;
              if (::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
                  ::connect(client, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
                return errno;
              }
              const int conn = ::accept4(server, nullptr, nullptr, SOCK_CLOEXEC);
              if (conn < 0) return errno;
              if (::send(client, "ping", 4, 0) != 4) return errno;
              char buf[8] = {};
              if (::recv(conn, buf, 4, MSG_WAITALL) != 4) return errno;
              if (std::strcmp(buf, "ping") != 0) return kUnexpectedCode;
              // UDP: bind, sendto, recvfrom.
              const int udp = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
              struct sockaddr_in uaddr {};
              uaddr.sin_family = AF_INET;
              uaddr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
              socklen_t ulen = sizeof(uaddr);
              if (udp < 0 || ::bind(udp, reinterpret_cast<sockaddr*>(&uaddr), ulen) != 0 ||
                  ::getsockname(udp, reinterpret_cast<sockaddr*>(&uaddr), &ulen) != 0) {
                return errno;
              }
              if (::sendto(udp, "pong", 4, 0, reinterpret_cast<sockaddr*>(&uaddr), ulen) != 4) {
                return errno;
              }
              char ubuf[8] = {};
              struct pollfd pfd {
                udp, POLLIN, 0
              };
              if (::poll(&pfd, 1, 5000) != 1) return kUnexpectedCode;
              if (::recvfrom(udp, ubuf, sizeof(ubuf), 0, nullptr, nullptr) != 4) return errno;
              return std::strcmp(ubuf, "pong") == 0 ? 0 : kUnexpectedCode;
            }),
            kSuccess);
}

TEST(SeccompWorkTest, Inet6SocketsCanBeCreated) {
  auto op = [] {
    const int a = ::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (a < 0) return errno;
    return ErrnoOf(::socket(AF_INET6, SOCK_DGRAM, IPPROTO_UDP));
  };
  const Twin t = RunTwin(InetFilter(), op);
  if (t.bare != kSuccess) GTEST_SKIP() << "IPv6 sockets fail here without the filter";
  EXPECT_EQ(t.filtered, kSuccess);
}

TEST(SeccompWorkTest, TerminalQueriesWork) {
  int master = -1;
  int slave = -1;
  const Outcome o = RunInChild(
      &InetFilter(), [&] { return OpenControllingPty(master, slave); },
      [&] {
        struct termios tio {};
        if (::tcgetattr(slave, &tio) != 0) return errno;  // TCGETS
        if (::tcsetattr(slave, TCSANOW, &tio) != 0) return errno;
        struct winsize ws {};
        ws.ws_row = 24;
        ws.ws_col = 80;
        if (::ioctl(master, TIOCSWINSZ, &ws) != 0 || ::ioctl(slave, TIOCGWINSZ, &ws) != 0) {
          return errno;
        }
        int pending = -1;
        if (::ioctl(master, FIONREAD, &pending) != 0) return errno;
        return ws.ws_col == 80 && pending == 0 ? 0 : kUnexpectedCode;
      });
  EXPECT_EQ(o, kSuccess);
}

TEST(SeccompWorkTest, InterfaceListingThroughRouteNetlinkWorks) {
  EXPECT_EQ(RunFiltered([] {
              struct ifaddrs* list = nullptr;
              if (::getifaddrs(&list) != 0) return errno;
              bool has_lo = false;
              for (const struct ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
                if (i->ifa_name != nullptr && std::strcmp(i->ifa_name, "lo") == 0) has_lo = true;
              }
              ::freeifaddrs(list);
              struct if_nameindex* names = ::if_nameindex();
              if (names == nullptr) return errno;
              ::if_freenameindex(names);
              return has_lo ? 0 : kUnexpectedCode;
            }),
            kSuccess);
}

}  // namespace
}  // namespace cagent::launcher
