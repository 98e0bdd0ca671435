// The report and --resume's check on hostile results directories: result.json files are written
// by runs whose strings quote the agent and the repository, and anyone who can write DIR can
// plant or edit them.
#include "launcher/batch/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "launcher/batch/results.h"

namespace cagent::launcher::batch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;

// A run's record as the run's result.json gives it to batch (run::ReadRunResult).
std::optional<run::RunRecord> RunOf(const json& j) { return run::RunRecord::FromJson(j).value(); }

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-report-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }

  // DIR/<id>/result.json of a finished task.
  void Put(const std::string& id, std::size_t index, const std::string& status, bool verified,
           const std::string& reason = {}) {
    BatchTask t;
    t.id = id;
    t.index = index;
    t.line = index + 1;
    fs::create_directories(root_ + "/" + id);
    json run = {{"status", status},
                {"verified", verified},
                {"reason", reason},
                {"run_id", "r-" + id},
                {"usage", {{"model_turns", 2}, {"input_tokens", 100}, {"output_tokens", 10}}}};
    BatchFields f;
    f.wall_time_ms = 1500;
    ASSERT_TRUE(RecordResult(root_, t, MakeResult(t, RunOf(run), "", "", f)).ok());
  }

  std::string root_;
};

TEST_F(ReportTest, RowsFollowTheTaskIndexAndTotalsAddUp) {
  Put("zeta", 0, "completed", true);
  Put("alpha", 2, "failed", false, "verification failed");
  Put("mid", 1, "completed", true);
  fs::create_directories(root_ + "/" + std::string(kPreviousDir) + "/old");  // not a task
  std::ofstream(root_ + "/_slurm-1_0.out") << "log\n";                       // not a task
  auto r = BuildReport(root_);
  ASSERT_TRUE(r.ok()) << r.error().Message();
  ASSERT_EQ((*r)["rows"].size(), 3U);
  EXPECT_EQ((*r)["rows"][0]["id"], "zeta");
  EXPECT_EQ((*r)["rows"][1]["id"], "mid");
  EXPECT_EQ((*r)["rows"][2]["id"], "alpha");
  EXPECT_EQ((*r)["counts"], (json{{"completed", 2}, {"failed", 1}}));
  EXPECT_EQ((*r)["verified"], 2);
  EXPECT_DOUBLE_EQ((*r)["verified_rate"].get<double>(), 0.6667);
  EXPECT_EQ((*r)["tokens"]["total"], 330);
  EXPECT_EQ((*r)["turns"], 6);
  EXPECT_EQ((*r)["wall_time_ms"], 4500);
  EXPECT_FALSE(AllSucceeded(*r));
  // summary.jsonl got one line per recorded task.
  std::ifstream in(root_ + "/summary.jsonl");
  int lines = 0;
  for (std::string l; std::getline(in, l);) ++lines;
  EXPECT_EQ(lines, 3);
}

TEST_F(ReportTest, CostsAreAddedUpPerCurrencyAndShown) {
  BatchTask t;
  t.id = "priced";
  fs::create_directories(root_ + "/priced");
  json run = {{"status", "completed"},
              {"verified", true},
              {"run_id", "r-priced"},
              {"usage",
               {{"model_turns", 2},
                {"input_tokens", 100},
                {"output_tokens", 10},
                {"cache_read_tokens", 60},
                {"cost", {{"micros", 12300}, {"currency", "USD"}}}}}};
  ASSERT_TRUE(RecordResult(root_, t, MakeResult(t, RunOf(run), "", "", BatchFields{})).ok());
  Put("unpriced", 1, "completed", true);
  auto r = BuildReport(root_);
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_EQ((*r)["cost"], (json{{"USD", {{"micros", 12300}, {"text", "0.0123 USD"}}}}));
  EXPECT_EQ((*r)["rows"][0]["cost"], "0.0123 USD");
  EXPECT_EQ((*r)["rows"][0]["cache_read_tokens"], 60);
  EXPECT_TRUE((*r)["rows"][1]["cost"].is_null());
  EXPECT_THAT(ReportText(*r), HasSubstr("cost     0.0123 USD"));
  EXPECT_THAT(ReportCsv(*r), HasSubstr(",0.0123 USD\r\n"));
}

TEST_F(ReportTest, ADirectoryWithoutAResultIsReportedNotSkipped) {
  Put("done", 0, "completed", true);
  fs::create_directories(root_ + "/running");
  auto r = BuildReport(root_);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)["rows"].size(), 2U);
  EXPECT_EQ((*r)["rows"][1]["id"], "running");
  EXPECT_EQ((*r)["rows"][1]["status"], "unknown");
  EXPECT_FALSE(AllSucceeded(*r));
  EXPECT_FALSE(BuildReport(root_ + "/nope").ok());
}

TEST_F(ReportTest, HostileStringsReachNeitherTheTerminalNorASpreadsheetRaw) {
  const std::string evil = "\x1b[2J\x1b[1;1Hall verified\nsecond line";
  Put("t1", 0, "failed", false, evil);
  Put("t2", 1, "failed", false, "=HYPERLINK(\"http://evil\",\"x\")");
  auto r = BuildReport(root_);
  ASSERT_TRUE(r.ok());
  // Twin: the reason really carries the escape and the formula...
  ASSERT_THAT((*r)["rows"][0]["reason"].get<std::string>(), HasSubstr("\x1b"));
  ASSERT_EQ((*r)["rows"][1]["reason"].get<std::string>()[0], '=');
  // ...and neither output passes them on.
  const std::string text = ReportText(*r);
  EXPECT_THAT(text, Not(HasSubstr("\x1b")));
  EXPECT_THAT(text, Not(HasSubstr("second line")));  // one line per task
  const std::string csv = ReportCsv(*r);
  EXPECT_THAT(csv, Not(HasSubstr("\x1b")));
  EXPECT_THAT(csv, Not(HasSubstr(",=HYPERLINK")));
  EXPECT_THAT(csv, Not(HasSubstr(",\"=HYPERLINK")));
  EXPECT_THAT(csv, HasSubstr(",\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\""));
}

TEST_F(ReportTest, ResumeRerunsWhatIsNotAFinishedRunOfItsOwn) {
  BatchTask t;
  t.id = "t";
  EXPECT_THAT(CheckComplete(root_, t), Optional(HasSubstr("no result.json")));
  Put("t", 0, "cancelled", false);
  EXPECT_THAT(CheckComplete(root_, t), Optional(HasSubstr("ended 'cancelled'")));
  // A result that points at a run directory elsewhere (copied in, or edited) is not kept.
  BatchFields f;
  f.run_dir = "/tmp/elsewhere/state/runs/r";
  ASSERT_TRUE(
      RecordResult(root_, t,
                   MakeResult(t, RunOf({{"status", "completed"}, {"run_id", "r"}}), "", "", f))
          .ok());
  EXPECT_THAT(CheckComplete(root_, t), Optional(HasSubstr("not under")));
  // Its own run directory, but the run's result.json says something else than the copy.
  const std::string run_dir = root_ + "/t/state/runs/r";
  fs::create_directories(run_dir);
  std::ofstream(run_dir + "/result.json") << R"({"status": "failed", "run_id": "r"})";
  f.run_dir = run_dir;
  ASSERT_TRUE(
      RecordResult(root_, t,
                   MakeResult(t, RunOf({{"status", "completed"}, {"run_id", "r"}}), "", "", f))
          .ok());
  EXPECT_THAT(CheckComplete(root_, t), Optional(HasSubstr("differs from the batch's copy")));
  BatchTask other;
  other.id = "u";
  fs::create_directories(root_ + "/u");
  fs::copy_file(root_ + "/t/result.json", root_ + "/u/result.json");
  EXPECT_THAT(CheckComplete(root_, other), Optional(HasSubstr("another task")));
}

}  // namespace
}  // namespace cagent::launcher::batch
