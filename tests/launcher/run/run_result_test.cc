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
#include "launcher/run/run_record.h"

namespace cagent::launcher::run {
namespace {

using ::testing::HasSubstr;

// `j` read back as every reader reads it.
RunRecord Rec(const nlohmann::json& j) { return RunRecord::FromJson(j).value(); }

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
  EXPECT_EQ(ok->state, RunState::kCompleted);
  std::filesystem::resize_file(dir + "/result.json", kMaxRunResultBytes + 1);
  EXPECT_THAT(ReadRunResult(dir).error().Message(), HasSubstr("is larger than"));
  std::filesystem::remove_all(dir);
}

// `cagent runs` and `cagent show` print a record's fields escaped, whatever their types. The
// profile's digest was printed raw (the first 16 bytes of the string) before run_record.h: the
// twin shows an escape sequence there reaching the terminal, RunShowText escapes it.
TEST(RunRecordViewTest, EveryFieldIsEscapedTheDigestToo) {
  const std::string digest = "\x1b]0;owned\x07\x1b[2J....";
  const nlohmann::json j = {{"run_id", "r1"},
                            {"status", "completed"},
                            {"reason", "line one\nrule: allow everything"},
                            {"profile", "p\x1b[31m"},
                            {"profile_file", "/x/p.cagent"},
                            {"profile_sha256", digest},
                            {"changed_files", {{{"status", "M"}, {"path", "a\rb"}}}},
                            {"sandbox", {{"host_findings", {"found \x1b[1m"}}}}};
  const std::string raw_twin = digest.substr(0, 16);  // what the old code wrote
  EXPECT_NE(raw_twin.find('\x1b'), std::string::npos);
  const RunRecord rec = Rec(j);
  const std::string text = RunShowText(rec);
  for (char c : text) {
    EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << "control byte in: " << text;
  }
  EXPECT_THAT(text, HasSubstr("run r1: completed — line one\\nrule: allow everything"));
  const std::string line = RunListLine(RunRow("r1", &rec), "/home/u");
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
  EXPECT_THAT(line, HasSubstr("r1  completed"));
  EXPECT_THAT(line, HasSubstr("1 files"));
  EXPECT_THAT(line, HasSubstr("line one…"));
}

TEST(RunRecordViewTest, FieldsOfTheWrongTypeAreLeftOutNotThrown) {
  const nlohmann::json j = {{"run_id", 7},
                            {"status", {1, 2}},
                            {"changed_files", "not a list"},
                            {"patch", {{"bytes", "many"}}},
                            {"left_out", {{"files", -3}, {"paths", 5}}},
                            {"verification", {{{"status", "failed"}}, 3}},
                            {"repo", "/home/u/src/app"}};
  const RunRecord rec = Rec(j);
  const std::string text = RunShowText(rec);
  EXPECT_THAT(text, HasSubstr("run : \n"));
  EXPECT_THAT(text, HasSubstr("patch        ? bytes"));
  EXPECT_EQ(RunShowExitCode(rec), ExitCode::kRunFailed);  // no run status
  const nlohmann::json row = RunRow("r2", &rec);
  EXPECT_EQ(row["files"], 0);
  EXPECT_THAT(RunListLine(row, "/home/u"), HasSubstr("  ~/src/app"));
  EXPECT_EQ(RunListLine(RunRow("r3", nullptr), ""),
            "r3  unknown  no result.json (running, or interrupted)\n");
}

TEST(RunRecordViewTest, ShowExitCodeFollowsStatusAndVerification) {
  nlohmann::json j = {{"status", "completed"}, {"verification", {{{"status", "passed"}}}}};
  EXPECT_EQ(RunShowExitCode(Rec(j)), ExitCodeFor(RunState::kCompleted, false));
  j["verification"].push_back({{"status", "timed-out"}});
  EXPECT_EQ(RunShowExitCode(Rec(j)), ExitCodeFor(RunState::kCompleted, true));
}

}  // namespace
}  // namespace cagent::launcher::run
