// The agent's ReAct loop (cagent-agent, inside the sandbox; single-threaded, blocking).
//
// Per turn: compact the context if needed (progress "compacting"), progress "thinking",
// model_call with the adapter's request (the enabled tools' schemas plus `finish`), parse. A turn
// without tool calls is a final answer (outcome "done"); a truncated or empty one gets a nudge
// instead. Each tool call, in order:
//   - `finish`: ends the loop: finish{"done", summary}; later calls of the turn are not run.
//   - unusable arguments (adapter's arguments_error) or a tool this run does not enable: answered
//     with an error result directly; nothing to decide, nothing runs.
//   - Toolbox::Prepare refuses (bad path, outside the workspace, denied path...): the refusal is
//     the result, NOT asked of the broker (nothing will run, so there is nothing to decide), but
//     reported as progress{"refused", "TOOL: CODE"} so the operator and the audit log see it.
//   - otherwise tool_request with the prepared paths; deny (or an ask the approval denies): the
//     broker's message is the result, marked error; a loop_detected error reply likewise; allow:
//     Execute, tool_result{request id, ok, code, Render(), changed_paths}, and the broker's
//     redacted result_ack.output becomes the result the model sees.
// A shutdown at any point ends the loop with the broker's status; the turn budget
// (welcome.max_turns) ends it with finish{"gave_up", kMaxTurnsMessage}.
#pragma once

#include <cstdint>
#include <string>

#include "agent/adapters/adapter.h"
#include "agent/broker_client.h"
#include "agent/toolbox.h"
#include "common/protocol.h"

namespace cagent::agent {

inline constexpr const char* kMaxTurnsMessage =
    "max turns exceeded without the model signalling completion";

struct LoopOptions {
  std::size_t keep_recent_turns = 3;  // see ContextLimits
  double compaction_threshold = 0.75;
};

struct LoopResult {
  enum class Status : std::uint8_t {
    kDone,           // the model called finish or answered without tool calls
    kGaveUp,         // the turn budget ran out
    kEndedByBroker,  // shutdown, or a budget the broker reported exhausted
    kModelError,     // the provider failed or its answer could not be parsed
    kProtocolError,  // the broker connection failed or misbehaved
  };
  Status status = Status::kProtocolError;
  std::string message;      // why the loop ended, one line (the summary for kDone)
  std::uint64_t turns = 0;  // model calls answered

  // cagent-agent's exit code: 0 done, 3 ended by the broker or a budget, 4 model error,
  // 2 protocol failure.
  [[nodiscard]] int ExitCode() const;
};

// The `finish` tool's provider-neutral schema.
nlohmann::json FinishToolSchema();

// Runs the loop to its end. `welcome` is the broker's; its tools list selects the enabled tools
// (unknown names are ignored). Never throws.
LoopResult RunLoop(BrokerClient& client, Toolbox& toolbox, const Adapter& adapter,
                   const protocol::Welcome& welcome, const LoopOptions& options = {});

}  // namespace cagent::agent
