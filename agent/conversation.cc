#include "agent/conversation.h"

#include <utility>

#include "common/json_text.h"
#include "common/text.h"

namespace cagent::agent {
namespace {

constexpr std::uint64_t kPerMessageOverhead = 4;
constexpr std::uint64_t kPerCallOverhead = 8;

std::uint64_t Quarter(std::uint64_t bytes) { return (bytes + 3) / 4; }

// "Plan:", "## Plan", "**Plan:**", "plan" (any case).
bool IsPlanHeader(std::string_view line) {
  std::string_view s = TrimSpace(line);
  auto strip = [&s](std::string_view chars) {
    const std::size_t b = s.find_first_not_of(chars);
    s = b == std::string_view::npos ? std::string_view() : s.substr(b);
    const std::size_t e = s.find_last_not_of(chars);
    s = e == std::string_view::npos ? std::string_view() : s.substr(0, e + 1);
  };
  strip("#* \t");
  if (!s.empty() && s.back() == ':') s.remove_suffix(1);
  strip("* \t");
  if (s.size() != 4) return false;
  std::string lower;
  for (char c : s) lower.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
  return lower == "plan";
}

// "- x", "* x", "+ x", "12. x", "3) x" (after leading spaces).
bool IsListItem(std::string_view line) {
  std::string_view s = TrimSpace(line);
  if (s.size() >= 2 && (s[0] == '-' || s[0] == '*' || s[0] == '+') && s[1] == ' ') return true;
  std::size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  return digits > 0 && digits + 1 < s.size() && (s[digits] == '.' || s[digits] == ')') &&
         s[digits + 1] == ' ';
}

std::string Capped(std::string_view line) {
  if (line.size() <= kMaxPlanLineBytes) return std::string(line);
  std::size_t cut = kMaxPlanLineBytes;
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
  return std::string(line.substr(0, cut)) + "...";
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

}  // namespace

std::optional<std::string> ExtractPlan(std::string_view text) {
  const std::vector<std::string_view> lines = Lines(text);
  std::optional<std::string> plan;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!IsPlanHeader(lines[i])) continue;
    std::vector<std::string> items;
    std::size_t j = i + 1;
    // Blank lines before the first item.
    while (j < lines.size() && TrimSpace(lines[j]).empty()) ++j;
    for (; j < lines.size(); ++j) {
      const std::string_view line = lines[j];
      if (IsListItem(line)) {
        items.push_back(Capped(TrimSpace(line)));
      } else if (!items.empty() && !TrimSpace(line).empty() &&
                 (line[0] == ' ' || line[0] == '\t')) {
        items.push_back("  " + Capped(TrimSpace(line)));  // continues the item before it
      } else {
        break;
      }
    }
    if (items.empty()) continue;
    if (items.size() > kMaxPlanLines) {
      const std::size_t more = items.size() - kMaxPlanLines;
      items.resize(kMaxPlanLines);
      items.push_back("(" + std::to_string(more) + " more lines not kept)");
    }
    std::string joined;
    for (const std::string& item : items) {
      if (!joined.empty()) joined += '\n';
      joined += item;
    }
    plan = std::move(joined);
    i = j - 1;
  }
  return plan;
}

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
  ++assistant_turns_;
  if (std::optional<std::string> plan = ExtractPlan(m.text)) {
    plan_ = *std::move(plan);
    plan_turn_ = assistant_turns_;
  }
  messages_.push_back(std::move(m));
}

void Conversation::AddToolResult(ToolResultContent result, ToolResultInfo info) {
  Message m;
  m.role = Role::kTool;
  m.result = std::move(result);
  m.info = std::move(info);
  changed_files_.insert(m.info.changed_paths.begin(), m.info.changed_paths.end());
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
