// AgentSession: one agent run under the broker, in a sandbox over a workspace directory. Runs in
// cagent (trusted). This is the middle of `cagent run` (which adds the disposable git workspace,
// patch capture and verification around it) and all of `cagent agent` (which runs in place on a
// scratch directory).
//
// Threads: the calling thread builds and supervises the sandbox (RunSandbox must stay on the
// thread that created it: the sandbox's death signal is tied to it); a second thread runs the
// broker's io_context and handles SIGINT/SIGTERM/SIGHUP, which cancel the run. Whichever side ends
// first stops the other: the broker ending (finish, budget, protocol abuse, cancel) stops the
// sandbox through an eventfd; the sandbox ending (the agent exited or crashed) stops the broker.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/broker/broker.h"
#include "launcher/egress/proxy.h"
#include "launcher/model/model_provider.h"
#include "launcher/sandbox/sandbox.h"
#include "policy/language/ir.h"

namespace cagent::launcher::session {

struct AgentSessionOptions {
  std::string run_id;
  std::shared_ptr<const policy::Policy> policy;
  // The run's binding (RunBinding): the workspace (canonical; bound at the same path inside),
  // what "~" means, the sandbox's HOME. The view, the broker's engine and the agent use it alike.
  policy::Binding binding;
  // The profile's caches (launcher/profile/caches.h) and carried paths (`carry`): ProfileContext's
  // cache_root and carry_from for the agent's sandbox. "" = not mounted.
  std::string cache_root;
  // The caches' per-repository key (ProfileContext::cache_scope); "" = the workspace's repository.
  std::string cache_scope;
  std::string carry_from;
  std::string task;  // the task text (untrusted)
  model::ModelSpec model;
  broker::ApprovalMode approval = broker::ApprovalMode::kPolicy;
  std::vector<std::string> pre_approvals;  // "TOOL: PATTERN" lines from the command line
  std::string pre_approval_file;           // "" = none
  broker::Budgets budget_overrides;        // may only lower the profile's
  std::string audit_log_path;              // created (0600); must not exist
  bool resume_audit_log = false;           // append to an existing chain instead
  // An audit log already open (the run's event log, shared with the run's own state events);
  // when set, audit_log_path is ignored. Not owned.
  broker::AuditLog* audit = nullptr;
  // Observes the log this session opens (audit_log_path): `cagent agent --verbose`. With `audit`
  // set, that log's own observer applies instead.
  broker::AuditLog::Observer on_entry;
  std::string agent_binary;  // "" = FindAgentBinary()
  // Terminal for approval prompts (cagent's /dev/tty); -1 = headless.
  int tty_fd = -1;
  // The operator's display: one line per broker event. Called on the broker's thread.
  std::function<void(const broker::BrokerEvent&)> on_event;
  // The agent's stdout and stderr go here (created 0600, appended); "" = cagent's stderr. Its
  // stdin is always /dev/null: the operator's terminal belongs to the approval prompts.
  std::string agent_log_path;
  // The operator's --resolve overrides for the egress proxy (a profile with a hosts section).
  std::vector<egress::ResolveOverride> resolve;
  // Extra agent arguments (tests).
  std::vector<std::string> agent_args;

  // ---- a served session (cagent mcp serve; mcp/serve/serve.h) instead of a model loop ----
  // Where the calls come from (BrokerConfig::serve); `model` and `task` are then unused. Not
  // owned; used on the session's io thread.
  broker::CallSource* calls = nullptr;
  std::string client_name;  // the MCP client's name, shown as the "model" of the session
  // Makes the approver (asks and hosts) on the session's io_context instead of the terminal or
  // headless one chosen from `approval` and `tty_fd`.
  std::function<std::unique_ptr<broker::Approver>(boost::asio::io_context&)> make_approver;
  // Called on the session's io thread once the broker has started (e.g. to keep it for
  // Broker::CancelCall and the io_context to post to); then, after the io thread has stopped and
  // before the io_context is destroyed, called with nullptrs from the calling thread.
  std::function<void(boost::asio::io_context*, broker::Broker*)> on_broker;
  // SIGINT/SIGTERM/SIGHUP/SIGQUIT cancel the session (false: the caller handles them and ends
  // the session through its CallSource).
  bool handle_signals = true;
};

struct AgentSessionResult {
  broker::BrokerOutcome broker;
  SandboxOutcome sandbox;
  std::vector<std::string> notes;  // from the profile's launch spec
  std::uint64_t audit_entries = 0;
  std::uint64_t audit_lost = 0;
  std::string audit_head;  // AuditLog::head() at the end: the digest of the log's last line
  std::string policy_digest;
  // Filtered egress (a profile with a hosts section): every connection, and why the proxy
  // stopped early ("" = it did not).
  bool egress = false;
  std::vector<egress::ConnectionRecord> egress_connections;
  std::string egress_budget_exhausted;
  // issue 36: the credentials that had a value (names), the optional ones skipped, and every
  // request read on an intercepted connection.
  std::vector<std::string> credentials_loaded;
  std::vector<std::string> credentials_skipped;
  std::vector<egress::ExchangeRecord> egress_exchanges;
};

// Where cagent-agent is: $CAGENT_AGENT_BINARY, else beside cagent in the build tree
// (<exe dir>/../agent/cagent-agent), else the installed <exe dir>/../libexec/cagent/cagent-agent.
Result<std::string> FindAgentBinary();

// Runs the session to its end. An error Result means the session could not start (bad options,
// unreadable files, the provider could not be made); everything after the start is an outcome.
Result<AgentSessionResult> RunAgentSession(const AgentSessionOptions& options);

}  // namespace cagent::launcher::session
