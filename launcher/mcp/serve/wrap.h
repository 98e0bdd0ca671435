// McpWrap: `cagent mcp wrap --profile P -- CMD ARGS...`: a stdio MCP server nobody here wrote, run
// inside the sandbox the profile describes (its view, network and `hosts` rules through the egress
// proxy), with cagent relaying JSON-RPC between the MCP client (cagent's own stdin/stdout) and the
// server (the sandbox's stdin/stdout pipes). Every client tools/call is decided by the profile's
// tools rules by MCP tool name (`allow|ask|deny mcp:GLOB`, broker/mcp_gate.h), asked through the
// approver, counted against the tool-call budget and audited; tools/list offers only the tools
// the profile does not deny. Runs in cagent (trusted).
//
// Threads: the calling thread builds and supervises the sandbox (RunSandbox: the sandbox's death
// signal is tied to it); a second thread runs one io_context with the relay
// (launcher/mcp/protocol/relay.h), the gate, the approver, the egress proxy's asks and the audit
// log, and handles SIGINT, SIGTERM, SIGHUP and SIGQUIT (they end the session). The session ends
// when
//   - the client closes cagent's stdin (a client that is done, or the end of a file of requests):
//     the server's stdin is closed, its answers still reach the client, it gets kMcpStopGrace to
//     exit by itself, then the sandbox is stopped (SIGTERM, the profile's kill grace, SIGKILL);
//   - the server exits or closes its stdout: what is queued for the client is flushed (requests
//     still in progress are answered with -32603), then cagent's stdout is closed;
//   - a signal arrives, or writing to either side fails: the sandbox is stopped at once.
// cagent must ignore SIGPIPE (launcher/cli/main.cc does): a peer that closed its end is an error
// on the write, not a signal.
//
// The session's record: session::StateDirectory()/mcp/<run id>/ (mode 0700) with events.jsonl, the
// hash-chained audit log (`cagent log check DIR/events.jsonl`): mcp_call / approval / mcp_result /
// mcp_list / budget / egress events, and a closing shutdown event.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/broker/broker.h"
#include "launcher/egress/proxy.h"
#include "launcher/mcp/protocol/relay.h"
#include "launcher/sandbox/sandbox.h"
#include "policy/language/ir.h"

namespace cagent::launcher::mcp {

// How long a server whose client went away may take to exit by itself before it is stopped.
inline constexpr std::chrono::seconds kMcpStopGrace{2};

struct McpWrapOptions {
  // The compiled profile (not null). Its view, network, environment and limits make the sandbox;
  // its tools rules' mcp: words decide the calls; its hosts section turns on filtered egress.
  std::shared_ptr<const policy::Policy> policy;
  // The binding (RunBinding(workspace), workspace canonical): the sandbox's view and the engine.
  policy::Binding binding;
  // The server's command line, run inside the sandbox (argv[0] searched in the sandbox's PATH).
  std::vector<std::string> argv;
  broker::ApprovalMode approval = broker::ApprovalMode::kPolicy;
  // cagent's terminal (/dev/tty) for asks, or -1 (headless: asks are denied unless pre-approved).
  // Not owned; must stay open until RunMcpWrap returns.
  int tty_fd = -1;
  std::vector<std::string> pre_approvals;  // --pre-approve lines ("sha256:DIGEST", "host: ...")
  std::string pre_approval_file;           // "" = none
  broker::Budgets budget_overrides;        // may only lower the profile's (tool_calls is used)
  std::vector<egress::ResolveOverride> resolve;  // --resolve, for the egress proxy
  // The client's ends: cagent's stdin and stdout by default. Each is used through a descriptor of
  // its own (pipes and terminals are reopened, so O_NONBLOCK never reaches the caller's file
  // description); regular files and /dev/null work too. Not owned.
  int client_in_fd = 0;
  int client_out_fd = 1;
  // Where the server's stderr goes: "" = cagent's stderr; else this file (created 0600, appended).
  std::string server_log_path;
  // The session's id and directory: "" = session::NewRunId() under session::StateDirectory()/mcp/.
  std::string run_id;
  std::string state_dir;  // "" = session::StateDirectory()
  // Called once the session directory and the audit log exist, before the sandbox starts, with
  // the log's path (the CLI prints it on stderr). On the calling thread; may be empty.
  std::function<void(const std::string& audit_log_path)> on_started;
  mcp::RelayOptions relay;  // frame and queue limits
};

struct McpWrapResult {
  std::string run_id;
  std::string session_dir;
  std::string audit_log_path;
  std::string policy_digest;
  SandboxOutcome sandbox;  // the server's end
  mcp::RelayEnd ended_by = mcp::RelayEnd::kStopped;
  std::string end_reason;  // in words ("the client closed its input")
  mcp::RelayStats relay;
  std::uint64_t calls_allowed = 0;
  std::uint64_t calls_denied = 0;
  std::string budget_exhausted;  // "" = the tool-call budget did not run out
  // --approve stop: the first call that needed an approval, "ACTION (sha256:DIGEST)"; "" = none.
  std::string needs_approval;
  std::uint64_t audit_entries = 0;
  std::uint64_t audit_lost = 0;
  std::vector<std::string> notes;  // from the profile's launch spec
  bool egress = false;
  std::vector<egress::ConnectionRecord> egress_connections;
};

// Runs one wrap session to its end. An error means it could not start (bad options, the session
// directory, the audit log, the sandbox's description, the relay) or the sandbox could not be
// built (kSetup, as RunSandbox reports); the server's own exit status is in `sandbox`.
Result<McpWrapResult> RunMcpWrap(const McpWrapOptions& options);

// A descriptor of its own for `fd` (`write` = the output side): a pipe, FIFO or terminal is
// reopened through /proc/self/fd (a new open file description, so the relay's O_NONBLOCK stays
// off the caller's); anything else, or when reopening fails, is dup()ed. Close-on-exec.
Result<UniqueFd> OwnDescription(int fd, bool write);

}  // namespace cagent::launcher::mcp
