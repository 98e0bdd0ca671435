// Ask rules that cannot ask (never-ask) or ask for an install no registry is reachable for
// (policy/language/coherence.h), and the built-in profiles, which must have neither.
#include "policy/language/coherence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "policy/review/audit.h"
#include "tests/policy/policy_test_util.h"

namespace cagent::policy {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::MustCompile;

TEST(Coherence, AsksUnderNeverAskCannotAsk) {
  auto p = MustCompile(
      "approval never-ask\ncommands {\n  ask make deploy\n}\ntools {\n  ask write_file\n}\n");
  ASSERT_NE(p, nullptr);
  const auto found = IncoherentAsks(*p);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].rule, "commands: ask make deploy");
  EXPECT_EQ(p->Where(found[0].loc), "test.cagent:3:7");
  EXPECT_EQ(found[0].message,
            "'commands: ask make deploy' can never ask: approval never-ask (set at "
            "test.cagent:1:1) turns every ask into a denial, and nobody is asked");
  EXPECT_THAT(found[0].hint, HasSubstr("approval on-request"));
  EXPECT_EQ(found[1].rule, "tools: ask write_file");
  // The audit reports the same rules as CAGENT006, from the same list.
  std::size_t silent = 0;
  for (const auto& f : Audit(*p)) silent += f.rule_id == "CAGENT006" ? 1 : 0;
  EXPECT_EQ(silent, AskRules(*p).size());
}

TEST(Coherence, TheTwinUnderOnRequestAsks) {
  auto p = MustCompile("approval on-request\ncommands {\n  ask make deploy\n}\n");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(IncoherentAsks(*p), IsEmpty());
}

TEST(Coherence, AnInstallNoRegistryIsReachableForCannotWork) {
  for (const char* network : {"none", "loopback"}) {
    auto p = MustCompile(std::string("approval on-request\nnetwork ") + network +
                         "\ncommands {\n  ask (pip | pip3) install\n  ask npm install *\n"
                         "  ask make install\n}\n");
    ASSERT_NE(p, nullptr);
    const auto found = IncoherentAsks(*p);
    ASSERT_EQ(found.size(), 2u) << network;  // make install is not a package install
    EXPECT_EQ(found[0].rule, "commands: ask (pip | pip3) install");
    EXPECT_THAT(found[0].message, HasSubstr("cannot reach a registry"));
    EXPECT_THAT(found[0].message, HasSubstr(std::string(network) == "none"
                                                ? "network none"
                                                : "network loopback without a hosts section"));
    EXPECT_THAT(found[0].hint, HasSubstr("pypi.org, files.pythonhosted.org"));
    EXPECT_EQ(found[1].rule, "commands: ask npm install *");
    EXPECT_THAT(found[1].hint, HasSubstr("registry.npmjs.org"));
  }
}

TEST(Coherence, AHostsSectionThatReachesTheRegistryMakesItWork) {
  auto p = MustCompile(
      "approval on-request\nnetwork loopback\ncommands {\n  ask (pip | pip3) install\n"
      "  ask cargo add\n}\nhosts {\n  allow pypi.org:443\n  deny crates.io\n}\n");
  ASSERT_NE(p, nullptr);
  const auto found = IncoherentAsks(*p);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rule, "commands: ask cargo add");
  EXPECT_THAT(found[0].message,
              HasSubstr("no hosts rule reaches index.crates.io, crates.io, static.crates.io"));
}

TEST(Coherence, EveryBuiltinProfileIsCoherent) {
  for (const BuiltinProfile& b : BuiltinProfiles()) {
    SearchPath search;
    Compiled c = LoadProfile(b.name, search);
    ASSERT_TRUE(c.ok()) << b.name;
    for (const auto& a : IncoherentAsks(*c.policy)) {
      ADD_FAILURE() << b.name << ": " << c.policy->Where(a.loc) << ": " << a.message;
    }
  }
}

TEST(Coherence, TheOldBackendWasNot) {
  // backend as it was before: never-ask (base's) and installs asked offline.
  auto p =
      MustCompile("extends base\nnetwork loopback\ncommands {\n  ask (pip | pip3) install\n}\n");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(IncoherentAsks(*p).size(), 2u);  // cannot ask, and could not install
}

TEST(Coherence, DeniedReasonNamesWhatDecided) {
  EXPECT_EQ(
      AskDeniedReason("approval never-ask", "commands: ask pip install", "backend.cagent:40:7"),
      "denied: approval never-ask (rule `commands: ask pip install` at backend.cagent:40:7)");
  EXPECT_EQ(AskDeniedReason("--approve never", "tools: ask write_file", ""),
            "denied: --approve never (rule `tools: ask write_file`)");
}

}  // namespace
}  // namespace cagent::policy
