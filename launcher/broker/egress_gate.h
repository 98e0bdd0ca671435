// EgressGate: the egress proxy's decisions (launcher/egress/proxy.h, egress::Policy) made by the
// profile's hosts rules, with the broker's approvals for `ask`, and each connection turned into an
// audit event. Runs in cagent (trusted). The proxy calls Decide on its own thread; the rules are
// decided there (the engine is const and shares nothing), asks are posted to `io` (the broker's or
// the command's approver thread), where the approver and the approval book live.
//
// An ask is an ApprovalRequest with tool "host" and action "HOST:PORT", bound to the digest of the
// destination; `--pre-approve 'host: pypi.org:443'` (a hosts pattern: `*.example.org`, no port =
// 443 and 80) or `sha256:DIGEST` answer it beforehand. The approval mode works as for tools:
// never (and stop: a connection cannot wait for a re-run) deny what nobody approved beforehand;
// the profile's `approval` setting decides otherwise (never-ask denies, auto allows, on-request
// asks the approver).
//
// Issue 36: for a destination some credential is bound to, the proxy reads each request in clear
// (CredentialsFor says which) and asks DecideRequest about it: the hosts section's method and path
// rules (policy::Engine::Http). An ask is an ApprovalRequest with tool "http" and action
// "METHOD HOST:PORT PATH", bound to RequestDigest; `--pre-approve sha256:DIGEST` answers it
// beforehand, and the approval mode works as for connections. RecordExchange turns each request
// into an `http_request` audit event: names of credentials, never their values; the path, never
// the query.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/broker/approver.h"
#include "launcher/broker/audit_schema.h"
#include "launcher/broker/broker.h"
#include "launcher/egress/proxy.h"
#include "policy/language/engine.h"
#include "policy/language/ir.h"

namespace cagent::launcher::broker {

struct EgressGateConfig {
  std::shared_ptr<const policy::Policy> policy;  // must have a hosts section
  policy::Binding binding;
  ApprovalMode approval = ApprovalMode::kPolicy;
  std::string phase = "agent";  // the audit events' phase: "agent", "verify", "exec"
};

// The parts it uses but does not own; they must outlive the gate's last posted handler (stop the
// proxy, then run `io` dry, before destroying them). `approver` and `approvals` may be null
// (headless, no pre-approvals).
struct EgressGateServices {
  boost::asio::io_context* io = nullptr;
  Approver* approver = nullptr;
  ApprovalBook* approvals = nullptr;
  // Called on `io` with each audit event (connections, approvals); may be empty.
  std::function<void(AuditEvent)> audit;
};

class EgressGate final : public egress::Policy, public std::enable_shared_from_this<EgressGate> {
 public:
  EgressGate(EgressGateConfig config, EgressGateServices services);

  void Decide(const egress::Destination& dest, std::function<void(egress::Decision)> done) override;
  [[nodiscard]] bool AddressNamed(std::string_view address, std::uint16_t port) const override;
  [[nodiscard]] bool MayResolve(std::string_view host) const override;
  // The names of the credentials one of whose host patterns matches dest.host on dest.port (a
  // pattern without a port: 443 and 80, as for hosts rules), sorted. Called on the proxy's thread.
  [[nodiscard]] std::vector<std::string> CredentialsFor(
      const egress::Destination& dest) const override;
  // The engine's decision on the request (Engine::Http); an ask goes through the approvals like a
  // connection's (posted to `io`). `done` is called exactly once.
  void DecideRequest(const egress::HttpExchange& request,
                     std::function<void(egress::Decision)> done) override;

  // Called from the proxy's thread with each finished connection: posts its audit event to `io`.
  void Record(const egress::ConnectionRecord& record);
  // Called from the proxy's thread with each finished or refused request on an intercepted
  // connection: posts its `http_request` audit event to `io`.
  void RecordExchange(const egress::ExchangeRecord& record);

  // The approval digest of a destination: SHA-256 of the canonical {"tool":"host","host":H,
  // "port":P}.
  [[nodiscard]] static std::string DestinationDigest(std::string_view host, std::uint16_t port);
  // The approval digest of a request: SHA-256 of the canonical {"tool":"http","host":H,"port":P,
  // "method":M,"path":PATH}.
  [[nodiscard]] static std::string RequestDigest(std::string_view host, std::uint16_t port,
                                                 std::string_view method, std::string_view path);

 private:
  // The ask of a connection.
  // Calls `done` for an allow, a deny, or an ask nobody can be asked about here (no io), and says
  // so; false: an ask for the approver. Shared by connections and requests.
  bool AnsweredAtOnce(const policy::Decision& d, std::function<void(egress::Decision)>& done) const;
  void Ask(const egress::Destination& dest, const policy::Decision& decision,
           std::function<void(egress::Decision)> done);
  // Any ask, on `io`: pre-approvals by `req`, then the approval mode, then the approver.
  // `unapproved_hint` says how to approve it beforehand (for the headless refusal).
  void AskApprover(ApprovalRequest req, const policy::Decision& decision,
                   const std::string& unapproved_hint, std::function<void(egress::Decision)> done);

  EgressGateConfig config_;
  EgressGateServices services_;
  policy::Engine engine_;
};

// The egress budgets of a policy (egress-bytes, egress-connections; 0 = unlimited).
struct EgressBudgets {
  std::uint64_t bytes = 0;
  std::uint64_t connections = 0;
};
EgressBudgets EgressBudgetsFromPolicy(const policy::Policy& policy);

// The audit event of one connection record.
AuditEvent EgressAuditEvent(const egress::ConnectionRecord& record, const std::string& phase);
// The `http_request` audit event of one exchange record: no value, no query.
AuditEvent HttpRequestAuditEvent(const egress::ExchangeRecord& record, const std::string& phase);

}  // namespace cagent::launcher::broker
