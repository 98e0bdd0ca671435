#include "launcher/broker/egress_gate.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>
#include <utility>

#include "launcher/broker/audit_log.h"
#include "policy/match/hosts.h"

namespace cagent::launcher::broker {

EgressGate::EgressGate(EgressGateConfig config, EgressGateServices services)
    : config_(std::move(config)),
      services_(std::move(services)),
      engine_(*config_.policy, config_.binding) {}

std::string EgressGate::DestinationDigest(std::string_view host, std::uint16_t port) {
  return CanonicalDigest(nlohmann::json{{"tool", "host"}, {"host", host}, {"port", port}});
}

bool EgressGate::AnsweredAtOnce(const policy::Decision& d,
                                std::function<void(egress::Decision)>& done) const {
  switch (d.verdict) {
    case policy::Verdict::kAllow:
      done({true, d.rule, d.reason});
      return true;
    case policy::Verdict::kDeny:
      done({false, d.rule, d.reason});
      return true;
    case policy::Verdict::kAsk:
      break;
  }
  if (services_.io == nullptr) {
    done({false, d.rule, d.reason + "; nobody can be asked here, so it is refused"});
    return true;
  }
  return false;
}

void EgressGate::Decide(const egress::Destination& dest,
                        std::function<void(egress::Decision)> done) {
  policy::Decision d = engine_.Host(dest.host, dest.port);
  if (AnsweredAtOnce(d, done)) return;
  boost::asio::post(*services_.io,
                    [self = shared_from_this(), dest, d = std::move(d),
                     done = std::move(done)]() mutable { self->Ask(dest, d, std::move(done)); });
}

void EgressGate::Ask(const egress::Destination& dest, const policy::Decision& decision,
                     std::function<void(egress::Decision)> done) {
  ApprovalRequest req;
  req.tool = "host";
  req.action = policy::HostPortText(dest.host, dest.port);
  req.digest = DestinationDigest(dest.host, dest.port);
  const std::string hint = "--pre-approve 'host: " + req.action + "'";
  AskApprover(std::move(req), decision, hint, std::move(done));
}

void EgressGate::AskApprover(ApprovalRequest req, const policy::Decision& decision,
                             const std::string& unapproved_hint,
                             std::function<void(egress::Decision)> done) {
  req.rule = decision.rule;
  req.location = decision.loc.valid() ? config_.policy->Where(decision.loc) : "";
  req.reason = decision.reason;
  auto audit_approval = [this](const ApprovalRequest& r, const ApprovalOutcome& o) {
    if (!services_.audit) return;
    services_.audit(audit::Approval({.id = 0,
                                     .tool = r.tool,
                                     .args_digest = r.digest,
                                     .approved = o.approved,
                                     .rule = r.rule,
                                     .call_id = "",
                                     .turn = 0,
                                     .scope = std::string(ApprovalScopeName(o.scope)),
                                     .by = o.by}));
  };
  if (services_.approvals != nullptr) {
    if (auto standing = services_.approvals->Lookup(req); standing && standing->approved) {
      audit_approval(req, *standing);
      done({true, decision.rule, decision.reason + "; approved beforehand (" + standing->by + ")"});
      return;
    }
  }
  const policy::Verdict effective = config_.approval == ApprovalMode::kPolicy
                                        ? engine_.Effective(policy::Verdict::kAsk)
                                        : policy::Verdict::kDeny;
  if (effective == policy::Verdict::kAllow) {
    done({true, decision.rule,
          decision.reason + "; the profile's approval mode is auto, so it is allowed unasked"});
    return;
  }
  if (effective == policy::Verdict::kDeny || services_.approver == nullptr) {
    const std::string why =
        config_.approval == ApprovalMode::kPolicy && effective == policy::Verdict::kDeny
            ? "the profile's approval mode is never-ask, so nobody was asked"
            : "nobody approved it beforehand (" + unapproved_hint + ")";
    audit_approval(req, {false, ApprovalScope::kHeadless, "headless"});
    done({false, decision.rule, decision.reason + "; " + why});
    return;
  }
  services_.approver->Ask(req, [self = shared_from_this(), req, decision, audit_approval,
                                done = std::move(done)](const ApprovalOutcome& outcome) {
    if (outcome.approved && self->services_.approvals != nullptr &&
        (outcome.scope == ApprovalScope::kRunExact ||
         outcome.scope == ApprovalScope::kRunPattern)) {
      self->services_.approvals->Record(req, outcome);
    }
    audit_approval(req, outcome);
    if (outcome.approved) {
      done({true, decision.rule, decision.reason + "; approved (" + outcome.by + ")"});
    } else {
      done({false, decision.rule, decision.reason + "; declined (" + outcome.by + ")"});
    }
  });
}

std::string EgressGate::RequestDigest(std::string_view host, std::uint16_t port,
                                      std::string_view method, std::string_view path) {
  return CanonicalDigest(nlohmann::json{
      {"tool", "http"}, {"host", host}, {"port", port}, {"method", method}, {"path", path}});
}

std::vector<std::string> EgressGate::CredentialsFor(const egress::Destination& dest) const {
  std::vector<std::string> names;
  const std::optional<std::string> host = policy::NormalizeHost(dest.host);
  if (!host) return names;
  for (const policy::CredentialRule& c : config_.policy->credentials) {
    for (const policy::HostPattern& h : c.hosts) {
      if (h.MatchesPort(dest.port) && h.MatchesHost(*host)) {
        names.push_back(c.name);
        break;
      }
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

void EgressGate::DecideRequest(const egress::HttpExchange& request,
                               std::function<void(egress::Decision)> done) {
  policy::Decision d =
      engine_.Http(request.dest.host, request.dest.port, request.method, request.path);
  if (AnsweredAtOnce(d, done)) return;
  ApprovalRequest req;
  req.tool = "http";
  req.action = request.method + " " + policy::HostPortText(request.dest.host, request.dest.port) +
               " " + request.path;
  req.digest = RequestDigest(request.dest.host, request.dest.port, request.method, request.path);
  boost::asio::post(*services_.io, [self = shared_from_this(), req = std::move(req),
                                    d = std::move(d), done = std::move(done)]() mutable {
    const std::string hint = "--pre-approve sha256:" + req.digest;
    self->AskApprover(std::move(req), d, hint, std::move(done));
  });
}

bool EgressGate::AddressNamed(std::string_view address, std::uint16_t port) const {
  return engine_.AddressNamed(address, port);
}

bool EgressGate::MayResolve(std::string_view host) const { return engine_.HostMayConnect(host); }

void EgressGate::Record(const egress::ConnectionRecord& record) {
  if (!services_.audit || services_.io == nullptr) return;
  boost::asio::post(*services_.io, [self = shared_from_this(),
                                    e = EgressAuditEvent(record, config_.phase)]() mutable {
    self->services_.audit(std::move(e));
  });
}

void EgressGate::RecordExchange(const egress::ExchangeRecord& record) {
  if (!services_.audit || services_.io == nullptr) return;
  boost::asio::post(*services_.io, [self = shared_from_this(),
                                    e = HttpRequestAuditEvent(record, config_.phase)]() mutable {
    self->services_.audit(std::move(e));
  });
}

EgressBudgets EgressBudgetsFromPolicy(const policy::Policy& policy) {
  EgressBudgets b;
  const policy::LimitValue& bytes = policy.limit(policy::Limit::kEgressBytes);
  const policy::LimitValue& conns = policy.limit(policy::Limit::kEgressConnections);
  if (bytes.bounded()) b.bytes = bytes.value;
  if (conns.bounded()) b.connections = conns.value;
  return b;
}

AuditEvent EgressAuditEvent(const egress::ConnectionRecord& r, const std::string& phase) {
  return audit::Egress({.host = r.dest.host,
                        .port = r.dest.port,
                        .address = r.address,
                        .via = std::string(egress::ViaName(r.dest.via)),
                        .allowed = r.allowed,
                        .rule = r.rule == "default" ? "" : r.rule,
                        .reason = r.reason,
                        .error = r.error,
                        .bytes_up = r.bytes_up,
                        .bytes_down = r.bytes_down,
                        .duration_ms = r.duration.count(),
                        .phase = phase});
}

}  // namespace cagent::launcher::broker

namespace cagent::launcher::broker {

AuditEvent HttpRequestAuditEvent(const egress::ExchangeRecord& r, const std::string& phase) {
  // The proxy gives the path without its query already; cut at a '?' anyway, so a proxy that
  // slipped could not put a query's credential into the log.
  const std::string& path = r.request.path;
  std::vector<std::string> credentials = r.credentials;
  std::sort(credentials.begin(), credentials.end());
  return audit::HttpRequest({.phase = phase,
                             .host = r.request.dest.host,
                             .port = r.request.dest.port,
                             .method = r.request.method,
                             .path = path.substr(0, path.find('?')),
                             .credentials = std::move(credentials),
                             .allowed = r.allowed,
                             .rule = r.rule == "default" ? "" : r.rule,
                             .reason = r.reason,
                             .misdirected = r.misdirected,
                             .status = r.status,
                             .bytes_up = r.bytes_up,
                             .bytes_down = r.bytes_down,
                             .duration_ms = r.duration.count(),
                             .error = r.error});
}

}  // namespace cagent::launcher::broker
