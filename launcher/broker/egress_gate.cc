#include "launcher/broker/egress_gate.h"

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

void EgressGate::Decide(const egress::Destination& dest,
                        std::function<void(egress::Decision)> done) {
  policy::Decision d = engine_.Host(dest.host, dest.port);
  switch (d.verdict) {
    case policy::Verdict::kAllow:
      done({true, d.rule, d.reason});
      return;
    case policy::Verdict::kDeny:
      done({false, d.rule, d.reason});
      return;
    case policy::Verdict::kAsk:
      break;
  }
  if (services_.io == nullptr) {
    done({false, d.rule, d.reason + "; nobody can be asked here, so it is refused"});
    return;
  }
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
  req.rule = decision.rule;
  req.location = decision.loc.valid() ? config_.policy->Where(decision.loc) : "";
  req.reason = decision.reason;
  auto audit_approval = [this](const ApprovalRequest& r, const ApprovalOutcome& o) {
    if (!services_.audit) return;
    services_.audit(audit::Approval({.id = 0,
                                     .tool = "host",
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
            : "nobody approved it beforehand (--pre-approve 'host: " + req.action + "')";
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
