// SpecFromPolicy: a compiled profile becomes a LaunchSpec. The e2e tests (profile_samples_test)
// show the resulting sandbox enforcing it; these check the translation itself.
#include "launcher/profile/spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "policy/language/diagnostics.h"
#include "policy/language/loader.h"

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
    auto r = SpecFromPolicy(p, {"true"},
                            ProfileContext{policy::Binding{ws_, home_}, std::move(environ)});
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

TEST_F(ProfileSpecTest, ACredentialsSectionBuildsAndIsLeftToTheSession) {
  // Issue 36: the spec of a profile with credentials builds like any other; the placeholders,
  // the CA bundle and the proxy's swap are the session's (session::Prepare, which fails closed
  // without filtered egress). Nothing of the credential is in the spec yet.
  auto p = Compile(
      "network loopback\nhosts {\n  allow github.com\n}\n"
      "credentials {\n  gh env GITHUB_TOKEN for github.com\n}\n");
  ASSERT_NE(p, nullptr);
  auto r = SpecFromPolicy(*p, {"true"},
                          ProfileContext{policy::Binding{ws_, home_}, {"GITHUB_TOKEN=real"}});
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_TRUE(r->spec.env_override.empty());
  EXPECT_TRUE(r->spec.home_files.empty());
  for (const EnvVar& v : r->spec.env_set) EXPECT_NE(v.value, "real") << v.name;
}

TEST_F(ProfileSpecTest, DenyGlobsHideExistingMatchesAndWriteDenialsBindReadOnly) {
  Touch(".env", "SECRET=1");
  Touch("config/prod/.env.local");
  Touch("src/main.c");
  Touch("certs/a.pem");
  Touch(".git/hooks/pre-commit");
  Touch(".git/config");
  Touch(".git/info/attributes");
  Touch(".git/index");
  auto p = Compile("extends base\n");
  ProfileLaunch l = Build(*p);
  auto& hidden = l.spec.hidden_paths;
  EXPECT_THAT(hidden, Contains(ws_ + "/.env"));
  EXPECT_THAT(hidden, Contains(ws_ + "/config/prod/.env.local"));
  EXPECT_THAT(hidden, Contains(ws_ + "/certs/a.pem"));
  EXPECT_THAT(hidden, Not(Contains(ws_ + "/src/main.c")));
  auto& ro = l.spec.read_only_paths;
  EXPECT_THAT(ro, Contains(ws_ + "/.git/info/attributes"));
  EXPECT_THAT(ro, Contains(ws_ + "/.git/hooks"));  // "dir/**" covers the directory itself
  // git rewrites .git/config itself; the git config guard checks it after the sandbox instead.
  EXPECT_THAT(ro, Not(Contains(ws_ + "/.git/config")));
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
  auto r = SpecFromPolicy(*wild, {"true"}, ProfileContext{policy::Binding{ws_, home_}, {}});
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

// ---- class 1 of issue #13: no host path derived from workspace content enters the view ----

// Every path in the spec's mount lists that lies at or below `dir`.
std::vector<std::string> MountsAtOrBelow(const LaunchSpec& spec, const std::string& dir) {
  std::vector<std::string> out;
  for (const auto* list : {&spec.read_only_paths, &spec.read_write_paths, &spec.hidden_paths}) {
    for (const auto& p : *list) {
      if (p == dir || p.starts_with(dir + "/")) out.push_back(p);
    }
  }
  return out;
}

std::string RealPath(const std::string& p) {
  char* r = ::realpath(p.c_str(), nullptr);
  std::string out = r != nullptr ? r : "";
  std::free(r);
  return out;
}

bool AnyNoteHas(const std::vector<std::string>& notes, const std::string& text) {
  return std::any_of(notes.begin(), notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

class HostileWorkspaceTest : public ProfileSpecTest {
 protected:
  void SetUp() override {
    ProfileSpecTest::SetUp();
    secret_ = root_ + "/host-secret";
    fs::create_directories(secret_);
    std::ofstream(secret_ + "/secret.txt") << "TOPSECRET";
  }
  std::string secret_;
};

TEST_F(HostileWorkspaceTest, DenyWriteOnALinkToAHostDirectoryMountsNothingOfIt) {
  // The demo profile's `deny write test_*.py` and a committed test_helpers.py -> (a host dir).
  fs::create_directory_symlink(secret_, ws_ + "/test_helpers.py");
  auto p = Compile("filesystem {\n  read-only /usr\n  deny write test_*.py\n}\n");
  // Guard off: the naive resolution (host realpath of the link, what was bound read-only before)
  // is the host directory holding the secret.
  ASSERT_EQ(RealPath(ws_ + "/test_helpers.py"), RealPath(secret_));
  // Guard on: nothing at or below it is in the view, and the note says why.
  ProfileLaunch l = Build(*p);
  EXPECT_THAT(MountsAtOrBelow(l.spec, secret_), ::testing::IsEmpty());
  // (SECRET is below the host's /tmp, which the sandbox replaces by its own.)
  EXPECT_TRUE(AnyNoteHas(l.notes, "test_helpers.py leads to " + secret_ + " (deny write rule)"))
      << ::testing::PrintToString(l.notes);
  // The same for a host tree the view does not have at all (/var, like the caller's home).
  fs::create_directory_symlink("/var", ws_ + "/test_var.py");
  ProfileLaunch l2 = Build(*p);
  EXPECT_THAT(MountsAtOrBelow(l2.spec, "/var"), ::testing::IsEmpty());
  EXPECT_TRUE(AnyNoteHas(l2.notes,
                         "test_var.py leads to /var (deny write rule): outside the "
                         "sandbox's view, not mounted"))
      << ::testing::PrintToString(l2.notes);
}

TEST_F(HostileWorkspaceTest, DenyOnALinkToAHostFileHidesOrMountsNothingOutside) {
  // `.git/info/attributes -> host dir` under base's deny write, `.env -> ~/..` under deny.
  fs::create_directories(ws_ + "/.git/info");
  fs::create_directory_symlink(secret_, ws_ + "/.git/info/attributes");
  fs::create_symlink(secret_ + "/secret.txt", ws_ + "/.env");
  auto p = Compile("extends base\n");
  ASSERT_EQ(RealPath(ws_ + "/.git/info/attributes"), RealPath(secret_));
  ProfileLaunch l = Build(*p);
  EXPECT_THAT(MountsAtOrBelow(l.spec, secret_), ::testing::IsEmpty());
  EXPECT_TRUE(AnyNoteHas(l.notes, ".git/info/attributes leads to " + secret_));
  EXPECT_TRUE(AnyNoteHas(l.notes, ".env leads to " + secret_ + "/secret.txt (deny rule)"));
}

TEST_F(HostileWorkspaceTest, ALinkChainInsideTheWorkspaceIsCoveredAtItsEnd) {
  // test_a.py -> hop (a link) -> sub/../real/a.py: resolved component by component beneath the
  // workspace, the end is workspace content and is re-bound read-only onto itself.
  Touch("real/a.py");
  fs::create_directories(ws_ + "/sub");
  fs::create_symlink("sub/../real/a.py", ws_ + "/hop");
  fs::create_symlink("hop", ws_ + "/test_a.py");
  // An absolute link back into the workspace is the same file inside (same-path bind).
  Touch("real/b.py");
  fs::create_symlink(ws_ + "/real/b.py", ws_ + "/test_b.py");
  auto p = Compile("filesystem {\n  deny write test_*.py\n  deny **/.env\n}\n");
  Touch("config/secrets.txt");
  fs::create_symlink("../config/secrets.txt", ws_ + "/sub/.env");
  ProfileLaunch l = Build(*p);
  EXPECT_THAT(l.spec.read_only_paths, Contains(ws_ + "/real/a.py"));
  EXPECT_THAT(l.spec.read_only_paths, Contains(ws_ + "/real/b.py"));
  EXPECT_THAT(l.spec.hidden_paths, Contains(ws_ + "/config/secrets.txt"));
}

TEST_F(HostileWorkspaceTest, TargetsAreJudgedInTheSandboxsViewNotOnTheHost) {
  // test_c.py -> ROOT/hop/a.py, where ROOT/hop -> ws/real on the host. Inside the sandbox ROOT is
  // part of the private /tmp (only the workspace is bound there): ROOT/hop does not exist, so the
  // link leads nowhere, although the host's realpath() lands in the workspace.
  Touch("real/a.py");
  fs::create_directory_symlink(ws_ + "/real", root_ + "/hop");
  fs::create_symlink(root_ + "/hop/a.py", ws_ + "/test_c.py");
  // test_d.py -> /usr/bin: already read-only, nothing to add. .env -> /etc/passwd: the profile
  // shows /etc read-only at its own path; a workspace link does not hide host files.
  fs::create_directory_symlink("/usr/bin", ws_ + "/test_d.py");
  fs::create_symlink("/etc/passwd", ws_ + "/.env");
  // test_e.py -> /tmp/x, test_f.py -> /proc/self/environ: the sandbox's own trees.
  fs::create_symlink("/tmp/x", ws_ + "/test_e.py");
  fs::create_symlink("/proc/self/environ", ws_ + "/test_f.py");
  // test_g.py: a loop.
  fs::create_symlink("test_g.py", ws_ + "/test_g.py");
  auto p =
      Compile("filesystem {\n  read-only /usr /etc\n  deny write test_*.py\n  deny **/.env\n}\n");
  ASSERT_EQ(RealPath(ws_ + "/test_c.py"), RealPath(ws_ + "/real/a.py"));
  ProfileLaunch l = Build(*p);
  EXPECT_THAT(l.spec.read_only_paths, Not(Contains(ws_ + "/real/a.py")));
  EXPECT_THAT(l.spec.read_only_paths, Not(Contains(root_ + "/hop/a.py")));
  EXPECT_TRUE(AnyNoteHas(l.notes, "test_c.py leads to " + root_ +
                                      "/hop/a.py (deny write rule): the "
                                      "sandbox's own root, /tmp"))
      << ::testing::PrintToString(l.notes);
  EXPECT_TRUE(AnyNoteHas(l.notes,
                         "test_d.py leads to /usr/bin (deny write rule): already "
                         "read-only"));
  EXPECT_THAT(l.spec.hidden_paths, Not(Contains("/etc/passwd")));
  EXPECT_TRUE(AnyNoteHas(l.notes, ".env leads to /etc/passwd (deny rule): not hidden"));
  EXPECT_TRUE(AnyNoteHas(l.notes, "test_e.py leads to /tmp"));
  EXPECT_TRUE(AnyNoteHas(l.notes, "test_f.py leads to /proc"));
  EXPECT_TRUE(AnyNoteHas(l.notes,
                         "test_g.py leads to test_g.py (deny write rule): it does not "
                         "exist"));
  for (const auto* list : {&l.spec.read_only_paths, &l.spec.hidden_paths}) {
    EXPECT_THAT(*list, Not(Contains("/usr/bin")));
    EXPECT_THAT(*list, Not(Contains("/tmp/x")));
  }
}

TEST_F(HostileWorkspaceTest, AWriteDenialOnALinkIntoAReadWriteHostTreeReBindsItReadOnly) {
  // The profile shows ROOT/rw read-write; the link's target is already in the view, so making it
  // read-only adds nothing to what the sandbox sees.
  fs::create_directories(root_ + "/rw/hooks");
  fs::create_directory_symlink(root_ + "/rw/hooks", ws_ + "/test_hooks.py");
  auto p = Compile("filesystem {\n  read-write " + root_ + "/rw\n  deny write test_*.py\n}\n");
  ProfileLaunch l = Build(*p);
  EXPECT_THAT(l.spec.read_only_paths, Contains(root_ + "/rw/hooks"));
}

TEST_F(HostileWorkspaceTest, AReadOnlyWorkspaceStillHidesAWorkspaceTarget) {
  Touch("config/secrets.txt", "SECRET");
  fs::create_symlink("config/secrets.txt", ws_ + "/.env");
  auto p = Compile("workspace read-only\nfilesystem {\n  deny **/.env\n}\n");
  ProfileLaunch l = Build(*p);
  EXPECT_THAT(l.spec.hidden_paths, Contains(ws_ + "/config/secrets.txt"));
}

TEST_F(HostileWorkspaceTest, MountEntriesThroughAWorkspaceLinkAreSkipped) {
  // `read-only vendor/x` with vendor -> a host dir: mountns realpath()s the parent, so binding the
  // entry would bind the host's SECRET/x. The entry is skipped instead.
  fs::create_directories(secret_ + "/x");
  fs::create_directories(secret_ + "/y");
  fs::create_directory_symlink(secret_, ws_ + "/vendor");
  fs::create_directory_symlink(secret_ + "/x", ws_ + "/lib");
  fs::create_directories(ws_ + "/real/secret");
  fs::create_directory_symlink("real", ws_ + "/inner");
  auto p = Compile(
      "filesystem {\n  read-only vendor/x lib\n  read-write vendor/y\n  hide inner/secret\n"
      "  hide vendor/secret.txt\n}\n");
  // Guard off: the naive destination of `vendor/x` is the host directory.
  ASSERT_EQ(RealPath(ws_ + "/vendor") + "/x", RealPath(secret_) + "/x");
  ProfileLaunch l = Build(*p);
  EXPECT_THAT(MountsAtOrBelow(l.spec, secret_), ::testing::IsEmpty());
  EXPECT_THAT(MountsAtOrBelow(l.spec, ws_ + "/vendor"), ::testing::IsEmpty());
  EXPECT_THAT(l.spec.read_only_paths, Not(Contains(ws_ + "/lib")));
  EXPECT_TRUE(AnyNoteHas(l.notes, "skipped vendor/x: a symlink in the workspace is on its way"));
  EXPECT_TRUE(AnyNoteHas(l.notes, "skipped lib: a symlink in the workspace"));
  // A hide entry through a link inside the workspace hides the real target.
  EXPECT_THAT(l.spec.hidden_paths, Contains(ws_ + "/real/secret"));
  EXPECT_TRUE(AnyNoteHas(l.notes, "vendor/secret.txt leads to " + secret_ + "/secret.txt"));
}

TEST_F(HostileWorkspaceTest, HomePathsResolvedThroughTheWorkspaceAreSkipped) {
  // The home directory inside the workspace (exec run from ~), its .config a link to a host dir:
  // `read-only ~/.config/x` and `deny write ~/.config/**` are workspace content there.
  fs::create_directories(secret_ + "/x");
  fs::create_directories(ws_ + "/h");
  fs::create_directory_symlink(secret_, ws_ + "/h/.config");
  auto p = Compile("filesystem {\n  read-only ~/.config/x\n  deny write ~/.config/**\n}\n");
  auto r = SpecFromPolicy(*p, {"true"}, ProfileContext{policy::Binding{ws_, ws_ + "/h"}, {}});
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_THAT(MountsAtOrBelow(r->spec, secret_), ::testing::IsEmpty());
  EXPECT_THAT(MountsAtOrBelow(r->spec, ws_ + "/h"), ::testing::IsEmpty());
  // A home that is itself a link into the workspace: ~/.config/x resolves through the workspace.
  fs::create_directory_symlink(ws_ + "/h", root_ + "/home-link");
  auto r2 =
      SpecFromPolicy(*p, {"true"}, ProfileContext{policy::Binding{ws_, root_ + "/home-link"}, {}});
  ASSERT_TRUE(r2.ok()) << r2.error().Message();
  EXPECT_THAT(MountsAtOrBelow(r2->spec, secret_), ::testing::IsEmpty());
  EXPECT_TRUE(AnyNoteHas(r2->notes, "skipped ~/.config/x: its path leads through the workspace"))
      << ::testing::PrintToString(r2->notes);
}

TEST_F(HostileWorkspaceTest, NotesShowWorkspaceNamesOnOneSafeLine) {
  fs::create_directory_symlink(secret_, ws_ + "/test_\x1b[2Jx\n.py");
  auto p = Compile("filesystem {\n  deny write test_*.py\n}\n");
  ProfileLaunch l = Build(*p);
  ASSERT_FALSE(l.notes.empty());
  for (const auto& n : l.notes) {
    EXPECT_EQ(n.find('\x1b'), std::string::npos) << n;
    EXPECT_EQ(n.find('\n'), std::string::npos) << n;
  }
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
  ProfileLaunch l = Build(
      *p, {"LANG=C", "LC_ALL=C", "MY_TOKEN=secret", "MY_VAR=1", "OTHER=2", "PATH=/caller/bin"});
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
