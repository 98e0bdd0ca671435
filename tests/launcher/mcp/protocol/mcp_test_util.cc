#include "tests/launcher/mcp/protocol/mcp_test_util.h"

#include <gtest/gtest.h>

#include <utility>

#include "common/json_text.h"

namespace cagent::launcher::mcp::testing {

using nlohmann::json;

std::vector<ToolDefinition> DefaultTools() {
  ToolDefinition echo;
  echo.name = "echo";
  echo.title = "Echo";
  echo.description = "Says the text back.";
  echo.input_schema = {
      {"type", "object"}, {"properties", {{"text", {{"type", "string"}}}}}, {"required", {"text"}}};
  echo.annotations = {{"readOnlyHint", true}};
  ToolDefinition slow;
  slow.name = "slow";
  slow.input_schema = {{"type", "object"}};
  slow.output_schema = {{"type", "object"}, {"properties", {{"n", {{"type", "number"}}}}}};
  return {echo, slow};
}

FakeHandler::FakeHandler() : tools(DefaultTools()) {}

void FakeHandler::Call(std::shared_ptr<ToolCall> call) {
  calls.push_back(call);
  if (on_call) {
    on_call(call);
    return;
  }
  if (call->name().rfind("echo", 0) == 0) {  // echo, echo2 …
    const auto& args = call->arguments();
    call->Finish(ToolResult::Text(args.contains("text") && args["text"].is_string()
                                      ? args["text"].get<std::string>()
                                      : std::string("(no text)")));
  }
}

SessionHarness::SessionHarness(SessionOptions options)
    : session(std::make_unique<Session>(io, handler, std::move(options),
                                        [this](Outgoing out) { sent.push_back(std::move(out)); })) {
}

void SessionHarness::Send(const json& message) { SendText(JsonText(message)); }

void SessionHarness::SendText(const std::string& frame, bool too_large) {
  session->Receive(frame, too_large);
}

json SessionHarness::Initialize(json capabilities, const std::string& version) {
  Send({{"jsonrpc", "2.0"},
        {"id", 0},
        {"method", "initialize"},
        {"params",
         {{"protocolVersion", version},
          {"capabilities", std::move(capabilities)},
          {"clientInfo", {{"name", "test-client"}, {"version", "1.2.3"}}}}}});
  Send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  auto out = Take();
  EXPECT_EQ(out.size(), 1U);
  return out.empty() ? json() : out.front().message;
}

void SessionHarness::Call(const json& id, const std::string& tool, json arguments,
                          json progress_token) {
  json params{{"name", tool}, {"arguments", std::move(arguments)}};
  if (!progress_token.is_null()) {
    params["_meta"] = {{"progressToken", std::move(progress_token)}};
  }
  Send({{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"}, {"params", std::move(params)}});
}

void SessionHarness::Poll() {
  io.restart();
  io.poll();
}

std::vector<Outgoing> SessionHarness::Take() { return std::exchange(sent, {}); }

Outgoing SessionHarness::TakeOne() {
  auto out = Take();
  EXPECT_EQ(out.size(), 1U) << "messages sent: " << out.size();
  if (out.empty()) {
    return {};
  }
  return out.front();
}

}  // namespace cagent::launcher::mcp::testing
