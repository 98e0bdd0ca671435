// Method and path rules in the hosts section (issue 36): `allow|ask|deny HOST METHOD PATH`. Each
// mistake with its caret, the rule that must name a host a credential is bound to, the engine's
// precedence for requests (each with its twin: the same request with the deciding rule removed
// gets the other verdict), the connection decision they open, and `http` requests read and
// written back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "policy/language/dump.h"
#include "policy/language/engine.h"
#include "policy/language/request.h"
#include "tests/policy/policy_test_util.h"

namespace cagent::policy {
namespace {

using ::testing::HasSubstr;
using testing::MustCompile;
using testing::MustFail;

// A profile whose gh credential is bound to github.com and api.github.com, with `rules` in its
// hosts section (line 3 on) and `rest` after it.
std::string Bound(std::string_view rules, std::string_view rest = "") {
  return "network loopback\nhosts {\n" + std::string(rules) +
         "}\ncredentials {\n  gh env GITHUB_TOKEN for github.com api.github.com\n}\n" +
         std::string(rest);
}

// ---------------------------------------------------------------------------------------------
// The checker

TEST(HttpRulesChecker, AMethodRuleKeepsItsMethodPathAndText) {
  auto p =
      MustCompile(Bound("  allow github.com\n  allow github.com GET /org/repo.git/*\n"
                        "  ask github.com POST /org/repo.git/git-receive-pack\n"
                        "  deny api.github.com DELETE *\n  allow github.com * *\n"));
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->hosts.size(), 5U);
  // Sorted by text: the method-less rule first.
  EXPECT_EQ(p->hosts[0].text, "api.github.com DELETE *");
  EXPECT_EQ(p->hosts[0].method, "DELETE");
  EXPECT_EQ(p->hosts[0].path, "*");
  EXPECT_EQ(p->hosts[1].text, "github.com");
  EXPECT_FALSE(p->hosts[1].HasMethod());
  EXPECT_EQ(p->hosts[2].text, "github.com * *");
  EXPECT_EQ(p->hosts[3].text, "github.com GET /org/repo.git/*");
  EXPECT_EQ(p->hosts[3].pattern.Text(), "github.com");
  EXPECT_EQ(p->hosts[4].text, "github.com POST /org/repo.git/git-receive-pack");
  EXPECT_EQ(p->hosts[4].verdict, Verdict::kAsk);
}

TEST(HttpRulesChecker, SeveralHostsWithoutAMethodStayOneRulePerHost) {
  auto p = MustCompile(Bound("  allow github.com api.github.com\n"));
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->hosts.size(), 2U);
  EXPECT_FALSE(p->hosts[0].HasMethod());
  EXPECT_FALSE(p->hosts[1].HasMethod());
}

TEST(HttpRulesChecker, ALowercaseMethod) {
  EXPECT_EQ(MustFail(Bound("  allow github.com get /x\n")),
            "test.cagent:3:20: error: HTTP methods are written in uppercase: 'get'\n"
            "    allow github.com get /x\n"
            "                     ^~~\n"
            "  hint: write GET\n");
}

TEST(HttpRulesChecker, AMethodThatIsNoToken) {
  EXPECT_EQ(MustFail(Bound("  allow github.com G@T /x\n")),
            "test.cagent:3:20: error: invalid HTTP method 'G@T'\n"
            "    allow github.com G@T /x\n"
            "                     ^~~\n"
            "  hint: a method is an uppercase token (GET, POST, PUT, PATCH, DELETE, HEAD, "
            "OPTIONS), or * for any method\n");
}

TEST(HttpRulesChecker, APathNotStartingWithASlash) {
  EXPECT_EQ(MustFail(Bound("  allow github.com GET org/x\n")),
            "test.cagent:3:24: error: a path in a hosts rule starts with '/' or is '*': 'org/x'\n"
            "    allow github.com GET org/x\n"
            "                         ^~~~~\n"
            "  hint: write /org/x (a '*' in it matches any characters, '/' included)\n");
}

TEST(HttpRulesChecker, APathWithAQueryPointsAtTheQuestionMark) {
  EXPECT_EQ(MustFail(Bound("  allow github.com GET /search?q=x\n")),
            "test.cagent:3:31: error: a path in a hosts rule has no query or fragment: "
            "'/search?q=x'\n"
            "    allow github.com GET /search?q=x\n"
            "                                ^\n"
            "  hint: rules match the request's path without its query string (cagent never "
            "shows a query to the policy: it may hold a credential); drop what follows the "
            "'?'\n");
}

TEST(HttpRulesChecker, AMethodWithoutAPath) {
  EXPECT_EQ(MustFail(Bound("  allow github.com GET\n")),
            "test.cagent:3:20: error: method 'GET' needs a path after it\n"
            "    allow github.com GET\n"
            "                     ^~~\n"
            "  hint: write: allow HOST METHOD PATH, e.g. allow github.com GET /org/repo.git/* "
            "(* for any method or any path)\n");
}

TEST(HttpRulesChecker, APathWithoutAMethod) {
  EXPECT_EQ(MustFail(Bound("  allow github.com /x\n")),
            "test.cagent:3:20: error: a method and path rule needs a method before its path\n"
            "    allow github.com /x\n"
            "                     ^~\n"
            "  hint: write: allow HOST METHOD PATH, e.g. allow github.com GET /org/repo.git/* "
            "(* for any method or any path)\n");
}

TEST(HttpRulesChecker, SeveralHostsWithAMethod) {
  EXPECT_EQ(MustFail(Bound("  deny github.com api.github.com DELETE *\n")),
            "test.cagent:3:19: error: a method and path rule names exactly one host; "
            "'api.github.com' is a second\n"
            "    deny github.com api.github.com DELETE *\n"
            "                    ^~~~~~~~~~~~~~\n"
            "  hint: write one rule per host: deny github.com METHOD PATH, then deny "
            "api.github.com METHOD PATH\n");
}

TEST(HttpRulesChecker, AWordAfterThePath) {
  EXPECT_EQ(MustFail(Bound("  allow github.com GET /x /y\n")),
            "test.cagent:3:27: error: a method and path rule ends with its path; found '/y' "
            "after it\n"
            "    allow github.com GET /x /y\n"
            "                            ^~\n"
            "  hint: write: allow HOST METHOD PATH, e.g. allow github.com GET /org/repo.git/* "
            "(* for any method or any path)\n");
}

TEST(HttpRulesChecker, ABadHostPatternIsStillPointedAt) {
  EXPECT_THAT(MustFail(Bound("  allow foo_bar.com GET /x\n")),
              HasSubstr("test.cagent:3:12: error: invalid host pattern 'foo_bar.com': invalid "
                        "character '_' in host name\n"));
}

TEST(HttpRulesChecker, AHostNoCredentialIsBoundToIsAnError) {
  EXPECT_EQ(MustFail(Bound("  allow gitlab.com GET /x\n")),
            "test.cagent:3:9: error: hosts rule 'allow gitlab.com GET /x' decides requests to "
            "gitlab.com, but no credential is bound to it, so cagent never reads them\n"
            "    allow gitlab.com GET /x\n"
            "          ^~~~~~~~~~\n"
            "  hint: bind a credential to gitlab.com, or drop GET /x\n");
  // Twin: the same rule for a bound host compiles.
  EXPECT_NE(MustCompile(Bound("  allow github.com GET /x\n")), nullptr);
}

TEST(HttpRulesChecker, AnExactHostPortABindingCoversIsBound) {
  // A credential for *.example.org binds api.example.org:443 (that port is one it covers) and
  // api.example.org (both of its ports); a credential for git.example.org:443 binds only :443.
  const std::string creds =
      "credentials {\n  a env A for *.example.org\n  b env B for git.example.org:443\n}\n";
  EXPECT_NE(MustCompile("network loopback\nhosts {\n  allow api.example.org:443 GET /x\n"
                        "  allow api.example.org POST /y\n  allow git.example.org:443 GET /z\n}\n" +
                        creds),
            nullptr);
  const std::string port_only = "credentials {\n  b env B for git.example.org:443\n}\n";
  EXPECT_THAT(
      MustFail("network loopback\nhosts {\n  allow git.example.org GET /z\n}\n" + port_only),
      HasSubstr("hosts rule 'allow git.example.org GET /z' decides requests to "
                "git.example.org, but no credential is bound to it"));
  EXPECT_THAT(MustFail("network loopback\nhosts {\n  allow *.example.org:8443 GET /z\n}\n" + creds),
              HasSubstr("no credential is bound to it"));
}

// A deny without a method refuses the connection, so a method rule for the same pattern never
// decides: warned about. Twin: a deny method rule leaves the connection open, no warning.
TEST(HttpRulesChecker, AMethodRuleUnderAConnectionDenyIsWarnedAbout) {
  SearchPath search;
  Compiled c =
      CompileText("test.cagent", Bound("  deny github.com\n  allow github.com GET /x\n"), search);
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(RenderAll(*c.sources, c.diags),
              HasSubstr("test.cagent:4:9: warning: hosts rule 'allow github.com GET /x' never "
                        "decides: 'deny github.com' at test.cagent:3:8 wins\n"));
  Compiled twin = CompileText(
      "test.cagent", Bound("  deny github.com DELETE *\n  allow github.com GET /x\n"), search);
  ASSERT_TRUE(twin.ok());
  EXPECT_EQ(RenderAll(*twin.sources, twin.diags), "");
}

TEST(HttpRulesChecker, SetupHostsTakeNoMethodRules) {
  EXPECT_THAT(MustFail(Bound("  allow github.com\n",
                             "setup {\n  run \"true\"\n  hosts {\n    allow github.com GET /x\n"
                             "  }\n}\n")),
              HasSubstr("error: setup's hosts take no method and path rules"));
}

// ---------------------------------------------------------------------------------------------
// The engine: requests

TEST(HttpRulesEngine, TheStrictestMatchingMethodRuleWins) {
  auto p =
      MustCompile(Bound("  allow github.com GET /org/*\n  ask github.com GET /org/secret/*\n"
                        "  deny github.com GET /org/secret/keys\n"));
  ASSERT_NE(p, nullptr);
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.Http("github.com", 443, "GET", "/org/repo.git/info/refs"),
               "hosts: allow github.com GET /org/*");
  EXPECT_ASK(e.Http("github.com", 443, "GET", "/org/secret/a"),
             "hosts: ask github.com GET /org/secret/*");
  EXPECT_DENY(e.Http("github.com", 443, "GET", "/org/secret/keys"),
              "hosts: deny github.com GET /org/secret/keys");
  // Decide(Request::Http) is the same decision.
  EXPECT_DENY(e.Decide(Request::Http("github.com", 443, "GET", "/org/secret/keys")),
              "hosts: deny github.com GET /org/secret/keys");
}

TEST(HttpRulesEngine, TwinWithoutTheDenyTheAskDecides) {
  auto p =
      MustCompile(Bound("  allow github.com GET /org/*\n  ask github.com GET /org/secret/*\n"));
  ASSERT_NE(p, nullptr);
  Engine e(*p, PortableBinding());
  EXPECT_ASK(e.Http("github.com", 443, "GET", "/org/secret/keys"),
             "hosts: ask github.com GET /org/secret/*");
}

TEST(HttpRulesEngine, AMethodDenyBeatsTheConnectionsAllow) {
  auto p = MustCompile(Bound("  allow api.github.com\n  deny api.github.com DELETE *\n"));
  ASSERT_NE(p, nullptr);
  Engine e(*p, PortableBinding());
  EXPECT_DENY(e.Http("api.github.com", 443, "DELETE", "/repos/org/repo"),
              "hosts: deny api.github.com DELETE *");
  // Methods are matched without regard to case: `delete` is no way around the rule.
  EXPECT_DENY(e.Http("api.github.com", 443, "delete", "/repos/org/repo"),
              "hosts: deny api.github.com DELETE *");
  // Other methods get the connection's verdict.
  EXPECT_ALLOW(e.Http("api.github.com", 443, "GET", "/repos/org/repo"),
               "hosts: allow api.github.com");
  // The connection itself is allowed: a method rule's deny refuses requests, not connections.
  EXPECT_ALLOW(e.Host("api.github.com", 443), "hosts: allow api.github.com");
}

TEST(HttpRulesEngine, TwinWithoutTheMethodDenyTheConnectionsAllowDecides) {
  auto p = MustCompile(Bound("  allow api.github.com\n"));
  ASSERT_NE(p, nullptr);
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.Http("api.github.com", 443, "DELETE", "/repos/org/repo"),
               "hosts: allow api.github.com");
}

TEST(HttpRulesEngine, AnAskedConnectionsRequestsAreAllowedOnceItIsOpen) {
  auto p = MustCompile(Bound("  ask github.com\n  deny github.com POST *\n"));
  ASSERT_NE(p, nullptr);
  Engine e(*p, PortableBinding());
  EXPECT_ASK(e.Host("github.com", 443), "hosts: ask github.com");
  const Decision d = e.Http("github.com", 443, "GET", "/x");
  EXPECT_ALLOW(d, "hosts: ask github.com");
  EXPECT_THAT(d.reason, HasSubstr("allowed (or approved) connection"));
  EXPECT_DENY(e.Http("github.com", 443, "POST", "/x"), "hosts: deny github.com POST *");
}

TEST(HttpRulesEngine, AConnectionDenyDecidesEveryRequest) {
  auto p = MustCompile(Bound("  deny github.com\n  allow github.com GET /x\n"));
  ASSERT_NE(p, nullptr);
  Engine e(*p, PortableBinding());
  EXPECT_DENY(e.Host("github.com", 443), "hosts: deny github.com");
  EXPECT_DENY(e.Http("github.com", 443, "GET", "/x"), "hosts: deny github.com");
}

TEST(HttpRulesEngine, WithoutAMethodLessRuleOnlyTheMethodRulesOpenTheHost) {
  auto p = MustCompile(Bound("  allow github.com GET /org/repo.git/*\n"));
  ASSERT_NE(p, nullptr);
  Engine e(*p, PortableBinding());
  // The connection: allowed by the method rule, named in the decision.
  const Decision c = e.Host("github.com", 443);
  EXPECT_ALLOW(c, "hosts: allow github.com GET /org/repo.git/*");
  EXPECT_THAT(c.reason, HasSubstr("each request on it is decided by those rules"));
  EXPECT_TRUE(e.HostMayConnect("github.com"));
  // '*' covers '/' too.
  EXPECT_ALLOW(e.Http("github.com", 443, "GET", "/org/repo.git/info/refs"),
               "hosts: allow github.com GET /org/repo.git/*");
  // A request no rule matches is denied.
  const Decision d = e.Http("github.com", 443, "POST", "/org/repo.git/git-receive-pack");
  EXPECT_DENY(d, "default");
  EXPECT_THAT(d.reason, HasSubstr("no method and path rule matches POST "
                                  "\"/org/repo.git/git-receive-pack\" on github.com:443"));
  // Another port is no connection the rule names.
  EXPECT_DENY(e.Host("github.com", 8443), "default");
}

TEST(HttpRulesEngine, OnlyDenyMethodRulesOpenNothing) {
  auto p = MustCompile(Bound("  deny github.com DELETE *\n"));
  ASSERT_NE(p, nullptr);
  Engine e(*p, PortableBinding());
  EXPECT_DENY(e.Host("github.com", 443), "default");
  EXPECT_FALSE(e.HostMayConnect("github.com"));
}

TEST(HttpRulesEngine, DotSegmentsAreRefusedWhereMethodRulesApply) {
  auto p = MustCompile(Bound("  allow github.com GET /org/repo.git/*\n  allow api.github.com\n"));
  ASSERT_NE(p, nullptr);
  Engine e(*p, PortableBinding());
  for (const char* path : {"/org/repo.git/../other.git/info/refs", "/org/repo.git/%2e%2E/x",
                           "/org/repo.git/./info", "/org/repo.git/.."}) {
    const Decision d = e.Http("github.com", 443, "GET", path);
    EXPECT_DENY(d, "default") << path;
    EXPECT_THAT(d.reason, HasSubstr("'.' or '..' segment")) << path;
  }
  // Twin: the same shape without the dot segment is allowed; dots inside a name are no segment.
  EXPECT_ALLOW(e.Http("github.com", 443, "GET", "/org/repo.git/x.y/info"),
               "hosts: allow github.com GET /org/repo.git/*");
  // A host without method rules judges no path at all.
  EXPECT_ALLOW(e.Http("api.github.com", 443, "GET", "/a/../b"), "hosts: allow api.github.com");
}

TEST(HttpRulesEngine, ARequestOnAHostWithoutRulesIsDenied) {
  auto p = MustCompile(Bound("  allow github.com GET /x\n"));
  ASSERT_NE(p, nullptr);
  Engine e(*p, PortableBinding());
  EXPECT_DENY(e.Http("example.com", 443, "GET", "/x"), "default");
  EXPECT_DENY(e.Http("not a host", 443, "GET", "/x"), "default");
}

TEST(HttpRulesEngine, PathPatterns) {
  EXPECT_TRUE(PathPatternMatches("*", "/anything/at/all"));
  EXPECT_TRUE(PathPatternMatches("/org/*", "/org/"));
  EXPECT_TRUE(PathPatternMatches("/org/*/info/refs", "/org/a/b/info/refs"));
  EXPECT_FALSE(PathPatternMatches("/org/*/info/refs", "/org/a/info/refs/x"));
  EXPECT_FALSE(PathPatternMatches("/org/repo", "/org/repo/"));
  EXPECT_TRUE(PathPatternMatches("/a*b*c", "/aXbYbZc"));
  EXPECT_FALSE(PathPatternMatches("/a*b*c", "/aXbYbZ"));
  EXPECT_TRUE(IsRuleMethod("GET"));
  EXPECT_TRUE(IsRuleMethod("M-SEARCH"));
  EXPECT_FALSE(IsRuleMethod("get"));
  EXPECT_FALSE(IsRuleMethod(""));
  EXPECT_FALSE(IsRuleMethod("G T"));
}

// ---------------------------------------------------------------------------------------------
// Requests: the `http` word

Request Read(std::vector<std::string> words) {
  auto r = ParseRequestWords(words);
  EXPECT_TRUE(std::holds_alternative<Request>(r));
  return std::holds_alternative<Request>(r) ? std::get<Request>(r) : Request{};
}

std::string ReadError(std::vector<std::string> words) {
  auto r = ParseRequestWords(words);
  EXPECT_TRUE(std::holds_alternative<RequestWordsError>(r));
  return std::holds_alternative<RequestWordsError>(r) ? std::get<RequestWordsError>(r).message
                                                      : std::string();
}

TEST(HttpRequests, DescribeAndParseRoundTrip) {
  const Request r = Read({"http", "github.com", "GET", "/org/repo.git/info/refs"});
  EXPECT_EQ(r.kind, Request::Kind::kHttp);
  EXPECT_EQ(r.host, "github.com");
  EXPECT_EQ(r.port, 443);
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.path, "/org/repo.git/info/refs");
  EXPECT_EQ(KindName(r), "http");
  EXPECT_EQ(Describe(r), "http github.com:443 GET /org/repo.git/info/refs");
  EXPECT_EQ(r, Request::Http("github.com", 443, "GET", "/org/repo.git/info/refs"));
  // Describe() re-reads as the same request, an IPv6 literal and a quoted path included.
  for (const Request& q :
       {Request::Http("::1", 8443, "POST", "/a b"), Request::Http("10.0.0.5", 80, "DELETE", "*")}) {
    // The words as a profile's lexer would give them: unquoted.
    const std::string text = Describe(q);
    std::vector<std::string> words = {"http",
                                      q.host.find(':') != std::string::npos
                                          ? "[" + q.host + "]:" + std::to_string(q.port)
                                          : q.host + ":" + std::to_string(q.port),
                                      q.method, q.path};
    EXPECT_EQ(Read(words), q) << text;
  }
  EXPECT_EQ(Describe(Request::Http("::1", 8443, "POST", "/a b")), "http [::1]:8443 POST \"/a b\"");
  EXPECT_THAT(RequestUsage(), HasSubstr("http github.com GET /org/repo.git/info/refs"));
}

TEST(HttpRequests, MalformedWords) {
  EXPECT_EQ(ReadError({"http", "github.com", "GET"}),
            "'http' takes HOST[:PORT], a method and a path");
  EXPECT_EQ(ReadError({"http", "github.com", "GET", "/", "x"}),
            "'http' takes HOST[:PORT], a method and a path");
  EXPECT_EQ(ReadError({"http", "github.com:0", "GET", "/"}), "invalid port '0' in 'github.com:0'");
  EXPECT_EQ(ReadError({"http", "github.com", "", "/"}), "'http' needs a method");
}

TEST(HttpRequests, ExamplesJudgeRequests) {
  EXPECT_NE(MustCompile(Bound("  allow github.com GET /org/*\n",
                              "examples {\n  allow http github.com GET /org/repo.git/info/refs\n"
                              "  deny http github.com POST /org/x\n}\n")),
            nullptr);
  EXPECT_THAT(MustFail(Bound("  allow github.com GET /org/*\n",
                             "examples {\n  allow http github.com POST /org/x\n}\n")),
              HasSubstr("example failed: expected allow for http github.com:443 POST /org/x, got "
                        "deny"));
}

TEST(HttpRulesDump, TheDumpCompilesBackToTheSameRules) {
  auto p =
      MustCompile(Bound("  allow github.com GET /org/repo.git/*\n  deny api.github.com "
                        "DELETE *\n  ask github.com POST \"/a;b\"\n"));
  ASSERT_NE(p, nullptr);
  const std::string dump = Dump(*p, false);
  EXPECT_THAT(dump, HasSubstr("  deny api.github.com DELETE *\n"
                              "  allow github.com GET /org/repo.git/*\n"
                              "  ask github.com POST \"/a;b\"\n"));
  SearchPath search;
  Compiled again = CompileText("again.cagent", dump, search);
  ASSERT_TRUE(again.ok()) << RenderAll(*again.sources, again.diags) << dump;
  const std::string redump = Dump(*again.policy, false);
  EXPECT_EQ(dump.substr(dump.find('\n')), redump.substr(redump.find('\n')));
  const auto j = ToJson(*p);
  ASSERT_EQ(j["hosts"].size(), 3U);
  EXPECT_EQ(j["hosts"][0]["pattern"], "api.github.com");
  EXPECT_EQ(j["hosts"][0]["method"], "DELETE");
  EXPECT_EQ(j["hosts"][0]["path"], "*");
}

}  // namespace
}  // namespace cagent::policy
