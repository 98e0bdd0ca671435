// EgressGate (launcher/broker/egress_gate.h): the egress proxy's decisions by the hosts rules,
// asks answered through the approver (or refused headless), `host:` pre-approvals, and the audit
// events of connections. Issue 36: the credentials bound to a destination, each request on an
// intercepted connection decided by the method and path rules (asks through the same approvals),
// and its `http_request` audit event, which never holds a value or a query.
#include "launcher/broker/egress_gate.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
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

// Issue 36: gh bound to github.com (443 and 80) and api.github.com; npm to one host and port.
const char* const kCredentialProfile =
    "network loopback\napproval on-request\n"
    "hosts {\n  allow github.com GET /org/repo.git/*\n"
    "  ask github.com POST /org/repo.git/git-receive-pack\n"
    "  allow api.github.com\n  deny api.github.com DELETE *\n  allow registry.npmjs.org:443\n}\n"
    "credentials {\n  gh env GITHUB_TOKEN for github.com api.github.com\n"
    "  npm env NPM_TOKEN for registry.npmjs.org:443\n"
    "  all env ALL_TOKEN for *.github.com\n}\n";

struct Fixture {
  explicit Fixture(std::optional<bool> approve, ApprovalMode mode = ApprovalMode::kPolicy,
                   const char* profile = kProfile) {
    if (approve) approver.emplace(*approve);
    EgressGateConfig config;
    config.policy = Compile(profile);
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
  egress::Decision DecideRequest(const std::string& host, std::uint16_t port,
                                 const std::string& method, const std::string& path) {
    std::optional<egress::Decision> got;
    gate->DecideRequest({{host, port, egress::Via::kHttpConnect}, method, path},
                        [&](egress::Decision d) { got = std::move(d); });
    io.restart();
    io.run();
    EXPECT_TRUE(got.has_value()) << "done was never called for " << method << " " << path;
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

// ---------------------------------------------------------------------------------------------
// Issue 36: intercepted connections

TEST(EgressGateTest, CredentialsForNamesTheBindingsThatMatch) {
  Fixture f(std::nullopt, ApprovalMode::kPolicy, kCredentialProfile);
  using V = egress::Via;
  EXPECT_EQ(f.gate->CredentialsFor({"github.com", 443, V::kHttpConnect}),
            (std::vector<std::string>{"gh"}));
  EXPECT_EQ(f.gate->CredentialsFor({"api.github.com", 443, V::kHttpConnect}),
            (std::vector<std::string>{"all", "gh"}));
  // A pattern without a port covers 443 and 80, as a hosts rule's does.
  EXPECT_EQ(f.gate->CredentialsFor({"github.com", 80, V::kHttpConnect}),
            (std::vector<std::string>{"gh"}));
  EXPECT_TRUE(f.gate->CredentialsFor({"github.com", 8443, V::kHttpConnect}).empty());
  EXPECT_EQ(f.gate->CredentialsFor({"registry.npmjs.org", 443, V::kHttpConnect}),
            (std::vector<std::string>{"npm"}));
  EXPECT_TRUE(f.gate->CredentialsFor({"registry.npmjs.org", 80, V::kHttpConnect}).empty());
  EXPECT_TRUE(f.gate->CredentialsFor({"example.com", 443, V::kHttpConnect}).empty());
  // A profile without credentials intercepts nothing.
  Fixture none(std::nullopt);
  EXPECT_TRUE(none.gate->CredentialsFor({"pypi.org", 443, V::kHttpConnect}).empty());
}

TEST(EgressGateTest, DecideRequestAllowsAndDeniesByTheMethodRules) {
  Fixture f(std::nullopt, ApprovalMode::kPolicy, kCredentialProfile);
  const egress::Decision get = f.DecideRequest("github.com", 443, "GET", "/org/repo.git/info/refs");
  EXPECT_TRUE(get.allow) << get.reason;
  EXPECT_EQ(get.rule, "hosts: allow github.com GET /org/repo.git/*");
  const egress::Decision del = f.DecideRequest("api.github.com", 443, "DELETE", "/repos/org/x");
  EXPECT_FALSE(del.allow);
  EXPECT_EQ(del.rule, "hosts: deny api.github.com DELETE *");
  // Twin: another method on the same host has the connection's allow.
  const egress::Decision read = f.DecideRequest("api.github.com", 443, "GET", "/repos/org/x");
  EXPECT_TRUE(read.allow);
  EXPECT_EQ(read.rule, "hosts: allow api.github.com");
  // github.com has no rule without a method: what no method rule matches is refused.
  EXPECT_FALSE(f.DecideRequest("github.com", 443, "GET", "/other/repo.git/info/refs").allow);
  EXPECT_TRUE(f.events.empty()) << "allow and deny are not approvals";
}

TEST(EgressGateTest, ARequestAskGoesToTheApproverByItsOwnDigest) {
  Fixture yes(true, ApprovalMode::kPolicy, kCredentialProfile);
  const egress::Decision d =
      yes.DecideRequest("github.com", 443, "POST", "/org/repo.git/git-receive-pack");
  EXPECT_TRUE(d.allow) << d.reason;
  ASSERT_EQ(yes.approver->asked.size(), 1U);
  const ApprovalRequest& asked = yes.approver->asked[0];
  EXPECT_EQ(asked.tool, "http");
  EXPECT_EQ(asked.action, "POST github.com:443 /org/repo.git/git-receive-pack");
  EXPECT_EQ(asked.digest,
            EgressGate::RequestDigest("github.com", 443, "POST", "/org/repo.git/git-receive-pack"));
  EXPECT_EQ(asked.rule, "hosts: ask github.com POST /org/repo.git/git-receive-pack");
  EXPECT_NE(asked.digest, EgressGate::RequestDigest("github.com", 443, "POST", "/org/other"));
  ASSERT_FALSE(yes.events.empty());
  EXPECT_EQ(yes.events.back().kind, AuditKind::kApproval);
  EXPECT_EQ(yes.events.back().tool, "http");
  // Approved for the run: the same request is not asked again.
  EXPECT_TRUE(yes.DecideRequest("github.com", 443, "POST", "/org/repo.git/git-receive-pack").allow);
  EXPECT_EQ(yes.approver->asked.size(), 1U);

  Fixture no(false, ApprovalMode::kPolicy, kCredentialProfile);
  const egress::Decision refused =
      no.DecideRequest("github.com", 443, "POST", "/org/repo.git/git-receive-pack");
  EXPECT_FALSE(refused.allow);
  EXPECT_NE(refused.reason.find("declined"), std::string::npos) << refused.reason;
}

TEST(EgressGateTest, AHeadlessRequestAskIsRefusedUnlessItsDigestIsPreApproved) {
  Fixture f(true, ApprovalMode::kNever, kCredentialProfile);
  const std::string digest =
      EgressGate::RequestDigest("github.com", 443, "POST", "/org/repo.git/git-receive-pack");
  const egress::Decision d =
      f.DecideRequest("github.com", 443, "POST", "/org/repo.git/git-receive-pack");
  EXPECT_FALSE(d.allow);
  EXPECT_NE(d.reason.find("--pre-approve sha256:" + digest), std::string::npos) << d.reason;
  EXPECT_TRUE(f.approver->asked.empty());
  ASSERT_TRUE(f.book.AddPreApproval("sha256:" + digest, "--pre-approve").ok());
  EXPECT_TRUE(f.DecideRequest("github.com", 443, "POST", "/org/repo.git/git-receive-pack").allow);
  EXPECT_TRUE(f.approver->asked.empty());
}

TEST(EgressGateTest, AnExchangeRecordBecomesAnHttpRequestEventWithoutValuesOrQuery) {
  Fixture f(std::nullopt, ApprovalMode::kPolicy, kCredentialProfile);
  const std::string value = "ghp_THEREALVALUE0123456789abcdefghijklmnop";
  egress::ExchangeRecord r;
  r.request = {{"github.com", 443, egress::Via::kHttpConnect},
               "GET",
               "/org/repo.git/info/refs?service=git-upload-pack&token=" + value};
  r.credentials = {"gh"};
  r.allowed = true;
  r.rule = "hosts: allow github.com GET /org/repo.git/*";
  r.reason = "the profile allows this request";
  r.status = 200;
  r.bytes_up = 321;
  r.bytes_down = 4567;
  r.duration = std::chrono::milliseconds(12);
  f.gate->RecordExchange(r);
  egress::ExchangeRecord refused;
  refused.request = {{"evil.example", 443, egress::Via::kHttpConnect}, "POST", "/collect"};
  refused.reason = "a placeholder of credential gh was sent to a host it is not bound to";
  refused.misdirected = "gh";
  refused.error = "refused by the proxy";
  f.gate->RecordExchange(refused);
  f.io.restart();
  f.io.run();
  ASSERT_EQ(f.events.size(), 2U);
  const AuditEvent& e = f.events[0];
  EXPECT_EQ(e.kind, AuditKind::kHttpRequest);
  EXPECT_EQ(e.verdict, "allow");
  EXPECT_EQ(e.rule, "hosts: allow github.com GET /org/repo.git/*");
  EXPECT_EQ(e.detail["phase"], "agent");
  EXPECT_EQ(e.detail["host"], "github.com");
  EXPECT_EQ(e.detail["port"], 443);
  EXPECT_EQ(e.detail["method"], "GET");
  EXPECT_EQ(e.detail["path"], "/org/repo.git/info/refs");
  EXPECT_EQ(e.detail["credentials"], nlohmann::json::array({"gh"}));
  EXPECT_EQ(e.detail["status"], 200);
  EXPECT_EQ(e.detail["bytes_up"], 321);
  EXPECT_EQ(e.detail["bytes_down"], 4567);
  EXPECT_EQ(e.detail["duration_ms"], 12);
  EXPECT_FALSE(e.detail.contains("misdirected"));
  EXPECT_FALSE(e.detail.contains("error"));
  const AuditEvent& m = f.events[1];
  EXPECT_EQ(m.verdict, "deny");
  EXPECT_EQ(m.rule, "");
  EXPECT_EQ(m.detail["misdirected"], "gh");
  EXPECT_EQ(m.detail["error"], "refused by the proxy");
  EXPECT_EQ(m.detail["status"], 0);
  // No value and no query anywhere in what is logged.
  for (const AuditEvent& ev : f.events) {
    const std::string all = ev.detail.dump() + ev.rule + ev.verdict + ev.tool;
    EXPECT_EQ(all.find(value), std::string::npos) << all;
    EXPECT_EQ(all.find("service="), std::string::npos) << all;
  }
}

}  // namespace
}  // namespace cagent::launcher::broker
