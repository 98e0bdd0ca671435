// Reading a run's result.json back (cagent runs, show, diff, apply, log check, batch): the file is
// refused when it is a link, too large, or nested deep enough to exhaust the recursive parser.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "launcher/run/run.h"

namespace cagent::launcher::run {
namespace {

using ::testing::HasSubstr;

TEST(ParseRunResultTest, AnObjectIsARecordAndAnythingElseIsNot) {
  auto ok = ParseRunResult(R"({"status":"completed","verified":true})", "r");
  ASSERT_TRUE(ok.ok()) << ok.error().Message();
  EXPECT_EQ((*ok)["status"], "completed");
  EXPECT_THAT(ParseRunResult("[1]", "r").error().Message(), HasSubstr("not a JSON object"));
  EXPECT_THAT(ParseRunResult("{", "r").error().Message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(ParseRunResult("", "r").error().Message(), HasSubstr("not valid JSON"));
}

// nlohmann's json recurses per level (a parsed value's destruction and dump at least): five
// million levels take the stack. The twin shows it, in a child; ParseRunResult counts the depth
// first and refuses the same text. (At kMaxRunResultDepth a text is parsed: the limit, not the
// text, refuses.)
TEST(ParseRunResultTest, DeepNestingIsRefusedBeforeParsing) {
  constexpr std::size_t kLevels = 5'000'000;
  const std::string deep = "{\"a\":" + std::string(kLevels, '[') + std::string(kLevels, ']') + "}";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        nlohmann::json j = nlohmann::json::parse(deep, nullptr, false);
        std::fprintf(stderr, "%zu\n", j.dump().size());
      },
      "");
  auto r = ParseRunResult(deep, "result.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().Message(), HasSubstr("nested more than"));
  const std::size_t inner = kMaxRunResultDepth - 1;
  const std::string at_limit = "{\"a\":" + std::string(inner, '[') + std::string(inner, ']') + "}";
  EXPECT_TRUE(ParseRunResult(at_limit, "result.json").ok());
}

TEST(ReadRunResultTest, AMissingLinkedOrHugeFileIsRefused) {
  std::string tmpl = ::testing::TempDir() + "/run-result-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  EXPECT_THAT(ReadRunResult(dir).error().Message(), HasSubstr("has no result.json"));
  std::ofstream(dir + "/elsewhere.json") << R"({"status":"completed"})";
  ASSERT_EQ(::symlink("elsewhere.json", (dir + "/result.json").c_str()), 0);
  auto linked = ReadRunResult(dir);
  ASSERT_FALSE(linked.ok());
  EXPECT_EQ(linked.error().err, ELOOP);
  std::filesystem::remove(dir + "/result.json");
  std::filesystem::rename(dir + "/elsewhere.json", dir + "/result.json");
  auto ok = ReadRunResult(dir);
  ASSERT_TRUE(ok.ok()) << ok.error().Message();
  EXPECT_EQ((*ok)["status"], "completed");
  std::filesystem::resize_file(dir + "/result.json", kMaxRunResultBytes + 1);
  EXPECT_THAT(ReadRunResult(dir).error().Message(), HasSubstr("is larger than"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cagent::launcher::run
