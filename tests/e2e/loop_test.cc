// Loop detection end to end (issue #13, class 8): through the real cagent, broker, sandbox and
// agent, a command that succeeds but changes nothing is refused from its third identical call on,
// while a command that really changes the workspace each time keeps running. The broker suite
// (tests/launcher/broker/loop_detector_test.cc) has the twin with the old success-reset switched
// on; the binary has no switch for it, so here the contrast is the changing command.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class LoopRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& h = Harness::Get();
    if (!h.skip_reason().empty()) GTEST_SKIP() << h.skip_reason();
    if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
    dir_ = h.MakeDir("loop");
    repo_ = dir_ + "/repo";
    h.MakeDemoRepo(repo_);
    h.GiveToRunUser(dir_);
    ASSERT_FALSE(HasFailure()) << "setting up the demo repository";
  }

  // Runs a session of: the demo's fix (read, edit), `times` x run_command `command`, finish.
  // Returns the result.json and fills `loop_refusals` with the event log's loop entries.
  json RunRepeating(const std::string& command, int times, int& loop_refusals) {
    std::string session = ToolTurn("read_file", {{"path", "calc.py"}});
    session += ToolTurn(
        "edit_file",
        {{"path", "calc.py"}, {"old_string", "return a - b"}, {"new_string", "return a + b"}});
    for (int i = 0; i < times; ++i) session += ToolTurn("run_command", {{"command", command}});
    session += ToolTurn("finish", {{"summary", "done"}});
    {
      std::ofstream out(dir_ + "/session.jsonl", std::ios::trunc);
      out << session;
    }
    RunOptions o;
    o.extra_env = {"XDG_STATE_HOME=" + dir_ + "/state"};
    o.timeout = std::chrono::seconds(120);
    const RunResult r =
        Harness::Get().Run({"run", "--profile", repo_ + "/.cagent/fix-add.cagent", "--repo", repo_,
                            "--model", "replay:" + dir_ + "/session.jsonl", "--approve", "never",
                            "--json", std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/task.md"},
                           o);
    const auto brace = r.out.find('{');
    json res =
        brace == std::string::npos ? json() : json::parse(r.out.substr(brace), nullptr, false);
    EXPECT_TRUE(res.is_object()) << r.out << "\n" << r.err;
    loop_refusals = 0;
    if (!res.is_object()) return res;
    std::ifstream log(res.value("event_log", ""));
    std::string line;
    while (std::getline(log, line)) {
      const json e = json::parse(line, nullptr, false);
      if (e.is_object() && e.value("event", "") == "loop") ++loop_refusals;
    }
    return res;
  }

  std::string dir_, repo_;
};

TEST_F(LoopRunTest, ASuccessfulCommandThatChangesNothingIsRefusedFromItsThirdRepeat) {
  int refusals = -1;
  const json res = RunRepeating("true", 6, refusals);
  ASSERT_TRUE(res.is_object());
  // Calls 3, 4, 5 and 6 are refused; the first two ran (and succeeded).
  EXPECT_EQ(refusals, 4) << res.dump(2);
  EXPECT_GE(res.value("denials", 0), 4) << res.dump(2);
  EXPECT_EQ(res["status"], "completed")
      << "the refusals went to the agent; the fix still verifies\n"
      << res.dump(2);
}

TEST_F(LoopRunTest, ACommandThatReallyChangesTheWorkspaceEachTimeIsNotRefused) {
  int refusals = -1;
  const json res = RunRepeating("echo x >> calc.py", 6, refusals);
  ASSERT_TRUE(res.is_object());
  EXPECT_EQ(refusals, 0) << res.dump(2);
}

}  // namespace
}  // namespace cagent::testing
