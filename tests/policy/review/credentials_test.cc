// The `credentials` section (issue 36) through review: `policy diff` calls a new or re-bound
// credential wider, `policy audit` flags a binding to a wildcard (high) or to a host the hosts
// rules do not allow (low).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/review/audit.h"
#include "policy/review/diff.h"
#include "tests/policy/policy_test_util.h"

namespace cagent::policy {
namespace {

using ::testing::HasSubstr;
using testing::MustCompile;

std::vector<Finding> CredentialFindings(const Policy& p) {
  std::vector<Finding> found;
  for (const Finding& f : Audit(p)) {
    if (f.rule_id == "CAGENT018") found.push_back(f);
  }
  return found;
}

TEST(Credentials, DiffCallsANewOrReboundCredentialWider) {
  auto from = MustCompile("credentials {\n  gh env GITHUB_TOKEN for github.com\n}\n");
  auto to = MustCompile(
      "credentials {\n  gh env GITHUB_TOKEN for github.com api.github.com\n"
      "  npm env NPM_TOKEN for registry.npmjs.org\n}\n");
  ASSERT_TRUE(from && to);
  std::string all;
  for (const DiffEntry& e : Diff(*from, *to)) {
    all += std::string(DirectionName(e.direction)) + " " + e.area + ": " + e.text + "\n";
  }
  EXPECT_EQ(all,
            "wider credentials: added: credential gh env GITHUB_TOKEN for github.com "
            "api.github.com\n"
            "wider credentials: added: credential npm env NPM_TOKEN for registry.npmjs.org\n"
            "narrower credentials: removed: credential gh env GITHUB_TOKEN for github.com\n");
}

TEST(Credentials, AuditFlagsWildcardsHighAndUnallowedHostsLow) {
  auto p = MustCompile(
      "network loopback\n"
      "hosts {\n  allow github.com\n}\n"
      "credentials {\n"
      "  gh env GITHUB_TOKEN for github.com\n"
      "  pages env PAGES_TOKEN for *.github.io\n"
      "  npm env NPM_TOKEN for registry.npmjs.org\n"
      "}\n");
  ASSERT_TRUE(p);
  const auto found = CredentialFindings(*p);
  ASSERT_EQ(found.size(), 2U);
  EXPECT_EQ(found[0].risk, Risk::kHigh);
  EXPECT_THAT(found[0].message, HasSubstr("'pages' is bound to the wildcard '*.github.io'"));
  EXPECT_EQ(found[1].risk, Risk::kLow);
  EXPECT_THAT(
      found[1].message,
      HasSubstr("'npm' is bound to registry.npmjs.org, which the hosts rules do not allow"));
  // The allowed, exact binding is not a finding; the rule is listed.
  bool listed = false;
  for (const AuditRule& r : AuditRules()) listed = listed || r.id == "CAGENT018";
  EXPECT_TRUE(listed);
}

}  // namespace
}  // namespace cagent::policy
