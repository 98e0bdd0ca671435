// `outputs GLOB…` (issue 32): what builds leave in the workspace, left out of the agent's patch
// when git does not track it. What the checker accepts and refuses (exact diagnostics, caret
// included), how a chain merges it (a child adds), which paths it covers, and that dump, diff and
// audit show it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
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

TEST(Outputs, GlobsAreSortedUniqueAndATrailingSlashIsDropped) {
  auto p = MustCompile("outputs build/ dist **/__pycache__/\noutputs *.egg-info/\n");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->outputs.size(), 4U);
  EXPECT_EQ(p->outputs[0].pattern, "**/__pycache__");
  EXPECT_EQ(p->outputs[1].pattern, "*.egg-info");
  EXPECT_EQ(p->outputs[2].pattern, "build");
  EXPECT_EQ(p->outputs[3].pattern, "dist");
}

TEST(Outputs, APathIsCoveredWhenItOrADirectoryAboveItMatches) {
  auto p = MustCompile("outputs build **/__pycache__ *.egg-info\n");
  ASSERT_TRUE(p);
  EXPECT_TRUE(UnderOutputs(p->outputs, "build"));
  EXPECT_TRUE(UnderOutputs(p->outputs, "build/CMakeFiles/a.o"));
  EXPECT_TRUE(UnderOutputs(p->outputs, "src/pkg/__pycache__/m.cpython-311.pyc"));
  EXPECT_TRUE(UnderOutputs(p->outputs, "app.egg-info/PKG-INFO"));
  // Anchored at the top: build is the top-level directory, not any directory of that name.
  EXPECT_FALSE(UnderOutputs(p->outputs, "src/build/x.c"));
  EXPECT_FALSE(UnderOutputs(p->outputs, "builder/x.c"));
  EXPECT_FALSE(UnderOutputs(p->outputs, "src/app.egg-info/PKG-INFO"));
  EXPECT_FALSE(UnderOutputs(p->outputs, ""));
  EXPECT_FALSE(UnderOutputs({}, "build/a.o"));
}

TEST(Outputs, MistakesAreErrorsWithACaret) {
  EXPECT_EQ(MustFail("outputs build /tmp/out\n"),
            "test.cagent:1:15: error: outputs are paths of the workspace, relative to its top "
            "level\n"
            "  outputs build /tmp/out\n"
            "                ^~~~~~~~\n"
            "  hint: e.g. outputs build/ dist/ **/__pycache__/\n");
  EXPECT_THAT(MustFail("outputs ~/.cache\n"), HasSubstr("relative to its top level"));
  EXPECT_THAT(MustFail("outputs build**\n"),
              HasSubstr("test.cagent:1:9: error: invalid glob 'build**'"));
  EXPECT_THAT(MustFail("outputs a/../b\n"), HasSubstr("invalid glob"));
  EXPECT_THAT(MustFail("outputs .git/objects\n"), HasSubstr("git's own directory"));
  EXPECT_THAT(MustFail("outputs build build/\n"), HasSubstr("outputs build is listed twice"));
  EXPECT_THAT(MustFail("outputs\n"), HasSubstr("'outputs' needs one or more workspace path globs"));
  EXPECT_THAT(MustFail("outputs { build }\n"), HasSubstr("'outputs' does not take a block"));
  EXPECT_THAT(MustFail("outputs (build | dist)\n"), HasSubstr("alternatives '( | )'"));
  EXPECT_THAT(MustFail("output build\n"), HasSubstr("did you mean 'outputs'?"));
}

TEST(Outputs, AChildAddsToItsParentsAndCannotRemoveThem) {
  SearchPath search;
  Compiled parent = CompileText("parent.cagent", "outputs build\n", search);
  ASSERT_TRUE(parent.ok());
  // Through a real chain: the child's file extends the parent's by path.
  const std::string dir = ::testing::TempDir() + "/outputs_chain";
  std::string mk = "mkdir -p '" + dir + "'";
  ASSERT_EQ(std::system(mk.c_str()), 0);
  {
    FILE* f = std::fopen((dir + "/parent.cagent").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("extends backend\noutputs build dist\n", f);
    std::fclose(f);
  }
  Compiled child =
      CompileText(dir + "/child.cagent", "extends parent\noutputs target build\n", search);
  ASSERT_TRUE(child.ok()) << RenderAll(*child.sources, child.diags);
  ASSERT_EQ(child.policy->outputs.size(), 3U);
  EXPECT_EQ(child.policy->outputs[0].pattern, "build");
  EXPECT_EQ(child.policy->outputs[1].pattern, "dist");
  EXPECT_EQ(child.policy->outputs[2].pattern, "target");
  // The parent's location is kept for what both name.
  EXPECT_THAT(child.policy->Where(child.policy->outputs[0].loc), HasSubstr("parent.cagent:2:9"));
}

TEST(Outputs, TheDumpWritesThemBackAndTheJsonListsThem) {
  auto p = MustCompile("outputs build/ **/__pycache__\n");
  ASSERT_TRUE(p);
  const std::string text = Dump(*p, /*with_locations=*/false);
  EXPECT_THAT(text, HasSubstr("outputs **/__pycache__\noutputs build\n"));
  auto again = MustCompile(text);
  ASSERT_TRUE(again);
  EXPECT_EQ(Dump(*again, false), text);
  const auto j = ToJson(*p);
  ASSERT_TRUE(j["outputs"].is_array());
  ASSERT_EQ(j["outputs"].size(), 2U);
  EXPECT_EQ(j["outputs"][1]["pattern"], "build");
  EXPECT_EQ(j["outputs"][1]["at"], "test.cagent:1:9");
  // A profile without outputs dumps none (the built-in profiles' golden files do not change).
  auto none = MustCompile("extends backend\n");
  ASSERT_TRUE(none);
  EXPECT_THAT(Dump(*none, false), ::testing::Not(HasSubstr("outputs")));
}

TEST(Outputs, DiffShowsThemAsNeutral) {
  auto from = MustCompile("outputs build\n");
  auto to = MustCompile("outputs dist\n");
  ASSERT_TRUE(from && to);
  std::string all;
  for (const DiffEntry& e : Diff(*from, *to)) {
    all += std::string(DirectionName(e.direction)) + " " + e.area + ": " + e.text + "\n";
  }
  EXPECT_EQ(all, "neutral outputs: added: outputs dist\nneutral outputs: removed: outputs build\n");
}

TEST(Outputs, AuditNamesEachGlobAndRatesOneOverSourcesLow) {
  auto p = MustCompile("outputs build\noutputs src\n");
  ASSERT_TRUE(p);
  std::vector<Finding> found;
  for (const Finding& f : Audit(*p)) {
    if (f.rule_id == "CAGENT017") found.push_back(f);
  }
  ASSERT_EQ(found.size(), 2U);
  // Most severe first.
  EXPECT_EQ(found[0].risk, Risk::kLow);
  EXPECT_THAT(found[0].message, HasSubstr("'outputs src' also covers source files (src/main.c"));
  EXPECT_EQ(p->Where(found[0].loc), "test.cagent:2:9");
  EXPECT_EQ(found[1].risk, Risk::kInfo);
  EXPECT_THAT(found[1].message, HasSubstr("'outputs build': files git does not track"));
  bool listed = false;
  for (const AuditRule& r : AuditRules()) listed = listed || r.id == "CAGENT017";
  EXPECT_TRUE(listed);
}

}  // namespace
}  // namespace cagent::policy
