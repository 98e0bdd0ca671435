#include "launcher/model/turn_rules.h"

#include <algorithm>
#include <set>
#include <vector>

#include "common/json_text.h"

namespace cagent::launcher::model {
namespace {

using nlohmann::json;
using protocol::kMaxIdBytes;

// How much of unusable arguments an arguments_error quotes.
constexpr std::size_t kQuoteBytes = 200;

std::string Excerpt(std::string_view text) {
  if (text.size() <= kQuoteBytes) return std::string(text);
  return CutUtf8Bytes(text, kQuoteBytes) + "...";
}

std::string TooDeep() {
  return "the arguments nest deeper than " + std::to_string(kMaxArgumentsDepth) + " levels";
}

// Whether `value` nests deeper than `limit` levels (an object or array is one). Recurses at most
// limit + 1 times: the values it sees were parsed within kMaxAnswerDepth.
bool Deeper(const json& value, std::size_t limit) {
  if (!value.is_structured()) {
    return false;
  }
  if (limit == 0) {
    return true;
  }
  return std::any_of(value.begin(), value.end(),
                     [&](const json& child) { return Deeper(child, limit - 1); });
}

}  // namespace

std::string CutUtf8Bytes(std::string_view text, std::size_t max) {
  if (text.size() <= max) return std::string(text);
  std::size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(text.substr(0, end));
}

void SetArgumentsFromText(protocol::ToolCall& call, std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    call.arguments = json::object();
    return;
  }
  bool too_deep = false;
  json parsed = ParseJsonWithin(text, kMaxArgumentsDepth, &too_deep);
  if (too_deep) {
    call.arguments = json::object();
    call.arguments_error = TooDeep();
    return;
  }
  if (parsed.is_discarded()) {
    call.arguments = json::object();
    call.arguments_error = "the arguments are not valid JSON: " + Excerpt(text);
    return;
  }
  SetArgumentsFromJson(call, parsed);
}

void SetArgumentsFromJson(protocol::ToolCall& call, const json& value) {
  if (Deeper(value, kMaxArgumentsDepth)) {
    call.arguments = json::object();
    call.arguments_error = TooDeep();
    return;
  }
  if (value.is_object()) {
    call.arguments = value;
    return;
  }
  call.arguments = json::object();
  if (value.is_null()) return;
  call.arguments_error = "the arguments must be a JSON object, got: " + Excerpt(JsonText(value));
}

Status FinishTurn(protocol::AssistantTurn& turn, CallIdSource& ids, const std::string& display) {
  auto& calls = turn.tool_calls;
  if (calls.size() > protocol::kMaxToolCallsPerTurn) {
    return PlainError(display + " answered with " + std::to_string(calls.size()) + " tool calls",
                      "at most " + std::to_string(protocol::kMaxToolCallsPerTurn) +
                          " are accepted in one turn; the turn was not given to the agent");
  }
  // Names. A call without a usable name cannot be matched to a tool; it stays in the turn (so the
  // model hears back about it) but carries an error and no arguments, and is never executed.
  for (protocol::ToolCall& call : calls) {
    if (call.name.empty()) {
      call.name = "unnamed";
      call.arguments = json::object();
      call.arguments_error = "the tool call has no name";
    } else if (call.name.size() > kMaxIdBytes) {
      const std::size_t bytes = call.name.size();
      call.name = CutUtf8Bytes(call.name, kMaxIdBytes);
      call.arguments = json::object();
      call.arguments_error = "the tool name is " + std::to_string(bytes) + " bytes long (at most " +
                             std::to_string(kMaxIdBytes) + ")";
    }
    if (!call.arguments.is_object()) call.arguments = json::object();
  }
  // Ids. First keep every provider id that is usable and seen for the first time, then give the
  // others generated ids that collide with none of the kept ones, so that each id the agent may
  // name in a tool_request identifies exactly one call of this turn.
  std::vector<bool> keep(calls.size(), false);
  std::set<std::string> kept;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const std::string& id = calls[i].id;
    if (id.empty() || id.size() > kMaxIdBytes) continue;
    keep[i] = kept.insert(id).second;
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (keep[i]) continue;
    std::string id = ids.Next();
    while (kept.count(id) != 0) id = ids.Next();
    kept.insert(id);
    calls[i].id = std::move(id);
  }
  if (!calls.empty() && turn.stop_reason == protocol::StopReason::kEnd) {
    turn.stop_reason = protocol::StopReason::kToolCalls;
  }
  return Ok{};
}

}  // namespace cagent::launcher::model
