// Conversation: the agent's provider-neutral message model (cagent-agent, inside the sandbox).
//
// One list of messages in order: the system prompt, the task (first user message), then turns of
// an assistant message (text and/or tool calls) followed by one tool message per call. The agent
// builds no provider format: ToModelCall() turns it into protocol v2's neutral model_call, and the
// broker alone builds the provider's request from it. Context management (agent/context.h)
// shrinks it. Nothing here does I/O.
//
// The broker checks what comes back in every model_call: each assistant message's tool calls must
// be calls the model issued in this session (same id, name and arguments), and each tool message
// must answer a call of the nearest assistant message before it, at most once. So the calls of an
// assistant message are kept exactly as the model_result gave them, and nothing here or in
// compaction rewrites them or separates a result from its call.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/protocol.h"

namespace cagent::agent {

enum class Role : std::uint8_t { kSystem, kUser, kAssistant, kTool };

// A tool call the model made, exactly as the broker's model_result gave it: the id is the
// broker's (never invented here), `name` and `arguments` are the model's (untrusted), and a call
// with a non-empty `arguments_error` is never executed (the loop answers it with an error).
using ToolCall = protocol::ToolCall;

// The result of one tool call, as the model sees it.
struct ToolResultContent {
  std::string call_id;
  std::string content;
  bool is_error = false;
};

// What context management knows about a tool result (never sent to the provider).
struct ToolResultInfo {
  std::string tool;                // the tool's name
  std::string subject;             // its main argument, for stubs and summaries: path or command
  std::vector<std::string> paths;  // resolved workspace-relative paths (the ledger's keys)
  std::string error_code;          // "" when the call succeeded
  bool stubbed = false;            // content was replaced by a "dropped" stub
};

struct Message {
  Role role = Role::kUser;
  std::string text;                  // system, user and assistant text (may be empty)
  std::vector<ToolCall> tool_calls;  // assistant only
  ToolResultContent result;          // tool only
  ToolResultInfo info;               // tool only
  bool pinned = false;               // never compacted (the system prompt and the task)
  bool summary = false;              // a user message written by compaction
};

// Token estimate for one message: ceil(bytes / 4) of everything the provider will see (text,
// tool names, arguments as JSON, results) plus a fixed per-message (4) and per-call (8) overhead
// for the wire format's framing. An ESTIMATE only: real tokenisers differ by model (code and
// non-English text run denser); it is used to decide when to compact, with headroom.
std::uint64_t EstimateTokens(const Message& message);

class Conversation;

// The protocol v2 model_call for `conversation`: every system message's text, joined by a blank
// line, becomes `system`; user, assistant (text and tool calls, unchanged) and tool messages
// (call_id, the result text, is_error) become `messages`, in order. What context management knows
// about a result (ToolResultInfo) and the pinned/summary marks are not sent.
protocol::ModelCall ToModelCall(const Conversation& conversation);

class Conversation {
 public:
  // The first two are pinned: they survive every compaction.
  void AddSystem(std::string text);
  void AddTask(std::string text);
  void AddUser(std::string text);
  void AddAssistant(std::string text, std::vector<ToolCall> calls);
  void AddToolResult(ToolResultContent result, ToolResultInfo info);

  [[nodiscard]] const std::vector<Message>& messages() const { return messages_; }
  // For compaction, which rewrites the list in place.
  std::vector<Message>& mutable_messages() { return messages_; }

  // Sum of EstimateTokens over every message.
  [[nodiscard]] std::uint64_t EstimateTokens() const;
  // Assistant turns added so far (not reduced when compaction removes old ones).
  [[nodiscard]] std::uint64_t assistant_turns() const { return assistant_turns_; }

 private:
  std::vector<Message> messages_;
  std::uint64_t assistant_turns_ = 0;
};

}  // namespace cagent::agent
