// EgressGate (launcher/broker/egress_gate.h): the egress proxy's decisions by the hosts rules,
// asks answered through the approver (or refused headless), `host:` pre-approvals, and the audit
// events of connections.
#include "launcher/broker/egress_gate.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <optional>
#include <string>
#include <vector>

#include "policy/language/loader.h"

namespace cagent::launcher::broker {
namespace {

std::shared_ptr<const policy::Policy> Compile(const std::string& text) {
  policy::Compiled c = policy::CompileText("gate.cagent", text, policy::SearchPath{});
  EXPECT_TRUE(c.ok()) << policy::RenderAll(*c.sources, c.diags);
  return c.policy;
}

const char* const kProfile =
    "network loopback\napproval on-request\n"
    "hosts {\n  allow pypi.org\n  ask *.example.org\n  deny bad.example.org\n"
    "  allow 10.0.0.5:8080\n}\n";

// An approver that answers every ask with a fixed outcome and remembers what it was asked.
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
  explicit Fixture(std::optional<bool> approve, ApprovalMode mode = ApprovalMode::kPolicy) {
    if (approve) approver.emplace(*approve);
    EgressGateConfig config;
    config.policy = Compile(kProfile);
    config.binding = policy::PortableBinding();
    config.approval = mode;
    EgressGateServices services;
    services.io = &io;
    services.approver = approver ? &*approver : nullptr;
    services.approvals = &book;
    services.audit = [this](AuditEvent e) { events.push_back(std::move(e)); };
    gate = std::make_shared<EgressGate>(std::move(config), std::move(services));
  }
  egress::Decision Decide(const std::string& host, std::uint16_t port) {
    std::optional<egress::Decision> got;
    gate->Decide({host, port, egress::Via::kHttpConnect},
                 [&](egress::Decision d) { got = std::move(d); });
    io.restart();
    io.run();
    EXPECT_TRUE(got.has_value()) << "done was never called for " << host;
    return got.value_or(egress::Decision{});
  }
  boost::asio::io_context io;
  std::optional<FixedApprover> approver;
  ApprovalBook book;
  std::vector<AuditEvent> events;
  std::shared_ptr<EgressGate> gate;
};

TEST(EgressGateTest, AllowsAndDeniesByTheHostsRules) {
  Fixture f(std::nullopt);
  EXPECT_TRUE(f.Decide("pypi.org", 443).allow);
  EXPECT_FALSE(f.Decide("pypi.org", 22).allow);  // no port = 443 and 80 only
  const egress::Decision d = f.Decide("bad.example.org", 443);
  EXPECT_FALSE(d.allow);
  EXPECT_EQ(d.rule, "hosts: deny bad.example.org");
  EXPECT_FALSE(f.Decide("other.test", 443).allow);
}

TEST(EgressGateTest, AnAskGoesToTheApproverAndItsAnswerDecides) {
  Fixture yes(true);
  EXPECT_TRUE(yes.Decide("a.example.org", 443).allow);
  ASSERT_EQ(yes.approver->asked.size(), 1U);
  EXPECT_EQ(yes.approver->asked[0].tool, "host");
  EXPECT_EQ(yes.approver->asked[0].action, "a.example.org:443");
  EXPECT_EQ(yes.approver->asked[0].digest, EgressGate::DestinationDigest("a.example.org", 443));
  // Approved for the run: the same destination is not asked again, another one is.
  EXPECT_TRUE(yes.Decide("a.example.org", 443).allow);
  EXPECT_EQ(yes.approver->asked.size(), 1U);
  EXPECT_TRUE(yes.Decide("b.example.org", 443).allow);
  EXPECT_EQ(yes.approver->asked.size(), 2U);

  Fixture no(false);
  const egress::Decision d = no.Decide("a.example.org", 443);
  EXPECT_FALSE(d.allow);
  EXPECT_NE(d.reason.find("declined"), std::string::npos) << d.reason;
  ASSERT_FALSE(no.events.empty());
  EXPECT_EQ(no.events.back().kind, AuditKind::kApproval);
}

TEST(EgressGateTest, HeadlessAsksAreRefusedUnlessPreApproved) {
  Fixture f(true, ApprovalMode::kNever);
  const egress::Decision d = f.Decide("a.example.org", 443);
  EXPECT_FALSE(d.allow);
  EXPECT_NE(d.reason.find("--pre-approve 'host: a.example.org:443'"), std::string::npos)
      << d.reason;
  EXPECT_TRUE(f.approver->asked.empty());
  ASSERT_TRUE(f.book.AddPreApproval("host: *.example.org:443", "--pre-approve").ok());
  EXPECT_TRUE(f.Decide("a.example.org", 443).allow);
  EXPECT_FALSE(f.Decide("a.example.org", 80).allow) << "the pre-approval names port 443 only";
  // A pre-approval never overrides a deny rule: the rules decide first.
  ASSERT_TRUE(f.book.AddPreApproval("host: bad.example.org", "--pre-approve").ok());
  EXPECT_FALSE(f.Decide("bad.example.org", 443).allow);
}

TEST(EgressGateTest, MalformedHostPreApprovalsAreRefused) {
  ApprovalBook book;
  EXPECT_FALSE(book.AddPreApproval("host: https://pypi.org", "--pre-approve").ok());
  EXPECT_FALSE(book.AddPreApproval("host: pypi.org:99999", "--pre-approve").ok());
  EXPECT_TRUE(book.AddPreApproval("host: pypi.org", "--pre-approve").ok());
}

TEST(EgressGateTest, AddressesAndNamesForTheProxy) {
  Fixture f(std::nullopt);
  EXPECT_TRUE(f.gate->AddressNamed("10.0.0.5", 8080));
  EXPECT_FALSE(f.gate->AddressNamed("10.0.0.5", 443));
  EXPECT_FALSE(f.gate->AddressNamed("127.0.0.1", 443));
  EXPECT_TRUE(f.gate->MayResolve("pypi.org"));
  EXPECT_TRUE(f.gate->MayResolve("x.example.org"));
  EXPECT_FALSE(f.gate->MayResolve("bad.example.org"));
  EXPECT_FALSE(f.gate->MayResolve("other.test"));
}

TEST(EgressGateTest, AConnectionRecordBecomesAnAuditEvent) {
  Fixture f(std::nullopt);
  egress::ConnectionRecord r;
  r.dest = {"pypi.org", 443, egress::Via::kTransparent};
  r.address = "151.101.0.223";
  r.allowed = true;
  r.rule = "hosts: allow pypi.org";
  r.bytes_up = 10;
  r.bytes_down = 20;
  f.gate->Record(r);
  f.io.restart();
  f.io.run();
  ASSERT_EQ(f.events.size(), 1U);
  const AuditEvent& e = f.events[0];
  EXPECT_EQ(e.kind, AuditKind::kEgress);
  EXPECT_EQ(e.verdict, "allow");
  EXPECT_EQ(e.rule, "hosts: allow pypi.org");
  EXPECT_EQ(e.detail["via"], "transparent");
  EXPECT_EQ(e.detail["bytes_down"], 20);
  EXPECT_EQ(e.detail["phase"], "agent");
}

}  // namespace
}  // namespace cagent::launcher::broker
