// One policed session, built the same way for every command that starts a sandbox: `cagent exec`,
// the agent's session (`cagent agent`, `cagent run`), `cagent mcp serve`'s and `mcp wrap`'s, and
// each verification and setup command of a run.
//
// Two steps, the way nsjail's subproc and Chromium's broker process split theirs:
//
//   Prepare(SessionOptions) -> SessionPlan    everything that can fail on the caller's options,
//                                             before any sandbox exists: the profile -> the launch
//                                             spec (with the caller's git identity), pre-approvals,
//                                             the audit log, the approver, the egress session
//                                             (filtered, or the no-network view and its hint)
//   Run(plan, payload) -> SandboxOutcome      the launch: the caller's signals routed to the
//                                             session's io thread, that thread, the egress proxy
//                                             started on the sandbox's sockets, RunSandbox, then
//                                             the teardown in one order
//
// What differs between the sessions is the payload alone: the broker's socketpair (the agent),
// the relay's pipes (wrap), log files (verification), the pty relay (exec). Runs in cagent
// (trusted); the sandboxed command never sees any of this.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "launcher/broker/approver.h"
#include "launcher/broker/audit_log.h"
#include "launcher/egress/proxy.h"
#include "launcher/profile/spec.h"
#include "launcher/sandbox/sandbox.h"
#include "launcher/session/credentials.h"
#include "launcher/session/egress.h"
#include "policy/language/ir.h"

namespace cagent::launcher::session {

struct SessionOptions {
  // ---- the sandbox ----
  // Either a spec the caller built already (exec: the launcher's view narrowed by the command
  // line), or the profile, the command and the context SpecFromPolicy builds it from.
  std::optional<LaunchSpec> spec;
  std::shared_ptr<const policy::Policy> policy;
  std::vector<std::string> argv;
  // With a profile: the binding, the caller's environment, caches, carried paths. git_identity
  // empty = the caller's (CallerGitIdentity), set unless the profile says `git-identity none`.
  ProfileContext profile;

  // ---- egress ----
  // The policy whose hosts section filters egress (`policy` itself for a profile's session; exec:
  // the profile's or --allow-host's); null = none. Without filtered egress a sandbox with its own
  // network namespace still gets a session: lookups answered "no such name" at once, and the
  // first refusal explained.
  std::shared_ptr<const policy::Policy> egress_policy;
  // Filtered egress only when the spec has loopback networking of its own (a profile's session:
  // its network mode decides). true: whenever egress_policy has a hosts section, and Prepare fails
  // when the spec cannot take it (exec's --allow-host asked for it by name).
  bool egress_required = false;
  std::vector<egress::ResolveOverride> resolve;  // --resolve
  NetworkHintContext hint;
  // "exec", "agent", "verify", "setup": the audit events' and the hint's phase.
  std::string phase = "exec";
  // Each finished connection, on the proxy's thread; may be empty.
  std::function<void(const egress::ConnectionRecord&)> on_record;
  // Each request on an intercepted connection (credentials, issue 36), on the proxy's thread; may
  // be empty.
  std::function<void(const egress::ExchangeRecord&)> on_exchange;
  // Each hint line (at most one per cause), on the proxy's thread; may be empty.
  std::function<void(const std::string&)> on_hint;

  // ---- credentials (issue 36) ----
  // The profile whose credentials section applies; null = `policy`'s (exec gives a spec, and its
  // profile here). Its values are read from `credential_env` (nullopt = cagent's own
  // environment) and `~/` files from profile.binding.home; each sandbox holds placeholders only
  // (launcher/sandbox/credential_view.h) and the egress proxy puts the values in.
  std::shared_ptr<const policy::Policy> credentials_policy;
  std::optional<std::map<std::string, std::string>> credential_env;

  // ---- approvals ----
  broker::ApprovalMode approval = broker::ApprovalMode::kPolicy;
  std::vector<std::string> pre_approvals;  // "TOOL: PATTERN" lines (--pre-approve)
  std::string pre_approval_file;           // "" = none
  // The approver: made on the session's io_context by `make_approver` when given, else a terminal
  // prompt on `tty_fd` (not owned; -1 = headless) unless `approval` is never.
  int tty_fd = -1;
  std::function<std::unique_ptr<broker::Approver>(boost::asio::io_context&)> make_approver;

  // ---- the audit log: one of ----
  broker::AuditLog* audit = nullptr;  // already open, not owned (a run's event log)
  // Opened by Prepare (created 0600, or appended to with `resume`), after everything else that
  // can fail on the options; `before_audit` runs just before it (e.g. makes the session's
  // directory) and may fail.
  std::string audit_log_path;
  std::string run_id;
  bool resume_audit_log = false;
  broker::AuditLog::Observer on_audit_entry;
  std::function<Status()> before_audit;
  // Or only a sink for the egress session's events (verification: the run's log, on the proxy's
  // thread); no log is opened.
  std::function<void(const broker::AuditEvent&)> audit_sink;

  // ---- threads ----
  // A session io thread even without an approver (the broker, the MCP relay run on it). Without
  // one, the egress session runs its own.
  bool io_thread = false;
};

// What Prepare made; Run launches it. Owned by the caller; not copyable.
class SessionPlan {
 public:
  SessionPlan(const SessionPlan&) = delete;
  SessionPlan& operator=(const SessionPlan&) = delete;
  ~SessionPlan();

  // The sandbox's spec; a payload may add to it before Run (descriptors to keep, variables).
  [[nodiscard]] LaunchSpec& spec() { return spec_; }
  // What the profile named but this machine lacks, and what the deny globs covered.
  [[nodiscard]] const std::vector<std::string>& notes() const { return notes_; }
  // SHA-256 of the profile's dump (PolicyDigest); "" without a profile. Computed on first use
  // (the audit log's, a result's): a verification command's session never needs it.
  [[nodiscard]] const std::string& policy_digest() const;
  // The session's io_context (the approver's, the broker's, the relay's); null without one.
  [[nodiscard]] boost::asio::io_context* io() { return io_.get(); }
  [[nodiscard]] broker::ApprovalBook& approvals() { return approvals_; }
  [[nodiscard]] broker::Approver* approver() { return approver_.get(); }
  // The audit log (the caller's or the one Prepare opened); null when there is none.
  [[nodiscard]] broker::AuditLog* audit() { return audit_; }
  // The egress session; null when the sandbox shares the host's network (--disable-layer net).
  [[nodiscard]] EgressSession* egress() { return egress_.get(); }
  // The sandbox's credentials (issue 36): the values (for the redactor), placeholders, bound
  // hosts, the optional ones skipped; null without a credentials section.
  [[nodiscard]] const LoadedCredentials* credentials() const { return credentials_.get(); }
  // Stops the sandbox (SIGTERM, then SIGKILL after the spec's grace); from any thread, any time.
  void StopSandbox() const;
  // The descriptor StopSandbox writes (SandboxControl::stop_fd).
  [[nodiscard]] int stop_fd() const { return stop_fd_.get(); }

 private:
  friend Result<std::unique_ptr<SessionPlan>> Prepare(SessionOptions options);
  SessionPlan() = default;

  LaunchSpec spec_;
  std::vector<std::string> notes_;
  std::shared_ptr<const policy::Policy> policy_;
  mutable std::optional<std::string> policy_digest_;
  std::unique_ptr<boost::asio::io_context> io_;
  broker::ApprovalBook approvals_;
  std::optional<broker::AuditLog> own_audit_;
  broker::AuditLog* audit_ = nullptr;
  std::unique_ptr<broker::Approver> approver_;
  std::unique_ptr<EgressSession> egress_;
  std::shared_ptr<const LoadedCredentials> credentials_;
  UniqueFd stop_fd_;
};

// Errors are the failing step's, with what to do. Credentials: a missing non-optional value, a
// credential bound to `*` or `*.suffix` (the CA made for the sandbox names each host it vouches
// for), credentials without filtered egress (kInvalidInput); each optional credential skipped is
// a note.
[[nodiscard]] Result<std::unique_ptr<SessionPlan>> Prepare(SessionOptions options);

// The hosts the sandbox's CA is made for: the names and addresses the loaded credentials are bound
// to, sorted, unique. kInvalidInput for a wildcard pattern (`*`, `*.suffix`): a leaf certificate is
// minted per name, so a credential is bound to names, never to every subdomain.
[[nodiscard]] Result<std::vector<std::string>> CredentialHosts(const LoadedCredentials& loaded);

// SHA-256 of policy::Dump(policy) (the audit log's and the result's policy digest).
[[nodiscard]] std::string PolicyDigest(const policy::Policy& policy);

// The part of a session that differs between commands. Every hook may be empty.
struct Payload {
  // false: the sandbox forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to the command (exec,
  // verification). true (needs the session's io thread): they are blocked on the calling thread
  // and delivered to the io thread, which calls on_signal (when set) with the signal, e.g. to stop
  // the broker or the relay, which then stops the sandbox.
  bool route_signals = false;
  std::function<void(int)> on_signal;
  // Before the io thread starts (so nothing else touches what it sets up): the broker's start.
  std::function<void()> start;
  // The sandbox's stdio, after_clone, the terminal; stop_fd and on_listeners are the builder's.
  std::function<void(SandboxControl&)> control;
  // Right after RunSandbox, the io thread still running: close cagent's ends of the sandbox's
  // descriptors, finish the terminal relay.
  std::function<void(const Result<SandboxOutcome>&)> exited;
  // After the egress proxy stopped, the io thread still running: post what ends the session's
  // own work (the broker's stop, the relay's flush) so the io thread runs dry.
  std::function<void(const Result<SandboxOutcome>&)> wind_down;
};

// Launches the plan's sandbox and runs it to its end; returns RunSandbox's result. On return the
// io thread has stopped (its pending approvals cancelled), the egress proxy has stopped and the
// caller's signal mask is back. Must run on the thread that stays alive for the whole run (the
// sandbox's death signal follows the creating thread).
[[nodiscard]] Result<SandboxOutcome> Run(SessionPlan& plan, const Payload& payload);

}  // namespace cagent::launcher::session
