// End-to-end: a workspace after `cagent exec` traps no host git (issue #13, class 4). The attack
// plants a git dir in the workspace whose config runs code (core.fsmonitor) and points
// .git/commondir at it (plus config.worktree, a hook, info/attributes); a plain `git status` on the
// host then runs the planted code. Twins: the same writes made where the guard cannot act (the
// mount view switched off, so there is nothing to mount the guard into), and directly on the host
// (the naive view: a plain read-write workspace) — both leave the trap working.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// sh -c CMD in DIR as the user cagent runs as, with git's identity set and no user or system
// configuration; output discarded.
int ShAsUser(const std::string& dir, const std::string& cmd) {
  const std::string env = "export HOME=" + dir +
                          "/.. GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t "
                          "GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; ";
  return Harness::Get().ShAsUser(dir, env + cmd);
}

class GitTrapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    ws_ = h_.MakeDir("gitws");
    marker_ = ws_ + "/marker";  // where the workspace owner can write, in both variants
    ::unlink(marker_.c_str());
    ASSERT_EQ(ShAsUser(ws_, "git init -q . && echo one > f && git add f && git commit -qm one"), 0);
  }
  void TearDown() override { ::unlink(marker_.c_str()); }

  // The writes an attacker makes from inside, then ordinary git work; each write's status echoed.
  std::string Attack() const {
    return "mkdir -p evil/objects evil/refs; printf '[core]\\n\\tfsmonitor = \"touch " + marker_ +
           "; false\"\\n' > evil/config; "
           "printf '../evil\\n' > .git/commondir; echo commondir=$?; "
           "printf '[core]\\n\\tfsmonitor = x\\n' > .git/config.worktree; echo worktree=$?; "
           "printf '#!/bin/sh\\ntouch " +
           marker_ +
           "\\n' > .git/hooks/post-index-change; "
           "echo hook=$?; "
           "echo '* filter=x' > .git/info/attributes; echo attributes=$?; "
           "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t "
           "GIT_COMMITTER_EMAIL=t@t; "
           "git init -q planted; echo planted=$?";
  }
  RunResult Exec(const std::string& script, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"exec", "--workspace", ws_};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", script});
    return h_.Run(args);
  }
  // A plain `git status` on the host in the workspace, as the workspace's owner.
  void HostGitStatus() { ShAsUser(ws_, "git status --short"); }

  Harness& h_ = Harness::Get();
  std::string ws_;
  std::string marker_;
};

TEST_F(GitTrapTest, PlantedCommondirRunsCodeInTheHostsGitWhenTheWorkspaceIsAPlainBind) {
  // The naive view: the workspace written with nothing in the way.
  ASSERT_EQ(ShAsUser(ws_, Attack()), 0);
  ASSERT_FALSE(Exists(marker_));
  HostGitStatus();
  EXPECT_TRUE(Exists(marker_)) << "the payload must work, or the guarded test proves nothing";
}

TEST_F(GitTrapTest, TrapWorksThroughCagentWhenTheGuardCannotMountAndTheConfigCheckIsOff) {
  // With the mount view off the guard has nothing to mount into (reported), and the trap is laid;
  // the config check after the exit (git-config) would still cut the planted config down (next
  // test), so it is off here too.
  const RunResult r = Exec(Attack(), {"--disable-layer", "fs", "--disable-layer", "git-config"});
  EXPECT_THAT(r.out, HasSubstr("commondir=0")) << r.out << r.err;
  HostGitStatus();
  EXPECT_TRUE(Exists(marker_)) << r.out << r.err;
}

TEST_F(GitTrapTest, WithoutMountsTheConfigCheckStillDisarmsTheCommondirTrap) {
  // The writes land (no mount view), but after the exit cagent follows .git/commondir to the
  // planted git dir and rewrites its config without core.fsmonitor, before git runs on the host.
  const RunResult r = Exec(Attack(), {"--disable-layer", "fs"});
  EXPECT_THAT(r.out, HasSubstr("commondir=0")) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("cagent rewrote '" + ws_ + "/evil/config'")) << r.err;
  EXPECT_THAT(r.err, HasSubstr("without core.fsmonitor"));
  HostGitStatus();
  EXPECT_FALSE(Exists(marker_)) << r.out << r.err;
}

TEST_F(GitTrapTest, TrapWorksThroughCagentWithOnlyTheGitGuardSwitchedOff) {
  // Every other layer on (mount view, Landlock, seccomp): the view alone lets the command write
  // the workspace's .git, and the host's next git status runs the payload.
  const RunResult r = Exec(Attack(), {"--disable-layer", "git-guard"});
  EXPECT_THAT(r.out, HasSubstr("commondir=0")) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("layer 'git-guard' is switched off"));
  HostGitStatus();
  EXPECT_TRUE(Exists(marker_)) << r.out << r.err;
}

TEST_F(GitTrapTest, GitMetadataIsReadOnlyInsideAndHostGitRunsNothing) {
  int round = 0;
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--profile", "base"}}) {
    const std::string branch = "side" + std::to_string(++round);
    const RunResult r = Exec(Attack() +
                                 "; echo two >> f && git add f && git commit -qm two && "
                                 "git checkout -q -b " +
                                 branch + " && echo three >> f && git stash -q && echo work=ok",
                             extra);
    for (const char* refused : {"commondir=2", "worktree=2", "hook=2", "attributes=2"}) {
      EXPECT_THAT(r.out, HasSubstr(refused)) << r.out << r.err;
    }
    EXPECT_THAT(r.err, HasSubstr("Read-only file system"));
    EXPECT_THAT(r.out, HasSubstr("work=ok")) << r.out << r.err;
    // The nested repository the command made is reported, with what to do.
    EXPECT_THAT(r.err, HasSubstr("created '" + ws_ + "/planted/.git'")) << r.err;
    EXPECT_THAT(r.err, HasSubstr("rm -rf --"));
    EXPECT_FALSE(Exists(ws_ + "/.git/commondir"));
    EXPECT_FALSE(Exists(ws_ + "/.git/config.worktree"));
    HostGitStatus();
    EXPECT_FALSE(Exists(marker_));
    ASSERT_EQ(ShAsUser(ws_,
                       "rm -rf planted evil && git checkout -q master 2>/dev/null || "
                       "git checkout -q main"),
              0);
  }
  EXPECT_EQ(ShAsUser(ws_, "git log --all --oneline | grep -q two"), 0) << "commits made inside";
}

TEST_F(GitTrapTest, GitDirCannotBeMovedAsideAndReplaced) {
  const RunResult r = Exec(
      "mv .git .git-old; echo mv=$?; mv .git/objects o; echo objects=$?; "
      "rm -rf .git/hooks; echo hooks=$?");
  EXPECT_THAT(r.out, HasSubstr("mv=1"));
  EXPECT_THAT(r.out, HasSubstr("objects=1"));
  EXPECT_THAT(r.out, Not(HasSubstr("hooks=0")));
  EXPECT_THAT(r.err, HasSubstr("Device or resource busy"));
  EXPECT_TRUE(Exists(ws_ + "/.git/HEAD"));
}

}  // namespace
}  // namespace cagent::testing
