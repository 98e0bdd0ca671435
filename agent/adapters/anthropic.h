// Anthropic messages API. cagent-agent, inside the sandbox; builds and parses JSON only.
//
// Request: {"system": "...", "messages": [...], "tools": [{name, description, input_schema}],
// "max_tokens": N}. Messages alternate user/assistant with content blocks: the assistant's text
// and tool_use blocks; the results of one turn's calls as tool_result blocks (tool_use_id,
// content, is_error) in ONE following user message. Consecutive messages of the same role
// (results followed by a compaction summary or a nudge) are merged into one message, tool_result
// blocks first, as the API requires.
#pragma once

#include "agent/adapters/adapter.h"

namespace cagent::agent {

class AnthropicAdapter final : public Adapter {
 public:
  explicit AnthropicAdapter(AdapterOptions options) : options_(options) {}
  [[nodiscard]] std::string_view provider() const override { return "anthropic"; }
  [[nodiscard]] nlohmann::json BuildRequest(const Conversation& conversation,
                                            const nlohmann::json& tools) const override;
  // Reads content blocks (text, tool_use; others such as thinking are skipped), stop_reason
  // ("max_tokens" = truncated) and usage.input_tokens/output_tokens. A tool_use whose input is not
  // an object becomes ToolCall::arguments_error, not a failure.
  [[nodiscard]] Result<AssistantTurn> Parse(const nlohmann::json& body) const override;

 private:
  AdapterOptions options_;
};

}  // namespace cagent::agent
