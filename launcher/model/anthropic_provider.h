// The Anthropic messages provider: POST {base}/v1/messages with "x-api-key: $ANTHROPIC_API_KEY"
// and "anthropic-version: 2023-06-01". The request body is built from the broker's ModelRequest
// and nothing else; streams are assembled into the non-streaming `message` body, which is parsed
// into a neutral turn. Runs in cagent (trusted), on the broker's io_context thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "launcher/model/http_model_provider.h"
#include "launcher/model/model_provider.h"
#include "launcher/model/turn_rules.h"

namespace cagent::launcher::model {

inline constexpr const char* kAnthropicKeyVar = "ANTHROPIC_API_KEY";
inline constexpr const char* kAnthropicBaseVar = "ANTHROPIC_BASE_URL";
inline constexpr const char* kAnthropicDefaultBase = "https://api.anthropic.com";
inline constexpr const char* kAnthropicVersion = "2023-06-01";

// Builds the provider. The base URL is spec.base_url, else $ANTHROPIC_BASE_URL, else the default.
// Fails when ANTHROPIC_API_KEY is unset or empty, or the base URL or spec.ca_file is unusable.
Result<std::unique_ptr<ModelProvider>> MakeAnthropicProvider(boost::asio::io_context& io,
                                                             const ModelSpec& spec,
                                                             const Environment& env);

// The thinking blocks of the model's recent tool-use turns, kept by the provider (never by the
// agent) so that the next request can give them back with their signatures intact, as extended
// thinking requires in a tool-use loop. Keyed by the turn's first tool call id, which the broker
// checks the agent sends back unchanged; the agent never sees a thinking block, so it can neither
// read nor forge one. At most kMaxTurns turns are kept (older turns need none: the API keeps only
// the last assistant turn's thinking).
class ThinkingMemory {
 public:
  static constexpr std::size_t kMaxTurns = 64;
  // Keeps the thinking and redacted_thinking blocks of `content` (a response's content list) for
  // the turn whose first tool call has `first_call_id`. Turns without calls are not kept.
  void Remember(const std::string& first_call_id, const nlohmann::json& content);
  // The blocks kept for the turn, or null.
  [[nodiscard]] const nlohmann::json* Find(const std::string& first_call_id) const;
  [[nodiscard]] std::size_t size() const { return order_.size(); }

 private:
  std::map<std::string, nlohmann::json> blocks_;
  std::deque<std::string> order_;
};

// The number of cache_control breakpoints the API accepts in one request.
inline constexpr std::size_t kAnthropicMaxBreakpoints = 4;

// The request body for `request`, from an allow-list of keys only:
//   model        spec.model
//   max_tokens   request.max_tokens
//   system       request.system (omitted when empty)
//   messages     strict user/assistant alternation (same-role neighbours merged); user text as a
//                text block (empty text skipped); tool results as tool_result blocks
//                {tool_use_id, content ("(no output)" when empty), is_error when true} in the
//                user message, before any text; assistant text block + tool_use blocks
//                {id, name, input}; an assistant message with nothing is the text block
//                "(empty response)"
//   tools        [{name, description, input_schema}], omitted when the request has none
//   stream       only when spec.stream
//   temperature  only when spec.temperature is set
//   thinking     {type: enabled, budget_tokens} when spec.thinking_budget > 0: the budget
//                lowered to max_tokens - 1024 (room for the answer), and left out when that is
//                under the API's minimum of 1024; an assistant message with tool calls starts
//                with the thinking blocks `memory` kept for it
// With spec.prompt_caching, cache_control {type: ephemeral} marks the last tool, the system text
// (then a list of one text block) and the last block of each of the last two user messages: the
// tools, the system text and the conversation up to the previous turn are read from the cache,
// and the newest turn is written to it. At most kAnthropicMaxBreakpoints.
// Nothing else: no server-side tools, no tool_choice, no metadata. Every message text is a JSON
// string value, so no text can add a key. Fails as CheckModelRequest.
Result<nlohmann::json> BuildAnthropicBody(const ModelSpec& spec, const ModelRequest& request,
                                          const ThinkingMemory* memory = nullptr);
// The thinking budget a call with `max_tokens` gets under `spec`; 0 = no thinking in this call.
std::uint64_t AnthropicThinkingBudget(const ModelSpec& spec, std::uint64_t max_tokens);

// stop_reason in neutral words: end_turn / stop_sequence -> end, tool_use -> tool_calls,
// max_tokens -> max_tokens, refusal -> refused, anything else -> other.
protocol::StopReason AnthropicStopReason(std::string_view stop_reason);

// Assembles message_start / content_block_start / content_block_delta (text, input_json,
// thinking, signature) / content_block_stop / message_delta / message_stop events (ping ignored;
// an error event fails the attempt, retryably for overloaded_error and api_error) into a
// `message` body; tool_use inputs are parsed from their joined partial_json at content_block_stop
// (kept as a string when the join is not JSON, so that call gets an arguments_error).
// Exposed for tests.
std::unique_ptr<StreamAssembler> NewAnthropicStreamAssembler(std::string display,
                                                             std::string model);

// Parses a non-streaming message into a neutral turn: text blocks joined, tool_use blocks as calls
// (input an object, or JSON text for an object, else an arguments_error), other blocks (thinking,
// server tools) skipped; stop_reason; usage, where input_tokens counts cached input too (input +
// cache creation + cache read), cache_read_tokens and cache_write_tokens the parts. The turn has
// passed FinishTurn (ids generated from `ids`); raw is `body`. An error object, a body without a
// content list, or a block that is not an object are provider errors.
AttemptOutcome ParseAnthropicResponse(const std::string& display, nlohmann::json body,
                                      CallIdSource& ids);

}  // namespace cagent::launcher::model
