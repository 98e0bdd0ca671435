// `cagent run` against a hostile workspace, on the capture and verification side (issue #13,
// classes 2 and 5): what the agent leaves outside the captured patch never reaches verification,
// and planted nested repositories are refused before any host git reads them. Each guard has its
// twin: the naive operation it replaces (verification over the kept workspace, a plain git over
// it) shown succeeding for the attacker.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

// Runs a host shell command as the test runner (root in CI) and returns its stdout+stderr.
std::string Shell(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return "popen failed";
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  *status = ::pclose(p);
  return out;
}

class RunHostileCaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& h = Harness::Get();
    if (!h.skip_reason().empty()) GTEST_SKIP() << h.skip_reason();
    if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
    dir_ = h.MakeDir("hostile-capture");
    repo_ = dir_ + "/repo";
    state_ = dir_ + "/state";
    h.MakeDemoRepo(repo_);
    h.GiveToRunUser(dir_);
    ASSERT_FALSE(HasFailure()) << "setting up the demo repository";
    profile_ = repo_ + "/.cagent/fix-add.cagent";
  }

  RunOptions StateEnv() const {
    RunOptions o;
    o.extra_env = {"XDG_STATE_HOME=" + state_};
    o.timeout = std::chrono::seconds(180);
    return o;
  }

  json Run(const std::string& session, RunResult* raw) {
    WriteFile(dir_ + "/session.jsonl", session);
    const std::string chown =
        "chown " + std::to_string(Harness::Get().run_uid()) + " " + dir_ + "/session.jsonl";
    EXPECT_EQ(std::system(chown.c_str()), 0);
    *raw = Harness::Get().Run({"run", "--profile", profile_, "--repo", repo_, "--model",
                               "replay:" + dir_ + "/session.jsonl", "--approve", "never", "--json",
                               std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/task.md"},
                              StateEnv());
    const auto brace = raw->out.find('{');
    if (brace == std::string::npos) return json();
    return json::parse(raw->out.substr(brace), nullptr, false);
  }

  // The profile's verify command in a sandbox of the same profile over `dir`: what verification
  // did before it had a tree of its own (SpecFromPolicy over the agent's workspace).
  RunResult VerifyOver(const std::string& dir) {
    return Harness::Get().Run(
        {"exec", "--profile", profile_, "-w", dir, "-q", "--", "python3", "-m", "unittest", "-q"},
        StateEnv());
  }

  std::string dir_, repo_, state_, profile_;
};

TEST_F(RunHostileCaptureTest, FilesGitDidNotCaptureDoNotMakeVerificationPass) {
  // The agent cannot edit the tests and does not fix calc.py. It shadows the module with a package
  // (a directory package wins over calc.py on import) that hides itself with its own .gitignore,
  // and touches calc.py so the patch is not empty. The patch alone fails the verify command.
  const std::string shadow =
      "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n";
  std::string s;
  s += ToolTurn("run_command", {{"command", "mkdir -p calc"}});
  s += ToolTurn("write_file", {{"path", "calc/__init__.py"}, {"content", shadow}});
  s += ToolTurn("write_file", {{"path", "calc/.gitignore"}, {"content", "*\n"}});
  s += ToolTurn("read_file", {{"path", "calc.py"}});
  s += ToolTurn("edit_file", {{"path", "calc.py"},
                              {"old_string", "\"\"\"Return the sum of a and b.\"\"\""},
                              {"new_string", "\"\"\"Return the sum of a and b (reviewed).\"\"\""}});
  s += ToolTurn("run_command", {{"command", "python3 -m unittest -q"}});
  s += ToolTurn("finish", {{"summary", "fixed add; the tests pass"}});
  RunResult r;
  const json res = Run(s, &r);
  SCOPED_TRACE(r.err);
  ASSERT_TRUE(res.is_object()) << r.out;
  const std::string ws = res["workspace"];
  ASSERT_TRUE(fs::exists(ws + "/calc/__init__.py")) << "the agent's shadow package was not written";
  ASSERT_EQ(res["changed_files"].size(), 1U) << res.dump(2);
  EXPECT_EQ(res["changed_files"][0]["path"], "calc.py");

  // Twin: the verify command over the agent's workspace passes (the old verification).
  const RunResult old = VerifyOver(ws);
  EXPECT_EQ(old.exit_code, 0) << "over the workspace the shadow package should pass the tests\n"
                              << old.out << old.err;

  // With the guard: verification ran on a fresh checkout of base + patch, and failed.
  EXPECT_EQ(res["status"], "failed") << res.dump(2);
  EXPECT_EQ(r.exit_code, 1) << "exit 1 is 'verification failed'";
  EXPECT_EQ(res["verified"], false);
  EXPECT_EQ(res["verification"][0]["status"], "failed") << res.dump(2);
  const std::string tree = res["verified_tree"];
  EXPECT_EQ(tree.size(), 40U) << res.dump(2);
  EXPECT_EQ(res["verification"][0]["tree"], tree);
  EXPECT_EQ(res["patch"]["tree"], tree) << "verification ran on the captured tree";
  const std::string vt = res["verify_tree"];
  EXPECT_FALSE(fs::exists(vt + "/calc/__init__.py")) << "an uncaptured file reached verification";
  EXPECT_THAT(ReadFile(vt + "/calc.py"), HasSubstr("(reviewed)"));
  EXPECT_THAT(ReadFile(res["verification"][0]["log"].get<std::string>()), HasSubstr("FAILED"));

  // cagent apply refuses the run, and the caller's repository keeps its bug.
  const RunResult apply =
      Harness::Get().Run({"apply", res["run_id"].get<std::string>()}, StateEnv());
  EXPECT_NE(apply.exit_code, 0) << apply.out << apply.err;
  EXPECT_THAT(ReadFile(repo_ + "/calc.py"), HasSubstr("return a - b"));
}

TEST_F(RunHostileCaptureTest, ANestedRepositoryWithARefToDevZeroFailsTheRunBeforeGitReadsIt) {
  std::string s;
  s += ToolTurn("run_command", {{"command",
                                 "git init -q sub && ln -s /dev/zero sub/.git/refs/heads/master && "
                                 "echo x > sub/f && echo '# x' >> calc.py"}});
  s += ToolTurn("finish", {{"summary", "vendored sub"}});
  RunResult r;
  const json res = Run(s, &r);
  SCOPED_TRACE(r.err);
  ASSERT_TRUE(res.is_object()) << r.out;
  const std::string ws = res["workspace"];
  ASSERT_TRUE(fs::is_symlink(ws + "/sub/.git/refs/heads/master")) << "the plant did not happen";

  // Twin: a plain (hardened, but unguarded) git add over the kept workspace reads the "ref" until
  // it runs out of memory — here under a 1 GiB ulimit and a timeout so it cannot hurt the machine.
  int status = 0;
  const std::string naive =
      Shell("ulimit -v 1048576; cd " + ws + " && GIT_INDEX_FILE=" + dir_ +
                "/naive-index timeout 120 git -c safe.directory='*' -c core.hooksPath=/dev/null "
                "--git-dir=" +
                res["run_dir"].get<std::string>() + "/git --work-tree=. add --all",
            &status);
  EXPECT_NE(status, 0);
  EXPECT_THAT(naive, HasSubstr("Out of memory"));

  EXPECT_EQ(res["status"], "failed") << res.dump(2);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(res["reason"].get<std::string>(), HasSubstr("patch capture failed"));
  EXPECT_THAT(res["reason"].get<std::string>(), HasSubstr("'sub/.git'"));
  EXPECT_THAT(res["reason"].get<std::string>(), HasSubstr("nested git entry"));
  EXPECT_EQ(res["verification"][0]["status"], "not-run");
}

TEST_F(RunHostileCaptureTest, AGitdirLinkToAnotherHostRepositoryFailsTheRun) {
  // The caller's own repository is on this machine; the agent names it in a .git file.
  const std::string link = "gitdir: " + repo_ + "/.git";
  std::string s;
  s += ToolTurn("run_command", {{"command", "mkdir -p lib && printf '" + link +
                                                "\\n' > lib/.git && echo 'X = 1' > lib/x.py"}});
  s += ToolTurn("finish", {{"summary", "added lib"}});
  RunResult r;
  const json res = Run(s, &r);
  SCOPED_TRACE(r.err);
  ASSERT_TRUE(res.is_object()) << r.out;
  const std::string ws = res["workspace"];
  ASSERT_EQ(ReadFile(ws + "/lib/.git"), link + "\n") << "the plant did not happen";

  // Twin: plain git follows the link and records the caller's HEAD as a gitlink.
  int status = 0;
  const std::string head =
      Shell("git -C " + repo_ + " -c safe.directory='*' rev-parse HEAD", &status);
  ASSERT_EQ(status, 0) << head;
  const std::string git = "cd " + ws + " && GIT_INDEX_FILE=" + dir_ +
                          "/naive-index git -c safe.directory='*' -c core.hooksPath=/dev/null "
                          "--git-dir=" +
                          res["run_dir"].get<std::string>() + "/git --work-tree=. ";
  Shell(git + "read-tree " + res["base_commit"].get<std::string>() + " && " + git + "add --all",
        &status);
  const std::string staged = Shell(git + "ls-files -s lib", &status);
  EXPECT_THAT(staged, HasSubstr("160000 " + head.substr(0, 40))) << staged;

  EXPECT_EQ(res["status"], "failed") << res.dump(2);
  EXPECT_THAT(res["reason"].get<std::string>(), HasSubstr("'lib/.git'"));
  EXPECT_THAT(res["reason"].get<std::string>(), HasSubstr("another repository"));
}

}  // namespace
}  // namespace cagent::testing
