#include "launcher/run/run_state.h"

#include <array>
#include <cstddef>

namespace cagent::launcher::run {
namespace {

constexpr std::array<std::string_view, kRunStateCount> kStateNames = {
    "created", "preparing", "running",        "verifying", "completed",
    "failed",  "cancelled", "needs-approval", "no-change"};
constexpr std::array<std::string_view, kRunEventCount> kEventNames = {
    "start",  "prepared",  "agent-done",     "verified",
    "failed", "cancelled", "needs-approval", "no-change"};

}  // namespace

std::string_view RunStateName(RunState state) {
  return kStateNames[static_cast<std::size_t>(state)];
}

std::optional<RunState> ParseRunState(std::string_view name) {
  for (std::size_t i = 0; i < kStateNames.size(); ++i) {
    if (kStateNames[i] == name) return static_cast<RunState>(i);
  }
  return std::nullopt;
}

std::string_view RunEventName(RunEvent event) {
  return kEventNames[static_cast<std::size_t>(event)];
}

std::optional<RunState> Next(RunState from, RunEvent event) {
  switch (from) {
    case RunState::kCreated:
      if (event == RunEvent::kStart) return RunState::kPreparing;
      break;
    case RunState::kPreparing:
      if (event == RunEvent::kPrepared) return RunState::kRunning;
      if (event == RunEvent::kFailed) return RunState::kFailed;
      break;
    case RunState::kRunning:
      if (event == RunEvent::kAgentDone) return RunState::kVerifying;
      if (event == RunEvent::kFailed) return RunState::kFailed;
      if (event == RunEvent::kCancelled) return RunState::kCancelled;
      if (event == RunEvent::kNeedsApproval) return RunState::kNeedsApproval;
      if (event == RunEvent::kNoChange) return RunState::kNoChange;
      break;
    case RunState::kVerifying:
      if (event == RunEvent::kVerified) return RunState::kCompleted;
      if (event == RunEvent::kFailed) return RunState::kFailed;
      break;
    case RunState::kCompleted:
    case RunState::kFailed:
    case RunState::kCancelled:
    case RunState::kNeedsApproval:
    case RunState::kNoChange:
      break;  // final: nothing leaves
  }
  return std::nullopt;
}

bool CanTransition(RunState from, RunState to) {
  for (int e = 0; e < kRunEventCount; ++e) {
    if (Next(from, static_cast<RunEvent>(e)) == to) return true;
  }
  return false;
}

bool IsFinal(RunState state) {
  return state == RunState::kCompleted || state == RunState::kFailed ||
         state == RunState::kCancelled || state == RunState::kNeedsApproval ||
         state == RunState::kNoChange;
}

ExitCode ExitCodeFor(RunState state, bool verification_failed) {
  switch (state) {
    case RunState::kCompleted:
      return ExitCode::kOk;
    case RunState::kCancelled:
      return ExitCode::kCancelled;
    case RunState::kNeedsApproval:
      return ExitCode::kNeedsApproval;
    case RunState::kNoChange:
      return ExitCode::kNoChange;
    case RunState::kFailed:
      return verification_failed ? ExitCode::kFailed : ExitCode::kRunFailed;
    default:
      return ExitCode::kRunFailed;
  }
}

}  // namespace cagent::launcher::run
