// The host-side guards of RunSandbox (label: sandbox): the git guard (launcher/guard/git_guard.h)
// and the leftover sweep (launcher/guard/leftovers.h). Each attack runs in a real sandbox twice:
// with the guard switched off (LaunchSpec::guard_*), showing it works, and with it on, showing it
// refused or undone. The test runner itself is never confined.
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/sandbox/sandbox.h"

namespace cagent::launcher {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

namespace fs = std::filesystem;

bool Exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

std::string Slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

class HostGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-host-guard-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ws_ = dir_ + "/ws";
    marker_ = dir_ + "/MARKER";
    fs::create_directories(ws_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // A host shell command with a clean git environment (no user or system configuration).
  int Host(const std::string& script) {
    const std::string cmd = "cd '" + ws_ + "' && export HOME='" + dir_ +
                            "' GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t "
                            "GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t && (" +
                            script + ") >/dev/null 2>&1";
    return std::system(cmd.c_str());
  }
  void MakeRepo() {
    ASSERT_EQ(Host("git init -q . && echo one > f && git add f && git commit -qm one"), 0);
  }
  LaunchSpec Spec(const std::string& script) {
    LaunchSpec spec = DefaultLaunchSpec(ws_, {"/bin/sh", "-c", script});
    spec.env_set.push_back({"GIT_AUTHOR_NAME", "t"});
    spec.env_set.push_back({"GIT_AUTHOR_EMAIL", "t@t"});
    spec.env_set.push_back({"GIT_COMMITTER_NAME", "t"});
    spec.env_set.push_back({"GIT_COMMITTER_EMAIL", "t@t"});
    spec.best_effort.Add(Layer::kCgroupLimits);
    return spec;
  }
  SandboxOutcome Run(const LaunchSpec& spec) {
    auto out = RunSandbox(spec);
    EXPECT_TRUE(out.ok());
    if (!out.ok()) return {};
    return *out;
  }
  // Plants a git dir in the workspace whose config runs code, and points .git/commondir (and
  // config.worktree, hooks, info, alternates) at it; then commits through git inside.
  std::string TrapScript() const {
    return "mkdir -p evil/objects evil/refs; printf '[core]\\n\\tfsmonitor = \"touch " + marker_ +
           "; false\"\\n' > evil/config; "
           "printf '../evil\\n' > .git/commondir; echo c=$?; "
           "printf '[core]\\n\\tfsmonitor = x\\n' > .git/config.worktree; echo w=$?; "
           "printf '#!/bin/sh\\ntouch " +
           marker_ +
           "\\n' > .git/hooks/post-index-change; echo h=$?; "
           "echo '* filter=x' > .git/info/attributes; echo i=$?; "
           "mkdir -p .git/worktrees/x; echo t=$?; "
           "echo /tmp > .git/objects/info/alternates; echo a=$?; "
           "mv .git .git-moved && mv .git-moved .git; echo m=$?; "
           // Ordinary work must still succeed.
           "echo two >> f && git add f && git commit -qm two && git checkout -q -b side && "
           "echo three >> f && git stash -q && echo work=ok";
  }
  std::string dir_, ws_, marker_;
};

TEST_F(HostGuardTest, CommondirTrapRunsHostCodeWithoutTheGuard) {
  MakeRepo();
  LaunchSpec spec = Spec(TrapScript());
  spec.guard_git_metadata = false;
  const SandboxOutcome out = Run(spec);
  EXPECT_EQ(out.kind, SandboxOutcome::Kind::kExited) << out.error;
  EXPECT_EQ(out.git_guard, "off");
  ASSERT_TRUE(Exists(ws_ + "/.git/commondir"));
  // A plain git status on the host now obeys the planted configuration.
  Host("git status --short");
  EXPECT_TRUE(Exists(marker_)) << "the twin must show the trap working";
}

TEST_F(HostGuardTest, CommondirTrapIsRefusedAndGitStillWorksInside) {
  MakeRepo();
  const std::set<std::string> before = Names(ws_ + "/.git");
  // The command's output goes to a file in the workspace (the test reads it afterwards).
  const LaunchSpec spec = Spec("(" + TrapScript() + ") > out.txt 2>&1");
  const SandboxOutcome out = Run(spec);
  EXPECT_EQ(out.kind, SandboxOutcome::Kind::kExited) << out.error;
  EXPECT_THAT(out.git_guard, HasSubstr("guarded 1 repository: " + ws_ + "/.git"));
  const std::string text = Slurp(ws_ + "/out.txt");
  for (const char* refused : {"c=2", "w=2", "h=2", "i=2", "t=1", "a=2", "m=1"}) {
    EXPECT_THAT(text, HasSubstr(refused)) << text;
  }
  EXPECT_THAT(text, HasSubstr("Read-only file system"));
  EXPECT_THAT(text, HasSubstr("Device or resource busy"));
  EXPECT_THAT(text, HasSubstr("work=ok")) << text;
  // The placeholders are gone, nothing else of git's changed names.
  std::set<std::string> after = Names(ws_ + "/.git");
  EXPECT_FALSE(Exists(ws_ + "/.git/commondir"));
  EXPECT_FALSE(Exists(ws_ + "/.git/config.worktree"));
  EXPECT_FALSE(Exists(ws_ + "/.git/worktrees"));
  EXPECT_FALSE(Exists(ws_ + "/.git/objects/info/alternates"));
  for (const std::string& name : before) EXPECT_THAT(after, Contains(name));
  Host("git status --short");
  EXPECT_FALSE(Exists(marker_));
  EXPECT_EQ(Host("git log --oneline | grep -q two"), 0) << "the commit made inside is there";
}

TEST_F(HostGuardTest, ASymlinkedHooksDirectoryIsRefusedWithAReason) {
  MakeRepo();
  ASSERT_EQ(Host("rm -rf .git/hooks && mkdir ../elsewhere && ln -s ../../elsewhere .git/hooks"), 0);
  const SandboxOutcome out = Run(Spec("true"));
  EXPECT_EQ(out.kind, SandboxOutcome::Kind::kSetupFailed);
  EXPECT_EQ(out.failed_step, "guard the workspace's git metadata");
  EXPECT_THAT(out.error, HasSubstr(ws_ + "/.git/hooks"));
  EXPECT_THAT(out.error, HasSubstr("symbolic link"));
}

TEST_F(HostGuardTest, AGitdirFileStaysReadOnly) {
  ASSERT_EQ(Host("echo 'gitdir: /somewhere' > .git"), 0);
  LaunchSpec spec = Spec("echo 'gitdir: ../evil' > .git; echo rc=$? > rc.txt");
  EXPECT_EQ(Run(spec).kind, SandboxOutcome::Kind::kExited);
  EXPECT_THAT(Slurp(ws_ + "/rc.txt"), HasSubstr("rc=2"));
  EXPECT_EQ(Slurp(ws_ + "/.git"), "gitdir: /somewhere\n");
  spec.guard_git_metadata = false;
  EXPECT_EQ(Run(spec).kind, SandboxOutcome::Kind::kExited);
  EXPECT_EQ(Slurp(ws_ + "/.git"), "gitdir: ../evil\n") << "twin: writable without the guard";
}

TEST_F(HostGuardTest, PlantedNestedRepositoryIsReported) {
  MakeRepo();
  LaunchSpec spec = Spec("git init -q sub && mkdir -p a && echo 'gitdir: /x' > a/.git");
  SandboxOutcome out = Run(spec);
  EXPECT_THAT(out.planted_repositories, Contains(ws_ + "/sub/.git"));
  EXPECT_THAT(out.planted_repositories, Contains(ws_ + "/a/.git"));
  ASSERT_FALSE(out.host_findings.empty());
  EXPECT_THAT(out.host_findings[0], HasSubstr("rm -rf --"));
  // A repository that was there before is not reported again.
  out = Run(Spec("true"));
  EXPECT_THAT(out.planted_repositories, IsEmpty());
  // Twin: without the guard nothing is reported.
  spec = Spec("git init -q sub2");
  spec.guard_git_metadata = false;
  out = Run(spec);
  EXPECT_THAT(out.planted_repositories, IsEmpty());
  EXPECT_TRUE(Exists(ws_ + "/sub2/.git"));
}

TEST_F(HostGuardTest, ANestedRepositoryIsGuardedToo) {
  MakeRepo();
  ASSERT_EQ(Host("mkdir vendor && cd vendor && git init -q ."), 0);
  const SandboxOutcome out =
      Run(Spec("printf '../../evil\\n' > vendor/.git/commondir; echo rc=$? > rc.txt"));
  EXPECT_THAT(out.git_guard, HasSubstr("guarded 2 repositories"));
  EXPECT_THAT(Slurp(ws_ + "/rc.txt"), HasSubstr("rc=2"));
  EXPECT_FALSE(Exists(ws_ + "/vendor/.git/commondir"));
}

// ---- privileged files (a root caller's uid 0 inside owns its files) ----

bool Setuid(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) != 0;
}

TEST_F(HostGuardTest, ChmodSetuidIsRefusedBySeccomp) {
  LaunchSpec spec = Spec("cp /bin/true x && chmod u+s x; echo rc=$? > rc.txt");
  spec.guard_privileged_files = false;  // seccomp alone
  Run(spec);
  EXPECT_FALSE(Setuid(ws_ + "/x"));
  EXPECT_THAT(Slurp(ws_ + "/rc.txt"), HasSubstr("rc=1"));
  // Twin: neither guard.
  spec.disabled.Add(Layer::kSeccomp);
  Run(spec);
  EXPECT_TRUE(Setuid(ws_ + "/x")) << "the twin must leave a set-user-ID file";
}

TEST_F(HostGuardTest, TheSweepClearsWhatSeccompDidNotSee) {
  // The seccomp layer off stands for every route the filter cannot see (openat2's struct).
  LaunchSpec spec = Spec(
      "cp /bin/true x && chmod 4755 x && cp /bin/true y && chmod 2755 y && "
      "perl -e 'use Fcntl; sysopen(F, \"z\", O_CREAT|O_WRONLY, 04755) or die $!'");
  spec.disabled.Add(Layer::kSeccomp);
  const SandboxOutcome out = Run(spec);
  EXPECT_EQ(out.exit_code, 0) << out.error;
  for (const char* name : {"x", "y", "z"}) {
    EXPECT_FALSE(Setuid(ws_ + "/" + name)) << name;
    EXPECT_THAT(out.cleared_files, Contains(ws_ + "/" + name));
  }
  EXPECT_THAT(::testing::PrintToString(out.host_findings), HasSubstr("mode 4755 -> 0755"));
}

TEST_F(HostGuardTest, ACallersOwnSetuidFileIsLeftAlone) {
  ASSERT_EQ(Host("cp /bin/true mine && chmod 4755 mine"), 0);
  const SandboxOutcome out = Run(Spec("true"));
  EXPECT_TRUE(Setuid(ws_ + "/mine"));
  EXPECT_THAT(out.cleared_files, IsEmpty());
}

TEST_F(HostGuardTest, FileCapabilitiesNeedCapSetfcapAndAreSweptOtherwise) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "a caller other than root cannot set real file capabilities";
  if (!Exists("/usr/sbin/setcap")) GTEST_SKIP() << "setcap is not installed";
  const std::string script =
      "cp /bin/true c && /usr/sbin/setcap cap_net_raw+ep c; echo rc=$? > rc.txt";
  // With every capability dropped, setting security.capability needs CAP_SETFCAP: refused.
  LaunchSpec spec = Spec(script);
  spec.guard_privileged_files = false;
  Run(spec);
  EXPECT_THAT(Slurp(ws_ + "/rc.txt"), Not(HasSubstr("rc=0")));
  EXPECT_LT(::getxattr((ws_ + "/c").c_str(), "security.capability", nullptr, 0), 0);
  // Twin: capabilities kept, no sweep: the file keeps a capability the host honours.
  spec.disabled.Add(Layer::kCapabilities);
  Run(spec);
  EXPECT_THAT(Slurp(ws_ + "/rc.txt"), HasSubstr("rc=0"));
  EXPECT_GE(::getxattr((ws_ + "/c").c_str(), "security.capability", nullptr, 0), 0);
  // With the sweep, the same leaves nothing behind.
  ::unlink((ws_ + "/c").c_str());
  spec.guard_privileged_files = true;
  const SandboxOutcome out = Run(spec);
  EXPECT_LT(::getxattr((ws_ + "/c").c_str(), "security.capability", nullptr, 0), 0);
  EXPECT_THAT(out.cleared_files, Contains(ws_ + "/c"));
}

}  // namespace
}  // namespace cagent::launcher
