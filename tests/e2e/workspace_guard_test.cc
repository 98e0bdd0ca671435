// End-to-end (issue #19): the workspace guard, the host secret set hidden inside every sandbox,
// and the caller's git identity inside.
//
// Each test runs cagent with HOME set to a test-made home (never the real one) holding a fake
// ~/.ssh/id_ed25519, ~/.aws/credentials and ~/.gitconfig. The guards' twins: the same command from
// a project directory succeeds; the same read with the mount view switched off shows the key (so
// the key is readable to this user and only the hide keeps it out); git asked the ordinary way in
// the hostile repository takes the planted name; git without the identity cannot commit.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class WorkspaceGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    root_ = h_.MakeDir("guard");  // holds the home: an ancestor of it
    home_ = root_ + "/home";
    key_ = "PRIVATE-KEY-" + std::to_string(::getpid());
    WriteFile(home_ + "/.ssh/id_ed25519", key_ + "\n");
    WriteFile(home_ + "/.aws/credentials", "AWS-SECRET-" + std::to_string(::getpid()) + "\n");
    WriteFile(home_ + "/notes.txt", "notes-are-fine\n");
    WriteFile(home_ + "/.gitconfig",
              "[user]\n\tname = Test Caller\n\temail = caller@example.test\n");
    WriteFile(home_ + "/proj/readme.txt", "project-file\n");
    ::chmod((home_ + "/.ssh").c_str(), 0700);
    h_.GiveToRunUser(root_);
    env_.extra_env = {"HOME=" + home_, "XDG_CONFIG_HOME=" + home_ + "/.config",
                      "GIT_CONFIG_NOSYSTEM=1"};
  }

  RunResult Run(const std::vector<std::string>& args, const std::string& cwd = "") const {
    RunOptions o = env_;
    o.cwd = cwd;
    return h_.Run(args, o);
  }

  Harness& h_ = Harness::Get();
  std::string root_, home_, key_;
  RunOptions env_;
};

TEST_F(WorkspaceGuardTest, ExecRefusesTheHomeAsTheCurrentDirectory) {
  const RunResult r = Run({"exec", "--", "cat", ".ssh/id_ed25519"}, home_);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr(key_)));
  EXPECT_THAT(r.err, HasSubstr("the workspace (the current directory, " + home_ +
                               ") is your home directory"));
  EXPECT_THAT(r.err, HasSubstr("run cagent from a project directory, or pass --workspace DIR"));
  EXPECT_THAT(r.err, HasSubstr("--workspace " + home_ + " --allow-home"));
  // Twin: the same invocation from a project directory runs.
  const RunResult twin = Run({"exec", "--", "cat", "readme.txt"}, home_ + "/proj");
  EXPECT_EQ(twin.exit_code, 0) << twin.err;
  EXPECT_THAT(twin.out, HasSubstr("project-file"));
}

TEST_F(WorkspaceGuardTest, ExecRefusesAnAncestorAndALinkToTheHome) {
  const RunResult up = Run({"exec", "--", "cat", "home/.ssh/id_ed25519"}, root_);
  EXPECT_EQ(up.exit_code, 2) << up.err;
  EXPECT_THAT(up.err, HasSubstr("contains home directories"));
  EXPECT_THAT(up.out, Not(HasSubstr(key_)));
  EXPECT_EQ(Run({"exec", "--workspace", root_, "--", "true"}).exit_code, 2);

  // A link to the home is the home: paths are compared after resolving symlinks.
  const std::string link = root_ + "/ws-link";
  ASSERT_EQ(::symlink(home_.c_str(), link.c_str()), 0);
  const RunResult named = Run({"exec", "--workspace", link, "--", "cat", ".ssh/id_ed25519"});
  EXPECT_EQ(named.exit_code, 2) << named.err;
  EXPECT_THAT(named.err, HasSubstr("the workspace " + home_ + " is your home directory"));
  const RunResult cwd = Run({"exec", "--", "cat", ".ssh/id_ed25519"}, link);
  EXPECT_EQ(cwd.exit_code, 2) << cwd.err;
  EXPECT_THAT(cwd.out, Not(HasSubstr(key_)));
  // A workspace inside the secret set itself.
  const RunResult ssh = Run({"exec", "--workspace", home_ + "/.ssh", "--allow-home", "--", "true"});
  EXPECT_EQ(ssh.exit_code, 2);
  EXPECT_THAT(ssh.err, HasSubstr("inside the host secret set"));
}

TEST_F(WorkspaceGuardTest, SystemDirectoriesAreRefusedWhateverTheFlags) {
  for (const char* dir : {"/usr", "/etc", "/tmp"}) {
    SCOPED_TRACE(dir);
    const RunResult r = Run({"exec", "--workspace", dir, "--allow-home", "--", "true"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr("the workspace " + std::string(dir) + " is a system directory"));
  }
  const RunResult cwd = Run({"exec", "--", "true"}, "/usr");
  EXPECT_EQ(cwd.exit_code, 2);
  EXPECT_THAT(cwd.err, HasSubstr("(the current directory, /usr) is a system directory"));
}

TEST_F(WorkspaceGuardTest, AllowHomeMustNameTheWorkspace) {
  const RunResult r = Run({"exec", "--allow-home", "--", "cat", ".ssh/id_ed25519"}, home_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--allow-home needs --workspace naming the directory"));
  EXPECT_THAT(r.out, Not(HasSubstr(key_)));
}

TEST_F(WorkspaceGuardTest, AcceptedHomeStillHidesTheSecretSet) {
  const std::string script = "cat .ssh/id_ed25519; cat .aws/credentials; cat notes.txt; echo done";
  const RunResult r =
      Run({"exec", "--workspace", home_, "--allow-home", "--", "/bin/sh", "-c", script});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("notes-are-fine"));
  EXPECT_THAT(r.out, Not(HasSubstr(key_)));
  EXPECT_THAT(r.out, Not(HasSubstr("AWS-SECRET")));
  EXPECT_THAT(ReadFile(home_ + "/.ssh/id_ed25519"), HasSubstr(key_));  // still there on the host

  // Twin: without the mount view (nothing to hide with) the same read shows the key.
  const RunResult twin = Run({"exec", "--workspace", home_, "--allow-home", "--disable-layer", "fs",
                              "--", "/bin/sh", "-c", script});
  EXPECT_THAT(twin.out, HasSubstr(key_)) << twin.err;

  // With a profile too, and with a workspace that contains the home.
  const RunResult prof = Run({"exec", "--profile", "readonly", "--workspace", home_, "--allow-home",
                              "--", "/bin/sh", "-c", script});
  EXPECT_THAT(prof.out, HasSubstr("notes-are-fine")) << prof.err;
  EXPECT_THAT(prof.out, Not(HasSubstr(key_)));
  const RunResult above = Run({"exec", "--workspace", root_, "--allow-home", "--", "/bin/sh", "-c",
                               "cat home/.ssh/id_ed25519; cat home/notes.txt"});
  EXPECT_THAT(above.out, HasSubstr("notes-are-fine")) << above.err;
  EXPECT_THAT(above.out, Not(HasSubstr(key_)));
}

TEST_F(WorkspaceGuardTest, TheSetIsHiddenAtAProjectsTopLevel) {
  const std::string ws = home_ + "/proj";
  WriteFile(ws + "/.npmrc", "//registry.npmjs.org/:_authToken=NPM-TOKEN-TOP\n");
  WriteFile(ws + "/.netrc", "machine example.org password NETRC-TOP\n");
  WriteFile(ws + "/fixtures/.npmrc", "registry=NESTED-NPMRC\n");
  h_.GiveToRunUser(ws);
  const RunResult r = Run(
      {"exec", "--", "/bin/sh", "-c", "cat .npmrc .netrc fixtures/.npmrc; ls -a | tr '\\n' ' '"},
      ws);
  EXPECT_THAT(r.out, Not(HasSubstr("NPM-TOKEN-TOP"))) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("NETRC-TOP")));
  // Twin: a copy deeper in the project is the project's own file, and shown.
  EXPECT_THAT(r.out, HasSubstr("NESTED-NPMRC"));

  // The engine agrees: policy explain denies the same reads.
  const RunResult explain = Run(
      {"policy", "explain", "readonly", "--workspace", ws, "--read", home_ + "/.ssh/id_ed25519"});
  EXPECT_THAT(explain.out, HasSubstr("verdict:   deny")) << explain.err;
  EXPECT_THAT(explain.out, HasSubstr("the host secret set is always hidden (.ssh)"));
  const RunResult npmrc =
      Run({"policy", "explain", "readonly", "--workspace", ws, "--read", ".npmrc"});
  EXPECT_THAT(npmrc.out, HasSubstr("the host secret set is always hidden (.npmrc)")) << npmrc.err;
}

// ---- git identity ----

class GitIdentityE2eTest : public WorkspaceGuardTest {
 protected:
  void SetUp() override {
    WorkspaceGuardTest::SetUp();
    if (IsSkipped()) return;
    repo_ = home_ + "/repo";
    WriteFile(repo_ + "/a.txt", "a\n");
    h_.GiveToRunUser(root_);
    // A repository of the caller's, made on the host without any identity of its own.
    ASSERT_EQ(h_.ShAsUser(repo_, "HOME=/nonexistent GIT_CONFIG_NOSYSTEM=1 git init -q ."), 0);
  }
  static std::string Commit() {
    return "git add a.txt && git commit -q -m inside && "
           "git log -1 --format='%an <%ae> / %cn <%ce>'";
  }
  std::string repo_;
};

TEST_F(GitIdentityE2eTest, CommitInsideUsesTheCallersIdentity) {
  const RunResult r = Run({"exec", "--", "/bin/sh", "-c", Commit()}, repo_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Test Caller <caller@example.test> / Test Caller "
                               "<caller@example.test>"));
  // Twin: without it git inside has no identity (the private HOME has no ~/.gitconfig).
  const RunResult off = Run({"exec", "--no-git-identity", "--", "/bin/sh", "-c", Commit()}, repo_);
  EXPECT_NE(off.exit_code, 0);
  EXPECT_THAT(off.err, HasSubstr("Please tell me who you are"));
}

TEST_F(GitIdentityE2eTest, AProfileCanTurnItOff) {
  WriteFile(root_ + "/none.cagent", "extends base\ngit-identity none\n");
  WriteFile(root_ + "/caller.cagent", "extends base\n");
  const RunResult none =
      Run({"exec", "--profile", root_ + "/none.cagent", "--", "/bin/sh", "-c", Commit()}, repo_);
  EXPECT_NE(none.exit_code, 0) << none.out;
  EXPECT_THAT(none.err, HasSubstr("Please tell me who you are"));
  // Twin: the same profile without the line commits as the caller.
  const RunResult caller =
      Run({"exec", "--profile", root_ + "/caller.cagent", "--", "/bin/sh", "-c", Commit()}, repo_);
  EXPECT_EQ(caller.exit_code, 0) << caller.err;
  EXPECT_THAT(caller.out, HasSubstr("Test Caller <caller@example.test>"));
}

TEST_F(GitIdentityE2eTest, AHostileRepositoryDoesNotChooseTheIdentity) {
  // The workspace's own config names someone else (and includes a file of its own); cagent is
  // started inside it, as usual.
  WriteFile(repo_ + "/.git/evil.inc", "[user]\n\tname = Included Mallory\n");
  ASSERT_EQ(h_.ShAsUser(repo_,
                        "git config user.name Mallory && git config user.email mallory@evil.test "
                        "&& git config include.path evil.inc"),
            0);
  h_.GiveToRunUser(repo_);
  const RunResult r = Run({"exec", "--", "/bin/sh", "-c",
                           "echo \"passed=$GIT_AUTHOR_NAME <$GIT_AUTHOR_EMAIL>\"; " + Commit()},
                          repo_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("passed=Test Caller <caller@example.test>"));
  EXPECT_THAT(r.out, HasSubstr("Test Caller <caller@example.test> / Test Caller"));
  EXPECT_THAT(r.out, Not(HasSubstr("Mallory")));
  // Twin: git asked the ordinary way in that repository takes the planted name.
  EXPECT_EQ(h_.ShAsUser(repo_,
                        "HOME=" + home_ + " test \"$(git config user.name)\" = 'Included Mallory'"),
            0);
}

}  // namespace
}  // namespace cagent::testing
