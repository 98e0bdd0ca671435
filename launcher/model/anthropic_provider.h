// The Anthropic messages provider: POST {base}/v1/messages with "x-api-key: $ANTHROPIC_API_KEY"
// and "anthropic-version: 2023-06-01". The request body is built from the broker's ModelRequest
// and nothing else; streams are assembled into the non-streaming `message` body, which is parsed
// into a neutral turn. Runs in cagent (trusted), on the broker's io_context thread.
#pragma once

#include <boost/asio/io_context.hpp>
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
// Nothing else: no server-side tools, no tool_choice, no metadata. Every message text is a JSON
// string value, so no text can add a key. Fails as CheckModelRequest.
Result<nlohmann::json> BuildAnthropicBody(const ModelSpec& spec, const ModelRequest& request);

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
// cache creation + cache read). The turn has passed FinishTurn (ids generated from `ids`); raw is
// `body`. An error object, a body without a content list, or a block that is not an object are
// provider errors.
AttemptOutcome ParseAnthropicResponse(const std::string& display, nlohmann::json body,
                                      CallIdSource& ids);

}  // namespace cagent::launcher::model
