// The launcher library building real sandboxes (label: sandbox). RunSandbox forks the sandbox from
// this process; the test runner itself is never confined.
#include "launcher/sandbox.h"

#include <stdlib.h>

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

}  // namespace
}  // namespace cagent::launcher
