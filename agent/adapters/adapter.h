// Adapter: turns the agent's Conversation into one provider's request body and that provider's
// non-streaming response body back into an assistant turn (cagent-agent, inside the sandbox).
//
// Adapters only build and parse JSON: the broker does the transport (model name, credentials,
// streaming, retries). A response body comes from the provider through the broker and is
// untrusted: Parse() validates every field it reads and never throws.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "agent/conversation.h"
#include "common/protocol.h"
#include "common/result.h"

namespace cagent::agent {

// One parsed model response.
struct AssistantTurn {
  std::string text;                  // the answer's text (concatenated text parts)
  std::vector<ToolCall> tool_calls;  // in the order the model made them
  std::string stop_reason;           // the provider's word: "stop", "tool_calls", "end_turn"...
  bool truncated = false;            // the response hit the output-token limit
  protocol::Usage usage;             // zero when the provider reported none
  bool usage_reported = false;
};

class Adapter {
 public:
  virtual ~Adapter() = default;
  // "openai" | "anthropic" | "replay".
  [[nodiscard]] virtual std::string_view provider() const = 0;
  // The request body for the next model call. `tools` are provider-neutral schemas
  // ([{"name", "description", "parameters"}], as Toolbox::Schemas returns them).
  [[nodiscard]] virtual nlohmann::json BuildRequest(const Conversation& conversation,
                                                    const nlohmann::json& tools) const = 0;
  // Parses a response body. Fails (with the provider's own error text when the body is an error
  // object) when the body is not a response this adapter understands.
  [[nodiscard]] virtual Result<AssistantTurn> Parse(const nlohmann::json& body) const = 0;
};

struct AdapterOptions {
  std::uint64_t max_output_tokens = 4096;  // 0 = 4096
};

// The adapter for welcome.model.provider; fails naming the provider when it is unknown.
Result<std::unique_ptr<Adapter>> MakeAdapter(std::string_view provider, AdapterOptions options);

// Shared by the adapters: arguments that arrived as a JSON string (OpenAI's function.arguments).
// Sets call.arguments, or call.arguments_error (and {}) when the text is not a JSON object. An
// empty or blank string means no arguments ({}), which some servers send for parameterless calls.
void SetArgumentsFromString(ToolCall& call, std::string_view text);
// The same for arguments that arrived as JSON already: an object is taken, anything else is an
// arguments_error.
void SetArgumentsFromJson(ToolCall& call, const nlohmann::json& value);

}  // namespace cagent::agent
