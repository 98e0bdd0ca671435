// The Anthropic messages provider: POST {base}/v1/messages with "x-api-key: $ANTHROPIC_API_KEY"
// and "anthropic-version: 2023-06-01". Streams are assembled into the non-streaming `message`
// body. Runs in cagent (trusted), on the broker's io_context thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>

#include "launcher/broker/http_model_provider.h"
#include "launcher/broker/model_provider.h"

namespace cagent::launcher::broker {

inline constexpr const char* kAnthropicKeyVar = "ANTHROPIC_API_KEY";
inline constexpr const char* kAnthropicBaseVar = "ANTHROPIC_BASE_URL";
inline constexpr const char* kAnthropicDefaultBase = "https://api.anthropic.com";
inline constexpr const char* kAnthropicVersion = "2023-06-01";

// Builds the provider. The base URL is spec.base_url, else $ANTHROPIC_BASE_URL, else the default.
// Fails when ANTHROPIC_API_KEY is unset or empty, or the base URL or spec.ca_file is unusable.
Result<std::unique_ptr<ModelProvider>> MakeAnthropicProvider(boost::asio::io_context& io,
                                                             const ModelSpec& spec,
                                                             const Environment& env);

// Assembles message_start / content_block_start / content_block_delta (text, input_json,
// thinking, signature) / content_block_stop / message_delta / message_stop events (ping ignored;
// an error event fails the attempt, retryably for overloaded_error and api_error) into a
// `message` body; tool_use inputs are parsed from their joined partial_json at content_block_stop.
// ModelResponse.usage.input_tokens counts cached input too (input + cache creation + cache read).
// Exposed for tests.
std::unique_ptr<StreamAssembler> NewAnthropicStreamAssembler(std::string display,
                                                             std::string model);
// Validates a non-streaming message (a content list) and reads its usage.
AttemptOutcome ParseAnthropicResponse(const std::string& display, nlohmann::json body);

}  // namespace cagent::launcher::broker
