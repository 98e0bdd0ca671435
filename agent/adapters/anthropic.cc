#include "agent/adapters/anthropic.h"

#include <string>

namespace cagent::agent {
namespace {

using nlohmann::json;

// Appends `blocks` as a message of `role`, merging with the previous message when it has the same
// role (the API requires strict alternation).
void Append(json& messages, const char* role, json blocks) {
  if (blocks.empty()) return;
  if (!messages.empty() && messages.back()["role"] == role) {
    json& content = messages.back()["content"];
    for (json& block : blocks) content.push_back(std::move(block));
    return;
  }
  messages.push_back({{"role", role}, {"content", std::move(blocks)}});
}

json TextBlock(const std::string& text) { return {{"type", "text"}, {"text", text}}; }

}  // namespace

json AnthropicAdapter::BuildRequest(const Conversation& conversation, const json& tools) const {
  std::string system;
  json messages = json::array();
  for (const Message& m : conversation.messages()) {
    switch (m.role) {
      case Role::kSystem:
        if (!system.empty()) system += "\n\n";
        system += m.text;
        break;
      case Role::kUser:
        // Empty text blocks are rejected by the API.
        if (!m.text.empty()) Append(messages, "user", json::array({TextBlock(m.text)}));
        break;
      case Role::kAssistant: {
        json blocks = json::array();
        if (!m.text.empty()) blocks.push_back(TextBlock(m.text));
        for (const ToolCall& call : m.tool_calls) {
          blocks.push_back({{"type", "tool_use"},
                            {"id", call.id},
                            {"name", call.name},
                            {"input", call.arguments}});
        }
        // An empty answer still has to keep the alternation.
        if (blocks.empty()) blocks.push_back(TextBlock("(empty response)"));
        Append(messages, "assistant", std::move(blocks));
        break;
      }
      case Role::kTool: {
        json block = {
            {"type", "tool_result"},
            {"tool_use_id", m.result.call_id},
            {"content", m.result.content.empty() ? std::string("(no output)") : m.result.content}};
        if (m.result.is_error) block["is_error"] = true;
        // tool_result blocks go before any text in a user message: a result always directly
        // follows its assistant message, so merging keeps them first.
        Append(messages, "user", json::array({std::move(block)}));
        break;
      }
    }
  }
  json body = {{"messages", std::move(messages)}, {"max_tokens", options_.max_output_tokens}};
  if (!system.empty()) body["system"] = std::move(system);
  if (tools.is_array() && !tools.empty()) {
    json list = json::array();
    for (const json& tool : tools) {
      list.push_back({{"name", tool.value("name", "")},
                      {"description", tool.value("description", "")},
                      {"input_schema", tool.value("parameters", json::object())}});
    }
    body["tools"] = std::move(list);
  }
  return body;
}

Result<AssistantTurn> AnthropicAdapter::Parse(const json& body) const {
  if (!body.is_object()) return PlainError("anthropic response", "the body is not a JSON object");
  if (body.value("type", "") == "error" || body.contains("error")) {
    std::string text = "unknown error";
    if (auto error = body.find("error"); error != body.end() && error->is_object()) {
      text = error->value("type", "error") + ": " + error->value("message", "");
    }
    return PlainError("anthropic response", "the provider returned an error: " + text);
  }
  auto content = body.find("content");
  if (content == body.end() || !content->is_array()) {
    return PlainError("anthropic response", "no \"content\" array in the response");
  }
  AssistantTurn turn;
  for (const json& block : *content) {
    if (!block.is_object())
      return PlainError("anthropic response", "a content block is not an object");
    const std::string type = block.value("type", "");
    if (type == "text") {
      auto text = block.find("text");
      if (text != block.end() && text->is_string()) turn.text += text->get<std::string>();
    } else if (type == "tool_use") {
      ToolCall call;
      if (auto id = block.find("id"); id != block.end() && id->is_string()) {
        call.id = id->get<std::string>();
      }
      if (auto name = block.find("name"); name != block.end() && name->is_string()) {
        call.name = name->get<std::string>();
      }
      auto input = block.find("input");
      if (input == block.end() || input->is_null()) {
        call.arguments = json::object();
      } else {
        SetArgumentsFromJson(call, *input);
      }
      if (call.name.empty() && call.arguments_error.empty()) {
        call.arguments_error = "the tool_use block has no name";
      }
      turn.tool_calls.push_back(std::move(call));
    }
    // thinking, redacted_thinking, server tool blocks: not used by this agent; skipped.
  }
  if (auto reason = body.find("stop_reason"); reason != body.end() && reason->is_string()) {
    turn.stop_reason = reason->get<std::string>();
  }
  turn.truncated = turn.stop_reason == "max_tokens";
  if (auto usage = body.find("usage"); usage != body.end() && usage->is_object()) {
    auto in = usage->find("input_tokens");
    auto out = usage->find("output_tokens");
    if (in != usage->end() && in->is_number_unsigned()) {
      turn.usage.input_tokens = in->get<std::uint64_t>();
      turn.usage_reported = true;
    }
    if (out != usage->end() && out->is_number_unsigned()) {
      turn.usage.output_tokens = out->get<std::uint64_t>();
      turn.usage_reported = true;
    }
  }
  return turn;
}

}  // namespace cagent::agent
