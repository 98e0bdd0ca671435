// `cagent agent`: run the agent on a task, in place, over a scratch directory, under the broker
// and in a sandbox built from a profile. The building block under `cagent run` without the
// disposable git workspace, patch capture and verification: what the agent writes stays in the
// directory. Runs in cagent (trusted).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace cagent::launcher {

struct AgentOptions {
  std::string profile;
  std::string workspace;
  std::string task_file;
  std::string model;          // PROVIDER:MODEL; default $CAGENT_MODEL
  std::string model_url;      // base URL override
  std::string approve = "policy";  // policy | never
  std::vector<std::string> pre_approve;
  std::string pre_approve_file;
  std::string audit_log;      // default: $XDG_STATE_HOME/cagent/sessions/<id>.audit.jsonl
  std::optional<std::uint64_t> max_turns, max_tool_calls, max_tokens, max_output;
  std::string wall_time;
  bool json = false;
  bool quiet = false;
};

CLI::App* AddAgentCommand(CLI::App& app, AgentOptions& options);
int RunAgentCommand(const AgentOptions& options);

// Exit codes shared with `cagent run`.
inline constexpr int kExitAgentFailed = 1;
inline constexpr int kExitAgentCancelled = 130;

// A fresh run id: UTC time plus random bits, "20261130T101500Z-3f9a1c".
std::string NewRunId();
// $XDG_STATE_HOME/cagent (or ~/.local/state/cagent), created 0700.
std::string StateDirectory();

}  // namespace cagent::launcher
