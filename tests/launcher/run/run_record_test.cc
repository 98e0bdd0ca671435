// RunRecord's one ToJson and one FromJson (run_record.h): what a run writes reads back the same,
// and whatever else is in result.json (an older cagent's record, a damaged or planted one) reads
// back as defaults, never as an exception.
#include "launcher/run/run_record.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include "common/json_text.h"
#include "policy/language/loader.h"

namespace cagent::launcher::run {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

VerifyEntry Entry(const std::string& command, VerifyEntry::Status status, int exit_code,
                  const std::string& tree) {
  VerifyEntry v;
  v.command = command;
  v.status = status;
  v.exit_code = exit_code;
  v.duration = std::chrono::milliseconds(1234);
  v.log_path = "/runs/r1/logs/01-verify.log";
  v.tree = tree;
  v.detail = "exit status " + std::to_string(exit_code);
  return v;
}

// Every member set, none at its default.
RunRecord FullRecord() {
  RunRecord r;
  r.run_id = "20261207T113724Z-abcdef";
  r.sequence = 42;
  r.state = RunState::kFailed;
  r.reason = "verification: 'make test' failed (exit status 2)";
  r.run_dir = "/state/runs/20261207T113724Z-abcdef";
  r.profile = "backend";
  r.profile_file = "/repo/.cagent/backend.cagent";
  r.profile_sha256 = std::string(64, 'a');
  r.outputs = {"build/**", "**/__pycache__"};
  r.profile_from_repository = true;
  r.policy_digest = std::string(64, 'b');
  r.repo = "/home/u/src/app";
  r.base_commit = std::string(40, 'c');
  r.carried_dirty = true;
  r.carried_paths = {"M src/x.c", "?? new.txt"};
  r.task_file = r.run_dir + "/task.md";
  r.model = "replay:fix.jsonl";
  r.agent_summary = "fixed the off-by-one";
  r.patch.patch = "diff --git a/x b/x\n";
  r.patch.sha256 = std::string(64, 'd');
  r.patch.tree = std::string(40, 'e');
  r.patch.files = {{.path = "src/x.c",
                    .status = 'M',
                    .old_mode = "100644",
                    .new_mode = "100755",
                    .binary = true,
                    .submodule = false},
                   {.path = "vendor/lib",
                    .status = 'A',
                    .old_mode = "000000",
                    .new_mode = "160000",
                    .binary = false,
                    .submodule = true}};
  r.patch.check_output = "src/x.c:3: trailing whitespace.";
  r.patch.check_clean = false;
  r.patch.left_out.files = 7;
  r.patch.left_out.roots = {{.path = "build", .files = 6}, {.path = "src/__pycache__", .files = 1}};
  r.patch.left_out.sources = {"build/gen.c"};
  r.patch.left_out.sources_total = 3;
  r.violations = {{.rule = "deny write .github/**", .path = ".github/x", .message = "no"}};
  r.verification = {Entry("make", VerifyEntry::Status::kPassed, 0, std::string(40, 'f')),
                    Entry("make test", VerifyEntry::Status::kFailed, 2, std::string(40, 'f'))};
  r.setup = {Entry("npm ci", VerifyEntry::Status::kPassed, 0, "")};
  r.verify_setup = {Entry("npm ci", VerifyEntry::Status::kTimedOut, -1, std::string(40, 'f'))};
  r.used = {.model_turns = 3,
            .input_tokens = 1000,
            .output_tokens = 200,
            .cache_read_tokens = 600,
            .cache_write_tokens = 100,
            .reasoning_tokens = 50,
            .cost_micros = 4321,
            .currency = "USD",
            .tool_calls = 9,
            .tool_calls_by_kind = {{"read_file", 5}, {"run_command", 4}},
            .output_bytes = 4096,
            .elapsed = std::chrono::milliseconds(65000)};
  r.budgets.model_turns = 40;
  r.budgets.model_tokens = 100000;
  r.budgets.tool_calls = 200;
  r.budgets.output_bytes = 1U << 20U;
  r.budgets.wall_time = std::chrono::milliseconds(1800000);
  r.budgets.model_cost = Money{2500000, "USD"};
  r.layers = {"userns", "seccomp"};
  r.downgrades = {"landlock: ABI 1 (no truncate)"};
  r.git_guard = "on";
  r.host_findings = {"planted .git in sub/"};
  r.planted_repositories = {"/state/runs/r1/workspace/sub/.git"};
  r.cleared_files = {"/state/runs/r1/workspace/tool"};
  r.git_config_rewrites = {{.path = "/w/.git/config", .dropped = {"core.fsmonitor"}, .reason = ""}};
  r.denials = 2;
  r.approvals_asked = 1;
  r.egress = {{"relayed", 3}, {"refused", 1}, {"hosts_reached", {"pypi.org:443"}}};
  r.credentials = {{.name = "gh",
                    .source = "env",
                    .hosts = {"github.com", "api.github.com"},
                    .requests = 4,
                    .refused = 1,
                    .misdirected = 2}};
  r.credentials_skipped = {
      "npm: no value (NPM_TOKEN in cagent's environment); optional, so skipped"};
  r.needs_approval = PendingApproval{.tool = "run_command",
                                     .action = "npm install left-pad",
                                     .resolved_paths = {"/w/package.json"},
                                     .digest = std::string(64, '1'),
                                     .rule = "ask npm install *",
                                     .location = "backend.cagent:31:5"};
  r.created_at = "2026-12-07T11:37:24Z";
  r.finished_at = "2026-12-07T11:40:00Z";
  r.event_log_entries = 57;
  r.event_log_head = std::string(64, '2');
  r.event_log_lost = 1;
  return r;
}

TEST(RunRecordJsonTest, AFullRecordReadsBackTheSame) {
  const RunRecord r = FullRecord();
  const json written = r.ToJson();
  auto back = RunRecord::FromJson(written);
  ASSERT_TRUE(back.ok()) << back.error().Message();
  EXPECT_EQ(back->ToJson(), written);
  // Through the file's text, as the readers get it.
  auto parsed = ParseRunResult(JsonText(written, 2) + "\n", "result.json");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(RunRecord::FromJson(*parsed)->ToJson(), written);
  // The derived fields read back as the readers use them.
  EXPECT_EQ(back->state, RunState::kFailed);
  EXPECT_FALSE(back->unknown_status);
  EXPECT_EQ(back->patch_size(), r.patch.patch.size());
  EXPECT_TRUE(back->patch.patch.empty());  // the text stays in patch.diff
  EXPECT_EQ(back->verified_tree(), std::string(40, 'f'));
  EXPECT_EQ(back->event_log(), r.run_dir + "/events.jsonl");
  EXPECT_EQ(back->event_log_entries, 57U);
  EXPECT_TRUE(back->verification_failed());
  EXPECT_FALSE(back->verified());
  EXPECT_EQ(written["exit_code"], ToInt(ExitCodeFor(RunState::kFailed, true)));
  EXPECT_EQ(written["needs_approval"]["pre_approve"], "sha256:" + std::string(64, '1'));
  EXPECT_EQ(back->needs_approval->resolved_paths, r.needs_approval->resolved_paths);
  EXPECT_EQ(back->used.tool_calls_by_kind, r.used.tool_calls_by_kind);
  EXPECT_EQ(back->budgets.wall_time, r.budgets.wall_time);
  EXPECT_EQ(back->used.cost_micros, 4321U);
  EXPECT_EQ(back->used.currency, "USD");
  EXPECT_EQ(back->used.cache_read_tokens, 600U);
  ASSERT_TRUE(back->budgets.model_cost);
  EXPECT_EQ(back->budgets.model_cost->micros, 2500000U);
  EXPECT_EQ(back->patch.files[1].status, 'A');
  EXPECT_TRUE(back->patch.files[1].submodule);
  EXPECT_EQ(back->git_config_rewrites[0].dropped, r.git_config_rewrites[0].dropped);
}

// The file's format is what the run has always written: these are the names readers, scripts and
// docs/architecture.md rely on.
// issue 36: the credentials' summary, its names in the file, and a record without it (an older
// cagent's) reads back with none.
TEST(RunRecordJsonTest, CredentialsAreSummarisedAndAbsentMeansNone) {
  const json j = FullRecord().ToJson();
  ASSERT_TRUE(j.contains("credentials"));
  const json& loaded = j["credentials"]["loaded"];
  ASSERT_EQ(loaded.size(), 1U);
  for (const char* key : {"name", "source", "hosts", "requests", "refused", "misdirected"}) {
    EXPECT_TRUE(loaded[0].contains(key)) << key;
  }
  EXPECT_EQ(j["credentials"]["skipped"].size(), 1U);
  json older = j;
  older.erase("credentials");
  auto back = RunRecord::FromJson(older);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->credentials.empty());
  EXPECT_TRUE(back->credentials_skipped.empty());
  older["credentials"] = {{"loaded", "no list"}, {"skipped", {1, "kept"}}};
  back = RunRecord::FromJson(older);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->credentials.empty());
  EXPECT_EQ(back->credentials_skipped, std::vector<std::string>{"kept"});
}

TEST(SummarizeCredentialsTest, CountsUsesRefusalsAndMisdirectedAttemptsPerCredential) {
  policy::SearchPath search;
  auto compiled = policy::CompileText(
      "creds.cagent",
      "network loopback\nhosts {\n  allow github.com\n  allow registry.npmjs.org\n}\n"
      "credentials {\n  gh env GH_TOKEN for github.com\n"
      "  npm env NPM_TOKEN for registry.npmjs.org\n  off optional env OFF for github.com\n}\n",
      search);
  ASSERT_TRUE(compiled.policy) << "profile did not compile";
  auto at = [](const std::string& host, std::vector<std::string> used, bool allowed,
               const std::string& misdirected) {
    egress::ExchangeRecord r;
    r.request.dest.host = host;
    r.request.dest.port = 443;
    r.credentials = std::move(used);
    r.allowed = allowed;
    r.misdirected = misdirected;
    return r;
  };
  const std::vector<egress::ExchangeRecord> exchanges = {
      at("github.com", {"gh"}, true, ""),
      at("github.com", {"gh"}, true, ""),
      at("github.com", {}, false, ""),              // refused by a rule, on gh's host
      at("github.com", {}, false, "npm"),           // npm's placeholder sent to github.com
      at("registry.npmjs.org", {"npm"}, true, ""),  // npm used
  };
  const auto out = SummarizeCredentials(*compiled.policy, {"gh", "npm"}, exchanges);
  ASSERT_EQ(out.size(), 2U);  // "off" had no value
  EXPECT_EQ(out[0].name, "gh");
  EXPECT_EQ(out[0].source, "env");
  EXPECT_EQ(out[0].hosts, std::vector<std::string>{"github.com"});
  EXPECT_EQ(out[0].requests, 2U);
  EXPECT_EQ(out[0].refused, 1U);
  EXPECT_EQ(out[0].misdirected, 0U);
  EXPECT_EQ(out[1].name, "npm");
  EXPECT_EQ(out[1].requests, 1U);
  EXPECT_EQ(out[1].refused, 0U);
  EXPECT_EQ(out[1].misdirected, 1U);
}

TEST(RunRecordJsonTest, TheFileKeepsItsFieldNames) {
  RunRecord r = FullRecord();
  r.state = RunState::kCompleted;
  r.verification.pop_back();
  const json j = r.ToJson();
  for (const char* key : {"run_id",
                          "sequence",
                          "status",
                          "reason",
                          "exit_code",
                          "verified",
                          "run_dir",
                          "profile",
                          "profile_file",
                          "profile_sha256",
                          "profile_from_repository",
                          "policy_digest",
                          "repo",
                          "base_commit",
                          "carried_dirty",
                          "carried_paths",
                          "task",
                          "model",
                          "agent_summary",
                          "patch",
                          "changed_files",
                          "left_out",
                          "outputs",
                          "violations",
                          "setup",
                          "verification",
                          "verified_tree",
                          "verify_tree",
                          "usage",
                          "budgets",
                          "denials",
                          "approvals_asked",
                          "egress",
                          "credentials",
                          "needs_approval",
                          "sandbox",
                          "event_log",
                          "event_log_entries",
                          "event_log_head",
                          "event_log_lost",
                          "agent_log",
                          "workspace",
                          "created_at",
                          "finished_at"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.size(), 44U);
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["verified"], true);
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["patch"]["bytes"], r.patch.patch.size());
  EXPECT_EQ(j["patch"]["file"], r.run_dir + "/patch.diff");
  EXPECT_EQ(j["verify_tree"], r.run_dir + "/verify-tree");
  EXPECT_EQ(j["changed_files"][0]["status"], "M");
  EXPECT_EQ(j["setup"]["verify_tree"][0]["status"], "timed-out");
  EXPECT_EQ(j["budgets"]["wall_time_ms"], 1800000);
}

TEST(RunRecordJsonTest, AFreshRecordReadsBackTheSame) {
  // What the last-resort record of a run that died at once looks like: nearly every default.
  RunRecord r;
  r.run_id = "r";
  const json written = r.ToJson();
  EXPECT_EQ(written["egress"], nullptr);
  EXPECT_EQ(written["needs_approval"], nullptr);
  EXPECT_EQ(written["event_log_entries"], 0);
  EXPECT_EQ(written["budgets"]["model_turns"], nullptr);
  EXPECT_EQ(RunRecord::FromJson(written)->ToJson(), written);
}

TEST(RunRecordJsonTest, OnlyANonObjectIsRefused) {
  for (const json& j : {json(nullptr), json(7), json("{}"), json::array({json::object()})}) {
    auto r = RunRecord::FromJson(j);
    ASSERT_FALSE(r.ok()) << j;
    EXPECT_THAT(r.error().Message(), HasSubstr("not a JSON object"));
  }
  auto empty = RunRecord::FromJson(json::object());
  ASSERT_TRUE(empty.ok());
  // An older cagent's record, or an empty one: every member at its default, the status unknown.
  EXPECT_EQ(empty->unknown_status, "");
  EXPECT_EQ(empty->status(), "");
  EXPECT_EQ(RunShowExitCode(*empty), ExitCode::kRunFailed);
  EXPECT_FALSE(empty->event_log_entries);
  EXPECT_FALSE(empty->patch_bytes);
  EXPECT_FALSE(empty->recorded_verified);
  EXPECT_FALSE(empty->verified());
  EXPECT_TRUE(empty->patch.files.empty());
  EXPECT_TRUE(empty->patch.check_clean);
  EXPECT_TRUE(empty->egress.is_null());
}

TEST(RunRecordJsonTest, WrongTypesAndBadNumbersReadAsDefaults) {
  const json j = {
      {"run_id", 7},
      {"sequence", -1},
      {"status", {{"completed", true}}},
      {"verified", "yes"},
      {"reason", nullptr},
      {"outputs", {"build/**", 3, nullptr, {{"x", 1}}}},
      {"carried_dirty", 1},
      {"patch", {{"bytes", -5}, {"sha256", 12}, {"diff_check_clean", "no"}}},
      {"changed_files", {"a.txt", {{"path", "b"}, {"status", "MM"}, {"binary", "true"}}, 4}},
      {"left_out", {{"files", 1.5}, {"paths", {{{"path", 1}, {"files", -2}}, "x"}}}},
      {"verification",
       {{{"status", "exploded"}, {"exit_code", 1e300}, {"duration_ms", -3}},
        {{"exit_code", std::numeric_limits<std::uint64_t>::max()}},
        {{"exit_code", std::numeric_limits<std::int64_t>::min()}, {"duration_ms", 1e30}},
        "not an entry"}},
      {"setup", "none"},
      {"usage",
       {{"model_turns", 18446744073709551615ULL},
        {"input_tokens", -1},
        {"tool_calls_by_kind", {{"read_file", -1}, {"run_command", 2}}},
        {"elapsed_ms", std::numeric_limits<std::uint64_t>::max()}}},
      {"budgets", {{"model_turns", "40"}, {"wall_time_ms", -1}, {"tool_calls", 0.5}}},
      {"sandbox", {{"layers", "userns"}, {"git_config_rewrites", {5, {{"dropped_keys", 1}}}}}},
      {"egress", "lots"},
      {"needs_approval", {"run_command"}},
      {"event_log_entries", -7},
      {"event_log_head", false},
      {"event_log_lost", 2.0},
  };
  RunRecord r;
  ASSERT_NO_THROW({
    auto back = RunRecord::FromJson(j);
    ASSERT_TRUE(back.ok());
    r = std::move(*back);
  });
  EXPECT_EQ(r.run_id, "");
  EXPECT_EQ(r.sequence, 0U);
  EXPECT_EQ(r.unknown_status, "");
  EXPECT_EQ(r.state, RunState::kFailed);
  EXPECT_FALSE(r.recorded_verified);
  EXPECT_EQ(r.outputs, std::vector<std::string>{"build/**"});
  EXPECT_FALSE(r.carried_dirty);
  EXPECT_FALSE(r.patch_bytes);
  EXPECT_EQ(r.patch.sha256, "");
  EXPECT_TRUE(r.patch.check_clean);
  ASSERT_EQ(r.patch.files.size(), 3U);  // an element that is no object is an entry of defaults
  EXPECT_EQ(r.patch.files[0].path, "");
  EXPECT_EQ(r.patch.files[0].status, '?');
  EXPECT_EQ(r.patch.files[1].path, "b");
  EXPECT_EQ(r.patch.files[1].status, '?');
  EXPECT_FALSE(r.patch.files[1].binary);
  EXPECT_EQ(r.patch.left_out.files, 0U);
  ASSERT_EQ(r.patch.left_out.roots.size(), 2U);
  EXPECT_EQ(r.patch.left_out.roots[0].files, 0U);
  ASSERT_EQ(r.verification.size(), 4U);
  EXPECT_EQ(r.verification[0].status, VerifyEntry::Status::kNotRun);
  EXPECT_EQ(r.verification[0].exit_code, -1);
  EXPECT_EQ(r.verification[0].duration.count(), 0);
  EXPECT_EQ(r.verification[1].exit_code, -1);
  EXPECT_EQ(r.verification[2].exit_code, -1);
  EXPECT_EQ(r.verification[2].duration.count(), 0);
  EXPECT_TRUE(r.setup.empty());
  EXPECT_EQ(r.used.model_turns, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(r.used.input_tokens, 0U);
  EXPECT_EQ(r.used.tool_calls_by_kind, (std::map<std::string, std::uint64_t>{{"run_command", 2}}));
  EXPECT_EQ(r.used.elapsed.count(), 0);  // beyond milliseconds' range
  EXPECT_FALSE(r.budgets.model_turns);
  EXPECT_FALSE(r.budgets.wall_time);
  EXPECT_FALSE(r.budgets.tool_calls);
  EXPECT_TRUE(r.layers.empty());
  ASSERT_EQ(r.git_config_rewrites.size(), 2U);
  EXPECT_TRUE(r.git_config_rewrites[1].dropped.empty());
  EXPECT_TRUE(r.egress.is_null());
  EXPECT_FALSE(r.needs_approval);
  EXPECT_FALSE(r.event_log_entries);
  EXPECT_EQ(r.event_log_head, "");
  EXPECT_EQ(r.event_log_lost, 0U);
  // What it reads as writes out and reads back again the same.
  EXPECT_EQ(RunRecord::FromJson(r.ToJson())->ToJson(), r.ToJson());
  EXPECT_EQ(RunShowExitCode(r), ExitCode::kRunFailed);
}

TEST(RunRecordJsonTest, AStatusOfNoRunStateIsKeptNotMistakenForOne) {
  // A newer cagent's state, or a batch's own ("crashed"): shown as written, never "failed".
  const json j = {{"status", "crashed"}, {"verified", false}};
  const RunRecord r = RunRecord::FromJson(j).value();
  EXPECT_EQ(r.unknown_status, "crashed");
  EXPECT_EQ(r.status(), "crashed");
  EXPECT_EQ(r.ToJson()["status"], "crashed");
  EXPECT_EQ(r.ToJson()["exit_code"], ToInt(ExitCode::kRunFailed));
  EXPECT_EQ(RunRow("x", &r)["status"], "crashed");
}

TEST(RunRecordJsonTest, RecordedDerivedFieldsAreWhatReadersSee) {
  // A record that says it is verified and how big its patch is, without the entries or the text.
  const json j = {{"status", "completed"}, {"verified", true}, {"patch", {{"bytes", 99}}}};
  const RunRecord r = RunRecord::FromJson(j).value();
  EXPECT_TRUE(r.verified());
  EXPECT_EQ(r.patch_size(), 99U);
  EXPECT_THAT(RunShowText(r), HasSubstr("patch        99 bytes"));
  EXPECT_EQ(r.ToJson()["verified"], true);
  EXPECT_EQ(r.ToJson()["patch"]["bytes"], 99);
}

}  // namespace
}  // namespace cagent::launcher::run
