// The launcher library building real sandboxes (label: sandbox). RunSandbox forks the sandbox from
// this process; the test runner itself is never confined.
#include "launcher/sandbox/sandbox.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace cagent::launcher {
namespace {

// A workspace of this process's own. Not /tmp itself: the host-side guards walk the writable trees
// and guard every repository in them, which would reach into other tests' repositories under /tmp
// running at the same time (their placeholders then showed up as changes there).
const std::string& Workspace() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/cagent-sandbox-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    return std::string(tmpl);
  }();
  return dir;
}

LaunchSpec Spec(std::vector<std::string> argv) {
  return DefaultLaunchSpec(Workspace(), std::move(argv));
}

TEST(SandboxTest, RunsACommandAndReportsItsStatus) {
  auto out = RunSandbox(Spec({"/bin/sh", "-c", "exit 9"}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->kind, SandboxOutcome::Kind::kExited);
  EXPECT_EQ(out->exit_code, 9);
}

TEST(SandboxTest, ChildSideFailureNamesTheStep) {
  LaunchSpec spec = Spec({"true"});
  spec.hostname = std::string(100, 'x');  // longer than HOST_NAME_MAX: sethostname fails
  auto out = RunSandbox(spec);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->kind, SandboxOutcome::Kind::kSetupFailed);
  EXPECT_EQ(out->exit_code, kExitSetupFailed);
  EXPECT_EQ(out->failed_step, "set hostname");
  EXPECT_EQ(out->err, EINVAL);
  EXPECT_EQ(DescribeOutcome(*out), "sandbox setup failed at set hostname: Invalid argument");
}

TEST(SandboxTest, ParentSideFailureNamesTheStep) {
  LaunchSpec spec = Spec({"true"});
  spec.workspace = "/nonexistent-xyz";
  spec.cwd = spec.workspace;
  auto out = RunSandbox(spec);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->kind, SandboxOutcome::Kind::kSetupFailed);
  EXPECT_EQ(out->failed_step, "prepare mount view");
  EXPECT_NE(out->error.find("No such file or directory"), std::string::npos) << out->error;
}

TEST(SandboxTest, MissingWorkingDirectoryIsASetupFailure) {
  LaunchSpec spec = Spec({"true"});
  spec.cwd = "/nonexistent-cwd";  // chdir inside fails after the view is built
  auto out = RunSandbox(spec);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->kind, SandboxOutcome::Kind::kSetupFailed);
  EXPECT_EQ(out->failed_step, "change to working directory");
  EXPECT_EQ(out->err, ENOENT);
}

TEST(SandboxTest, ExecFailureIsNotASetupFailure) {
  auto out = RunSandbox(Spec({"/tmp"}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->kind, SandboxOutcome::Kind::kExecFailed);
  EXPECT_EQ(out->exit_code, kExitCannotExecute);
  EXPECT_EQ(out->err, EACCES);
}

TEST(SandboxTest, TimeoutStopsTheSandbox) {
  LaunchSpec spec = Spec({"/bin/sh", "-c", "trap '' TERM; sleep 100"});
  spec.timeout = std::chrono::milliseconds(200);
  spec.kill_grace = std::chrono::milliseconds(200);
  auto out = RunSandbox(spec);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->kind, SandboxOutcome::Kind::kTimedOut);
  EXPECT_EQ(out->exit_code, kExitTimedOut);
}

// ---- issue 32: a cache read-only to the sandbox, with a private writable layer ----

namespace overlay {

std::string Read(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[256];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

// A host directory shown at ~/.cache/tool with one file in it, and a command that reads it,
// writes a new file and overwrites the old one there, and reports both into the workspace.
struct Fixture {
  std::string cache;
  LaunchSpec spec;
  explicit Fixture(bool scratch) {
    char tmpl[] = "/tmp/cagent-overlay-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    cache = tmpl;
    if (FILE* f = std::fopen((cache + "/seed").c_str(), "w")) {
      std::fputs("from setup\n", f);
      std::fclose(f);
    }
    const std::string out = Workspace() + (scratch ? "/overlay" : "/plain");
    spec = Spec({"/bin/sh", "-c",
                 "cat ~/.cache/tool/seed > " + out +
                     ".seen; "
                     "echo new > ~/.cache/tool/new && echo changed > ~/.cache/tool/seed; "
                     "echo $? > " +
                     out + ".status; cat ~/.cache/tool/seed >> " + out + ".seen"});
    spec.dir_binds = {{cache, spec.home + "/.cache/tool", false, scratch}};
  }
  ~Fixture() { [[maybe_unused]] int rc = std::system(("rm -rf '" + cache + "'").c_str()); }
};

}  // namespace overlay

TEST(SandboxTest, AReadOnlyCacheWithAPrivateLayerTakesWritesThatNeverReachTheHost) {
  overlay::Fixture f(/*scratch=*/true);
  auto out = RunSandbox(f.spec);
  ASSERT_TRUE(out.ok()) << out.error().Message();
  if (out->kind == SandboxOutcome::Kind::kSetupFailed) {
    GTEST_SKIP() << "overlayfs cannot be mounted in a user namespace here: " << out->failed_step
                 << ": " << out->error;
  }
  EXPECT_EQ(out->exit_code, 0);
  // Inside: the cache's content, and the writes succeeded.
  EXPECT_EQ(overlay::Read(Workspace() + "/overlay.seen"), "from setup\nchanged\n");
  EXPECT_EQ(overlay::Read(Workspace() + "/overlay.status"), "0\n");
  // Outside: the cache as it was.
  EXPECT_EQ(overlay::Read(f.cache + "/seed"), "from setup\n");
  EXPECT_NE(::access((f.cache + "/new").c_str(), F_OK), 0);
}

TEST(SandboxTest, AReadOnlyCacheWithoutTheLayerRefusesWrites) {
  // Twin: the same bind without the layer is what npm met (EROFS), and the host is safe too.
  overlay::Fixture f(/*scratch=*/false);
  auto out = RunSandbox(f.spec);
  ASSERT_TRUE(out.ok()) << out.error().Message();
  EXPECT_EQ(overlay::Read(Workspace() + "/plain.seen"), "from setup\nfrom setup\n");
  EXPECT_NE(overlay::Read(Workspace() + "/plain.status"), "0\n");
  EXPECT_EQ(overlay::Read(f.cache + "/seed"), "from setup\n");
}

// ---- issue 36: a file in the private HOME, written before the command starts ----

TEST(SandboxTest, AHomeFileIsInTheSandboxsHomeWithItsMode) {
  LaunchSpec spec = Spec({"/bin/sh", "-c",
                          "cat ~/.config/tool/token > " + Workspace() +
                              "/home-file.seen; stat -c %a ~/.config/tool/token >> " + Workspace() +
                              "/home-file.seen"});
  spec.home_files.push_back({spec.home + "/.config/tool/token", "placeholder\n", 0400});
  auto out = RunSandbox(spec);
  ASSERT_TRUE(out.ok()) << out.error().Message();
  EXPECT_EQ(out->exit_code, 0) << out->failed_step << ": " << out->error;
  EXPECT_EQ(overlay::Read(Workspace() + "/home-file.seen"), "placeholder\n400\n");
}

TEST(SandboxTest, TwoHomeFilesAtOnePathFailTheLaunch) {
  LaunchSpec spec = Spec({"true"});
  spec.home_files.push_back({spec.home + "/token", "a", 0600});
  spec.home_files.push_back({spec.home + "/token", "b", 0600});
  auto out = RunSandbox(spec);
  ASSERT_TRUE(out.ok()) << out.error().Message();
  EXPECT_EQ(out->kind, SandboxOutcome::Kind::kSetupFailed);
  EXPECT_EQ(out->err, EEXIST);
}

}  // namespace
}  // namespace cagent::launcher
