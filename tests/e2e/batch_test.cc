// `cagent batch run` and `cagent batch report` end to end: a task file of replayed demo runs
// (examples/fix-add: its repository, task and recorded session), each task a real `cagent run` in
// a real sandbox. Checks what a harness over many repositories relies on: every task gets its own
// directory, run and workspace; a task that fails verification, crashes or is cancelled is
// recorded as such and blocks nothing; --resume keeps only results whose evidence still holds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kSource = CAGENT_SOURCE_DIR;

class BatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& h = Harness::Get();
    if (!h.skip_reason().empty()) GTEST_SKIP() << h.skip_reason();
    if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
    dir_ = h.MakeDir("batch");
    results_ = dir_ + "/results";
    // The demo's task and session beside the task file: a task file's paths stay beneath its
    // directory unless the operator says otherwise (launcher/batch/tasks.h).
    fs::copy_file(kSource + "/examples/fix-add/task.md", dir_ + "/task.md");
    fs::copy_file(kSource + "/examples/fix-add/session.jsonl", dir_ + "/session.jsonl");
  }

  // A demo repository at dir_/NAME; `edit` (a shell command run in it) changes it before the
  // commit.
  std::string Repo(const std::string& name, const std::string& edit = {}) {
    const std::string repo = dir_ + "/" + name;
    fs::copy(kSource + "/examples/fix-add/repo", repo, fs::copy_options::recursive);
    if (!edit.empty()) {
      EXPECT_EQ(std::system(("cd '" + repo + "' && " + edit).c_str()), 0) << edit;
    }
    Harness::Get().MakeDemoRepo(repo, /*copy=*/false);
    return repo;
  }

  // One task line on `repo` replaying the demo's session.
  std::string Task(const std::string& id, const std::string& repo,
                   const std::string& task_file = "task.md") const {
    return json{{"id", id},
                {"repo", repo},
                {"task_file", task_file},
                {"profile", "fix-add"},
                {"model", "replay:" + dir_ + "/session.jsonl"}}
               .dump() +
           "\n";
  }

  void WriteTasks(const std::string& text) {
    WriteFile(dir_ + "/tasks.jsonl", text);
    Harness::Get().GiveToRunUser(dir_);
  }

  RunResult Batch(std::vector<std::string> args) {
    args.insert(args.begin(), "batch");
    RunOptions o;
    o.timeout = std::chrono::seconds(110);
    return Harness::Get().Run(args, o);
  }

  json Result(const std::string& id) const {
    return json::parse(ReadFile(results_ + "/" + id + "/result.json"), nullptr, false);
  }

  std::vector<json> Summary() const {
    std::vector<json> lines;
    std::istringstream in(ReadFile(results_ + "/summary.jsonl"));
    for (std::string line; std::getline(in, line);) {
      lines.push_back(json::parse(line, nullptr, false));
    }
    return lines;
  }

  std::string dir_, results_;
};

TEST_F(BatchTest, RunsEachTaskInItsOwnRunAndRecordsAVerificationFailure) {
  const std::string calc = Repo("calc");
  // The replayed fix makes test_add pass; this repository's mul is broken too, so verification
  // still fails after the patch.
  const std::string broken = Repo("broken", "sed -i 's/return a \\* b/return a + b/' calc.py");
  WriteTasks(Task("same-1", calc) + Task("same-2", calc) + Task("bad", broken) +
             Task("url", "file://" + calc));
  const RunResult r = Batch({"run", dir_ + "/tasks.jsonl", "--results", results_, "--jobs", "2"});
  SCOPED_TRACE(r.err);
  EXPECT_EQ(r.exit_code, 1) << "one task failed verification";
  EXPECT_THAT(r.err, HasSubstr("batch: bad failed"));

  std::vector<std::string> workspaces;
  for (const char* id : {"same-1", "same-2", "url"}) {
    const json res = Result(id);
    ASSERT_TRUE(res.is_object()) << id;
    EXPECT_EQ(res["status"], "completed") << id;
    EXPECT_EQ(res["verified"], true) << id;
    EXPECT_EQ(res["batch"]["task_id"], id);
    EXPECT_EQ(res["batch"]["exit_status"], 0);
    const std::string run_dir = res["batch"]["run_dir"];
    // The run lives under the task's own directory, and so does its workspace.
    EXPECT_EQ(run_dir.rfind(results_ + "/" + id + "/state/runs/", 0), 0U) << run_dir;
    EXPECT_EQ(res["run_dir"], run_dir);
    EXPECT_TRUE(fs::is_regular_file(run_dir + "/events.jsonl")) << run_dir;
    workspaces.push_back(res["workspace"]);
  }
  // Two tasks on one repository: two workspaces.
  EXPECT_NE(workspaces[0], workspaces[1]);
  // The URL task ran on cagent's clone, not on the repository it came from.
  EXPECT_EQ(Result("url")["repo"], results_ + "/url/repo");
  EXPECT_FALSE(fs::exists(results_ + "/url/repo/.git/hooks")) << "cloned with --template=";

  const json bad = Result("bad");
  EXPECT_EQ(bad["status"], "failed");
  EXPECT_EQ(bad["verified"], false);
  EXPECT_EQ(bad["batch"]["exit_status"], 1) << "cagent run's 'verification failed'";

  const std::vector<json> summary = Summary();
  ASSERT_EQ(summary.size(), 4U);
  std::vector<std::string> ids;
  for (const auto& line : summary) ids.push_back(line["id"]);
  EXPECT_THAT(ids, ::testing::UnorderedElementsAre("same-1", "same-2", "bad", "url"));

  // The report: counts, verified rate, rows in task order; CSV the same rows.
  const RunResult rep = Batch({"report", results_, "--json"});
  EXPECT_EQ(rep.exit_code, 1) << "not every task completed and verified";
  const json report = json::parse(rep.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << rep.out << rep.err;
  EXPECT_EQ(report["tasks"], 4);
  EXPECT_EQ(report["counts"], (json{{"completed", 3}, {"failed", 1}}));
  EXPECT_EQ(report["verified"], 3);
  EXPECT_DOUBLE_EQ(report["verified_rate"].get<double>(), 0.75);
  ASSERT_EQ(report["rows"].size(), 4U);
  EXPECT_EQ(report["rows"][0]["id"], "same-1");
  EXPECT_EQ(report["rows"][2]["id"], "bad");
  EXPECT_EQ(report["rows"][3]["id"], "url");
  EXPECT_EQ(report["tokens"]["total"].get<std::uint64_t>(),
            4 * report["rows"][0]["tokens"].get<std::uint64_t>())
      << "four replays of one session";
  const RunResult csv = Batch({"report", results_, "--csv"});
  EXPECT_THAT(csv.out, HasSubstr("index,id,line,status,verified,"));
  EXPECT_THAT(csv.out, HasSubstr("\r\n2,bad,3,failed,false,"));
  const RunResult text = Batch({"report", results_});
  EXPECT_THAT(text.out, HasSubstr("verified 3/4 (75.0%)"));

  // Without --resume the earlier results are not overwritten.
  const RunResult again = Batch({"run", dir_ + "/tasks.jsonl", "--results", results_});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("pass --resume"));

  // --resume keeps what still checks and reruns a task whose patch.diff was altered (twin: the
  // untouched tasks keep their run ids).
  const std::string tampered = Result("same-2")["batch"]["run_dir"].get<std::string>();
  ASSERT_EQ(Harness::Get().ShAsUser(dir_, "echo '+evil' >> '" + tampered + "/patch.diff'"), 0);
  // And one whose event log lost its last line (the chain alone still verifies).
  const std::string cut = Result("url")["batch"]["run_dir"].get<std::string>();
  ASSERT_EQ(Harness::Get().ShAsUser(dir_, "sed -i '$d' '" + cut + "/events.jsonl'"), 0);
  const std::string kept = Result("same-1")["run_id"];
  const std::string was = Result("same-2")["run_id"];
  const std::string url_was = Result("url")["run_id"];
  const RunResult resumed =
      Batch({"run", dir_ + "/tasks.jsonl", "--results", results_, "--resume", "--jobs", "2"});
  SCOPED_TRACE(resumed.err);
  EXPECT_EQ(resumed.exit_code, 1) << "bad's failure is kept, not hidden";
  EXPECT_EQ(Result("same-1")["run_id"], kept);
  EXPECT_EQ(Result("bad")["status"], "failed");
  const json rerun = Result("same-2");
  EXPECT_NE(rerun["run_id"], was);
  EXPECT_EQ(rerun["status"], "completed");
  EXPECT_THAT(rerun["batch"]["rerun_reason"].get<std::string>(), HasSubstr("patch.diff"));
  const json url_rerun = Result("url");
  EXPECT_NE(url_rerun["run_id"], url_was);
  EXPECT_THAT(url_rerun["batch"]["rerun_reason"].get<std::string>(), HasSubstr("event log"));
  EXPECT_EQ(Summary().size(), 6U) << "two more lines: the reruns";
  EXPECT_TRUE(fs::is_directory(results_ + "/.previous")) << "the altered attempt is kept aside";
  const json after = json::parse(Batch({"report", results_, "--json"}).out, nullptr, false);
  EXPECT_THAT(after["rows"][1]["rerun_reason"].get<std::string>(), HasSubstr("sha256"));
}

TEST_F(BatchTest, CloningARepositoryRunsNothingItsAttributesAskFor) {
  // A repository whose .gitattributes names a filter, and a caller whose git configuration
  // defines one (as git-lfs installs do): the caller's config plus the repository's attributes
  // run a program on checkout.
  const std::string evil = Repo("evil", "echo '*.py filter=evil' > .gitattributes");
  const std::string home = dir_ + "/home";
  const std::string marker = dir_ + "/smudged";
  // Quoted: git's config reads an unquoted ';' as the start of a comment.
  WriteFile(home + "/.gitconfig",
            "[filter \"evil\"]\n\tsmudge = \"touch " + marker + " && cat\"\n\tclean = cat\n");
  WriteTasks(Task("cloned", "file://" + evil));
  // Twin: a plain clone with that configuration runs the filter.
  ASSERT_EQ(
      Harness::Get().ShAsUser(dir_, "HOME='" + home + "' git clone -q 'file://" + evil + "' twin"),
      0);
  ASSERT_TRUE(fs::exists(marker)) << "the twin clone did not run the filter";
  fs::remove(marker);
  RunOptions o;
  o.timeout = std::chrono::seconds(110);
  o.extra_env = {"HOME=" + home};
  const RunResult r =
      Harness::Get().Run({"batch", "run", dir_ + "/tasks.jsonl", "--results", results_}, o);
  SCOPED_TRACE(r.err);
  EXPECT_FALSE(fs::exists(marker)) << "batch's clone ran the repository's filter";
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(Result("cloned")["status"], "completed");
}

TEST_F(BatchTest, AnInvalidTaskFileRunsNothingAndNamesEveryBadLine) {
  const std::string calc = Repo("calc");
  WriteTasks(Task("ok", calc) + "{\"id\": \"../x\"}\n" + Task("ok", calc));
  const RunResult r = Batch({"run", dir_ + "/tasks.jsonl", "--results", results_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("tasks.jsonl:2: "));
  EXPECT_THAT(r.err, HasSubstr("tasks.jsonl:3: duplicate id \"ok\""));
  EXPECT_FALSE(fs::exists(results_));
  const RunResult idx =
      Batch({"run", dir_ + "/tasks.jsonl", "--results", results_, "--index", "0"});
  EXPECT_EQ(idx.exit_code, 2) << "an invalid file is refused whatever --index selects";
}

TEST_F(BatchTest, IndexRunsOnlyThatTaskAsAnArrayTaskWould) {
  const std::string calc = Repo("calc");
  WriteTasks(Task("zero", calc) + "\n" + Task("one", calc));  // a blank line is not a task
  const RunResult out_of_range =
      Batch({"run", dir_ + "/tasks.jsonl", "--results", results_, "--index", "2", "--jobs", "1"});
  EXPECT_EQ(out_of_range.exit_code, 2);
  EXPECT_THAT(out_of_range.err, HasSubstr("has 2 tasks"));
  EXPECT_FALSE(fs::exists(results_)) << "nothing is made for a command line that is wrong";
  const RunResult r =
      Batch({"run", dir_ + "/tasks.jsonl", "--results", results_, "--index", "1", "--jobs", "1"});
  SCOPED_TRACE(r.err);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_FALSE(fs::exists(results_ + "/zero")) << "only the selected task runs";
  const json one = Result("one");
  EXPECT_EQ(one["status"], "completed");
  EXPECT_EQ(one["batch"]["index"], 1);
  EXPECT_EQ(one["batch"]["line"], 3);
  // Another array task's index adds to the same DIR.
  EXPECT_EQ(Batch({"run", dir_ + "/tasks.jsonl", "--results", results_, "--index", "0"}).exit_code,
            0);
  EXPECT_EQ(Summary().size(), 2U);
}

// The commands that look at runs reach a batch task's run with --state-dir, as its run.log's hint
// says; without it they look in the caller's state directory, where the run is not (the twin).
TEST_F(BatchTest, StateDirShowsATaskRunToRunsShowAndDiff) {
  const std::string calc = Repo("calc");
  WriteTasks(Task("t", calc));
  const RunResult r = Batch({"run", dir_ + "/tasks.jsonl", "--results", results_, "--jobs", "1"});
  SCOPED_TRACE(r.err);
  ASSERT_EQ(r.exit_code, 0);
  const std::string run_id = Result("t")["run_id"];
  const std::string state = results_ + "/t/state";
  auto& h = Harness::Get();

  const RunResult runs = h.Run({"runs", "--state-dir", state, "--json"});
  EXPECT_EQ(runs.exit_code, 0) << runs.err;
  const json rows = json::parse(runs.out, nullptr, false);
  ASSERT_TRUE(rows.is_array()) << runs.out;
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0]["run_id"], run_id) << rows.dump();

  const RunResult show = h.Run({"show", "--state-dir", state, "last", "--json"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(json::parse(show.out, nullptr, false).value("run_id", ""), run_id);
  const RunResult diff = h.Run({"diff", "--state-dir", state, run_id.substr(0, 12)});
  EXPECT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_THAT(diff.out, HasSubstr("+    return a + b"));

  const RunResult elsewhere = h.Run({"show", run_id});
  EXPECT_NE(elsewhere.exit_code, 0) << "the caller's state directory holds the task's run";

  const RunResult missing = h.Run({"runs", "--state-dir", dir_ + "/no-such-dir"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("not a directory"));
  const RunResult not_state = h.Run({"show", "--state-dir", results_, "last"});
  EXPECT_EQ(not_state.exit_code, 2);
  EXPECT_THAT(not_state.err, HasSubstr("holds no runs/ directory"));
}

// A task file from someone else names the caller's private key as its task (here through a
// symlink planted beside it, the subtlest of "..", absolute path and symlink): batch refuses the
// file before anything runs, naming the task and the path. Twin: with --trust-task-paths the same
// file runs, and the key is the task text the run recorded and the agent sent to the model.
TEST_F(BatchTest, ATaskFileCannotMakeARunReadTheCallersFiles) {
  auto& h = Harness::Get();
  const std::string home = h.MakeDir("batch-home");
  WriteFile(home + "/id_rsa", "-----BEGIN OPENSSH PRIVATE KEY----- secret-key-material\n");
  h.GiveToRunUser(home);
  const std::string calc = Repo("calc");
  fs::create_symlink(home + "/id_rsa", dir_ + "/notes.md");
  WriteTasks(Task("leak", calc, "notes.md"));

  const RunResult refused = Batch({"run", dir_ + "/tasks.jsonl", "--results", results_});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("tasks.jsonl:1: task \"leak\": \"task_file\" \"notes.md\" "
                                     "leads outside the task root"));
  EXPECT_FALSE(fs::exists(results_ + "/leak"));

  const RunResult trusted =
      Batch({"run", dir_ + "/tasks.jsonl", "--results", results_, "--trust-task-paths"});
  SCOPED_TRACE(trusted.err);
  ASSERT_EQ(trusted.exit_code, 0);
  std::string recorded;
  for (const auto& run : fs::directory_iterator(results_ + "/leak/state/runs")) {
    if (fs::exists(run.path() / "task.md")) recorded += ReadFile(run.path() / "task.md");
  }
  EXPECT_THAT(recorded, HasSubstr("secret-key-material")) << "the twin should have read the key";
}

// A repository whose tests hang: the replayed session's first command runs them, so the task is
// still running when the test acts on it.
std::string HangEdit() { return "sed -i '1i import time; time.sleep(90)' test_calc.py"; }

TEST_F(BatchTest, AKilledTaskIsRecordedCrashedAndTheOthersFinish) {
  const std::string calc = Repo("calc");
  const std::string hang = Repo("hang", HangEdit());
  WriteTasks(Task("hangs", hang) + Task("fine", calc) + Task("after", calc));
  auto& h = Harness::Get();
  RunOptions o;
  o.timeout = std::chrono::seconds(110);
  Harness::Running running =
      h.Start({"batch", "run", dir_ + "/tasks.jsonl", "--results", results_, "--jobs", "2"}, o);
  // cagent run of the hanging task is the process with the repository as an argument.
  std::vector<pid_t> victims;
  for (int i = 0; i < 600 && victims.empty(); ++i) {
    victims = FindProcesses(hang);
    if (victims.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(victims.empty()) << "the hanging task's cagent run never started";
  // Wait for the other two to end first: they are not held up by the hanging one.
  for (int i = 0; i < 1200 && !fs::exists(results_ + "/after/result.json"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(fs::exists(results_ + "/fine/result.json"));
  EXPECT_TRUE(fs::exists(results_ + "/after/result.json"));
  for (pid_t pid : victims) ::kill(pid, SIGKILL);
  const RunResult r = h.Wait(running, std::chrono::seconds(60));
  SCOPED_TRACE(r.err);
  EXPECT_EQ(r.exit_code, 1);
  const json crashed = Result("hangs");
  EXPECT_EQ(crashed["status"], "crashed");
  EXPECT_THAT(crashed["reason"].get<std::string>(), HasSubstr("SIGKILL"));
  EXPECT_EQ(crashed["batch"]["signal"], SIGKILL);
  EXPECT_EQ(Result("fine")["status"], "completed");
  EXPECT_EQ(Result("after")["status"], "completed");
  EXPECT_EQ(Summary().size(), 3U);
  EXPECT_TRUE(WaitForNoProcesses(hang, std::chrono::seconds(10)).empty());
}

TEST_F(BatchTest, SigintCancelsTheRunningTaskAndRecordsTheRestNotRun) {
  const std::string hang = Repo("hang", HangEdit());
  const std::string calc = Repo("calc");
  WriteTasks(Task("first", hang) + Task("second", calc));
  auto& h = Harness::Get();
  RunOptions o;
  o.timeout = std::chrono::seconds(110);
  Harness::Running running =
      h.Start({"batch", "run", dir_ + "/tasks.jsonl", "--results", results_, "--jobs", "1"}, o);
  // Until the first task's agent has asked for the hanging command (its run's event log says so:
  // a process list would also see other tests' sandboxes running the same command).
  auto asked = [&] {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(results_ + "/first/state/runs", ec)) {
      if (ReadFile(e.path().string() + "/events.jsonl").find("unittest") != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  bool started = false;
  for (int i = 0; i < 600 && !started; ++i) {
    started = asked();
    if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(started) << "the first task never reached its tests";
  ::kill(running.pid, SIGINT);
  const RunResult r = h.Wait(running, std::chrono::seconds(60));
  SCOPED_TRACE(r.err);
  EXPECT_EQ(r.exit_code, 130);
  const json first = Result("first");
  EXPECT_EQ(first["status"], "cancelled");
  EXPECT_EQ(first["batch"]["exit_status"], 130) << "cagent run itself recorded the cancel";
  const json second = Result("second");
  EXPECT_EQ(second["status"], "not-run");
  EXPECT_THAT(second["reason"].get<std::string>(), HasSubstr("SIGINT"));
  EXPECT_TRUE(WaitForNoProcesses(hang, std::chrono::seconds(10)).empty());
}

}  // namespace
}  // namespace cagent::testing
