// Replay: plays a recorded model session (tests, demos, reproducing a run). cagent-agent, inside
// the sandbox. The broker reads the recording (launcher/broker/model_provider.h describes the
// format) and returns one turn per model_call; this adapter parses that turn:
//   {"text": "...", "tool_calls": [{"id": "call_1", "name": "read_file",
//    "arguments": {"path": "calc.py"}}], "usage": {"input_tokens": 812, "output_tokens": 40}}
#pragma once

#include "agent/adapters/adapter.h"

namespace cagent::agent {

class ReplayAdapter final : public Adapter {
 public:
  [[nodiscard]] std::string_view provider() const override { return "replay"; }
  // {"turn": n}, n = the 1-based number of the turn asked for (the broker ignores the body; it
  // makes the audit log readable).
  [[nodiscard]] nlohmann::json BuildRequest(const Conversation& conversation,
                                            const nlohmann::json& tools) const override;
  // Fails when neither "text" nor "tool_calls" is present or a field has the wrong type; arguments
  // may be an object or a JSON string (an unusable value becomes ToolCall::arguments_error).
  [[nodiscard]] Result<AssistantTurn> Parse(const nlohmann::json& body) const override;
};

}  // namespace cagent::agent
