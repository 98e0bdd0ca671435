// The OpenAI-compatible chat completions provider (OpenAI, Ollama, vLLM, llama.cpp server, LM
// Studio): POST {base}/chat/completions with "Authorization: Bearer $OPENAI_API_KEY". Streams are
// assembled into the non-streaming `chat.completion` body. Runs in cagent (trusted), on the
// broker's io_context thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>

#include "launcher/broker/http_model_provider.h"
#include "launcher/broker/model_provider.h"

namespace cagent::launcher::broker {

inline constexpr const char* kOpenAiKeyVar = "OPENAI_API_KEY";
inline constexpr const char* kOpenAiBaseVar = "OPENAI_BASE_URL";
inline constexpr const char* kOpenAiDefaultBase = "https://api.openai.com/v1";

// Builds the provider. The base URL is spec.base_url, else $OPENAI_BASE_URL, else the default.
// Fails when OPENAI_API_KEY is unset or empty — except for a plain-http loopback base URL (a
// local server needs no key) — or when the base URL or spec.ca_file is unusable.
Result<std::unique_ptr<ModelProvider>> MakeOpenAiProvider(boost::asio::io_context& io,
                                                          const ModelSpec& spec,
                                                          const Environment& env);

// Assembles "chat.completion.chunk" events (content pieces concatenated, tool-call fragments
// joined by index, finish_reason, usage from the final chunk, "[DONE]") into a
// "chat.completion" body. `display` names the provider in error texts; `model` is used when the
// chunks carry none. Exposed for tests.
std::unique_ptr<StreamAssembler> NewOpenAiStreamAssembler(std::string display, std::string model);
// Validates a non-streaming chat completion (choices[0].message present) and reads its usage.
AttemptOutcome ParseOpenAiResponse(const std::string& display, nlohmann::json body);

}  // namespace cagent::launcher::broker
