#include "agent/conversation.h"

#include <utility>

#include "common/json_text.h"

namespace cagent::agent {
namespace {

constexpr std::uint64_t kPerMessageOverhead = 4;
constexpr std::uint64_t kPerCallOverhead = 8;

std::uint64_t Quarter(std::uint64_t bytes) { return (bytes + 3) / 4; }

}  // namespace

std::uint64_t EstimateTokens(const Message& message) {
  std::uint64_t bytes =
      message.text.size() + message.result.content.size() + message.result.call_id.size();
  std::uint64_t tokens = kPerMessageOverhead;
  for (const ToolCall& call : message.tool_calls) {
    bytes += call.id.size() + call.name.size() + JsonText(call.arguments).size();
    tokens += kPerCallOverhead;
  }
  return tokens + Quarter(bytes);
}

void Conversation::AddSystem(std::string text) {
  Message m;
  m.role = Role::kSystem;
  m.text = std::move(text);
  m.pinned = true;
  messages_.push_back(std::move(m));
}

void Conversation::AddTask(std::string text) {
  Message m;
  m.role = Role::kUser;
  m.text = std::move(text);
  m.pinned = true;
  messages_.push_back(std::move(m));
}

void Conversation::AddUser(std::string text) {
  Message m;
  m.role = Role::kUser;
  m.text = std::move(text);
  messages_.push_back(std::move(m));
}

void Conversation::AddAssistant(std::string text, std::vector<ToolCall> calls) {
  Message m;
  m.role = Role::kAssistant;
  m.text = std::move(text);
  m.tool_calls = std::move(calls);
  messages_.push_back(std::move(m));
  ++assistant_turns_;
}

void Conversation::AddToolResult(ToolResultContent result, ToolResultInfo info) {
  Message m;
  m.role = Role::kTool;
  m.result = std::move(result);
  m.info = std::move(info);
  messages_.push_back(std::move(m));
}

std::uint64_t Conversation::EstimateTokens() const {
  std::uint64_t total = 0;
  for (const Message& m : messages_) total += agent::EstimateTokens(m);
  return total;
}

protocol::ModelCall ToModelCall(const Conversation& conversation) {
  protocol::ModelCall out;
  for (const Message& m : conversation.messages()) {
    protocol::ChatMessage message;
    switch (m.role) {
      case Role::kSystem:
        if (!out.system.empty()) out.system += "\n\n";
        out.system += m.text;
        continue;
      case Role::kUser:
        message.role = protocol::Role::kUser;
        message.text = m.text;
        break;
      case Role::kAssistant:
        message.role = protocol::Role::kAssistant;
        message.text = m.text;
        message.tool_calls = m.tool_calls;
        break;
      case Role::kTool:
        message.role = protocol::Role::kTool;
        message.text = m.result.content;
        message.call_id = m.result.call_id;
        message.is_error = m.result.is_error;
        break;
    }
    out.messages.push_back(std::move(message));
  }
  return out;
}

}  // namespace cagent::agent
