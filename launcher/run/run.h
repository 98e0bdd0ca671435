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

// The whole record (result.json).
struct RunRecord {
  std::string run_id;
  std::uint64_t sequence = 0;  // the run's number (state_dir.h): the order of `cagent runs`
  RunState state = RunState::kCreated;
  std::string reason;  // why it failed / was cancelled
  std::string run_dir;
  std::string profile;
  std::string profile_file;    // the file compiled (absolute, or "<built-in>/NAME.cagent")
  std::string profile_sha256;  // of that file's text
  // The profile's `outputs` globs as written: `cagent apply` lets untracked files there be.
  std::vector<std::string> outputs;
  bool profile_from_repository = false;
  std::string policy_digest;
  std::string repo;
  std::string base_commit;
  bool carried_dirty = false;
  std::vector<std::string> carried_paths;
  std::string task_file;
  std::string model;
  std::string agent_summary;
  CapturedPatch patch;  // patch text itself lives in patch.diff
  std::vector<PatchViolation> violations;
  std::vector<VerifyEntry> verification;
  // The profile's setup commands: before the agent on the workspace, and again on the
  // verification tree before the verify commands (its own entries, tree set).
  std::vector<VerifyEntry> setup;
  std::vector<VerifyEntry> verify_setup;
  broker::BudgetUsage used;
  broker::Budgets budgets;
  std::vector<std::string> layers;      // sandbox layers active
  std::vector<std::string> downgrades;  // restrictions applied only in part
  // The host-side guards of the agent's sandbox (SandboxOutcome): the git guard in words, and what
  // cagent found and undid after it exited (planted repositories, cleared setuid/setgid bits).
  std::string git_guard;
  std::vector<std::string> host_findings;
  std::vector<std::string> planted_repositories;
  std::vector<std::string> cleared_files;
  // Git configuration files the agent's sandbox changed that cagent rewrote before capture, with
  // the keys it dropped (launcher/guard/git_config_guard.h).
  std::vector<GitConfigRewrite> git_config_rewrites;
  std::uint64_t denials = 0;
  std::uint64_t approvals_asked = 0;
  // The agent's filtered egress (a profile with a hosts section), null without: relayed and
  // refused connections, bytes each way, the hosts reached, why the proxy stopped early. Every
  // connection is an `egress` event in the event log.
  nlohmann::json egress;
  // needs-approval: the action that stopped the run, and the pre-approval that allows exactly it.
  std::optional<broker::ApprovalRequest> needs_approval;
  std::string created_at;
  std::string finished_at;
  std::uint64_t event_log_entries = 0;
  // Digest of the log's last line when the result was written: the chain alone cannot show lines
  // cut from the end or an edited last line; this and the entry count can.
  std::string event_log_head;
  std::uint64_t event_log_lost = 0;

  [[nodiscard]] nlohmann::json ToJson() const;
  [[nodiscard]] bool verification_failed() const;
};

// Runs it, along run_state.h's edges. An error Result only when the run could not even be created:
// its inputs are wrong (an unreadable or empty task file, a profile that does not compile, a
// budget above the profile's: Error::Code::kInvalidInput; a profile without verify commands and no
// allow_unverified) or its state directory cannot be made. Everything after that is recorded in the
// RunRecord (a final state and its reason) and in result.json.
Result<RunRecord> ExecuteRun(const RunRequest& request,
                             const std::function<void(const RunProgress&)>& on_progress);

}  // namespace cagent::launcher::run
