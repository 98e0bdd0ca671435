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

TEST(BrokerClient, IdsIncreaseAndRepliesMatch) {
  ScriptedBroker broker;
  broker.Expect(Kind::kHello, testing::SendWelcome(testing::TestWelcome("/ws")))
      .Expect(Kind::kModelCall, testing::SendModelTurn({{"text", "hi"}}))
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
  auto model = client.ModelCall({{"turn", 1}});
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model.value().body["text"], "hi");
  auto decision = client.RequestTool(Request());
  ASSERT_TRUE(decision.ok());
  EXPECT_TRUE(decision.value().allowed());
  EXPECT_FALSE(decision.value().approval.has_value());
  auto ack = client.ReportResult({decision.value().request_id, true, "", "out", {}});
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
  EXPECT_EQ(std::get<protocol::Hello>(broker.received()[0].body).protocols,
            std::vector<int>{protocol::kVersion});
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
  auto r = client.ModelCall({{"turn", 1}});
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
  auto r = client.ModelCall({{"turn", 1}});
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
                      return testing::RawFrame(R"({"v":1,"type":"hello","id":)" +
                                               std::to_string(id) +
                                               R"(,"agent":"x","protocols":[1]})");
                    },
                    "unknown message type"},
        HostileCase{"MissingField",
                    [](std::uint64_t id) {
                      return testing::RawFrame(R"({"v":1,"type":"model_result","id":)" +
                                               std::to_string(id) + "}");
                    },
                    "missing field"},
        HostileCase{"WrongVersion",
                    [](std::uint64_t id) {
                      return testing::RawFrame(R"({"v":2,"type":"ack","id":)" + std::to_string(id) +
                                               "}");
                    },
                    "version"},
        HostileCase{"WrongId",
                    [](std::uint64_t id) {
                      protocol::ModelResult result;
                      result.body = nlohmann::json::object();
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

}  // namespace
}  // namespace cagent::agent
