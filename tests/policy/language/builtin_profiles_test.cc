// The built-in profiles: each compiles (which runs its inline examples), and its dump matches the
// golden file in tests/golden/, so any change to a built-in profile is a reviewable diff.
//
// To accept a deliberate change: CAGENT_UPDATE_GOLDEN=1 build/tests/cagent_policy_tests
//   --gtest_filter='Builtin*' and review `git diff tests/golden`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "policy/language/dump.h"
#include "policy/language/loader.h"
#include "policy/language/parser.h"

namespace cagent::policy {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class BuiltinProfile : public ::testing::TestWithParam<std::string> {};

TEST_P(BuiltinProfile, CompilesAndMatchesGoldenDump) {
  SearchPath search;  // built-ins only
  Compiled c = LoadProfile(GetParam(), search);
  ASSERT_TRUE(c.ok()) << RenderAll(*c.sources, c.diags);
  std::string dump = Dump(*c.policy);
  std::string golden_path =
      std::string(CAGENT_SOURCE_DIR) + "/tests/golden/" + GetParam() + ".dump";
  if (std::getenv("CAGENT_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(golden_path) << dump;
    GTEST_SKIP() << "golden file rewritten: " << golden_path;
  }
  std::string golden = ReadFile(golden_path);
  ASSERT_FALSE(golden.empty()) << "missing golden file " << golden_path
                               << " (run with CAGENT_UPDATE_GOLDEN=1 to create it)";
  EXPECT_EQ(dump, golden) << "the dump of '" << GetParam()
                          << "' changed; if intended, regenerate with CAGENT_UPDATE_GOLDEN=1";
}

TEST_P(BuiltinProfile, DumpCompilesBackToTheSamePolicy) {
  SearchPath search;
  Compiled c = LoadProfile(GetParam(), search);
  ASSERT_TRUE(c.ok()) << RenderAll(*c.sources, c.diags);
  // The dump is itself a profile: compiling it must give the same dump (locations aside).
  std::string dump = Dump(*c.policy, /*with_locations=*/false);
  Compiled again = CompileText(GetParam() + ".cagent", dump, search);
  ASSERT_TRUE(again.ok()) << RenderAll(*again.sources, again.diags) << dump;
  std::string redump = Dump(*again.policy, false);
  // The chain line differs (the re-compiled text has no parent); compare from the second line.
  EXPECT_EQ(dump.substr(dump.find('\n')), redump.substr(redump.find('\n')));
}

TEST_P(BuiltinProfile, IsEmbeddedAndMatchesTheSourceFile) {
  std::string source =
      ReadFile(std::string(CAGENT_SOURCE_DIR) + "/profiles/" + GetParam() + ".cagent");
  bool found = false;
  for (const auto& b : BuiltinProfiles()) {
    if (b.name == GetParam()) {
      found = true;
      EXPECT_EQ(b.text, source) << "the embedded copy is stale; rebuild";
    }
  }
  EXPECT_TRUE(found);
}

INSTANTIATE_TEST_SUITE_P(All, BuiltinProfile,
                         ::testing::Values("base", "readonly", "docs", "frontend", "backend",
                                           "backend-registries", "frontend-registries",
                                           "mcp-server", "agent-cli"),
                         [](const auto& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(BuiltinProfiles, EveryProfileFileIsListed) {
  // A new file in profiles/ must be added to the parameter list above (and get a golden dump).
  EXPECT_EQ(BuiltinProfiles().size(), 9U);
}

}  // namespace
}  // namespace cagent::policy
