// OpenAI chat completions adapter: requests built from the conversation, and real response bodies
// (the shapes api.openai.com and compatible servers return) parsed into assistant turns.
#include <gtest/gtest.h>

#include "agent/adapters/openai.h"

namespace cagent::agent {
namespace {

using nlohmann::json;

json Tools() {
  return json::parse(R"([{"name": "read_file", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}])");
}

TEST(OpenAiAdapter, BuildsTextOnlyRequest) {
  Conversation c;
  c.AddSystem("You are a coding agent.");
  c.AddTask("Fix calc.py");
  OpenAiAdapter adapter(AdapterOptions{1234});
  const json body = adapter.BuildRequest(c, Tools());
  EXPECT_EQ(body["max_tokens"], 1234);
  EXPECT_FALSE(body.contains("max_completion_tokens"));
  EXPECT_FALSE(body.contains("model"));   // the broker sets it
  EXPECT_FALSE(body.contains("stream"));  // likewise
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

TEST(OpenAiAdapter, NoToolsMeansNoToolsField) {
  Conversation c;
  c.AddTask("hi");
  EXPECT_FALSE(OpenAiAdapter(AdapterOptions{1}).BuildRequest(c, json::array()).contains("tools"));
}

TEST(OpenAiAdapter, ToolCallsAndResultsRoundTrip) {
  Conversation c;
  c.AddSystem("sys");
  c.AddTask("task");
  c.AddAssistant("", {ToolCall{"call_a", "read_file", {{"path", "calc.py"}}, ""},
                      ToolCall{"call_b", "run_command", {{"command", "ls"}}, ""}});
  c.AddToolResult({"call_a", "def add(a, b):\n", false}, {});
  c.AddToolResult({"call_b", "error [timeout]: ...", true}, {});
  c.AddAssistant("Done.", {});
  OpenAiAdapter adapter(AdapterOptions{100});
  const json messages = adapter.BuildRequest(c, json::array())["messages"];
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
  auto turn = adapter.Parse(response);
  ASSERT_TRUE(turn.ok()) << turn.error().Message();
  ASSERT_EQ(turn->tool_calls.size(), 2U);
  EXPECT_EQ(turn->tool_calls[1].id, "call_b");
  EXPECT_EQ(turn->tool_calls[1].arguments, (json{{"command", "ls"}}));
}

// A text answer as api.openai.com returns it.
TEST(OpenAiAdapter, ParsesTextOnlyResponse) {
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
  auto turn = OpenAiAdapter(AdapterOptions{}).Parse(body);
  ASSERT_TRUE(turn.ok()) << turn.error().Message();
  EXPECT_EQ(turn->text, "The bug is fixed.");
  EXPECT_TRUE(turn->tool_calls.empty());
  EXPECT_EQ(turn->stop_reason, "stop");
  EXPECT_FALSE(turn->truncated);
  EXPECT_TRUE(turn->usage_reported);
  EXPECT_EQ(turn->usage.input_tokens, 19U);
  EXPECT_EQ(turn->usage.output_tokens, 10U);
}

TEST(OpenAiAdapter, ParsesSeveralToolCalls) {
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
  auto turn = OpenAiAdapter(AdapterOptions{}).Parse(body);
  ASSERT_TRUE(turn.ok()) << turn.error().Message();
  EXPECT_EQ(turn->text, "");
  ASSERT_EQ(turn->tool_calls.size(), 2U);
  EXPECT_EQ(turn->tool_calls[0].id, "call_DdmO9pD3xa9XTPNJ32zg2hcA");
  EXPECT_EQ(turn->tool_calls[0].name, "read_file");
  EXPECT_EQ(turn->tool_calls[0].arguments, (json{{"path", "calc.py"}}));
  EXPECT_TRUE(turn->tool_calls[0].arguments_error.empty());
  EXPECT_EQ(turn->tool_calls[1].arguments["command"], "python3 -m unittest -q");
  EXPECT_EQ(turn->stop_reason, "tool_calls");
}

TEST(OpenAiAdapter, InvalidArgumentsBecomeACallErrorNotAFailure) {
  const json body = json::parse(R"({
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
      "content": "Let me look.",
      "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"calc.py\""}},
        {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "[1, 2]"}},
        {"id": "call_3", "type": "function", "function": {"name": "list_dir", "arguments": ""}},
        {"id": "call_4", "type": "function", "function": {"arguments": "{}"}}
      ]}}]
  })");
  auto turn = OpenAiAdapter(AdapterOptions{}).Parse(body);
  ASSERT_TRUE(turn.ok()) << turn.error().Message();
  ASSERT_EQ(turn->tool_calls.size(), 4U);
  EXPECT_EQ(turn->text, "Let me look.");
  EXPECT_NE(turn->tool_calls[0].arguments_error.find("not valid JSON"), std::string::npos)
      << turn->tool_calls[0].arguments_error;
  EXPECT_NE(turn->tool_calls[0].arguments_error.find("{\"path\": \"calc.py\""), std::string::npos);
  EXPECT_EQ(turn->tool_calls[0].arguments, json::object());
  EXPECT_NE(turn->tool_calls[1].arguments_error.find("must be a JSON object"), std::string::npos);
  // An empty string is "no arguments", which some servers send for parameterless calls.
  EXPECT_TRUE(turn->tool_calls[2].arguments_error.empty());
  EXPECT_EQ(turn->tool_calls[2].arguments, json::object());
  EXPECT_NE(turn->tool_calls[3].arguments_error.find("no function name"), std::string::npos);
}

TEST(OpenAiAdapter, ArgumentsAsObjectAreAccepted) {
  // Older Ollama versions send function.arguments as an object.
  const json body = json::parse(R"({"choices": [{"message": {"role": "assistant", "content": "",
    "tool_calls": [{"function": {"name": "glob", "arguments": {"pattern": "*.py"}}}]},
    "finish_reason": "stop"}]})");
  auto turn = OpenAiAdapter(AdapterOptions{}).Parse(body);
  ASSERT_TRUE(turn.ok()) << turn.error().Message();
  ASSERT_EQ(turn->tool_calls.size(), 1U);
  EXPECT_EQ(turn->tool_calls[0].id, "");  // the loop assigns one
  EXPECT_EQ(turn->tool_calls[0].arguments, (json{{"pattern", "*.py"}}));
}

TEST(OpenAiAdapter, MissingUsageIsZeroAndNotReported) {
  const json body = json::parse(
      R"({"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]})");
  auto turn = OpenAiAdapter(AdapterOptions{}).Parse(body);
  ASSERT_TRUE(turn.ok());
  EXPECT_FALSE(turn->usage_reported);
  EXPECT_EQ(turn->usage.input_tokens, 0U);
  EXPECT_EQ(turn->usage.output_tokens, 0U);
}

TEST(OpenAiAdapter, LengthFinishIsTruncated) {
  const json body = json::parse(
      R"({"choices": [{"message": {"role": "assistant", "content": "I will now wri"}, "finish_reason": "length"}]})");
  auto turn = OpenAiAdapter(AdapterOptions{}).Parse(body);
  ASSERT_TRUE(turn.ok());
  EXPECT_TRUE(turn->truncated);
}

TEST(OpenAiAdapter, ContentPartsAreJoined) {
  const json body = json::parse(R"({"choices": [{"message": {"role": "assistant", "content":
    [{"type": "text", "text": "a"}, {"type": "refusal", "refusal": "x"}, {"type": "text", "text": "b"}]},
    "finish_reason": "stop"}]})");
  auto turn = OpenAiAdapter(AdapterOptions{}).Parse(body);
  ASSERT_TRUE(turn.ok());
  EXPECT_EQ(turn->text, "ab");
}

TEST(OpenAiAdapter, ErrorsAreClearFailures) {
  OpenAiAdapter adapter(AdapterOptions{});
  auto error = adapter.Parse(json::parse(R"({"error": {"message": "Incorrect API key provided",
      "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}})"));
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.error().Message().find("Incorrect API key provided"), std::string::npos);

  EXPECT_FALSE(adapter.Parse(json::array()).ok());
  EXPECT_FALSE(adapter.Parse(json::parse(R"({"choices": []})")).ok());
  EXPECT_FALSE(adapter.Parse(json::parse(R"({"choices": [{"message": "hi"}]})")).ok());
  auto bad_content = adapter.Parse(json::parse(R"({"choices": [{"message": {"content": 7}}]})"));
  ASSERT_FALSE(bad_content.ok());
  EXPECT_NE(bad_content.error().Message().find("content"), std::string::npos);
  EXPECT_FALSE(
      adapter.Parse(json::parse(R"({"choices": [{"message": {"tool_calls": {}}}]})")).ok());
}

}  // namespace
}  // namespace cagent::agent
