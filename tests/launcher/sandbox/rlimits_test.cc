#include "launcher/sandbox/rlimits.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gtest/gtest.h"

namespace cagent::launcher {
namespace {

// Every restriction below is applied only in a forked child; the test runner is never confined.
// The child reports through its exit code: 0 = the expected thing happened, anything else names
// the check that failed (see each test).
template <typename Body>
int RunInChild(Body body) {
  (void)std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  if (pid < 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

bool ExitedWith(int status, int code) { return WIFEXITED(status) && WEXITSTATUS(status) == code; }
bool KilledBy(int status, int sig) { return WIFSIGNALED(status) && WTERMSIG(status) == sig; }

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Prepares and applies `limits` in the calling (child) process. Returns 99 if applying failed.
int Apply(const ResourceLimits& limits) {
  const PreparedRlimits prepared = PrepareRlimits(limits);
  return ApplyRlimits(prepared).ok ? 0 : 99;
}

double CpuSeconds() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Spins until this process has used `seconds` of CPU time.
void BurnCpu(double seconds) {
  volatile std::uint64_t sink = 0;
  while (CpuSeconds() < seconds) {
    for (int i = 0; i < 100000; ++i) sink = sink + static_cast<std::uint64_t>(i);
  }
}

// ---- prepare ----

TEST(RlimitPrepareTest, CpuSoftLimitIsOneSecondBelowHard) {
  ResourceLimits limits;
  limits.cpu_seconds = 10;
  const PreparedRlimits p = PrepareRlimits(limits);
  const RlimitSetting* cpu = p.Find(RLIMIT_CPU);
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->soft, 10U);
  EXPECT_EQ(cpu->hard, 11U);
}

TEST(RlimitPrepareTest, CoreDumpsAreZeroByDefaultAndInheritedWhenAllowed) {
  const PreparedRlimits off = PrepareRlimits(ResourceLimits{});
  const RlimitSetting* core = off.Find(RLIMIT_CORE);
  ASSERT_NE(core, nullptr);
  EXPECT_EQ(core->soft, 0U);
  EXPECT_EQ(core->hard, 0U);
  ResourceLimits allowed;
  allowed.core_dumps = true;
  EXPECT_EQ(PrepareRlimits(allowed).Find(RLIMIT_CORE), nullptr);
}

TEST(RlimitPrepareTest, UnsetLimitsAreLeftInherited) {
  const PreparedRlimits p = PrepareRlimits(ResourceLimits{});
  EXPECT_EQ(p.count, 1U);  // only RLIMIT_CORE
  for (int r : {RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_NPROC, RLIMIT_DATA, RLIMIT_AS}) {
    EXPECT_EQ(p.Find(r), nullptr) << "resource " << r;
  }
}

TEST(RlimitPrepareTest, EveryLimitIsPreparedWhenSet) {
  ResourceLimits limits;
  limits.cpu_seconds = 5;
  limits.file_size_bytes = 1 << 20;
  limits.open_files = 64;
  limits.processes = 32;
  limits.data_bytes = 1ULL << 30;
  limits.address_space_bytes = 2ULL << 30;
  const PreparedRlimits p = PrepareRlimits(limits);
  EXPECT_EQ(p.count, PreparedRlimits::kMax);
  ASSERT_NE(p.Find(RLIMIT_FSIZE), nullptr);
  EXPECT_EQ(p.Find(RLIMIT_FSIZE)->soft, 1U << 20);
  ASSERT_NE(p.Find(RLIMIT_NPROC), nullptr);
  EXPECT_EQ(p.Find(RLIMIT_NPROC)->hard, 32U);
  ASSERT_NE(p.Find(RLIMIT_AS), nullptr);
  EXPECT_EQ(p.Find(RLIMIT_AS)->soft, 2ULL << 30);
}

// Limits are only lowered: a request above the caller's hard limit gets the caller's hard limit.
// Child exit codes: 1–4 = a prepared value was wrong, 5 = applying raised the limit.
TEST(RlimitPrepareTest, RequestAboveTheCallersHardLimitIsClamped) {
  const int status = RunInChild([] {
    const struct rlimit nofile { 32, 64 };
    const struct rlimit cpu { 5, 5 };
    if (::setrlimit(RLIMIT_NOFILE, &nofile) != 0 || ::setrlimit(RLIMIT_CPU, &cpu) != 0) return 98;
    ResourceLimits high;
    high.open_files = 1000;
    high.cpu_seconds = 10;
    const PreparedRlimits p = PrepareRlimits(high);
    if (p.Find(RLIMIT_NOFILE)->soft != 64 || p.Find(RLIMIT_NOFILE)->hard != 64) return 1;
    if (p.Find(RLIMIT_CPU)->soft != 5 || p.Find(RLIMIT_CPU)->hard != 5) return 2;
    ResourceLimits low;
    low.open_files = 16;
    low.cpu_seconds = 3;
    const PreparedRlimits q = PrepareRlimits(low);
    if (q.Find(RLIMIT_NOFILE)->soft != 16 || q.Find(RLIMIT_NOFILE)->hard != 16) return 3;
    if (q.Find(RLIMIT_CPU)->soft != 3 || q.Find(RLIMIT_CPU)->hard != 4) return 4;
    if (!ApplyRlimits(p).ok) return 99;
    struct rlimit after {};
    ::getrlimit(RLIMIT_NOFILE, &after);
    return after.rlim_max == 64 ? 0 : 5;
  });
  EXPECT_TRUE(ExitedWith(status, 0)) << Describe(status);
}

// The guard switched off: with CAP_SYS_RESOURCE (usually root), a plain setrlimit of the unclamped
// value does raise the hard limit — which is what the clamp prevents. Child exit codes: 3 = EPERM
// (no CAP_SYS_RESOURCE: the test skips), 1 = another error.
TEST(RlimitPrepareTest, WithoutTheClampAPrivilegedCallerWouldRaiseTheHardLimit) {
  const int status = RunInChild([] {
    const struct rlimit low { 32, 64 };
    if (::setrlimit(RLIMIT_NOFILE, &low) != 0) return 98;
    const struct rlimit raised { 1000, 1000 };
    if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) return errno == EPERM ? 3 : 1;
    struct rlimit after {};
    ::getrlimit(RLIMIT_NOFILE, &after);
    return after.rlim_max == 1000 ? 0 : 2;
  });
  if (ExitedWith(status, 3)) {
    GTEST_SKIP() << "no CAP_SYS_RESOURCE here, so a hard limit cannot be raised at all";
  }
  EXPECT_TRUE(ExitedWith(status, 0)) << Describe(status);
}

// ---- CPU ----

TEST(RlimitCpuTest, BusyLoopPastTheLimitDiesOfSigxcpu) {
  const int status = RunInChild([] {
    (void)::signal(SIGXCPU, SIG_DFL);
    ResourceLimits limits;
    limits.cpu_seconds = 1;
    if (Apply(limits) != 0) return 99;
    BurnCpu(1.2);  // the soft limit interrupts this at 1.0 s
    return 0;
  });
  EXPECT_TRUE(KilledBy(status, SIGXCPU)) << Describe(status);
}

TEST(RlimitCpuTest, WithoutTheLimitTheSameLoopCompletes) {
  const int status = RunInChild([] {
    (void)::signal(SIGXCPU, SIG_DFL);
    if (Apply(ResourceLimits{}) != 0) return 99;
    BurnCpu(1.2);
    return 0;
  });
  EXPECT_TRUE(ExitedWith(status, 0)) << Describe(status);
}

// ---- file size ----

// Writes 8 KiB to an unlinked temporary file. Returns 0 if all of it was written, 2 on EFBIG,
// 1 on another error.
int WriteEightKiB() {
  char path[] = "/tmp/cagent-rlimit-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return 97;
  ::unlink(path);
  static const char block[4096] = {};
  for (int i = 0; i < 2; ++i) {
    const ssize_t n = ::write(fd, block, sizeof(block));
    if (n < 0) return errno == EFBIG ? 2 : 1;
  }
  ::close(fd);
  return 0;
}

TEST(RlimitFileSizeTest, WritingPastTheLimitRaisesSigxfsz) {
  const int status = RunInChild([] {
    (void)::signal(SIGXFSZ, SIG_DFL);
    ResourceLimits limits;
    limits.file_size_bytes = 4096;
    if (Apply(limits) != 0) return 99;
    return WriteEightKiB();
  });
  EXPECT_TRUE(KilledBy(status, SIGXFSZ)) << Describe(status);
}

TEST(RlimitFileSizeTest, WithSigxfszIgnoredTheWriteFailsWithEfbig) {
  const int status = RunInChild([] {
    (void)::signal(SIGXFSZ, SIG_IGN);
    ResourceLimits limits;
    limits.file_size_bytes = 4096;
    if (Apply(limits) != 0) return 99;
    return WriteEightKiB();
  });
  EXPECT_TRUE(ExitedWith(status, 2)) << Describe(status) << " (2 = EFBIG)";
}

TEST(RlimitFileSizeTest, WithoutTheLimitTheWriteSucceeds) {
  const int status = RunInChild([] {
    (void)::signal(SIGXFSZ, SIG_DFL);
    if (Apply(ResourceLimits{}) != 0) return 99;
    return WriteEightKiB();
  });
  EXPECT_TRUE(ExitedWith(status, 0)) << Describe(status);
}

// ---- open files ----

// Opens /dev/null until `attempts` descriptors are open. Returns 0 if all opened, 2 if an open
// failed with EMFILE, 1 on another error.
int OpenMany(int attempts) {
  for (int i = 0; i < attempts; ++i) {
    if (::open("/dev/null", O_RDONLY) < 0) return errno == EMFILE ? 2 : 1;
  }
  return 0;
}

TEST(RlimitOpenFilesTest, OpeningMoreThanTheLimitFailsWithEmfile) {
  const int status = RunInChild([] {
    ResourceLimits limits;
    limits.open_files = 16;
    if (Apply(limits) != 0) return 99;
    return OpenMany(64);
  });
  EXPECT_TRUE(ExitedWith(status, 2)) << Describe(status) << " (2 = EMFILE)";
}

TEST(RlimitOpenFilesTest, WithoutTheLimitTheSameOpensSucceed) {
  const int status = RunInChild([] {
    if (Apply(ResourceLimits{}) != 0) return 99;
    return OpenMany(64);
  });
  EXPECT_TRUE(ExitedWith(status, 0)) << Describe(status);
}

// ---- core dumps ----

TEST(RlimitCoreTest, CoreLimitIsZeroAfterApply) {
  const int status = RunInChild([] {
    if (Apply(ResourceLimits{}) != 0) return 99;
    struct rlimit core {};
    ::getrlimit(RLIMIT_CORE, &core);
    return core.rlim_cur == 0 && core.rlim_max == 0 ? 0 : 1;
  });
  EXPECT_TRUE(ExitedWith(status, 0)) << Describe(status);
}

TEST(RlimitCoreTest, WithCoreDumpsAllowedTheCallersLimitIsKept) {
  struct rlimit mine {};
  ::getrlimit(RLIMIT_CORE, &mine);
  const int status = RunInChild([mine] {
    ResourceLimits limits;
    limits.core_dumps = true;
    if (Apply(limits) != 0) return 99;
    struct rlimit core {};
    ::getrlimit(RLIMIT_CORE, &core);
    return core.rlim_cur == mine.rlim_cur && core.rlim_max == mine.rlim_max ? 0 : 1;
  });
  EXPECT_TRUE(ExitedWith(status, 0)) << Describe(status);
}

// ---- processes: the fork-bomb guard ----
//
// The kernel exempts the global root user from RLIMIT_NPROC (see rlimits.h), so when the tests
// run as root the process-limit children switch to `nobody` first — the uid a root-run CI uses
// for its unprivileged pass, and the situation of every non-root user of cagent.

constexpr int kProcessLimit = 6;
constexpr int kHostProcesses = 12;  // more than the limit, all of the same uid, outside the ns
constexpr int kForkAttempts = 3 * kProcessLimit;
constexpr int kNobody = 65534;

// Exit codes of ForkUntilRefused: the number of children forked (< 100) when a fork failed with
// EAGAIN; 100 + that number when every attempt succeeded; 120 on another fork error; 121 when
// unshare(CLONE_NEWUSER) is refused (the test then skips); 99 when applying the limit failed.
constexpr int kAllForked = 100;
constexpr int kOtherError = 120;
constexpr int kNoUserNs = 121;

// Body of the "sandbox" process: optionally enters a new user namespace, optionally applies the
// process limit, then forks idle children until the kernel refuses.
int ForkUntilRefused(bool new_userns, bool limit) {
  if (new_userns && ::unshare(CLONE_NEWUSER) != 0) return kNoUserNs;
  if (limit) {
    ResourceLimits limits;
    limits.processes = kProcessLimit;
    if (Apply(limits) != 0) return 99;
  }
  int forked = 0;
  int result = -1;
  std::vector<pid_t> children;
  for (int i = 0; i < kForkAttempts; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::pause();
      ::_exit(0);
    }
    if (pid < 0) {
      result = errno == EAGAIN ? forked : kOtherError;
      break;
    }
    children.push_back(pid);
    ++forked;
  }
  if (result < 0) result = kAllForked + forked;
  for (pid_t c : children) ::kill(c, SIGKILL);
  for (pid_t c : children) ::waitpid(c, nullptr, 0);
  return result;
}

// Runs the scenario in a forked child: drop to nobody when root (unless `stay_root`), start
// kHostProcesses idle processes of that uid in the current (host) user namespace, then run
// ForkUntilRefused in a further child and return its exit code (or -1 if it did not exit).
int ProcessScenario(bool new_userns, bool limit, bool stay_root = false) {
  const int status = RunInChild([=] {
    if (::geteuid() == 0 && !stay_root) {
      if (::setresgid(kNobody, kNobody, kNobody) != 0 ||
          ::setresuid(kNobody, kNobody, kNobody) != 0) {
        return 98;
      }
    }
    int gate[2];
    if (::pipe(gate) != 0) return 97;
    std::vector<pid_t> host;
    for (int i = 0; i < kHostProcesses; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        char c;
        ::close(gate[1]);
        [[maybe_unused]] const ssize_t n = ::read(gate[0], &c, 1);  // until the gate closes
        ::_exit(0);
      }
      if (pid > 0) host.push_back(pid);
    }
    ::close(gate[0]);
    const int inner = RunInChild([=] { return ForkUntilRefused(new_userns, limit); });
    ::close(gate[1]);
    for (pid_t h : host) ::waitpid(h, nullptr, 0);
    if (static_cast<int>(host.size()) != kHostProcesses) return 96;
    return WIFEXITED(inner) ? WEXITSTATUS(inner) : 95;
  });
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// In a fresh user namespace the limit counts only that namespace's processes: although the uid
// already runs kHostProcesses (> limit) processes on the host, the sandbox may still fork up to
// the limit — limit − 1 children, since the sandbox process itself is counted — and the next
// fork fails with EAGAIN.
TEST(RlimitProcessesTest, LimitInANewUserNamespaceCountsOnlyItsProcesses) {
  const int forked = ProcessScenario(/*new_userns=*/true, /*limit=*/true);
  if (forked == kNoUserNs) GTEST_SKIP() << "unshare(CLONE_NEWUSER) refused on this host";
  EXPECT_EQ(forked, kProcessLimit - 1)
      << "expected EAGAIN after " << kProcessLimit - 1 << " forks (100+n = no refusal, "
      << kOtherError << " = another errno)";
}

// The guard switched off: the same fork loop in a new user namespace without the limit is never
// refused — a fork bomb would run on.
TEST(RlimitProcessesTest, WithoutTheLimitEveryForkSucceeds) {
  const int forked = ProcessScenario(/*new_userns=*/true, /*limit=*/false);
  if (forked == kNoUserNs) GTEST_SKIP() << "unshare(CLONE_NEWUSER) refused on this host";
  EXPECT_EQ(forked, kAllForked + kForkAttempts);
}

// Contrast, showing the count really is per namespace: the same limit applied without a new user
// namespace counts the uid's host processes too, which already exceed it, so the first fork fails.
TEST(RlimitProcessesTest, OutsideAUserNamespaceTheHostsProcessesCount) {
  EXPECT_EQ(ProcessScenario(/*new_userns=*/false, /*limit=*/true), 0);
}

// Documents the kernel's exemption (copy_process(): real_cred->user == INIT_USER): as global root,
// RLIMIT_NPROC is accepted but does not stop forks, in a new user namespace or not. A root-run
// sandbox needs the cgroup pids controller for this. If this starts failing, the kernel has begun
// enforcing the limit for root: update the comment in rlimits.h.
TEST(RlimitProcessesTest, GlobalRootIsExemptFromTheLimit) {
  if (::geteuid() != 0) GTEST_SKIP() << "not running as root; the exemption concerns uid 0 only";
  const int forked = ProcessScenario(/*new_userns=*/true, /*limit=*/true, /*stay_root=*/true);
  if (forked == kNoUserNs) GTEST_SKIP() << "unshare(CLONE_NEWUSER) refused on this host";
  EXPECT_EQ(forked, kAllForked + kForkAttempts);
}

// ---- explanations ----

TEST(RlimitExplainTest, SigxcpuNamesTheCpuLimit) {
  ResourceLimits limits;
  limits.cpu_seconds = 10;
  EXPECT_EQ(ExplainLimitSignal(SIGXCPU, limits), "CPU time limit of 10s reached (SIGXCPU)");
  EXPECT_EQ(ExplainLimitSignal(SIGXCPU, ResourceLimits{}), "CPU time limit reached (SIGXCPU)");
}

TEST(RlimitExplainTest, SigxfszNamesTheFileSizeLimit) {
  ResourceLimits limits;
  limits.file_size_bytes = 1ULL << 30;
  EXPECT_EQ(ExplainLimitSignal(SIGXFSZ, limits), "file size limit of 1.0 GiB reached (SIGXFSZ)");
  limits.file_size_bytes = 1536;
  EXPECT_EQ(ExplainLimitSignal(SIGXFSZ, limits), "file size limit of 1.5 KiB reached (SIGXFSZ)");
  EXPECT_EQ(ExplainLimitSignal(SIGXFSZ, ResourceLimits{}), "file size limit reached (SIGXFSZ)");
}

TEST(RlimitExplainTest, OtherSignalsAreNotLimitSignals) {
  ResourceLimits limits;
  limits.cpu_seconds = 10;
  limits.file_size_bytes = 1 << 20;
  for (int sig : {SIGKILL, SIGTERM, SIGSEGV, SIGABRT, 0}) {
    EXPECT_EQ(ExplainLimitSignal(sig, limits), "") << "signal " << sig;
  }
}

TEST(RlimitExplainTest, HumanReadableSizes) {
  EXPECT_EQ(HumanReadableSize(0), "0 B");
  EXPECT_EQ(HumanReadableSize(1023), "1023 B");
  EXPECT_EQ(HumanReadableSize(1024), "1.0 KiB");
  EXPECT_EQ(HumanReadableSize(512ULL << 20), "512.0 MiB");
  EXPECT_EQ(HumanReadableSize((1ULL << 20) - 1), "1.0 MiB");
  EXPECT_EQ(HumanReadableSize(10ULL << 30), "10.0 GiB");
  EXPECT_EQ(HumanReadableSize(UINT64_MAX), "16.0 EiB");
}

}  // namespace
}  // namespace cagent::launcher
