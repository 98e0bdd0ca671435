// `cagent run` end to end: the demo (replayed model, real broker, real sandbox, git capture,
// verification, apply) and runs whose agent misbehaves — each ends with the right status and the
// caller's repository is never written.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
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

json Call(const std::string& name, json args) {
  static int n = 0;
  return json{
      {"id", "call_" + std::to_string(++n)}, {"name", name}, {"arguments", std::move(args)}};
}

std::string Turn(json calls) {
  return json{{"tool_calls", std::move(calls)},
              {"usage", {{"input_tokens", 100}, {"output_tokens", 10}}}}
             .dump() +
         "\n";
}

// Everything under `root` (names, modes, sizes, mtimes, contents): any write changes it.
std::string TreeState(const fs::path& root) {
  std::vector<std::string> lines;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    struct stat st {};
    ::lstat(it->path().c_str(), &st);
    std::string line = fs::relative(it->path(), root).string() + " " + std::to_string(st.st_mode) +
                       " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) +
                       "." + std::to_string(st.st_mtim.tv_nsec);
    if (S_ISREG(st.st_mode)) line += " " + ReadFile(it->path().string());
    lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return all;
}

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& h = Harness::Get();
    if (!h.skip_reason().empty()) GTEST_SKIP() << h.skip_reason();
    if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
    dir_ = h.MakeDir("run");
    repo_ = dir_ + "/repo";
    state_ = dir_ + "/state";
    h.MakeDemoRepo(repo_);
    h.GiveToRunUser(dir_);
    ASSERT_FALSE(HasFailure()) << "setting up the demo repository";
    before_ = TreeState(repo_);
  }

  std::vector<std::string> RunArgs(const std::string& session, std::vector<std::string> extra) {
    WriteFile(dir_ + "/session.jsonl", session);
    std::vector<std::string> args = {
        "run",
        "--profile",
        profile_.empty() ? repo_ + "/.cagent/fix-add.cagent" : profile_,
        "--repo",
        repo_,
        "--model",
        "replay:" + dir_ + "/session.jsonl",
        "--approve",
        approve_,
        "--json",
        std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/task.md"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  RunOptions StateEnv() const {
    RunOptions o;
    o.extra_env = {"XDG_STATE_HOME=" + state_};
    o.timeout = std::chrono::seconds(120);
    return o;
  }

  RunResult Run(const std::string& session, std::vector<std::string> extra = {}) {
    return Harness::Get().Run(RunArgs(session, std::move(extra)), StateEnv());
  }

  static json Result(const RunResult& r) {
    const auto brace = r.out.find('{');
    if (brace == std::string::npos) return json();
    return json::parse(r.out.substr(brace), nullptr, false);
  }

  void ExpectRepoUntouched() {
    EXPECT_EQ(TreeState(repo_), before_) << "the caller's repo changed";
  }

  std::string dir_, repo_, state_, before_;
  std::string profile_;            // default: the demo's own profile
  std::string approve_ = "never";  // --approve
};

TEST_F(RunTest, TheDemoCompletesVerifiedAndApplyBringsThePatchIn) {
  const RunResult r =
      Run(ReadFile(std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/session.jsonl"));
  SCOPED_TRACE(r.err);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json res = Result(r);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["status"], "completed");
  ASSERT_EQ(res["changed_files"].size(), 1U) << res.dump(2);
  EXPECT_EQ(res["changed_files"][0]["path"], "calc.py");
  EXPECT_EQ(res["verification"][0]["status"], "passed");
  EXPECT_EQ(res["base_commit"].get<std::string>().size(), 40U);
  ExpectRepoUntouched();

  // The event log's chain verifies.
  const RunResult verify =
      Harness::Get().Run({"log", "verify", res["event_log"].get<std::string>()});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;

  RunOptions o;
  o.extra_env = {"XDG_STATE_HOME=" + state_};
  const std::string id = res["run_id"];
  const RunResult diff = Harness::Get().Run({"diff", id}, o);
  EXPECT_NE(diff.out.find("+    return a + b"), std::string::npos) << diff.out;
  const RunResult apply = Harness::Get().Run({"apply", id}, o);
  ASSERT_EQ(apply.exit_code, 0) << apply.out << apply.err;
  EXPECT_NE(ReadFile(repo_ + "/calc.py").find("return a + b"), std::string::npos);
  // Applying again is refused: the tree is no longer clean.
  const RunResult again = Harness::Get().Run({"apply", id}, o);
  EXPECT_NE(again.exit_code, 0);

  // `cagent log RUN`: one line per event, each decision with the request's arguments as the
  // model gave them, the chain checked against result.json.
  const RunResult log = Harness::Get().Run({"log", id}, o);
  EXPECT_EQ(log.exit_code, 0) << log.err;
  EXPECT_THAT(
      log.out,
      HasSubstr(R"(decision     allow run_command {"command":"python3 -m unittest -q"} by )"));
  EXPECT_THAT(log.out,
              HasSubstr(R"(decision     allow edit_file {"new_string":"    return a + b",)"));
  EXPECT_THAT(log.out, HasSubstr(R"("path":"calc.py"} by workspace read-write)"));
  EXPECT_THAT(log.out, Not(HasSubstr("tool_request ")));
  EXPECT_THAT(log.out, HasSubstr("verify       passed: python3 -m unittest -q (exit 0"));
  EXPECT_THAT(log.out, HasSubstr("as recorded in result.json"));
  // Lines cut from the end leave a chain that verifies on its own; the count and head recorded in
  // result.json show the cut.
  const std::string events = ReadFile(res["event_log"].get<std::string>());
  const std::size_t last = events.rfind('\n', events.size() - 2);
  ASSERT_NE(last, std::string::npos);
  WriteFile(res["event_log"].get<std::string>(), events.substr(0, last + 1));
  const RunResult cut = Harness::Get().Run({"log", id}, o);
  EXPECT_EQ(cut.exit_code, 1) << cut.out;
  EXPECT_THAT(cut.err, HasSubstr("result.json records"));
  EXPECT_EQ(Harness::Get().Run({"log", "verify", res["event_log"].get<std::string>()}, o).exit_code,
            0)
      << "the cut chain is expected to verify on its own";
}

TEST_F(RunTest, AMoneyBudgetStopsTheRunBeforeTheCallThatWouldOverrunIt) {
  // The demo's recorded session at 4 USD per million input tokens and 20 per million output: the
  // first call's input (the broker estimates about 2,300 tokens) may cost up to 0.009 USD, which
  // fits; the turn (1480 in, 31 out) costs 0.00654 USD, which leaves too little of 0.01 USD for
  // the second call's input alone.
  WriteFile(dir_ + "/models.toml",
            "[model.\"replay:*\"]\ncurrency = \"USD\"\ninput_per_mtok = 4\n"
            "output_per_mtok = 20\n");
  const RunResult r =
      Run(ReadFile(std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/session.jsonl"),
          {"--models-config", dir_ + "/models.toml", "--max-cost", "0.01"});
  SCOPED_TRACE(r.err);
  const json res = Result(r);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["status"], "failed");
  EXPECT_THAT(res["reason"].get<std::string>(),
              HasSubstr("model-cost budget (0.01 USD) reached: 0.00346 USD left"));
  // --json prints the run's record, result.json.
  EXPECT_EQ(res["usage"]["model_turns"], 1);
  EXPECT_EQ(res["usage"]["cost"]["micros"], 6540);
  EXPECT_EQ(res["usage"]["cost"]["text"], "0.00654 USD");
  EXPECT_EQ(res["budgets"]["model_cost"]["text"], "0.01 USD");
  // `cagent log` shows each turn's tokens and cost.
  RunOptions o;
  o.extra_env = {"XDG_STATE_HOME=" + state_};
  const RunResult log = Harness::Get().Run({"log", res["run_id"].get<std::string>()}, o);
  EXPECT_THAT(log.out, HasSubstr("[1480 in, 31 out, 0.00654 USD]")) << log.out;
  ExpectRepoUntouched();
  // The same run with a budget it fits in gets past the first turn: the budget, not the prices,
  // stopped it.
  const RunResult wide =
      Run(ReadFile(std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/session.jsonl"),
          {"--models-config", dir_ + "/models.toml", "--max-cost", "1"});
  EXPECT_EQ(Result(wide)["status"], "completed") << wide.err;
}

TEST_F(RunTest, DiffAndApplySayWhatTheyDidAsJson) {
  const RunResult r =
      Run(ReadFile(std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/session.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json res = Result(r);
  const std::string id = res["run_id"];
  RunOptions o;
  o.extra_env = {"XDG_STATE_HOME=" + state_};
  const RunResult diff = Harness::Get().Run({"diff", id, "--json"}, o);
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  const json d = json::parse(diff.out, nullptr, false);
  ASSERT_TRUE(d.is_object()) << diff.out;
  EXPECT_EQ(d["run"], id);
  EXPECT_THAT(d["patch"].get<std::string>(), HasSubstr("+    return a + b"));
  EXPECT_EQ(d["sha256"], res["patch"]["sha256"]);
  ASSERT_EQ(d["files"].size(), 1U) << diff.out;
  EXPECT_EQ(d["files"][0]["path"], "calc.py");

  const RunResult apply = Harness::Get().Run({"apply", id, "--json"}, o);
  ASSERT_EQ(apply.exit_code, 0) << apply.out << apply.err;
  const json a = json::parse(apply.out, nullptr, false);
  ASSERT_TRUE(a.is_object()) << apply.out;
  EXPECT_EQ(a["applied"], true);
  EXPECT_THAT(a["paths"], ::testing::Contains("calc.py"));
  EXPECT_EQ(a["branch"], nullptr);
  // Refused the second time (the tree is no longer clean): same exit status, and the reason.
  const RunResult again = Harness::Get().Run({"apply", id, "--json"}, o);
  EXPECT_EQ(again.exit_code, 3) << again.out << again.err;
  const json b = json::parse(again.out, nullptr, false);
  ASSERT_TRUE(b.is_object()) << again.out;
  EXPECT_EQ(b["applied"], false);
  EXPECT_FALSE(b["error"].get<std::string>().empty());
}

// `--events-jsonl FIFO`: a program following the run gets each event as it is logged, the same
// lines as events.jsonl. The first line arrives while the run is still going (no result.json yet),
// so the stream is not a copy made at the end.
TEST_F(RunTest, EventsJsonlStreamsTheLogWhileTheRunGoesOn) {
  const std::string fifo = dir_ + "/events.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Harness::Get().GiveToRunUser(fifo);
  // The test holds a writer of its own, so the reader sees the end only after cagent's and this
  // one are closed.
  const int read_fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(read_fd, 0);
  const int hold_fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(hold_fd, 0);
  std::string streamed;
  bool first_line_before_the_end = false;
  std::thread reader([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
    bool first = true;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd pfd{read_fd, POLLIN, 0};
      if (::poll(&pfd, 1, 200) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(read_fd, buf, sizeof buf);
      if (n <= 0) break;
      streamed.append(buf, static_cast<std::size_t>(n));
      if (first && streamed.find('\n') != std::string::npos) {
        first = false;
        bool finished = false;
        std::error_code ec;
        for (const auto& e : std::filesystem::recursive_directory_iterator(state_, ec)) {
          if (e.path().filename() == "result.json") finished = true;
        }
        first_line_before_the_end = !finished;
      }
    }
  });
  const RunResult r =
      Run(ReadFile(std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/session.jsonl"),
          {"--events-jsonl", fifo});
  ::close(hold_fd);
  reader.join();
  ::close(read_fd);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json res = Result(r);
  const std::string logged = ReadFile(res["event_log"].get<std::string>());
  ASSERT_FALSE(logged.empty());
  EXPECT_EQ(streamed, logged) << "the stream is not the run's event log";
  EXPECT_TRUE(first_line_before_the_end) << "the first event came after result.json was written";
}

TEST_F(RunTest, EventsJsonlThatCannotBeOpenedIsAUsageErrorBeforeTheRun) {
  const RunResult r = Run("", {"--events-jsonl", dir_ + "/no/such/dir/events.jsonl"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("--events-jsonl: cannot open"));
  EXPECT_FALSE(std::filesystem::exists(state_ + "/cagent/runs")) << "a run directory was made";
}

TEST_F(RunTest, CtrlCCancelsTheRunTearsTheSandboxDownAndKeepsTheWorkspace) {
  // The agent starts a long command (python3 sleeping, with a token of its own); cagent gets SIGINT
  // (what Ctrl-C sends) while it runs.
  const std::string token = "77.4321";  // an argument of its own, which FindProcesses matches
  const std::string session =
      Turn(json::array({Call("read_file", {{"path", "calc.py"}})})) +
      Turn(json::array({Call("edit_file", {{"path", "calc.py"},
                                           {"old_string", "return a - b"},
                                           {"new_string", "return a + b"}})})) +
      Turn(json::array(
          {Call("run_command",
                {{"command",
                  "python3 -c 'import sys, time; time.sleep(float(sys.argv[1]))' " + token}})})) +
      Turn(json::array({Call("finish", {{"summary", "never reached"}})}));
  Harness::Running running = Harness::Get().Start(RunArgs(session, {}), StateEnv());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (FindProcesses(token).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(FindProcesses(token).empty()) << "the agent's command never started";
  ASSERT_EQ(::kill(running.pid, SIGINT), 0);
  const RunResult r = Harness::Get().Wait(running, std::chrono::seconds(60));
  SCOPED_TRACE(r.err);
  EXPECT_EQ(r.exit_code, 130);
  const json res = Result(r);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["status"], "cancelled");
  EXPECT_EQ(res["reason"], "cancelled by the operator (INT)");
  // The sandbox is gone: nothing it ran is left.
  EXPECT_THAT(WaitForNoProcesses(token, std::chrono::seconds(10)), ::testing::IsEmpty());
  // The workspace is kept, with the agent's edit, for the human to look at.
  EXPECT_THAT(ReadFile(res["workspace"].get<std::string>() + "/calc.py"),
              HasSubstr("return a + b"));
  // The log ends with the cancellation and its chain holds.
  const std::string events = ReadFile(res["event_log"].get<std::string>());
  EXPECT_THAT(events, HasSubstr(R"("state":"cancelled")"));
  EXPECT_EQ(Harness::Get().Run({"log", "verify", res["event_log"].get<std::string>()}).exit_code,
            0);
  ExpectRepoUntouched();
}

// The processes below `root` (children, grandchildren, ...) whose command name is `comm`.
std::vector<pid_t> DescendantsNamed(pid_t root, const std::string& comm) {
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // pid, ppid
  std::vector<pid_t> named;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    const pid_t pid = std::stoi(name);
    std::ifstream status(e.path() / "status");
    std::string line, process_name;
    pid_t ppid = 0;
    while (std::getline(status, line)) {
      if (line.rfind("Name:\t", 0) == 0) process_name = line.substr(6);
      if (line.rfind("PPid:\t", 0) == 0) ppid = std::stoi(line.substr(6));
    }
    parent_of.emplace_back(pid, ppid);
    if (process_name == comm) named.push_back(pid);
  }
  std::vector<pid_t> out;
  for (const pid_t p : named) {
    pid_t cur = p;
    for (int depth = 0; depth < 16 && cur > 1; ++depth) {
      auto it = std::find_if(parent_of.begin(), parent_of.end(),
                             [cur](const auto& pp) { return pp.first == cur; });
      if (it == parent_of.end()) break;
      cur = it->second;
      if (cur == root) {
        out.push_back(p);
        break;
      }
    }
  }
  return out;
}

// A session whose agent runs a long command (python3: the profile allows it, not sleep), marked
// by an argument of its own for FindProcesses.
std::string LongCommandSession(const std::string& token) {
  return Turn(json::array(
             {Call("run_command",
                   {{"command", "python3 -c 'import sys, time; time.sleep(float(sys.argv[1]))' " +
                                    token}})})) +
         Turn(json::array({Call("finish", {{"summary", "never reached"}})}));
}

// Waits for the session's long command (marked by `token`) to run, then SIGTERMs the sandboxed
// agent below `running` — from outside, as a job-wide kill would.
void TerminateTheAgentWhileItsCommandRuns(const Harness::Running& running,
                                          const std::string& token) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (FindProcesses(token).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(FindProcesses(token).empty()) << "the agent's command never started";
  const std::vector<pid_t> agents = DescendantsNamed(running.pid, "cagent-agent");
  ASSERT_EQ(agents.size(), 1U) << "cannot find the sandboxed agent below cagent";
  ASSERT_EQ(::kill(agents.front(), SIGTERM), 0);
}

// What Slurm (proctrack linuxproc/cgroup) and systemd (KillMode=control-group) do to stop a job:
// SIGTERM to every process of it, the sandboxed agent included, one after the other. The agent
// dies first here, and the broker sees its connection close, 100 ms before cagent's own signal
// arrives: before the fix the run ended `failed` ("the agent closed the connection without
// finishing") although it was stopped on request.
TEST_F(RunTest, ATerminateSignalThatReachesTheAgentFirstStillCancelsTheRun) {
  const std::string token = "77.4322";
  Harness::Running running =
      Harness::Get().Start(RunArgs(LongCommandSession(token), {}), StateEnv());
  ASSERT_NO_FATAL_FAILURE(TerminateTheAgentWhileItsCommandRuns(running, token));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(::kill(running.pid, SIGTERM), 0);
  const RunResult r = Harness::Get().Wait(running, std::chrono::seconds(60));
  SCOPED_TRACE(r.err);
  const json res = Result(r);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["status"], "cancelled");
  // Word for word what a cancel that reached cagent first records (the SIGINT test above): which
  // process a job-wide signal reaches first is a race, and `cagent batch report` compares runs.
  EXPECT_EQ(res["reason"], "cancelled by the operator (TERM)");
  EXPECT_EQ(r.exit_code, 130);
  EXPECT_THAT(WaitForNoProcesses(token, std::chrono::seconds(10)), ::testing::IsEmpty());
}

// Its twin: the agent killed by the same signal with no request to cagent is the agent's death,
// not a cancel — the run fails as before.
TEST_F(RunTest, AnAgentKilledWithoutACancelRequestStillFailsTheRun) {
  const std::string token = "77.4323";
  Harness::Running running =
      Harness::Get().Start(RunArgs(LongCommandSession(token), {}), StateEnv());
  ASSERT_NO_FATAL_FAILURE(TerminateTheAgentWhileItsCommandRuns(running, token));
  const RunResult r = Harness::Get().Wait(running, std::chrono::seconds(60));
  SCOPED_TRACE(r.err);
  const json res = Result(r);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["status"], "failed");
  EXPECT_EQ(r.exit_code, 3);
}

TEST_F(RunTest, EditingAProtectedTestFailsTheRunNamingTheRule) {
  // (b)/(f): the agent goes for the tests instead of the code. edit_file is refused by the tool
  // rules, deleting the existing test fails (the sandbox binds it read-only), so it writes a new
  // test file through the interpreter — which no mount covers, and the patch check, looking at
  // what git saw, fails the run naming the rule.
  std::string s;
  s += Turn(json::array({Call("edit_file", {{"path", "test_calc.py"},
                                            {"old_string", "self.assertEqual(add(2, 3), 5)"},
                                            {"new_string", "pass"}})}));
  s += Turn(json::array({Call("run_command", {{"command", "rm -f test_calc.py"}})}));
  s += Turn(json::array({Call(
      "run_command", {{"command", "python3 -c \"open('test_zz.py', 'w').write('import os')\""}})}));
  s += Turn(json::array({Call("finish", {{"summary", "tests fixed"}})}));
  const RunResult r = Run(s);
  SCOPED_TRACE(r.err);
  const json res = Result(r);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["status"], "failed");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(res["reason"].get<std::string>().find("test_*.py"), std::string::npos) << res.dump(2);
  EXPECT_NE(res["reason"].get<std::string>().find("test_zz.py"), std::string::npos) << res.dump(2);
  EXPECT_EQ(res["verification"][0]["status"], "not-run");
  ExpectRepoUntouched();
}

TEST_F(RunTest, TooManyChangedFilesFailTheRun) {
  // (c): the profile allows 5 changed files.
  std::string s;
  s += Turn(json::array({Call("run_command", {{"command",
                                               "python3 -c \"[open('f%d.txt' % i, 'w').write('x') "
                                               "for i in range(7)]\""}})}));
  s += Turn(json::array({Call("finish", {{"summary", "made files"}})}));
  const RunResult r = Run(s);
  SCOPED_TRACE(r.err);
  const json res = Result(r);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["status"], "failed");
  EXPECT_NE(res["reason"].get<std::string>().find("at most 5"), std::string::npos) << res.dump(2);
  ExpectRepoUntouched();
}

TEST_F(RunTest, PlantedGitConfigurationExecutesNothingDuringCapture) {
  // (d): the agent plants configuration, attributes and hooks that run a program under plain git.
  const std::string marker = dir_ + "/PWNED";
  const std::string evil = "#!/bin/sh\\ntouch " + marker + "\\n";
  std::string s;
  s += Turn(json::array({Call(
      "run_command",
      {{"command",
        "printf '[core]\\n\\tfsmonitor = touch " + marker +
            "\\n[filter \"x\"]\\n\\tclean = touch " + marker + "\\n[diff]\\n\\texternal = touch " +
            marker + "\\n' >> .git/config; echo '* filter=x' > .gitattributes; printf '" + evil +
            "' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; echo x >> calc.py"}})}));
  s += Turn(json::array({Call("finish", {{"summary", "done"}})}));
  const RunResult r = Run(s);
  SCOPED_TRACE(r.err);
  const json res = Result(r);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_FALSE(fs::exists(marker)) << "cagent executed the workspace's git configuration";
  // The run fails: the profile's base forbids writing .git/hooks, and the change broke the tests.
  EXPECT_NE(res["status"], "completed");
  ExpectRepoUntouched();
}

TEST_F(RunTest, AnAgentThatLoopsIsStoppedAndTheRunFails) {
  // (e): the same call forever; loop detection refuses it and the turn budget ends the run.
  std::string s;
  for (int i = 0; i < 30; ++i) s += Turn(json::array({Call("list_dir", {{"path", "."}})}));
  const RunResult r = Run(s, {"--max-turns", "8"});
  SCOPED_TRACE(r.err);
  const json res = Result(r);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["status"], "failed");
  EXPECT_EQ(r.exit_code, 3);
  ExpectRepoUntouched();
}

// A run whose agent changed nothing says so: status no-change, exit 7, no verification, and the
// reason counts the refusals (here the one action it tried was refused), instead of "completed"
// with an empty patch, exit 0.
TEST_F(RunTest, ARunThatChangesNothingEndsNoChangeNotCompleted) {
  std::string s;
  s += Turn(json::array({Call("read_file", {{"path", "calc.py"}})}));
  s += Turn(json::array({Call("run_command", {{"command", "git push origin main"}})}));
  s += Turn(json::array({Call("finish", {{"summary", "could not push"}})}));
  const RunResult r = Run(s);
  SCOPED_TRACE(r.err);
  const json res = Result(r);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["status"], "no-change");
  EXPECT_EQ(res["exit_code"], 7);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(res["verified"], false);
  for (const json& v : res["verification"]) EXPECT_EQ(v["status"], "not-run") << v.dump();
  const std::string reason = res["reason"].get<std::string>();
  EXPECT_NE(reason.find("the agent finished without changing any file"), std::string::npos)
      << reason;
  EXPECT_NE(reason.find("1 of its requests was refused"), std::string::npos) << reason;
  ExpectRepoUntouched();
  // Twin: the same session with an edit ends completed and verified (exit 0).
  std::string edit;
  edit += Turn(json::array({Call("read_file", {{"path", "calc.py"}})}));
  edit += Turn(json::array({Call(
      "edit_file",
      {{"path", "calc.py"}, {"old_string", "return a - b"}, {"new_string", "return a + b"}})}));
  edit += Turn(json::array({Call("finish", {{"summary", "fixed"}})}));
  const RunResult fixed = Run(edit);
  EXPECT_EQ(Result(fixed)["status"], "completed") << fixed.out << fixed.err;
  EXPECT_EQ(fixed.exit_code, 0);
}

TEST_F(RunTest, EscapeAttemptsAreRefusedAndTheRepoIsUntouched) {
  // (a): write through the workspace to the caller's repository, by path and by symlink.
  std::string s;
  s +=
      Turn(json::array({Call("write_file", {{"path", repo_ + "/calc.py"}, {"content", "owned"}})}));
  s += Turn(json::array(
      {Call("run_command", {{"command", "echo owned > " + repo_ + "/calc.py; ln -s " + repo_ +
                                            " link; echo owned > link/calc.py; true"}})}));
  s += Turn(json::array({Call("finish", {{"summary", "tried"}})}));
  const RunResult r = Run(s);
  SCOPED_TRACE(r.err);
  ASSERT_TRUE(Result(r).is_object()) << r.out;
  ExpectRepoUntouched();
}

TEST_F(RunTest, ApproveStopEndsTheRunAsNeedsApprovalWithTheExactAction) {
  // The demo's profile with an ask rule for `pip install`, under approval never-ask: --approve
  // stop ends the run at the ask whatever the profile's approval mode (issue #19; never-ask
  // alone would deny it and go on).
  profile_ = dir_ + "/ask.cagent";
  WriteFile(profile_, ReadFile(repo_ + "/.cagent/fix-add.cagent") +
                          "\napproval never-ask\ncommands {\n  ask (pip | pip3) install\n}\n");
  approve_ = "stop";
  const std::string session =
      Turn(json::array({Call("read_file", {{"path", "calc.py"}})})) +
      Turn(json::array({Call("edit_file", {{"path", "calc.py"},
                                           {"old_string", "return a - b"},
                                           {"new_string", "return a + b"}})})) +
      Turn(json::array({Call("run_command", {{"command", "pip install requests"}})})) +
      Turn(json::array({Call("finish", {{"summary", "never reached"}})}));
  const RunResult r = Run(session);
  SCOPED_TRACE(r.err);
  EXPECT_EQ(r.exit_code, 4);
  const json res = Result(r);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["status"], "needs-approval");
  ASSERT_TRUE(res["needs_approval"].is_object()) << res.dump(2);
  EXPECT_EQ(res["needs_approval"]["tool"], "run_command");
  EXPECT_THAT(res["needs_approval"]["action"].get<std::string>(),
              HasSubstr("pip install requests"));
  const std::string pre = res["needs_approval"]["pre_approve"];
  EXPECT_EQ(pre.size(), std::string("sha256:").size() + 64) << pre;
  EXPECT_THAT(res["reason"].get<std::string>(), HasSubstr("--pre-approve '" + pre + "'"));
  // The work so far is captured for the human to look at, and nothing was verified.
  ASSERT_EQ(res["changed_files"].size(), 1U) << res.dump(2);
  EXPECT_EQ(res["verification"][0]["status"], "not-run");
  ExpectRepoUntouched();
}

TEST_F(RunTest, AProfileWithoutVerifyCommandsIsRefusedUnlessAllowed) {
  // The built-in backend profile verifies nothing: "completed" would mean unchecked.
  profile_ = "backend";
  const std::string session =
      Turn(json::array({Call("read_file", {{"path", "calc.py"}})})) +
      Turn(json::array({Call("edit_file", {{"path", "calc.py"},
                                           {"old_string", "return a - b"},
                                           {"new_string", "return a + b"}})})) +
      Turn(json::array({Call("finish", {{"summary", "fixed"}})}));
  const RunResult refused = Run(session);
  EXPECT_EQ(refused.exit_code, 125) << refused.out;
  EXPECT_THAT(refused.err, HasSubstr("has no verify commands"));
  EXPECT_THAT(refused.err, HasSubstr("--allow-unverified"));
  EXPECT_FALSE(fs::exists(state_ + "/cagent/runs")) << "a refused run left a run directory";

  const RunResult r = Run(session, {"--allow-unverified"});
  SCOPED_TRACE(r.err);
  EXPECT_EQ(r.exit_code, 0);
  const json res = Result(r);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["status"], "completed");
  EXPECT_EQ(res["verified"], false);
  EXPECT_THAT(res["reason"].get<std::string>(), HasSubstr("not verified"));
  ExpectRepoUntouched();
}

TEST_F(RunTest, AClosedOutputPipeDoesNotKillTheRun) {
  // `cagent run ... | head -c 1`: head exits after one byte, and every later write of cagent's
  // fails. With SIGPIPE at its default the first one killed cagent mid-run, leaving no result.
  // Without --json: the progress lines on stderr are what cagent writes while it runs.
  std::vector<std::string> args =
      RunArgs(ReadFile(std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/session.jsonl"), {});
  std::erase(args, std::string("--json"));
  std::string cmd = "env XDG_STATE_HOME=" + state_;
  for (const std::string& a : Harness::Get().CagentArgv(args)) cmd += " '" + a + "'";
  cmd += " 2>&1 | head -c 1 > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(state_ + "/cagent/runs")) {
    if (e.is_directory()) runs.push_back(e.path());  // not the run counter, runs/sequence
  }
  ASSERT_EQ(runs.size(), 1U);
  const json res = json::parse(ReadFile(runs[0].string() + "/result.json"), nullptr, false);
  ASSERT_TRUE(res.is_object()) << "the run ended without its result.json";
  EXPECT_EQ(res["status"], "completed");
  ExpectRepoUntouched();
}

// The run directories under the state directory (none when runs/ does not exist).
std::vector<std::string> RunDirs(const std::string& state) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(state + "/cagent/runs", ec)) {
    if (e.is_directory()) out.push_back(e.path().string());  // not the run counter, runs/sequence
  }
  return out;
}

// Issue #20: a run that cannot start fails in the pre-flight checks, before its run directory
// exists. A dirty tree used to make one and end there as a "failed" run (so did a missing model
// key or replay file), cluttering `cagent runs`.
TEST_F(RunTest, ADirtyRepositoryIsRefusedWithAHint) {
  WriteFile(repo_ + "/calc.py", "dirty\n");
  const RunResult r = Run(Turn(json::array({Call("finish", {{"summary", "x"}})})));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("has uncommitted changes"));
  EXPECT_THAT(r.err, HasSubstr("--allow-dirty"));
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(RunDirs(state_), ::testing::IsEmpty());
}

TEST_F(RunTest, ARunThatCannotStartLeavesNoRunDirectory) {
  const std::string session = Turn(json::array({Call("finish", {{"summary", "x"}})}));
  auto with = [&](const std::string& flag, const std::string& value) {
    std::vector<std::string> args = RunArgs(session, {});
    if (flag == "task") {
      args[args.size() - 1] = value;
    } else {
      const auto it = std::find(args.begin(), args.end(), flag);
      *(it + 1) = value;
    }
    return args;
  };
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::string says;
  };
  const std::vector<Case> cases = {
      {with("--model", "anthropic:claude-test"), {"ANTHROPIC_API_KEY="}, "ANTHROPIC_API_KEY"},
      {with("--model", "replay:" + dir_ + "/no-such-session.jsonl"), {}, "no-such-session.jsonl"},
      {with("task", dir_ + "/no-such-task.md"), {}, "cannot open the task file"},
      {with("--profile", "no-such-profile-xyz"), {}, "no-such-profile-xyz"},
  };
  std::vector<Case> more = cases;
  // A money budget without the model's prices (cagent has none built in).
  std::vector<std::string> priceless = RunArgs(session, {"--max-cost", "0.01"});
  priceless.insert(priceless.begin() + 1, {"--models-config", "/dev/null"});
  more.push_back({priceless, {}, "needs replay:" + dir_ + "/session.jsonl's prices"});
  for (const Case& c : more) {
    RunOptions o = StateEnv();
    o.extra_env.insert(o.extra_env.end(), c.env.begin(), c.env.end());
    const RunResult r = Harness::Get().Run(c.args, o);
    SCOPED_TRACE(c.says);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.says));
    EXPECT_THAT(RunDirs(state_), ::testing::IsEmpty());
  }
  // The control: the same arguments with nothing wrong make a run directory.
  const RunResult ok = Run(session, {"--allow-unverified"});
  EXPECT_EQ(RunDirs(state_).size(), 1U) << ok.err;
}

}  // namespace
}  // namespace cagent::testing
