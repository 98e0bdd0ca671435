// The OpenAI-compatible chat completions provider (OpenAI, Ollama, vLLM, llama.cpp server, LM
// Studio): POST {base}/chat/completions with "Authorization: Bearer $OPENAI_API_KEY". The request
// body is built from the broker's ModelRequest and nothing else; streams are assembled into the
// non-streaming `chat.completion` body, which is parsed into a neutral turn. Runs in cagent
// (trusted), on the broker's io_context thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "launcher/model/http_model_provider.h"
#include "launcher/model/model_provider.h"
#include "launcher/model/turn_rules.h"

namespace cagent::launcher::model {

inline constexpr const char* kOpenAiKeyVar = "OPENAI_API_KEY";
inline constexpr const char* kOpenAiBaseVar = "OPENAI_BASE_URL";
inline constexpr const char* kOpenAiDefaultBase = "https://api.openai.com/v1";

// Builds the provider. The base URL is spec.base_url, else $OPENAI_BASE_URL, else the default.
// Fails when OPENAI_API_KEY is unset or empty — except for a plain-http loopback base URL (a
// local server needs no key) — or when the base URL or spec.ca_file is unusable.
Result<std::unique_ptr<ModelProvider>> MakeOpenAiProvider(boost::asio::io_context& io,
                                                          const ModelSpec& spec,
                                                          const Environment& env);

// The request body for `request`, from an allow-list of keys only:
//   model        spec.model
//   messages     system text first (role system, omitted when empty); user {content}; assistant
//                {content, tool_calls [{id, type "function", function {name, arguments as JSON
//                text}}]} with content null when there are calls and no text; tool
//                {tool_call_id, content}
//   tools        [{type "function", function {name, description, parameters}}], omitted when
//                the request has none
//   max_tokens   request.max_tokens; for the openai-reasoning family max_completion_tokens
//                instead (their cap counts the hidden reasoning), and reasoning_effort when
//                spec.reasoning_effort is set
//   stream, stream_options {include_usage true}   only when spec.stream
//   temperature  only when spec.temperature is set (never for openai-reasoning)
// The messages are rebuilt from the conversation on every call the same way, so a conversation
// that only grew gives a request whose messages begin with the previous request's, byte for byte:
// the stable prefix OpenAI-compatible servers cache.
// Nothing else: no n (one choice is the default), no tool_choice, no metadata, no logprobs. Every
// message text is a JSON string value, so no text can add a key. Fails as CheckModelRequest.
Result<nlohmann::json> BuildOpenAiBody(const ModelSpec& spec, const ModelRequest& request);

// finish_reason in neutral words: stop -> end, tool_calls / function_call -> tool_calls,
// length -> max_tokens, content_filter -> refused, anything else -> other.
protocol::StopReason OpenAiStopReason(std::string_view finish_reason);

// Assembles "chat.completion.chunk" events (content pieces concatenated, tool-call fragments
// joined by index, finish_reason, usage from the final chunk, "[DONE]") into a
// "chat.completion" body. `display` names the provider in error texts; `model` is used when the
// chunks carry none. Exposed for tests.
std::unique_ptr<StreamAssembler> NewOpenAiStreamAssembler(std::string display, std::string model);

// Parses a non-streaming chat completion into a neutral turn: choices[0].message's content (a
// string, a list of parts whose text parts are joined, or null) and tool_calls (arguments as JSON
// text or, from some compatible servers, as an object; ids optional), finish_reason, usage. The
// turn has passed FinishTurn (ids generated from `ids`); raw is `body`. An error object, a body
// without choices[0].message, content or tool_calls of the wrong type are provider errors.
AttemptOutcome ParseOpenAiResponse(const std::string& display, nlohmann::json body,
                                   CallIdSource& ids);

}  // namespace cagent::launcher::model
