// Anthropic messages adapter: request shape (top-level system, alternating messages, tool_result
// blocks of one turn in one user message) and real response bodies.
#include <gtest/gtest.h>

#include "agent/adapters/anthropic.h"

namespace cagent::agent {
namespace {

using nlohmann::json;

TEST(AnthropicAdapter, BuildsTextOnlyRequest) {
  Conversation c;
  c.AddSystem("You are a coding agent.");
  c.AddTask("Fix calc.py");
  const json tools = json::array({{{"name", "read_file"},
                                   {"description", "Read a file"},
                                   {"parameters", {{"type", "object"}}}}});
  const json body = AnthropicAdapter(AdapterOptions{2048}).BuildRequest(c, tools);
  EXPECT_EQ(body["system"], "You are a coding agent.");
  EXPECT_EQ(body["max_tokens"], 2048);
  EXPECT_FALSE(body.contains("model"));
  ASSERT_EQ(body["messages"].size(), 1U);
  EXPECT_EQ(body["messages"][0],
            (json{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Fix calc.py"}}}}}));
  ASSERT_EQ(body["tools"].size(), 1U);
  EXPECT_EQ(body["tools"][0], (json{{"name", "read_file"},
                                    {"description", "Read a file"},
                                    {"input_schema", {{"type", "object"}}}}));
}

TEST(AnthropicAdapter, ResultsOfOneTurnGoInOneUserMessage) {
  Conversation c;
  c.AddSystem("sys");
  c.AddTask("task");
  c.AddAssistant("Reading both.", {ToolCall{"toolu_1", "read_file", {{"path", "a.py"}}, ""},
                                   ToolCall{"toolu_2", "read_file", {{"path", "b.py"}}, ""}});
  c.AddToolResult({"toolu_1", "A", false}, {});
  c.AddToolResult({"toolu_2", "error [not_found]: b.py", true}, {});
  c.AddUser("[compaction summary]");
  c.AddAssistant("", {});
  const json messages =
      AnthropicAdapter(AdapterOptions{}).BuildRequest(c, json::array())["messages"];
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
  EXPECT_FALSE(messages[3]["content"][0]["text"].get<std::string>().empty());
}

TEST(AnthropicAdapter, ParsesTextAndToolUse) {
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
    "usage": {"input_tokens": 2095, "output_tokens": 503, "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 0}
  })");
  auto turn = AnthropicAdapter(AdapterOptions{}).Parse(body);
  ASSERT_TRUE(turn.ok()) << turn.error().Message();
  EXPECT_EQ(turn->text, "I'll read the file first.");
  ASSERT_EQ(turn->tool_calls.size(), 2U);
  EXPECT_EQ(turn->tool_calls[0].id, "toolu_01A09q90qw90lq917835lq9");
  EXPECT_EQ(turn->tool_calls[0].name, "read_file");
  EXPECT_EQ(turn->tool_calls[0].arguments, (json{{"path", "calc.py"}}));
  EXPECT_EQ(turn->tool_calls[1].arguments, (json{{"pattern", "def add"}}));
  EXPECT_EQ(turn->stop_reason, "tool_use");
  EXPECT_TRUE(turn->usage_reported);
  EXPECT_EQ(turn->usage.input_tokens, 2095U);
  EXPECT_EQ(turn->usage.output_tokens, 503U);
}

TEST(AnthropicAdapter, ParsesTextOnlyAndSkipsThinking) {
  const json body = json::parse(R"({"type": "message", "role": "assistant", "content": [
      {"type": "thinking", "thinking": "hmm", "signature": "x"},
      {"type": "text", "text": "All tests pass."}],
    "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 5}})");
  auto turn = AnthropicAdapter(AdapterOptions{}).Parse(body);
  ASSERT_TRUE(turn.ok());
  EXPECT_EQ(turn->text, "All tests pass.");
  EXPECT_TRUE(turn->tool_calls.empty());
  EXPECT_FALSE(turn->truncated);
}

TEST(AnthropicAdapter, InputThatIsNotAnObjectIsACallError) {
  const json body = json::parse(R"({"type": "message", "content": [
      {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": "calc.py"},
      {"type": "tool_use", "id": "toolu_2", "input": {}}],
    "stop_reason": "tool_use"})");
  auto turn = AnthropicAdapter(AdapterOptions{}).Parse(body);
  ASSERT_TRUE(turn.ok());
  ASSERT_EQ(turn->tool_calls.size(), 2U);
  EXPECT_NE(turn->tool_calls[0].arguments_error.find("must be a JSON object"), std::string::npos);
  EXPECT_EQ(turn->tool_calls[0].arguments, json::object());
  EXPECT_NE(turn->tool_calls[1].arguments_error.find("no name"), std::string::npos);
}

TEST(AnthropicAdapter, MissingUsageAndMaxTokens) {
  const json body = json::parse(
      R"({"type": "message", "content": [{"type": "text", "text": "partial"}], "stop_reason": "max_tokens"})");
  auto turn = AnthropicAdapter(AdapterOptions{}).Parse(body);
  ASSERT_TRUE(turn.ok());
  EXPECT_FALSE(turn->usage_reported);
  EXPECT_EQ(turn->usage.input_tokens, 0U);
  EXPECT_TRUE(turn->truncated);
}

TEST(AnthropicAdapter, ErrorsAreClearFailures) {
  AnthropicAdapter adapter(AdapterOptions{});
  auto error = adapter.Parse(json::parse(R"({"type": "error", "error": {"type": "overloaded_error",
      "message": "Overloaded"}})"));
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.error().Message().find("overloaded_error: Overloaded"), std::string::npos);
  EXPECT_FALSE(adapter.Parse(json::parse(R"({"type": "message"})")).ok());
  EXPECT_FALSE(adapter.Parse(json::parse(R"({"content": [1]})")).ok());
  EXPECT_FALSE(adapter.Parse(json("text")).ok());
}

}  // namespace
}  // namespace cagent::agent
