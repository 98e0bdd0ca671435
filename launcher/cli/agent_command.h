// `cagent agent`: run the agent on a task, in place, over a scratch directory, under the broker
// and in a sandbox built from a profile. The building block under `cagent run` without the
// disposable git workspace, patch capture and verification: what the agent writes stays in the
// directory. Runs in cagent (trusted).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/session_flags.h"

namespace CLI {
class App;
}

namespace cagent::launcher {

struct AgentOptions {
  std::string profile;
  bool trust_repo_profile = false;
  std::string workspace;
  std::string task_file;
  SessionFlags session;       // --model, --approve, --pre-approve, budgets
  std::string audit_log;      // default: $XDG_STATE_HOME/cagent/sessions/<id>.audit.jsonl
  bool json = false;
  bool quiet = false;
};

CLI::App* AddAgentCommand(CLI::App& app, AgentOptions& options);
int RunAgentCommand(const AgentOptions& options);

// Exit codes shared with `cagent run`.
inline constexpr int kExitAgentFailed = 1;
inline constexpr int kExitAgentNeedsApproval = 4;
inline constexpr int kExitAgentCancelled = 130;

// A fresh run id: UTC time plus random bits, "20261130T101500Z-3f9a1c".
std::string NewRunId();
// $XDG_STATE_HOME/cagent (or ~/.local/state/cagent), created 0700.
std::string StateDirectory();

}  // namespace cagent::launcher
