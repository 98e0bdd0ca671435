#include "agent/adapters/replay.h"

namespace cagent::agent {

using nlohmann::json;

json ReplayAdapter::BuildRequest(const Conversation& conversation, const json& /*tools*/) const {
  return {{"turn", conversation.assistant_turns() + 1}};
}

Result<AssistantTurn> ReplayAdapter::Parse(const json& body) const {
  if (!body.is_object()) return PlainError("replay turn", "the turn is not a JSON object");
  auto text = body.find("text");
  auto calls = body.find("tool_calls");
  const bool has_text = text != body.end() && !text->is_null();
  const bool has_calls = calls != body.end() && !calls->is_null();
  if (!has_text && !has_calls) {
    return PlainError("replay turn", "the turn has neither \"text\" nor \"tool_calls\"");
  }
  AssistantTurn turn;
  if (has_text) {
    if (!text->is_string()) return PlainError("replay turn", "\"text\" must be a string");
    turn.text = text->get<std::string>();
  }
  if (has_calls) {
    if (!calls->is_array()) return PlainError("replay turn", "\"tool_calls\" must be an array");
    for (const json& item : *calls) {
      if (!item.is_object()) return PlainError("replay turn", "a tool call is not an object");
      ToolCall call;
      auto id = item.find("id");
      auto name = item.find("name");
      if (id != item.end() && id->is_string()) call.id = id->get<std::string>();
      if (name == item.end() || !name->is_string()) {
        return PlainError("replay turn", "a tool call has no \"name\" string");
      }
      call.name = name->get<std::string>();
      auto arguments = item.find("arguments");
      if (arguments == item.end() || arguments->is_null()) {
        call.arguments = json::object();
      } else if (arguments->is_string()) {
        SetArgumentsFromString(call, arguments->get_ref<const std::string&>());
      } else {
        SetArgumentsFromJson(call, *arguments);
      }
      turn.tool_calls.push_back(std::move(call));
    }
  }
  turn.stop_reason = turn.tool_calls.empty() ? "end_turn" : "tool_use";
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
