// The hardened git runner: every git cagent runs is bounded (memory, CPU time, file size, wall
// time, its own process group) whatever repository or work tree it is pointed at.
#include "launcher/guard/git.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>

namespace cagent::launcher::run {
namespace {

namespace fs = std::filesystem;

// git runs an alias starting with "!" through the shell: a way to look at the child git really
// got (its limits, its process group) without any program but git.
GitInvocation ShellAlias(const std::string& script) {
  GitInvocation g;
  g.args = {"-c", "alias.probe=!" + script, "probe"};
  return g;
}

class GitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
  }
};

TEST_F(GitTest, TheChildHasTheLimitsAndItsOwnProcessGroup) {
  GitInvocation g = ShellAlias("ulimit -v; ulimit -t; ulimit -f; ulimit -c; ps -o pgid= -p $$");
  g.max_memory = 1ULL << 30;
  g.max_cpu_seconds = 77;
  g.max_file_size = 64ULL << 20;
  auto r = RunGit(g);
  ASSERT_TRUE(r.ok()) << r.error().Message();
  ASSERT_EQ(r->exit_code, 0) << r->err;
  // /bin/sh (dash) reports -v in KiB and -f in 512-byte blocks.
  std::istringstream lines(r->out);
  std::string as, cpu, fsize, core, pgid;
  lines >> as >> cpu >> fsize >> core >> pgid;
  EXPECT_EQ(as, std::to_string((1ULL << 30) / 1024));
  EXPECT_EQ(cpu, "77");
  EXPECT_EQ(fsize, std::to_string((64ULL << 20) / 512)) << r->out;
  EXPECT_EQ(core, "0");
  EXPECT_NE(pgid, std::to_string(::getpgrp())) << "git runs in cagent's process group";
}

TEST_F(GitTest, TheMemoryLimitEndsAGitThatReadsForever) {
  // A nested repository whose branch ref is a symlink to /dev/zero: git reads the "ref" until it
  // runs out of memory. With the limit that is a failed call, not a host out of memory.
  char tmpl[] = "/tmp/cagent-git-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path base = tmpl;
  const std::string setup =
      "cd " + base.string() +
      " && git init -q -b main outer && git init -q -b main outer/sub && "
      "ln -s /dev/zero outer/sub/.git/refs/heads/main && echo x > outer/sub/f";
  ASSERT_EQ(std::system(setup.c_str()), 0);
  GitInvocation g;
  g.cwd = (base / "outer").string();
  g.args = {"add", "--all", "--", "."};
  g.max_memory = 512ULL << 20;
  g.timeout = std::chrono::seconds(120);
  auto r = RunGit(g);
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_NE(r->exit_code, 0);
  EXPECT_NE(r->err.find("Out of memory"), std::string::npos) << r->err;
  fs::remove_all(base);
}

TEST_F(GitTest, TheWallTimeLimitKillsTheWholeGroupEvenAfterGitClosedItsOutput) {
  // A git that closes stdout and stderr and then does not exit (here: the alias's shell sleeping,
  // with a background child of its own) used to be waited for without a deadline.
  const std::string token = "31.4159";
  GitInvocation g = ShellAlias("exec >/dev/null 2>&1; sleep " + token + " & sleep " + token);
  g.timeout = std::chrono::seconds(1);
  auto r = RunGit(g);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().Message().find("timed out"), std::string::npos) << r.error().Message();
  // Both sleeps were in git's group and are gone.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // (The bracket keeps pgrep from matching the shell that runs it.)
  const std::string count = "pgrep -f 'slee[p] " + token + "' >/dev/null";
  EXPECT_NE(std::system(count.c_str()), 0) << "a process git started survived the kill";
}

TEST_F(GitTest, AMissingWorkingDirectoryIsAClearError) {
  GitInvocation g;
  g.cwd = "/nonexistent/cagent-git-test";
  g.args = {"--version"};
  auto r = RunGit(g);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().Message().find("chdir"), std::string::npos) << r.error().Message();
  EXPECT_NE(r.error().Message().find("/nonexistent/cagent-git-test"), std::string::npos);
}

TEST_F(GitTest, GitStartsWithDefaultSignalsAndStdinFromDevNull) {
  // cagent ignores SIGPIPE (and so does this test, meanwhile); git must not inherit that. stdin
  // is /dev/null (never the terminal): cat ends at once.
  struct sigaction ign {
  }, old{};
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGPIPE, &ign, &old), 0);
  auto r = RunGit(ShellAlias("grep SigIgn /proc/self/status; cat; echo end"));
  ::sigaction(SIGPIPE, &old, nullptr);
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_NE(r->out.find("SigIgn:\t0000000000000000"), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("end"), std::string::npos);
}

}  // namespace
}  // namespace cagent::launcher::run
