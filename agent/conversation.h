// Conversation: the agent's provider-neutral message model (cagent-agent, inside the sandbox).
//
// One list of messages in order: the system prompt, the task (first user message), then turns of
// an assistant message (text and/or tool calls) followed by one tool message per call. The agent
// builds no provider format: ToModelCall() turns it into protocol v2's neutral model_call, and the
// broker alone builds the provider's request from it. Context management (agent/context.h)
// shrinks it. Nothing here does I/O.
//
// The conversation also keeps what context management pins across compactions (context.h): the
// task (the first user message, never rewritten), the model's plan (the last "Plan:" block it
// wrote, ExtractPlan) and the files the agent's file tools changed. The plan and the files are
// state here, not a message: they reach the model only in the summary a compaction writes.
//
// The broker checks what comes back in every model_call: each assistant message's tool calls must
// be calls the model issued in this session (same id, name and arguments), and each tool message
// must answer a call of the nearest assistant message before it, at most once. So the calls of an
// assistant message are kept exactly as the model_result gave them, and nothing here or in
// compaction rewrites them or separates a result from its call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
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
  // Workspace-relative files the tool wrote (write_file, edit_file: ToolOutcome::changed_paths).
  // run_command reports none: what a command changed is not known here.
  std::vector<std::string> changed_paths;
  bool stubbed = false;  // content was replaced by a "dropped" stub
};

struct Message {
  Role role = Role::kUser;
  std::string text;                  // system, user and assistant text (may be empty)
  std::vector<ToolCall> tool_calls;  // assistant only
  ToolResultContent result;          // tool only
  ToolResultInfo info;               // tool only
  bool pinned = false;               // never compacted (the system prompt and the task)
  bool summary = false;              // a user message written by compaction
  // summary only: the entries of the compacted turns, oldest first ("- read_file a.py -> ok"),
  // so the next compaction carries them forward without parsing `text` back (never sent).
  std::vector<std::string> summary_entries;
};

// How much of a plan is kept: lines, and bytes per line.
inline constexpr std::size_t kMaxPlanLines = 30;
inline constexpr std::size_t kMaxPlanLineBytes = 240;

// The plan in an assistant message's text: the last block that starts with a line "Plan:" (also
// "## Plan", "**Plan:**"; any case) followed by list items ("- ", "* ", "1. ", "1) "), and ends at
// the first blank or non-item line after them (an indented line continues the item before it).
// Returns the items, one per line, trimmed, at most kMaxPlanLines lines (then a line saying how
// many more) of at most kMaxPlanLineBytes bytes each; nullopt when the text has no such block.
// The system prompt asks the model for this format; the agent only reads it, so the plan needs no
// tool of its own (and so no schema the broker would have to offer).
std::optional<std::string> ExtractPlan(std::string_view text);

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
  // A plan in `text` (ExtractPlan) becomes the current plan.
  void AddAssistant(std::string text, std::vector<ToolCall> calls);
  // `info.changed_paths` join the files changed.
  void AddToolResult(ToolResultContent result, ToolResultInfo info);

  [[nodiscard]] const std::vector<Message>& messages() const { return messages_; }
  // For compaction, which rewrites the list in place.
  std::vector<Message>& mutable_messages() { return messages_; }

  // Sum of EstimateTokens over every message.
  [[nodiscard]] std::uint64_t EstimateTokens() const;
  // Assistant turns added so far (not reduced when compaction removes old ones).
  [[nodiscard]] std::uint64_t assistant_turns() const { return assistant_turns_; }

  // The model's latest plan (ExtractPlan of its latest assistant text that had one; "" before
  // any) and the assistant turn (1-based) that stated it (0 before any).
  [[nodiscard]] const std::string& plan() const { return plan_; }
  [[nodiscard]] std::uint64_t plan_turn() const { return plan_turn_; }
  // Every file the agent's file tools changed so far, sorted (commands may have changed others).
  [[nodiscard]] const std::set<std::string>& changed_files() const { return changed_files_; }

 private:
  std::vector<Message> messages_;
  std::uint64_t assistant_turns_ = 0;
  std::string plan_;
  std::uint64_t plan_turn_ = 0;
  std::set<std::string> changed_files_;
};

}  // namespace cagent::agent
