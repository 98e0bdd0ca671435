#include "launcher/model/openai_provider.h"

#include <map>
#include <optional>

#include "common/json_text.h"
#include "launcher/model/turn_rules.h"

namespace cagent::launcher::model {
namespace {

using nlohmann::json;
using protocol::ErrorCode;

AttemptError Malformed(const std::string& display, const std::string& what) {
  return AttemptError{ErrorCode::kProviderError, display + " sent " + what, false, std::nullopt};
}

std::string StringValue(const json& object, const char* key) {
  if (!object.is_object()) return {};
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

std::string ErrorMessageOf(const json& error) {
  if (error.is_object()) {
    if (auto m = error.find("message"); m != error.end() && m->is_string()) {
      return ProviderErrorText(JsonText(json{{"error", {{"message", *m}}}}));
    }
  }
  if (error.is_string()) return ProviderErrorText(JsonText(json{{"error", error}}));
  return {};
}

class OpenAiAssembler final : public StreamAssembler {
 public:
  OpenAiAssembler(std::string display, std::string model)
      : display_(std::move(display)), model_(std::move(model)) {}

  std::optional<AttemptError> OnEvent(const SseEvent& event) override {
    if (done_) return std::nullopt;  // nothing is expected after [DONE]
    if (event.data == "[DONE]") {
      done_ = true;
      return std::nullopt;
    }
    auto chunk = ParseJsonWithin(event.data, kMaxAnswerDepth);
    if (chunk.is_discarded() || !chunk.is_object()) {
      return Malformed(display_, "a stream chunk that is not a JSON object");
    }
    if (auto err = chunk.find("error"); err != chunk.end() && !err->is_null()) {
      const std::string text = ErrorMessageOf(*err);
      return AttemptError{
          ErrorCode::kProviderError,
          display_ + " reported an error in the stream" + (text.empty() ? "" : ": " + text), false,
          std::nullopt};
    }
    if (auto v = chunk.find("id"); id_.empty() && v != chunk.end() && v->is_string()) id_ = *v;
    if (auto v = chunk.find("model");
        !have_model_ && v != chunk.end() && v->is_string() && !v->get<std::string>().empty()) {
      model_ = *v;
      have_model_ = true;
    }
    if (auto v = chunk.find("created"); !created_ && v != chunk.end() && v->is_number_integer()) {
      created_ = v->get<std::int64_t>();
    }
    if (auto v = chunk.find("usage"); v != chunk.end() && v->is_object()) usage_ = *v;
    const auto choices = chunk.find("choices");
    if (choices == chunk.end() || choices->is_null()) return std::nullopt;
    if (!choices->is_array()) {
      return Malformed(display_, "a stream chunk whose choices is not a list");
    }
    for (const json& choice : *choices) {
      if (!choice.is_object()) return Malformed(display_, "a stream chunk with a malformed choice");
      if (auto idx = choice.find("index");
          idx != choice.end() && idx->is_number_integer() && idx->get<std::int64_t>() != 0) {
        continue;  // only one choice is asked for
      }
      if (auto fr = choice.find("finish_reason"); fr != choice.end() && fr->is_string()) {
        finish_reason_ = *fr;
      }
      const auto delta = choice.find("delta");
      if (delta == choice.end() || delta->is_null()) continue;
      if (!delta->is_object()) {
        return Malformed(display_, "a stream chunk whose delta is not an object");
      }
      if (auto c = delta->find("content"); c != delta->end() && c->is_string()) {
        content_ += c->get<std::string>();
        have_content_ = true;
      }
      if (auto r = delta->find("refusal"); r != delta->end() && r->is_string()) {
        refusal_ += r->get<std::string>();
        have_refusal_ = true;
      }
      if (auto calls = delta->find("tool_calls"); calls != delta->end() && !calls->is_null()) {
        if (!calls->is_array()) return Malformed(display_, "tool_calls that are not a list");
        for (const json& call : *calls) {
          if (auto err = AddToolFragment(call)) return err;
        }
      }
    }
    return std::nullopt;
  }

  AssembleOutcome Finish() override {
    if (!done_ && !finish_reason_) {
      AttemptError err = Malformed(display_,
                                   "a stream that ended before it was complete (no "
                                   "finish_reason and no [DONE])");
      err.retryable = true;  // a dropped stream is worth another attempt
      return err;
    }
    json message = {{"role", "assistant"},
                    {"content", have_content_ ? json(content_) : json(nullptr)}};
    if (have_refusal_) message["refusal"] = refusal_;
    if (!tools_.empty()) {
      json calls = json::array();
      for (const auto& [index, t] : tools_) {
        calls.push_back({{"id", t.id},
                         {"type", t.type},
                         {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
      }
      message["tool_calls"] = std::move(calls);
    }
    const std::uint64_t prompt = JsonCount(usage_, "prompt_tokens");
    const std::uint64_t completion = JsonCount(usage_, "completion_tokens");
    std::uint64_t total = JsonCount(usage_, "total_tokens");
    if (total == 0) total = prompt + completion;
    json body = {{"id", id_.empty() ? std::string("chatcmpl-cagent") : id_},
                 {"object", "chat.completion"}};
    if (created_) body["created"] = *created_;
    body["model"] = model_;
    body["choices"] =
        json::array({{{"index", 0},
                      {"message", std::move(message)},
                      {"finish_reason", finish_reason_ ? json(*finish_reason_) : json(nullptr)}}});
    body["usage"] = {
        {"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", total}};
    // The parts (cached input, reasoning output) as the final chunk gave them.
    for (const char* details : {"prompt_tokens_details", "completion_tokens_details"}) {
      if (auto d = usage_.find(details); d != usage_.end() && d->is_object()) {
        body["usage"][details] = *d;
      }
    }
    return body;
  }

 private:
  struct ToolCall {
    std::string id;
    std::string type = "function";
    std::string name;
    std::string arguments;
  };

  // One element of delta.tool_calls. The id and name come once, the arguments in pieces; the
  // index says which call a piece belongs to. Servers that omit the index get one by id: a new
  // id starts a new call, a piece without an id continues the last one.
  std::optional<AttemptError> AddToolFragment(const json& call) {
    if (!call.is_object()) return Malformed(display_, "a tool-call fragment that is not an object");
    std::int64_t index = 0;
    const auto id = call.find("id");
    const bool has_id = id != call.end() && id->is_string() && !id->get<std::string>().empty();
    if (auto idx = call.find("index"); idx != call.end() && idx->is_number_integer()) {
      index = idx->get<std::int64_t>();
      if (index < 0 || index > 1024) return Malformed(display_, "a tool-call index out of range");
    } else if (has_id && (tools_.empty() || tools_.rbegin()->second.id != id->get<std::string>())) {
      index = tools_.empty() ? 0 : tools_.rbegin()->first + 1;
    } else {
      index = tools_.empty() ? 0 : tools_.rbegin()->first;
    }
    ToolCall& t = tools_[index];
    if (has_id) t.id = *id;
    if (auto type = call.find("type"); type != call.end() && type->is_string()) t.type = *type;
    if (auto fn = call.find("function"); fn != call.end() && fn->is_object()) {
      if (auto name = fn->find("name"); name != fn->end() && name->is_string()) {
        t.name += name->get<std::string>();
      }
      if (auto args = fn->find("arguments"); args != fn->end()) {
        if (args->is_string()) {
          t.arguments += args->get<std::string>();
        } else if (!args->is_null()) {
          t.arguments += args->dump();  // a server that sends the object itself
        }
      }
    }
    return std::nullopt;
  }

  std::string display_;
  std::string model_;
  bool have_model_ = false;
  std::string id_;
  std::optional<std::int64_t> created_;
  std::string content_;
  bool have_content_ = false;
  std::string refusal_;
  bool have_refusal_ = false;
  std::optional<std::string> finish_reason_;
  json usage_ = json::object();
  std::map<std::int64_t, ToolCall> tools_;
  bool done_ = false;
};

class OpenAiDialect final : public ProviderDialect {
 public:
  OpenAiDialect(ModelSpec spec, std::string key, std::string display)
      : spec_(std::move(spec)), key_(std::move(key)), display_(std::move(display)) {}

  [[nodiscard]] Result<std::string> BuildBody(const ModelRequest& request) const override {
    auto body = BuildOpenAiBody(spec_, request);
    if (!body.ok()) return body.error();
    return JsonText(*body);
  }

  [[nodiscard]] std::vector<std::pair<std::string, std::string>> Headers() const override {
    std::vector<std::pair<std::string, std::string>> h = {{"content-type", "application/json"}};
    if (!key_.empty()) h.emplace_back("authorization", "Bearer " + key_);
    return h;
  }

  [[nodiscard]] std::unique_ptr<StreamAssembler> NewAssembler() const override {
    return NewOpenAiStreamAssembler(display_, spec_.model);
  }

  [[nodiscard]] AttemptOutcome ParseWhole(json body) override {
    return ParseOpenAiResponse(display_, std::move(body), ids_);
  }

 private:
  ModelSpec spec_;
  std::string key_;
  std::string display_;
  CallIdSource ids_;
};

// One choices[0].message.tool_calls entry. Tolerant of compatible servers: a missing id (one is
// generated later), arguments as an object (older Ollama), no arguments at all.
protocol::ToolCall ReadToolCall(const json& item) {
  protocol::ToolCall call;
  if (!item.is_object()) {
    call.arguments_error = "the tool call is not an object";
    return call;
  }
  if (auto id = item.find("id"); id != item.end() && id->is_string()) call.id = *id;
  const auto function = item.find("function");
  if (function == item.end() || !function->is_object()) {
    call.arguments_error = "the tool call has no \"function\" object";
    return call;
  }
  if (auto name = function->find("name"); name != function->end() && name->is_string()) {
    call.name = *name;
  }
  const auto arguments = function->find("arguments");
  if (arguments == function->end()) return call;
  if (arguments->is_string()) {
    SetArgumentsFromText(call, arguments->get_ref<const std::string&>());
  } else {
    SetArgumentsFromJson(call, *arguments);
  }
  return call;
}

}  // namespace

std::unique_ptr<StreamAssembler> NewOpenAiStreamAssembler(std::string display, std::string model) {
  return std::make_unique<OpenAiAssembler>(std::move(display), std::move(model));
}

Result<json> BuildOpenAiBody(const ModelSpec& spec, const ModelRequest& request) {
  auto tools = CheckModelRequest(request);
  if (!tools.ok()) return tools.error();
  json messages = json::array();
  if (!request.system.empty()) {
    messages.push_back({{"role", "system"}, {"content", request.system}});
  }
  for (const protocol::ChatMessage& m : request.messages) {
    switch (m.role) {
      case protocol::Role::kUser:
        messages.push_back({{"role", "user"}, {"content", m.text}});
        break;
      case protocol::Role::kAssistant: {
        json out = {{"role", "assistant"}};
        // content may be null only when there are tool calls.
        out["content"] = m.text.empty() && !m.tool_calls.empty() ? json(nullptr) : json(m.text);
        if (!m.tool_calls.empty()) {
          json calls = json::array();
          for (const protocol::ToolCall& call : m.tool_calls) {
            const json& args = call.arguments.is_object() ? call.arguments : json::object();
            calls.push_back({{"id", call.id},
                             {"type", "function"},
                             {"function", {{"name", call.name}, {"arguments", JsonText(args)}}}});
          }
          out["tool_calls"] = std::move(calls);
        }
        messages.push_back(std::move(out));
        break;
      }
      case protocol::Role::kTool:
        messages.push_back({{"role", "tool"}, {"tool_call_id", m.call_id}, {"content", m.text}});
        break;
    }
  }
  const bool reasoning = spec.family == ModelFamily::kOpenAiReasoning;
  json body = {{"model", spec.model}, {"messages", std::move(messages)}};
  // Reasoning models refuse max_tokens: their cap counts the hidden reasoning too.
  body[reasoning ? "max_completion_tokens" : "max_tokens"] = request.max_tokens;
  if (reasoning && !spec.reasoning_effort.empty()) body["reasoning_effort"] = spec.reasoning_effort;
  if (!tools->empty()) {
    json list = json::array();
    for (ToolSchema& t : *tools) {
      list.push_back({{"type", "function"},
                      {"function",
                       {{"name", std::move(t.name)},
                        {"description", std::move(t.description)},
                        {"parameters", std::move(t.parameters)}}}});
    }
    body["tools"] = std::move(list);
  }
  if (spec.stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  if (spec.temperature && !reasoning) body["temperature"] = *spec.temperature;
  return body;
}

protocol::StopReason OpenAiStopReason(std::string_view finish_reason) {
  using protocol::StopReason;
  if (finish_reason == "stop") return StopReason::kEnd;
  if (finish_reason == "tool_calls" || finish_reason == "function_call") {
    return StopReason::kToolCalls;
  }
  if (finish_reason == "length") return StopReason::kMaxTokens;
  if (finish_reason == "content_filter") return StopReason::kRefused;
  return StopReason::kOther;
}

AttemptOutcome ParseOpenAiResponse(const std::string& display, json body, CallIdSource& ids) {
  if (!body.is_object()) return Malformed(display, "an answer that is not a JSON object");
  if (auto err = body.find("error"); err != body.end() && !err->is_null()) {
    const std::string text = ErrorMessageOf(*err);
    return AttemptError{ErrorCode::kProviderError,
                        display + " reported an error" + (text.empty() ? "" : ": " + text), false,
                        std::nullopt};
  }
  const auto choices = body.find("choices");
  if (choices == body.end() || !choices->is_array() || choices->empty() ||
      !(*choices)[0].is_object() || !(*choices)[0].contains("message") ||
      !(*choices)[0]["message"].is_object()) {
    return Malformed(display, "an answer without choices[0].message");
  }
  const json& choice = (*choices)[0];
  const json& message = choice["message"];
  ModelResponse out;
  protocol::AssistantTurn& turn = out.turn;
  if (auto content = message.find("content"); content != message.end()) {
    if (content->is_string()) {
      turn.text = content->get<std::string>();
    } else if (content->is_array()) {
      for (const json& part : *content) {
        if (!part.is_object() || StringValue(part, "type") != "text") continue;
        if (auto text = part.find("text"); text != part.end() && text->is_string()) {
          turn.text += text->get<std::string>();
        }
      }
    } else if (!content->is_null()) {
      return Malformed(display, "an answer whose choices[0].message.content is not a string");
    }
  }
  if (auto calls = message.find("tool_calls"); calls != message.end() && !calls->is_null()) {
    if (!calls->is_array()) {
      return Malformed(display, "an answer whose choices[0].message.tool_calls is not a list");
    }
    if (calls->size() > protocol::kMaxToolCallsPerTurn) {
      return Malformed(display, "an answer with " + std::to_string(calls->size()) +
                                    " tool calls (at most " +
                                    std::to_string(protocol::kMaxToolCallsPerTurn) +
                                    " are accepted in one turn)");
    }
    for (const json& item : *calls) turn.tool_calls.push_back(ReadToolCall(item));
  }
  out.provider_stop_reason = StringValue(choice, "finish_reason");
  turn.stop_reason = OpenAiStopReason(out.provider_stop_reason);
  if (Status st = FinishTurn(turn, ids, display); !st.ok()) {
    return Malformed(display, "an unusable turn: " + st.error().Message());
  }
  if (auto usage = body.find("usage"); usage != body.end()) {
    out.usage.input_tokens = JsonCount(*usage, "prompt_tokens");
    out.usage.output_tokens = JsonCount(*usage, "completion_tokens");
    // The parts: prompt_tokens counts cached input too, completion_tokens reasoning too.
    const auto part = [&](const char* details, const char* key) -> std::uint64_t {
      if (!usage->is_object()) return 0;
      const auto d = usage->find(details);
      return d == usage->end() ? 0 : JsonCount(*d, key);
    };
    out.usage.cache_read_tokens = part("prompt_tokens_details", "cached_tokens");
    out.usage.reasoning_tokens = part("completion_tokens_details", "reasoning_tokens");
  }
  out.raw = std::move(body);
  return out;
}

Result<std::unique_ptr<ModelProvider>> MakeOpenAiProvider(boost::asio::io_context& io,
                                                          const ModelSpec& spec,
                                                          const Environment& env) {
  HttpProviderKind kind{kOpenAiBaseVar,
                        kOpenAiDefaultBase,
                        kOpenAiKeyVar,
                        "/chat/completions",
                        "the OpenAI-compatible provider at ",
                        /*key_optional_on_loopback=*/true,
                        [](const ModelSpec& s, const std::string& key, const std::string& display) {
                          return std::make_shared<OpenAiDialect>(s, key, display);
                        }};
  return MakeHttpProvider(io, spec, env, kind);
}

}  // namespace cagent::launcher::model
