// OpenAI chat completions: request bodies built from a ModelRequest (the allow-list), and real
// response bodies (the shapes api.openai.com and compatible servers return) parsed into neutral
// turns. Ported from the agent's former adapter tests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "launcher/model/openai_provider.h"

namespace cagent::launcher::model {
namespace {

using nlohmann::json;
using protocol::ChatMessage;
using protocol::Role;
using protocol::StopReason;
using protocol::ToolCall;
using ::testing::HasSubstr;

constexpr const char* kDisplay = "the OpenAI-compatible provider at test";

json Tools() {
  return json::parse(R"([{"name": "read_file", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}])");
}

ModelSpec Spec(bool stream = false) {
  ModelSpec spec;
  spec.provider = "openai";
  spec.model = "gpt-test";
  spec.stream = stream;
  return spec;
}

ChatMessage User(std::string text) { return {Role::kUser, std::move(text), {}, "", false}; }
ChatMessage Assistant(std::string text, std::vector<ToolCall> calls) {
  return {Role::kAssistant, std::move(text), std::move(calls), "", false};
}
ChatMessage ToolResult(std::string id, std::string text, bool is_error) {
  return {Role::kTool, std::move(text), {}, std::move(id), is_error};
}

json Build(const ModelRequest& request, const ModelSpec& spec = Spec()) {
  auto body = BuildOpenAiBody(spec, request);
  EXPECT_TRUE(body.ok()) << body.error().Message();
  return body.ok() ? *body : json();
}

// The turn, or a test failure and an empty turn.
ModelResponse Parse(const json& body) {
  CallIdSource ids;
  AttemptOutcome out = ParseOpenAiResponse(kDisplay, body, ids);
  if (auto* err = std::get_if<AttemptError>(&out)) {
    ADD_FAILURE() << err->message;
    return {};
  }
  return std::get<ModelResponse>(out);
}

// The error message, or a test failure.
std::string ParseError(const json& body) {
  CallIdSource ids;
  AttemptOutcome out = ParseOpenAiResponse(kDisplay, body, ids);
  if (auto* err = std::get_if<AttemptError>(&out)) return err->message;
  ADD_FAILURE() << "expected an error for " << body.dump();
  return {};
}

TEST(OpenAiBody, BuildsTextOnlyRequest) {
  ModelRequest r;
  r.system = "You are a coding agent.";
  r.messages = {User("Fix calc.py")};
  r.tools = Tools();
  r.max_tokens = 1234;
  const json body = Build(r);
  EXPECT_EQ(body["model"], "gpt-test");
  EXPECT_EQ(body["max_tokens"], 1234);
  EXPECT_FALSE(body.contains("max_completion_tokens"));
  EXPECT_FALSE(body.contains("stream"));
  ASSERT_EQ(body["messages"].size(), 2U);
  EXPECT_EQ(body["messages"][0],
            (json{{"role", "system"}, {"content", "You are a coding agent."}}));
  EXPECT_EQ(body["messages"][1], (json{{"role", "user"}, {"content", "Fix calc.py"}}));
  ASSERT_EQ(body["tools"].size(), 1U);
  EXPECT_EQ(body["tools"][0]["type"], "function");
  EXPECT_EQ(body["tools"][0]["function"]["name"], "read_file");
  EXPECT_EQ(body["tools"][0]["function"]["description"], "Read a file");
  EXPECT_EQ(body["tools"][0]["function"]["parameters"]["required"], json::array({"path"}));
}

TEST(OpenAiBody, NoToolsMeansNoToolsFieldAndNoSystemMeansNoSystemMessage) {
  ModelRequest r;
  r.messages = {User("hi")};
  r.max_tokens = 1;
  const json body = Build(r);
  EXPECT_FALSE(body.contains("tools"));
  ASSERT_EQ(body["messages"].size(), 1U);
  EXPECT_EQ(body["messages"][0]["role"], "user");
}

TEST(OpenAiBody, StreamAndTemperatureOnlyWhenTheSpecSaysSo) {
  ModelRequest r;
  r.messages = {User("hi")};
  r.max_tokens = 5;
  ModelSpec spec = Spec(/*stream=*/true);
  spec.temperature = 0.25;
  const json body = Build(r, spec);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"], (json{{"include_usage", true}}));
  EXPECT_EQ(body["temperature"], 0.25);
  EXPECT_FALSE(Build(r).contains("temperature"));
}

TEST(OpenAiBody, AReasoningModelGetsMaxCompletionTokensItsEffortAndNoTemperature) {
  ModelRequest r;
  r.messages = {User("hi")};
  r.max_tokens = 500;
  ModelSpec spec = Spec();
  spec.family = ModelFamily::kOpenAiReasoning;
  spec.temperature = 0.3;  // ApplyModelConfig refuses this pair; the body never carries it
  json body = Build(r, spec);
  EXPECT_EQ(body["max_completion_tokens"], 500);
  EXPECT_FALSE(body.contains("max_tokens"));
  EXPECT_FALSE(body.contains("reasoning_effort"));
  EXPECT_FALSE(body.contains("temperature"));
  spec.reasoning_effort = "minimal";
  EXPECT_EQ(Build(r, spec)["reasoning_effort"], "minimal");
  // A chat model: max_tokens, and an effort is never sent.
  ModelSpec chat = Spec();
  chat.reasoning_effort = "high";
  body = Build(r, chat);
  EXPECT_EQ(body["max_tokens"], 500);
  EXPECT_FALSE(body.contains("max_completion_tokens"));
  EXPECT_FALSE(body.contains("reasoning_effort"));
}

TEST(OpenAiBody, CachedAndReasoningTokensAreTheParts) {
  const json body = {
      {"choices",
       {{{"message", {{"role", "assistant"}, {"content", "ok"}}}, {"finish_reason", "stop"}}}},
      {"usage",
       {{"prompt_tokens", 5000},
        {"completion_tokens", 900},
        {"prompt_tokens_details", {{"cached_tokens", 4096}}},
        {"completion_tokens_details", {{"reasoning_tokens", 640}}}}}};
  const ModelResponse r = Parse(body);
  EXPECT_EQ(r.usage.input_tokens, 5000U);
  EXPECT_EQ(r.usage.cache_read_tokens, 4096U);
  EXPECT_EQ(r.usage.output_tokens, 900U);
  EXPECT_EQ(r.usage.reasoning_tokens, 640U);
  EXPECT_EQ(r.usage.cache_write_tokens, 0U);
}

TEST(OpenAiBody, ToolCallsAndResultsRoundTrip) {
  ModelRequest r;
  r.system = "sys";
  r.messages = {User("task"),
                Assistant("", {ToolCall{"call_a", "read_file", {{"path", "calc.py"}}, ""},
                               ToolCall{"call_b", "run_command", {{"command", "ls"}}, ""}}),
                ToolResult("call_a", "def add(a, b):\n", false),
                ToolResult("call_b", "error [timeout]: ...", true), Assistant("Done.", {})};
  r.max_tokens = 100;
  const json messages = Build(r)["messages"];
  ASSERT_EQ(messages.size(), 6U);
  const json& assistant = messages[2];
  EXPECT_EQ(assistant["role"], "assistant");
  EXPECT_TRUE(assistant["content"].is_null());  // tool calls without text
  ASSERT_EQ(assistant["tool_calls"].size(), 2U);
  EXPECT_EQ(assistant["tool_calls"][0]["id"], "call_a");
  EXPECT_EQ(assistant["tool_calls"][0]["type"], "function");
  EXPECT_EQ(assistant["tool_calls"][0]["function"]["name"], "read_file");
  // Arguments travel as a JSON string.
  ASSERT_TRUE(assistant["tool_calls"][0]["function"]["arguments"].is_string());
  EXPECT_EQ(json::parse(assistant["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            (json{{"path", "calc.py"}}));
  EXPECT_EQ(messages[3],
            (json{{"role", "tool"}, {"tool_call_id", "call_a"}, {"content", "def add(a, b):\n"}}));
  EXPECT_EQ(messages[4]["tool_call_id"], "call_b");
  EXPECT_EQ(messages[5], (json{{"role", "assistant"}, {"content", "Done."}}));

  // What the model answered parses back into the same calls.
  const json response = {
      {"choices", {{{"index", 0}, {"message", assistant}, {"finish_reason", "tool_calls"}}}}};
  const ModelResponse turn = Parse(response);
  ASSERT_EQ(turn.turn.tool_calls.size(), 2U);
  EXPECT_EQ(turn.turn.tool_calls[1].id, "call_b");
  EXPECT_EQ(turn.turn.tool_calls[1].arguments, (json{{"command", "ls"}}));
}

// A text answer as api.openai.com returns it.
TEST(OpenAiBody, ParsesTextOnlyResponse) {
  const json body = json::parse(R"({
    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "object": "chat.completion",
    "created": 1741569952,
    "model": "gpt-4.1-2025-04-14",
    "choices": [{
      "index": 0,
      "message": {"role": "assistant", "content": "The bug is fixed.", "refusal": null,
                  "annotations": []},
      "logprobs": null,
      "finish_reason": "stop"
    }],
    "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29,
              "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0}},
    "service_tier": "default"
  })");
  const ModelResponse r = Parse(body);
  EXPECT_EQ(r.turn.text, "The bug is fixed.");
  EXPECT_TRUE(r.turn.tool_calls.empty());
  EXPECT_EQ(r.turn.stop_reason, StopReason::kEnd);
  EXPECT_EQ(r.provider_stop_reason, "stop");
  EXPECT_EQ(r.usage.input_tokens, 19U);
  EXPECT_EQ(r.usage.output_tokens, 10U);
  EXPECT_EQ(r.raw, body);
}

TEST(OpenAiBody, ParsesSeveralToolCalls) {
  const json body = json::parse(R"({
    "id": "chatcmpl-abc123", "object": "chat.completion", "model": "gpt-4o",
    "choices": [{
      "index": 0,
      "message": {
        "role": "assistant", "content": null,
        "tool_calls": [
          {"id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "type": "function",
           "function": {"name": "read_file", "arguments": "{\"path\":\"calc.py\"}"}},
          {"id": "call_ABCD", "type": "function",
           "function": {"name": "run_command", "arguments": "{\"command\": \"python3 -m unittest -q\"}"}}
        ]
      },
      "finish_reason": "tool_calls"
    }],
    "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99}
  })");
  const ModelResponse r = Parse(body);
  EXPECT_EQ(r.turn.text, "");
  ASSERT_EQ(r.turn.tool_calls.size(), 2U);
  EXPECT_EQ(r.turn.tool_calls[0].id, "call_DdmO9pD3xa9XTPNJ32zg2hcA");
  EXPECT_EQ(r.turn.tool_calls[0].name, "read_file");
  EXPECT_EQ(r.turn.tool_calls[0].arguments, (json{{"path", "calc.py"}}));
  EXPECT_TRUE(r.turn.tool_calls[0].arguments_error.empty());
  EXPECT_EQ(r.turn.tool_calls[1].arguments["command"], "python3 -m unittest -q");
  EXPECT_EQ(r.turn.stop_reason, StopReason::kToolCalls);
}

TEST(OpenAiBody, InvalidArgumentsBecomeACallErrorNotAFailure) {
  const json body = json::parse(R"({
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
      "content": "Let me look.",
      "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"calc.py\""}},
        {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "[1, 2]"}},
        {"id": "call_3", "type": "function", "function": {"name": "list_dir", "arguments": ""}},
        {"id": "call_4", "type": "function", "function": {"arguments": "{}"}},
        {"id": "call_5", "type": "function"},
        "not a call"
      ]}}]
  })");
  const ModelResponse r = Parse(body);
  const auto& calls = r.turn.tool_calls;
  ASSERT_EQ(calls.size(), 6U);
  EXPECT_EQ(r.turn.text, "Let me look.");
  EXPECT_THAT(calls[0].arguments_error, HasSubstr("not valid JSON"));
  EXPECT_THAT(calls[0].arguments_error, HasSubstr("{\"path\": \"calc.py\""));
  EXPECT_EQ(calls[0].arguments, json::object());
  EXPECT_THAT(calls[1].arguments_error, HasSubstr("must be a JSON object"));
  EXPECT_EQ(calls[1].arguments, json::object());
  // An empty string is "no arguments", which some servers send for parameterless calls.
  EXPECT_TRUE(calls[2].arguments_error.empty());
  EXPECT_EQ(calls[2].arguments, json::object());
  EXPECT_EQ(calls[3].arguments_error, "the tool call has no name");
  EXPECT_EQ(calls[3].name, "unnamed");
  EXPECT_EQ(calls[4].name, "unnamed");
  EXPECT_FALSE(calls[4].arguments_error.empty());
  EXPECT_EQ(calls[5].name, "unnamed");
  EXPECT_FALSE(calls[5].arguments_error.empty());
  EXPECT_FALSE(calls[5].id.empty());  // a generated one
}

TEST(OpenAiBody, ArgumentsAsObjectAreAccepted) {
  // Older Ollama versions send function.arguments as an object, and no id.
  const json body = json::parse(R"({"choices": [{"message": {"role": "assistant", "content": "",
    "tool_calls": [{"function": {"name": "glob", "arguments": {"pattern": "*.py"}}}]},
    "finish_reason": "stop"}]})");
  const ModelResponse r = Parse(body);
  ASSERT_EQ(r.turn.tool_calls.size(), 1U);
  EXPECT_EQ(r.turn.tool_calls[0].id, "call_1");  // generated by the broker, not the agent
  EXPECT_EQ(r.turn.tool_calls[0].arguments, (json{{"pattern", "*.py"}}));
  // A turn with calls is a tool_calls turn whatever the server said.
  EXPECT_EQ(r.turn.stop_reason, StopReason::kToolCalls);
  EXPECT_EQ(r.provider_stop_reason, "stop");
}

TEST(OpenAiBody, MissingUsageIsZero) {
  const ModelResponse r = Parse(json::parse(
      R"({"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]})"));
  EXPECT_EQ(r.usage.input_tokens, 0U);
  EXPECT_EQ(r.usage.output_tokens, 0U);
}

TEST(OpenAiBody, LengthFinishIsMaxTokens) {
  const ModelResponse r = Parse(json::parse(
      R"({"choices": [{"message": {"role": "assistant", "content": "I will now wri"}, "finish_reason": "length"}]})"));
  EXPECT_EQ(r.turn.stop_reason, StopReason::kMaxTokens);
}

TEST(OpenAiBody, EveryFinishReasonMapsToANeutralWord) {
  EXPECT_EQ(OpenAiStopReason("stop"), StopReason::kEnd);
  EXPECT_EQ(OpenAiStopReason("tool_calls"), StopReason::kToolCalls);
  EXPECT_EQ(OpenAiStopReason("function_call"), StopReason::kToolCalls);
  EXPECT_EQ(OpenAiStopReason("length"), StopReason::kMaxTokens);
  EXPECT_EQ(OpenAiStopReason("content_filter"), StopReason::kRefused);
  EXPECT_EQ(OpenAiStopReason(""), StopReason::kOther);
  EXPECT_EQ(OpenAiStopReason("eos"), StopReason::kOther);
  // Through the parser, with the provider's word kept.
  const ModelResponse r = Parse(json::parse(
      R"({"choices": [{"message": {"content": ""}, "finish_reason": "content_filter"}]})"));
  EXPECT_EQ(r.turn.stop_reason, StopReason::kRefused);
  EXPECT_EQ(r.provider_stop_reason, "content_filter");
}

TEST(OpenAiBody, ContentPartsAreJoined) {
  const ModelResponse r =
      Parse(json::parse(R"({"choices": [{"message": {"role": "assistant", "content":
    [{"type": "text", "text": "a"}, {"type": "refusal", "refusal": "x"}, {"type": "text", "text": "b"}]},
    "finish_reason": "stop"}]})"));
  EXPECT_EQ(r.turn.text, "ab");
}

TEST(OpenAiBody, ErrorsAreClearFailures) {
  EXPECT_THAT(ParseError(json::parse(R"({"error": {"message": "Incorrect API key provided",
      "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}})")),
              HasSubstr("Incorrect API key provided"));
  EXPECT_THAT(ParseError(json::array()), HasSubstr("not a JSON object"));
  EXPECT_THAT(ParseError(json::parse(R"({"choices": []})")), HasSubstr("choices[0].message"));
  EXPECT_THAT(ParseError(json::parse(R"({"choices": [{"message": "hi"}]})")),
              HasSubstr("choices[0].message"));
  EXPECT_THAT(ParseError(json::parse(R"({"choices": [{"message": {"content": 7}}]})")),
              HasSubstr("content"));
  EXPECT_THAT(ParseError(json::parse(R"({"choices": [{"message": {"tool_calls": {}}}]})")),
              HasSubstr("tool_calls is not a list"));
}

}  // namespace
}  // namespace cagent::launcher::model
