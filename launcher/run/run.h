// A run: `cagent run --profile P task.md`, end to end. Runs in cagent (trusted).
//
//   created -> preparing -> running -> verifying -> completed | failed | cancelled | needs-approval
//   (the states and the edges between them: run_state.h)
//
// preparing: resolve the repository, pin the base commit, materialise the disposable workspace
// under the run directory; running: the agent under the broker in a sandbox (AgentSession);
// then cagent — not the agent — captures the change set with git and applies the profile's path
// and size rules to it; verifying: the profile's commands in fresh sandboxes. Every transition is
// an event in the run's hash-chained log (events.jsonl, the same chain as the broker's audit
// entries). The result is result.json in the run directory.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/broker/broker.h"
#include "launcher/guard/git_config_guard.h"
#include "launcher/run/run_record.h"
#include "launcher/run/run_state.h"
#include "launcher/run/verify.h"
#include "launcher/run/workspace.h"

namespace cagent::launcher::run {

struct RunRequest {
  std::string profile;  // name or file
  std::string task_file;
  std::string repo;    // "" = the current directory
  std::string commit;  // "" = HEAD
  bool allow_dirty = false;
  bool allow_unverified = false;    // accept a profile without verify commands (else refused)
  bool trust_repo_profile = false;  // accept ./.cagent/NAME shadowing a user/built-in NAME
  model::ModelSpec model;
  std::string model_label;  // as given on the command line
  broker::ApprovalMode approval = broker::ApprovalMode::kPolicy;
  std::vector<std::string> pre_approvals;
  std::vector<egress::ResolveOverride> resolve;  // --resolve, for the egress proxy
  std::string pre_approval_file;
  broker::Budgets budget_overrides;
  int tty_fd = -1;     // approvals; -1 = headless
  int events_fd = -1;  // --events-jsonl: every event line as it is logged; -1 = none
  // --verbose: every entry of the event log, with its transcript, as it is logged
  // (AuditLog::SetObserver); empty = none.
  broker::AuditLog::Observer on_entry;
  std::string state_dir;  // "" = session::StateDirectory() (state_dir.h)
  std::string run_id;     // "" = a new one
};

// What the operator's display is told; called from the run's threads one at a time.
struct RunProgress {
  RunState state = RunState::kCreated;
  std::uint64_t turn = 0;
  std::uint64_t max_turns = 0;
  std::uint64_t tool_calls = 0;
  std::chrono::milliseconds elapsed{0};
  std::string last_action;
};

// Runs it, along run_state.h's edges. An error Result only when the run could not even be created:
// its inputs are wrong (an unreadable or empty task file, a profile that does not compile, a
// budget above the profile's: Error::Code::kInvalidInput; a profile without verify commands and no
// allow_unverified) or its state directory cannot be made. Everything after that is recorded in the
// RunRecord (a final state and its reason) and in result.json.
Result<RunRecord> ExecuteRun(const RunRequest& request,
                             const std::function<void(const RunProgress&)>& on_progress);

}  // namespace cagent::launcher::run
