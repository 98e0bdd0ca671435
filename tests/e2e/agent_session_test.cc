// `cagent agent`: the agent, driven by the replay adapter, through the real broker, inside the
// real sandbox, completes a small coding task (read, edit, run the tests, finish); and the
// session's refusals and budgets end it the way the issue says.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using nlohmann::json;

std::string Turn(const std::string& text, const json& calls) {
  json t = {{"text", text}, {"usage", {{"input_tokens", 500}, {"output_tokens", 40}}}};
  if (!calls.is_null()) t["tool_calls"] = calls;
  return t.dump() + "\n";
}

json Call(const std::string& id, const std::string& name, json args) {
  return json{{"id", id}, {"name", name}, {"arguments", std::move(args)}};
}

class AgentSession : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& h = Harness::Get();
    if (!h.skip_reason().empty()) GTEST_SKIP() << h.skip_reason();
    dir_ = h.MakeDir("agent");
    ws_ = dir_ + "/ws";
    std::filesystem::create_directories(ws_);
    WriteFile(ws_ + "/calc.py", "def add(a, b):\n    return a - b\n");
    WriteFile(ws_ + "/test_calc.py",
              "import unittest\nfrom calc import add\n\n"
              "class T(unittest.TestCase):\n"
              "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
              "if __name__ == '__main__':\n    unittest.main()\n");
    WriteFile(dir_ + "/task.md", "# Fix add\n\nThe test in test_calc.py fails. Fix calc.py.\n");
    // Ownership for the nobody variant: the workspace must be writable by the user cagent runs as.
    const std::string chown =
        "chown -R " + std::to_string(h.run_uid()) + ":" + std::to_string(h.run_gid()) + " " + dir_;
    ASSERT_EQ(std::system(chown.c_str()), 0);
  }

  RunResult RunAgent(const std::string& session, std::vector<std::string> extra = {}) {
    WriteFile(dir_ + "/session.jsonl", session);
    std::vector<std::string> args = {"agent",
                                     "--profile",
                                     "backend",
                                     "--workspace",
                                     ws_,
                                     "--model",
                                     "replay:" + dir_ + "/session.jsonl",
                                     "--approve",
                                     "never",
                                     "--audit-log",
                                     dir_ + "/audit.jsonl",
                                     "--json",
                                     dir_ + "/task.md"};
    args.insert(args.end(), extra.begin(), extra.end());
    // The session's agent log goes under the state directory: one of the test's own, writable by
    // the user cagent runs as (the caller's ~/.local/state is not nobody's to write).
    RunOptions o;
    o.extra_env = {"XDG_STATE_HOME=" + dir_ + "/state"};
    return Harness::Get().Run(args, o);
  }

  json Outcome(const RunResult& r) {
    const auto brace = r.out.find('{');
    if (brace == std::string::npos) return json();
    return json::parse(r.out.substr(brace), nullptr, false);
  }

  std::string dir_;
  std::string ws_;
};

TEST_F(AgentSession, ReplayedModelFixesTheBugRunsTheTestsAndFinishes) {
  std::string session;
  session +=
      Turn("Reading the code.", json::array({Call("c1", "read_file", {{"path", "calc.py"}})}));
  session += Turn(
      "The operator is wrong.",
      json::array({Call(
          "c2", "edit_file",
          {{"path", "calc.py"}, {"old_string", "return a - b"}, {"new_string", "return a + b"}})}));
  session += Turn(
      "Running the tests.",
      json::array({Call("c3", "run_command", {{"command", "python3 -m unittest -q test_calc"}})}));
  session += Turn("", json::array({Call("c4", "finish", {{"summary", "Fixed add()."}})}));
  const RunResult r = RunAgent(session);
  SCOPED_TRACE(r.err);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(ReadFile(ws_ + "/calc.py"), "def add(a, b):\n    return a + b\n");
  const json out = Outcome(r);
  ASSERT_TRUE(out.is_object()) << r.out;
  EXPECT_EQ(out["status"], "finished");
  EXPECT_EQ(out["summary"], "Fixed add().");
  EXPECT_EQ(out["usage"]["model_turns"], 4);
  EXPECT_EQ(out["usage"]["tool_calls"], 3);  // finish is a message of its own, not a tool call
  EXPECT_EQ(out["audit_lost"], 0);

  // The audit chain verifies, and records the decisions.
  const RunResult verify = Harness::Get().Run({"log", "verify", dir_ + "/audit.jsonl"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  const std::string audit = ReadFile(dir_ + "/audit.jsonl");
  EXPECT_NE(audit.find("\"run_command\""), std::string::npos);
  EXPECT_NE(audit.find("\"allow\""), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/audit.jsonl").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
}

TEST_F(AgentSession, ADeniedCommandIsRefusedWithTheRuleAndTheRunStillFinishes) {
  std::string session;
  session +=
      Turn("", json::array({Call("c1", "run_command", {{"command", "git push origin main"}})}));
  session += Turn("", json::array({Call("c2", "finish", {{"summary", "Could not push."}})}));
  const RunResult r = RunAgent(session);
  SCOPED_TRACE(r.err);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string audit = ReadFile(dir_ + "/audit.jsonl");
  EXPECT_NE(audit.find("\"deny\""), std::string::npos) << audit;
}

TEST_F(AgentSession, TheTurnBudgetEndsTheRunFailedNamingTheBudget) {
  std::string session;
  for (int i = 0; i < 5; ++i) {
    session += Turn("", json::array({Call("c" + std::to_string(i), "list_dir",
                                          {{"path", i % 2 == 0 ? "." : "./"}})}));
  }
  const RunResult r = RunAgent(session, {"--max-turns", "2"});
  SCOPED_TRACE(r.err);
  EXPECT_EQ(r.exit_code, 3) << r.out;  // kRunFailed, as `cagent run` returns for the same end
  const json out = Outcome(r);
  ASSERT_TRUE(out.is_object()) << r.out;
  EXPECT_EQ(out["status"], "failed");
  EXPECT_NE(out["reason"].get<std::string>().find("max turns exceeded"), std::string::npos)
      << out.dump();
}

TEST_F(AgentSession, TheAgentCannotReachTheNetworkOrTheCallersFiles) {
  // The replayed model tries to read a host file by absolute path and through a symlink, and to
  // reach the network; each is refused (by the tool, the broker or the sandbox) and the caller's
  // directory outside the workspace is untouched.
  std::filesystem::create_symlink("/etc/passwd", ws_ + "/passwd-link");
  WriteFile(dir_ + "/outside.txt", "keep me\n");
  std::string session;
  session += Turn("", json::array({Call("c1", "read_file", {{"path", "/etc/passwd"}})}));
  session += Turn("", json::array({Call("c2", "read_file", {{"path", "passwd-link"}})}));
  session += Turn(
      "",
      json::array({Call("c3", "write_file", {{"path", "../outside.txt"}, {"content", "gone"}})}));
  session += Turn("", json::array({Call("c4", "run_command",
                                        {{"command",
                                          "python3 -c \"import urllib.request;"
                                          "urllib.request.urlopen('http://1.1.1.1')\""}})}));
  session += Turn("", json::array({Call("c5", "finish", {{"summary", "done"}})}));
  const RunResult r = RunAgent(session);
  SCOPED_TRACE(r.err);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(ReadFile(dir_ + "/outside.txt"), "keep me\n");
  // The agent refused both reads itself (beneath the workspace fd) and said so to the broker.
  const std::string audit = ReadFile(dir_ + "/audit.jsonl");
  EXPECT_NE(audit.find("read_file: outside_workspace /etc/passwd"), std::string::npos) << audit;
  EXPECT_NE(audit.find("read_file: outside_workspace passwd-link"), std::string::npos) << audit;
  EXPECT_NE(audit.find("write_file: outside_workspace ../outside.txt"), std::string::npos) << audit;
  EXPECT_EQ(audit.find("root:x:0:0"), std::string::npos) << "host /etc/passwd reached the model";
}

}  // namespace
}  // namespace cagent::testing
