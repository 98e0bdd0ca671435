// End-to-end: a repository nested in the workspace by a sandboxed command cannot trap the user's
// next `git status` (issue #33). Inside `cagent exec --profile backend` the command makes nested
// repositories, registers them as gitlinks (mode 160000) in the workspace's own index, and arms
// them; a plain `git status` in the workspace on the host then recurses into each one and runs
// `git status` there:
//   - hooked/: its git dir's hooks/post-index-change, no configuration at all (the refresh that
//     status does writes the nested index, and git runs that hook on every index write);
//   - linked/: its `.git` is a symlink to a git dir the command made inside the workspace's own
//     .git (where no walk of the work tree looks), whose config sets core.fsmonitor.
// With the git-config layer on (here under --profile backend), cagent disables the new hook,
// follows the symlink to the git dir and rewrites its config, and reports each `.git` the command
// created; the host's git runs nothing planted. Twin: `--disable-layer git-config` (without a
// profile, which refuses it), and the same `git status` runs both.
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

class NestedRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    ws_ = h_.MakeDir("nested");
    hook_marker_ = ws_ + "/hook-ran";  // where the workspace's owner can write
    monitor_marker_ = ws_ + "/fsmonitor-ran";
    ::unlink(hook_marker_.c_str());
    ::unlink(monitor_marker_.c_str());
    ASSERT_EQ(ShAsUser(ws_, "git init -q . && echo one > f && git add f && git commit -qm one"), 0);
  }
  void TearDown() override {
    ::unlink(hook_marker_.c_str());
    ::unlink(monitor_marker_.c_str());
  }

  // The sandboxed command: both nested repositories, armed and registered as gitlinks; each step
  // echoes "NAME=ok" so the test sees that it happened inside.
  std::string Plant() const {
    return "set -e; export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t "
           "GIT_COMMITTER_EMAIL=t@t; "
           // hooked/: a hook and nothing else.
           "git init -q hooked; echo x > hooked/x; git -C hooked add x; "
           "git -C hooked commit -qm x; "
           "printf '#!/bin/sh\\ntouch " +
           hook_marker_ +
           "\\n' > hooked/.git/hooks/post-index-change; "
           "chmod +x hooked/.git/hooks/post-index-change; "
           // A stat change the nested status refreshes (and so writes the index).
           "touch -d '2001-01-01' hooked/x; "
           "git update-index --add --cacheinfo 160000,$(git -C hooked rev-parse HEAD),hooked; "
           "echo hooked=ok; "
           // linked/: .git a symlink to a git dir inside the workspace's .git.
           "git init -q --separate-git-dir=\"$PWD/.git/payload\" linked; "
           "rm linked/.git; ln -s ../.git/payload linked/.git; "
           "echo y > linked/y; git -C linked add y; git -C linked commit -qm y; "
           "git -C linked config core.fsmonitor 'touch " +
           monitor_marker_ +
           "; false'; "
           "git update-index --add --cacheinfo 160000,$(git -C linked rev-parse HEAD),linked; "
           "echo linked=ok";
  }

  // With a profile, or (the twin: --disable-layer is refused with --profile) without one.
  RunResult Exec(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"exec", "--workspace", ws_};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--json", "--", "/bin/sh", "-c", Plant()});
    return h_.RunJson(args);
  }

  Harness& h_ = Harness::Get();
  std::string ws_, hook_marker_, monitor_marker_;
};

TEST_F(NestedRepoTest, TwinWithTheLayerOffTheUsersGitStatusRunsWhatTheCommandPlanted) {
  const RunResult r = Exec({"--disable-layer", "git-config"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("hooked=ok"));
  EXPECT_THAT(r.out, HasSubstr("linked=ok"));
  ASSERT_FALSE(Exists(hook_marker_));
  ASSERT_FALSE(Exists(monitor_marker_));
  // The user's next git, in the workspace: nothing but `git status`.
  ShAsUser(ws_, "git status");
  EXPECT_TRUE(Exists(hook_marker_)) << "the planted hook must run, or the guarded test proves "
                                       "nothing";
  EXPECT_TRUE(Exists(monitor_marker_))
      << "the planted fsmonitor must run, or the guarded test proves nothing";
}

TEST_F(NestedRepoTest, TheUsersGitStatusRunsNothingPlantedAndEveryNewGitIsReported) {
  const RunResult r = Exec({"--profile", "backend"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("hooked=ok"));
  EXPECT_THAT(r.out, HasSubstr("linked=ok"));
  // Reported: each `.git` the command created, the hook it disabled, the config it rewrote.
  EXPECT_THAT(r.err, HasSubstr("created '" + ws_ + "/hooked/.git'"));
  EXPECT_THAT(r.err, HasSubstr("created '" + ws_ + "/linked/.git'"));
  EXPECT_THAT(r.err, HasSubstr("cagent disabled the hook '" + ws_ +
                               "/hooked/.git/hooks/post-index-change'"));
  EXPECT_THAT(r.err, HasSubstr(ws_ + "/.git/payload/config"));
  const nlohmann::json j = nlohmann::json::parse(r.json, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.json;
  EXPECT_THAT(j["planted_repositories"].dump(), HasSubstr(ws_ + "/hooked/.git"));
  EXPECT_THAT(j["planted_repositories"].dump(), HasSubstr(ws_ + "/linked/.git"));
  EXPECT_THAT(j["host_findings"].dump(), HasSubstr("post-index-change.cagent-disabled"));

  ShAsUser(ws_, "git status");
  EXPECT_FALSE(Exists(hook_marker_)) << "the planted hook ran";
  EXPECT_FALSE(Exists(monitor_marker_)) << "the planted fsmonitor ran";
  // The repositories still work: the user sees the nested changes as git shows them.
  EXPECT_EQ(ShAsUser(ws_, "git status --short >/dev/null && git -C hooked log -1 >/dev/null"), 0);
}

}  // namespace
}  // namespace cagent::testing
