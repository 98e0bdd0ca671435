// SpecFromPolicy: a compiled profile becomes a LaunchSpec. The e2e tests (profile_samples_test)
// show the resulting sandbox enforcing it; these check the translation itself.
#include "launcher/profile_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "policy/diagnostics.h"
#include "policy/loader.h"

namespace cagent::launcher {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class ProfileSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-profile-spec-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ws_ = root_ + "/ws";
    home_ = root_ + "/home";
    fs::create_directories(ws_);
    fs::create_directories(home_ + "/.rustup");
  }
  void TearDown() override { fs::remove_all(root_); }

  std::shared_ptr<const policy::Policy> Compile(const std::string& text) {
    policy::SearchPath search;
    policy::Compiled c = policy::CompileText("t.cagent", text, search);
    EXPECT_TRUE(c.ok()) << policy::RenderAll(*c.sources, c.diags);
    return c.policy;
  }
  void Touch(const std::string& rel, const std::string& content = "x") {
    fs::create_directories(fs::path(ws_ + "/" + rel).parent_path());
    std::ofstream(ws_ + "/" + rel) << content;
  }
  ProfileLaunch Build(const policy::Policy& p, std::vector<std::string> environ = {}) {
    auto r = SpecFromPolicy(p, ws_, {"true"}, ProfileContext{home_, std::move(environ)});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().Message());
    return r.ok() ? std::move(*r) : ProfileLaunch{};
  }

  std::string root_, ws_, home_;
};

TEST_F(ProfileSpecTest, MountsResolveHomeAndWorkspaceAndSkipAbsentPaths) {
  auto p = Compile(
      "filesystem {\n  read-only /usr ~/.rustup ~/.absent vendor\n  read-write /var/tmp\n"
      "  hide /etc/shadow\n}\n");
  fs::create_directories(ws_ + "/vendor");
  ProfileLaunch l = Build(*p);
  EXPECT_THAT(l.spec.read_only_paths, Contains("/usr"));
  EXPECT_THAT(l.spec.read_only_paths, Contains(home_ + "/.rustup"));
  EXPECT_THAT(l.spec.read_only_paths, Contains(ws_ + "/vendor"));
  EXPECT_THAT(l.spec.read_only_paths, Not(Contains(home_ + "/.absent")));
  EXPECT_THAT(l.notes, Contains("skipped ~/.absent: absent"));
  EXPECT_THAT(l.spec.read_write_paths, Contains("/var/tmp"));
  EXPECT_THAT(l.spec.hidden_paths, Contains("/etc/shadow"));
  // The launcher's host-secret hides stay, whatever the profile says.
  EXPECT_THAT(l.spec.hidden_paths, Contains("/etc/ssh"));
}

TEST_F(ProfileSpecTest, DenyGlobsHideExistingMatchesAndWriteDenialsBindReadOnly) {
  Touch(".env", "SECRET=1");
  Touch("config/prod/.env.local");
  Touch("src/main.c");
  Touch("certs/a.pem");
  Touch(".git/hooks/pre-commit");
  Touch(".git/config");
  Touch(".git/index");
  auto p = Compile("extends base\n");
  ProfileLaunch l = Build(*p);
  auto& hidden = l.spec.hidden_paths;
  EXPECT_THAT(hidden, Contains(ws_ + "/.env"));
  EXPECT_THAT(hidden, Contains(ws_ + "/config/prod/.env.local"));
  EXPECT_THAT(hidden, Contains(ws_ + "/certs/a.pem"));
  EXPECT_THAT(hidden, Not(Contains(ws_ + "/src/main.c")));
  auto& ro = l.spec.read_only_paths;
  EXPECT_THAT(ro, Contains(ws_ + "/.git/config"));
  EXPECT_THAT(ro, Contains(ws_ + "/.git/hooks"));  // "dir/**" covers the directory itself
  EXPECT_THAT(ro, Not(Contains(ws_ + "/.git/index")));
  EXPECT_THAT(ro, Not(Contains(ws_ + "/.git")));
}

TEST_F(ProfileSpecTest, TheWalkDoesNotFollowSymlinks) {
  fs::create_directories(root_ + "/outside");
  std::ofstream(root_ + "/outside/.env") << "x";
  fs::create_directory_symlink(root_ + "/outside", ws_ + "/link");
  auto p = Compile("filesystem {\n  deny **/.env\n}\n");
  ProfileLaunch l = Build(*p);
  EXPECT_THAT(l.spec.hidden_paths, Not(Contains(ws_ + "/link/.env")));
  EXPECT_THAT(l.spec.hidden_paths, Not(Contains(root_ + "/outside/.env")));
}

TEST_F(ProfileSpecTest, HomeAndAbsoluteDenyGlobsApplyFromTheirLiteralDirectory) {
  fs::create_directories(home_ + "/.tok/sub");
  std::ofstream(home_ + "/.tok/cred") << "x";
  std::ofstream(home_ + "/.tok/sub/cred") << "x";
  std::ofstream(home_ + "/.tok/keep") << "x";
  auto p = Compile("filesystem {\n  read-only ~/.tok\n  deny ~/.tok/**/cred\n}\n");
  ProfileLaunch l = Build(*p);
  EXPECT_THAT(l.spec.hidden_paths, Contains(home_ + "/.tok/cred"));
  EXPECT_THAT(l.spec.hidden_paths, Contains(home_ + "/.tok/sub/cred"));
  EXPECT_THAT(l.spec.hidden_paths, Not(Contains(home_ + "/.tok/keep")));
  // Absolute globs need a fixed directory to start from.
  auto wild = Compile("filesystem {\n  deny /**/cred\n}\n");
  auto r = SpecFromPolicy(*wild, ws_, {"true"}, ProfileContext{home_, {}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().Message(), HasSubstr("has no fixed directory to start from"));
}

TEST_F(ProfileSpecTest, ASymlinkMatchingADenyGlobHidesItsTarget) {
  Touch("config/secrets.txt", "SECRET");
  fs::create_symlink("config/secrets.txt", ws_ + "/.env");
  auto p = Compile("filesystem {\n  deny **/.env\n}\n");
  ProfileLaunch l = Build(*p);
  EXPECT_THAT(l.spec.hidden_paths, Contains(ws_ + "/config/secrets.txt"));
}

TEST_F(ProfileSpecTest, MountsInsideAHiddenTreeAreSkipped) {
  fs::create_directories(home_ + "/.conf/sub");
  auto p = Compile("filesystem {\n  hide ~/.conf\n  read-only ~/.conf/sub\n}\n");
  ProfileLaunch l = Build(*p);
  EXPECT_THAT(l.spec.hidden_paths, Contains(home_ + "/.conf"));
  EXPECT_THAT(l.spec.read_only_paths, Not(Contains(home_ + "/.conf/sub")));
}

TEST_F(ProfileSpecTest, EnvironmentPassScrubSet) {
  auto p = Compile(
      "environment {\n  pass LANG LC_* MY_* PATH\n  scrub *_TOKEN\n  set TOOL_HOME ~/.tool\n"
      "  set SEARCH ~/a:/b:~/c\n}\n");
  ProfileLaunch l = Build(*p, {"LANG=C", "LC_ALL=C", "MY_TOKEN=secret", "MY_VAR=1",
                               "OTHER=2", "PATH=/caller/bin"});
  EXPECT_THAT(l.spec.env_pass, ElementsAre("LANG", "LC_ALL", "MY_VAR", "PATH"));
  auto find = [&](const std::string& name) -> std::string {
    for (const auto& v : l.spec.env_set) {
      if (v.name == name) return v.value;
    }
    return "<unset>";
  };
  EXPECT_EQ(find("TOOL_HOME"), home_ + "/.tool");
  EXPECT_EQ(find("SEARCH"), home_ + "/a:/b:" + home_ + "/c");
  // PATH is passed, so the launcher's default PATH no longer competes with it.
  EXPECT_EQ(find("PATH"), "<unset>");
}

TEST_F(ProfileSpecTest, LimitsNetworkWorkspaceAndBestEffort) {
  auto p = Compile(
      "workspace read-only\nnetwork loopback\nbest-effort cgroup\nlimits {\n  cpu-time 90s\n"
      "  memory 2G\n  processes 100\n  open-files 256\n  file-size 10M\n  wall-time 5m\n}\n");
  ProfileLaunch l = Build(*p);
  EXPECT_FALSE(l.spec.workspace_writable);
  EXPECT_EQ(l.spec.network, NetworkMode::kLoopback);
  EXPECT_EQ(l.spec.limits.cpu_seconds, 90U);
  EXPECT_EQ(l.spec.limits.processes, 100U);
  EXPECT_EQ(l.spec.limits.open_files, 256U);
  EXPECT_EQ(l.spec.limits.file_size_bytes, 10ULL << 20);
  EXPECT_EQ(l.spec.cgroup_limits.memory_max, 2ULL << 30);
  EXPECT_EQ(l.spec.cgroup_limits.pids_max, 100U);
  EXPECT_EQ(l.spec.timeout, std::chrono::minutes(5));
  EXPECT_TRUE(l.spec.best_effort.Has(Layer::kCgroupLimits));
  EXPECT_FALSE(l.spec.best_effort.Has(Layer::kLandlock));
}

TEST_F(ProfileSpecTest, NetworkDefaultsToNone) {
  auto p = Compile("description \"nothing else\"\n");
  EXPECT_EQ(Build(*p).spec.network, NetworkMode::kNone);
}

TEST(ExpandHomeInValue, OnlyLeadingTildeOfEachElement) {
  EXPECT_EQ(ExpandHomeInValue("~/x", "/h"), "/h/x");
  EXPECT_EQ(ExpandHomeInValue("~", "/h"), "/h");
  EXPECT_EQ(ExpandHomeInValue("a~/x:~/y", "/h"), "a~/x:/h/y");
  EXPECT_EQ(ExpandHomeInValue("~user/x", "/h"), "~user/x");
  EXPECT_EQ(ExpandHomeInValue("~/x", ""), "~/x");
}

}  // namespace
}  // namespace cagent::launcher
