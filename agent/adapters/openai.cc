#include "agent/adapters/openai.h"
#include "common/json_text.h"

#include <string>

namespace cagent::agent {
namespace {

using nlohmann::json;

std::string Dump(const json& value) {
  return JsonText(value);
}

// The provider's error object ({"error": {"message": ...}} or {"error": "text"}), if any.
std::string ErrorText(const json& body) {
  auto it = body.find("error");
  if (it == body.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto m = it->find("message");
    if (m != it->end() && m->is_string()) return m->get<std::string>();
  }
  return Dump(*it);
}

}  // namespace

json OpenAiAdapter::BuildRequest(const Conversation& conversation, const json& tools) const {
  json messages = json::array();
  for (const Message& m : conversation.messages()) {
    switch (m.role) {
      case Role::kSystem:
        messages.push_back({{"role", "system"}, {"content", m.text}});
        break;
      case Role::kUser:
        messages.push_back({{"role", "user"}, {"content", m.text}});
        break;
      case Role::kAssistant: {
        json out = {{"role", "assistant"}};
        // content may be null only when there are tool calls.
        if (m.text.empty() && !m.tool_calls.empty()) {
          out["content"] = nullptr;
        } else {
          out["content"] = m.text;
        }
        if (!m.tool_calls.empty()) {
          json calls = json::array();
          for (const ToolCall& call : m.tool_calls) {
            calls.push_back(
                {{"id", call.id},
                 {"type", "function"},
                 {"function", {{"name", call.name}, {"arguments", Dump(call.arguments)}}}});
          }
          out["tool_calls"] = std::move(calls);
        }
        messages.push_back(std::move(out));
        break;
      }
      case Role::kTool:
        messages.push_back(
            {{"role", "tool"}, {"tool_call_id", m.result.call_id}, {"content", m.result.content}});
        break;
    }
  }
  json body = {{"messages", std::move(messages)}, {"max_tokens", options_.max_output_tokens}};
  if (tools.is_array() && !tools.empty()) {
    json list = json::array();
    for (const json& tool : tools) {
      list.push_back({{"type", "function"},
                      {"function",
                       {{"name", tool.value("name", "")},
                        {"description", tool.value("description", "")},
                        {"parameters", tool.value("parameters", json::object())}}}});
    }
    body["tools"] = std::move(list);
  }
  return body;
}

Result<AssistantTurn> OpenAiAdapter::Parse(const json& body) const {
  if (!body.is_object()) return PlainError("openai response", "the body is not a JSON object");
  if (std::string error = ErrorText(body); !error.empty()) {
    return PlainError("openai response", "the provider returned an error: " + error);
  }
  auto choices = body.find("choices");
  if (choices == body.end() || !choices->is_array() || choices->empty()) {
    return PlainError("openai response", "no \"choices\" in the response");
  }
  const json& choice = (*choices)[0];
  if (!choice.is_object()) return PlainError("openai response", "choices[0] is not an object");
  auto message = choice.find("message");
  if (message == choice.end() || !message->is_object()) {
    return PlainError("openai response", "choices[0].message is missing or not an object");
  }

  AssistantTurn turn;
  if (auto content = message->find("content"); content != message->end()) {
    if (content->is_string()) {
      turn.text = content->get<std::string>();
    } else if (content->is_array()) {
      for (const json& part : *content) {
        if (part.is_object() && part.value("type", "") == "text") {
          auto text = part.find("text");
          if (text != part.end() && text->is_string()) turn.text += text->get<std::string>();
        }
      }
    } else if (!content->is_null()) {
      return PlainError("openai response", "choices[0].message.content must be a string or null");
    }
  }

  if (auto calls = message->find("tool_calls"); calls != message->end() && !calls->is_null()) {
    if (!calls->is_array()) {
      return PlainError("openai response", "choices[0].message.tool_calls is not an array");
    }
    for (const json& item : *calls) {
      ToolCall call;
      if (!item.is_object()) {
        call.arguments_error = "the tool call is not an object";
        turn.tool_calls.push_back(std::move(call));
        continue;
      }
      if (auto id = item.find("id"); id != item.end() && id->is_string()) {
        call.id = id->get<std::string>();
      }
      auto function = item.find("function");
      if (function == item.end() || !function->is_object()) {
        call.arguments_error = "the tool call has no \"function\" object";
        turn.tool_calls.push_back(std::move(call));
        continue;
      }
      if (auto name = function->find("name"); name != function->end() && name->is_string()) {
        call.name = name->get<std::string>();
      }
      auto arguments = function->find("arguments");
      if (arguments == function->end() || arguments->is_null()) {
        call.arguments = json::object();
      } else if (arguments->is_string()) {
        SetArgumentsFromString(call, arguments->get_ref<const std::string&>());
      } else {
        // Some compatible servers (older Ollama) send the arguments as an object.
        SetArgumentsFromJson(call, *arguments);
      }
      if (call.name.empty() && call.arguments_error.empty()) {
        call.arguments_error = "the tool call has no function name";
      }
      turn.tool_calls.push_back(std::move(call));
    }
  }

  if (auto reason = choice.find("finish_reason"); reason != choice.end() && reason->is_string()) {
    turn.stop_reason = reason->get<std::string>();
  }
  turn.truncated = turn.stop_reason == "length";

  if (auto usage = body.find("usage"); usage != body.end() && usage->is_object()) {
    auto prompt = usage->find("prompt_tokens");
    auto completion = usage->find("completion_tokens");
    if (prompt != usage->end() && prompt->is_number_unsigned()) {
      turn.usage.input_tokens = prompt->get<std::uint64_t>();
      turn.usage_reported = true;
    }
    if (completion != usage->end() && completion->is_number_unsigned()) {
      turn.usage.output_tokens = completion->get<std::uint64_t>();
      turn.usage_reported = true;
    }
  }
  return turn;
}

}  // namespace cagent::agent
