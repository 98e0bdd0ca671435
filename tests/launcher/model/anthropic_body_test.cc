// Anthropic messages: request shape built from a ModelRequest (top-level system, strict
// alternation, tool_result blocks of one turn in one user message, before any text) and real
// response bodies parsed into neutral turns. Ported from the agent's former adapter tests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "launcher/model/anthropic_provider.h"

namespace cagent::launcher::model {
namespace {

using nlohmann::json;
using protocol::ChatMessage;
using protocol::Role;
using protocol::StopReason;
using protocol::ToolCall;
using ::testing::HasSubstr;

constexpr const char* kDisplay = "the Anthropic provider at test";

ModelSpec Spec(bool stream = false) {
  ModelSpec spec;
  spec.provider = "anthropic";
  spec.model = "claude-test";
  spec.stream = stream;
  spec.prompt_caching = false;  // the shape without breakpoints; CacheBreakpoints* add them
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
  auto body = BuildAnthropicBody(spec, request);
  EXPECT_TRUE(body.ok()) << body.error().Message();
  return body.ok() ? *body : json();
}

ModelResponse Parse(const json& body) {
  CallIdSource ids;
  AttemptOutcome out = ParseAnthropicResponse(kDisplay, body, ids);
  if (auto* err = std::get_if<AttemptError>(&out)) {
    ADD_FAILURE() << err->message;
    return {};
  }
  return std::get<ModelResponse>(out);
}

std::string ParseError(const json& body) {
  CallIdSource ids;
  AttemptOutcome out = ParseAnthropicResponse(kDisplay, body, ids);
  if (auto* err = std::get_if<AttemptError>(&out)) return err->message;
  ADD_FAILURE() << "expected an error for " << body.dump();
  return {};
}

TEST(AnthropicBody, BuildsTextOnlyRequest) {
  ModelRequest r;
  r.system = "You are a coding agent.";
  r.messages = {User("Fix calc.py")};
  r.tools = json::array({{{"name", "read_file"},
                          {"description", "Read a file"},
                          {"parameters", {{"type", "object"}}}}});
  r.max_tokens = 2048;
  const json body = Build(r);
  EXPECT_EQ(body["model"], "claude-test");
  EXPECT_EQ(body["system"], "You are a coding agent.");
  EXPECT_EQ(body["max_tokens"], 2048);
  EXPECT_FALSE(body.contains("stream"));
  ASSERT_EQ(body["messages"].size(), 1U);
  EXPECT_EQ(body["messages"][0],
            (json{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Fix calc.py"}}}}}));
  ASSERT_EQ(body["tools"].size(), 1U);
  EXPECT_EQ(body["tools"][0], (json{{"name", "read_file"},
                                    {"description", "Read a file"},
                                    {"input_schema", {{"type", "object"}}}}));
}

TEST(AnthropicBody, EmptySystemAndNoToolsAreOmittedStreamAndTemperatureFromTheSpec) {
  ModelRequest r;
  r.messages = {User("hi")};
  r.max_tokens = 3;
  const json plain = Build(r);
  EXPECT_FALSE(plain.contains("system"));
  EXPECT_FALSE(plain.contains("tools"));
  EXPECT_FALSE(plain.contains("temperature"));
  ModelSpec spec = Spec(/*stream=*/true);
  spec.temperature = 1.5;
  const json streamed = Build(r, spec);
  EXPECT_EQ(streamed["stream"], true);
  EXPECT_EQ(streamed["temperature"], 1.5);
}

TEST(AnthropicBody, ResultsOfOneTurnGoInOneUserMessage) {
  ModelRequest r;
  r.system = "sys";
  r.messages = {
      User("task"),
      Assistant("Reading both.", {ToolCall{"toolu_1", "read_file", {{"path", "a.py"}}, ""},
                                  ToolCall{"toolu_2", "read_file", {{"path", "b.py"}}, ""}}),
      ToolResult("toolu_1", "A", false),
      ToolResult("toolu_2", "error [not_found]: b.py", true),
      User("[compaction summary]"),
      Assistant("", {})};
  r.max_tokens = 10;
  const json messages = Build(r)["messages"];
  ASSERT_EQ(messages.size(), 4U);
  EXPECT_EQ(messages[0]["role"], "user");
  EXPECT_EQ(messages[1]["role"], "assistant");
  ASSERT_EQ(messages[1]["content"].size(), 3U);
  EXPECT_EQ(messages[1]["content"][0], (json{{"type", "text"}, {"text", "Reading both."}}));
  EXPECT_EQ(messages[1]["content"][1], (json{{"type", "tool_use"},
                                             {"id", "toolu_1"},
                                             {"name", "read_file"},
                                             {"input", {{"path", "a.py"}}}}));
  // Both results, then the following user text, in ONE user message, results first.
  EXPECT_EQ(messages[2]["role"], "user");
  ASSERT_EQ(messages[2]["content"].size(), 3U);
  EXPECT_EQ(messages[2]["content"][0],
            (json{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "A"}}));
  EXPECT_EQ(messages[2]["content"][1], (json{{"type", "tool_result"},
                                             {"tool_use_id", "toolu_2"},
                                             {"content", "error [not_found]: b.py"},
                                             {"is_error", true}}));
  EXPECT_EQ(messages[2]["content"][2]["type"], "text");
  // An empty answer keeps the alternation with a non-empty block.
  EXPECT_EQ(messages[3]["role"], "assistant");
  EXPECT_EQ(messages[3]["content"], (json{{{"type", "text"}, {"text", "(empty response)"}}}));
}

TEST(AnthropicBody, ResultsGoBeforeTextEvenWhenTheTextCameFirst) {
  ModelRequest r;
  r.messages = {User("task"), Assistant("", {ToolCall{"t1", "list_dir", json::object(), ""}}),
                User("a nudge"), ToolResult("t1", "", false), User("")};
  r.max_tokens = 10;
  const json messages = Build(r)["messages"];
  ASSERT_EQ(messages.size(), 3U);
  const json& user = messages[2]["content"];
  ASSERT_EQ(user.size(), 2U);  // the empty user text is skipped
  EXPECT_EQ(user[0],
            (json{{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", "(no output)"}}));
  EXPECT_EQ(user[1], (json{{"type", "text"}, {"text", "a nudge"}}));
}

TEST(AnthropicBody, CacheBreakpointsMarkToolsSystemAndTheLastTwoUserMessages) {
  ModelRequest r;
  r.system = "sys";
  r.tools = json::array({{{"name", "a"}, {"parameters", {{"type", "object"}}}},
                         {{"name", "b"}, {"parameters", {{"type", "object"}}}}});
  r.max_tokens = 100;
  ToolCall c1{"t1", "a", json::object(), ""};
  ToolCall c2{"t2", "b", json::object(), ""};
  r.messages = {User("task"), Assistant("", {c1}), ToolResult("t1", "one", false),
                Assistant("x", {c2}), ToolResult("t2", "two", false)};
  ModelSpec spec = Spec();
  spec.prompt_caching = true;
  const json body = Build(r, spec);
  const json mark = {{"type", "ephemeral"}};
  EXPECT_EQ(body["system"],
            json::array({{{"type", "text"}, {"text", "sys"}, {"cache_control", mark}}}));
  EXPECT_FALSE(body["tools"][0].contains("cache_control"));
  EXPECT_EQ(body["tools"][1]["cache_control"], mark);
  const json& m = body["messages"];
  ASSERT_EQ(m.size(), 5U);
  EXPECT_FALSE(m[0]["content"].back().contains("cache_control"));  // the task: 3 user messages back
  EXPECT_EQ(m[2]["content"].back()["cache_control"], mark);
  EXPECT_EQ(m[4]["content"].back()["cache_control"], mark);
  std::size_t marks = 0;
  for (const json& msg : m) {
    for (const json& b : msg["content"]) marks += b.contains("cache_control") ? 1 : 0;
  }
  EXPECT_EQ(marks + 2, kAnthropicMaxBreakpoints);
  // The marks do not change the content: without them the body is the same otherwise.
  json stripped = body;
  stripped["system"] = "sys";
  stripped["tools"][1].erase("cache_control");
  for (json& msg : stripped["messages"]) {
    for (json& b : msg["content"]) b.erase("cache_control");
  }
  EXPECT_EQ(stripped, Build(r));
}

TEST(AnthropicBody, TheThinkingBudgetFitsInsideEachCallsCap) {
  ModelSpec spec = Spec();
  spec.thinking_budget = 8192;
  EXPECT_EQ(AnthropicThinkingBudget(spec, 16000), 8192U);
  EXPECT_EQ(AnthropicThinkingBudget(spec, 4096), 3072U);  // 1024 left for the answer
  EXPECT_EQ(AnthropicThinkingBudget(spec, 2048), 1024U);
  EXPECT_EQ(AnthropicThinkingBudget(spec, 2047), 0U);  // no room for the API's minimum
  spec.thinking_budget = 0;
  EXPECT_EQ(AnthropicThinkingBudget(spec, 16000), 0U);

  ModelRequest r;
  r.messages = {User("task")};
  r.max_tokens = 4096;
  spec.thinking_budget = 8192;
  spec.temperature = 0.5;
  json body = Build(r, spec);
  EXPECT_EQ(body["thinking"], (json{{"type", "enabled"}, {"budget_tokens", 3072}}));
  EXPECT_FALSE(body.contains("temperature"));  // the API takes none with thinking
  r.max_tokens = 1500;
  body = Build(r, spec);
  EXPECT_FALSE(body.contains("thinking"));
  EXPECT_EQ(body["temperature"], 0.5);
}

TEST(AnthropicBody, KeptThinkingGoesFirstInItsTurnAndOnlyThere) {
  ModelRequest r;
  r.max_tokens = 4096;
  ToolCall c1{"toolu_1", "a", json::object(), ""};
  ToolCall c2{"toolu_2", "a", json::object(), ""};
  r.messages = {User("task"), Assistant("looking", {c1}), ToolResult("toolu_1", "out", false),
                Assistant("", {c2}), ToolResult("toolu_2", "out", false)};
  ThinkingMemory memory;
  const json thought = {{"type", "thinking"}, {"thinking", "hmm"}, {"signature", "sig"}};
  const json hidden = {{"type", "redacted_thinking"}, {"data", "opaque"}};
  memory.Remember("toolu_1", json::array({thought, {{"type", "text"}, {"text", "t"}}, hidden}));
  EXPECT_EQ(memory.size(), 1U);
  memory.Remember("", json::array({thought}));  // a turn without calls is not kept
  EXPECT_EQ(memory.size(), 1U);
  ModelSpec spec = Spec();
  spec.thinking_budget = 2048;
  auto body = BuildAnthropicBody(spec, r, &memory);
  ASSERT_TRUE(body.ok());
  const json& first = (*body)["messages"][1]["content"];
  ASSERT_EQ(first.size(), 4U);
  EXPECT_EQ(first[0], thought);
  EXPECT_EQ(first[1], hidden);
  EXPECT_EQ(first[2]["type"], "text");
  EXPECT_EQ(first[3]["type"], "tool_use");
  EXPECT_EQ((*body)["messages"][3]["content"][0]["type"], "tool_use");  // nothing kept for it
  // With thinking off for a call, no thinking block is sent.
  spec.thinking_budget = 0;
  body = BuildAnthropicBody(spec, r, &memory);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ((*body)["messages"][1]["content"][0]["type"], "text");
}

TEST(AnthropicBody, ThinkingMemoryKeepsOnlyTheRecentTurns) {
  ThinkingMemory memory;
  const json blocks = json::array({{{"type", "thinking"}, {"thinking", "t"}, {"signature", "s"}}});
  for (std::size_t i = 0; i < ThinkingMemory::kMaxTurns + 10; ++i) {
    memory.Remember("call_" + std::to_string(i), blocks);
  }
  EXPECT_EQ(memory.size(), ThinkingMemory::kMaxTurns);
  EXPECT_EQ(memory.Find("call_0"), nullptr);
  EXPECT_NE(memory.Find("call_" + std::to_string(ThinkingMemory::kMaxTurns + 9)), nullptr);
}

TEST(AnthropicBody, CacheCountsAreTheInputsParts) {
  const json body = {{"content", {{{"type", "text"}, {"text", "ok"}}}},
                     {"stop_reason", "end_turn"},
                     {"usage",
                      {{"input_tokens", 10},
                       {"cache_creation_input_tokens", 200},
                       {"cache_read_input_tokens", 3000},
                       {"output_tokens", 5}}}};
  const ModelResponse r = Parse(body);
  EXPECT_EQ(r.usage.input_tokens, 3210U);
  EXPECT_EQ(r.usage.cache_read_tokens, 3000U);
  EXPECT_EQ(r.usage.cache_write_tokens, 200U);
  EXPECT_EQ(r.usage.output_tokens, 5U);
}

TEST(AnthropicBody, ParsesTextAndToolUse) {
  // As api.anthropic.com returns it.
  const json body = json::parse(R"({
    "id": "msg_01Aq9w938a90dw8q", "type": "message", "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
      {"type": "text", "text": "I'll read the file first."},
      {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "read_file",
       "input": {"path": "calc.py"}},
      {"type": "tool_use", "id": "toolu_02", "name": "grep", "input": {"pattern": "def add"}}
    ],
    "stop_reason": "tool_use", "stop_sequence": null,
    "usage": {"input_tokens": 2095, "output_tokens": 503, "cache_creation_input_tokens": 7,
              "cache_read_input_tokens": 100}
  })");
  const ModelResponse r = Parse(body);
  EXPECT_EQ(r.turn.text, "I'll read the file first.");
  ASSERT_EQ(r.turn.tool_calls.size(), 2U);
  EXPECT_EQ(r.turn.tool_calls[0].id, "toolu_01A09q90qw90lq917835lq9");
  EXPECT_EQ(r.turn.tool_calls[0].name, "read_file");
  EXPECT_EQ(r.turn.tool_calls[0].arguments, (json{{"path", "calc.py"}}));
  EXPECT_EQ(r.turn.tool_calls[1].arguments, (json{{"pattern", "def add"}}));
  EXPECT_EQ(r.turn.stop_reason, StopReason::kToolCalls);
  EXPECT_EQ(r.provider_stop_reason, "tool_use");
  EXPECT_EQ(r.usage.input_tokens, 2095U + 7U + 100U);  // cached input counts
  EXPECT_EQ(r.usage.output_tokens, 503U);
  EXPECT_EQ(r.raw, body);
}

TEST(AnthropicBody, ParsesTextOnlyAndSkipsThinkingAndServerTools) {
  const ModelResponse r = Parse(json::parse(R"({"type": "message", "role": "assistant", "content": [
      {"type": "thinking", "thinking": "hmm", "signature": "x"},
      {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
      {"type": "text", "text": "All tests pass."}],
    "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 5}})"));
  EXPECT_EQ(r.turn.text, "All tests pass.");
  EXPECT_TRUE(r.turn.tool_calls.empty());
  EXPECT_EQ(r.turn.stop_reason, StopReason::kEnd);
}

TEST(AnthropicBody, InputThatIsNotAnObjectIsACallError) {
  const ModelResponse r = Parse(json::parse(R"({"type": "message", "content": [
      {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": "calc.py"},
      {"type": "tool_use", "id": "toolu_2", "input": {}},
      {"type": "tool_use", "id": "toolu_3", "name": "glob", "input": [1]},
      {"type": "tool_use", "id": "toolu_4", "name": "glob", "input": "{\"pattern\": \"*\"}"}],
    "stop_reason": "tool_use"})"));
  ASSERT_EQ(r.turn.tool_calls.size(), 4U);
  EXPECT_THAT(r.turn.tool_calls[0].arguments_error, HasSubstr("not valid JSON: calc.py"));
  EXPECT_EQ(r.turn.tool_calls[0].arguments, json::object());
  EXPECT_EQ(r.turn.tool_calls[1].arguments_error, "the tool call has no name");
  EXPECT_EQ(r.turn.tool_calls[1].name, "unnamed");
  EXPECT_THAT(r.turn.tool_calls[2].arguments_error, HasSubstr("must be a JSON object"));
  // JSON text for an object is taken (some compatible servers send it so).
  EXPECT_TRUE(r.turn.tool_calls[3].arguments_error.empty());
  EXPECT_EQ(r.turn.tool_calls[3].arguments, (json{{"pattern", "*"}}));
}

TEST(AnthropicBody, MissingUsageAndMaxTokens) {
  const ModelResponse r = Parse(json::parse(
      R"({"type": "message", "content": [{"type": "text", "text": "partial"}], "stop_reason": "max_tokens"})"));
  EXPECT_EQ(r.usage.input_tokens, 0U);
  EXPECT_EQ(r.turn.stop_reason, StopReason::kMaxTokens);
}

TEST(AnthropicBody, EveryStopReasonMapsToANeutralWord) {
  EXPECT_EQ(AnthropicStopReason("end_turn"), StopReason::kEnd);
  EXPECT_EQ(AnthropicStopReason("stop_sequence"), StopReason::kEnd);
  EXPECT_EQ(AnthropicStopReason("tool_use"), StopReason::kToolCalls);
  EXPECT_EQ(AnthropicStopReason("max_tokens"), StopReason::kMaxTokens);
  EXPECT_EQ(AnthropicStopReason("refusal"), StopReason::kRefused);
  EXPECT_EQ(AnthropicStopReason("pause_turn"), StopReason::kOther);
  EXPECT_EQ(AnthropicStopReason(""), StopReason::kOther);
  const ModelResponse r =
      Parse(json::parse(R"({"type": "message", "content": [], "stop_reason": "refusal"})"));
  EXPECT_EQ(r.turn.stop_reason, StopReason::kRefused);
  EXPECT_EQ(r.provider_stop_reason, "refusal");
  // Calls with end_turn: still a tool_calls turn.
  const ModelResponse calls = Parse(json::parse(R"({"type": "message", "content": [
      {"type": "tool_use", "id": "t", "name": "glob", "input": {}}], "stop_reason": "end_turn"})"));
  EXPECT_EQ(calls.turn.stop_reason, StopReason::kToolCalls);
}

TEST(AnthropicBody, ErrorsAreClearFailures) {
  const std::string overloaded = ParseError(json::parse(
      R"({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})"));
  EXPECT_THAT(overloaded, HasSubstr("overloaded_error"));
  EXPECT_THAT(overloaded, HasSubstr("Overloaded"));
  EXPECT_THAT(ParseError(json::parse(R"({"error": {"message": "bad"}, "content": []})")),
              HasSubstr("bad"));
  EXPECT_THAT(ParseError(json::parse(R"({"type": "message"})")), HasSubstr("content list"));
  EXPECT_THAT(ParseError(json::parse(R"({"content": [1]})")),
              HasSubstr("a content block that is not an object"));
  EXPECT_THAT(ParseError(json("text")), HasSubstr("not a JSON object"));
}

}  // namespace
}  // namespace cagent::launcher::model
