// The prepare-to-mount race of the mount view (label: sandbox; launcher/sandbox/mountns.h, "the
// race").
//
// Each test runs PrepareMountPlan in the test process, then plays the concurrent writer on the host
// (swaps a workspace path), then applies the plan in a forked child that owns new user, mount and
// pid namespaces, and looks at the finished view from inside. Twins: with
// MountPlan::verify_paths off (the child resolves paths as mount(2) does, no identity check) the
// swap exposes a host directory, leaves a read-only file writable or a hidden file readable; with
// it on the launch fails at ChildStep::kMountChanged naming the op. Every variant runs as the
// caller and, when the runner is root, as nobody (how users run cagent). The test runner itself is
// never confined.
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "launcher/sandbox/mountns.h"

namespace cagent::launcher {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;

// What the child reports: how ApplyMountView ended, and what the probes saw in the finished view.
struct Report {
  int setup_ok = 0;  // 1: a ChildResult came back (0: the namespaces could not be made)
  int setup_errno = 0;
  ChildResult result;
  int readable = -1;   // probe_read opened for reading (1) or not (0)
  char head[32] = {};  // its first bytes
  int writable = -1;   // probe_write opened for writing (1) or not (0)
};

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

bool WriteAll(int fd, const void* data, size_t n) {
  return ::write(fd, data, n) == static_cast<ssize_t>(n);
}

// Child side: no gtest, no allocation after fork.
[[noreturn]] void ApplyInNamespaces(const MountPlan& plan, bool as_nobody, const char* probe_read,
                                    const char* probe_write, const char* uid_map,
                                    const char* gid_map, int out_fd) {
  Report r;
  auto fail = [&](int e) {
    r.setup_errno = e;
    WriteAll(out_fd, &r, sizeof(r));
    ::_exit(1);
  };
  if (as_nobody) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kNobody, kNobody, kNobody) != 0 ||
        ::setresuid(kNobody, kNobody, kNobody) != 0) {
      fail(errno);
    }
    // Changing uid made the process non-dumpable: its /proc files (the id maps) would be root's.
    if (::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) fail(errno);
  }
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) != 0) fail(errno);
  // A process may map its own ids into the namespace it just made (setgroups denied first).
  for (const auto& [file, text] :
       {std::pair{"/proc/self/setgroups", "deny"}, std::pair{"/proc/self/uid_map", uid_map},
        std::pair{"/proc/self/gid_map", gid_map}}) {
    const int fd = ::open(file, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || !WriteAll(fd, text, std::strlen(text))) fail(errno);
    ::close(fd);
  }
  // The new pid namespace applies to children: the view (with its new /proc) is built in pid 1.
  const pid_t init = ::fork();
  if (init < 0) fail(errno);
  if (init == 0) {
    r.setup_ok = 1;
    r.result = ApplyMountView(plan);
    if (r.result.ok) {
      const int rfd = ::open(probe_read, O_RDONLY | O_CLOEXEC);
      r.readable = rfd >= 0 ? 1 : 0;
      if (rfd >= 0) {
        if (::read(rfd, r.head, sizeof(r.head) - 1) < 0) r.head[0] = '\0';
        ::close(rfd);
      }
      const int wfd = ::open(probe_write, O_WRONLY | O_CLOEXEC);
      r.writable = wfd >= 0 ? 1 : 0;
      if (wfd >= 0) ::close(wfd);
    }
    WriteAll(out_fd, &r, sizeof(r));
    ::_exit(0);
  }
  int status = 0;
  while (::waitpid(init, &status, 0) < 0 && errno == EINTR) {
  }
  ::_exit(0);
}

struct Variant {
  const char* name;
  bool as_nobody;
};

class MountRaceTest : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    if (GetParam().as_nobody && ::geteuid() != 0) {
      GTEST_SKIP() << "the nobody variant needs a root runner to drop to nobody; this runner is "
                      "uid "
                   << ::geteuid() << " (the caller variant covers it)";
    }
    char tmpl[] = "/tmp/cagent-mount-race-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);
    ws_ = dir_ + "/ws";
    fs::create_directories(ws_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  LaunchSpec Spec() const {
    LaunchSpec spec = DefaultLaunchSpec(ws_, {"true"});
    spec.home = dir_ + "/home";
    return spec;
  }

  // Hands the tree to the user the sandbox will run as, before the plan is prepared.
  void OwnTree() {
    if (!GetParam().as_nobody) return;
    for (const auto& e : fs::recursive_directory_iterator(dir_)) {
      ASSERT_EQ(::lchown(e.path().c_str(), kNobody, kNobody), 0) << e.path();
    }
    ASSERT_EQ(::lchown(dir_.c_str(), kNobody, kNobody), 0);
  }

  // Applies `plan` in a child with its own namespaces and returns what it saw.
  Report Apply(const MountPlan& plan, const std::string& probe_read,
               const std::string& probe_write) {
    const uid_t uid = GetParam().as_nobody ? kNobody : ::geteuid();
    const gid_t gid = GetParam().as_nobody ? kNobody : ::getegid();
    const std::string uid_map = "0 " + std::to_string(uid) + " 1";
    const std::string gid_map = "0 " + std::to_string(gid) + " 1";
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(fds[0]);
      ApplyInNamespaces(plan, GetParam().as_nobody, probe_read.c_str(), probe_write.c_str(),
                        uid_map.c_str(), gid_map.c_str(), fds[1]);
    }
    ::close(fds[1]);
    Report r;
    const ssize_t n = ::read(fds[0], &r, sizeof(r));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_EQ(n, static_cast<ssize_t>(sizeof(r))) << "the child reported nothing";
    return r;
  }

  // What cagent appends to the failure: the description of the op the child names.
  static std::string FailedOp(const MountPlan& plan, const ChildResult& r) {
    if (r.detail < 0 || static_cast<size_t>(r.detail) >= plan.ops.size()) return "(no op)";
    return plan.ops[static_cast<size_t>(r.detail)].description;
  }

  std::string dir_, ws_;
};

// A read-write self-bind inside the workspace (what the git guard makes of a git dir), its
// directory swapped for `sub -> ../home`: the same relative link resolves from /oldroot<ws> to the
// caller's real home directory and from /newroot<ws> to the sandbox's private HOME.
class BindSourceSwap : public MountRaceTest {
 protected:
  void SetUp() override {
    MountRaceTest::SetUp();
    if (IsSkipped()) return;
    fs::create_directories(ws_ + "/sub");
    fs::create_directories(dir_ + "/home");
    WriteFile(dir_ + "/home/secret.txt", "host secret\n");
    OwnTree();
    LaunchSpec spec = Spec();
    spec.read_write_paths = {ws_ + "/sub"};
    auto plan = PrepareMountPlan(spec);
    ASSERT_TRUE(plan.ok()) << plan.error().Message();
    plan_ = std::move(*plan);
    // The concurrent writer, between prepare and mount.
    ASSERT_EQ(::rename((ws_ + "/sub").c_str(), (ws_ + "/sub.orig").c_str()), 0);
    ASSERT_EQ(::symlink("../home", (ws_ + "/sub").c_str()), 0);
  }
  MountPlan plan_;
};

TEST_P(BindSourceSwap, WithoutTheCheckTheBindExposesTheHostDirectory) {
  plan_.verify_paths = false;
  const Report r = Apply(plan_, dir_ + "/home/secret.txt", dir_ + "/home/secret.txt");
  ASSERT_EQ(r.setup_ok, 1) << std::strerror(r.setup_errno);
  ASSERT_TRUE(r.result.ok) << "step " << static_cast<int>(r.result.step) << ": "
                           << std::strerror(r.result.err);
  // HOME was a private tmpfs; the swapped link put the host's directory there, writable.
  EXPECT_EQ(r.readable, 1) << "the twin must show the host directory bound into the view";
  EXPECT_STREQ(r.head, "host secret\n");
  EXPECT_EQ(r.writable, 1);
}

TEST_P(BindSourceSwap, WithTheCheckTheLaunchFailsNamingTheBind) {
  const Report r = Apply(plan_, dir_ + "/home/secret.txt", dir_ + "/home/secret.txt");
  ASSERT_EQ(r.setup_ok, 1) << std::strerror(r.setup_errno);
  ASSERT_FALSE(r.result.ok) << "the swapped bind source must not be mounted";
  EXPECT_EQ(r.result.step, ChildStep::kMountChanged);
  EXPECT_EQ(r.result.err, ELOOP);
  EXPECT_EQ(FailedOp(plan_, r.result), "bind " + ws_ + "/sub read-write");
  EXPECT_NE(ChildStepName(r.result.step).find("a path changed while the sandbox was being built"),
            std::string_view::npos);
}

// A read-only file inside the workspace (the git guard's .git/config) whose directory is renamed
// away and replaced by an absolute link that resolves, in the child's staging root, to a host
// directory outside the view: the read-only bind lands there and the real file stays writable.
class ReadOnlyTargetSwap : public MountRaceTest {
 protected:
  void SetUp() override {
    MountRaceTest::SetUp();
    if (IsSkipped()) return;
    fs::create_directories(ws_ + "/conf");
    WriteFile(ws_ + "/conf/config", "[core]\n");
    fs::create_directories(dir_ + "/elsewhere");
    WriteFile(dir_ + "/elsewhere/config", "decoy\n");
    OwnTree();
    LaunchSpec spec = Spec();
    spec.read_only_paths.push_back(ws_ + "/conf/config");
    auto plan = PrepareMountPlan(spec);
    ASSERT_TRUE(plan.ok()) << plan.error().Message();
    plan_ = std::move(*plan);
    ASSERT_EQ(::rename((ws_ + "/conf").c_str(), (ws_ + "/conf.real").c_str()), 0);
    ASSERT_EQ(::symlink(("/oldroot" + dir_ + "/elsewhere").c_str(), (ws_ + "/conf").c_str()), 0);
  }
  MountPlan plan_;
};

TEST_P(ReadOnlyTargetSwap, WithoutTheCheckTheRealFileStaysWritable) {
  plan_.verify_paths = false;
  const Report r = Apply(plan_, ws_ + "/conf.real/config", ws_ + "/conf.real/config");
  ASSERT_EQ(r.setup_ok, 1) << std::strerror(r.setup_errno);
  ASSERT_TRUE(r.result.ok) << "step " << static_cast<int>(r.result.step) << ": "
                           << std::strerror(r.result.err);
  EXPECT_EQ(r.writable, 1) << "the twin must show the file prepare made read-only writable";
}

TEST_P(ReadOnlyTargetSwap, WithTheCheckTheLaunchFailsNamingTheBind) {
  const Report r = Apply(plan_, ws_ + "/conf.real/config", ws_ + "/conf.real/config");
  ASSERT_EQ(r.setup_ok, 1) << std::strerror(r.setup_errno);
  ASSERT_FALSE(r.result.ok);
  EXPECT_EQ(r.result.step, ChildStep::kMountChanged);
  EXPECT_EQ(r.result.err, ELOOP);
  EXPECT_EQ(FailedOp(plan_, r.result), "bind " + ws_ + "/conf/config read-only");
}

// A hidden file (a deny rule) whose directory is renamed away and re-created with a decoy: no
// symlink anywhere, only another inode at the checked path.
class HiddenFileSwap : public MountRaceTest {
 protected:
  void SetUp() override {
    MountRaceTest::SetUp();
    if (IsSkipped()) return;
    fs::create_directories(ws_ + "/private");
    WriteFile(ws_ + "/private/key", "real key\n");
    OwnTree();
    LaunchSpec spec = Spec();
    spec.hidden_paths.push_back(ws_ + "/private/key");
    auto plan = PrepareMountPlan(spec);
    ASSERT_TRUE(plan.ok()) << plan.error().Message();
    plan_ = std::move(*plan);
    ASSERT_EQ(::rename((ws_ + "/private").c_str(), (ws_ + "/moved").c_str()), 0);
    fs::create_directories(ws_ + "/private");
    WriteFile(ws_ + "/private/key", "decoy\n");
    OwnTree();
  }
  MountPlan plan_;
};

TEST_P(HiddenFileSwap, WithoutTheCheckTheHiddenFileIsReadable) {
  plan_.verify_paths = false;
  const Report r = Apply(plan_, ws_ + "/moved/key", ws_ + "/nonexistent");
  ASSERT_EQ(r.setup_ok, 1) << std::strerror(r.setup_errno);
  ASSERT_TRUE(r.result.ok) << "step " << static_cast<int>(r.result.step) << ": "
                           << std::strerror(r.result.err);
  EXPECT_EQ(r.readable, 1);
  EXPECT_STREQ(r.head, "real key\n") << "the twin must show the hidden file readable";
}

TEST_P(HiddenFileSwap, WithTheCheckTheLaunchFailsNamingTheHide) {
  const Report r = Apply(plan_, ws_ + "/moved/key", ws_ + "/nonexistent");
  ASSERT_EQ(r.setup_ok, 1) << std::strerror(r.setup_errno);
  ASSERT_FALSE(r.result.ok);
  EXPECT_EQ(r.result.step, ChildStep::kMountChanged);
  EXPECT_EQ(r.result.err, ESTALE);
  EXPECT_EQ(FailedOp(plan_, r.result), "hide " + ws_ + "/private/key");
}

// Without a swap the checked plan builds the view it describes: hidden file empty, read-only file
// read-only, the workspace writable.
TEST_P(MountRaceTest, WithoutASwapTheCheckedViewIsBuilt) {
  fs::create_directories(ws_ + "/private");
  WriteFile(ws_ + "/private/key", "real key\n");
  WriteFile(ws_ + "/config", "[core]\n");
  WriteFile(ws_ + "/file", "x\n");
  OwnTree();
  LaunchSpec spec = Spec();
  spec.hidden_paths.push_back(ws_ + "/private/key");
  spec.read_only_paths.push_back(ws_ + "/config");
  auto plan = PrepareMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  Report r = Apply(*plan, ws_ + "/private/key", ws_ + "/config");
  ASSERT_EQ(r.setup_ok, 1) << std::strerror(r.setup_errno);
  ASSERT_TRUE(r.result.ok) << "step " << static_cast<int>(r.result.step) << " op "
                           << r.result.detail << ": " << std::strerror(r.result.err);
  EXPECT_EQ(r.readable, 1);
  EXPECT_STREQ(r.head, "") << "the hidden file reads as /dev/null";
  EXPECT_EQ(r.writable, 0) << "the read-only file";
  r = Apply(*plan, ws_ + "/file", ws_ + "/file");
  ASSERT_TRUE(r.result.ok);
  EXPECT_EQ(r.writable, 1) << "the workspace stays writable";
}

const Variant kVariants[] = {{"caller", false}, {"nobody", true}};
auto VariantName = [](const ::testing::TestParamInfo<Variant>& info) {
  return std::string(info.param.name);
};
INSTANTIATE_TEST_SUITE_P(MountRace, MountRaceTest, ::testing::ValuesIn(kVariants), VariantName);
INSTANTIATE_TEST_SUITE_P(MountRace, BindSourceSwap, ::testing::ValuesIn(kVariants), VariantName);
INSTANTIATE_TEST_SUITE_P(MountRace, ReadOnlyTargetSwap, ::testing::ValuesIn(kVariants),
                         VariantName);
INSTANTIATE_TEST_SUITE_P(MountRace, HiddenFileSwap, ::testing::ValuesIn(kVariants), VariantName);

}  // namespace
}  // namespace cagent::launcher
