// cagent mcp serve: the agent's toolbox as an MCP server, each session in its own sandbox, every
// call decided by the broker. Runs in cagent (trusted).
//
// One MCP session = one served agent session (agent_session.h with a CallSource): a sandbox made
// from the profile with cagent-agent inside in serve mode, kept warm for the whole MCP session,
// and a broker outside it with the same engine, approvals, budgets, loop detection, redaction and
// hash-chained audit log as `cagent run`. The MCP side (launcher/mcp/: the session, the stdio or
// Streamable HTTP transport) runs on its own io_context thread; each agent session has its own
// (agent_session.cc); the bridge between them (mcp_serve.cc) passes calls, answers, cancellations
// and approval questions across with posts, never sharing state without its lock.
//
//   tools/list      the toolbox tools the profile enables (finish is not offered), with their
//                   schemas, an output schema for structuredContent and honest annotations
//   tools/call      a call of the session's turn; its answer is the tool's output (isError when the
//                   tool failed), a denial naming the rule (isError), the toolbox's own refusal
//                   (isError), or a JSON-RPC error when the session ended first
//   progress        every progress_interval while a call runs, when the client gave a token
//   cancellation    notifications/cancelled: a running command's process group is killed, a call
//                   not started is not run
//   ask             elicitation (form mode) when the client declared it; else the --approve mode:
//                   a terminal prompt on cagent's tty, never (denied), stop (denied, and the
//                   session ends needs-approval); the profile's `approval` setting still applies
//                   first (never-ask denies without asking)
//   the end         the client closing stdin (stdio) or the session (HTTP) ends the agent session
//                   (finished); a budget, the sandbox failing, a signal end the MCP session with a
//                   JSON-RPC error for every call in progress and, on stdio, close stdout
// Each session's records are in `<state>/mcp/<session id>/`: events.jsonl (the audit log, read
// it with `cagent log DIR`), agent.log, session.json (a summary written at the end).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/broker/approver.h"
#include "launcher/broker/broker.h"
#include "launcher/egress/proxy.h"
#include "policy/language/binding.h"
#include "policy/language/ir.h"

namespace cagent::launcher::mcp {

struct McpServeOptions {
  std::shared_ptr<const policy::Policy> policy;
  policy::Binding binding;  // RunBinding(workspace)
  // kPolicy: ask on `tty_fd` (when >= 0) where the client cannot elicit; kNever: denied; kStop:
  // denied, and the session ends needs-approval.
  broker::ApprovalMode approval = broker::ApprovalMode::kPolicy;
  int tty_fd = -1;
  std::vector<std::string> pre_approvals;  // "TOOL: PATTERN" / "sha256:DIGEST"
  std::string pre_approval_file;
  broker::Budgets budget_overrides;  // may only lower the profile's
  std::vector<egress::ResolveOverride> resolve;
  std::string agent_binary;  // "" = session::FindAgentBinary()
  std::string state_dir;     // "" = session::StateDirectory()

  // Transport: stdio on in_fd/out_fd when `listen_port` is 0 and `listen_address` empty, else
  // Streamable HTTP on listen_address:listen_port (loopback only) with `bearer_token`.
  int in_fd = 0;
  int out_fd = 1;
  std::string listen_address;
  std::uint16_t listen_port = 0;
  std::string bearer_token;
  std::size_t max_sessions = 4;  // HTTP

  std::string server_version;
  std::chrono::milliseconds progress_interval{1000};
  // Lines for the operator (stderr): where a session's records are, where the server listens,
  // why a session ended. Called from any thread, one line at a time.
  std::function<void(const std::string&)> notice;
};

struct McpSessionSummary {
  std::string id;
  std::string dir;
  std::string client;  // "name version"
  broker::BrokerOutcome broker;
  std::uint64_t calls = 0;
};

struct McpServeResult {
  std::vector<McpSessionSummary> sessions;
};

// Serves until the client goes away (stdio) or a signal (SIGINT/SIGTERM/SIGHUP: every session
// ends, cancelled). An error Result means nothing could start (bad options, the listener, the
// state directory); what happens after is in the sessions' outcomes.
Result<McpServeResult> RunMcpServe(const McpServeOptions& options);

// The tools/list entries for `policy` (exported for tests and `cagent mcp serve --list-tools`).
struct McpToolInfo {
  std::string name;
  std::string description;
  nlohmann::json input_schema;
  nlohmann::json output_schema;
  nlohmann::json annotations;
};
std::vector<McpToolInfo> McpToolsFor(const policy::Policy& policy);

// The message of the elicitation/create request that asks the client's user about `request` (an
// `ask` of the profile): a header, broker::ApprovalDetails(request) (the rendering the terminal
// prompt shows too: the model's text escaped, on one line per field) and the question. Pure;
// exported for tests.
std::string ElicitationMessage(const broker::ApprovalRequest& request);

}  // namespace cagent::launcher::mcp
