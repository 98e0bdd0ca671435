// run_command: exit status in words, timeouts, and the rule that a call leaves no process behind.
// No timing asserts: a test that hangs is caught by the CTest timeout; pids written by the
// command itself are checked with kill(pid, 0) == ESRCH after the call.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/types.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/command_tool.h"
#include "agent/toolbox.h"
#include "tests/agent/tool_test_util.h"

namespace cagent::agent {
namespace {

using testing::Call;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using testing::OpenToolbox;
using testing::PrepareFailure;
using ::testing::StartsWith;
using testing::TempWorkspace;

std::vector<pid_t> PidsIn(const std::string& path) {
  std::ifstream in(path);
  std::vector<pid_t> pids;
  long pid = 0;
  while (in >> pid) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

void ExpectAllGone(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    errno = 0;
    EXPECT_EQ(::kill(pid, 0), -1) << "pid " << pid << " is still alive (or a zombie)";
    EXPECT_EQ(errno, ESRCH) << "pid " << pid;
  }
}

ToolLimits QuickLimits() {
  ToolLimits limits;
  limits.command_timeout = std::chrono::milliseconds(60000);
  limits.kill_grace = std::chrono::milliseconds(200);
  return limits;
}

TEST(RunCommand, ExitCodesAndOutput) {
  TempWorkspace ws;
  ws.Write("hello.txt", "hi there\n");
  auto box = OpenToolbox(ws, QuickLimits());
  auto ok = Call(box, "run_command", {{"command", "cat hello.txt; echo to-stderr >&2"}});
  ASSERT_TRUE(ok.ok) << ok.Render();
  EXPECT_EQ(ok.message, "exit code 0");
  EXPECT_EQ(ok.output, "hi there\nto-stderr\n");
  EXPECT_TRUE(ok.workspace_may_have_changed);
  auto fail = Call(box, "run_command", {{"command", "exit 3"}});
  EXPECT_TRUE(fail.ok);
  EXPECT_EQ(fail.message, "exit code 3");
  EXPECT_EQ(fail.output, "(no output)");
  auto cwd = Call(box, "run_command", {{"command", "pwd -P"}});
  EXPECT_EQ(cwd.output, std::filesystem::canonical(ws.path()).string() + "\n");
}

TEST(RunCommand, DeathBySignalInWords) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws, QuickLimits());
  auto out = Call(box, "run_command", {{"command", "kill -KILL $$"}});
  EXPECT_EQ(out.message, "killed by SIGKILL (signal 9)");
  auto segv = Call(box, "run_command", {{"command", "kill -SEGV $$"}});
  EXPECT_EQ(segv.message, "killed by SIGSEGV (signal 11)");
}

TEST(RunCommand, StdinIsEmpty) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws, QuickLimits());
  auto out = Call(box, "run_command", {{"command", "cat; echo done"}});
  EXPECT_EQ(out.message, "exit code 0");
  EXPECT_EQ(out.output, "done\n");
}

TEST(RunCommand, TimeoutKillsTheGroupIncludingATermIgnoringChild) {
  TempWorkspace ws;
  ToolLimits limits = QuickLimits();
  auto box = OpenToolbox(ws, limits);
  // A background child that ignores SIGTERM, and a foreground sleep.
  const std::string cmd =
      "sh -c 'trap \"\" TERM; echo $$ >> pids; while :; do sleep 1; done' & "
      "echo $! >> pids; echo $$ >> pids; echo started; sleep 1000";
  auto out = Call(box, "run_command", {{"command", cmd}, {"timeout_ms", 500}});
  EXPECT_FALSE(out.ok);
  EXPECT_EQ(out.code, "timeout");
  EXPECT_THAT(out.message, StartsWith("run_command timed out after 500 ms; the process group was "
                                      "terminated (SIGTERM"));
  EXPECT_THAT(out.output, HasSubstr("started"));
  auto pids = PidsIn(ws.At("pids"));
  EXPECT_GE(pids.size(), 2U);
  ExpectAllGone(pids);
}

TEST(RunCommand, TimeoutEscalatesToSigkillWhenTheShellIgnoresTerm) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws, QuickLimits());
  auto out = Call(box, "run_command",
                  {{"command", "trap '' TERM; echo $$ > pids; while :; do sleep 1; done"},
                   {"timeout_ms", 300}});
  EXPECT_EQ(out.code, "timeout");
  EXPECT_THAT(out.message, HasSubstr("then SIGKILL after 200 ms"));
  EXPECT_THAT(out.message, HasSubstr("killed by SIGKILL (signal 9)"));
  ExpectAllGone(PidsIn(ws.At("pids")));
}

TEST(RunCommand, BackgroundChildHoldingThePipeDoesNotHangTheCall) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws, QuickLimits());
  // The background sleep inherits stdout: waiting for EOF would wait 1000 s.
  auto out = Call(box, "run_command", {{"command", "sleep 1000 & echo $! > pids; echo bye"}});
  ASSERT_TRUE(out.ok) << out.Render();
  EXPECT_THAT(out.message, StartsWith("exit code 0"));
  EXPECT_THAT(out.message, HasSubstr("1 background process(es) still running when the shell "
                                     "exited were killed"));
  EXPECT_EQ(out.output, "bye\n");
  ExpectAllGone(PidsIn(ws.At("pids")));
}

TEST(RunCommand, SetsidChildIsKilledThroughTheSubreaper) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws, QuickLimits());
  // The daemon leaves the process group and the session; it comes back to us as an orphan.
  const std::string cmd =
      "setsid sh -c 'echo $$ > pids; sleep 1000 & echo $! >> pids; wait' </dev/null >/dev/null "
      "2>&1 & while [ \"$(cat pids 2>/dev/null | wc -l)\" != 2 ]; do sleep 0.01; done; echo ready";
  auto out = Call(box, "run_command", {{"command", cmd}});
  ASSERT_TRUE(out.ok) << out.Render();
  EXPECT_EQ(out.output, "ready\n");
  auto pids = PidsIn(ws.At("pids"));
  ASSERT_EQ(pids.size(), 2U);
  ExpectAllGone(pids);
}

TEST(RunCommand, DoubleForkedDaemonIgnoringTermIsKilled) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws, QuickLimits());
  // The subshell exits at once, so the daemon is an orphan from the start.
  const std::string cmd =
      "( sh -c 'trap \"\" TERM HUP; echo $$ > pids; exec sleep 1000' & ) ; "
      "while [ ! -s pids ]; do sleep 0.01; done";
  auto out = Call(box, "run_command", {{"command", cmd}});
  ASSERT_TRUE(out.ok) << out.Render();
  ExpectAllGone(PidsIn(ws.At("pids")));
}

TEST(RunCommand, OutputFloodIsCappedHeadAndTail) {
  TempWorkspace ws;
  ToolLimits limits = QuickLimits();
  limits.command_output_bytes = 1000;
  auto box = OpenToolbox(ws, limits);
  auto out = Call(box, "run_command",
                  {{"command", "echo FIRST; yes | head -c 50000000; echo; echo LAST"}});
  ASSERT_TRUE(out.ok) << out.message;
  EXPECT_THAT(out.message, StartsWith("exit code 0"));
  // 6 + 50000000 + 1 + 5 bytes written; 500 kept at each end.
  const std::uint64_t total = 6 + 50000000 + 1 + 5;
  EXPECT_THAT(out.message, HasSubstr("the output was " + std::to_string(total) +
                                     " bytes; the "
                                     "middle " +
                                     std::to_string(total - 1000) + " bytes were cut"));
  EXPECT_THAT(out.output, StartsWith("FIRST\ny\ny\n"));
  EXPECT_THAT(out.output, EndsWith("y\ny\n\nLAST\n"));
  EXPECT_THAT(out.output, HasSubstr("[... " + std::to_string(total - 1000) + " bytes cut ...]"));
  EXPECT_LT(out.output.size(), 1100U);
}

TEST(RunCommand, ArgumentsAreChecked) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws, QuickLimits());
  auto empty = PrepareFailure(box, "run_command", {{"command", "  "}});
  EXPECT_EQ(empty.code, "bad_arguments");
  auto nul = PrepareFailure(box, "run_command", {{"command", std::string("ls\0rm", 5)}});
  EXPECT_EQ(nul.code, "bad_arguments");
  auto long_timeout =
      PrepareFailure(box, "run_command", {{"command", "true"}, {"timeout_ms", 600000}});
  EXPECT_EQ(long_timeout.code, "bad_arguments");
  EXPECT_THAT(long_timeout.message, HasSubstr("above this run's limit of 60000 ms"));
  auto prepared = box.Prepare("run_command", {{"command", "true"}});
  ASSERT_TRUE(std::holds_alternative<std::unique_ptr<PreparedCall>>(prepared));
  const auto& call = std::get<std::unique_ptr<PreparedCall>>(prepared);
  EXPECT_EQ(call->command(), "true");
  EXPECT_TRUE(call->paths().empty());
}

TEST(RunCommand, AgentDescriptorsDoNotLeakIntoTheCommand) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws, QuickLimits());
  // An fd without close-on-exec, as an inherited broker socket might be.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  auto out = Call(box, "run_command", {{"command", "ls /proc/self/fd | sort -n | tr '\\n' ' '"}});
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_TRUE(out.ok);
  // 0, 1, 2 and the fd `ls` itself opened to read the directory.
  EXPECT_EQ(out.output, "0 1 2 3 ");
}

TEST(RunShellCommand, SignalDescription) {
  EXPECT_EQ(SignalDescription(SIGTERM), "SIGTERM (signal 15)");
  EXPECT_EQ(SignalDescription(SIGKILL), "SIGKILL (signal 9)");
}

}  // namespace
}  // namespace cagent::agent
