// One sandbox's network beyond its own loopback, end to end. With filtered egress (a hosts
// section, or exec's --allow-host): the view (launcher/sandbox/egress_view.h: listeners inside, the
// environment, resolv.conf), the gate (launcher/broker/egress_gate.h: hosts rules, approvals,
// audit) and the proxy (launcher/egress/proxy.h), started on the listeners when the sandbox hands
// them over and stopped after it ends. Without (network loopback or none, issue #32): the
// no-network view (AddNoNetworkView: name lookups fail at once with "no such name"), with the DNS
// stub alone served for network loopback. Either way each refusal is tallied and the first of
// each cause is explained in one line (launcher/session/network_hint.h). Used by `cagent exec`, the
// agent's sandbox of `cagent run` and `cagent agent`, setup and verification.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "launcher/broker/egress_gate.h"
#include "launcher/egress/proxy.h"
#include "launcher/egress/tls.h"
#include "launcher/sandbox/credential_view.h"
#include "launcher/sandbox/egress_view.h"
#include "launcher/sandbox/launch_spec.h"
#include "launcher/session/credentials.h"
#include "launcher/session/network_hint.h"
#include "policy/language/ir.h"

namespace cagent::launcher::session {

struct EgressSessionConfig {
  // With a hosts section (policy->egress.value): filtered egress. Null, or without one: the
  // sandbox has no network beyond loopback (or none), and only lookups are answered.
  std::shared_ptr<const policy::Policy> policy;
  policy::Binding binding;
  std::vector<egress::ResolveOverride> overrides;  // --resolve
  broker::ApprovalMode approval = broker::ApprovalMode::kPolicy;
  std::string phase = "exec";
  // Lower than the profile's (never higher: the caller checked); 0 = the profile's.
  broker::EgressBudgets budgets;
  // For the hint lines: the profile's name, exec or not (`filtered` is set by Prepare).
  NetworkHintContext hint;
  // issue 36: the sandbox's credentials (session::Prepare loads them) and the CA made for their
  // hosts. Both set, or neither. Needs filtered egress: the proxy is what puts the values in.
  std::shared_ptr<const LoadedCredentials> credentials;
  egress::MadeCa ca;
  const egress::Tls* tls = nullptr;  // what makes and uses `ca`
  // The trust anchors for the real servers behind intercepted connections: cagent's own
  // $SSL_CERT_FILE, or "" for the host's default store.
  std::string upstream_ca_file;
};

struct EgressSessionServices {
  // Where asks and audit events run. Null: the session runs its own io thread (exec).
  boost::asio::io_context* io = nullptr;
  broker::Approver* approver = nullptr;  // null = headless
  broker::ApprovalBook* approvals = nullptr;
  std::function<void(broker::AuditEvent)> audit;  // on `io`; may be empty
  // Each finished connection, on the proxy's thread (one at a time); may be empty.
  std::function<void(const egress::ConnectionRecord&)> on_record;
  // Each request on an intercepted connection, on the proxy's thread; may be empty.
  std::function<void(const egress::ExchangeRecord&)> on_exchange;
  // Each hint line (RefusalTally: at most one per cause), on the proxy's thread; may be empty.
  std::function<void(const std::string&)> on_hint;
};

class EgressSession {
 public:
  // Whether a sandbox built from `spec` gets a session: it has a network namespace of its own
  // (no --disable-layer net; with it the host's network and resolver are the sandbox's).
  static bool Applies(const LaunchSpec& spec);

  // Filtered egress (config.policy has a hosts section): adds the egress view to `spec` and makes
  // the gate; fails (kInvalidInput) when the spec has no loopback networking of its own. With
  // credentials, also the credential view (launcher/sandbox/credential_view.h: placeholders, the
  // CA bundle). Otherwise: adds the no-network view (AddNoNetworkView); fails when
  // !Applies(spec), and (kInvalidInput) when credentials are given: without the proxy nothing
  // could put their values in.
  static Result<std::unique_ptr<EgressSession>> Prepare(LaunchSpec& spec,
                                                        EgressSessionConfig config,
                                                        EgressSessionServices services);
  ~EgressSession();
  EgressSession(const EgressSession&) = delete;
  EgressSession& operator=(const EgressSession&) = delete;

  // For SandboxControl::on_listeners: starts the proxy (or the DNS stub alone) on the sandbox's
  // sockets. Not called in network none (there are none).
  Status Start(std::vector<UniqueFd> fds);
  // Stops the proxy (open connections are recorded as "proxy stopped") and the own io thread.
  // Idempotent.
  void Stop();

  [[nodiscard]] egress::Proxy::Totals totals() const;
  [[nodiscard]] std::string budget_exhausted() const;
  // Every connection record so far (copied under a lock), for --json and run records.
  [[nodiscard]] std::vector<egress::ConnectionRecord> records() const;
  // Every request read on an intercepted connection so far (issue 36; copied under a lock).
  [[nodiscard]] std::vector<egress::ExchangeRecord> exchanges() const;
  // Whether this is filtered egress (a hosts section or --allow-host) rather than no network.
  [[nodiscard]] bool filtered() const { return filtered_; }
  // What was refused and the hint lines given; thread-safe.
  [[nodiscard]] const RefusalTally& refusals() const { return *tally_; }

 private:
  EgressSession() = default;

  EgressSessionConfig config_;
  EgressSessionServices services_;
  EgressView view_;
  CredentialView credential_view_;            // with credentials only
  std::shared_ptr<broker::EgressGate> gate_;  // filtered egress only
  bool filtered_ = false;
  std::unique_ptr<RefusalTally> tally_;
  std::unique_ptr<egress::Proxy> proxy_;
  // The own io thread (services.io null).
  std::unique_ptr<boost::asio::io_context> own_io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread io_thread_;
  mutable std::mutex mu_;
  std::vector<egress::ConnectionRecord> records_;
  std::vector<egress::ExchangeRecord> exchanges_;
  egress::Proxy::Totals final_totals_;
  std::string final_budget_;
};

// A policy that allows exactly `hosts` (HOST[:PORT] patterns of the hosts section): what
// `cagent exec --allow-host` decides by when no profile is given. Fails (kInvalidInput) with the
// pattern's own message for a malformed one.
Result<std::shared_ptr<const policy::Policy>> PolicyAllowingHosts(
    const std::vector<std::string>& hosts);

// Parses every --resolve value (kInvalidInput names the bad one).
Result<std::vector<egress::ResolveOverride>> ParseResolveOverrides(
    const std::vector<std::string>& values);

// One line for people about a finished connection: "allow pypi.org:443 via connect (rule allow
// pypi.org): 1.2 KiB up, 3.4 MiB down, 120 ms" / "deny evil.test:80 via http: no hosts rule ...".
// Unescaped: print through TerminalSafe.
std::string DescribeConnection(const egress::ConnectionRecord& record);

// One line for people about a request on an intercepted connection: "allow GET pkgs.test:443
// /data with tok (rule hosts: allow pkgs.test): 200, 310 B up, 1.2 KiB down, 12 ms" / "deny POST
// github.com:443 /org/repo.git/git-receive-pack: REASON" / "refused GET evil.test:80 /x: the
// request carries the placeholder of credential 'tok' ...". The path never has its query.
// Unescaped: print through TerminalSafe.
std::string DescribeExchange(const egress::ExchangeRecord& record);

}  // namespace cagent::launcher::session
