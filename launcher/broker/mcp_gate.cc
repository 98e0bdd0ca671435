#include "launcher/broker/mcp_gate.h"

#include <utility>

#include "common/json_text.h"
#include "launcher/broker/audit_log.h"

namespace cagent::launcher::broker {
namespace {

// Tool names come from the client: an invalid one is denied by the engine, and shortened here
// before it is recorded or shown.
constexpr std::size_t kMaxLoggedName = 200;

std::string ShortName(const std::string& name) {
  if (name.size() <= kMaxLoggedName) return name;
  return name.substr(0, kMaxLoggedName) + "... (" + std::to_string(name.size()) + " bytes)";
}

// The budget's pseudo-kind: MCP calls count toward the total only.
constexpr const char* kBudgetKind = "mcp";

}  // namespace

std::string McpDenialMessage(const std::string& tool, const policy::Decision& decision,
                             const std::string& location, const std::string& note) {
  std::string text =
      "cagent denied the call of MCP tool \"" + ShortName(tool) + "\": " + decision.reason;
  if (!decision.rule.empty() && decision.rule != "default") {
    text += " (rule `" + decision.rule + "`";
    if (!location.empty()) text += " at " + location;
    text += ")";
  }
  if (!note.empty()) text += "; " + note;
  text +=
      ". Do not retry the same call: it is refused again. Use another tool, or ask the operator to "
      "change the profile's tools section.";
  return text;
}

McpGate::McpGate(McpGateConfig config, McpGateServices services)
    : config_(std::move(config)),
      services_(std::move(services)),
      engine_(*config_.policy, config_.binding),
      budget_(config_.budgets) {}

std::string McpGate::CallDigest(const std::string& tool, const nlohmann::json& arguments) {
  return CanonicalDigest(nlohmann::json{{"tool", "mcp:" + tool}, {"arguments", arguments}});
}

std::string McpGate::ActionText(const std::string& tool, const nlohmann::json& arguments) {
  const std::string args = JsonText(arguments);
  if (args.size() <= kMaxActionArguments) return ShortName(tool) + " " + args;
  return ShortName(tool) + " sha256:" + CanonicalDigest(arguments);
}

std::string McpGate::Location(const policy::Decision& decision) const {
  return decision.loc.valid() ? config_.policy->Where(decision.loc) : "";
}

void McpGate::Emit(AuditEvent event) const {
  if (services_.audit) services_.audit(std::move(event));
}

bool McpGate::Listed(const std::string& tool) const {
  return engine_.McpTool(tool).verdict != policy::Verdict::kDeny;
}

void McpGate::Check(const std::string& tool, const nlohmann::json& arguments,
                    const nlohmann::json& request_id, std::function<void(McpVerdict)> done) {
  const std::string args_digest = CanonicalDigest(arguments);
  const std::string request = JsonText(request_id);
  policy::Decision decision = engine_.McpTool(tool);
  if (decision.verdict == policy::Verdict::kDeny) {
    Decided(tool, args_digest, request, decision, false, "", done);
    return;
  }
  // The budget before any ask: nobody is asked about a call that could not run anyway.
  if (auto over = budget_.CheckToolCall(kBudgetKind)) {
    if (budget_exhausted_.empty()) {
      budget_exhausted_ = *over;
      Emit(audit::Budget({.budget = "tool-calls", .reason = *over}));
    }
    policy::Decision budget{policy::Verdict::kDeny, "tool-calls budget", {}, *over};
    Decided(tool, args_digest, request, budget, false, "the session makes no more tool calls",
            done);
    return;
  }
  if (decision.verdict == policy::Verdict::kAllow) {
    Decided(tool, args_digest, request, decision, true, "", done);
    return;
  }
  Ask(tool, arguments, request, decision, std::move(done));
}

void McpGate::Decided(const std::string& tool, const std::string& args_digest,
                      const std::string& request, const policy::Decision& decision, bool allow,
                      const std::string& note, const std::function<void(McpVerdict)>& done) {
  const std::string location = Location(decision);
  if (allow) {
    budget_.CountToolCall(kBudgetKind);
    ++allowed_;
  } else {
    ++denied_;
  }
  audit::McpCallFields f{.mode = config_.mode,
                         .request = request,
                         .tool = ShortName(tool),
                         .args_digest = args_digest,
                         .verdict = allow ? "allow" : "deny",
                         .rule = decision.rule == "default" ? "" : decision.rule,
                         .location = location,
                         .reason = decision.reason};
  if (!note.empty()) f.note = note;
  Emit(audit::McpCall(std::move(f)));
  McpVerdict v;
  v.allow = allow;
  if (!allow) v.message = McpDenialMessage(tool, decision, location, note);
  done(std::move(v));
}

void McpGate::Ask(const std::string& tool, const nlohmann::json& arguments,
                  const std::string& request, const policy::Decision& decision,
                  std::function<void(McpVerdict)> done) {
  ApprovalRequest req;
  req.tool = "mcp";
  req.action = ActionText(tool, arguments);
  req.digest = CallDigest(tool, arguments);
  req.rule = decision.rule;
  req.location = Location(decision);
  req.reason = decision.reason;
  const std::string args_digest = CanonicalDigest(arguments);
  auto audit_approval = [this, request](const ApprovalRequest& r, const ApprovalOutcome& o) {
    Emit(audit::Approval({.id = 0,
                          .tool = "mcp",
                          .args_digest = r.digest,
                          .approved = o.approved,
                          .rule = r.rule,
                          .call_id = request,
                          .turn = 0,
                          .scope = std::string(ApprovalScopeName(o.scope)),
                          .by = o.by}));
  };
  if (services_.approvals != nullptr) {
    if (auto standing = services_.approvals->Lookup(req); standing && standing->approved) {
      audit_approval(req, *standing);
      Decided(tool, args_digest, request, decision, true,
              "approved beforehand (" + standing->by + ")", done);
      return;
    }
  }
  const policy::Verdict effective = config_.approval == ApprovalMode::kPolicy
                                        ? engine_.Effective(policy::Verdict::kAsk)
                                        : policy::Verdict::kDeny;
  if (effective == policy::Verdict::kAllow) {
    Decided(tool, args_digest, request, decision, true,
            "the profile's approval mode is auto, so it is allowed unasked", done);
    return;
  }
  if (effective == policy::Verdict::kDeny || services_.approver == nullptr) {
    std::string why;
    if (config_.approval == ApprovalMode::kPolicy && effective == policy::Verdict::kDeny) {
      why = "the profile's approval mode is never-ask, so nobody was asked";
    } else {
      why =
          "it needs an approval and nobody can be asked here; approve it beforehand with "
          "--pre-approve sha256:" +
          req.digest;
      if (config_.approval == ApprovalMode::kStop && needs_approval_.empty()) {
        needs_approval_ = req.action + " (sha256:" + req.digest + ")";
      }
    }
    audit_approval(req, {false, ApprovalScope::kHeadless, "headless"});
    Decided(tool, args_digest, request, decision, false, why, done);
    return;
  }
  services_.approver->Ask(
      req, [self = shared_from_this(), req, tool, args_digest, request, decision, audit_approval,
            done = std::move(done)](const ApprovalOutcome& outcome) {
        if (outcome.approved && self->services_.approvals != nullptr &&
            (outcome.scope == ApprovalScope::kRunExact ||
             outcome.scope == ApprovalScope::kRunPattern)) {
          self->services_.approvals->Record(req, outcome);
        }
        audit_approval(req, outcome);
        if (!outcome.approved) {
          self->Decided(tool, args_digest, request, decision, false,
                        "declined (" + outcome.by + ")", done);
          return;
        }
        // Other calls may have used the budget while the operator was deciding.
        if (auto over = self->budget_.CheckToolCall(kBudgetKind)) {
          policy::Decision budget{policy::Verdict::kDeny, "tool-calls budget", {}, *over};
          self->Decided(tool, args_digest, request, budget, false,
                        "approved, but the budget ran out meanwhile", done);
          return;
        }
        self->Decided(tool, args_digest, request, decision, true, "approved (" + outcome.by + ")",
                      done);
      });
}

void McpGate::Result(const McpCallResult& r) {
  Emit(audit::McpResult({.mode = config_.mode,
                         .request = JsonText(r.request_id),
                         .tool = ShortName(r.tool),
                         .result_digest = r.digest,
                         .ok = r.ok,
                         .is_error = r.is_error,
                         .bytes = r.bytes,
                         .error = r.ok ? "" : r.error}));
}

void McpGate::ListFiltered(const std::vector<std::string>& offered,
                           const std::vector<std::string>& hidden) {
  std::vector<std::string> o;
  std::vector<std::string> h;
  o.reserve(offered.size());
  h.reserve(hidden.size());
  for (const auto& n : offered) o.push_back(ShortName(n));
  for (const auto& n : hidden) h.push_back(ShortName(n));
  Emit(audit::McpList({.mode = config_.mode, .offered = std::move(o), .hidden = std::move(h)}));
}

}  // namespace cagent::launcher::broker
