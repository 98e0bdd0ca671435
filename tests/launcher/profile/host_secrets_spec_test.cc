// The host secret set in the LaunchSpec (launcher/profile/spec.h: SpecFromPolicy's and
// HideHostSecrets'): which paths are hidden under the home and at the workspace's top level, and
// that a workspace link in the set never brings a host path into the view.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "launcher/profile/spec.h"
#include "policy/language/diagnostics.h"
#include "policy/language/loader.h"

namespace cagent::launcher {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

class HostSecretsSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-secrets-spec-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = fs::canonical(tmpl).string();
    ws_ = root_ + "/ws";
    home_ = root_ + "/home";
    fs::create_directories(ws_);
    fs::create_directories(home_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static void Write(const std::string& path, const std::string& text = "x") {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }
  std::shared_ptr<const policy::Policy> Compile(const std::string& text) {
    policy::SearchPath search;
    policy::Compiled c = policy::CompileText("t.cagent", text, search);
    EXPECT_TRUE(c.ok()) << policy::RenderAll(*c.sources, c.diags);
    return c.policy;
  }
  ProfileLaunch Build(const policy::Policy& p) {
    ProfileContext ctx;
    ctx.binding = policy::Binding{ws_, home_};
    auto r = SpecFromPolicy(p, {"true"}, ctx);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().Message());
    return r.ok() ? std::move(*r) : ProfileLaunch{};
  }

  std::string root_, ws_, home_;
};

TEST_F(HostSecretsSpecTest, HomeEntriesAreHiddenWhereTheProfileShowsTheHome) {
  Write(home_ + "/.ssh/id_ed25519");
  Write(home_ + "/.aws/credentials");
  Write(home_ + "/.cargo/credentials.toml");
  Write(home_ + "/.cargo/config.toml");
  Write(home_ + "/.config/gh/hosts.yml");
  Write(home_ + "/notes.txt");
  auto p = Compile("filesystem {\n  read-only ~\n}\n");
  ASSERT_NE(p, nullptr);
  const ProfileLaunch l = Build(*p);
  const auto& hidden = l.spec.hidden_paths;
  EXPECT_THAT(hidden, Contains(home_ + "/.ssh"));
  EXPECT_THAT(hidden, Contains(home_ + "/.aws"));
  EXPECT_THAT(hidden, Contains(home_ + "/.cargo/credentials.toml"));
  EXPECT_THAT(hidden, Contains(home_ + "/.config/gh"));
  EXPECT_THAT(hidden, Not(Contains(home_ + "/.cargo/config.toml")));
  EXPECT_THAT(hidden, Not(Contains(home_ + "/notes.txt")));
  // Absent ones need no mount.
  EXPECT_THAT(hidden, Not(Contains(home_ + "/.gnupg")));

  // Twin: a profile that does not show the home hides nothing of it (nothing to cover).
  auto none = Compile("filesystem {\n}\n");
  ASSERT_NE(none, nullptr);
  EXPECT_THAT(Build(*none).spec.hidden_paths, Not(Contains(home_ + "/.ssh")));
}

TEST_F(HostSecretsSpecTest, TheWorkspacesTopLevelIsCoveredAndNestedCopiesAreNot) {
  Write(ws_ + "/.npmrc", "registry=https://example.test/\n");
  Write(ws_ + "/.ssh/id_rsa");
  Write(ws_ + "/test/fixtures/.npmrc");
  auto p = Compile("filesystem {\n}\n");
  ASSERT_NE(p, nullptr);
  const ProfileLaunch l = Build(*p);
  EXPECT_THAT(l.spec.hidden_paths, Contains(ws_ + "/.npmrc"));
  EXPECT_THAT(l.spec.hidden_paths, Contains(ws_ + "/.ssh"));
  EXPECT_THAT(l.spec.hidden_paths, Not(Contains(ws_ + "/test/fixtures/.npmrc")));
}

TEST_F(HostSecretsSpecTest, ABindInsideTheSetIsDroppedAndADenyHideBelowItToo) {
  Write(home_ + "/.ssh/known_hosts");
  Write(home_ + "/.ssh/id_ed25519");
  auto p = Compile(
      "filesystem {\n  read-only ~\n  read-only ~/.ssh/known_hosts\n  deny ~/.ssh/id_*\n}\n");
  ASSERT_NE(p, nullptr);
  const ProfileLaunch l = Build(*p);
  EXPECT_THAT(l.spec.hidden_paths, Contains(home_ + "/.ssh"));
  EXPECT_THAT(l.spec.read_only_paths, Not(Contains(home_ + "/.ssh/known_hosts")));
  // A hide below the hidden directory would have no mount point.
  EXPECT_THAT(l.spec.hidden_paths, Not(Contains(home_ + "/.ssh/id_ed25519")));
}

TEST_F(HostSecretsSpecTest, AWorkspaceLinkInTheSetNeverAddsAHostPath) {
  // .aws -> data: workspace content, hidden where it is. .netrc -> a host file the view shows
  // read-only: left as it is (cagent hides only workspace content on a link's behalf). .pypirc ->
  // the caller's own file, outside the view: nothing. None of them is bound.
  Write(ws_ + "/data/credentials", "aws-in-workspace");
  Write(root_ + "/host/netrc", "machine x password y");
  Write(home_ + "/.pypirc", "token");
  fs::create_symlink("data", ws_ + "/.aws");
  fs::create_symlink(root_ + "/host/netrc", ws_ + "/.netrc");
  fs::create_symlink(home_ + "/.pypirc", ws_ + "/.pypirc");
  auto p = Compile("filesystem {\n  read-only " + root_ + "/host\n}\n");
  ASSERT_NE(p, nullptr);
  const ProfileLaunch l = Build(*p);
  EXPECT_THAT(l.spec.hidden_paths, Contains(ws_ + "/data"));
  EXPECT_THAT(l.spec.hidden_paths, Not(Contains(root_ + "/host/netrc")));
  for (const auto* list : {&l.spec.read_only_paths, &l.spec.read_write_paths}) {
    EXPECT_THAT(*list, Not(Contains(home_ + "/.pypirc")));
    EXPECT_THAT(*list, Not(Contains(home_)));
  }
  std::string notes;
  for (const auto& n : l.notes) notes += n + "\n";
  EXPECT_THAT(notes, HasSubstr("hidden data (target of .aws, the host secret set)"));
  EXPECT_THAT(notes, HasSubstr(".pypirc leads to " + home_ + "/.pypirc"));
}

TEST_F(HostSecretsSpecTest, TheDefaultViewAndCommandLineBindsGetTheSetToo) {
  Write(home_ + "/.ssh/known_hosts");
  Write(home_ + "/.gnupg/pubring.kbx");
  Write(ws_ + "/.git-credentials");
  LaunchSpec spec = DefaultLaunchSpec(ws_, {"true"});
  spec.read_only_paths.push_back(home_);                        // exec --ro ~
  spec.read_only_paths.push_back(home_ + "/.ssh/known_hosts");  // exec --ro ~/.ssh/known_hosts
  std::vector<std::string> notes;
  ASSERT_TRUE(HideHostSecrets(spec, home_, notes));
  EXPECT_THAT(spec.hidden_paths, Contains(home_ + "/.ssh"));
  EXPECT_THAT(spec.hidden_paths, Contains(home_ + "/.gnupg"));
  EXPECT_THAT(spec.hidden_paths, Contains(ws_ + "/.git-credentials"));
  EXPECT_THAT(spec.read_only_paths, Not(Contains(home_ + "/.ssh/known_hosts")));
  EXPECT_THAT(spec.read_only_paths, Contains(home_));
  // Idempotent: a second call adds nothing.
  const auto before = spec.hidden_paths;
  ASSERT_TRUE(HideHostSecrets(spec, home_, notes));
  EXPECT_EQ(spec.hidden_paths, before);
}

}  // namespace
}  // namespace cagent::launcher
