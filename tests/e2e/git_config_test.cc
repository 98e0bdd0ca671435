// End-to-end: git inside the sandbox may write its repository's own configuration (issue #32), and
// nothing it writes there makes a later host git run code. Ordinary writes (`git config
// user.email`, `git branch -D`, `git remote add`, ...) used to fail with "Device or resource busy"
// on the read-only over-mount of .git/config; now they succeed and persist, and after the sandbox
// cagent rewrites every changed config in the writable trees keeping only allow-listed keys
// (launcher/guard/git_config_guard.h). Twins: `--disable-layer git-config` leaves the planted keys
// in place, and a plain `git status` on the host then runs the planted command.
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
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

// sh -c CMD in DIR on the host, as the user cagent runs as, with no user or system configuration
// and a commit identity; its exit status.
int ShAsUser(const std::string& dir, const std::string& cmd) {
  const std::string env = "export HOME=" + dir +
                          "/.. GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t "
                          "GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; ";
  return Harness::Get().ShAsUser(dir, env + cmd);
}

// A profile written by the test: base's view (its deny rules over the workspace), nothing else.
constexpr const char* kProfile =
    "extends base\n"
    "description \"e2e: base's filesystem view, for git's own writes inside\"\n";

class GitConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    ws_ = h_.MakeDir("gitcfg");
    marker_ = ws_ + "/marker";  // where the workspace's owner can write, as caller and as nobody
    ::unlink(marker_.c_str());
    profile_ = h_.MakeDir("gitcfg-profile") + "/gitwork.cagent";
    WriteFile(profile_, kProfile);
    ASSERT_EQ(ShAsUser(ws_, "git init -q . && echo one > f && git add f && git commit -qm one"), 0);
    original_ = ReadFile(ws_ + "/.git/config");
  }
  void TearDown() override { ::unlink(marker_.c_str()); }

  RunResult Exec(const std::string& script, const std::vector<std::string>& extra = {},
                 bool json = false) {
    std::vector<std::string> args = {"exec", "--workspace", ws_};
    args.insert(args.end(), extra.begin(), extra.end());
    if (json) args.push_back("--json");
    args.insert(args.end(), {"--", "/bin/sh", "-c", script});
    return json ? h_.RunJson(args) : h_.Run(args);
  }

  // Plants, in the repository's config (git's own `git config`, the way an agent would) and in a
  // nested repository, a bare repository and a repository behind a `gitdir:` link, keys that make
  // a later host git run `touch MARKER`.
  std::string Plant() const {
    const std::string touch = "touch " + marker_;
    return "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t "
           "GIT_COMMITTER_EMAIL=t@t; "
           "printf '[core]\\n\\tfsmonitor = \"" +
           touch +
           "; false\"\\n' > included; "
           "git config core.fsmonitor '" +
           touch + "; false' && echo fsmonitor=ok; " + "mkdir -p hooks && printf '#!/bin/sh\\n" +
           touch +
           "\\n' > hooks/post-index-change && chmod +x hooks/post-index-change; "
           "git config core.hooksPath \"$PWD/hooks\" && echo hookspath=ok; "
           "git config alias.st '!" +
           touch +
           "' && echo alias=ok; "
           "git config include.path ../included && echo include=ok; "
           "git config filter.x.clean '" +
           touch +
           "; cat' && echo filter=ok; "
           "git config core.sshCommand '" +
           touch + "' && echo ssh=ok; " +
           "git config 'url.ext::sh -c false.insteadOf' https:// && echo insteadof=ok; "
           "git config user.email planted@example.org && echo email=ok; "
           // Nested: a repository, a bare one, and one behind a gitdir: link.
           "git init -q sub && git -C sub config core.fsmonitor '" +
           touch +
           "; false' && echo sub=ok; "
           "git init -q --bare bare.git && git -C bare.git config alias.st '!" +
           touch +
           "' && echo bare=ok; "
           "mkdir -p linked && git init -q --separate-git-dir=\"$PWD/.hidden-gitdir\" linked && "
           "git -C linked config core.fsmonitor '" +
           touch + "; false' && echo linked=ok";
  }
  // What the human does next on the host: git in the workspace and in each nested repository.
  void HostGit() {
    ShAsUser(ws_, "git status --short; git st");
    ShAsUser(ws_ + "/sub", "git status --short");
    ShAsUser(ws_ + "/bare.git", "git st");
    ShAsUser(ws_ + "/linked", "git status --short");
  }

  Harness& h_ = Harness::Get();
  std::string ws_, marker_, profile_, original_;
};

TEST_F(GitConfigTest, OrdinaryConfigWritesSucceedInsideAndPersist) {
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--profile", profile_}}) {
    SCOPED_TRACE(extra.empty() ? "no profile" : "a profile extending base");
    ASSERT_EQ(ShAsUser(ws_,
                       "git checkout -q master 2>/dev/null || git checkout -q main; "
                       "git branch -D feat 2>/dev/null; git remote remove origin 2>/dev/null;"
                       " true"),
              0);
    const RunResult r = Exec(
        "git config user.email x@example.org && echo email=ok; "
        "git config user.name 'X Y' && echo name=ok; "
        "git branch b && git branch -D b && echo branch-D=ok; "
        "git branch c && git branch -m c d && git branch -D d && echo branch-m=ok; "
        "git remote add origin https://example.org/r.git && echo remote-add=ok; "
        "git remote set-url origin https://example.org/s.git && echo set-url=ok; "
        "git checkout -q -b feat && echo checkout-b=ok; "
        "git config core.autocrlf false && echo autocrlf=ok; "
        "git config pull.rebase true && echo pull-rebase=ok",
        extra);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    for (const char* ok : {"email=ok", "name=ok", "branch-D=ok", "branch-m=ok", "remote-add=ok",
                           "set-url=ok", "checkout-b=ok", "autocrlf=ok", "pull-rebase=ok"}) {
      EXPECT_THAT(r.out, HasSubstr(ok)) << r.out << r.err;
    }
    EXPECT_THAT(r.err, Not(HasSubstr("Device or resource busy")));
    EXPECT_THAT(r.err, Not(HasSubstr("could not write config")));
    // Nothing was dropped: the file is git's own, left as it wrote it.
    EXPECT_THAT(r.err, Not(HasSubstr("cagent rewrote")));
    EXPECT_EQ(ShAsUser(ws_,
                       "test \"$(git config user.email)\" = x@example.org && "
                       "test \"$(git config user.name)\" = 'X Y' && "
                       "test \"$(git config remote.origin.url)\" = https://example.org/s.git "
                       "&& test \"$(git config pull.rebase)\" = true && "
                       "test \"$(git symbolic-ref --short HEAD)\" = feat"),
              0)
        << ReadFile(ws_ + "/.git/config");
  }
}

TEST_F(GitConfigTest, PlantedKeysRunCodeInTheHostsGitWithTheCheckSwitchedOff) {
  const RunResult r = Exec(Plant(), {"--disable-layer", "git-config"});
  for (const char* ok : {"fsmonitor=ok", "hookspath=ok", "alias=ok", "include=ok", "filter=ok",
                         "ssh=ok", "insteadof=ok", "sub=ok", "bare=ok", "linked=ok"}) {
    EXPECT_THAT(r.out, HasSubstr(ok)) << r.out << r.err;
  }
  EXPECT_THAT(r.err, HasSubstr("layer 'git-config' is switched off"));
  ASSERT_FALSE(Exists(marker_));
  HostGit();
  EXPECT_TRUE(Exists(marker_)) << "the payload must work, or the guarded test proves nothing";
  // Each nested repository alone, too.
  for (const std::string& dir : {ws_ + "/sub", ws_ + "/linked"}) {
    ::unlink(marker_.c_str());
    ShAsUser(dir, "git status --short");
    EXPECT_TRUE(Exists(marker_)) << dir;
  }
  ::unlink(marker_.c_str());
  ShAsUser(ws_ + "/bare.git", "git st");
  EXPECT_TRUE(Exists(marker_)) << "bare.git";
}

TEST_F(GitConfigTest, PlantedKeysAreDroppedAndReportedAndTheHostsGitRunsNothing) {
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--profile", profile_}}) {
    SCOPED_TRACE(extra.empty() ? "no profile" : "a profile extending base");
    ASSERT_EQ(ShAsUser(ws_, "rm -rf sub bare.git linked .hidden-gitdir hooks included"), 0);
    const RunResult r = Exec(Plant(), extra, /*json=*/true);
    EXPECT_THAT(r.out, HasSubstr("fsmonitor=ok")) << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("linked=ok")) << r.out << r.err;
    // Reported on stderr, by name, and in --json.
    EXPECT_THAT(r.err, HasSubstr("cagent rewrote '" + ws_ + "/.git/config'")) << r.err;
    for (const char* key : {"core.fsmonitor", "core.hookspath", "alias.st", "include.path",
                            "filter.x.clean", "core.sshcommand", ".insteadof"}) {
      EXPECT_THAT(r.err, HasSubstr(key)) << r.err;
    }
    EXPECT_THAT(r.err, HasSubstr(ws_ + "/sub/.git/config"));
    EXPECT_THAT(r.err, HasSubstr(ws_ + "/bare.git/config"));
    EXPECT_THAT(r.err, HasSubstr(ws_ + "/.hidden-gitdir/config"));
    const nlohmann::json j = nlohmann::json::parse(r.json, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.json;
    bool found = false;
    for (const auto& w : j["git_config_rewrites"]) {
      if (w["path"] == ws_ + "/.git/config") {
        found = true;
        EXPECT_THAT(w["dropped_keys"].dump(), HasSubstr("\"core.fsmonitor\"")) << w.dump();
        EXPECT_THAT(w["dropped_keys"].dump(), Not(HasSubstr("user.email"))) << w.dump();
      }
    }
    EXPECT_TRUE(found) << j["git_config_rewrites"].dump();
    // The allowed write survives for whatever reads the repository next.
    EXPECT_EQ(ShAsUser(ws_, "test \"$(git config user.email)\" = planted@example.org"), 0)
        << ReadFile(ws_ + "/.git/config");
    HostGit();
    EXPECT_FALSE(Exists(marker_)) << ReadFile(ws_ + "/.git/config");
    EXPECT_EQ(ShAsUser(ws_, "git status --short"), 0) << "the repository still works";
  }
}

TEST_F(GitConfigTest, AConfigGitCannotReadIsReplacedNeverHangsAndIsReported) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"binary", "printf '\\000\\001\\002[core' > .git/config"},
      {"malformed", "printf '[core\\n\\tfsmonitor = x\\n' > .git/config"},
      {"huge",
       "{ printf '[core]\\n\\tfsmonitor = x\\n'; head -c 3000000 /dev/zero | tr '\\000' "
       "'#'; } > .git/config"},
      {"symlink", "ln -sf /etc/passwd .git/config"},
      {"fifo", "rm -f .git/config && mkfifo .git/config"},
      {"directory", "rm -f .git/config && mkdir -p .git/config/x"},
  };
  for (const auto& [name, plant] : cases) {
    SCOPED_TRACE(name);
    const RunResult r = Exec(plant + " && echo planted=ok");
    EXPECT_THAT(r.out, HasSubstr("planted=ok")) << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr("cagent replaced '" + ws_ + "/.git/config'")) << r.err;
    struct stat st {};
    ASSERT_EQ(::lstat((ws_ + "/.git/config").c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    // What it held before the launch, so the repository works as it did.
    EXPECT_EQ(ShAsUser(ws_, "git status --short && test \"$(git config core.bare)\" = false"), 0)
        << ReadFile(ws_ + "/.git/config");
    ASSERT_EQ(ShAsUser(ws_, "rm -rf .git/config.cagent-moved-*"), 0);
  }
  EXPECT_FALSE(Exists(marker_));
}

}  // namespace
}  // namespace cagent::testing
