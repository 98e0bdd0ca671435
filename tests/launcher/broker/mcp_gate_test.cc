// McpGate (launcher/broker/mcp_gate.h): tools/call decisions of `cagent mcp wrap` by MCP tool
// name, asks through the approver (or refused headless, or pre-approved by digest), the
// tool-call budget, tools/list filtering, and the audit events (each conforming to the schema).
#include "launcher/broker/mcp_gate.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "launcher/broker/audit_log.h"
#include "policy/language/loader.h"

namespace cagent::launcher::broker {
namespace {

using nlohmann::json;

std::shared_ptr<const policy::Policy> Compile(const std::string& text) {
  policy::Compiled c = policy::CompileText("wrap.cagent", text, policy::SearchPath{});
  EXPECT_TRUE(c.ok()) << policy::RenderAll(*c.sources, c.diags);
  return c.policy;
}

const char* const kProfile =
    "approval on-request\n"
    "tools {\n"
    "  allow mcp:echo mcp:get-*\n"
    "  ask mcp:write_*\n"
    "  deny mcp:get-secret mcp:gzip-file-as-resource\n"
    "}\n";

class FixedApprover final : public Approver {
 public:
  explicit FixedApprover(bool approve) : approve_(approve) {}
  void Ask(const ApprovalRequest& request, std::function<void(ApprovalOutcome)> done) override {
    asked.push_back(request);
    done(ApprovalOutcome{approve_, approve_ ? ApprovalScope::kRunExact : ApprovalScope::kDenied,
                         "test"});
  }
  void Cancel() override {}
  std::vector<ApprovalRequest> asked;

 private:
  bool approve_;
};

struct Fixture {
  explicit Fixture(std::optional<bool> approve, ApprovalMode mode = ApprovalMode::kPolicy,
                   std::optional<std::uint64_t> tool_calls = std::nullopt,
                   const char* profile = kProfile) {
    if (approve) approver.emplace(*approve);
    McpGateConfig config;
    config.policy = Compile(profile);
    config.binding = policy::PortableBinding();
    config.approval = mode;
    config.budgets.tool_calls = tool_calls;
    McpGateServices services;
    services.approver = approver ? &*approver : nullptr;
    services.approvals = &book;
    services.audit = [this](AuditEvent e) { events.push_back(std::move(e)); };
    gate = std::make_shared<McpGate>(std::move(config), std::move(services));
  }
  McpVerdict Check(const std::string& tool, const json& args = json::object(), const json& id = 1) {
    std::optional<McpVerdict> got;
    gate->Check(tool, args, id, [&](McpVerdict v) { got = std::move(v); });
    EXPECT_TRUE(got.has_value()) << "done was never called for " << tool;
    return got.value_or(McpVerdict{});
  }
  // The last event of `kind`.
  const AuditEvent* Last(AuditKind kind) const {
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if (it->kind == kind) return &*it;
    }
    return nullptr;
  }
  std::optional<FixedApprover> approver;
  ApprovalBook book;
  std::vector<AuditEvent> events;
  std::shared_ptr<McpGate> gate;
};

// Every event the gate recorded, written through a real AuditLog and checked by the validator.
void ExpectConforming(const std::vector<AuditEvent>& events) {
  for (const AuditEvent& e : events) {
    json entry = {{"run", "r"},
                  {"seq", 0},
                  {"time", "2026-12-02T00:00:00.000Z"},
                  {"actor", std::string(AuditActorName(e.actor))},
                  {"event", std::string(AuditKindName(e.kind))},
                  {"policy", "p"},
                  {"tool", e.tool},
                  {"args", e.args_digest},
                  {"verdict", e.verdict},
                  {"rule", e.rule},
                  {"result", e.result_digest},
                  {"detail", e.detail},
                  {"prev", std::string(64, '0')}};
    EXPECT_EQ(ValidateAuditEntry(entry), std::vector<std::string>{}) << entry.dump();
  }
}

TEST(McpGateTest, AllowsAndDeniesByMcpToolNameAndAuditsEachCall) {
  Fixture f(std::nullopt);
  EXPECT_TRUE(f.Check("echo", {{"text", "hi"}}, 3).allow);
  const AuditEvent* call = f.Last(AuditKind::kMcpCall);
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->tool, "echo");
  EXPECT_EQ(call->verdict, "allow");
  EXPECT_EQ(call->rule, "tools: allow mcp:echo mcp:get-*");
  EXPECT_EQ(call->args_digest, CanonicalDigest(json{{"text", "hi"}}));
  EXPECT_EQ(call->detail["mode"], "wrap");
  EXPECT_EQ(call->detail["request"], "3");
  EXPECT_EQ(call->detail["location"], "wrap.cagent:3:9");

  // deny beats allow (get-* allows, get-secret denies).
  const McpVerdict d = f.Check("get-secret", json::object(), "abc");
  EXPECT_FALSE(d.allow);
  EXPECT_NE(d.message.find("\"get-secret\""), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("deny mcp:get-secret mcp:gzip-file-as-resource"), std::string::npos)
      << d.message;
  EXPECT_NE(d.message.find("wrap.cagent:5:8"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("Use another tool"), std::string::npos) << d.message;
  call = f.Last(AuditKind::kMcpCall);
  EXPECT_EQ(call->verdict, "deny");
  EXPECT_EQ(call->detail["request"], "\"abc\"");

  // No rule: the default denies, saying how to allow it.
  const McpVerdict none = f.Check("unknown_tool");
  EXPECT_FALSE(none.allow);
  EXPECT_NE(none.message.find("mcp:unknown_tool"), std::string::npos) << none.message;
  EXPECT_EQ(f.Last(AuditKind::kMcpCall)->rule, "");
  // cagent's own tool names are not MCP tools: a wrapped server's read_file is not allowed by
  // anything but an mcp: rule.
  EXPECT_FALSE(f.Check("read_file").allow);
  EXPECT_EQ(f.gate->allowed(), 1U);
  EXPECT_EQ(f.gate->denied(), 3U);
  ExpectConforming(f.events);
}

TEST(McpGateTest, AnAskGoesToTheApproverBoundToTheCallsDigest) {
  Fixture yes(true);
  const json args = {{"path", "notes.txt"}, {"content", "x"}};
  EXPECT_TRUE(yes.Check("write_file", args).allow);
  ASSERT_EQ(yes.approver->asked.size(), 1U);
  const ApprovalRequest& asked = yes.approver->asked[0];
  EXPECT_EQ(asked.tool, "mcp");
  EXPECT_EQ(asked.action, R"(write_file {"content":"x","path":"notes.txt"})");
  EXPECT_EQ(asked.digest, McpGate::CallDigest("write_file", args));
  EXPECT_EQ(asked.rule, "tools: ask mcp:write_*");
  EXPECT_NE(yes.Last(AuditKind::kApproval), nullptr);
  EXPECT_EQ(yes.Last(AuditKind::kMcpCall)->detail["note"], "approved (test)");
  // Approved for the session: the same call is not asked again; other arguments are.
  EXPECT_TRUE(yes.Check("write_file", args).allow);
  EXPECT_EQ(yes.approver->asked.size(), 1U);
  EXPECT_TRUE(yes.Check("write_file", {{"path", "other"}}).allow);
  EXPECT_EQ(yes.approver->asked.size(), 2U);
  ExpectConforming(yes.events);

  Fixture no(false);
  const McpVerdict d = no.Check("write_file", args);
  EXPECT_FALSE(d.allow);
  EXPECT_NE(d.message.find("declined (test)"), std::string::npos) << d.message;
}

TEST(McpGateTest, LongArgumentsAreShownByTheirDigest) {
  const json args = {{"blob", std::string(1000, 'x')}};
  EXPECT_EQ(McpGate::ActionText("write_file", args), "write_file sha256:" + CanonicalDigest(args));
  // The digest differs from cagent's own tools' digest of the same name and arguments.
  EXPECT_NE(McpGate::CallDigest("write_file", args),
            CanonicalDigest(json{{"tool", "write_file"}, {"args", args}}));
}

TEST(McpGateTest, HeadlessAsksAreRefusedUnlessPreApprovedByDigest) {
  const json args = {{"path", "a"}};
  Fixture f(true, ApprovalMode::kNever);
  const McpVerdict d = f.Check("write_file", args);
  EXPECT_FALSE(d.allow);
  EXPECT_TRUE(f.approver->asked.empty());
  const std::string digest = McpGate::CallDigest("write_file", args);
  EXPECT_NE(d.message.find("--pre-approve sha256:" + digest), std::string::npos) << d.message;
  EXPECT_TRUE(f.gate->needs_approval().empty());  // never, not stop

  // Twin: the same call pre-approved by its digest is allowed, still without asking.
  Fixture pre(true, ApprovalMode::kNever);
  ASSERT_TRUE(pre.book.AddPreApproval("sha256:" + digest, "--pre-approve").ok());
  EXPECT_TRUE(pre.Check("write_file", args).allow);
  EXPECT_TRUE(pre.approver->asked.empty());
  EXPECT_FALSE(pre.Check("write_file", {{"path", "b"}}).allow);  // another call is not covered
  ExpectConforming(pre.events);

  Fixture stop(true, ApprovalMode::kStop);
  EXPECT_FALSE(stop.Check("write_file", args).allow);
  EXPECT_EQ(stop.gate->needs_approval(), R"(write_file {"path":"a"} (sha256:)" + digest + ")");
}

TEST(McpGateTest, TheToolCallBudgetCountsMcpCalls) {
  Fixture f(std::nullopt, ApprovalMode::kPolicy, 2);
  EXPECT_TRUE(f.Check("echo").allow);
  EXPECT_FALSE(f.Check("gzip-file-as-resource").allow);  // a denial does not count
  EXPECT_TRUE(f.Check("echo").allow);
  const McpVerdict over = f.Check("echo");
  EXPECT_FALSE(over.allow);
  EXPECT_NE(over.message.find("tool-call budget (2) reached"), std::string::npos) << over.message;
  EXPECT_EQ(f.gate->budget_exhausted(), "tool-call budget (2) reached");
  EXPECT_FALSE(f.Check("echo").allow);
  int budget_events = 0;
  for (const AuditEvent& e : f.events) budget_events += e.kind == AuditKind::kBudget ? 1 : 0;
  EXPECT_EQ(budget_events, 1);
  ExpectConforming(f.events);
}

TEST(McpGateTest, ToolsListOffersWhatIsNotDeniedAndRecordsTheFilter) {
  Fixture f(std::nullopt);
  EXPECT_TRUE(f.gate->Listed("echo"));
  EXPECT_TRUE(f.gate->Listed("write_file"));  // ask: offered, asked when called
  EXPECT_FALSE(f.gate->Listed("get-secret"));
  EXPECT_FALSE(f.gate->Listed("not-in-the-profile"));
  f.gate->ListFiltered({"echo", "write_file"}, {"get-secret"});
  const AuditEvent* list = f.Last(AuditKind::kMcpList);
  ASSERT_NE(list, nullptr);
  EXPECT_EQ(list->detail["hidden"], json::array({"get-secret"}));
  ExpectConforming(f.events);
}

TEST(McpGateTest, ResultsAreAudited) {
  Fixture f(std::nullopt);
  f.gate->Result({.request_id = 4,
                  .tool = "echo",
                  .ok = true,
                  .is_error = false,
                  .bytes = 60,
                  .digest = std::string(64, 'a'),
                  .error = ""});
  f.gate->Result({.request_id = "x", .tool = "echo", .error = "the server exited"});
  ASSERT_EQ(f.events.size(), 2U);
  EXPECT_EQ(f.events[0].kind, AuditKind::kMcpResult);
  EXPECT_EQ(f.events[0].result_digest, std::string(64, 'a'));
  EXPECT_EQ(f.events[0].detail["bytes"], 60);
  EXPECT_EQ(f.events[1].detail["ok"], false);
  EXPECT_EQ(f.events[1].detail["error"], "the server exited");
  ExpectConforming(f.events);
}

}  // namespace
}  // namespace cagent::launcher::broker
