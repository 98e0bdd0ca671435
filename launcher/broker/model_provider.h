// ModelProvider: the broker's side of a model call. The agent's adapter builds the
// provider-specific request body; the broker redacts it, adds the model name, credentials and
// transport options, sends it, assembles a streamed answer, and returns the provider's
// non-streaming response body. Runs in cagent (trusted), on the broker's io_context thread.
//
// Credentials are read from the caller's environment (or config) when the provider is made and
// never leave this object: not in a message to the agent, not in a log line, not in an error text.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "common/result.h"

namespace cagent::launcher::broker {

// Which provider and model, parsed from `--model SPEC`:
//   openai:MODEL        OpenAI-compatible chat completions (OPENAI_API_KEY, OPENAI_BASE_URL,
//                       default https://api.openai.com/v1)
//   anthropic:MODEL     Anthropic messages (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL,
//                       default https://api.anthropic.com)
//   replay:FILE         plays a recorded session (JSON Lines, one assistant turn per line)
//
// Replay turn format (one JSON object per non-blank line; the broker returns it as the body of
// model_result, the agent's replay adapter parses it):
//   {"text": "I will read the test first.",
//    "tool_calls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "test_calc.py"}}],
//    "usage": {"input_tokens": 812, "output_tokens": 40}}
// "text" and "tool_calls" are optional (at least one is present); a turn without tool calls is a
// final answer. Asking for a turn past the end is a provider error naming the file and its length.
struct ModelSpec {
  std::string provider;  // "openai" | "anthropic" | "replay"
  std::string model;     // model name, or the replay file's path
  std::string base_url;  // overrides the environment's; empty = from environment or default
  bool stream = true;    // use SSE towards the provider (the agent always gets the whole answer)
  std::uint64_t context_window = 0;     // 0 = the provider's known default for the model
  std::uint64_t max_output_tokens = 0;  // 0 = default (4096)
  std::chrono::milliseconds request_timeout{300000};  // per attempt: connect to the last byte
  int max_retries = 4;  // on 429 / 5xx / connection failure, with exponential backoff + jitter
  // Backoff before retry n (1-based): a random delay in [d/2, d] with d = initial * 2^(n-1),
  // capped at retry_max_backoff; a 429/503's Retry-After (seconds) replaces it, capped the same.
  std::chrono::milliseconds retry_initial_backoff{1000};
  std::chrono::milliseconds retry_max_backoff{60000};
  // An extra PEM file of CAs to trust besides the system store (a company proxy, a test CA).
  std::string ca_file;
};
Result<ModelSpec> ParseModelSpec(const std::string& spec);

struct ModelResponse {
  nlohmann::json body;  // the provider's non-streaming response format (or one replay turn)
  protocol::Usage usage;
};
struct ModelError {
  protocol::ErrorCode code = protocol::ErrorCode::kProviderError;  // or kProviderAuth
  std::string message;  // says what failed and what to check; never contains a credential
};
using ModelOutcome = std::variant<ModelResponse, ModelError>;

class ModelProvider {
 public:
  virtual ~ModelProvider() = default;
  [[nodiscard]] virtual protocol::ModelInfo Info() const = 0;
  // Sends one request. `done` is called exactly once, on the io_context's thread, unless Cancel()
  // was called first (then it may be called with an error or not at all).
  virtual void Call(nlohmann::json request_body, std::function<void(ModelOutcome)> done) = 0;
  // Abandons an outstanding call (run ending).
  virtual void Cancel() = 0;
};

// The caller's environment as name -> value (credentials and base URLs are looked up here).
using Environment = std::map<std::string, std::string>;

// Builds the provider for `spec`. Fails with a message naming the missing credential variable
// (e.g. "OPENAI_API_KEY is not set") or an unreadable replay file.
Result<std::unique_ptr<ModelProvider>> MakeModelProvider(boost::asio::io_context& io,
                                                         const ModelSpec& spec,
                                                         const Environment& env);

}  // namespace cagent::launcher::broker
