#include "launcher/model/anthropic_provider.h"

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

std::string StringField(const json& object, const char* key) {
  if (!object.is_object()) return {};
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

protocol::Usage UsageOf(const json& usage) {
  protocol::Usage u;
  u.input_tokens = JsonCount(usage, "input_tokens") +
                   JsonCount(usage, "cache_creation_input_tokens") +
                   JsonCount(usage, "cache_read_input_tokens");
  u.output_tokens = JsonCount(usage, "output_tokens");
  u.cache_read_tokens = JsonCount(usage, "cache_read_input_tokens");
  u.cache_write_tokens = JsonCount(usage, "cache_creation_input_tokens");
  return u;
}

class AnthropicAssembler final : public StreamAssembler {
 public:
  AnthropicAssembler(std::string display, std::string model)
      : display_(std::move(display)), model_(std::move(model)) {}

  std::optional<AttemptError> OnEvent(const SseEvent& event) override {
    if (stopped_) return std::nullopt;
    auto data = ParseJsonWithin(event.data, kMaxAnswerDepth);
    if (data.is_discarded() || !data.is_object()) {
      return Malformed(display_, "a stream event that is not a JSON object");
    }
    std::string type = StringField(data, "type");
    if (type.empty()) type = event.event;
    if (type == "ping") return std::nullopt;
    if (type == "error") {
      const json& err = data.contains("error") ? data["error"] : data;
      const std::string kind = StringField(err, "type");
      const std::string text =
          ProviderErrorText(JsonText(json{{"error", {{"message", StringField(err, "message")}}}}));
      return AttemptError{ErrorCode::kProviderError,
                          display_ + " reported an error in the stream" +
                              (kind.empty() ? "" : " (" + kind + ")") +
                              (text.empty() ? "" : ": " + text),
                          kind == "overloaded_error" || kind == "api_error", std::nullopt};
    }
    if (type == "message_start") {
      const auto msg = data.find("message");
      if (msg == data.end() || !msg->is_object()) {
        return Malformed(display_, "a message_start event without a message");
      }
      id_ = StringField(*msg, "id");
      if (auto m = StringField(*msg, "model"); !m.empty()) model_ = m;
      if (auto u = msg->find("usage"); u != msg->end() && u->is_object()) MergeUsage(*u);
      return std::nullopt;
    }
    if (type == "content_block_start") {
      const auto index = Index(data);
      const auto block = data.find("content_block");
      if (!index || block == data.end() || !block->is_object() ||
          StringField(*block, "type").empty()) {
        return Malformed(display_, "a content_block_start event without an index and a block");
      }
      Block& b = blocks_[*index];
      b.block = *block;
      b.started = true;
      return std::nullopt;
    }
    if (type == "content_block_delta") {
      const auto index = Index(data);
      const auto delta = data.find("delta");
      if (!index || delta == data.end() || !delta->is_object()) {
        return Malformed(display_, "a content_block_delta event without an index and a delta");
      }
      const auto it = blocks_.find(*index);
      if (it == blocks_.end() || !it->second.started || it->second.stopped) {
        return Malformed(display_, "a delta for content block " + std::to_string(*index) +
                                       ", which is not open");
      }
      return ApplyDelta(it->second, *delta);
    }
    if (type == "content_block_stop") {
      const auto index = Index(data);
      if (!index) return Malformed(display_, "a content_block_stop event without an index");
      const auto it = blocks_.find(*index);
      if (it == blocks_.end() || !it->second.started) {
        return Malformed(display_, "a stop for content block " + std::to_string(*index) +
                                       ", which was never started");
      }
      return Close(*index, it->second);
    }
    if (type == "message_delta") {
      if (auto d = data.find("delta"); d != data.end() && d->is_object()) {
        if (auto sr = d->find("stop_reason"); sr != d->end() && sr->is_string()) {
          stop_reason_ = sr->get<std::string>();
        }
        if (auto ss = d->find("stop_sequence"); ss != d->end()) stop_sequence_ = *ss;
      }
      if (auto u = data.find("usage"); u != data.end() && u->is_object()) MergeUsage(*u);
      return std::nullopt;
    }
    if (type == "message_stop") {
      stopped_ = true;
      return std::nullopt;
    }
    return std::nullopt;  // event types added later are ignored, as Anthropic asks
  }

  AssembleOutcome Finish() override {
    if (!stopped_ && !stop_reason_) {
      AttemptError err = Malformed(display_,
                                   "a stream that ended before it was complete (no "
                                   "message_stop)");
      err.retryable = true;
      return err;
    }
    json content = json::array();
    for (auto& [index, b] : blocks_) {
      if (!b.started) continue;
      if (!b.stopped) {
        if (auto err = Close(index, b)) return *err;
      }
      content.push_back(b.block);
    }
    json usage = usage_;
    if (!usage.contains("input_tokens")) usage["input_tokens"] = 0;
    if (!usage.contains("output_tokens")) usage["output_tokens"] = 0;
    return json{{"id", id_.empty() ? std::string("msg_cagent") : id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model_},
                {"content", std::move(content)},
                {"stop_reason", stop_reason_ ? json(*stop_reason_) : json(nullptr)},
                {"stop_sequence", stop_sequence_},
                {"usage", std::move(usage)}};
  }

 private:
  struct Block {
    json block;
    std::string partial_json;
    bool started = false;
    bool stopped = false;
  };

  static std::optional<std::int64_t> Index(const json& data) {
    const auto it = data.find("index");
    if (it == data.end() || !it->is_number_integer()) return std::nullopt;
    const auto v = it->get<std::int64_t>();
    if (v < 0 || v > 4096) return std::nullopt;
    return v;
  }

  void MergeUsage(const json& usage) {
    for (const auto& [key, value] : usage.items()) {
      if (value.is_number()) usage_[key] = value;
    }
  }

  std::optional<AttemptError> ApplyDelta(Block& b, const json& delta) {
    const std::string kind = StringField(delta, "type");
    auto append = [&](const char* field, const char* key) -> std::optional<AttemptError> {
      const auto piece = delta.find(key);
      if (piece == delta.end() || !piece->is_string()) {
        return Malformed(display_, "a " + kind + " without its " + key);
      }
      json& target = b.block[field];
      if (!target.is_string()) target = "";
      target = target.get<std::string>() + piece->get<std::string>();
      return std::nullopt;
    };
    if (kind == "text_delta") return append("text", "text");
    if (kind == "thinking_delta") return append("thinking", "thinking");
    if (kind == "signature_delta") return append("signature", "signature");
    if (kind == "input_json_delta") {
      const auto piece = delta.find("partial_json");
      if (piece == delta.end() || !piece->is_string()) {
        return Malformed(display_, "an input_json_delta without its partial_json");
      }
      b.partial_json += piece->get<std::string>();
      return std::nullopt;
    }
    if (kind == "citations_delta") {
      if (auto c = delta.find("citation"); c != delta.end()) {
        if (!b.block["citations"].is_array()) b.block["citations"] = json::array();
        b.block["citations"].push_back(*c);
      }
      return std::nullopt;
    }
    return std::nullopt;  // unknown delta kinds are ignored
  }

  // A tool_use block's input is the JSON its partial_json pieces join to (an empty join keeps
  // the block's initial input, normally {}). When the join is not JSON (the answer was cut off at
  // max_tokens in the middle of a call, or the server is broken) the input is kept as the joined
  // text, a string, which the parser turns into an arguments_error for that one call rather than
  // failing the whole turn the tokens were already paid for.
  std::optional<AttemptError> Close(std::int64_t /*index*/, Block& b) {
    b.stopped = true;
    const std::string type = StringField(b.block, "type");
    if ((type == "tool_use" || type == "server_tool_use") && !b.partial_json.empty()) {
      auto input = ParseJsonWithin(b.partial_json, kMaxArgumentsDepth);
      b.block["input"] = input.is_discarded() ? json(b.partial_json) : std::move(input);
    }
    if (type == "tool_use" && !b.block.contains("input")) b.block["input"] = json::object();
    return std::nullopt;
  }

  std::string display_;
  std::string model_;
  std::string id_;
  bool stopped_ = false;
  std::map<std::int64_t, Block> blocks_;
  std::optional<std::string> stop_reason_;
  json stop_sequence_ = nullptr;
  json usage_ = json::object();
};

class AnthropicDialect final : public ProviderDialect {
 public:
  AnthropicDialect(ModelSpec spec, std::string key, std::string display)
      : spec_(std::move(spec)), key_(std::move(key)), display_(std::move(display)) {}

  [[nodiscard]] Result<std::string> BuildBody(const ModelRequest& request) const override {
    auto body = BuildAnthropicBody(spec_, request, &thinking_);
    if (!body.ok()) return body.error();
    return JsonText(*body);
  }

  [[nodiscard]] std::vector<std::pair<std::string, std::string>> Headers() const override {
    return {{"content-type", "application/json"},
            {"x-api-key", key_},
            {"anthropic-version", kAnthropicVersion}};
  }

  [[nodiscard]] std::unique_ptr<StreamAssembler> NewAssembler() const override {
    return NewAnthropicStreamAssembler(display_, spec_.model);
  }

  [[nodiscard]] AttemptOutcome ParseWhole(json body) override {
    AttemptOutcome out = ParseAnthropicResponse(display_, std::move(body), ids_);
    if (auto* response = std::get_if<ModelResponse>(&out);
        response != nullptr && !response->turn.tool_calls.empty()) {
      thinking_.Remember(response->turn.tool_calls.front().id, response->raw["content"]);
    }
    return out;
  }

 private:
  ModelSpec spec_;
  std::string key_;
  std::string display_;
  CallIdSource ids_;
  ThinkingMemory thinking_;
};

const json kEphemeral = {{"type", "ephemeral"}};

bool IsThinking(const json& block) {
  const std::string type = StringField(block, "type");
  return type == "thinking" || type == "redacted_thinking";
}

// Marks the last block of each of the last `count` user messages (a text or tool_result block:
// never empty, so the API accepts a breakpoint there).
void MarkRecentUserMessages(json& messages, std::size_t count) {
  for (auto it = messages.rbegin(); it != messages.rend() && count > 0; ++it) {
    if ((*it)["role"] != "user" || (*it)["content"].empty()) continue;
    (*it)["content"].back()["cache_control"] = kEphemeral;
    --count;
  }
}

json TextBlock(const std::string& text) { return {{"type", "text"}, {"text", text}}; }

// Appends `blocks` as a message of `role`, merging with the previous message when it has the same
// role (the API requires strict alternation). tool_result blocks go before any other block of a
// user message (the API requires them first), after the results already there.
void Append(json& messages, const char* role, json blocks) {
  if (blocks.empty()) return;
  if (messages.empty() || messages.back()["role"] != role) {
    messages.push_back({{"role", role}, {"content", std::move(blocks)}});
    return;
  }
  json& content = messages.back()["content"];
  for (json& block : blocks) {
    if (block["type"] == "tool_result") {
      std::size_t at = 0;
      while (at < content.size() && content[at]["type"] == "tool_result") ++at;
      content.insert(content.begin() + static_cast<std::ptrdiff_t>(at), std::move(block));
    } else {
      content.push_back(std::move(block));
    }
  }
}

}  // namespace

void ThinkingMemory::Remember(const std::string& first_call_id, const json& content) {
  if (first_call_id.empty() || !content.is_array()) return;
  json kept = json::array();
  for (const json& block : content) {
    if (block.is_object() && IsThinking(block)) kept.push_back(block);
  }
  if (kept.empty()) return;
  if (blocks_.find(first_call_id) == blocks_.end()) order_.push_back(first_call_id);
  blocks_[first_call_id] = std::move(kept);
  while (order_.size() > kMaxTurns) {
    blocks_.erase(order_.front());
    order_.pop_front();
  }
}

const json* ThinkingMemory::Find(const std::string& first_call_id) const {
  const auto it = blocks_.find(first_call_id);
  return it == blocks_.end() ? nullptr : &it->second;
}

std::uint64_t AnthropicThinkingBudget(const ModelSpec& spec, std::uint64_t max_tokens) {
  constexpr std::uint64_t kMinThinking = 1024;  // the API's minimum budget_tokens
  constexpr std::uint64_t kAnswerRoom = 1024;   // kept for the answer after the thinking
  if (spec.thinking_budget == 0 || max_tokens <= kAnswerRoom) return 0;
  const std::uint64_t budget = std::min(spec.thinking_budget, max_tokens - kAnswerRoom);
  return budget < kMinThinking ? 0 : budget;
}

std::unique_ptr<StreamAssembler> NewAnthropicStreamAssembler(std::string display,
                                                             std::string model) {
  return std::make_unique<AnthropicAssembler>(std::move(display), std::move(model));
}

Result<json> BuildAnthropicBody(const ModelSpec& spec, const ModelRequest& request,
                                const ThinkingMemory* memory) {
  auto tools = CheckModelRequest(request);
  if (!tools.ok()) return tools.error();
  const std::uint64_t thinking = AnthropicThinkingBudget(spec, request.max_tokens);
  json messages = json::array();
  for (const protocol::ChatMessage& m : request.messages) {
    switch (m.role) {
      case protocol::Role::kUser:
        // Empty text blocks are rejected by the API.
        if (!m.text.empty()) Append(messages, "user", json::array({TextBlock(m.text)}));
        break;
      case protocol::Role::kAssistant: {
        json blocks = json::array();
        // The model's own thinking for this turn goes back first, as the API requires.
        if (const json* kept = memory != nullptr && thinking > 0 && !m.tool_calls.empty()
                                   ? memory->Find(m.tool_calls.front().id)
                                   : nullptr) {
          for (const json& block : *kept) blocks.push_back(block);
        }
        if (!m.text.empty()) blocks.push_back(TextBlock(m.text));
        for (const protocol::ToolCall& call : m.tool_calls) {
          blocks.push_back(
              {{"type", "tool_use"},
               {"id", call.id},
               {"name", call.name},
               {"input", call.arguments.is_object() ? call.arguments : json::object()}});
        }
        // An empty answer still has to keep the alternation.
        if (blocks.empty()) blocks.push_back(TextBlock("(empty response)"));
        Append(messages, "assistant", std::move(blocks));
        break;
      }
      case protocol::Role::kTool: {
        json block = {{"type", "tool_result"},
                      {"tool_use_id", m.call_id},
                      {"content", m.text.empty() ? std::string("(no output)") : m.text}};
        if (m.is_error) block["is_error"] = true;
        Append(messages, "user", json::array({std::move(block)}));
        break;
      }
    }
  }
  // Breakpoints, at most kAnthropicMaxBreakpoints: the tools, the system text, the last two user
  // messages (what the previous request wrote to the cache, and the newest turn).
  if (spec.prompt_caching) MarkRecentUserMessages(messages, 2);
  json body = {
      {"model", spec.model}, {"max_tokens", request.max_tokens}, {"messages", std::move(messages)}};
  if (!request.system.empty()) {
    if (spec.prompt_caching) {
      json block = TextBlock(request.system);
      block["cache_control"] = kEphemeral;
      body["system"] = json::array({std::move(block)});
    } else {
      body["system"] = request.system;
    }
  }
  if (!tools->empty()) {
    json list = json::array();
    for (ToolSchema& t : *tools) {
      list.push_back({{"name", std::move(t.name)},
                      {"description", std::move(t.description)},
                      {"input_schema", std::move(t.parameters)}});
    }
    if (spec.prompt_caching) list.back()["cache_control"] = kEphemeral;
    body["tools"] = std::move(list);
  }
  if (thinking > 0) body["thinking"] = {{"type", "enabled"}, {"budget_tokens", thinking}};
  if (spec.stream) body["stream"] = true;
  if (spec.temperature && thinking == 0) body["temperature"] = *spec.temperature;
  return body;
}

protocol::StopReason AnthropicStopReason(std::string_view stop_reason) {
  using protocol::StopReason;
  if (stop_reason == "end_turn" || stop_reason == "stop_sequence") return StopReason::kEnd;
  if (stop_reason == "tool_use") return StopReason::kToolCalls;
  if (stop_reason == "max_tokens") return StopReason::kMaxTokens;
  if (stop_reason == "refusal") return StopReason::kRefused;
  return StopReason::kOther;
}

AttemptOutcome ParseAnthropicResponse(const std::string& display, json body, CallIdSource& ids) {
  if (!body.is_object()) return Malformed(display, "an answer that is not a JSON object");
  if (const auto error = body.find("error");
      StringField(body, "type") == "error" || (error != body.end() && !error->is_null())) {
    const json& err = error != body.end() ? *error : body;
    const std::string kind = StringField(err, "type");
    std::string message = StringField(err, "message");
    if (message.empty() && err.is_string()) message = err.get<std::string>();
    const std::string text = ProviderErrorText(JsonText(json{{"error", {{"message", message}}}}));
    return AttemptError{ErrorCode::kProviderError,
                        display + " reported an error" + (kind.empty() ? "" : " (" + kind + ")") +
                            (text.empty() ? "" : ": " + text),
                        false, std::nullopt};
  }
  const auto content = body.find("content");
  if (content == body.end() || !content->is_array()) {
    return Malformed(display, "an answer without a content list");
  }
  ModelResponse out;
  protocol::AssistantTurn& turn = out.turn;
  for (const json& block : *content) {
    if (!block.is_object()) return Malformed(display, "a content block that is not an object");
    const std::string type = StringField(block, "type");
    if (type == "text") {
      turn.text += StringField(block, "text");
    } else if (type == "tool_use") {
      if (turn.tool_calls.size() == protocol::kMaxToolCallsPerTurn) {
        return Malformed(display, "an answer with more than " +
                                      std::to_string(protocol::kMaxToolCallsPerTurn) +
                                      " tool calls (the most accepted in one turn)");
      }
      protocol::ToolCall call;
      call.id = StringField(block, "id");
      call.name = StringField(block, "name");
      if (const auto input = block.find("input"); input != block.end()) {
        // A string is JSON text: what the stream assembler keeps when the joined partial_json
        // did not parse, and what some compatible servers send.
        if (input->is_string()) {
          SetArgumentsFromText(call, input->get_ref<const std::string&>());
        } else {
          SetArgumentsFromJson(call, *input);
        }
      }
      turn.tool_calls.push_back(std::move(call));
    }
    // thinking, redacted_thinking, server tool blocks: not for the agent; skipped (raw keeps
    // them for the audit log).
  }
  out.provider_stop_reason = StringField(body, "stop_reason");
  turn.stop_reason = AnthropicStopReason(out.provider_stop_reason);
  if (Status st = FinishTurn(turn, ids, display); !st.ok()) {
    return Malformed(display, "an unusable turn: " + st.error().Message());
  }
  if (auto usage = body.find("usage"); usage != body.end()) out.usage = UsageOf(*usage);
  out.raw = std::move(body);
  return out;
}

Result<std::unique_ptr<ModelProvider>> MakeAnthropicProvider(boost::asio::io_context& io,
                                                             const ModelSpec& spec,
                                                             const Environment& env) {
  HttpProviderKind kind{kAnthropicBaseVar,
                        kAnthropicDefaultBase,
                        kAnthropicKeyVar,
                        "/v1/messages",
                        "the Anthropic provider at ",
                        /*key_optional_on_loopback=*/false,
                        [](const ModelSpec& s, const std::string& key, const std::string& display) {
                          return std::make_shared<AnthropicDialect>(s, key, display);
                        }};
  return MakeHttpProvider(io, spec, env, kind);
}

}  // namespace cagent::launcher::model
