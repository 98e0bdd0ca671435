// The lifecycle of a run (`cagent run`) as an explicit state machine. Pure: no I/O.
//
//   created --start--> preparing --prepared--> running --agent-done--> verifying --verified-->
//   completed
//   preparing, running, verifying --failed--> failed
//   running --cancelled--> cancelled
//   running --needs-approval--> needs-approval
//   running --no-change--> no-change (the agent finished and the captured patch is empty)
//
// ExecuteRun (run.h) moves only along these edges: each step of the run returns the event that
// ended it, Next() says where that leads, and a final state ends the run (result.json). Nothing
// else changes a run's state, so a run that verified nothing can never be recorded "completed"
// without passing through verifying, and a finished run is never resumed.
#pragma once

#include <optional>
#include <string_view>

#include "common/exit_codes.h"

namespace cagent::launcher::run {

enum class RunState {
  kCreated,
  kPreparing,
  kRunning,
  kVerifying,
  kCompleted,
  kFailed,
  kCancelled,
  kNeedsApproval,
  kNoChange,
};
inline constexpr int kRunStateCount = 9;

// "created", "preparing", ..., "needs-approval": as written in result.json and events.jsonl.
[[nodiscard]] std::string_view RunStateName(RunState state);
// Inverse of RunStateName; nullopt for any other text.
[[nodiscard]] std::optional<RunState> ParseRunState(std::string_view name);

// What ends a step of the run.
enum class RunEvent {
  kStart,          // the run directory and its event log exist
  kPrepared,       // the base commit is pinned and the workspace materialised
  kAgentDone,      // the agent finished and its patch was captured within the profile's rules
  kVerified,       // every verify command passed (or the profile has none: --allow-unverified)
  kFailed,         // the step could not complete; the run's reason says why
  kCancelled,      // the session was interrupted (SIGINT/SIGTERM)
  kNeedsApproval,  // the session stopped at a request nobody could approve
  kNoChange,       // the agent finished and the captured patch changes nothing
};
inline constexpr int kRunEventCount = 8;

// "start", "prepared", ...: for test output and logs.
[[nodiscard]] std::string_view RunEventName(RunEvent event);

// The state `event` leads to from `from`; nullopt when the event cannot happen there (every event
// in a final state, kStart anywhere but created, ...).
[[nodiscard]] std::optional<RunState> Next(RunState from, RunEvent event);
// True when some event leads from `from` to `to`.
[[nodiscard]] bool CanTransition(RunState from, RunState to);
// completed, failed, cancelled, needs-approval, no-change: the run is over and result.json is
// written.
[[nodiscard]] bool IsFinal(RunState state);

// The exit status of `cagent run` (and `cagent show`) for a run that ended in `state`: kOk for
// completed, kFailed when verification ran and failed, kRunFailed for any other failure (and for a
// state that is not final), kNeedsApproval, kCancelled.
[[nodiscard]] ExitCode ExitCodeFor(RunState state, bool verification_failed);

}  // namespace cagent::launcher::run
