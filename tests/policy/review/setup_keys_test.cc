// The keys that prepare a run's workspace (issue 19): setup, cache, carry and git-identity — what
// the checker accepts and refuses, how a chain merges them, and that dump and diff show them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "policy/language/dump.h"
#include "policy/review/audit.h"
#include "policy/review/diff.h"
#include "tests/policy/policy_test_util.h"

namespace cagent::policy {
namespace {

using ::testing::HasSubstr;
using testing::MustCompile;
using testing::MustFail;

TEST(SetupKeys, SetupCommandsAndItsOwnHostsCompile) {
  auto p = MustCompile(
      "network none\n"
      "setup {\n"
      "  run \"npm ci\" timeout 5m\n"
      "  run \"npm run build\"\n"
      "  hosts { allow registry.npmjs.org; deny *.internal }\n"
      "}\n");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->setup.commands.size(), 2U);
  EXPECT_EQ(p->setup.commands[0].command, "npm ci");
  EXPECT_EQ(p->setup.commands[0].timeout_ms, 5U * 60 * 1000);
  EXPECT_FALSE(p->setup.commands[1].timeout_ms.has_value());
  EXPECT_TRUE(p->setup.egress.value);
  ASSERT_EQ(p->setup.hosts.size(), 2U);
  // The setup block's hosts are its own: the agent's network stays none, with no hosts rule.
  EXPECT_EQ(p->network.value, NetworkMode::kNone);
  EXPECT_FALSE(p->egress.value);
  EXPECT_TRUE(p->hosts.empty());
}

TEST(SetupKeys, SetupMistakesAreErrorsWithHints) {
  EXPECT_THAT(MustFail("setup {\n}\n"), HasSubstr("'setup' has no run command"));
  EXPECT_THAT(MustFail("setup {\n  rnu \"make\"\n}\n"), HasSubstr("did you mean 'run'?"));
  EXPECT_THAT(MustFail("setup {\n  run \"\"\n}\n"), HasSubstr("empty setup command"));
  EXPECT_THAT(MustFail("setup {\n  run \"make\" timeout soon\n}\n"), HasSubstr("invalid duration"));
  EXPECT_THAT(MustFail("setup {\n  run a\n}\nsetup {\n  run b\n}\n"),
              HasSubstr("'setup' is set twice"));
  EXPECT_THAT(MustFail("setup {\n  run a\n  hosts { allow a.org }\n  hosts { allow b.org }\n}\n"),
              HasSubstr("'hosts' is written twice in this setup block"));
  EXPECT_THAT(MustFail("setup {\n  run a\n  hosts { allow https://pypi.org/simple }\n}\n"),
              HasSubstr("invalid host pattern"));
}

TEST(SetupKeys, AnAskInSetupHostsIsWarnedAbout) {
  SearchPath search;
  Compiled c = CompileText(
      "t.cagent", "setup {\n  run \"npm ci\"\n  hosts { ask registry.npmjs.org }\n}\n", search);
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(RenderAll(*c.sources, c.diags),
              HasSubstr("'ask registry.npmjs.org' in setup never asks"));
}

TEST(SetupKeys, CachesAreHomePathsReadOnlyToTheAgentUnlessSaid) {
  auto p = MustCompile("cache ~/.npm ~/.cache/pip\ncache read-write ~/.ccache\n");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->caches.size(), 3U);
  // Sorted by path.
  EXPECT_EQ(p->caches[0].rel, ".cache/pip");
  EXPECT_FALSE(p->caches[0].agent_writable);
  EXPECT_EQ(p->caches[1].rel, ".ccache");
  EXPECT_TRUE(p->caches[1].agent_writable);
  EXPECT_EQ(p->caches[2].rel, ".npm");
  EXPECT_FALSE(p->caches[2].agent_writable);
}

TEST(SetupKeys, CacheMistakesAreErrors) {
  EXPECT_THAT(MustFail("cache /var/cache/apt\n"), HasSubstr("write it as ~/PATH"));
  EXPECT_THAT(MustFail("cache node_modules\n"), HasSubstr("write it as ~/PATH"));
  EXPECT_THAT(MustFail("cache ~\n"), HasSubstr("write it as ~/PATH"));
  EXPECT_THAT(MustFail("cache ~/../etc\n"), HasSubstr("invalid path"));
  EXPECT_THAT(MustFail("cache ~/.npm ~/.npm\n"), HasSubstr("listed twice"));
  EXPECT_THAT(MustFail("cache read-write\n"), HasSubstr("needs one or more ~/ paths"));
  EXPECT_THAT(MustFail("cache\n"), HasSubstr("needs one or more ~/ paths"));
}

TEST(SetupKeys, CarryNamesCheckoutPathsOnly) {
  auto p = MustCompile("carry node_modules .venv web/node_modules\n");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->carry.size(), 3U);
  EXPECT_EQ(p->carry[0].rel, ".venv");
  EXPECT_EQ(p->carry[2].rel, "web/node_modules");
  EXPECT_THAT(MustFail("carry /opt/deps\n"), HasSubstr("relative to its top level"));
  EXPECT_THAT(MustFail("carry ~/.venv\n"), HasSubstr("relative to its top level"));
  EXPECT_THAT(MustFail("carry .\n"), HasSubstr("relative to its top level"));
  EXPECT_THAT(MustFail("carry ../sibling\n"), HasSubstr("invalid path"));
  EXPECT_THAT(MustFail("carry .git/hooks\n"), HasSubstr("git's own directory"));
  EXPECT_THAT(MustFail("carry a a\n"), HasSubstr("listed twice"));
}

TEST(SetupKeys, GitIdentityDefaultsToTheCaller) {
  auto p = MustCompile("workspace read-write\n");
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->git_identity.value);
  EXPECT_FALSE(p->git_identity.set);
  auto none = MustCompile("git-identity none\n");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->git_identity.value);
  EXPECT_THAT(MustFail("git-identity me\n"), HasSubstr("unknown git identity 'me'"));
  EXPECT_THAT(MustFail("git-identity none\ngit-identity caller\n"), HasSubstr("set twice"));
}

TEST(SetupKeys, AChildsSetupReplacesItsParentsCachesAndCarryAddUp) {
  // The built-in frontend profile has no setup; a two-level chain through a real file is covered
  // by the loader tests, so here the child is the profile itself over `extends frontend`.
  auto p = MustCompile(
      "extends frontend\n"
      "cache ~/.npm\n"
      "carry node_modules\n"
      "git-identity none\n"
      "setup {\n  run \"npm ci\"\n}\n");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->setup.commands.size(), 1U);
  EXPECT_EQ(p->caches.size(), 1U);
  EXPECT_EQ(p->carry.size(), 1U);
  EXPECT_FALSE(p->git_identity.value);
}

TEST(SetupKeys, TheDumpWritesThemBackAndCompilesToTheSamePolicy) {
  auto p = MustCompile(
      "network loopback\n"
      "cache ~/.npm\ncache read-write ~/.cache/ccache\n"
      "carry node_modules\n"
      "git-identity none\n"
      "setup {\n  run \"npm ci\" timeout 10m\n  hosts { allow registry.npmjs.org }\n}\n");
  ASSERT_TRUE(p);
  const std::string text = Dump(*p, /*with_locations=*/false);
  EXPECT_THAT(text, HasSubstr("cache read-write ~/.cache/ccache\ncache ~/.npm\n"));
  EXPECT_THAT(text, HasSubstr("carry node_modules"));
  EXPECT_THAT(text, HasSubstr("git-identity none"));
  EXPECT_THAT(text, HasSubstr("  hosts {\n    allow registry.npmjs.org\n  }\n"));
  auto again = MustCompile(text);
  ASSERT_TRUE(again);
  EXPECT_EQ(Dump(*again, false), text);
}

TEST(SetupKeys, DiffSaysWhatSetupCachesCarryAndIdentityWiden) {
  auto from = MustCompile("network loopback\nsetup {\n  run \"npm ci\"\n}\n");
  auto to = MustCompile(
      "network loopback\ncache ~/.npm\ncarry node_modules\ngit-identity none\n"
      "setup {\n  run \"npm ci\"\n  hosts { allow registry.npmjs.org }\n}\n");
  ASSERT_TRUE(from && to);
  std::string all;
  for (const DiffEntry& e : Diff(*from, *to)) {
    all += std::string(DirectionName(e.direction)) + " " + e.area + ": " + e.text + "\n";
  }
  EXPECT_THAT(all, HasSubstr("wider setup: added: setup hosts allow registry.npmjs.org"));
  EXPECT_THAT(all, HasSubstr("wider cache: added: cache ~/.npm"));
  EXPECT_THAT(all, HasSubstr("wider carry: added: carry node_modules"));
  EXPECT_THAT(all, HasSubstr("narrower git-identity: changed: git-identity caller -> none"));
}

TEST(SetupKeys, AuditRatesTheSetupBlocksHostsLikeTheProfiles) {
  auto wide = MustCompile("setup {\n  run \"npm ci\"\n  hosts { allow * }\n}\n");
  auto narrow = MustCompile("setup {\n  run \"npm ci\"\n  hosts { allow registry.npmjs.org }\n}\n");
  ASSERT_TRUE(wide && narrow);
  auto any_host = [](const Policy& p) {
    for (const Finding& f : Audit(p)) {
      if (f.rule_id == "CAGENT012") return f.message;
    }
    return std::string();
  };
  EXPECT_THAT(any_host(*wide), HasSubstr("setup hosts: allow *"));
  EXPECT_EQ(any_host(*narrow), "");
}

}  // namespace
}  // namespace cagent::policy
