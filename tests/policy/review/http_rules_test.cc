// Method and path rules (issue 36) through review: `policy diff` calls a new allow or ask method
// rule, or a removed deny, wider; `policy audit` rates them like the hosts rules they are; a
// `policy test` cases file reads `http` requests and decides them through the same engine path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/language/engine.h"
#include "policy/review/audit.h"
#include "policy/review/cases.h"
#include "policy/review/diff.h"
#include "tests/policy/policy_test_util.h"

namespace cagent::policy {
namespace {

using ::testing::HasSubstr;
using testing::MustCompile;

std::string Bound(std::string_view rules) {
  return "network loopback\nhosts {\n  allow github.com\n" + std::string(rules) +
         "}\ncredentials {\n  gh env GITHUB_TOKEN for github.com\n  any env ANY_TOKEN for *\n}\n";
}

std::vector<std::string> HostsDiff(const Policy& a, const Policy& b) {
  std::vector<std::string> out;
  for (const DiffEntry& e : Diff(a, b)) {
    if (e.area == "hosts") out.push_back(std::string(DirectionName(e.direction)) + " " + e.text);
  }
  return out;
}

TEST(HttpRulesDiff, AnAllowOrAskIsWiderADenyNarrower) {
  auto from = MustCompile(Bound("  deny github.com DELETE *\n"));
  auto to =
      MustCompile(Bound("  allow github.com GET /org/*\n  ask github.com POST /org/repo.git/*\n"));
  ASSERT_TRUE(from && to);
  EXPECT_EQ(HostsDiff(*from, *to),
            (std::vector<std::string>{"wider added: allow github.com GET /org/*",
                                      "wider added: ask github.com POST /org/repo.git/*",
                                      "wider removed: deny github.com DELETE *"}));
  EXPECT_EQ(HostsDiff(*to, *from),
            (std::vector<std::string>{"narrower added: deny github.com DELETE *",
                                      "narrower removed: allow github.com GET /org/*",
                                      "narrower removed: ask github.com POST /org/repo.git/*"}));
  // The same rule with another path is another rule.
  auto other = MustCompile(Bound("  deny github.com DELETE /x\n"));
  ASSERT_TRUE(other);
  EXPECT_EQ(HostsDiff(*from, *other),
            (std::vector<std::string>{"narrower added: deny github.com DELETE /x",
                                      "wider removed: deny github.com DELETE *"}));
}

TEST(HttpRulesAudit, AMethodRuleForEveryHostIsRatedLikeAnyOtherHostsRule) {
  auto p = MustCompile(Bound("  allow * GET /x\n  deny * DELETE *\n"));
  ASSERT_TRUE(p);
  std::vector<std::string> any_host;
  for (const Finding& f : Audit(*p)) {
    if (f.message.find("reaches every host") != std::string::npos) any_host.push_back(f.message);
  }
  ASSERT_EQ(any_host.size(), 1U);
  EXPECT_THAT(any_host[0], HasSubstr("'hosts: allow * GET /x' reaches every host"));
}

TEST(HttpRulesCases, ACasesFileReadsHttpRequests) {
  SourceSet sources;
  const std::uint32_t file = sources.Add(
      "t.cases",
      "allow http github.com GET /org/repo.git/info/refs\ndeny http github.com:443 DELETE /x\n");
  Diagnostics diags;
  std::vector<Case> cases = ParseCases(sources, file, diags);
  ASSERT_FALSE(diags.HasErrors()) << RenderAll(sources, diags);
  ASSERT_EQ(cases.size(), 2U);
  EXPECT_EQ(cases[0].request, Request::Http("github.com", 443, "GET", "/org/repo.git/info/refs"));
  EXPECT_EQ(cases[1].expect, Verdict::kDeny);
  auto p = MustCompile(Bound("  deny github.com DELETE *\n"));
  ASSERT_TRUE(p);
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.Decide(cases[0].request), "hosts: allow github.com");
  EXPECT_DENY(e.Decide(cases[1].request), "hosts: deny github.com DELETE *");
}

}  // namespace
}  // namespace cagent::policy
