// ModelProvider: the broker's side of a model call, and the only place provider wire formats
// live. The broker hands a provider-neutral request (the agent's conversation, checked and
// redacted, plus the tool schemas and the output cap the broker chose); the provider builds the
// provider's request body from an allow-list, sends it (credentials, streaming, retries), and
// returns one provider-neutral assistant turn. Runs in cagent (trusted), on the broker's
// io_context thread.
//
// Credentials are read from the caller's environment (or config) when the provider is made and
// never leave this object: not in a message to the agent, not in a log line, not in an error text.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/money.h"
#include "common/protocol.h"
#include "common/result.h"

namespace cagent::launcher::model {

// Which provider and model, parsed from `--model SPEC`:
//   openai:MODEL        OpenAI-compatible chat completions (OPENAI_API_KEY, OPENAI_BASE_URL,
//                       default https://api.openai.com/v1)
//   anthropic:MODEL     Anthropic messages (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL,
//                       default https://api.anthropic.com)
//   replay:FILE         plays a recorded session (JSON Lines, one neutral assistant turn a line)
//
// Replay turn format (one JSON object per non-blank line; see replay_provider.h):
//   {"text": "I will read the test first.",
//    "tool_calls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "test_calc.py"}}],
//    "stop_reason": "tool_calls",
//    "usage": {"input_tokens": 812, "output_tokens": 40}}
// "text" and "tool_calls" are optional (at least one is present); "usage" may also give
// cache_read_tokens, cache_write_tokens and reasoning_tokens; "stop_reason" is optional
// (tool_calls when there are calls, else end); a turn without tool calls is a final answer.
// Asking for a turn past the end is a provider error naming the file and its length.
// The request shape a model takes. Chosen by the model's entry in models.toml, else by its
// provider and a documented list of names (DefaultFamily, model_config.h).
enum class ModelFamily : std::uint8_t {
  kOpenAiChat,       // chat completions: max_tokens, temperature
  kOpenAiReasoning,  // chat completions: max_completion_tokens, reasoning_effort, no temperature
  kAnthropic,        // messages; extended thinking when a thinking budget is set
  kReplay,           // a recorded session
};

struct ModelSpec {
  std::string provider;                           // "openai" | "anthropic" | "replay"
  std::string model;                              // model name, or the replay file's path
  ModelFamily family = ModelFamily::kOpenAiChat;  // ParseModelSpec sets the provider's default
  std::string base_url;  // overrides the environment's; empty = from environment or default
  bool stream = true;    // use SSE towards the provider (the agent always gets the whole turn)
  std::uint64_t context_window = 0;     // 0 = the provider's known default for the model
  std::uint64_t max_output_tokens = 0;  // per response; 0 = default (4096)
  std::optional<double> temperature;    // sent only when set (--temperature)
  std::chrono::milliseconds request_timeout{300000};  // per attempt: connect to the last byte
  // On 429 / 5xx / connection failure, with exponential backoff + jitter; not when a loopback
  // base URL refuses the connection (no local server: the call fails at once).
  int max_retries = 4;
  // Backoff before retry n (1-based): a random delay in [d/2, d] with d = initial * 2^(n-1),
  // capped at retry_max_backoff; a 429/503's Retry-After (seconds) replaces it, capped the same.
  std::chrono::milliseconds retry_initial_backoff{1000};
  std::chrono::milliseconds retry_max_backoff{60000};
  // An extra PEM file of CAs to trust besides the system store (a company proxy, a test CA).
  std::string ca_file;
  // openai-reasoning: sent as reasoning_effort (minimal, low, medium, high); "" = not sent.
  std::string reasoning_effort;
  // anthropic: extended thinking with this many tokens of budget, kept inside each call's
  // max_tokens (a call whose cap leaves no room for 1024 tokens of thinking and an answer is sent
  // without thinking); 0 = off.
  std::uint64_t thinking_budget = 0;
  // anthropic: cache_control breakpoints on the tools, the system text and the conversation.
  bool prompt_caching = true;
  // Prices from models.toml; nullopt = unknown (a money budget then refuses to start).
  std::optional<TokenPrices> prices;
  std::string config_entry;  // "models.toml:12" of the entry that applied, or ""
};
Result<ModelSpec> ParseModelSpec(const std::string& spec);

// One model call as the broker asks for it. Everything here is the broker's choice except the
// message texts, which are the agent's (content): the provider must not add anything the agent
// could steer.
struct ModelRequest {
  std::string system;                           // system text (redacted)
  std::vector<protocol::ChatMessage> messages;  // checked and redacted by the broker
  // Provider-neutral schemas ({"name", "description", "parameters"}) of exactly the tools the
  // policy enables, plus finish (common/tool_schemas.h).
  nlohmann::json tools = nlohmann::json::array();
  std::uint64_t max_tokens = 0;  // the output cap for this call (> 0), already within budget
};

struct ModelResponse {
  protocol::AssistantTurn turn;  // neutral; every tool call has a non-empty id unique in the turn
  protocol::Usage usage;
  std::string provider_stop_reason;  // the provider's own word ("stop", "end_turn", ...)
  // The provider's (assembled, non-streaming) response body, for the audit log only; for replay
  // the recorded turn.
  nlohmann::json raw = nlohmann::json::object();
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
  virtual void Call(ModelRequest request, std::function<void(ModelOutcome)> done) = 0;
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

}  // namespace cagent::launcher::model
