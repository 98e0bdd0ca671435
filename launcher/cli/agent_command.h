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

namespace cagent::launcher::cli {

struct AgentOptions {
  std::string profile;
  bool trust_repo_profile = false;
  std::string workspace;
  bool allow_home =
      false;  // --allow-home: accept the home directory (launcher/profile/workspace_guard.h)
  std::string task_file;
  SessionFlags session;   // --model, --approve, --pre-approve, budgets
  std::string audit_log;  // default: $XDG_STATE_HOME/cagent/sessions/<id>.audit.jsonl
  bool json = false;
  bool quiet = false;
  bool verbose = false;  // --verbose: the transcript (launcher/cli/transcript.h) on stderr
};

// Adds the `agent` subcommand to `app`; the options are written into `options`.
CLI::App* AddAgentCommand(CLI::App& app, AgentOptions& options);
// Runs `cagent agent`. Returns a status from common/exit_codes.h, the same as `cagent run` for the
// same outcome: kOk (the agent finished), kRunFailed (the session did not complete),
// kNeedsApproval, kCancelled, kUsage (bad flags, task file or profile), kSetupFailed (the session
// could not start).
int RunAgentCommand(const AgentOptions& options);

}  // namespace cagent::launcher::cli
