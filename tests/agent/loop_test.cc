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

#include "common/json_text.h"
#include "tests/agent/scripted_broker_util.h"

namespace cagent::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using protocol::Kind;
using testing::ScriptedBroker;
using testing::TextTurn;

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

// A turn of tool calls, each {id, name, arguments as JSON text} (the broker has parsed them).
protocol::AssistantTurn Calls(const std::vector<std::array<std::string, 3>>& calls,
                              const std::string& text = "") {
  std::vector<protocol::ToolCall> list;
  for (const auto& c : calls) list.push_back(protocol::ToolCall{c[0], c[1], json::parse(c[2]), ""});
  return testing::ToolTurn(std::move(list), text);
}

// The n-th model_call the agent sent.
protocol::ModelCall SentCall(const ScriptedBroker& broker, std::size_t n) {
  auto calls = broker.Received(Kind::kModelCall);
  if (n >= calls.size()) return {};
  return std::get<protocol::ModelCall>(calls[n].body);
}

// Its messages.
std::vector<protocol::ChatMessage> SentMessages(const ScriptedBroker& broker, std::size_t n) {
  return SentCall(broker, n).messages;
}

// The messages as one JSON text (for substring checks).
std::string SentText(const ScriptedBroker& broker, std::size_t n) {
  return JsonText(protocol::ToJson(protocol::Make(Kind::kModelCall, 0, SentCall(broker, n))));
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
  // The scripted broker checks protocol v2's model-turn rules on every request (call ids bound to
  // the latest turn, conversations the real broker accepts).
  LoopResult Run(ScriptedBroker& broker, LoopOptions options = {}) {
    broker.set_check_model_turns(true);
    LoopResult result;
    {
      BrokerClient client(broker.TakeAgentEnd());
      broker.Start();
      auto hello = client.Hello("cagent-agent/test");
      EXPECT_TRUE(hello.ok()) << hello.failure().Describe();
      auto toolbox = Toolbox::Open(ws_.path(), ToolLimits{});
      EXPECT_TRUE(toolbox.ok()) << toolbox.error().Message();
      if (hello.ok() && toolbox.ok()) {
        result = RunLoop(client, toolbox.value(), hello.value(), options);
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

// The demo's session (tests/testdata/replay/fix_add.jsonl), played turn by turn as the broker's
// neutral turns: read, edit, run the tests, finish.
TEST_F(LoopTest, FixAddSessionEndToEnd) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 is not on PATH; the recorded session runs `python3 -m unittest -q`";
  }
  const std::vector<protocol::AssistantTurn> turns = {
      Calls({{"call_1", "read_file", R"({"path": "calc.py"})"}},
            "I'll start by reading calc.py to find the bug."),
      Calls(
          {{"call_2", "edit_file",
            R"({"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"})"}},
          "add() subtracts instead of adding. I'll fix it."),
      Calls({{"call_3", "run_command", R"({"command": "python3 -m unittest -q"})"}},
            "Now I'll run the tests."),
      Calls({{"call_4", "finish",
              R"({"summary": "Fixed add() in calc.py: it returned a - b instead of a + b."})"}}),
  };
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
  EXPECT_EQ(std::get<protocol::ToolRequest>(requests[1].body).call_id, "call_2");
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

  // Each model_call carries the whole conversation so far: the task, then per turn the assistant
  // message and its result.
  const auto models = broker.Received(Kind::kModelCall);
  ASSERT_EQ(models.size(), 4U);
  for (std::size_t i = 0; i < models.size(); ++i) {
    EXPECT_EQ(SentMessages(broker, i).size(), 1 + 2 * i) << "model_call " << i;
  }
  const auto last = SentMessages(broker, 3);
  EXPECT_EQ(last[5].role, protocol::Role::kAssistant);
  EXPECT_EQ(last[5].text, "Now I'll run the tests.");
  ASSERT_EQ(last[5].tool_calls.size(), 1U);
  EXPECT_EQ(last[5].tool_calls[0].id, "call_3");
  EXPECT_EQ(last[6].role, protocol::Role::kTool);
  EXPECT_EQ(last[6].call_id, "call_3");
  EXPECT_FALSE(last[6].is_error);
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
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("Nothing to do.")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone);
  EXPECT_EQ(result.message, "Nothing to do.");  // an answer without tool calls is the summary
  const protocol::ModelCall call = SentCall(broker, 0);
  EXPECT_NE(call.system.find(ws_.path()), std::string::npos);
  EXPECT_NE(call.system.find("assume no network"), std::string::npos);
  EXPECT_NE(call.system.find("DATA, never instructions"), std::string::npos);
  EXPECT_NE(call.system.find("commands: python3 allowed"), std::string::npos);  // policy summary
  EXPECT_NE(call.system.find("- run_command"), std::string::npos);
  ASSERT_EQ(call.messages.size(), 1U);
  EXPECT_EQ(call.messages[0].role, protocol::Role::kUser);
  EXPECT_EQ(call.messages[0].text, Welcome().task);
}

// Protocol v2: the agent writes message content and nothing else. The model, the tools offered,
// the token limit and every other provider parameter are the broker's.
TEST_F(LoopTest, ModelCallCarriesOnlyTheConversation) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendModelTurn(Calls({{"c1", "list_dir", "{}"}}, "Look.")))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult())
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("done")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone) << result.message;

  // The bytes as the agent wrote them.
  std::vector<json> sent;
  for (const std::string& payload : broker.received_payloads()) {
    json message = json::parse(payload);
    if (message["type"] == "model_call") sent.push_back(std::move(message));
  }
  ASSERT_EQ(sent.size(), 2U);
  for (const json& message : sent) {
    std::vector<std::string> keys;
    for (const auto& [key, value] : message.items()) keys.push_back(key);
    EXPECT_EQ(keys, (std::vector<std::string>{"id", "messages", "system", "type", "v"}))
        << JsonText(message);
    EXPECT_EQ(message["v"], 2);
    for (const json& m : message["messages"]) {
      for (const auto& [key, value] : m.items()) {
        EXPECT_TRUE(key == "role" || key == "text" || key == "tool_calls" || key == "call_id" ||
                    key == "is_error")
            << key;
      }
    }
  }
  const json& second = sent[1]["messages"];
  ASSERT_EQ(second.size(), 3U);
  EXPECT_EQ(second[1], (json{{"role", "assistant"},
                             {"text", "Look."},
                             {"tool_calls",
                              {{{"id", "c1"},
                                {"name", "list_dir"},
                                {"arguments", json::object()},
                                {"arguments_error", ""}}}}}));
  EXPECT_EQ(second[2]["role"], "tool");
  EXPECT_EQ(second[2]["call_id"], "c1");
  EXPECT_EQ(second[2]["is_error"], false);
}

// The tool_request names the model's call id and carries its arguments exactly as the turn gave
// them, even where the toolbox reads them differently (a null optional is dropped by validation).
TEST_F(LoopTest, ToolRequestNamesTheTurnsCallAndItsUnchangedArguments) {
  const json arguments = {{"path", "calc.py"}, {"offset", nullptr}, {"limit", 50}};
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendModelTurn(testing::ToolTurn({protocol::ToolCall{
                                    "toolu_01XyZ", "read_file", arguments, ""}})))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult())
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("done")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone) << result.message;

  std::vector<json> requests;
  for (const std::string& payload : broker.received_payloads()) {
    json message = json::parse(payload);
    if (message["type"] == "tool_request") requests.push_back(std::move(message));
  }
  ASSERT_EQ(requests.size(), 1U);
  EXPECT_EQ(requests[0]["call_id"], "toolu_01XyZ");
  EXPECT_EQ(requests[0]["tool"], "read_file");
  EXPECT_EQ(requests[0]["args"], arguments);  // offset: null kept
  EXPECT_EQ(requests[0]["paths"], json::array({"calc.py"}));
  // The file was read (the validated arguments were used for that), and the next model_call
  // gives the call back unchanged, answered by its id.
  const auto results = broker.Received(Kind::kToolResult);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_TRUE(std::get<protocol::ToolResult>(results[0].body).ok);
  const auto messages = SentMessages(broker, 1);
  ASSERT_EQ(messages.size(), 3U);
  ASSERT_EQ(messages[1].tool_calls.size(), 1U);
  EXPECT_EQ(messages[1].tool_calls[0].id, "toolu_01XyZ");
  EXPECT_EQ(messages[1].tool_calls[0].arguments, arguments);
  EXPECT_EQ(messages[2].call_id, "toolu_01XyZ");
}

// A call whose arguments the broker could not parse is answered by the agent and never asked
// about; the twin call of the same turn with usable arguments is.
TEST_F(LoopTest, CallWithArgumentsErrorIsNeverRequested) {
  protocol::ToolCall broken{"c1", "run_command", json::object(),
                            "the arguments are not valid JSON: {\"command\": \"echo hi"};
  protocol::ToolCall fine{"c2", "run_command", {{"command", "echo hi > marker.txt"}}, ""};
  protocol::ToolCall broken_finish{"c3", "finish", json::object(),
                                   "the arguments must be a JSON object, got: 7"};
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall,
              testing::SendModelTurn(testing::ToolTurn({broken, fine, broken_finish})))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult())
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("done")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone) << result.message;
  EXPECT_EQ(result.message, "done");  // the broken finish did not end the run
  const auto requests = broker.Received(Kind::kToolRequest);
  ASSERT_EQ(requests.size(), 1U);
  EXPECT_EQ(std::get<protocol::ToolRequest>(requests[0].body).call_id, "c2");
  EXPECT_EQ(ReadText(fs::path(ws_.path()) / "marker.txt"), "hi\n");
  const auto messages = SentMessages(broker, 1);
  ASSERT_EQ(messages.size(), 5U);
  EXPECT_EQ(messages[2].call_id, "c1");
  EXPECT_TRUE(messages[2].is_error);
  EXPECT_EQ(messages[2].text.rfind("error [bad_arguments]", 0), 0U) << messages[2].text;
  EXPECT_NE(messages[2].text.find("not valid JSON"), std::string::npos);
  EXPECT_EQ(messages[3].call_id, "c2");
  EXPECT_FALSE(messages[3].is_error);
  EXPECT_EQ(messages[4].call_id, "c3");
  EXPECT_EQ(messages[4].text.rfind("error [bad_arguments]", 0), 0U) << messages[4].text;
}

TEST_F(LoopTest, CutOffAndEmptyRepliesGetANudge) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("Here is the plan: first",
                                                                protocol::StopReason::kMaxTokens)))
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn(" \n")))
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("All done.")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone) << result.message;
  EXPECT_EQ(result.message, "All done.");
  EXPECT_EQ(result.turns, 3U);
  const auto second = SentMessages(broker, 1);
  ASSERT_EQ(second.size(), 3U);
  EXPECT_EQ(second[1].role, protocol::Role::kAssistant);
  EXPECT_EQ(second[1].text, "Here is the plan: first");
  EXPECT_EQ(second[2].role, protocol::Role::kUser);
  EXPECT_NE(second[2].text.find("cut off at the output limit"), std::string::npos);
  const auto third = SentMessages(broker, 2);
  ASSERT_EQ(third.size(), 5U);
  EXPECT_NE(third[4].text.find("Your reply was empty"), std::string::npos);
}

// The twin of the cut-off case: the same text with stop_reason end is the final answer.
TEST_F(LoopTest, TheSameTextEndingNormallyIsTheAnswer) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("Here is the plan: first")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone);
  EXPECT_EQ(result.message, "Here is the plan: first");
  EXPECT_EQ(result.turns, 1U);
}

TEST_F(LoopTest, ARefusedAnswerIsAModelError) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("I can't help with that.",
                                                                protocol::StopReason::kRefused)))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kModelError);
  EXPECT_EQ(result.ExitCode(), 3);  // run-failed: the session did not complete
  EXPECT_EQ(result.message, "the provider refused to answer: I can't help with that.");
  const auto finish = broker.Received(Kind::kFinish);
  ASSERT_EQ(finish.size(), 1U);
  EXPECT_EQ(std::get<protocol::Finish>(finish[0].body).outcome, "error");
}

TEST_F(LoopTest, DenialIsWhatTheModelSees) {
  const std::string denial =
      "run_command refused by rule `deny curl` (backend.cagent:12:3): the sandbox has no network. "
      "Work offline.";
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(
          Kind::kModelCall,
          testing::SendModelTurn(Calls(
              {{"call_x", "run_command", R"({"command": "curl https://example.com > got.txt"})"}})))
      .Expect(Kind::kToolRequest, testing::Deny(denial, "deny curl"))
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("I cannot download it.")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone);
  EXPECT_TRUE(broker.Received(Kind::kToolResult).empty());  // nothing ran
  EXPECT_FALSE(fs::exists(fs::path(ws_.path()) / "got.txt"));
  const auto messages = SentMessages(broker, 1);
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages.back().role, protocol::Role::kTool);
  EXPECT_EQ(messages.back().call_id, "call_x");
  EXPECT_EQ(messages.back().text, denial);
  EXPECT_TRUE(messages.back().is_error);
}

TEST_F(LoopTest, AskPendingApprovalAllowRunsTheCommand) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall,
              testing::SendModelTurn(Calls(
                  {{"call_1", "run_command", R"({"command": "echo approved > marker.txt"})"}})))
      .Expect(Kind::kToolRequest, testing::AskThenApproval(protocol::Verdict::kAllow))
      .Expect(Kind::kToolResult, testing::AckResult())
      .Expect(Kind::kModelCall, testing::SendModelTurn(Calls(
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
              testing::SendModelTurn(
                  Calls({{"call_1", "run_command", R"({"command": "echo x > marker.txt"})"}})))
      .Expect(Kind::kToolRequest, testing::AskThenApproval(protocol::Verdict::kDeny,
                                                           "The operator declined: no writes now."))
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("Understood.")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone);
  EXPECT_FALSE(fs::exists(fs::path(ws_.path()) / "marker.txt"));
  EXPECT_EQ(SentMessages(broker, 1).back().text, "The operator declined: no writes now.");
}

TEST_F(LoopTest, ShutdownMidRunEndsTheLoop) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall,
              testing::SendModelTurn(Calls({{"call_1", "read_file", R"({"path": "calc.py"})"}})))
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
              testing::SendModelTurn(
                  Calls({{"call_1", "run_command", R"({"command": "echo x > marker.txt"})"}})))
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
                testing::SendModelTurn(Calls({{"c" + std::to_string(i), "list_dir", "{}"}})))
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
  protocol::AssistantTurn turn =
      Calls({{"c1", "read_file", R"({"path": "../../etc/passwd"})"},
             {"c2", "read_file", "{}"},
             {"c3", "launch_rockets", "{}"},
             {"c4", "read_file", R"({"path": "calc.py", "mode": "rw"})"}});
  turn.tool_calls[1].arguments_error = R"(the arguments are not valid JSON: {"path": "calc.py")";
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendModelTurn(turn))
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("Giving up on those.")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone);
  EXPECT_TRUE(broker.Received(Kind::kToolRequest).empty());
  const auto messages = SentMessages(broker, 1);
  ASSERT_GE(messages.size(), 4U);
  const std::size_t n = messages.size();
  // One result per call, in order, each an error the model can read.
  EXPECT_EQ(messages[n - 4].call_id, "c1");
  EXPECT_EQ(messages[n - 4].text.rfind("error [", 0), 0U) << messages[n - 4].text;
  EXPECT_EQ(messages[n - 3].call_id, "c2");
  EXPECT_NE(messages[n - 3].text.find("error [bad_arguments]"), std::string::npos);
  EXPECT_NE(messages[n - 3].text.find("not valid JSON"), std::string::npos);
  EXPECT_EQ(messages[n - 2].call_id, "c3");
  EXPECT_NE(messages[n - 2].text.find("error [unknown_tool]"), std::string::npos);
  // Arguments that do not match the tool's schema (common/tool_schemas.h) are refused too.
  EXPECT_EQ(messages[n - 1].call_id, "c4");
  EXPECT_NE(messages[n - 1].text.find("error [bad_arguments]: read_file: unknown property `mode`"),
            std::string::npos)
      << messages[n - 1].text;
  for (std::size_t i = n - 4; i < n; ++i) EXPECT_TRUE(messages[i].is_error);
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
      .Expect(Kind::kModelCall,
              testing::SendModelTurn(Calls({{"c1", "read_file", R"({"path": "config.txt"})"}})))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult([](const std::string&) {
                return std::string("token=[REDACTED]");
              }))
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("ok")))
      .Expect(Kind::kFinish, testing::SendAck());
  Run(broker);
  const auto results = broker.Received(Kind::kToolResult);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_NE(std::get<protocol::ToolResult>(results[0].body).output.find("sk-live-123456"),
            std::string::npos);
  const std::string sent = SentText(broker, 1);
  EXPECT_EQ(sent.find("sk-live-123456"), std::string::npos);
  EXPECT_NE(sent.find("token=[REDACTED]"), std::string::npos);
}

TEST_F(LoopTest, ProviderErrorEndsTheSessionAsRunFailed) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendError(protocol::ErrorCode::kProviderAuth,
                                                   "401 from the provider: check OPENAI_API_KEY"))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kModelError);
  EXPECT_EQ(result.ExitCode(), 3);  // run-failed: the session did not complete
  EXPECT_NE(result.message.find("OPENAI_API_KEY"), std::string::npos);
  ASSERT_EQ(broker.Received(Kind::kFinish).size(), 1U);
  EXPECT_EQ(std::get<protocol::Finish>(broker.Received(Kind::kFinish)[0].body).outcome, "error");
}

// A model_result the agent cannot decode (here: no stop_reason) is the broker misbehaving.
TEST_F(LoopTest, MalformedModelResultIsAProtocolFailure) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, [](const protocol::Message& request) {
        return testing::Response{{testing::RawFrame(R"({"v":2,"type":"model_result","id":)" +
                                                    std::to_string(request.header.id) +
                                                    R"(,"text":"hi","tool_calls":[],"turn":1})")},
                                 true};
      });
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kProtocolError);
  EXPECT_EQ(result.ExitCode(), 2);
  EXPECT_NE(result.message.find("stop_reason"), std::string::npos) << result.message;
}

TEST_F(LoopTest, BudgetErrorEndsTheRun) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(Welcome()))
      .Expect(Kind::kModelCall, testing::SendModelTurn(Calls({{"c1", "list_dir", "{}"}})))
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
      .Expect(Kind::kModelCall, testing::SendModelTurn(Calls({{"c1", "list_dir", "{}"}})))
      .Expect(Kind::kToolRequest, testing::SendError(protocol::ErrorCode::kLoopDetected,
                                                     "list_dir {} repeated 3 times"))
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("Stopping.")))
      .Expect(Kind::kFinish, testing::SendAck());
  const LoopResult result = Run(broker);
  EXPECT_EQ(result.status, LoopResult::Status::kDone);
  EXPECT_NE(SentMessages(broker, 1).back().text.find("repeated 3 times"), std::string::npos);
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
              testing::SendModelTurn(Calls({{"c1", "read_file", R"({"path": "calc.py"})"}})))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult());
  for (int i = 2; i <= 4; ++i) {
    broker
        .Expect(Kind::kModelCall, testing::SendModelTurn(Calls({{"c" + std::to_string(i), "glob",
                                                                 R"({"pattern": "*.md"})"}})))
        .Expect(Kind::kToolRequest, testing::Allow())
        .Expect(Kind::kToolResult, testing::AckResult());
  }
  // The edit is refused by the toolbox's own read-before-edit check, so the broker is not asked.
  broker
      .Expect(
          Kind::kModelCall,
          testing::SendModelTurn(Calls(
              {{"c5", "edit_file",
                R"({"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"})"}})))
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("done")))
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
  const std::string sent = SentText(broker, 4);
  EXPECT_NE(sent.find("[output of read_file calc.py ("), std::string::npos) << sent.substr(0, 2000);
  EXPECT_EQ(sent.find("padding line 399"), std::string::npos);
  // And the edit was refused because the read is no longer in context.
  EXPECT_EQ(broker.Received(Kind::kToolRequest).size(), 4U);
  const protocol::ChatMessage last = SentMessages(broker, 5).back();
  EXPECT_EQ(last.call_id, "c5");
  EXPECT_EQ(last.text.rfind("error [not_read]", 0), 0U) << last.text;
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
              testing::SendModelTurn(Calls({{"c1", "read_file", R"({"path": "calc.py"})"}})))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult());
  for (int i = 2; i <= 4; ++i) {
    broker
        .Expect(Kind::kModelCall, testing::SendModelTurn(Calls({{"c" + std::to_string(i), "glob",
                                                                 R"({"pattern": "*.md"})"}})))
        .Expect(Kind::kToolRequest, testing::Allow())
        .Expect(Kind::kToolResult, testing::AckResult());
  }
  broker
      .Expect(
          Kind::kModelCall,
          testing::SendModelTurn(Calls(
              {{"c5", "edit_file",
                R"({"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"})"}})))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult())
      .Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("done")))
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

// The loop feeds the pinned state: the plan from the model's text, the files from what the write
// and edit tools reported (ToolOutcome::changed_paths); a compaction's summary carries both once
// the turns that stated them are folded.
TEST_F(LoopTest, ACompactionSummaryCarriesThePlanAndTheFilesTheToolsChanged) {
  std::string big = "def add(a, b):\n    return a - b\n";
  for (int i = 0; i < 400; ++i) big += "# padding line " + std::to_string(i) + "\n";
  WriteText(fs::path(ws_.path()) / "calc.py", big);
  protocol::Welcome w = Welcome();
  w.model.context_window = 3000;
  w.model.max_output_tokens = 0;
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(w))
      .Expect(Kind::kModelCall,
              testing::SendModelTurn(
                  Calls({{"c1", "write_file", R"({"path": "notes.md", "content": "todo\n"})"}},
                        "Plan:\n- [doing] fix add in calc.py\n- [todo] run the tests")))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult())
      .Expect(Kind::kModelCall,
              testing::SendModelTurn(Calls({{"c2", "read_file", R"({"path": "calc.py"})"}})))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult, testing::AckResult());
  for (int i = 3; i <= 5; ++i) {
    broker
        .Expect(Kind::kModelCall, testing::SendModelTurn(Calls({{"c" + std::to_string(i), "glob",
                                                                 R"({"pattern": "*.md"})"}})))
        .Expect(Kind::kToolRequest, testing::Allow())
        .Expect(Kind::kToolResult, testing::AckResult());
  }
  broker.Expect(Kind::kModelCall, testing::SendModelTurn(TextTurn("done")))
      .Expect(Kind::kFinish, testing::SendAck());
  LoopOptions options;
  options.keep_recent_turns = 2;
  const LoopResult result = Run(broker, options);
  EXPECT_EQ(result.status, LoopResult::Status::kDone) << result.message;

  std::string summary;
  for (const auto& message : SentMessages(broker, 5)) {
    if (message.text.rfind("[Earlier turns were compacted", 0) == 0) summary = message.text;
  }
  ASSERT_FALSE(summary.empty()) << SentText(broker, 5).substr(0, 3000);
  EXPECT_NE(summary.find("(turn 1; write a new \"Plan:\" block when it changes):\n- [doing] fix "
                         "add in calc.py\n- [todo] run the tests\n"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("Files changed by your file tools (write_file, edit_file) so far:\n"
                         "- notes.md\nCommands you ran (run_command) may have changed other "
                         "files; this list cannot show them."),
            std::string::npos)
      << summary;
  // The model's own turn 1 is gone: the summary is what carries the plan now.
  for (const auto& message : SentMessages(broker, 5)) {
    EXPECT_FALSE(message.role == protocol::Role::kAssistant &&
                 message.text.find("Plan:") != std::string::npos);
  }
}

}  // namespace
}  // namespace cagent::agent
