// OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, llama.cpp server, LM Studio...).
// cagent-agent, inside the sandbox; builds and parses JSON only.
//
// Request: {"messages": [...], "tools": [{"type": "function", "function": {name, description,
// parameters}}], "max_tokens": N}. Roles: system, user, assistant (content + tool_calls with the
// arguments as a JSON string), tool (tool_call_id, content).
//
// The output cap is sent as "max_tokens", not "max_completion_tokens": every OpenAI-compatible
// server the adapter targets (Ollama, vLLM, llama.cpp, LM Studio) understands max_tokens, while
// max_completion_tokens is a newer OpenAI-only name that several of them ignore or reject. OpenAI
// still accepts max_tokens for chat models; its reasoning models that insist on the new name can
// be served by a broker that renames the field.
#pragma once

#include "agent/adapters/adapter.h"

namespace cagent::agent {

class OpenAiAdapter final : public Adapter {
 public:
  explicit OpenAiAdapter(AdapterOptions options) : options_(options) {}
  [[nodiscard]] std::string_view provider() const override { return "openai"; }
  [[nodiscard]] nlohmann::json BuildRequest(const Conversation& conversation,
                                            const nlohmann::json& tools) const override;
  // Reads choices[0].message (content: string, null or an array of text parts; tool_calls),
  // choices[0].finish_reason ("length" = truncated) and usage.prompt_tokens/completion_tokens.
  // Arguments that are not a JSON object become ToolCall::arguments_error, not a failure. A tool
  // call without an id gets an empty id (the loop assigns one).
  [[nodiscard]] Result<AssistantTurn> Parse(const nlohmann::json& body) const override;

 private:
  AdapterOptions options_;
};

}  // namespace cagent::agent
