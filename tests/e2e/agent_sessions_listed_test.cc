// `cagent agent` sessions in `cagent runs`, `cagent log` and `cagent rm` (issue #20): a session
// records how it ended (sessions/ID.session.json) with a number from the counter runs use, so it
// is listed with the runs in order, with kind "agent"; its audit log prints, verifies and checks by
// id, prefix or 'last'; show/diff/apply of it say it has no patch; rm removes it. And a session's
// accepted downgrades are reported once, and -q silences them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

class AgentSessionsListed : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& h = Harness::Get();
    if (!h.skip_reason().empty()) GTEST_SKIP() << h.skip_reason();
    dir_ = h.MakeDir("sessions");
    ws_ = dir_ + "/ws";
    state_ = dir_ + "/state";
    fs::create_directories(ws_);
    WriteFile(ws_ + "/notes.txt", "hello\n");
    WriteFile(dir_ + "/task.md", "# Look at the notes\n");
    WriteFile(dir_ + "/session.jsonl", ToolTurn("run_command", {{"command", "cat notes.txt"}}) +
                                           ToolTurn("finish", {{"summary", "Read the notes."}}));
    // A run made before the session, numbered 1 by the counter (runs/sequence says 1).
    const std::string run = state_ + "/cagent/runs/20261201T100000Z-aaaaaa";
    WriteFile(run + "/result.json", json{{"run_id", "20261201T100000Z-aaaaaa"},
                                         {"status", "completed"},
                                         {"reason", ""},
                                         {"repo", dir_ + "/repo"},
                                         {"profile", "fix-add"},
                                         {"created_at", "2026-12-01T10:00:00Z"},
                                         {"changed_files", json::array()}}
                                        .dump());
    WriteFile(run + "/sequence", "1\n");
    WriteFile(state_ + "/cagent/runs/sequence", "1\n");
    h.GiveToRunUser(dir_);
    ASSERT_FALSE(HasFailure());
  }

  RunOptions Env() const {
    RunOptions o;
    o.extra_env = {"XDG_STATE_HOME=" + state_};
    o.timeout = std::chrono::seconds(120);
    return o;
  }

  RunResult Agent(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"agent",
                                     "--profile",
                                     "backend",
                                     "--workspace",
                                     ws_,
                                     "--model",
                                     "replay:" + dir_ + "/session.jsonl",
                                     "--approve",
                                     "never"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(dir_ + "/task.md");
    return Harness::Get().Run(args, Env());
  }

  json Rows(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"runs", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = Harness::Get().Run(args, Env());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out, nullptr, false);
  }

  static json Parse(const std::string& out) {
    const auto brace = out.find('{');
    return brace == std::string::npos ? json() : json::parse(out.substr(brace), nullptr, false);
  }

  std::string dir_, ws_, state_;
};

TEST_F(AgentSessionsListed, ASessionIsListedAfterTheRunAndItsLogPrintsAndVerifies) {
  const RunResult a = Agent({"--json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const json out = Parse(a.out);
  ASSERT_TRUE(out.is_object()) << a.out;
  const std::string id = out["run_id"];
  EXPECT_EQ(out["kind"], "agent");
  EXPECT_EQ(out["sequence"], 2);  // the counter the run took 1 from

  // Listed with the run, after it, as kind "agent" with how it ended. (Before issue #20's change
  // `cagent runs` read runs/ only: the array held the run alone.)
  const json rows = Rows();
  ASSERT_TRUE(rows.is_array()) << rows.dump();
  ASSERT_EQ(rows.size(), 2U) << rows.dump();
  EXPECT_EQ(rows[0]["run_id"], "20261201T100000Z-aaaaaa");
  EXPECT_EQ(rows[0]["kind"], "run");
  EXPECT_EQ(rows[1]["run_id"], id);
  EXPECT_EQ(rows[1]["kind"], "agent");
  EXPECT_EQ(rows[1]["status"], "completed");
  EXPECT_EQ(rows[1]["sequence"], 2);
  EXPECT_EQ(rows[1]["workspace"], ws_);
  const RunResult table = Harness::Get().Run({"runs"}, Env());
  EXPECT_THAT(table.out, HasSubstr(id + "  completed  backend  (agent session)"));

  // The filters apply to sessions too.
  EXPECT_EQ(Rows({"--status", "completed"}).size(), 2U);
  EXPECT_EQ(Rows({"--status", "failed"}).size(), 0U);
  const json in_ws = Rows({"--repo", ws_});
  ASSERT_EQ(in_ws.size(), 1U) << in_ws.dump();
  EXPECT_EQ(in_ws[0]["run_id"], id);
  fs::create_directories(dir_ + "/elsewhere");
  EXPECT_EQ(Rows({"--repo", dir_ + "/elsewhere"}).size(), 0U);

  // `cagent log` by id, by prefix and as 'last': printed, chain checked against the record.
  const RunResult log = Harness::Get().Run({"log", id}, Env());
  EXPECT_EQ(log.exit_code, 0) << log.err;
  EXPECT_THAT(log.out, HasSubstr("finish"));
  EXPECT_THAT(log.out, HasSubstr("as recorded in the session's record"));
  const RunResult verify = Harness::Get().Run({"log", "verify", id.substr(0, 20)}, Env());
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_THAT(verify.out, HasSubstr("ok: "));
  const RunResult check = Harness::Get().Run({"log", "check", "last"}, Env());
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_THAT(check.out, HasSubstr("run " + id));

  // A session has no patch: show, diff and apply say so and where to look instead.
  for (const char* verb : {"show", "diff", "apply"}) {
    const RunResult r = Harness::Get().Run({verb, id}, Env());
    EXPECT_EQ(r.exit_code, 2) << verb;
    EXPECT_THAT(r.err, HasSubstr(id +
                                 " is a `cagent agent` session: it has no patch; see cagent "
                                 "log " +
                                 id))
        << verb;
  }
  // 'last' for show is the newest run, not the session after it.
  const RunResult show_last = Harness::Get().Run({"show", "--json", "last"}, Env());
  EXPECT_EQ(Parse(show_last.out)["run_id"], "20261201T100000Z-aaaaaa") << show_last.err;

  // rm removes the session's files, and the listing no longer has it (the twin of the listing
  // above: what `cagent runs` shows comes from those files).
  const RunResult rm = Harness::Get().Run({"rm", id}, Env());
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_THAT(rm.out, HasSubstr("removed agent session " + id + " (3 files)"));
  EXPECT_FALSE(fs::exists(state_ + "/cagent/sessions/" + id + ".audit.jsonl"));
  EXPECT_FALSE(fs::exists(state_ + "/cagent/sessions/" + id + ".session.json"));
  EXPECT_EQ(Rows().size(), 1U);
}

TEST_F(AgentSessionsListed, ASessionThatDidNotRecordItsEndIsUnfinished) {
  // What a session that crashed leaves: its record as written at the start, and its log.
  const RunResult a = Agent({"--json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const std::string id = Parse(a.out)["run_id"];
  const std::string record = state_ + "/cagent/sessions/" + id + ".session.json";
  json started = json::parse(ReadFile(record));
  started["status"] = "unfinished";
  started.erase("event_log_entries");
  started.erase("event_log_head");
  WriteFile(record, started.dump());
  const json rows = Rows({"--status", "unfinished"});
  ASSERT_EQ(rows.size(), 1U) << rows.dump();
  EXPECT_EQ(rows[0]["run_id"], id);
  EXPECT_THAT(rows[0]["reason"].get<std::string>(), HasSubstr("no end recorded"));
  // Its log still prints and verifies, saying nothing recorded its length.
  const RunResult log = Harness::Get().Run({"log", id}, Env());
  EXPECT_EQ(log.exit_code, 0) << log.err;
  EXPECT_THAT(log.out, HasSubstr("agent session whose end is not recorded"));
  // rm leaves it alone unless --force, as it does a run without result.json.
  const RunResult kept = Harness::Get().Run({"rm", id}, Env());
  EXPECT_EQ(kept.exit_code, 2);
  EXPECT_THAT(kept.err, HasSubstr("--force"));
  const RunResult all = Harness::Get().Run({"rm", "--all", "--json"}, Env());
  EXPECT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(Parse(all.out)["skipped_unfinished"], json::array({id}));
  EXPECT_TRUE(fs::exists(record));
  const RunResult forced = Harness::Get().Run({"rm", "--force", id}, Env());
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_FALSE(fs::exists(record));
}

TEST_F(AgentSessionsListed, AnAuditLogElsewhereIsFoundByIdAndKeptByRm) {
  const std::string log = dir_ + "/mine.audit.jsonl";
  const RunResult a = Agent({"--json", "--audit-log", log});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const std::string id = Parse(a.out)["run_id"];
  const RunResult verify = Harness::Get().Run({"log", "verify", id}, Env());
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  const RunResult rm = Harness::Get().Run({"rm", id}, Env());
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_THAT(rm.out, HasSubstr("(--audit-log) is kept"));
  EXPECT_TRUE(fs::exists(log));
  // An existing --audit-log is refused before anything is recorded.
  const RunResult again = Agent({"--audit-log", log});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("the file exists"));
  EXPECT_EQ(Rows().size(), 1U);  // the run only
}

TEST_F(AgentSessionsListed, ADowngradeIsReportedOncePerSessionAndQuietSilencesIt) {
  const RunResult a = Agent({"--json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const json downgrades = Parse(a.out)["downgrades"];
  ASSERT_TRUE(downgrades.is_array()) << a.out;
  if (downgrades.empty()) {
    GTEST_SKIP() << "this machine enforces the profile's cgroup limits: there is no downgrade";
  }
  for (const json& d : downgrades) {
    const std::string line = "downgrade: " + d.get<std::string>();
    std::size_t printed = 0;
    for (auto at = a.err.find(line); at != std::string::npos; at = a.err.find(line, at + 1)) {
      ++printed;
    }
    EXPECT_EQ(printed, 1U) << a.err;
  }
  const RunResult quiet = Agent({"--json", "-q"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_THAT(quiet.err, Not(HasSubstr("downgrade")));
  EXPECT_EQ(Parse(quiet.out)["downgrades"], downgrades);  // still recorded
}

}  // namespace
}  // namespace cagent::testing
