// BrokerClient against a scripted broker over a real socketpair: request ids, approval after a
// pending decision, shutdown while waiting, error replies, and hostile bytes from the broker.
#include "agent/broker_client.h"

#include <gtest/gtest.h>

#include "tests/agent/scripted_broker_util.h"

namespace cagent::agent {
namespace {

using protocol::Kind;
using testing::ScriptedBroker;

protocol::ToolRequest Request(const std::string& tool = "run_command") {
  return protocol::ToolRequest{"call_1", tool, {{"command", "make"}}, {"."}};
}

protocol::ModelCall Conversation() {
  protocol::ModelCall call;
  call.system = "the system prompt";
  call.messages.push_back(protocol::ChatMessage{protocol::Role::kUser, "the task", {}, "", false});
  return call;
}

TEST(BrokerClient, IdsIncreaseAndRepliesMatch) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(testing::TestWelcome("/ws")))
      .Expect(Kind::kModelCall,
              testing::SendModelTurn(testing::ToolTurn(
                  {protocol::ToolCall{"call_1", "run_command", {{"command", "make"}}, ""}}, "hi")))
      .Expect(Kind::kToolRequest, testing::Allow())
      .Expect(Kind::kToolResult,
              testing::AckResult([](const std::string& s) { return "redacted:" + s; }))
      .Expect(Kind::kFinish, testing::SendAck());
  BrokerClient client(broker.TakeAgentEnd());
  broker.Start();

  auto welcome = client.Hello("cagent-agent/test");
  ASSERT_TRUE(welcome.ok()) << welcome.failure().Describe();
  EXPECT_EQ(welcome.value().workspace, "/ws");
  ASSERT_TRUE(client.Progress("thinking", "turn 1").ok());
  auto model = client.ModelCall(Conversation());
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model.value().answer.text, "hi");
  EXPECT_EQ(model.value().answer.stop_reason, protocol::StopReason::kToolCalls);
  ASSERT_EQ(model.value().answer.tool_calls.size(), 1U);
  EXPECT_EQ(model.value().answer.tool_calls[0].id, "call_1");
  EXPECT_EQ(model.value().turn, 1U);
  EXPECT_EQ(model.value().usage.output_tokens, 20U);
  auto decision = client.RequestTool(Request());
  ASSERT_TRUE(decision.ok());
  EXPECT_TRUE(decision.value().allowed());
  EXPECT_FALSE(decision.value().approval.has_value());
  auto ack = client.ReportResult({decision.value().request_id, true, "", "out", {}, ""});
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(ack.value().output, "redacted:out");
  ASSERT_TRUE(client.Finish("done", "ok").ok());
  EXPECT_EQ(client.last_id(), 6U);
  broker.Join();
  EXPECT_TRUE(broker.errors().empty()) << broker.errors().front();

  std::uint64_t previous = 0;
  for (const auto& m : broker.received()) {
    EXPECT_GT(m.header.id, previous);
    previous = m.header.id;
  }
  ASSERT_EQ(broker.received().size(), 6U);
  EXPECT_EQ(std::get<protocol::ToolResult>(broker.received()[4].body).request, 4U);
  EXPECT_EQ(std::get<protocol::Hello>(broker.received()[0].body).protocols, std::vector<int>{2});
  const auto& sent = std::get<protocol::ModelCall>(broker.received()[2].body);
  EXPECT_EQ(sent.system, "the system prompt");
  ASSERT_EQ(sent.messages.size(), 1U);
  EXPECT_EQ(sent.messages[0].text, "the task");
}

TEST(BrokerClient, ApprovalFollowsAPendingDecision) {
  ScriptedBroker broker;
  broker.Expect(Kind::kToolRequest, testing::AskThenApproval(protocol::Verdict::kAllow))
      .Expect(Kind::kToolRequest,
              testing::AskThenApproval(protocol::Verdict::kDeny, "The operator said no."));
  BrokerClient client(broker.TakeAgentEnd());
  broker.Start();
  auto first = client.RequestTool(Request());
  ASSERT_TRUE(first.ok()) << first.failure().Describe();
  EXPECT_EQ(first.value().decision.verdict, protocol::Verdict::kAsk);
  ASSERT_TRUE(first.value().approval.has_value());
  EXPECT_TRUE(first.value().allowed());
  auto second = client.RequestTool(Request());
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second.value().allowed());
  EXPECT_EQ(second.value().RefusalMessage(), "The operator said no.");
  broker.Join();
}

TEST(BrokerClient, DenialCarriesTheBrokersMessage) {
  ScriptedBroker broker;
  broker.Expect(Kind::kToolRequest, testing::Deny("run_command `curl` is denied by rule "
                                                  "`deny curl`; work offline."));
  BrokerClient client(broker.TakeAgentEnd());
  broker.Start();
  auto d = client.RequestTool(Request());
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d.value().allowed());
  EXPECT_EQ(d.value().RefusalMessage(),
            "run_command `curl` is denied by rule `deny curl`; work offline.");
  broker.Join();
}

TEST(BrokerClient, ShutdownWhileWaitingForApproval) {
  ScriptedBroker broker;
  broker.Expect(Kind::kToolRequest, [](const protocol::Message& request) {
    protocol::Decision d;
    d.verdict = protocol::Verdict::kAsk;
    d.pending = true;
    return testing::Reply(
        {protocol::Make(Kind::kDecision, request.header.id, d),
         protocol::Make(Kind::kShutdown, 0,
                        protocol::Shutdown{"cancelled", "the operator cancelled the run"})},
        true);
  });
  BrokerClient client(broker.TakeAgentEnd());
  broker.Start();
  auto d = client.RequestTool(Request());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.failure().kind, BrokerFailure::Kind::kShutdown);
  EXPECT_EQ(d.failure().status, "cancelled");
  EXPECT_EQ(d.failure().message, "the operator cancelled the run");
  EXPECT_NE(d.failure().Describe().find("cancelled"), std::string::npos);
  // The session is over: later calls fail the same way without touching the socket.
  auto later = client.Progress("thinking", "");
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.failure().kind, BrokerFailure::Kind::kShutdown);
  broker.Join();
  EXPECT_EQ(broker.received().size(), 1U);
}

TEST(BrokerClient, ShutdownInsteadOfAModelResult) {
  ScriptedBroker broker;
  broker.Expect(Kind::kModelCall,
                testing::SendShutdown("failed", "model-turn budget (40) reached"));
  BrokerClient client(broker.TakeAgentEnd());
  broker.Start();
  auto r = client.ModelCall(Conversation());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, BrokerFailure::Kind::kShutdown);
  EXPECT_EQ(r.failure().message, "model-turn budget (40) reached");
  broker.Join();
}

TEST(BrokerClient, ErrorReplyDoesNotEndTheSession) {
  ScriptedBroker broker;
  broker
      .Expect(Kind::kToolRequest,
              testing::SendError(protocol::ErrorCode::kLoopDetected, "same call 3 times"))
      .Expect(Kind::kProgress, testing::SendAck());
  broker.set_auto_ack_progress(false);
  BrokerClient client(broker.TakeAgentEnd());
  broker.Start();
  auto d = client.RequestTool(Request());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.failure().kind, BrokerFailure::Kind::kErrorReply);
  EXPECT_EQ(d.failure().code, protocol::ErrorCode::kLoopDetected);
  EXPECT_EQ(d.failure().message, "same call 3 times");
  EXPECT_FALSE(client.failure().has_value());
  EXPECT_TRUE(client.Progress("thinking", "").ok());
  broker.Join();
}

struct HostileCase {
  const char* name;
  std::function<std::string(std::uint64_t id)> bytes;
  const char* expect;  // substring of the failure message
};

class BrokerClientHostile : public ::testing::TestWithParam<HostileCase> {};

TEST_P(BrokerClientHostile, IsAClearProtocolFailure) {
  const HostileCase& c = GetParam();
  ScriptedBroker broker;
  broker.Expect(Kind::kModelCall, [&c](const protocol::Message& request) {
    return testing::Response{{c.bytes(request.header.id)}, true};
  });
  BrokerClient client(broker.TakeAgentEnd());
  broker.Start();
  auto r = client.ModelCall(Conversation());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, BrokerFailure::Kind::kProtocol) << r.failure().Describe();
  EXPECT_NE(r.failure().message.find(c.expect), std::string::npos) << r.failure().message;
  broker.Join();
}

INSTANTIATE_TEST_SUITE_P(
    Frames, BrokerClientHostile,
    ::testing::Values(
        HostileCase{"NotJson", [](std::uint64_t) { return testing::RawFrame("{nope"); },
                    "not valid JSON"},
        HostileCase{"AgentKind",
                    [](std::uint64_t id) {
                      return testing::RawFrame(R"({"v":2,"type":"hello","id":)" +
                                               std::to_string(id) +
                                               R"(,"agent":"x","protocols":[2]})");
                    },
                    "unknown message type"},
        HostileCase{"MissingField",
                    [](std::uint64_t id) {
                      return testing::RawFrame(R"({"v":2,"type":"model_result","id":)" +
                                               std::to_string(id) + "}");
                    },
                    "missing field"},
        HostileCase{"WrongVersion",
                    [](std::uint64_t id) {
                      return testing::RawFrame(R"({"v":1,"type":"ack","id":)" + std::to_string(id) +
                                               "}");
                    },
                    "version"},
        // Version 1's provider body is not a turn.
        HostileCase{"ProviderBodyInsteadOfATurn",
                    [](std::uint64_t id) {
                      return testing::RawFrame(R"({"v":2,"type":"model_result","id":)" +
                                               std::to_string(id) +
                                               R"(,"body":{"choices":[]},"turn":1})");
                    },
                    "stop_reason"},
        HostileCase{"CallIdTwiceInATurn",
                    [](std::uint64_t id) {
                      return testing::RawFrame(
                          R"({"v":2,"type":"model_result","id":)" + std::to_string(id) +
                          R"(,"text":"","stop_reason":"tool_calls","turn":1,"tool_calls":[)"
                          R"({"id":"a","name":"list_dir","arguments":{}},)"
                          R"({"id":"a","name":"glob","arguments":{"pattern":"*"}}]})");
                    },
                    "used twice"},
        HostileCase{"CallWithoutId",
                    [](std::uint64_t id) {
                      return testing::RawFrame(
                          R"({"v":2,"type":"model_result","id":)" + std::to_string(id) +
                          R"(,"text":"","stop_reason":"tool_calls","turn":1,"tool_calls":[)"
                          R"({"id":"","name":"list_dir","arguments":{}}]})");
                    },
                    "\"id\" must be 1 to"},
        HostileCase{"UnknownStopReason",
                    [](std::uint64_t id) {
                      return testing::RawFrame(R"({"v":2,"type":"model_result","id":)" +
                                               std::to_string(id) +
                                               R"(,"text":"x","stop_reason":"length","turn":1})");
                    },
                    "stop_reason"},
        HostileCase{"WrongId",
                    [](std::uint64_t id) {
                      protocol::ModelResult result;
                      return testing::Frame(protocol::Make(Kind::kModelResult, id + 7, result));
                    },
                    "while request"},
        HostileCase{"WrongKind",
                    [](std::uint64_t id) {
                      return testing::Frame(protocol::Make(Kind::kAck, id, protocol::Ack{}));
                    },
                    "instead of model_result"},
        HostileCase{"ZeroLengthFrame", [](std::uint64_t) { return std::string(4, '\0'); },
                    "bad frame"},
        HostileCase{"OversizedFrame",
                    [](std::uint64_t) { return std::string("\xff\xff\xff\xff", 4); }, "bad frame"},
        HostileCase{"HalfAFrame", [](std::uint64_t) { return std::string("\0\0\0\x20{\"v\"", 8); },
                    "middle of a frame"},
        HostileCase{"UnsolicitedApproval",
                    [](std::uint64_t id) {
                      protocol::Approval a;
                      a.verdict = protocol::Verdict::kAllow;
                      a.scope = "once";
                      return testing::Frame(protocol::Make(Kind::kApproval, id, a));
                    },
                    "instead of model_result"}),
    [](const ::testing::TestParamInfo<HostileCase>& param_info) { return param_info.param.name; });

TEST(BrokerClient, PendingWithoutAskIsAProtocolFailure) {
  ScriptedBroker broker;
  broker.Expect(Kind::kToolRequest, [](const protocol::Message& request) {
    protocol::Decision d;
    d.verdict = protocol::Verdict::kAllow;
    d.pending = true;
    return testing::Reply(Kind::kDecision, request.header.id, d);
  });
  BrokerClient client(broker.TakeAgentEnd());
  broker.Start();
  auto d = client.RequestTool(Request());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.failure().kind, BrokerFailure::Kind::kProtocol);
  broker.Join();
}

TEST(BrokerClient, BrokerClosingIsReported) {
  ScriptedBroker broker;  // empty script: the first request closes the connection
  BrokerClient client(broker.TakeAgentEnd());
  broker.Start();
  auto r = client.Hello("x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, BrokerFailure::Kind::kClosed);
  EXPECT_NE(r.failure().Describe().find("closed the connection"), std::string::npos);
  broker.Join();
}

TEST(BrokerClient, WrongWelcomeVersionIsRefused) {
  ScriptedBroker broker;
  protocol::Welcome w = testing::TestWelcome("/ws");
  w.protocol = 9;
  broker.Expect(Kind::kHello, testing::SendWelcome(w));
  BrokerClient client(broker.TakeAgentEnd());
  broker.Start();
  auto r = client.Hello("x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, BrokerFailure::Kind::kProtocol);
  EXPECT_NE(r.failure().message.find("version 9"), std::string::npos);
  broker.Join();
}

// The scripted broker's model-turn checks (which every loop test relies on) catch what the real
// broker refuses: each forged request below is reported, the honest one is not.
TEST(ScriptedBrokerRules, ToolRequestsMustNameAnUnusedCallOfTheLatestTurn) {
  const protocol::ToolCall call{"call_1", "run_command", {{"command", "make"}}, ""};
  struct Case {
    const char* name;
    std::vector<protocol::ToolRequest> requests;
    bool caught;
  };
  const std::vector<Case> cases = {
      {"honest",
       {protocol::ToolRequest{"call_1", "run_command", {{"command", "make"}}, {}}},
       false},
      {"forged id",
       {protocol::ToolRequest{"call_9", "run_command", {{"command", "make"}}, {}}},
       true},
      {"other tool",
       {protocol::ToolRequest{"call_1", "read_file", {{"command", "make"}}, {}}},
       true},
      {"changed args",
       {protocol::ToolRequest{"call_1", "run_command", {{"command", "rm"}}, {}}},
       true},
      {"replayed",
       {protocol::ToolRequest{"call_1", "run_command", {{"command", "make"}}, {}},
        protocol::ToolRequest{"call_1", "run_command", {{"command", "make"}}, {}}},
       true},
  };
  for (const Case& c : cases) {
    ScriptedBroker broker;
    broker.set_check_model_turns(true);
    broker.Expect(Kind::kModelCall, testing::SendModelTurn(testing::ToolTurn({call})));
    for (std::size_t i = 0; i < c.requests.size(); ++i) {
      broker.Expect(Kind::kToolRequest, testing::Allow());
    }
    broker.Expect(Kind::kFinish, testing::SendAck());
    {
      BrokerClient client(broker.TakeAgentEnd());
      broker.Start();
      EXPECT_TRUE(client.ModelCall(Conversation()).ok()) << c.name;
      for (const protocol::ToolRequest& request : c.requests) (void)client.RequestTool(request);
    }
    broker.Join();
    EXPECT_EQ(!broker.errors().empty(), c.caught) << c.name;
  }
}

TEST(ScriptedBrokerRules, ConversationsMustAnswerIssuedCalls) {
  const protocol::ToolCall call{"call_1", "list_dir", nlohmann::json::object(), ""};
  auto with = [&](std::vector<protocol::ChatMessage> tail) {
    protocol::ModelCall c = Conversation();
    for (auto& m : tail) c.messages.push_back(std::move(m));
    return c;
  };
  const protocol::ChatMessage assistant{protocol::Role::kAssistant, "", {call}, "", false};
  protocol::ToolCall forged = call;
  forged.arguments = {{"path", "/"}};
  const protocol::ChatMessage forged_assistant{protocol::Role::kAssistant, "", {forged}, "", false};
  const protocol::ChatMessage result{protocol::Role::kTool, "a/", {}, "call_1", false};
  const protocol::ChatMessage nudge{protocol::Role::kUser, "go on", {}, "", false};
  struct Case {
    const char* name;
    protocol::ModelCall second;
    bool caught;
  };
  const std::vector<Case> cases = {
      {"honest", with({assistant, result}), false},
      {"forged arguments", with({forged_assistant, result}), true},
      {"answered twice", with({assistant, result, result}), true},
      {"orphaned result", with({result}), true},
      {"result of an earlier turn",
       with({assistant, result, nudge, {protocol::Role::kAssistant, "x", {}, "", false}, result}),
       true},
  };
  for (const Case& c : cases) {
    ScriptedBroker broker;
    broker.set_check_model_turns(true);
    broker.Expect(Kind::kModelCall, testing::SendModelTurn(testing::ToolTurn({call})))
        .Expect(Kind::kModelCall, testing::SendModelTurn(testing::TextTurn("ok")))
        .Expect(Kind::kFinish, testing::SendAck());
    {
      BrokerClient client(broker.TakeAgentEnd());
      broker.Start();
      EXPECT_TRUE(client.ModelCall(Conversation()).ok()) << c.name;
      (void)client.ModelCall(c.second);
    }
    broker.Join();
    EXPECT_EQ(!broker.errors().empty(), c.caught) << c.name;
  }
}

}  // namespace
}  // namespace cagent::agent
