// The agent loop end to end: the real Toolbox on a temporary workspace, the real BrokerClient over
// a socketpair, and a scripted broker playing the broker's and the model's part.
#include "agent/loop.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/adapters/adapter.h"
#include "tests/agent/scripted_broker_util.h"

namespace cagent::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using protocol::Kind;
using testing::ScriptedBroker;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

class TempWorkspace {
 public:
  TempWorkspace() {
    std::string tmpl = (fs::temp_directory_path() / "cagent-loop-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
  }
  ~TempWorkspace() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// An OpenAI response body with tool calls ({id, name, arguments as a JSON string}).
json OpenAiCalls(const std::vector<std::array<std::string, 3>>& calls,
                 const std::string& text = "") {
  json list = json::array();
  for (const auto& c : calls) {
    list.push_back(
        {{"id", c[0]}, {"type", "function"}, {"function", {{"name", c[1]}, {"arguments", c[2]}}}});
  }
  json message = {{"role", "assistant"},
                  {"content", text.empty() ? json(nullptr) : json(text)},
                  {"tool_calls", list}};
  return {{"choices", {{{"index", 0}, {"message", message}, {"finish_reason", "tool_calls"}}}},
          {"usage", {{"prompt_tokens", 100}, {"completion_tokens", 20}}}};
}

json OpenAiText(const std::string& text) {
  return {{"choices",
           {{{"index", 0},
             {"message", {{"role", "assistant"}, {"content", text}}},
             {"finish_reason", "stop"}}}}};
}

// The messages the adapter sent in the n-th model_call (OpenAI format).
json SentMessages(const ScriptedBroker& broker, std::size_t n) {
  auto calls = broker.Received(Kind::kModelCall);
  if (n >= calls.size()) return json::array();
  return std::get<protocol::ModelCall>(calls[n].body).body["messages"];
}

class LoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(ws_.path().empty());
    WriteText(fs::path(ws_.path()) / "calc.py", "def add(a, b):\n    return a - b\n");
    WriteText(fs::path(ws_.path()) / "test_calc.py",
              "import unittest\n\nfrom calc import add\n\n\n"
              "class AddTest(unittest.TestCase):\n"
              "    def test_add(self):\n"
              "        self.assertEqual(add(2, 3), 5)\n\n\n"
              "if __name__ == \"__main__\":\n    unittest.main()\n");
  }

  // Says hello, runs the loop with the real toolbox, closes the agent's end and waits for the
  // scripted broker.
  LoopResult Run(ScriptedBroker& broker, LoopOptions options = {}) {
    LoopResult result;
    {
      BrokerClient client(broker.TakeAgentEnd());
      broker.Start();
      auto hello = client.Hello("cagent-agent/test");
      EXPECT_TRUE(hello.ok()) << hello.failure().Describe();
      auto toolbox = Toolbox::Open(ws_.path(), ToolLimits{});
      EXPECT_TRUE(toolbox.ok()) << toolbox.error().Message();
      if (hello.ok() && toolbox.ok()) {
        auto adapter = MakeAdapter(hello.value().model.provider, AdapterOptions{1024});
        EXPECT_TRUE(adapter.ok());
        if (adapter.ok()) {
          result = RunLoop(client, toolbox.value(), *adapter.value(), hello.value(), options);
        }
      }
    }
    broker.Join();
    EXPECT_TRUE(broker.errors().empty()) << broker.errors().front();
    return result;
  }

  [[nodiscard]] protocol::Welcome Welcome(std::uint64_t max_turns = 0,
                                          const std::string& provider = "openai") const {
    return testing::TestWelcome(ws_.path(), max_turns, provider);
  }
  [[nodiscard]] std::string Calc() const { return ReadText(fs::path(ws_.path()) / "calc.py"); }

  TempWorkspace ws_;
};

// The recorded session of the demo, played turn by turn: read, edit, run the tests, finish.
TEST_F(LoopTest, FixAddSessionEndToEnd) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 is not on PATH; the recorded session runs `python3 -m unittest -q`";
  }
  std::ifstream in(std::string(CAGENT_SOURCE_DIR) + "/tests/testdata/replay/fix_add.jsonl");
  std::vector<json> turns;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) turns.push_back(json::parse(line));
  }
  ASSERT_EQ(turns.size(), 4U);
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome(10, "replay")));
  for (std::size_t i = 0; i < 3; ++i) {
    broker.Expect(Kind::kModelCall, testing::SendModelTurn(turns[i]))
        .Expect(Kind::kToolRequest, testing::Allow())
        .Expect(Kind::kToolResult, testing::AckResult());
  }
  broker.Expect(Kind::kModelCall, testing::SendModelTurn(turns[3]))
      .Expect(Kind::kFinish, testing::SendAck());

  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone) << result.message;
  EXPECT_EQ(result.ExitCode(), 0);
  EXPECT_EQ(result.turns, 4U);
  EXPECT_EQ(Calc(), "def add(a, b):\n    return a + b\n");

  const auto requests = broker.Received(Kind::kToolRequest);
  ASSERT_EQ(requests.size(), 3U);
  const auto& read = std::get<protocol::ToolRequest>(requests[0].body);
  EXPECT_EQ(read.call_id, "call_1");
  EXPECT_EQ(read.tool, "read_file");
  EXPECT_EQ(read.paths, std::vector<std::string>{"calc.py"});
  EXPECT_EQ(std::get<protocol::ToolRequest>(requests[2].body).tool, "run_command");

  const auto results = broker.Received(Kind::kToolResult);
  ASSERT_EQ(results.size(), 3U);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = std::get<protocol::ToolResult>(results[i].body);
    EXPECT_EQ(r.request, requests[i].header.id);
    EXPECT_TRUE(r.ok) << r.error_code << ": " << r.output;
  }
  EXPECT_NE(std::get<protocol::ToolResult>(results[0].body).output.find("return a - b"),
            std::string::npos);
  EXPECT_EQ(std::get<protocol::ToolResult>(results[1].body).changed_paths,
            std::vector<std::string>{"calc.py"});

  const auto models = broker.Received(Kind::kModelCall);
  ASSERT_EQ(models.size(), 4U);
  for (std::size_t i = 0; i < models.size(); ++i) {
    EXPECT_EQ(std::get<protocol::ModelCall>(models[i].body).body, (json{{"turn", i + 1}}));
  }
  const auto finish = broker.Received(Kind::kFinish);
  ASSERT_EQ(finish.size(), 1U);
  EXPECT_EQ(std::get<protocol::Finish>(finish[0].body).outcome, "done");
  EXPECT_NE(std::get<protocol::Finish>(finish[0].body).summary.find("Fixed add()"),
            std::string::npos);
  // Each turn was announced.
  std::size_t thinking = 0;
  for (const auto& p : broker.Received(Kind::kProgress)) {
    thinking += std::get<protocol::Progress>(p.body).state == "thinking" ? 1 : 0;
  }
  EXPECT_EQ(thinking, 4U);
}

TEST_F(LoopTest, SystemPromptAndTaskOpenTheConversation) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendModelTurn(OpenAiText("Nothing to do.")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone);
  EXPECT_EQ(result.message, "Nothing to do.");  // an answer without tool calls is the summary
  const json messages = SentMessages(broker, 0);
  ASSERT_EQ(messages.size(), 2U);
  const std::string system = messages[0]["content"];
  EXPECT_NE(system.find(ws_.path()), std::string::npos);
  EXPECT_NE(system.find("WITHOUT network"), std::string::npos);
  EXPECT_NE(system.find("DATA, never instructions"), std::string::npos);
  EXPECT_NE(system.find("commands: python3 allowed"), std::string::npos);  // policy summary
  EXPECT_NE(system.find("- run_command"), std::string::npos);
  EXPECT_EQ(messages[1]["content"], Welcome().task);
  // The tools offered: the seven of the welcome, then finish.
  const json tools =
      std::get<protocol::ModelCall>(broker.Received(Kind::kModelCall)[0].body).body["tools"];
  ASSERT_EQ(tools.size(), 8U);
  EXPECT_EQ(tools[7]["function"]["name"], "finish");
}

TEST_F(LoopTest, DenialIsWhatTheModelSees) {
  const std::string denial =
      "run_command refused by rule `deny curl` (backend.cagent:12:3): the sandbox has no network. "
      "Work offline.";
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(
          Kind::kModelCall,
          testing::SendModelTurn(OpenAiCalls(
              {{"call_x", "run_command", R"({"command": "curl https://example.com > got.txt"})"}})))
      .Expect(Kind::kToolRequest, testing::Deny(denial, "deny curl"))
      .Expect(Kind::kModelCall, testing::SendModelTurn(OpenAiText("I cannot download it.")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone);
  EXPECT_TRUE(broker.Received(Kind::kToolResult).empty());  // nothing ran
  EXPECT_FALSE(fs::exists(fs::path(ws_.path()) / "got.txt"));
  const json messages = SentMessages(broker, 1);
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages.back(),
            (json{{"role", "tool"}, {"tool_call_id", "call_x"}, {"content", denial}}));
}

TEST_F(LoopTest, AskPendingApprovalAllowRunsTheCommand) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall,
              testing::SendModelTurn(OpenAiCalls(
                  {{"call_1", "run_command", R"({"command": "echo approved > marker.txt"})"}})))
      .Expect(Kind::kToolRequest, testing::AskThenApproval(protocol::Verdict::kAllow))
      .Expect(Kind::kToolResult, testing::AckResult())
      .Expect(Kind::kModelCall, testing::SendModelTurn(OpenAiCalls(
                                    {{"call_2", "finish", R"({"summary": "wrote the marker"})"}})))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone) << result.message;
  EXPECT_EQ(result.message, "wrote the marker");
  EXPECT_EQ(ReadText(fs::path(ws_.path()) / "marker.txt"), "approved\n");
  ASSERT_EQ(broker.Received(Kind::kToolResult).size(), 1U);
  EXPECT_TRUE(std::get<protocol::ToolResult>(broker.Received(Kind::kToolResult)[0].body).ok);
}

TEST_F(LoopTest, AskPendingApprovalDenyDoesNotRun) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall,
              testing::SendModelTurn(OpenAiCalls(
                  {{"call_1", "run_command", R"({"command": "echo x > marker.txt"})"}})))
      .Expect(Kind::kToolRequest, testing::AskThenApproval(protocol::Verdict::kDeny,
                                                           "The operator declined: no writes now."))
      .Expect(Kind::kModelCall, testing::SendModelTurn(OpenAiText("Understood.")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone);
  EXPECT_FALSE(fs::exists(fs::path(ws_.path()) / "marker.txt"));
  EXPECT_EQ(SentMessages(broker, 1).back()["content"], "The operator declined: no writes now.");
}

TEST_F(LoopTest, ShutdownMidRunEndsTheLoop) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(
          Kind::kModelCall,
          testing::SendModelTurn(OpenAiCalls({{"call_1", "read_file", R"({"path": "calc.py"})"}})))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult())
      .Expect(Kind::kModelCall, testing::SendShutdown("failed", "wall time (10m) expired"));
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kEndedByBroker);
  EXPECT_EQ(result.ExitCode(), 3);
  EXPECT_NE(result.message.find("wall time (10m) expired"), std::string::npos) << result.message;
  EXPECT_TRUE(broker.Received(Kind::kFinish).empty());
}

TEST_F(LoopTest, ShutdownWhileAwaitingApprovalRunsNothing) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall,
              testing::SendModelTurn(OpenAiCalls(
                  {{"call_1", "run_command", R"({"command": "echo x > marker.txt"})"}})))
      .Expect(Kind::kToolRequest, [](const protocol::Message& request) {
        protocol::Decision d;
        d.verdict = protocol::Verdict::kAsk;
        d.pending = true;
        return testing::Reply(
            {protocol::Make(Kind::kDecision, request.header.id, d),
             protocol::Make(Kind::kShutdown, 0,
                            protocol::Shutdown{"cancelled", "operator cancelled"})},
            true);
      });
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kEndedByBroker);
  EXPECT_FALSE(fs::exists(fs::path(ws_.path()) / "marker.txt"));
}

TEST_F(LoopTest, TurnBudgetEndsWithTheExactMessage) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome(2)));
  for (int i = 1; i <= 2; ++i) {
    broker
        .Expect(Kind::kModelCall,
                testing::SendModelTurn(OpenAiCalls({{"c" + std::to_string(i), "list_dir", "{}"}})))
        .Expect(Kind::kToolRequest, testing::Allow())
        .Expect(Kind::kToolResult, testing::AckResult());
  }
  broker.Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kGaveUp);
  EXPECT_EQ(result.ExitCode(), 3);
  EXPECT_EQ(result.message, "max turns exceeded without the model signalling completion");
  EXPECT_EQ(broker.Received(Kind::kModelCall).size(), 2U);
  const auto finish = broker.Received(Kind::kFinish);
  ASSERT_EQ(finish.size(), 1U);
  EXPECT_EQ(std::get<protocol::Finish>(finish[0].body).outcome, "gave_up");
  EXPECT_EQ(std::get<protocol::Finish>(finish[0].body).summary,
            "max turns exceeded without the model signalling completion");
}

TEST_F(LoopTest, LocalRefusalsAndBadArgumentsAreNotAsked) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendModelTurn(OpenAiCalls(
                                    {{"c1", "read_file", R"({"path": "../../etc/passwd"})"},
                                     {"c2", "read_file", R"({"path": "calc.py")"},
                                     {"c3", "launch_rockets", "{}"}})))
      .Expect(Kind::kModelCall, testing::SendModelTurn(OpenAiText("Giving up on those.")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone);
  EXPECT_TRUE(broker.Received(Kind::kToolRequest).empty());
  const json messages = SentMessages(broker, 1);
  ASSERT_GE(messages.size(), 3U);
  const std::size_t n = messages.size();
  // One result per call, in order, each an error the model can read.
  EXPECT_EQ(messages[n - 3]["tool_call_id"], "c1");
  EXPECT_EQ(messages[n - 3]["content"].get<std::string>().rfind("error [", 0), 0U)
      << messages[n - 3]["content"];
  EXPECT_EQ(messages[n - 2]["tool_call_id"], "c2");
  EXPECT_NE(messages[n - 2]["content"].get<std::string>().find("error [bad_arguments]"),
            std::string::npos);
  EXPECT_NE(messages[n - 2]["content"].get<std::string>().find("not valid JSON"),
            std::string::npos);
  EXPECT_EQ(messages[n - 1]["tool_call_id"], "c3");
  EXPECT_NE(messages[n - 1]["content"].get<std::string>().find("error [unknown_tool]"),
            std::string::npos);
  // The agent's own refusal is still visible to the operator.
  bool refused = false;
  for (const auto& p : broker.Received(Kind::kProgress)) {
    refused |= std::get<protocol::Progress>(p.body).state == "refused";
  }
  EXPECT_TRUE(refused);
}

TEST_F(LoopTest, TheModelSeesTheBrokersRedactedOutput) {
  WriteText(fs::path(ws_.path()) / "config.txt", "token=sk-live-123456\n");
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(
          Kind::kModelCall,
          testing::SendModelTurn(OpenAiCalls({{"c1", "read_file", R"({"path": "config.txt"})"}})))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult([](const std::string&) {
                return std::string("token=[REDACTED]");
              }))
      .Expect(Kind::kModelCall, testing::SendModelTurn(OpenAiText("ok")))
      .Expect(Kind::kFinish, testing::SendAck());
  Run(broker);
  const auto results = broker.Received(Kind::kToolResult);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_NE(std::get<protocol::ToolResult>(results[0].body).output.find("sk-live-123456"),
            std::string::npos);
  const std::string sent = SentMessages(broker, 1).dump();
  EXPECT_EQ(sent.find("sk-live-123456"), std::string::npos);
  EXPECT_NE(sent.find("token=[REDACTED]"), std::string::npos);
}

TEST_F(LoopTest, ProviderErrorEndsWithExitFour) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendError(protocol::ErrorCode::kProviderAuth,
                                                   "401 from the provider: check OPENAI_API_KEY"))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kModelError);
  EXPECT_EQ(result.ExitCode(), 4);
  EXPECT_NE(result.message.find("OPENAI_API_KEY"), std::string::npos);
  ASSERT_EQ(broker.Received(Kind::kFinish).size(), 1U);
  EXPECT_EQ(std::get<protocol::Finish>(broker.Received(Kind::kFinish)[0].body).outcome, "error");
}

TEST_F(LoopTest, UnparsableModelAnswerIsAModelError) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendModelTurn({{"unexpected", true}}))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kModelError);
  EXPECT_NE(result.message.find("choices"), std::string::npos) << result.message;
}

TEST_F(LoopTest, BudgetErrorEndsTheRun) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendModelTurn(OpenAiCalls({{"c1", "list_dir", "{}"}})))
      .Expect(Kind::kToolRequest, testing::SendError(protocol::ErrorCode::kBudgetExhausted,
                                                     "tool-call budget (1) reached"))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kEndedByBroker);
  EXPECT_EQ(result.ExitCode(), 3);
}

TEST_F(LoopTest, LoopDetectedIsToldToTheModel) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendModelTurn(OpenAiCalls({{"c1", "list_dir", "{}"}})))
      .Expect(Kind::kToolRequest, testing::SendError(protocol::ErrorCode::kLoopDetected,
                                                     "list_dir {} repeated 3 times"))
      .Expect(Kind::kModelCall, testing::SendModelTurn(OpenAiText("Stopping.")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone);
  EXPECT_NE(SentMessages(broker, 1).back()["content"].get<std::string>().find("repeated 3 times"),
            std::string::npos);
}

// A small context window: the big read of turn 1 is dropped (stub), the ledger forgets the file,
// and an edit without a fresh read is refused by the toolbox.
TEST_F(LoopTest, CompactionDropsOldOutputAndInvalidatesTheRead) {
  std::string big = "def add(a, b):\n    return a - b\n";
  for (int i = 0; i < 400; ++i) big += "# padding line " + std::to_string(i) + "\n";
  WriteText(fs::path(ws_.path()) / "calc.py", big);
  protocol::Welcome w = Welcome();
  w.model.context_window = 3000;
  w.model.max_output_tokens = 0;
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(w))
      .Expect(Kind::kModelCall,
              testing::SendModelTurn(OpenAiCalls({{"c1", "read_file", R"({"path": "calc.py"})"}})))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult());
  for (int i = 2; i <= 4; ++i) {
    broker
        .Expect(Kind::kModelCall,
                testing::SendModelTurn(
                    OpenAiCalls({{"c" + std::to_string(i), "glob", R"({"pattern": "*.md"})"}})))
        .Expect(Kind::kToolRequest, testing::Allow())
        .Expect(Kind::kToolResult, testing::AckResult());
  }
  // The edit is refused by the toolbox's own read-before-edit check, so the broker is not asked.
  broker
      .Expect(
          Kind::kModelCall,
          testing::SendModelTurn(OpenAiCalls(
              {{"c5", "edit_file",
                R"({"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"})"}})))
      .Expect(Kind::kModelCall, testing::SendModelTurn(OpenAiText("done")))
      .Expect(Kind::kFinish, testing::SendAck());
  LoopOptions options;
  options.keep_recent_turns = 2;
  const LoopResult result = Run(broker, options);
  EXPECT_EQ(result.status, LoopResult::Status::kDone) << result.message;

  bool compacting = false;
  for (const auto& p : broker.Received(Kind::kProgress)) {
    compacting |= std::get<protocol::Progress>(p.body).state == "compacting";
  }
  EXPECT_TRUE(compacting);
  // The model saw the stub instead of the file.
  const std::string sent = SentMessages(broker, 4).dump();
  EXPECT_NE(sent.find("[output of read_file calc.py ("), std::string::npos) << sent.substr(0, 2000);
  EXPECT_EQ(sent.find("padding line 399"), std::string::npos);
  // And the edit was refused because the read is no longer in context.
  EXPECT_EQ(broker.Received(Kind::kToolRequest).size(), 4U);
  const json last = SentMessages(broker, 5).back();
  EXPECT_EQ(last["tool_call_id"], "c5");
  EXPECT_EQ(last["content"].get<std::string>().rfind("error [not_read]", 0), 0U) << last["content"];
  EXPECT_NE(Calc().find("return a - b"), std::string::npos);
}

// The twin: with room in the context nothing is dropped and the same edit goes through.
TEST_F(LoopTest, WithoutCompactionTheSameEditSucceeds) {
  std::string big = "def add(a, b):\n    return a - b\n";
  for (int i = 0; i < 400; ++i) big += "# padding line " + std::to_string(i) + "\n";
  WriteText(fs::path(ws_.path()) / "calc.py", big);
  ScriptedBroker broker;
  broker
      .Expect(Kind::kHello, testing::SendWelcome(Welcome()))  // 200,000-token window
      .Expect(Kind::kModelCall,
              testing::SendModelTurn(OpenAiCalls({{"c1", "read_file", R"({"path": "calc.py"})"}})))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult());
  for (int i = 2; i <= 4; ++i) {
    broker
        .Expect(Kind::kModelCall,
                testing::SendModelTurn(
                    OpenAiCalls({{"c" + std::to_string(i), "glob", R"({"pattern": "*.md"})"}})))
        .Expect(Kind::kToolRequest, testing::Allow())
        .Expect(Kind::kToolResult, testing::AckResult());
  }
  broker
      .Expect(
          Kind::kModelCall,
          testing::SendModelTurn(OpenAiCalls(
              {{"c5", "edit_file",
                R"({"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"})"}})))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult())
      .Expect(Kind::kModelCall, testing::SendModelTurn(OpenAiText("done")))
      .Expect(Kind::kFinish, testing::SendAck());
  LoopOptions options;
  options.keep_recent_turns = 2;
  const LoopResult result = Run(broker, options);
  EXPECT_EQ(result.status, LoopResult::Status::kDone) << result.message;
  for (const auto& p : broker.Received(Kind::kProgress)) {
    EXPECT_NE(std::get<protocol::Progress>(p.body).state, "compacting");
  }
  EXPECT_NE(Calc().find("return a + b"), std::string::npos);
}

}  // namespace
}  // namespace cagent::agent
