#include "launcher/mcp/protocol/session.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "common/json_text.h"
#include "launcher/mcp/protocol/jsonrpc.h"
#include "tests/launcher/mcp/protocol/mcp_test_util.h"

namespace cagent::launcher::mcp {
namespace {

using nlohmann::json;
using testing::SessionHarness;

json Request(const json& id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

// The error code of a response, or 0 when it is not an error.
int ErrorCode(const json& message) {
  return message.contains("error") ? message["error"]["code"].get<int>() : 0;
}

TEST(McpVersionsTest, NewestRevisionOfTheOfficialSdkComesFirst) {
  ASSERT_FALSE(SupportedProtocolVersions().empty());
  EXPECT_EQ(SupportedProtocolVersions().front(), "2025-11-25");
}

// ---- initialize ----

TEST(McpSessionTest, InitializeAnswersTheClientsKnownRevisionAndServerInfo) {
  SessionOptions options;
  options.server_version = "9.9";
  options.instructions = "use the tools";
  SessionHarness h(options);
  const json reply = h.Initialize(json::object(), "2025-11-25");
  EXPECT_EQ(reply["id"], 0);
  EXPECT_EQ(reply["result"]["protocolVersion"], "2025-11-25");
  EXPECT_EQ(reply["result"]["capabilities"], json::parse(R"({"tools":{"listChanged":false}})"));
  EXPECT_EQ(reply["result"]["serverInfo"], json::parse(R"({"name":"cagent","version":"9.9"})"));
  EXPECT_EQ(reply["result"]["instructions"], "use the tools");
  EXPECT_TRUE(h.session->initialized());
  EXPECT_EQ(h.session->protocol_version(), "2025-11-25");
  EXPECT_EQ(h.session->client_name(), "test-client");
  EXPECT_EQ(h.session->client_version(), "1.2.3");
}

TEST(McpSessionTest, InitializeKeepsAnOlderKnownRevision) {
  SessionHarness h;
  const json reply = h.Initialize(json::object(), "2024-11-05");
  EXPECT_EQ(reply["result"]["protocolVersion"], "2024-11-05");
  EXPECT_FALSE(reply["result"].contains("instructions"));  // none configured
}

TEST(McpSessionTest, InitializeOffersTheNewestForAnUnknownRevision) {
  SessionHarness h;
  const json reply = h.Initialize(json::object(), "2099-01-01");
  EXPECT_EQ(reply["result"]["protocolVersion"], "2025-11-25");
}

TEST(McpSessionTest, ResponseToARequestIsFinalAndRelatedToIt) {
  SessionHarness h;
  h.Send(Request("init-1", "initialize",
                 {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()}}));
  const Outgoing out = h.TakeOne();
  EXPECT_EQ(out.related, "init-1");
  EXPECT_TRUE(out.final);
  EXPECT_FALSE(h.session->initialized());  // notifications/initialized not yet
}

TEST(McpSessionTest, SecondInitializeIsRefused) {
  SessionHarness h;
  h.Initialize();
  h.Send(Request(5, "initialize", {{"protocolVersion", "2025-11-25"}}));
  const Outgoing out = h.TakeOne();
  EXPECT_EQ(ErrorCode(out.message), kInvalidRequest);
  EXPECT_EQ(out.message["id"], 5);
}

TEST(McpSessionTest, InitializeWithoutProtocolVersionIsInvalidParams) {
  SessionHarness h;
  h.Send(Request(1, "initialize", {{"capabilities", json::object()}}));
  EXPECT_EQ(ErrorCode(h.TakeOne().message), kInvalidParams);
  h.Send(Request(2, "initialize", {{"protocolVersion", 20250618}}));
  EXPECT_EQ(ErrorCode(h.TakeOne().message), kInvalidParams);
  // Its twin: the same with a string version is accepted.
  h.Send(Request(3, "initialize", {{"protocolVersion", "2025-06-18"}}));
  EXPECT_EQ(h.TakeOne().message["result"]["protocolVersion"], "2025-06-18");
}

TEST(McpSessionTest, RequestBeforeInitializeIsRefusedButPingIsAnswered) {
  SessionHarness h;
  h.Send(Request(1, "tools/list"));
  const Outgoing refused = h.TakeOne();
  EXPECT_EQ(ErrorCode(refused.message), kInvalidRequest);
  EXPECT_NE(refused.message["error"]["message"].get<std::string>().find("initialize"),
            std::string::npos);
  h.Send(Request(2, "ping"));
  EXPECT_EQ(h.TakeOne().message["result"], json::object());
  // Twin: after initialize the same request is served.
  h.Initialize();
  h.Send(Request(3, "tools/list"));
  EXPECT_TRUE(h.TakeOne().message.contains("result"));
}

TEST(McpSessionTest, UnknownMethodIsMethodNotFoundAndUnknownNotificationIsIgnored) {
  SessionHarness h;
  h.Initialize();
  h.Send(Request(1, "resources/list"));
  EXPECT_EQ(ErrorCode(h.TakeOne().message), kMethodNotFound);
  h.Send({{"jsonrpc", "2.0"}, {"method", "notifications/roots/list_changed"}});
  EXPECT_TRUE(h.Take().empty());
}

// ---- tools/list and tools/call ----

TEST(McpSessionTest, ToolsListShowsTheHandlersTools) {
  SessionHarness h;
  h.Initialize();
  h.Send(Request(1, "tools/list"));
  const json tools = h.TakeOne().message["result"]["tools"];
  ASSERT_EQ(tools.size(), 2U);
  EXPECT_EQ(tools[0]["name"], "echo");
  EXPECT_EQ(tools[0]["title"], "Echo");
  EXPECT_EQ(tools[0]["description"], "Says the text back.");
  EXPECT_EQ(tools[0]["inputSchema"]["required"], json::array({"text"}));
  EXPECT_EQ(tools[0]["annotations"]["readOnlyHint"], true);
  EXPECT_FALSE(tools[0].contains("outputSchema"));
  EXPECT_EQ(tools[1]["name"], "slow");
  EXPECT_FALSE(tools[1].contains("title"));
  EXPECT_FALSE(tools[1].contains("annotations"));
  EXPECT_EQ(tools[1]["outputSchema"]["type"], "object");
}

TEST(McpSessionTest, ToolsCallReachesTheHandlerAndItsResultIsTheResponse) {
  SessionHarness h;
  h.Initialize();
  h.Call(7, "echo", {{"text", "hello"}});
  const Outgoing out = h.TakeOne();
  EXPECT_EQ(out.related, 7);
  EXPECT_TRUE(out.final);
  EXPECT_EQ(out.message["result"]["content"], json::parse(R"([{"type":"text","text":"hello"}])"));
  EXPECT_EQ(out.message["result"]["isError"], false);
  ASSERT_EQ(h.handler.calls.size(), 1U);
  EXPECT_EQ(h.handler.calls[0]->name(), "echo");
  EXPECT_EQ(h.handler.calls[0]->request_id(), 7);
  EXPECT_TRUE(h.handler.calls[0]->done());
  EXPECT_EQ(h.session->calls_in_progress(), 0U);
}

TEST(McpSessionTest, AsynchronousFinishWithStructuredContent) {
  SessionHarness h;
  h.Initialize();
  h.Call("a", "slow");
  EXPECT_TRUE(h.Take().empty());
  EXPECT_EQ(h.session->calls_in_progress(), 1U);
  ASSERT_EQ(h.handler.calls.size(), 1U);
  auto call = h.handler.calls[0];
  EXPECT_FALSE(call->done());
  EXPECT_EQ(call->arguments(), json::object());
  ToolResult result = ToolResult::Text("{\"n\":3}");
  result.structured = {{"n", 3}};
  call->Finish(result);
  const Outgoing out = h.TakeOne();
  EXPECT_EQ(out.related, "a");
  EXPECT_EQ(out.message["result"]["structuredContent"]["n"], 3);
  // Once: a second Finish and a Fail are ignored.
  call->Finish(ToolResult::Text("again"));
  call->Fail(kInternalError, "late");
  EXPECT_TRUE(h.Take().empty());
  EXPECT_EQ(h.session->calls_in_progress(), 0U);
}

TEST(McpSessionTest, FailIsAJsonRpcError) {
  SessionHarness h;
  h.Initialize();
  h.Call(1, "slow");
  h.handler.calls[0]->Fail(kInvalidParams, "no such file");
  const json out = h.TakeOne().message;
  EXPECT_EQ(ErrorCode(out), kInvalidParams);
  EXPECT_EQ(out["error"]["message"], "no such file");
  EXPECT_EQ(out["id"], 1);
}

TEST(McpSessionTest, UnknownToolIsAToolResultWithIsError) {
  SessionHarness h;
  h.Initialize();
  h.Call(1, "rm_rf");
  const json out = h.TakeOne().message;
  EXPECT_EQ(out["result"]["isError"], true);
  EXPECT_NE(out["result"]["content"][0]["text"].get<std::string>().find("unknown tool \"rm_rf\""),
            std::string::npos);
  EXPECT_TRUE(h.handler.calls.empty());  // never reaches the handler
}

TEST(McpSessionTest, ToolNamesAreLearnedOnceNotForEveryCall) {
  SessionHarness h;
  h.Initialize();
  for (int i = 1; i <= 3; ++i) {
    h.Call(i, "echo", {{"text", "x"}});  // without tools/list first
    EXPECT_EQ(h.TakeOne().message["result"]["isError"], false);
  }
  EXPECT_EQ(h.handler.list_calls, 1);
  h.Call(4, "rm_rf");
  EXPECT_EQ(h.TakeOne().message["result"]["isError"], true);
  EXPECT_EQ(h.handler.list_calls, 1);
  // tools/list refreshes them.
  h.handler.tools.front().name = "echo2";
  h.Send(Request(5, "tools/list"));
  h.Take();
  h.Call(6, "echo2", {{"text", "y"}});
  EXPECT_EQ(h.TakeOne().message["result"]["content"][0]["text"], "y");
  EXPECT_EQ(h.handler.list_calls, 2);
}

TEST(McpSessionTest, ArgumentsThatAreNotAnObjectAreInvalidParams) {
  SessionHarness h;
  h.Initialize();
  h.Send(Request(1, "tools/call", {{"name", "echo"}, {"arguments", json::array({1})}}));
  EXPECT_EQ(ErrorCode(h.TakeOne().message), kInvalidParams);
  h.Send(Request(2, "tools/call", {{"name", "echo"}, {"arguments", "text"}}));
  EXPECT_EQ(ErrorCode(h.TakeOne().message), kInvalidParams);
  h.Send(Request(3, "tools/call", {{"name", 5}}));
  EXPECT_EQ(ErrorCode(h.TakeOne().message), kInvalidParams);
  EXPECT_TRUE(h.handler.calls.empty());
  // Twin: absent arguments are {}.
  h.Send(Request(4, "tools/call", {{"name", "echo"}}));
  EXPECT_EQ(h.TakeOne().message["result"]["content"][0]["text"], "(no text)");
}

TEST(McpSessionTest, CallsInProgressAreLimited) {
  SessionOptions options;
  options.max_calls_in_progress = 2;
  SessionHarness h(options);
  h.Initialize();
  h.Call(1, "slow");
  h.Call(2, "slow");
  EXPECT_TRUE(h.Take().empty());
  h.Call(3, "slow");
  const json refused = h.TakeOne().message;
  EXPECT_EQ(ErrorCode(refused), kInternalError);
  EXPECT_EQ(refused["id"], 3);
  // Twin: once one finishes, another is accepted.
  h.handler.calls[0]->Finish(ToolResult::Text("ok"));
  h.Take();
  h.Call(4, "slow");
  EXPECT_TRUE(h.Take().empty());
  EXPECT_EQ(h.session->calls_in_progress(), 2U);
}

TEST(McpSessionTest, AnIdInUseByACallInProgressIsRefused) {
  SessionHarness h;
  h.Initialize();
  h.Call(1, "slow");
  h.Call(1, "slow");
  const json refused = h.TakeOne().message;
  EXPECT_EQ(ErrorCode(refused), kInvalidRequest);
  EXPECT_EQ(h.handler.calls.size(), 1U);
  // Twin: the string "1" is another id.
  h.Call("1", "slow");
  EXPECT_TRUE(h.Take().empty());
  EXPECT_EQ(h.handler.calls.size(), 2U);
}

TEST(McpSessionTest, AHandlerThatThrowsFailsItsCallAndTheSessionGoesOn) {
  SessionHarness h;
  h.Initialize();
  h.handler.on_call = [](const std::shared_ptr<ToolCall>& call) {
    if (call->name() == "slow") {
      throw std::runtime_error("boom");
    }
    call->Finish(ToolResult::Text("fine"));
  };
  h.Call(1, "slow");
  const json failed = h.TakeOne().message;
  EXPECT_EQ(ErrorCode(failed), kInternalError);
  EXPECT_EQ(failed["id"], 1);
  EXPECT_EQ(h.session->calls_in_progress(), 0U);
  h.Call(2, "echo");
  EXPECT_EQ(h.TakeOne().message["result"]["content"][0]["text"], "fine");
}

// ---- progress ----

TEST(McpSessionTest, ProgressIsSentWithTheTokenAndOnlyWhenItIncreases) {
  SessionHarness h;
  h.Initialize();
  h.Call(1, "slow", json::object(), "tok");
  auto call = h.handler.calls[0];
  call->Progress(1, 10, "started");
  call->Progress(1, 10, "same");    // not increasing: not sent
  call->Progress(0.5, 10, "back");  // smaller: not sent
  call->Progress(2, std::nullopt, "");
  const auto out = h.Take();
  ASSERT_EQ(out.size(), 2U);
  EXPECT_EQ(out[0].message["method"], "notifications/progress");
  EXPECT_EQ(
      out[0].message["params"],
      json::parse(R"({"progressToken":"tok","progress":1.0,"total":10.0,"message":"started"})"));
  EXPECT_EQ(out[0].related, 1);
  EXPECT_FALSE(out[0].final);
  EXPECT_EQ(out[1].message["params"], json::parse(R"({"progressToken":"tok","progress":2.0})"));
  call->Finish(ToolResult::Text("done"));
  h.Take();
  call->Progress(3, std::nullopt, "after the end");
  EXPECT_TRUE(h.Take().empty());
}

TEST(McpSessionTest, NoProgressWithoutAToken) {
  SessionHarness h;
  h.Initialize();
  h.Call(1, "slow");
  h.handler.calls[0]->Progress(1, std::nullopt, "x");
  EXPECT_TRUE(h.Take().empty());
  // Twin: with a numeric token it is sent.
  h.Call(2, "slow", json::object(), 42);
  h.handler.calls[1]->Progress(1, std::nullopt, "x");
  EXPECT_EQ(h.TakeOne().message["params"]["progressToken"], 42);
}

// ---- elicitation ----

json ElicitSchema() {
  return {{"type", "object"}, {"properties", {{"ok", {{"type", "boolean"}}}}}};
}

struct ElicitResult {
  bool ran = false;
  int times = 0;
  ElicitReply reply;
};

void StartElicit(ToolCall& call, ElicitResult& into) {
  call.Elicit("allow?", ElicitSchema(), [&into](ElicitReply reply) {
    into.ran = true;
    ++into.times;
    into.reply = std::move(reply);
  });
}

TEST(McpSessionTest, ElicitationAcceptIsHandedBackWithItsContent) {
  SessionHarness h;
  h.Initialize({{"elicitation", json::object()}});
  h.Call(1, "slow");
  auto call = h.handler.calls[0];
  ASSERT_TRUE(call->CanElicit());
  ElicitResult result;
  StartElicit(*call, result);
  const Outgoing request = h.TakeOne();
  EXPECT_EQ(request.message["method"], "elicitation/create");
  EXPECT_EQ(request.message["params"]["mode"], "form");
  EXPECT_EQ(request.message["params"]["message"], "allow?");
  EXPECT_EQ(request.message["params"]["requestedSchema"], ElicitSchema());
  EXPECT_EQ(request.related, 1);
  EXPECT_FALSE(request.final);
  const json id = request.message["id"];
  h.Send({{"jsonrpc", "2.0"},
          {"id", id},
          {"result", {{"action", "accept"}, {"content", {{"ok", true}}}}}});
  ASSERT_TRUE(result.ran);
  EXPECT_EQ(result.reply.action, ElicitReply::Action::kAccept);
  EXPECT_EQ(result.reply.content, json::parse(R"({"ok":true})"));
  // A second answer to the same id is ignored.
  h.Send({{"jsonrpc", "2.0"}, {"id", id}, {"result", {{"action", "decline"}}}});
  EXPECT_EQ(result.times, 1);
}

TEST(McpSessionTest, ElicitationDeclineCancelAndErrorAnswers) {
  SessionHarness h;
  h.Initialize({{"elicitation", {{"form", json::object()}}}});
  h.Call(1, "slow");
  auto call = h.handler.calls[0];
  const std::vector<std::pair<json, ElicitReply::Action>> answers = {
      {{{"result", {{"action", "decline"}}}}, ElicitReply::Action::kDecline},
      {{{"result", {{"action", "cancel"}}}}, ElicitReply::Action::kCancel},
      {{{"error", {{"code", -1}, {"message", "user closed"}}}}, ElicitReply::Action::kFailed},
      {{{"result", {{"action", "maybe"}}}}, ElicitReply::Action::kFailed},
      {{{"result", {{"action", "accept"}, {"content", "yes"}}}}, ElicitReply::Action::kFailed},
  };
  for (const auto& [answer, action] : answers) {
    ElicitResult result;
    StartElicit(*call, result);
    const json id = h.TakeOne().message["id"];
    json response = answer;
    response["jsonrpc"] = "2.0";
    response["id"] = id;
    h.Send(response);
    ASSERT_TRUE(result.ran) << answer;
    EXPECT_EQ(result.reply.action, action) << answer;
    if (action == ElicitReply::Action::kFailed) {
      EXPECT_FALSE(result.reply.error.empty());
    }
  }
}

// The client's request ids and the server's are two sequences: the client's answer to our
// elicitation 1 may carry the id of its own tools/call 1. A broken answer (unreadable, too deep,
// too large) was refused to that id, so the client took the error for its tools/call's response
// (found by the mcp_session fuzz target). Now the refusal goes to no id, the elicitation it
// answered fails, and the call gets its own response.
TEST(McpSessionTest, ARefusedAnswerIsNotSentToTheClientsRequestOfTheSameNumber) {
  SessionOptions small;
  small.max_depth = 4;
  small.max_frame_bytes = 512;
  const std::vector<std::string> broken = {
      R"({"jsonrpc":"2.0","id":1,"result":{"action":"accept"},"error":{"code":1,"message":"m"}})",
      R"({"jsonrpc":"2.0","id":1,"result":{"action":"accept","content":{"a":[[[[1]]]]}}})",
      R"({"jsonrpc":"2.0","result":{"action":"accept","content":{"a":")" + std::string(600, 'x') +
          R"("}},"id":1})",
  };
  for (const std::string& answer : broken) {
    SessionHarness h(small);
    h.Initialize({{"elicitation", json::object()}});
    h.Call(1, "slow");  // the client's request 1
    auto call = h.handler.calls[0];
    ElicitResult result;
    StartElicit(*call, result);
    ASSERT_EQ(h.TakeOne().message["id"], 1) << "our first request's id is 1";
    h.SendText(answer);
    const Outgoing refusal = h.TakeOne();
    EXPECT_EQ(ErrorCode(refusal.message), kInvalidRequest) << answer;
    EXPECT_TRUE(refusal.message["id"].is_null()) << answer;
    EXPECT_FALSE(refusal.final) << answer;
    ASSERT_TRUE(result.ran) << answer;
    EXPECT_EQ(result.reply.action, ElicitReply::Action::kFailed);
    EXPECT_FALSE(call->done()) << "the client's call 1 is still in progress: " << answer;
    call->Finish(ToolResult::Text("done"));
    const Outgoing response = h.TakeOne();
    EXPECT_EQ(response.message["id"], 1);
    EXPECT_TRUE(response.final);
    EXPECT_FALSE(response.message.contains("error"));
  }
  // The twin: a request of the same shapes is still refused to its id.
  SessionHarness h(small);
  h.Initialize();
  h.SendText(R"({"jsonrpc":"2.0","id":5,"method":"ping","params":{"a":[[[[1]]]]}})");
  EXPECT_EQ(h.TakeOne().message["id"], 5);
  h.SendText(R"({"method":"ping","params":{"pad":")" + std::string(600, 'x') +
             R"("},"jsonrpc":"2.0","id":6})");
  EXPECT_EQ(h.TakeOne().message["id"], 6);
}

TEST(McpSessionTest, ElicitationIsRefusedWithoutTheFormCapability) {
  for (const json& capabilities :
       {json::object(), json{{"elicitation", {{"url", json::object()}}}}}) {
    SessionHarness h;
    h.Initialize(capabilities);
    h.Call(1, "slow");
    auto call = h.handler.calls[0];
    EXPECT_FALSE(call->CanElicit()) << capabilities;
    ElicitResult result;
    StartElicit(*call, result);
    EXPECT_FALSE(result.ran);  // not from inside Elicit
    h.Poll();
    ASSERT_TRUE(result.ran);
    EXPECT_EQ(result.reply.action, ElicitReply::Action::kFailed);
    EXPECT_TRUE(h.Take().empty());  // nothing sent to the client
  }
}

TEST(McpSessionTest, ElicitationHasNoModeBeforeRevision20251125) {
  SessionHarness h;
  h.Initialize({{"elicitation", json::object()}}, "2025-06-18");
  h.Call(1, "slow");
  ElicitResult result;
  StartElicit(*h.handler.calls[0], result);
  const json request = h.TakeOne().message;
  EXPECT_FALSE(request["params"].contains("mode"));
  EXPECT_EQ(request["params"]["message"], "allow?");
}

TEST(McpSessionTest, FinishingACallFailsItsPendingElicitation) {
  SessionHarness h;
  h.Initialize({{"elicitation", json::object()}});
  h.Call(1, "slow");
  auto call = h.handler.calls[0];
  ElicitResult result;
  StartElicit(*call, result);
  const json id = h.TakeOne().message["id"];
  call->Finish(ToolResult::Text("done"));
  const auto out = h.Take();
  ASSERT_EQ(out.size(), 2U);
  EXPECT_EQ(out[0].message["method"], "notifications/cancelled");
  EXPECT_EQ(out[0].message["params"]["requestId"], id);
  EXPECT_TRUE(out[1].final);
  ASSERT_TRUE(result.ran);
  EXPECT_EQ(result.reply.action, ElicitReply::Action::kFailed);
  h.Send({{"jsonrpc", "2.0"}, {"id", id}, {"result", {{"action", "accept"}}}});
  EXPECT_EQ(result.times, 1);
}

TEST(McpSessionTest, ServerRequestIdsDoNotRepeat) {
  SessionHarness h;
  h.Initialize({{"elicitation", json::object()}});
  h.Call(1, "slow");
  ElicitResult a;
  ElicitResult b;
  StartElicit(*h.handler.calls[0], a);
  StartElicit(*h.handler.calls[0], b);
  const auto out = h.Take();
  ASSERT_EQ(out.size(), 2U);
  EXPECT_NE(out[0].message["id"], out[1].message["id"]);
  // Each answer reaches its own request.
  h.Send({{"jsonrpc", "2.0"}, {"id", out[1].message["id"]}, {"result", {{"action", "decline"}}}});
  EXPECT_FALSE(a.ran);
  EXPECT_EQ(b.reply.action, ElicitReply::Action::kDecline);
}

// ---- cancellation and End ----

TEST(McpSessionTest, CancelledCallRunsOnCancelAndGetsNoResponse) {
  SessionHarness h;
  h.Initialize({{"elicitation", json::object()}});
  json abandoned;
  h.session->set_on_abandoned([&abandoned](const json& id) { abandoned = id; });
  h.Call(9, "slow");
  auto call = h.handler.calls[0];
  std::string reason;
  call->OnCancel([&reason](std::string r) { reason = std::move(r); });
  ElicitResult elicit;
  StartElicit(*call, elicit);
  h.Take();
  h.Send({{"jsonrpc", "2.0"},
          {"method", "notifications/cancelled"},
          {"params", {{"requestId", 9}, {"reason", "user pressed Esc"}}}});
  EXPECT_EQ(reason, "user pressed Esc");
  EXPECT_EQ(abandoned, 9);
  EXPECT_TRUE(call->done());
  EXPECT_EQ(elicit.reply.action, ElicitReply::Action::kFailed);
  for (const auto& out : h.Take()) {
    EXPECT_FALSE(out.message.contains("result")) << out.message;
    EXPECT_FALSE(out.message.contains("error")) << out.message;
  }
  call->Finish(ToolResult::Text("too late"));
  EXPECT_TRUE(h.Take().empty());
  EXPECT_EQ(h.session->calls_in_progress(), 0U);
}

TEST(McpSessionTest, CancellingAnotherIdLeavesTheCallRunning) {
  SessionHarness h;
  h.Initialize();
  h.Call(9, "slow");
  auto call = h.handler.calls[0];
  bool cancelled = false;
  call->OnCancel([&cancelled](const std::string&) { cancelled = true; });
  h.Send({{"jsonrpc", "2.0"},
          {"method", "notifications/cancelled"},
          {"params", {{"requestId", "9"}}}});
  EXPECT_FALSE(cancelled);
  EXPECT_FALSE(call->done());
  call->Finish(ToolResult::Text("ok"));
  EXPECT_EQ(h.TakeOne().message["id"], 9);
}

TEST(McpSessionTest, OnCancelRegisteredAfterTheCancellationStillRuns) {
  SessionHarness h;
  h.Initialize();
  h.Call(9, "slow");
  h.Send(
      {{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 9}}}});
  std::string reason;
  h.handler.calls[0]->OnCancel([&reason](std::string r) { reason = std::move(r); });
  h.Poll();
  EXPECT_FALSE(reason.empty());
}

TEST(McpSessionTest, EndFailsCallsElicitationsAndLaterRequests) {
  SessionHarness h;
  h.Initialize({{"elicitation", json::object()}});
  h.Call(1, "slow");
  h.Call(2, "slow");
  auto first = h.handler.calls[0];
  auto second = h.handler.calls[1];
  std::string reason;
  first->OnCancel([&reason](std::string r) { reason = std::move(r); });
  second->Finish(ToolResult::Text("done before the end"));
  ElicitResult elicit;
  StartElicit(*first, elicit);
  h.Take();
  h.session->End(kInternalError, "budget exhausted");
  EXPECT_TRUE(h.session->ended());
  const auto out = h.Take();
  ASSERT_EQ(out.size(), 2U);  // the elicitation's cancellation, then the call's error
  EXPECT_EQ(out[0].message["method"], "notifications/cancelled");
  EXPECT_EQ(out[1].message["id"], 1);
  EXPECT_EQ(out[1].message["error"]["message"], "budget exhausted");
  EXPECT_TRUE(out[1].final);
  EXPECT_EQ(elicit.reply.action, ElicitReply::Action::kFailed);
  EXPECT_EQ(reason, "budget exhausted");
  // Later requests get the same error; notifications are ignored; End is idempotent.
  h.Send(Request(3, "tools/list"));
  const json later = h.TakeOne().message;
  EXPECT_EQ(ErrorCode(later), kInternalError);
  EXPECT_EQ(later["error"]["message"], "budget exhausted");
  h.Send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  h.session->End(kInvalidRequest, "again");
  EXPECT_TRUE(h.Take().empty());
  first->Finish(ToolResult::Text("late"));
  EXPECT_TRUE(h.Take().empty());
  ElicitResult after;
  StartElicit(*first, after);
  h.Poll();
  EXPECT_EQ(after.reply.action, ElicitReply::Action::kFailed);
}

TEST(McpSessionTest, OnIdleRunsWhenTheLastCallIsDone) {
  SessionHarness h;
  h.Initialize();
  h.Call(1, "slow");
  h.Call(2, "slow");
  int idle = 0;
  h.session->set_on_idle([&idle] { ++idle; });
  h.Poll();
  EXPECT_EQ(idle, 0);  // two in progress
  h.handler.calls[0]->Finish(ToolResult::Text("one"));
  h.Poll();
  EXPECT_EQ(idle, 0);  // one still in progress
  h.Send(
      {{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 2}}}});
  EXPECT_EQ(idle, 0);  // posted, not from inside Receive
  h.Poll();
  EXPECT_EQ(idle, 1);
  SessionHarness quiet;
  int at_once = 0;
  quiet.session->set_on_idle([&at_once] { ++at_once; });
  quiet.Poll();
  EXPECT_EQ(at_once, 1);  // nothing was in progress
}

TEST(McpSessionTest, ACallOutlivingTheSessionIsANoOp) {
  auto h = std::make_unique<SessionHarness>();
  h->Initialize();
  h->Call(1, "slow");
  std::shared_ptr<ToolCall> call = h->handler.calls[0];
  h->session.reset();
  EXPECT_TRUE(call->done());
  call->Progress(1, std::nullopt, "");
  call->Finish(ToolResult::Text("x"));
  EXPECT_TRUE(h->Take().empty());
}

// ---- hostile frames ----

TEST(McpSessionTest, InvalidJsonIsAParseErrorWithNullId) {
  SessionHarness h;
  h.SendText("{\"jsonrpc\":\"2.0\",\"id\":1,");
  const Outgoing out = h.TakeOne();
  EXPECT_EQ(ErrorCode(out.message), kParseError);
  EXPECT_TRUE(out.message["id"].is_null());
  EXPECT_TRUE(out.related.is_null());
  EXPECT_FALSE(out.final);
  h.SendText("\xff\xfe");
  EXPECT_EQ(ErrorCode(h.TakeOne().message), kParseError);
  // A valid request, a NUL, and more: nlohmann alone takes the request and ignores the rest.
  const std::string nul = std::string(R"({"jsonrpc":"2.0","id":2,"method":"ping"})") + '\0' + "x";
  ASSERT_FALSE(nlohmann::json::parse(nul, nullptr, false).is_discarded());  // the twin
  h.SendText(nul);
  EXPECT_EQ(ErrorCode(h.TakeOne().message), kParseError);
}

TEST(McpSessionTest, NonMessagesAreInvalidRequestsAndTheSessionGoesOn) {
  SessionHarness h;
  h.Initialize();
  const std::vector<std::pair<std::string, json>> frames = {
      {R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", nullptr},  // a batch
      {R"("ping")", nullptr},
      {R"(42)", nullptr},
      {R"({"jsonrpc":"1.0","id":3,"method":"ping"})", 3},
      {R"({"id":4,"method":"ping"})", 4},
      {R"({"jsonrpc":"2.0","id":{"a":1},"method":"ping"})", nullptr},
      {R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})", nullptr},
      {R"({"jsonrpc":"2.0","id":null,"method":"ping"})", nullptr},
      {R"({"jsonrpc":"2.0","id":7,"method":7})", 7},
      {R"({"jsonrpc":"2.0","id":8,"method":"ping","params":"x"})", 8},
      {R"({"jsonrpc":"2.0"})", nullptr},
      // A response (no "method") is refused to no id: RpcRefusal, and the test below.
      {R"({"jsonrpc":"2.0","id":9,"result":{},"error":{"code":1,"message":"m"}})", nullptr},
      {R"({"jsonrpc":"1.0","id":9,"result":{}})", nullptr},
  };
  for (const auto& [frame, id] : frames) {
    h.SendText(frame);
    const Outgoing out = h.TakeOne();
    EXPECT_EQ(ErrorCode(out.message), kInvalidRequest) << frame;
    EXPECT_EQ(out.message["id"], id) << frame;
  }
  // Twin: a good request is still answered.
  h.SendText(R"({"jsonrpc":"2.0","id":10,"method":"ping"})");
  EXPECT_EQ(h.TakeOne().message["result"], json::object());
}

TEST(McpSessionTest, ParamsThatAreAnArrayAreInvalidParams) {
  SessionHarness h;
  h.Initialize();
  h.SendText(R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]})");
  EXPECT_EQ(ErrorCode(h.TakeOne().message), kInvalidParams);
}

TEST(McpSessionTest, DeepNestingIsRefusedBeforeParsing) {
  SessionHarness h;
  h.Initialize();
  const auto nested = [](int depth) {
    return R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"x":)" +
           std::string(depth, '[') + std::string(depth, ']') + "}}}";
  };
  h.SendText(nested(100));
  const json refused = h.TakeOne().message;
  EXPECT_EQ(ErrorCode(refused), kInvalidRequest);
  EXPECT_EQ(refused["id"], 5);
  EXPECT_TRUE(h.handler.calls.empty());
  // Twin: 50 levels (within the 64 of the default) are parsed and served.
  h.SendText(nested(50));
  EXPECT_EQ(h.TakeOne().message["result"]["isError"], false);
  // A million levels do not exhaust the stack.
  h.SendText(nested(1000000));
  EXPECT_EQ(ErrorCode(h.TakeOne().message), kInvalidRequest);
}

TEST(McpSessionTest, TooLargeFrameIsRefusedWithTheIdFromItsPrefix) {
  SessionOptions options;
  options.max_frame_bytes = 1000;
  SessionHarness h(options);
  h.Initialize();
  h.SendText(R"({"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"echo","ar)",
             /*too_large=*/true);
  const json refused = h.TakeOne().message;
  EXPECT_EQ(ErrorCode(refused), kInvalidRequest);
  EXPECT_EQ(refused["id"], "big");
  EXPECT_EQ(refused["error"]["message"], "invalid request: message exceeds 1000 bytes");
  // Without a readable id it is dropped.
  h.SendText(R"({"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","ar)", true);
  EXPECT_TRUE(h.Take().empty());
  // A whole frame over the limit handed in without the flag is refused too.
  h.SendText(R"({"jsonrpc":"2.0","id":3,"method":"ping","params":{"pad":")" +
             std::string(2000, 'x') + "\"}}");
  EXPECT_EQ(h.TakeOne().message["id"], 3);
  // So is one whose id comes last, as the SDK writes it.
  h.SendText(R"({"method":"ping","params":{"pad":")" + std::string(2000, 'x') +
             R"("},"jsonrpc":"2.0","id":"last"})");
  EXPECT_EQ(h.TakeOne().message["id"], "last");
  // Twin: within the limit it is served.
  h.SendText(R"({"jsonrpc":"2.0","id":4,"method":"ping"})");
  EXPECT_EQ(h.TakeOne().message["result"], json::object());
  h.session->ReceiveOversized(json(11));
  EXPECT_EQ(h.TakeOne().message["id"], 11);
  h.session->ReceiveOversized(json());
  EXPECT_TRUE(h.Take().empty());
}

TEST(McpSessionTest, ResponsesToUnknownIdsAreIgnored) {
  SessionHarness h;
  h.Initialize();
  h.Send({{"jsonrpc", "2.0"}, {"id", 12345}, {"result", {{"action", "accept"}}}});
  h.Send({{"jsonrpc", "2.0"}, {"id", "x"}, {"error", {{"code", 1}, {"message", "m"}}}});
  h.Send({{"jsonrpc", "2.0"}, {"id", nullptr}, {"error", {{"code", 1}, {"message", "m"}}}});
  EXPECT_TRUE(h.Take().empty());
}

// ---- the id scanner ----

TEST(RpcIdScannerTest, FindsTheTopLevelIdAnywhereInTheText) {
  const auto scan = [](std::string_view text, std::size_t chunk) {
    RpcIdScanner scanner;
    for (std::size_t i = 0; i < text.size(); i += chunk) {
      scanner.Feed(text.substr(i, chunk));
    }
    return scanner.id().value_or(json("none"));
  };
  for (std::size_t chunk : {1U, 3U, 1000U}) {
    EXPECT_EQ(scan(R"({"jsonrpc":"2.0","id":17,"method":"x"})", chunk), 17);
    EXPECT_EQ(scan(R"({"method":"x","params":{"id":1,"a":[{"id":2}]},"id" : "s\"q"})", chunk),
              "s\"q");
    EXPECT_EQ(scan(R"({"params":{"id":1},"method":"x"})", chunk), "none");  // nested only
    EXPECT_EQ(scan(R"({"id":{"x":1},"method":"x"})", chunk), "none");       // not an id
    EXPECT_EQ(scan(R"({"id":1.5})", chunk), "none");
    EXPECT_EQ(scan(R"({"params":"\"id\":3","id":-4})", chunk), -4);
    EXPECT_EQ(scan(R"([{"id":1}])", chunk), "none");
    EXPECT_EQ(scan(R"({"jsonrpc":"2.0","id":12)", chunk), "none");  // cut: incomplete
  }
}

TEST(RpcMessageTest, OutgoingTextIsOneLine) {
  const json message = RpcError(1, kInternalError, "line one\nline two");
  EXPECT_EQ(JsonText(message).find('\n'), std::string::npos);
}

}  // namespace
}  // namespace cagent::launcher::mcp
