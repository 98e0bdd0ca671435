#include "tests/launcher/model/simulated_server_util.h"

#include <algorithm>
#include <utility>

#include "common/sha256.h"

namespace cagent::testing {
namespace {

using nlohmann::json;

std::uint64_t Tokens(std::size_t bytes) { return bytes / 4; }

FakeReply Refuse(const std::string& message, SimulatedRequest& seen, bool anthropic) {
  seen.status = 400;
  seen.error = message;
  if (anthropic) {
    return FakeReply::Json(
        400,
        {{"type", "error"}, {"error", {{"type", "invalid_request_error"}, {"message", message}}}});
  }
  return FakeReply::Json(
      400,
      {{"error", {{"message", message}, {"type", "invalid_request_error"}, {"code", nullptr}}}});
}

// A block without its cache_control, as the cache compares it.
std::string Canonical(json block) {
  if (block.is_object()) block.erase("cache_control");
  return block.dump();
}

}  // namespace

SimulatedModelServer::SimulatedModelServer(std::vector<ScriptedTurn> turns,
                                           std::set<std::string> reasoning_models)
    : turns_(std::move(turns)), reasoning_models_(std::move(reasoning_models)) {}

std::string SimulatedModelServer::Sign(const std::string& thinking) {
  return "sig-" + Sha256Hex("simulated-server-key:" + thinking).substr(0, 32);
}

std::vector<SimulatedRequest> SimulatedModelServer::Seen() const {
  std::lock_guard lock(mu_);
  return seen_;
}

ScriptedTurn SimulatedModelServer::NextTurn() {
  if (next_turn_ < turns_.size()) return turns_[next_turn_++];
  return ScriptedTurn{"done", {}};
}

FakeReply SimulatedModelServer::Answer(const RecordedRequest& request) {
  std::lock_guard lock(mu_);
  SimulatedRequest seen;
  const json body = request.Json();
  FakeReply reply;
  if (!body.is_object()) {
    reply = Refuse("the body is not JSON", seen, true);
  } else if (request.target.find("/v1/messages") != std::string::npos) {
    reply = Anthropic(body, seen);
  } else {
    reply = OpenAi(body, seen);
  }
  seen_.push_back(seen);
  return reply;
}

FakeReply SimulatedModelServer::Anthropic(const json& body, SimulatedRequest& seen) {
  if (!body.contains("max_tokens") || !body["max_tokens"].is_number_unsigned() ||
      !body.contains("messages") || !body["messages"].is_array()) {
    return Refuse("max_tokens: Field required", seen, true);
  }
  const std::uint64_t max_tokens = body["max_tokens"].get<std::uint64_t>();
  // The prompt as blocks in order, and where the breakpoints are.
  std::vector<std::string> blocks;
  std::vector<std::size_t> breakpoints;  // index of the block that ends each marked prefix
  const auto add = [&](const json& block) -> std::optional<std::string> {
    if (block.is_object() && block.contains("cache_control")) {
      if (block["cache_control"] != json{{"type", "ephemeral"}}) {
        return "cache_control: Input tag does not match 'ephemeral'";
      }
      breakpoints.push_back(blocks.size());
    }
    blocks.push_back(Canonical(block));
    return std::nullopt;
  };
  if (body.contains("tools")) {
    for (const json& t : body["tools"]) {
      if (auto err = add(t)) return Refuse(*err, seen, true);
    }
  }
  if (body.contains("system")) {
    if (body["system"].is_string()) {
      blocks.push_back(json{{"type", "text"}, {"text", body["system"]}}.dump());
    } else {
      for (const json& b : body["system"]) {
        if (auto err = add(b)) return Refuse(*err, seen, true);
      }
    }
  }
  const json& messages = body["messages"];
  for (const json& m : messages) {
    const json& content = m["content"];
    if (content.is_string()) {
      blocks.push_back(json{{"role", m["role"]}, {"text", content}}.dump());
      continue;
    }
    for (const json& b : content) {
      json tagged = b;
      tagged["role"] = m["role"];
      if (auto err = add(tagged)) return Refuse(*err, seen, true);
    }
  }
  seen.breakpoints = breakpoints.size();
  if (breakpoints.size() > 4) {
    return Refuse("A maximum of 4 blocks with cache_control may be provided. Found " +
                      std::to_string(breakpoints.size()) + ".",
                  seen, true);
  }
  // Thinking: its parameters, the signatures sent back, the thinking block the tool loop needs.
  const bool thinking = body.contains("thinking");
  if (thinking) {
    const json& t = body["thinking"];
    if (t.value("type", "") != "enabled" || !t.contains("budget_tokens") ||
        !t["budget_tokens"].is_number_unsigned() ||
        t["budget_tokens"].get<std::uint64_t>() < 1024 ||
        t["budget_tokens"].get<std::uint64_t>() >= max_tokens) {
      return Refuse("thinking.enabled.budget_tokens: must be >= 1024 and less than max_tokens",
                    seen, true);
    }
    if (body.contains("temperature")) {
      return Refuse("temperature may only be set to 1 when thinking is enabled", seen, true);
    }
  }
  seen.thinking = thinking;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (messages[i]["role"] != "assistant" || !messages[i]["content"].is_array()) continue;
    for (const json& b : messages[i]["content"]) {
      if (b.value("type", "") != "thinking") continue;
      if (b.value("signature", "") != Sign(b.value("thinking", ""))) {
        return Refuse(
            "messages." + std::to_string(i) + ".content: Invalid `signature` in `thinking` block",
            seen, true);
      }
      ++seen.thinking_blocks_received;
    }
  }
  if (thinking && messages.size() >= 2) {
    const json& last = messages.back();
    bool results = false;
    if (last["content"].is_array()) {
      for (const json& b : last["content"]) results |= b.value("type", "") == "tool_result";
    }
    const json& before = messages[messages.size() - 2];
    const std::string first = before["content"].is_array() && !before["content"].empty()
                                  ? before["content"][0].value("type", "")
                                  : std::string();
    if (results && first != "thinking" && first != "redacted_thinking") {
      return Refuse("messages." + std::to_string(messages.size() - 2) +
                        ".content.0.type: Expected `thinking` or `redacted_thinking`, but found `" +
                        first +
                        "`. When `thinking` is enabled, a final `assistant` message must start "
                        "with a thinking block.",
                    seen, true);
    }
  }
  // The cache.
  std::vector<std::string> prefixes;
  std::string joined;
  for (const std::string& b : blocks) {
    joined += b;
    prefixes.push_back(joined);
  }
  seen.prompt_tokens = Tokens(joined.size());
  for (std::size_t bp : breakpoints) {
    for (std::size_t back = 0; back <= 20 && back <= bp; ++back) {
      if (anthropic_cache_.count(prefixes[bp - back]) != 0) {
        seen.cache_read = std::max(seen.cache_read, Tokens(prefixes[bp - back].size()));
        break;
      }
    }
  }
  for (std::size_t bp : breakpoints) {
    if (Tokens(prefixes[bp].size()) >= kMinCacheTokens) anthropic_cache_.insert(prefixes[bp]);
  }
  if (!breakpoints.empty()) {
    const std::uint64_t last = Tokens(prefixes[breakpoints.back()].size());
    if (last >= kMinCacheTokens && last > seen.cache_read)
      seen.cache_write = last - seen.cache_read;
  }
  // The answer.
  const ScriptedTurn turn = NextTurn();
  json content = json::array();
  if (thinking) {
    const std::string text = "Thinking about answer " + std::to_string(seen_.size() + 1) + ".";
    content.push_back({{"type", "thinking"}, {"thinking", text}, {"signature", Sign(text)}});
  }
  if (!turn.text.empty()) content.push_back({{"type", "text"}, {"text", turn.text}});
  for (const auto& [name, args] : turn.calls) {
    content.push_back({{"type", "tool_use"},
                       {"id", "toolu_" + std::to_string(++ids_)},
                       {"name", name},
                       {"input", args}});
  }
  const std::uint64_t output = Tokens(content.dump().size()) + 1;
  const json usage = {{"input_tokens", seen.prompt_tokens - seen.cache_read - seen.cache_write},
                      {"cache_creation_input_tokens", seen.cache_write},
                      {"cache_read_input_tokens", seen.cache_read},
                      {"output_tokens", output}};
  const std::string stop = turn.calls.empty() ? "end_turn" : "tool_use";
  const std::string model = body.value("model", "claude");
  if (!body.value("stream", false)) {
    return FakeReply::Json(200, {{"id", "msg_sim"},
                                 {"type", "message"},
                                 {"role", "assistant"},
                                 {"model", model},
                                 {"content", content},
                                 {"stop_reason", stop},
                                 {"usage", usage}});
  }
  json start_usage = usage;
  start_usage["output_tokens"] = 1;
  std::vector<json> events = {{{"type", "message_start"},
                               {"message",
                                {{"id", "msg_sim"},
                                 {"type", "message"},
                                 {"role", "assistant"},
                                 {"model", model},
                                 {"content", json::array()},
                                 {"usage", start_usage}}}}};
  for (std::size_t i = 0; i < content.size(); ++i) {
    const json& b = content[i];
    const std::string type = b["type"];
    json start = b;
    if (type == "thinking") {
      start["thinking"] = "";
      start["signature"] = "";
    } else if (type == "text") {
      start["text"] = "";
    } else {
      start["input"] = json::object();
    }
    events.push_back({{"type", "content_block_start"}, {"index", i}, {"content_block", start}});
    if (type == "thinking") {
      events.push_back({{"type", "content_block_delta"},
                        {"index", i},
                        {"delta", {{"type", "thinking_delta"}, {"thinking", b["thinking"]}}}});
      events.push_back({{"type", "content_block_delta"},
                        {"index", i},
                        {"delta", {{"type", "signature_delta"}, {"signature", b["signature"]}}}});
    } else if (type == "text") {
      events.push_back({{"type", "content_block_delta"},
                        {"index", i},
                        {"delta", {{"type", "text_delta"}, {"text", b["text"]}}}});
    } else {
      events.push_back(
          {{"type", "content_block_delta"},
           {"index", i},
           {"delta", {{"type", "input_json_delta"}, {"partial_json", b["input"].dump()}}}});
    }
    events.push_back({{"type", "content_block_stop"}, {"index", i}});
  }
  events.push_back({{"type", "message_delta"},
                    {"delta", {{"stop_reason", stop}, {"stop_sequence", nullptr}}},
                    {"usage", {{"output_tokens", output}}}});
  events.push_back({{"type", "message_stop"}});
  return AnthropicStream(events);
}

FakeReply SimulatedModelServer::OpenAi(const json& body, SimulatedRequest& seen) {
  const std::string model = body.value("model", "");
  const bool reasoning = reasoning_models_.count(model) != 0;
  if (reasoning && body.contains("max_tokens")) {
    return Refuse(
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
        "'max_completion_tokens' instead.",
        seen, false);
  }
  if (reasoning && body.contains("temperature")) {
    return Refuse("Unsupported value: 'temperature' does not support 0.2 with this model.", seen,
                  false);
  }
  if (!reasoning && body.contains("reasoning_effort")) {
    return Refuse("Unrecognized request argument supplied: reasoning_effort", seen, false);
  }
  if (body.contains("reasoning_effort")) {
    const std::string effort = body["reasoning_effort"].is_string() ? body["reasoning_effort"] : "";
    if (effort != "minimal" && effort != "low" && effort != "medium" && effort != "high") {
      return Refuse("Invalid value for 'reasoning_effort'", seen, false);
    }
  }
  if (!body.contains("messages") || !body["messages"].is_array()) {
    return Refuse("'messages' is a required property", seen, false);
  }
  // The prompt as units: the tools, then each message.
  std::vector<std::string> units = {body.contains("tools") ? body["tools"].dump() : "[]"};
  for (const json& m : body["messages"]) units.push_back(m.dump());
  std::size_t total = 0;
  for (const std::string& u : units) total += u.size();
  seen.prompt_tokens = Tokens(total);
  std::size_t best = 0;
  for (const auto& earlier : openai_prompts_) {
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < units.size() && i < earlier.size() && units[i] == earlier[i]; ++i) {
      bytes += units[i].size();
    }
    best = std::max(best, bytes);
  }
  const std::uint64_t shared = Tokens(best);
  seen.cache_read = shared >= kMinCacheTokens ? shared / 128 * 128 : 0;
  openai_prompts_.push_back(std::move(units));

  const ScriptedTurn turn = NextTurn();
  json message = {{"role", "assistant"},
                  {"content", turn.text.empty() ? json(nullptr) : json(turn.text)}};
  json calls = json::array();
  for (const auto& [name, args] : turn.calls) {
    calls.push_back({{"id", "call_" + std::to_string(++ids_)},
                     {"type", "function"},
                     {"function", {{"name", name}, {"arguments", args.dump()}}}});
  }
  if (!calls.empty()) message["tool_calls"] = calls;
  const std::uint64_t reasoning_tokens = reasoning ? 64 : 0;
  const std::uint64_t output = Tokens(message.dump().size()) + 1 + reasoning_tokens;
  json usage = {{"prompt_tokens", seen.prompt_tokens},
                {"completion_tokens", output},
                {"total_tokens", seen.prompt_tokens + output},
                {"prompt_tokens_details", {{"cached_tokens", seen.cache_read}}},
                {"completion_tokens_details", {{"reasoning_tokens", reasoning_tokens}}}};
  const std::string finish = calls.empty() ? "stop" : "tool_calls";
  if (!body.value("stream", false)) {
    return FakeReply::Json(
        200, {{"id", "chatcmpl-sim"},
              {"object", "chat.completion"},
              {"model", model},
              {"choices", {{{"index", 0}, {"message", message}, {"finish_reason", finish}}}},
              {"usage", usage}});
  }
  const json base = {{"id", "chatcmpl-sim"}, {"object", "chat.completion.chunk"}, {"model", model}};
  std::vector<json> chunks;
  json first = base;
  json delta = {{"role", "assistant"}};
  if (!turn.text.empty()) delta["content"] = turn.text;
  first["choices"] = {{{"index", 0}, {"delta", delta}}};
  chunks.push_back(first);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    json c = base;
    json call = calls[i];
    call["index"] = i;
    c["choices"] = {{{"index", 0}, {"delta", {{"tool_calls", {call}}}}}};
    chunks.push_back(c);
  }
  json end = base;
  end["choices"] = {{{"index", 0}, {"delta", json::object()}, {"finish_reason", finish}}};
  chunks.push_back(end);
  json tail = base;
  tail["choices"] = json::array();
  tail["usage"] = usage;
  chunks.push_back(tail);
  return OpenAiStream(chunks);
}

}  // namespace cagent::testing
