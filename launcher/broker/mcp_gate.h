// McpGate: the decisions on an MCP client's tools/call of a wrapped, sandboxed MCP server
// (`cagent mcp wrap`): the profile's tools rules by MCP tool name (policy::Engine::McpTool,
// `allow|ask|deny mcp:GLOB`), the run's approver for `ask`, the tool-call budget, and the audit
// events (mcp_call, approval, mcp_result, mcp_list, budget). Runs in cagent (trusted), on one
// io_context thread: the relay's, which is also where the approver and the approval book live.
// Policy only: the relay (launcher/mcp/protocol/relay.h) calls it through an adapter in
// launcher/mcp/serve/wrap.cc (the broker does not include the MCP layer).
//
// An ask is an ApprovalRequest with tool "mcp" and action "NAME ARGUMENTS" (the arguments as
// compact JSON, or as their digest when longer than kMaxActionArguments bytes), bound to
// CallDigest(NAME, ARGUMENTS); `--pre-approve sha256:DIGEST` answers it beforehand, an "r" at the
// terminal approves the exact call for the rest of the session. The approval mode works as for
// egress: never and stop deny what nobody approved beforehand (stop also records the action and its
// digest, for the caller to report as needing approval); the profile's `approval` setting decides
// otherwise (never-ask denies, auto allows, on-request asks the approver).
//
// A denial is an ordinary answer: the client gets an isError result naming the rule (and where it
// is written) and saying what to do instead; the session goes on. When the tool-call budget is
// used up every further call is denied naming the budget (one budget event in the log).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/broker/approver.h"
#include "launcher/broker/audit_schema.h"
#include "launcher/broker/broker.h"
#include "launcher/broker/budgets.h"
#include "policy/language/engine.h"
#include "policy/language/ir.h"

namespace cagent::launcher::broker {

struct McpGateConfig {
  std::shared_ptr<const policy::Policy> policy;
  policy::Binding binding;
  ApprovalMode approval = ApprovalMode::kPolicy;
  std::string mode = "wrap";  // the audit events' mode: "wrap" | "serve"
  // The session's budgets (BudgetsFromPolicy, lowered by the command line); only tool_calls is
  // used: each MCP tools/call that is allowed counts one.
  Budgets budgets;
};

// The parts the gate uses but does not own; they must outlive it. `approver` and `approvals` may
// be null (headless, no pre-approvals); `audit` may be empty.
struct McpGateServices {
  Approver* approver = nullptr;
  ApprovalBook* approvals = nullptr;
  std::function<void(AuditEvent)> audit;
};

// What the gate says about one call.
struct McpVerdict {
  bool allow = false;
  std::string message;  // deny: the text the client gets (rule, location, reason, what to do)
};

// What the server answered to an allowed call (mcp::CallOutcome, as the relay reports it).
struct McpCallResult {
  nlohmann::json request_id{};
  std::string tool{};
  bool ok = false;
  bool is_error = false;
  std::uint64_t bytes = 0;
  std::string digest{};  // "" when there was no answer
  std::string error{};
};

class McpGate : public std::enable_shared_from_this<McpGate> {
 public:
  // Arguments longer than this (as compact JSON) are shown in an ask by their digest.
  static constexpr std::size_t kMaxActionArguments = 300;

  // `config.policy` must not be null.
  McpGate(McpGateConfig config, McpGateServices services);

  // Decides a tools/call of `tool` with `arguments` (an object) under the client's JSON-RPC id
  // `request_id`; `done` runs exactly once, on the io thread (from inside Check unless the
  // approver is asked). Records mcp_call (and approval, budget) events. Keeps the gate alive
  // while an ask is pending (call through a shared_ptr).
  void Check(const std::string& tool, const nlohmann::json& arguments,
             const nlohmann::json& request_id, std::function<void(McpVerdict)> done);
  // Records the outcome of an allowed call (mcp_result).
  void Result(const McpCallResult& result);
  // Whether tools/list may offer `tool`: false when the profile denies it whatever the arguments
  // (an `ask` tool is offered).
  [[nodiscard]] bool Listed(const std::string& tool) const;
  // Records a filtered tools/list answer (mcp_list).
  void ListFiltered(const std::vector<std::string>& offered,
                    const std::vector<std::string>& hidden);

  // The approval digest of a call: CanonicalDigest of {"tool": "mcp:" + NAME, "arguments": ARGS}
  // (the "mcp:" prefix keeps it apart from every digest of cagent's own tools).
  [[nodiscard]] static std::string CallDigest(const std::string& tool,
                                              const nlohmann::json& arguments);
  // The ask's action text: "NAME {compact arguments}" or "NAME sha256:DIGEST" when they are long.
  [[nodiscard]] static std::string ActionText(const std::string& tool,
                                              const nlohmann::json& arguments);

  // Calls allowed / denied so far.
  [[nodiscard]] std::uint64_t allowed() const { return allowed_; }
  [[nodiscard]] std::uint64_t denied() const { return denied_; }
  // "" until the tool-call budget ran out; then the reason ("tool-call budget (20) reached").
  [[nodiscard]] const std::string& budget_exhausted() const { return budget_exhausted_; }
  // Under --approve stop: the first call that needed an approval nobody had given, as
  // "ACTION (sha256:DIGEST)"; "" when none.
  [[nodiscard]] const std::string& needs_approval() const { return needs_approval_; }

 private:
  void Decided(const std::string& tool, const std::string& args_digest, const std::string& request,
               const policy::Decision& decision, bool allow, const std::string& note,
               const std::function<void(McpVerdict)>& done);
  void Ask(const std::string& tool, const nlohmann::json& arguments, const std::string& request,
           const policy::Decision& decision, std::function<void(McpVerdict)> done);
  void Emit(AuditEvent event) const;
  [[nodiscard]] std::string Location(const policy::Decision& decision) const;

  McpGateConfig config_;
  McpGateServices services_;
  policy::Engine engine_;
  BudgetCounter budget_;
  std::uint64_t allowed_ = 0;
  std::uint64_t denied_ = 0;
  std::string budget_exhausted_;
  std::string needs_approval_;
};

// The message a denied call's client gets: "cagent denied the MCP tool call NAME: REASON (rule
// RULE at LOCATION). NEXT" where NEXT says what to do instead. `note` (how an ask ended) is added
// when not empty.
std::string McpDenialMessage(const std::string& tool, const policy::Decision& decision,
                             const std::string& location, const std::string& note);

}  // namespace cagent::launcher::broker
