// The agent's ReAct loop (cagent-agent, inside the sandbox; single-threaded, blocking).
//
// Per turn: compact the context if needed (rarely: see context.h; progress "compacting" names the
// compaction's number, the turn and the estimate before and after), progress "thinking",
// model_call with the conversation alone (ToModelCall: system text and messages; the broker
// chooses the model, the tools offered and max_tokens), and the model_result's neutral turn comes
// back. A turn without tool calls is a final answer (outcome "done"), except: cut off at the output
// limit (stop_reason max_tokens) or empty gets a nudge instead; refused by the provider ends the
// loop as a model error (nothing was done, and a refusal is not a summary of finished work). The
// turn's calls are recorded exactly as given (ids are the broker's, never invented here) and run in
// order:
//   - `finish`: ends the loop: finish{"done", summary}; later calls of the turn are not run.
//   - unusable arguments (the broker's arguments_error) or a tool this run does not enable:
//     answered with an error result directly; nothing to decide, nothing runs, no tool_request.
//   - Toolbox::Prepare refuses (arguments not matching the tool's schema in common/tool_schemas.h,
//     bad path, outside the workspace, denied path...): the refusal is the result, NOT asked of the
//     broker (nothing will run, so there is nothing to decide), but reported as
//     progress{"refused", "TOOL: CODE"} so the operator and the audit log see it.
//   - otherwise tool_request{call id, name and arguments exactly as the turn gave them, the
//     prepared paths}; deny (or an ask the approval denies; also the broker's "model turn" rule
//     for a call it cannot bind to the latest turn): the broker's message is the result, marked
//     error; a loop_detected error reply likewise; allow: Execute, tool_result{request id, ok,
//     code, Render(), changed_paths}, and the broker's redacted result_ack.output becomes the
//     result the model sees.
// A shutdown at any point ends the loop with the broker's status; the turn budget
// (welcome.max_turns) ends it with finish{"gave_up", kMaxTurnsMessage}.
#pragma once

#include <cstdint>
#include <string>

#include "agent/broker_client.h"
#include "agent/toolbox.h"
#include "common/protocol.h"

namespace cagent::agent {

inline constexpr const char* kMaxTurnsMessage =
    "max turns exceeded without the model signalling completion";

struct LoopOptions {
  std::size_t keep_recent_turns = 3;   // see ContextLimits
  double compaction_threshold = 0.75;  // see ContextLimits::threshold
  double compaction_target = 0.5;      // see ContextLimits::target
};

struct LoopResult {
  enum class Status : std::uint8_t {
    kDone,           // the model called finish or answered without tool calls
    kGaveUp,         // the turn budget ran out
    kEndedByBroker,  // shutdown, or a budget the broker reported exhausted
    kModelError,     // the provider failed or refused to answer
    kProtocolError,  // the broker connection failed or misbehaved
  };
  Status status = Status::kProtocolError;
  std::string message;      // why the loop ended, one line (the summary for kDone)
  std::uint64_t turns = 0;  // model calls answered

  // cagent-agent's exit status, from the table of common/exit_codes.h: ok (0) done; run-failed
  // (3) when the session did not complete (ended by the broker or a budget, gave up, the model
  // failed; `message` says which); usage (2) when the broker connection failed or misbehaved.
  [[nodiscard]] int ExitCode() const;
};

// Runs the loop to its end. `welcome` is the broker's; its tools list selects the enabled tools
// (unknown names are ignored). Never throws.
LoopResult RunLoop(BrokerClient& client, Toolbox& toolbox, const protocol::Welcome& welcome,
                   const LoopOptions& options = {});

}  // namespace cagent::agent
