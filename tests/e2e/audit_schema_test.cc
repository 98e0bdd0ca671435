// The audit log schema end to end: the real demo (`cagent run` with the replayed model, the real
// broker, sandbox, capture and verification) writes an events.jsonl every line of which conforms
// to the schema, as `cagent log check` judges it; a line changed to break the schema is reported
// with its line number and what is wrong; `cagent log schema --json` lists every event the demo
// wrote.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class AuditSchemaE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Harness& h = Harness::Get();
    if (!h.skip_reason().empty()) GTEST_SKIP() << h.skip_reason();
    if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
    dir_ = h.MakeDir("audit-schema");
    repo_ = dir_ + "/repo";
    h.MakeDemoRepo(repo_);
    h.GiveToRunUser(dir_);
    ASSERT_FALSE(HasFailure()) << "setting up the demo repository";
    env_.extra_env = {"XDG_STATE_HOME=" + dir_ + "/state"};
    env_.timeout = std::chrono::seconds(120);
  }

  // Runs the demo to completion; returns its result record (fails the test when it did not
  // complete).
  json RunDemo() {
    const std::string source(CAGENT_SOURCE_DIR);
    const RunResult r =
        Harness::Get().Run({"run", "--profile", repo_ + "/.cagent/fix-add.cagent", "--repo", repo_,
                            "--model", "replay:" + source + "/examples/fix-add/session.jsonl",
                            "--approve", "never", "--json", source + "/examples/fix-add/task.md"},
                           env_);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto brace = r.out.find('{');
    if (brace == std::string::npos) return json();
    return json::parse(r.out.substr(brace), nullptr, false);
  }

  std::string dir_, repo_;
  RunOptions env_;
};

TEST_F(AuditSchemaE2eTest, EveryLineOfTheDemosEventLogConformsToTheSchema) {
  const json res = RunDemo();
  ASSERT_TRUE(res.is_object() && res.contains("event_log")) << res;
  const std::string log = res["event_log"].get<std::string>();
  const std::string id = res["run_id"].get<std::string>();

  // The whole check, by run id: the chain, result.json's count and head, and every line.
  const RunResult check = Harness::Get().Run({"log", "check", "--json", id}, env_);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  const json report = json::parse(check.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << check.out;
  EXPECT_EQ(report["ok"], true) << check.out;
  EXPECT_EQ(report["chain_ok"], true) << check.out;
  EXPECT_EQ(report["schema_ok"], true) << check.out;
  EXPECT_EQ(report["schema_problems"], json::array()) << check.out;
  const std::vector<std::string> lines = Lines(ReadFile(log));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(report["entries"], lines.size());
  EXPECT_EQ(report["entries"], res["event_log_entries"]);

  // The events the demo wrote are events of the published schema, and a demo run writes at least
  // the whole life of a run.
  const RunResult schema = Harness::Get().Run({"log", "schema", "--json"}, env_);
  ASSERT_EQ(schema.exit_code, 0) << schema.err;
  const json published = json::parse(schema.out, nullptr, false);
  ASSERT_TRUE(published.is_object() && published["events"].is_array()) << schema.out;
  std::set<std::string> known;
  for (const json& e : published["events"]) known.insert(e["event"].get<std::string>());
  std::set<std::string> seen;
  for (const std::string& line : lines) {
    const json e = json::parse(line, nullptr, false);
    ASSERT_TRUE(e.is_object()) << line;
    seen.insert(e["event"].get<std::string>());
    EXPECT_TRUE(known.contains(e["event"].get<std::string>())) << line;
  }
  for (const char* expected :
       {"state", "workspace", "hello", "welcome", "model_call", "model_result", "decision",
        "tool_result", "finish", "shutdown", "patch", "verify_tree", "verify"}) {
    EXPECT_TRUE(seen.contains(expected)) << "the demo's log has no " << expected << " entry";
  }

  // The twin: the same log with its last line given a field the schema does not declare. The
  // chain of a copy without result.json still verifies (only the head digest would show the
  // edit), so only the schema check can find it, and it says where.
  std::vector<std::string> edited = lines;
  json last = json::parse(edited.back());
  last["detail"]["injected"] = "text";
  edited.back() = last.dump();
  std::string content;
  for (const std::string& l : edited) content += l + "\n";
  const std::string copy = dir_ + "/edited.jsonl";
  WriteFile(copy, content);
  const RunResult verify = Harness::Get().Run({"log", "verify", copy}, env_);
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  const RunResult bad = Harness::Get().Run({"log", "check", copy}, env_);
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_THAT(bad.out, HasSubstr(copy + ":" + std::to_string(edited.size()) +
                                 ": schema: detail.injected: not a field of " +
                                 last["event"].get<std::string>()));
}

}  // namespace
}  // namespace cagent::testing
