// The hosts section (filtered egress): pattern diagnostics with their columns, matching through
// the engine (names, case, trailing dots, *.suffix, *, ports, IP literals, IPv6 canonical form),
// precedence across a chain, AddressNamed / HostMayConnect / HostPorts, `host` requests in
// examples and cases files, dump, diff and audit.
#include "policy/match/hosts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "policy/language/dump.h"
#include "policy/language/engine.h"
#include "policy/language/loader.h"
#include "policy/review/audit.h"
#include "policy/review/cases.h"
#include "policy/review/diff.h"
#include "tests/policy/policy_test_util.h"

namespace cagent::policy {
namespace {

using ::testing::HasSubstr;
using testing::MustCompile;
using testing::MustFail;

// A profile with the network the proxy needs and `rules` inside a hosts section.
std::string WithHosts(std::string_view rules, std::string_view rest = "") {
  return "network loopback\nhosts {\n" + std::string(rules) + "}\n" + std::string(rest);
}

std::string FirstLine(const std::string& rendered) {
  return rendered.substr(0, rendered.find('\n'));
}

// The rendered diagnostics of `allow PATTERN` (the pattern starts at line 3, column 9).
std::string BadPattern(std::string_view pattern) {
  return MustFail(WithHosts("  allow " + std::string(pattern) + "\n"));
}

// ---------------------------------------------------------------------------------------------
// Diagnostics: one malformed pattern each, with the column the caret points at.

TEST(HostsDiagnostics, BadCharacterInALabelPointsAtIt) {
  EXPECT_EQ(BadPattern("foo_bar.com"),
            "test.cagent:3:12: error: invalid host pattern 'foo_bar.com': invalid character '_' "
            "in host name\n"
            "    allow foo_bar.com\n"
            "             ^\n"
            "  hint: host names are letters, digits, '-' and dots ('_' belongs to DNS records, "
            "not to host names)\n");
}

TEST(HostsDiagnostics, PortZero) {
  EXPECT_EQ(BadPattern("pypi.org:0"),
            "test.cagent:3:18: error: invalid host pattern 'pypi.org:0': invalid port '0'\n"
            "    allow pypi.org:0\n"
            "                   ^\n"
            "  hint: ports are 1..65535; leave the port out for 443 and 80\n");
}

TEST(HostsDiagnostics, PortTooLarge) {
  EXPECT_EQ(FirstLine(BadPattern("pypi.org:99999")),
            "test.cagent:3:18: error: invalid host pattern 'pypi.org:99999': invalid port "
            "'99999'");
  EXPECT_THAT(BadPattern("pypi.org:99999"), HasSubstr("^~~~~\n"));
}

TEST(HostsDiagnostics, PortNotANumber) {
  EXPECT_EQ(FirstLine(BadPattern("pypi.org:https")),
            "test.cagent:3:18: error: invalid host pattern 'pypi.org:https': invalid port "
            "'https'");
}

TEST(HostsDiagnostics, MissingPort) {
  EXPECT_EQ(FirstLine(BadPattern("pypi.org:")),
            "test.cagent:3:17: error: invalid host pattern 'pypi.org:': missing port after ':'");
}

TEST(HostsDiagnostics, WildcardAsTheLastLabel) {
  EXPECT_EQ(BadPattern("foo.*"),
            "test.cagent:3:13: error: invalid host pattern 'foo.*': '*' is allowed only as the "
            "whole first label\n"
            "    allow foo.*\n"
            "              ^\n"
            "  hint: write *.example.com (its subdomains) or * (any host)\n");
}

TEST(HostsDiagnostics, WildcardInsideALabel) {
  EXPECT_EQ(BadPattern("*foo.com"),
            "test.cagent:3:9: error: invalid host pattern '*foo.com': '*' must be a whole label: "
            "'*foo.com' is not a pattern\n"
            "    allow *foo.com\n"
            "          ^\n"
            "  hint: write *.foo.com for its subdomains (the name itself needs a rule of its "
            "own)\n");
}

TEST(HostsDiagnostics, WildcardInTheMiddle) {
  EXPECT_EQ(FirstLine(BadPattern("a.*.com")),
            "test.cagent:3:11: error: invalid host pattern 'a.*.com': '*' is allowed only as the "
            "whole first label");
}

TEST(HostsDiagnostics, EmptyPattern) {
  EXPECT_EQ(FirstLine(BadPattern("\"\"")),
            "test.cagent:3:9: error: invalid host pattern \"\": empty host pattern");
}

TEST(HostsDiagnostics, UrlWithAHintToWriteTheHostOnly) {
  EXPECT_EQ(BadPattern("https://pypi.org/simple"),
            "test.cagent:3:9: error: invalid host pattern 'https://pypi.org/simple': "
            "'https://pypi.org/simple' is a URL; a hosts rule names a host\n"
            "    allow https://pypi.org/simple\n"
            "          ^~~~~~~~\n"
            "  hint: write the host only: pypi.org\n");
}

TEST(HostsDiagnostics, PathWithoutScheme) {
  EXPECT_EQ(FirstLine(BadPattern("pypi.org/simple")),
            "test.cagent:3:17: error: invalid host pattern 'pypi.org/simple': a host pattern "
            "cannot contain a path");
}

TEST(HostsDiagnostics, LabelTooLong) {
  const std::string label(64, 'a');
  EXPECT_EQ(FirstLine(BadPattern(label + ".com")),
            "test.cagent:3:9: error: invalid host pattern '" + label +
                ".com': label is 64 bytes long; at most 63 are allowed");
  // Its twin: 63 bytes is a valid label.
  EXPECT_NE(MustCompile(WithHosts("  allow " + std::string(63, 'a') + ".com\n")), nullptr);
}

TEST(HostsDiagnostics, NameTooLong) {
  std::string name;
  while (name.size() < 254) name += "abcdefghi.";
  name += "com";
  EXPECT_THAT(FirstLine(BadPattern(name)), HasSubstr("bytes long; at most 253 are allowed"));
}

TEST(HostsDiagnostics, LabelWithALeadingHyphen) {
  EXPECT_EQ(FirstLine(BadPattern("a.-b.com")),
            "test.cagent:3:11: error: invalid host pattern 'a.-b.com': label '-b' starts or ends "
            "with '-'");
}

TEST(HostsDiagnostics, EmptyLabel) {
  EXPECT_EQ(FirstLine(BadPattern("a..com")),
            "test.cagent:3:11: error: invalid host pattern 'a..com': empty label in host name "
            "'a..com'");
}

TEST(HostsDiagnostics, UnbracketedIpv6) {
  EXPECT_EQ(BadPattern("fd00::5"),
            "test.cagent:3:9: error: invalid host pattern 'fd00::5': IPv6 addresses are written "
            "in brackets\n"
            "    allow fd00::5\n"
            "          ^~~~~~~\n"
            "  hint: write [fd00::5]\n");
}

TEST(HostsDiagnostics, InvalidIpv6) {
  EXPECT_EQ(FirstLine(BadPattern("[fd00::zz]")),
            "test.cagent:3:9: error: invalid host pattern '[fd00::zz]': invalid IPv6 address "
            "'fd00::zz'");
}

TEST(HostsDiagnostics, NumericNameThatIsNoAddress) {
  EXPECT_EQ(FirstLine(BadPattern("1.2.3")),
            "test.cagent:3:9: error: invalid host pattern '1.2.3': '1.2.3' is neither a host name "
            "nor an IPv4 address");
  EXPECT_EQ(FirstLine(BadPattern("300.1.1.1")),
            "test.cagent:3:9: error: invalid host pattern '300.1.1.1': '300.1.1.1' is neither a "
            "host name nor an IPv4 address");
}

TEST(HostsDiagnostics, WildcardWithoutASuffix) {
  EXPECT_EQ(FirstLine(BadPattern("*.")),
            "test.cagent:3:11: error: invalid host pattern '*.': empty host name");
  EXPECT_EQ(FirstLine(BadPattern("*.*.com")),
            "test.cagent:3:11: error: invalid host pattern '*.*.com': '*' is allowed only as the "
            "whole first label");
}

TEST(HostsDiagnostics, RuleWithoutPatterns) {
  EXPECT_EQ(FirstLine(MustFail(WithHosts("  allow\n"))),
            "test.cagent:3:3: error: 'allow' needs one or more host patterns, e.g. 'pypi.org'");
}

TEST(HostsDiagnostics, UnknownKey) {
  EXPECT_EQ(MustFail(WithHosts("  permit pypi.org\n")),
            "test.cagent:3:3: error: unknown key 'permit' in hosts\n"
            "    permit pypi.org\n"
            "    ^~~~~~\n"
            "  hint: valid keys here: allow ask deny\n");
}

TEST(HostsDiagnostics, NetworkNoneWithAHostsSectionIsAnError) {
  const std::string rendered = MustFail("network none\nhosts {\n  allow pypi.org\n}\n");
  EXPECT_EQ(rendered,
            "test.cagent:2:1: error: a hosts section needs the sandbox's loopback interface, but "
            "the network is none (set at test.cagent:1:1)\n"
            "  hosts {\n"
            "  ^~~~~\n"
            "  hint: add 'network loopback': the egress proxy listens on the sandbox's loopback, "
            "and nothing else routes out\n");
  // The default network is none too; an empty section counts.
  EXPECT_THAT(FirstLine(MustFail("hosts {\n}\n")),
              HasSubstr("a hosts section needs the sandbox's loopback interface"));
  // Its twin: with network loopback the same section compiles.
  EXPECT_NE(MustCompile("network loopback\nhosts {\n  allow pypi.org\n}\n"), nullptr);
}

TEST(HostsDiagnostics, NetworkHostsIsNotAMode) {
  EXPECT_EQ(MustFail("network hosts pypi.org\n"),
            "test.cagent:1:9: error: 'network hosts' is not a mode\n"
            "  network hosts pypi.org\n"
            "          ^~~~~\n"
            "  hint: write 'network loopback' and a hosts { allow pypi.org } section: a hosts "
            "section turns cagent's egress proxy on\n");
}

TEST(HostsDiagnostics, DuplicateRuleWarns) {
  SearchPath search;
  Compiled c =
      CompileText("test.cagent", WithHosts("  allow pypi.org\n  allow PyPI.org.\n"), search);
  ASSERT_TRUE(c.ok()) << RenderAll(*c.sources, c.diags);
  EXPECT_THAT(RenderAll(*c.sources, c.diags),
              HasSubstr("test.cagent:4:9: warning: hosts rule 'allow pypi.org' is written twice"));
  ASSERT_EQ(c.policy->hosts.size(), 1u);
}

TEST(HostsDiagnostics, AllowOfADeniedPatternWarns) {
  SearchPath search;
  Compiled c =
      CompileText("test.cagent", WithHosts("  allow *.internal\n  deny *.internal\n"), search);
  ASSERT_TRUE(c.ok()) << RenderAll(*c.sources, c.diags);
  EXPECT_THAT(RenderAll(*c.sources, c.diags),
              HasSubstr("test.cagent:3:9: warning: hosts rule 'allow *.internal' never decides: "
                        "'deny *.internal' at test.cagent:4:8 wins"));
  // Its twin: a deny of another pattern leaves the allow alone.
  Compiled twin =
      CompileText("test.cagent", WithHosts("  allow *.internal\n  deny db.internal\n"), search);
  ASSERT_TRUE(twin.ok());
  EXPECT_THAT(RenderAll(*twin.sources, twin.diags), ::testing::Not(HasSubstr("warning")));
}

TEST(HostsDiagnostics, EgressBudgetsParse) {
  auto p = MustCompile(WithHosts("", "limits {\n  egress-bytes 2G\n  egress-connections 300\n}\n"));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->limit(Limit::kEgressBytes).value, 2ULL << 30);
  EXPECT_EQ(p->limit(Limit::kEgressConnections).value, 300u);
  EXPECT_EQ(LimitKindOf(Limit::kEgressBytes), LimitKind::kSize);
  EXPECT_EQ(LimitKindOf(Limit::kEgressConnections), LimitKind::kCount);
  EXPECT_THAT(FirstLine(MustFail("limits {\n  egress-connections lots\n}\n")),
              HasSubstr("invalid number 'lots'"));
}

// ---------------------------------------------------------------------------------------------
// Patterns and matching

TEST(HostPatternTest, ParsesEveryForm) {
  auto parse = [](std::string_view text) {
    auto r = ParseHostPattern(text);
    EXPECT_TRUE(std::holds_alternative<HostPattern>(r)) << text;
    return std::holds_alternative<HostPattern>(r) ? std::get<HostPattern>(r) : HostPattern{};
  };
  HostPattern name = parse("PyPI.org.");
  EXPECT_EQ(name.kind, HostPattern::Kind::kName);
  EXPECT_EQ(name.host, "pypi.org");
  EXPECT_FALSE(name.port.has_value());
  EXPECT_EQ(name.Text(), "pypi.org");
  HostPattern suffix = parse("*.GitHubUserContent.com:443");
  EXPECT_EQ(suffix.kind, HostPattern::Kind::kSuffix);
  EXPECT_EQ(suffix.host, "githubusercontent.com");
  EXPECT_EQ(suffix.port, 443);
  EXPECT_EQ(suffix.Text(), "*.githubusercontent.com:443");
  HostPattern any = parse("*");
  EXPECT_EQ(any.kind, HostPattern::Kind::kAny);
  EXPECT_EQ(parse("*:8080").Text(), "*:8080");
  HostPattern v4 = parse("10.0.0.5:8080");
  EXPECT_EQ(v4.kind, HostPattern::Kind::kAddress);
  EXPECT_EQ(v4.host, "10.0.0.5");
  HostPattern v6 = parse("[FD00:0:0::5]:443");
  EXPECT_EQ(v6.kind, HostPattern::Kind::kAddress);
  EXPECT_EQ(v6.host, "fd00::5");
  EXPECT_EQ(v6.Text(), "[fd00::5]:443");
}

TEST(HostPatternTest, NormalizeHost) {
  EXPECT_EQ(NormalizeHost("PyPI.Org."), "pypi.org");
  EXPECT_EQ(NormalizeHost("[0:0::1]"), "::1");
  EXPECT_EQ(NormalizeHost("0:0:0:0:0:0:0:1"), "::1");
  EXPECT_EQ(NormalizeHost("10.0.0.5"), "10.0.0.5");
  EXPECT_EQ(NormalizeHost("pypi.org.."), std::nullopt);
  EXPECT_EQ(NormalizeHost("https://pypi.org"), std::nullopt);
  EXPECT_EQ(NormalizeHost("fe80::1%eth0"), std::nullopt);
  EXPECT_EQ(NormalizeHost("010.0.0.5"), std::nullopt);
  EXPECT_EQ(NormalizeHost(""), std::nullopt);
  // Issue #33: inet_pton reads a C string, so the NUL once ended the address early.
  EXPECT_EQ(NormalizeHost(std::string_view("1.2.3.4\0evil.example", 20)), std::nullopt);
  EXPECT_EQ(NormalizeHost(std::string_view("[::1\0x]", 7)), std::nullopt);
  EXPECT_EQ(NormalizeHost("fe80::1%0"), std::nullopt);
  EXPECT_TRUE(IsAddressLiteral("10.0.0.5"));
  EXPECT_TRUE(IsAddressLiteral("::1"));
  EXPECT_FALSE(IsAddressLiteral("a1.example"));
}

TEST(HostMatching, ExactNameIsCaseInsensitiveAndIgnoresATrailingDot) {
  auto p = MustCompile(WithHosts("  allow pypi.org\n"));
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.Host("pypi.org", 443), "hosts: allow pypi.org");
  EXPECT_ALLOW(e.Host("PyPI.ORG.", 443), "hosts: allow pypi.org");
  EXPECT_DENY(e.Host("files.pypi.org", 443), "default");
  EXPECT_DENY(e.Host("pypi.org.evil.com", 443), "default");
  EXPECT_DENY(e.Host("xpypi.org", 443), "default");
  const Decision d = e.Host("pypi.org", 443);
  EXPECT_EQ(p->Where(d.loc), "test.cagent:3:9");
  EXPECT_EQ(d.reason, "the profile allows connections to this host");
}

TEST(HostMatching, SuffixMatchesSubdomainsOnly) {
  auto p = MustCompile(WithHosts("  allow *.example.com\n"));
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.Host("a.example.com", 443), "hosts: allow *.example.com");
  EXPECT_ALLOW(e.Host("a.b.example.com", 80), "hosts: allow *.example.com");
  EXPECT_DENY(e.Host("example.com", 443), "default");
  EXPECT_DENY(e.Host("badexample.com", 443), "default");
  EXPECT_DENY(e.Host("example.com.evil.org", 443), "default");
}

TEST(HostMatching, AnyMatchesNamesAndAddresses) {
  auto p = MustCompile(WithHosts("  ask *\n"));
  Engine e(*p, PortableBinding());
  EXPECT_ASK(e.Host("anything.example", 443), "hosts: ask *");
  EXPECT_ASK(e.Host("10.0.0.5", 80), "hosts: ask *");
  EXPECT_ASK(e.Host("[::1]", 443), "hosts: ask *");
  EXPECT_DENY(e.Host("anything.example", 8080), "default");
}

TEST(HostMatching, NoPortMeans443And80Only) {
  auto p = MustCompile(WithHosts("  allow pypi.org\n  allow github.com:22\n"));
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.Host("pypi.org", 443), "hosts: allow pypi.org");
  EXPECT_ALLOW(e.Host("pypi.org", 80), "hosts: allow pypi.org");
  EXPECT_DENY(e.Host("pypi.org", 8080), "default");
  EXPECT_ALLOW(e.Host("github.com", 22), "hosts: allow github.com:22");
  EXPECT_DENY(e.Host("github.com", 443), "default");
  EXPECT_EQ(e.Host("pypi.org", 8080).reason, "no hosts rule allows pypi.org:8080");
}

TEST(HostMatching, IpLiteralsMatchAddressRulesOnly) {
  auto p = MustCompile(WithHosts("  allow 10.0.0.5:8080 [fd00::5]:443 pypi.org\n"));
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.Host("10.0.0.5", 8080), "hosts: allow 10.0.0.5:8080");
  EXPECT_DENY(e.Host("10.0.0.5", 443), "default");
  EXPECT_ALLOW(e.Host("[fd00:0:0::5]", 443), "hosts: allow [fd00::5]:443");
  EXPECT_ALLOW(e.Host("fd00::5", 443), "hosts: allow [fd00::5]:443");
  // An address pypi.org may resolve to is not pypi.org.
  EXPECT_DENY(e.Host("151.101.0.223", 443), "default");
  EXPECT_EQ(e.Host("[fd00::6]", 443).reason, "no hosts rule allows [fd00::6]:443");
}

TEST(HostMatching, Ipv6CanonicalFormsAreTheSame) {
  auto p = MustCompile(WithHosts("  allow [0:0::1]:443\n"));
  ASSERT_EQ(p->hosts.size(), 1u);
  EXPECT_EQ(p->hosts[0].text, "[::1]:443");
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.Host("[::1]", 443), "hosts: allow [::1]:443");
  EXPECT_ALLOW(e.Host("0:0:0:0:0:0:0:1", 443), "hosts: allow [::1]:443");
  EXPECT_DENY(e.Host("::2", 443), "default");
}

TEST(HostMatching, InvalidRequestHostIsDeniedWithAReason) {
  auto p = MustCompile(WithHosts("  allow *\n"));
  Engine e(*p, PortableBinding());
  const Decision d = e.Host("https://pypi.org", 443);
  EXPECT_DENY(d, "default");
  EXPECT_EQ(d.reason, "'https://pypi.org' is not a valid host name or IP address");
  EXPECT_DENY(e.Host("bad_name.com", 443), "default");
  EXPECT_DENY(e.Host("", 443), "default");
  // Its twin: the same `*` allows a valid one.
  EXPECT_ALLOW(e.Host("good-name.com", 443), "hosts: allow *");
}

TEST(HostMatching, PortZeroIsDenied) {
  auto p = MustCompile(WithHosts("  allow *\n"));
  Engine e(*p, PortableBinding());
  EXPECT_DENY(e.Host("pypi.org", 0), "default");
  EXPECT_EQ(e.Host("pypi.org", 0).reason, "port 0 names no service");
  EXPECT_ALLOW(e.Host("pypi.org", 80), "hosts: allow *");  // its twin
}

TEST(HostMatching, WithoutAHostsSectionTheReasonSaysSo) {
  auto p = MustCompile("network loopback\n");
  Engine e(*p, PortableBinding());
  const Decision d = e.Host("pypi.org", 443);
  EXPECT_DENY(d, "default");
  EXPECT_THAT(d.reason, HasSubstr("the profile has no hosts section"));
  EXPECT_THAT(d.reason, HasSubstr("network loopback"));
  EXPECT_FALSE(p->egress.value);
}

TEST(HostPrecedence, DenyBeatsAskBeatsAllow) {
  auto p = MustCompile(
      WithHosts("  allow *.example.com\n  ask a.example.com\n  deny b.example.com\n  deny "
                "*.example.com:8080\n"));
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.Host("c.example.com", 443), "hosts: allow *.example.com");
  EXPECT_ASK(e.Host("a.example.com", 443), "hosts: ask a.example.com");
  EXPECT_DENY(e.Host("b.example.com", 443), "hosts: deny b.example.com");
  EXPECT_DENY(e.Host("c.example.com", 8080), "hosts: deny *.example.com:8080");
}

// A parent's deny stands whatever its child allows.
class HostsChain : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "cagent_hosts_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::shared_ptr<const Policy> Load(std::string_view parent_hosts) {
    std::ofstream(dir_ + "/parent.cagent") << "network loopback\nhosts {\n"
                                           << parent_hosts << "}\n";
    std::ofstream(dir_ + "/child.cagent") << "extends parent\nhosts {\n  allow db.internal\n}\n";
    Compiled c = LoadProfile("child", SearchPath{{dir_}, true});
    EXPECT_TRUE(c.ok()) << RenderAll(*c.sources, c.diags);
    return c.policy;
  }
  std::string dir_;
};

TEST_F(HostsChain, ChildAllowCannotUndoAParentDeny) {
  auto p = Load("  deny *.internal\n");
  ASSERT_NE(p, nullptr);
  Engine e(*p, PortableBinding());
  EXPECT_DENY(e.Host("db.internal", 443), "hosts: deny *.internal");
  EXPECT_TRUE(p->egress.value);
  EXPECT_EQ(p->Where(p->egress.loc), dir_ + "/parent.cagent:2:1");
}

TEST_F(HostsChain, TwinWithoutTheParentDenyTheChildAllows) {
  auto p = Load("  allow pypi.org\n");
  ASSERT_NE(p, nullptr);
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.Host("db.internal", 443), "hosts: allow db.internal");
  EXPECT_ALLOW(e.Host("pypi.org", 443), "hosts: allow pypi.org");
}

// ---------------------------------------------------------------------------------------------
// The proxy's and the DNS stub's questions

TEST(HostQueries, AddressNamed) {
  auto p = MustCompile(
      WithHosts("  allow 10.0.0.5:8080 [fd00::5] localhost\n  ask 127.0.0.1:9000\n  deny "
                "10.0.0.6\n"));
  Engine e(*p, PortableBinding());
  EXPECT_TRUE(e.AddressNamed("10.0.0.5", 8080));
  EXPECT_FALSE(e.AddressNamed("10.0.0.5", 443));
  EXPECT_TRUE(e.AddressNamed("[fd00:0::5]", 443));
  EXPECT_TRUE(e.AddressNamed("fd00::5", 80));
  EXPECT_TRUE(e.AddressNamed("127.0.0.1", 9000));  // ask names it too
  EXPECT_FALSE(e.AddressNamed("10.0.0.6", 443));   // a deny names nothing allowed
  EXPECT_FALSE(e.AddressNamed("127.0.0.1", 443));  // `localhost` is a name, not the address
  EXPECT_FALSE(e.AddressNamed("localhost", 443));
  auto any = MustCompile(WithHosts("  allow *\n"));
  Engine e_any(*any, PortableBinding());
  EXPECT_FALSE(e_any.AddressNamed("127.0.0.1", 443));  // `*` does not name an address
}

TEST(HostQueries, HostMayConnect) {
  auto p =
      MustCompile(WithHosts("  allow pypi.org\n  ask *.example.com\n  deny evil.example.com\n"
                            "  allow git.example.org:22\n  deny git.example.org\n"
                            "  allow both.example.net\n  deny both.example.net:443\n"));
  Engine e(*p, PortableBinding());
  EXPECT_TRUE(e.HostMayConnect("pypi.org"));
  EXPECT_TRUE(e.HostMayConnect("PYPI.org."));
  EXPECT_TRUE(e.HostMayConnect("a.example.com"));      // ask
  EXPECT_FALSE(e.HostMayConnect("evil.example.com"));  // denied on 443 and 80
  EXPECT_FALSE(e.HostMayConnect("unknown.org"));
  EXPECT_FALSE(e.HostMayConnect("bad_name"));
  // A port-less deny covers 443 and 80 only: port 22 stays allowed.
  EXPECT_TRUE(e.HostMayConnect("git.example.org"));
  // A deny of 443 leaves 80.
  EXPECT_TRUE(e.HostMayConnect("both.example.net"));
  auto all_denied = MustCompile(WithHosts("  allow x.org\n  deny x.org:443\n  deny x.org:80\n"));
  Engine e2(*all_denied, PortableBinding());
  EXPECT_FALSE(e2.HostMayConnect("x.org"));
}

TEST(HostQueries, HostPorts) {
  auto p = MustCompile(
      WithHosts("  allow a.org\n  allow b.org:8080\n  ask c.org:22\n  deny d.org:9999\n"));
  EXPECT_EQ(HostPorts(*p), (std::vector<std::uint16_t>{22, 80, 443, 8080}));
  auto ported = MustCompile(WithHosts("  allow b.org:8443\n  deny d.org\n"));
  EXPECT_EQ(HostPorts(*ported), (std::vector<std::uint16_t>{8443}));
  auto denies = MustCompile(WithHosts("  deny d.org\n"));
  EXPECT_TRUE(HostPorts(*denies).empty());
  auto none = MustCompile("network loopback\n");
  EXPECT_TRUE(HostPorts(*none).empty());
}

TEST(HostQueries, EmptySectionTurnsTheProxyOn) {
  auto p = MustCompile(WithHosts(""));
  EXPECT_TRUE(p->egress.value);
  EXPECT_TRUE(p->hosts.empty());
  Engine e(*p, PortableBinding());
  EXPECT_EQ(e.Host("pypi.org", 443).reason, "no hosts rule allows pypi.org:443");
}

// ---------------------------------------------------------------------------------------------
// Requests: examples and cases

TEST(HostRequests, ParseAndDescribe) {
  auto read = [](std::vector<std::string> words) {
    auto r = ParseRequestWords(words);
    EXPECT_TRUE(std::holds_alternative<Request>(r)) << words.back();
    return std::holds_alternative<Request>(r) ? std::get<Request>(r) : Request{};
  };
  Request r = read({"host", "pypi.org"});
  EXPECT_EQ(r.kind, Request::Kind::kHost);
  EXPECT_EQ(r.host, "pypi.org");
  EXPECT_EQ(r.port, 443);
  EXPECT_EQ(Describe(r), "host pypi.org:443");
  EXPECT_EQ(KindName(r), "host");
  Request v6 = read({"host", "[::1]:8080"});
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 8080);
  EXPECT_EQ(Describe(v6), "host [::1]:8080");
  EXPECT_EQ(Request::Host("[::1]", 443), Request::Host("::1", 443));
  // Describe() re-reads as the same request.
  EXPECT_EQ(read({"host", "[::1]:8080"}), v6);
  EXPECT_THAT(RequestUsage(), HasSubstr("host pypi.org:443"));

  auto bad = [](std::vector<std::string> words) {
    auto parsed = ParseRequestWords(words);
    EXPECT_TRUE(std::holds_alternative<RequestWordsError>(parsed));
    return std::holds_alternative<RequestWordsError>(parsed)
               ? std::get<RequestWordsError>(parsed).message
               : std::string();
  };
  EXPECT_EQ(bad({"host"}), "'host' takes one HOST[:PORT]");
  EXPECT_EQ(bad({"host", "a", "b"}), "'host' takes one HOST[:PORT]");
  EXPECT_EQ(bad({"host", "pypi.org:0"}), "invalid port '0' in 'pypi.org:0'");
  EXPECT_EQ(bad({"host", "fd00::5"}), "IPv6 addresses are written in brackets: 'fd00::5'");
}

TEST(HostRequests, ExamplesRunAgainstTheProfile) {
  EXPECT_NE(MustCompile(WithHosts("  allow pypi.org:443\n",
                                  "examples {\n  allow host pypi.org:443\n  allow host PyPI.org\n"
                                  "  deny host pypi.org:80\n  deny host 10.0.0.5\n}\n")),
            nullptr);
  const std::string failed =
      MustFail(WithHosts("  allow pypi.org:443\n", "examples {\n  allow host pypi.org:80\n}\n"));
  EXPECT_EQ(FirstLine(failed),
            "test.cagent:6:9: error: example failed: expected allow for host pypi.org:80, got "
            "deny");
  EXPECT_THAT(failed, HasSubstr("no hosts rule allows pypi.org:80"));
}

TEST(HostRequests, CasesFileReadsHostRequests) {
  SourceSet sources;
  const std::uint32_t file =
      sources.Add("t.cases", "allow host pypi.org:443\ndeny host [fd00::5]:22\nask host x.org\n");
  Diagnostics diags;
  std::vector<Case> cases = ParseCases(sources, file, diags);
  ASSERT_FALSE(diags.HasErrors()) << RenderAll(sources, diags);
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].request, Request::Host("pypi.org", 443));
  EXPECT_EQ(cases[1].request, Request::Host("fd00::5", 22));
  EXPECT_EQ(cases[2].request, Request::Host("x.org", 443));
  EXPECT_EQ(cases[2].expect, Verdict::kAsk);
  // And they decide through the same engine path.
  auto p = MustCompile(WithHosts("  allow pypi.org:443\n  ask x.org\n"));
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.Decide(cases[0].request), "hosts: allow pypi.org:443");
  EXPECT_DENY(e.Decide(cases[1].request), "default");
  EXPECT_ASK(e.Decide(cases[2].request), "hosts: ask x.org");
}

// ---------------------------------------------------------------------------------------------
// Dump, diff, audit

TEST(HostsDump, RoundTrips) {
  auto p = MustCompile(WithHosts(
      "  allow pypi.org files.pythonhosted.org\n  allow github.com:443\n  ask "
      "*.githubusercontent.com\n  deny *.internal\n  allow 10.0.0.5:8080 [fd00:0::5]:443\n",
      "limits {\n  egress-bytes 1G\n  egress-connections 100\n}\n"));
  ASSERT_NE(p, nullptr);
  const std::string dump = Dump(*p, false);
  EXPECT_THAT(dump, HasSubstr("hosts {\n"
                              "  ask *.githubusercontent.com\n"
                              "  deny *.internal\n"
                              "  allow 10.0.0.5:8080\n"
                              "  allow [fd00::5]:443\n"
                              "  allow files.pythonhosted.org\n"
                              "  allow github.com:443\n"
                              "  allow pypi.org\n"
                              "}\n"));
  EXPECT_THAT(dump, HasSubstr("  egress-bytes 1G\n  egress-connections 100\n"));
  SearchPath search;
  Compiled again = CompileText("again.cagent", dump, search);
  ASSERT_TRUE(again.ok()) << RenderAll(*again.sources, again.diags) << dump;
  const std::string redump = Dump(*again.policy, false);
  EXPECT_EQ(dump.substr(dump.find('\n')), redump.substr(redump.find('\n')));
  // An empty section survives the round trip; no section stays none.
  auto empty = MustCompile(WithHosts(""));
  EXPECT_THAT(Dump(*empty, false), HasSubstr("hosts {\n}\n"));
  auto without = MustCompile("network loopback\n");
  EXPECT_THAT(Dump(*without, false), ::testing::Not(HasSubstr("hosts")));
  const auto j = ToJson(*p);
  EXPECT_EQ(j["egress"]["on"], true);
  EXPECT_EQ(j["hosts"].size(), 7u);
}

std::vector<std::string> DiffLines(const Policy& a, const Policy& b) {
  std::vector<std::string> out;
  for (const auto& e : Diff(a, b)) {
    if (e.area == "hosts") out.push_back(std::string(DirectionName(e.direction)) + " " + e.text);
  }
  return out;
}

TEST(HostsDiff, AllowAndAskWidenDenyNarrows) {
  auto none = MustCompile("network loopback\n");
  auto some = MustCompile(WithHosts("  allow a.org\n  ask b.org\n  deny c.org\n"));
  EXPECT_EQ(
      DiffLines(*none, *some),
      (std::vector<std::string>{
          "wider egress proxy off -> on (a hosts section: connections its rules allow leave "
          "the sandbox)",
          "wider added: allow a.org", "wider added: ask b.org", "narrower added: deny c.org"}));
  EXPECT_EQ(DiffLines(*some, *none),
            (std::vector<std::string>{
                "narrower egress proxy on -> off (no hosts section: nothing leaves the sandbox)",
                "narrower removed: allow a.org", "narrower removed: ask b.org",
                "wider removed: deny c.org"}));
  EXPECT_TRUE(DiffLines(*some, *some).empty());
}

std::vector<const Finding*> Of(const std::vector<Finding>& fs, std::string_view id) {
  std::vector<const Finding*> out;
  for (const auto& f : fs) {
    if (f.rule_id == id) out.push_back(&f);
  }
  return out;
}

constexpr std::string_view kBudgets = "limits {\n  egress-bytes 1G\n  egress-connections 100\n}\n";

TEST(HostsAudit, AllowAnyHost) {
  auto p = MustCompile(WithHosts("  allow *\n", kBudgets));
  auto fs = Audit(*p);
  auto any = Of(fs, "CAGENT012");
  ASSERT_EQ(any.size(), 1u);
  EXPECT_EQ(any[0]->risk, Risk::kHigh);
  EXPECT_THAT(any[0]->message, HasSubstr("'hosts: allow *' reaches every host"));
  EXPECT_EQ(p->Where(any[0]->loc), "test.cagent:3:9");
  // ask * under never-ask is not an allow: still a finding, rated lower.
  auto ask = MustCompile(WithHosts("  ask *:443\n", kBudgets));
  const auto ask_findings = Audit(*ask);
  auto ask_fs = Of(ask_findings, "CAGENT012");
  ASSERT_EQ(ask_fs.size(), 1u);
  EXPECT_EQ(ask_fs[0]->risk, Risk::kMedium);
}

TEST(HostsAudit, WildcardOverSharedHosting) {
  auto p = MustCompile(
      WithHosts("  allow *.githubusercontent.com *.s3.us-east-1.amazonaws.com\n  ask *.pages.dev\n"
                "  allow raw.githubusercontent.com *.example.com\n",
                kBudgets));
  const auto p_findings = Audit(*p);
  auto fs = Of(p_findings, "CAGENT013");
  ASSERT_EQ(fs.size(), 3u);
  std::string all;
  for (const auto* f : fs) all += f->message + "\n";
  EXPECT_THAT(all, HasSubstr("'hosts: allow *.githubusercontent.com' covers "
                             "githubusercontent.com, where anyone can publish content"));
  EXPECT_THAT(all, HasSubstr("'hosts: allow *.s3.us-east-1.amazonaws.com' covers amazonaws.com"));
  EXPECT_THAT(all, HasSubstr("'hosts: ask *.pages.dev' covers pages.dev"));
  EXPECT_THAT(all, HasSubstr("send data to, and fetch code from, anyone"));
  EXPECT_EQ(SharedHostingSuffix("s3.amazonaws.com"), "s3.amazonaws.com");
  EXPECT_EQ(SharedHostingSuffix("notgithub.io"), "");
}

TEST(HostsAudit, AllowOfAnInternalAddress) {
  auto p = MustCompile(
      WithHosts("  allow 127.0.0.1:8080 169.254.169.254:80 10.1.2.3 [fe80::1] [::ffff:127.0.0.1]\n"
                "  allow 93.184.216.34 [2606:4700::1]\n",
                kBudgets));
  const auto p_findings = Audit(*p);
  auto fs = Of(p_findings, "CAGENT014");
  std::string all;
  for (const auto* f : fs) all += std::string(RiskName(f->risk)) + " " + f->message + "\n";
  ASSERT_EQ(fs.size(), 5u) << all;  // the two public addresses are not findings
  EXPECT_THAT(all, HasSubstr("high 'hosts: allow 127.0.0.1:8080' names a loopback address"));
  EXPECT_THAT(all, HasSubstr("high 'hosts: allow 169.254.169.254:80' names a cloud metadata "
                             "address"));
  EXPECT_THAT(all, HasSubstr("the cloud's instance metadata (credentials)"));
  EXPECT_THAT(all, HasSubstr("medium 'hosts: allow 10.1.2.3' names a private address"));
  EXPECT_THAT(all, HasSubstr("high 'hosts: allow [fe80::1]' names a link-local address"));
  EXPECT_THAT(all, HasSubstr("high 'hosts: allow [::ffff:127.0.0.1]' names a loopback"));
  EXPECT_EQ(RestrictedRange("172.16.0.1"), "private");
  EXPECT_EQ(RestrictedRange("172.32.0.1"), "");
  EXPECT_EQ(RestrictedRange("fd00:ec2::254"), "cloud metadata");
  EXPECT_EQ(RestrictedRange("fd12::1"), "private");
  EXPECT_EQ(RestrictedRange("100.64.0.1"), "carrier-grade NAT");
  EXPECT_EQ(RestrictedRange("64:ff9b::a00:1"), "private");  // NAT64 of 10.0.0.1
}

TEST(HostsAudit, MissingEgressBudgetIsInfoOnlyWhileHostsAreAllowed) {
  auto p = MustCompile(WithHosts("  allow pypi.org:443\n"));
  const auto p_findings = Audit(*p);
  auto fs = Of(p_findings, "CAGENT008");
  std::vector<const Finding*> egress;
  for (const auto* f : fs) {
    if (f->message.find("egress-") != std::string::npos) egress.push_back(f);
  }
  ASSERT_EQ(egress.size(), 2u);
  for (const auto* f : egress) EXPECT_EQ(f->risk, Risk::kInfo) << f->message;
  EXPECT_THAT(egress[0]->message, HasSubstr("no egress-bytes budget is set"));
  // Twins: with only denies, or without the proxy, a missing egress budget is no finding.
  for (const auto& text : {WithHosts("  deny x.org\n"), std::string("network loopback\n")}) {
    auto q = MustCompile(text);
    for (const auto& f : Audit(*q)) {
      EXPECT_EQ(f.message.find("egress-"), std::string::npos) << f.message;
    }
  }
}

TEST(HostsAudit, CleanHostsProfileHasNoHostFindings) {
  auto p =
      MustCompile(WithHosts("  allow pypi.org:443 files.pythonhosted.org:443\n  deny *\n  "
                            "allow *.internal:443\n  deny 10.0.0.5\n",
                            kBudgets));
  for (const auto& f : Audit(*p)) {
    EXPECT_TRUE(f.rule_id != "CAGENT012" && f.rule_id != "CAGENT013" && f.rule_id != "CAGENT014")
        << f.message;
    EXPECT_EQ(f.message.find("egress-"), std::string::npos) << f.message;
  }
}

TEST(HostsAudit, AsksOfHostsAreSilentUnderNeverAsk) {
  auto p = MustCompile(WithHosts("  ask x.org\n", kBudgets));
  const auto p_findings = Audit(*p);
  auto fs = Of(p_findings, "CAGENT006");
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_THAT(fs[0]->message, HasSubstr("'hosts: ask x.org' is a silent denial"));
}

// ---------------------------------------------------------------------------------------------
// The built-in -registries profiles

class RegistriesProfile : public ::testing::TestWithParam<std::string> {};

TEST_P(RegistriesProfile, CompilesAllowsItsRegistriesAndAuditsWithoutHostFindings) {
  SearchPath search;
  Compiled c = LoadProfile(GetParam(), search);
  ASSERT_TRUE(c.ok()) << RenderAll(*c.sources, c.diags);  // its examples ran
  EXPECT_FALSE(c.diags.HasErrors());
  const Policy& p = *c.policy;
  EXPECT_TRUE(p.egress.value);
  EXPECT_TRUE(p.limit(Limit::kEgressBytes).bounded());
  EXPECT_TRUE(p.limit(Limit::kEgressConnections).bounded());
  EXPECT_EQ(HostPorts(p), (std::vector<std::uint16_t>{443}));
  Engine e(p, PortableBinding());
  EXPECT_EQ(e.Host("registry.npmjs.org", 443).verdict, Verdict::kAllow);
  EXPECT_EQ(e.Host("registry.npmjs.org", 80).verdict, Verdict::kDeny);
  EXPECT_TRUE(e.HostMayConnect("registry.npmjs.org"));
  EXPECT_FALSE(e.HostMayConnect("example.com"));
  for (const auto& f : Audit(p)) {
    EXPECT_NE(f.risk, Risk::kHigh) << f.message;
    EXPECT_TRUE(f.rule_id != "CAGENT012" && f.rule_id != "CAGENT013" && f.rule_id != "CAGENT014")
        << f.message;
  }
  for (const auto& d : c.diags.list()) {
    EXPECT_NE(d.severity, Severity::kWarning) << d.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Builtin, RegistriesProfile,
                         ::testing::Values("backend-registries", "frontend-registries"),
                         [](const auto& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(RegistriesProfile, BackendRegistriesNamesEachRegistry) {
  SearchPath search;
  Compiled c = LoadProfile("backend-registries", search);
  ASSERT_TRUE(c.ok()) << RenderAll(*c.sources, c.diags);
  Engine e(*c.policy, PortableBinding());
  for (const char* host : {"pypi.org", "files.pythonhosted.org", "crates.io", "index.crates.io",
                           "static.crates.io", "registry.npmjs.org", "proxy.golang.org",
                           "sum.golang.org", "repo.maven.apache.org", "repo1.maven.org"}) {
    EXPECT_EQ(e.Host(host, 443).verdict, Verdict::kAllow) << host;
  }
  EXPECT_EQ(e.Host("upload.pypi.org", 443).verdict, Verdict::kDeny);
  EXPECT_EQ(c.policy->chain, (std::vector<std::string>{"base", "backend", "backend-registries"}));
}

}  // namespace
}  // namespace cagent::policy
