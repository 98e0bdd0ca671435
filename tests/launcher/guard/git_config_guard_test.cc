// The git config guard: the allow-list of keys a repository's own config may hold after a
// sandbox, the listing through git (which must execute nothing), the rendering (git reads back
// exactly what was kept), and the rewrite of hostile files on disk (links, FIFOs, directories,
// huge, binary), each with the naive twin where there is one.
#include "launcher/guard/git_config_guard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/guard/git.h"

namespace cagent::launcher {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

GitConfigEntry E(std::string key, std::optional<std::string> value) {
  return {std::move(key), std::move(value)};
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

bool HaveGit() { return std::system("git --version >/dev/null 2>&1") == 0; }

// ---- the listing's shape ----

TEST(GitConfigListing, SplitsKeysValuesAndBareBooleans) {
  const char raw[] = "core.bare\0user.email\na@b\0remote.o\"x.url\na\nb\0";
  const std::string z(raw, sizeof(raw) - 1);
  auto e = ParseGitConfigListing(z);
  ASSERT_TRUE(e.has_value());
  EXPECT_THAT(*e, ElementsAre(E("core.bare", std::nullopt), E("user.email", "a@b"),
                              E("remote.o\"x.url", "a\nb")));
  EXPECT_THAT(*ParseGitConfigListing(""), IsEmpty());
}

TEST(GitConfigListing, RefusesWhatGitDoesNotPrint) {
  for (const std::string& bad :
       {std::string("user.email\na"), std::string("\0", 1), std::string("nodot\0", 6),
        std::string(".x\0", 3), std::string("x.\0", 3), std::string("a\x1b.b\0", 5)}) {
    EXPECT_FALSE(ParseGitConfigListing(bad).has_value()) << bad;
  }
}

// ---- the allow-list ----

TEST(GitConfigAllowList, OrdinaryWritesOfGitItselfStay) {
  for (const GitConfigEntry& e : {
           E("user.email", "x@example.org"),
           E("user.name", "A Person"),
           E("core.repositoryformatversion", "0"),
           E("core.filemode", "true"),
           E("core.bare", "false"),
           E("core.logallrefupdates", "true"),
           E("core.ignorecase", "true"),
           E("core.precomposeunicode", "true"),
           E("core.autocrlf", "false"),
           E("core.autocrlf", "input"),
           E("core.eol", "lf"),
           E("core.safecrlf", "warn"),
           E("core.bare", std::nullopt),
           E("branch.main.remote", "origin"),
           E("branch.feature/x.merge", "refs/heads/feature/x"),
           E("branch.main.rebase", "true"),
           E("remote.origin.url", "https://github.com/o/r.git"),
           E("remote.origin.url", "git@github.com:o/r.git"),
           E("remote.origin.url", "ssh://git@host/r"),
           E("remote.origin.url", "../other.git"),
           E("remote.origin.url", "/srv/git/r.git"),
           E("remote.origin.pushurl", "file:///srv/git/r.git"),
           E("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
           E("pull.rebase", "true"),
           E("pull.rebase", "merges"),
           E("init.defaultbranch", "main"),
       }) {
    EXPECT_TRUE(GitConfigEntryAllowed(e, false)) << e.key << "=" << e.value.value_or("(none)");
  }
  EXPECT_TRUE(GitConfigEntryAllowed(E("extensions.objectformat", "sha256"), true));
}

TEST(GitConfigAllowList, KeysThatRunProgramsOrReachOtherMachinesGo) {
  for (const GitConfigEntry& e : {
           E("core.fsmonitor", "touch /tmp/x"),
           E("core.hookspath", "/tmp/hooks"),
           E("core.sshcommand", "sh -c x"),
           E("core.pager", "sh -c x"),
           E("core.editor", "x"),
           E("core.askpass", "x"),
           E("core.gitproxy", "x"),
           E("core.worktree", "/"),
           E("core.attributesfile", "/tmp/a"),
           E("core.excludesfile", "/tmp/a"),
           E("sequence.editor", "x"),
           E("diff.external", "x"),
           E("diff.x.textconv", "x"),
           E("merge.x.driver", "x"),
           E("filter.x.clean", "x"),
           E("filter.x.smudge", "x"),
           E("filter.x.process", "x"),
           E("credential.helper", "x"),
           E("credential.https://h.helper", "x"),
           E("include.path", "/tmp/c"),
           E("includeif.gitdir:/.path", "/tmp/c"),
           E("alias.st", "!touch /tmp/x"),
           E("alias.st", "status"),
           E("gpg.program", "x"),
           E("gpg.ssh.program", "x"),
           E("uploadpack.packobjectshook", "x"),
           E("receive.procreceiverefs", "x"),
           E("protocol.ext.allow", "always"),
           E("protocol.allow", "always"),
           E("url.ext::sh -c x.insteadof", "https://"),
           E("http.proxy", "http://evil"),
           E("http.https://h.proxy", "http://evil"),
           E("remote.origin.uploadpack", "x"),
           E("remote.origin.receivepack", "x"),
           E("remote.origin.proxy", "x"),
           E("remote.origin.vcs", "x"),
           E("remote.origin.url", "ext::sh -c touch% /tmp/x"),
           E("remote.origin.url", "fd::7"),
           E("remote.origin.url", "hg::https://h/r"),
           E("remote.origin.url", "-oProxyCommand=x"),
           E("remote.origin.url", "ftp://h/r"),
           E("remote.origin.url", "a\nb"),
           E("remote.origin.url", std::nullopt),
           E("branch.main.rebase", "interactive"),
           E("pull.rebase", "interactive"),
           E("user.email", "a\x1b[2Jb"),
           E("user.email", std::string(300, 'a')),
           E("user.email", std::nullopt),
           E("core.filemode", "maybe"),
           E("core.repositoryformatversion", "2"),
           E("branch.a\x1b.remote", "origin"),
           E("extensions.worktreeconfig", "true"),
           E("extensions.partialclone", "origin"),
           E("submodule.x.update", "!sh"),
           E("fsmonitor.x", "x"),
           E("hook.x.command", "x"),
           E("maintenance.auto", "true"),
       }) {
    EXPECT_FALSE(GitConfigEntryAllowed(e, false)) << e.key << "=" << e.value.value_or("(none)");
  }
  // In an existing repository the object format stays what it was (FilterGitConfig keeps it).
  EXPECT_FALSE(GitConfigEntryAllowed(E("extensions.objectformat", "sha256"), false));
}

TEST(GitConfigFilter, KeepsTheCallersOwnEntriesAndDropsTheRestByName) {
  const std::vector<GitConfigEntry> before = {E("core.repositoryformatversion", "1"),
                                              E("core.fsmonitor", "mine"),
                                              E("extensions.objectformat", "sha256")};
  const std::vector<GitConfigEntry> after = {E("core.repositoryformatversion", "1"),
                                             E("core.fsmonitor", "mine"),
                                             E("extensions.objectformat", "sha256"),
                                             E("user.email", "x@y"),
                                             E("core.fsmonitor", "touch /tmp/x"),
                                             E("alias.a", "!x"),
                                             E("alias.a", "!y"),
                                             E("extensions.worktreeconfig", "true")};
  const GitConfigFilter f = FilterGitConfig(after, &before);
  EXPECT_THAT(f.kept,
              ElementsAre(E("core.repositoryformatversion", "1"), E("core.fsmonitor", "mine"),
                          E("extensions.objectformat", "sha256"), E("user.email", "x@y")));
  EXPECT_THAT(f.dropped, ElementsAre("core.fsmonitor", "alias.a", "extensions.worktreeconfig"));
  // A new repository has no caller's entries.
  const GitConfigFilter n = FilterGitConfig(after, nullptr);
  EXPECT_THAT(n.kept, ElementsAre(E("core.repositoryformatversion", "1"),
                                  E("extensions.objectformat", "sha256"), E("user.email", "x@y")));
}

// ---- git itself ----

class GitConfigListTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGit()) GTEST_SKIP() << "git is not installed";
    char tmpl[] = "/tmp/cagent-git-config-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(GitConfigListTest, RenderedConfigReadsBackAsExactlyTheKeptEntries) {
  const std::vector<GitConfigEntry> kept = {
      E("core.repositoryformatversion", "0"),
      E("core.bare", std::nullopt),
      E("user.name", "A \"quoted\" \\ name ; # not a comment"),
      E("user.email", ""),
      E("remote.we\"ird\\name.url", "https://h/r.git"),
      E("remote.we\"ird\\name.fetch", "+refs/heads/*:refs/remotes/x/*"),
      E("branch.Feature.merge", "refs/heads/Feature"),
      E("core.autocrlf", "input"),  // a section again after another one
      E("alias.old", "tab\there\nnewline"),
  };
  const std::string text = RenderGitConfig(kept);
  auto listed = ListGitConfig(text);
  ASSERT_TRUE(listed.ok()) << listed.error().Message() << "\n" << text;
  EXPECT_EQ(*listed, kept) << text;
}

TEST_F(GitConfigListTest, ListingAHostileFileRunsNothingAndFollowsNoInclude) {
  const std::string marker = dir_ + "/marker";
  Spit(dir_ + "/included", "[core]\n\tfsmonitor = touch " + marker + "\n");
  const std::string hostile = "[core]\n\tfsmonitor = \"touch " + marker + "\"\n\tpager = touch " +
                              marker + "\n\thooksPath = " + dir_ + "\n[alias]\n\tconfig = !touch " +
                              marker + "\n[include]\n\tpath = " + dir_ +
                              "/included\n[includeIf \"gitdir:/\"]\n\tpath = " + dir_ +
                              "/included\n[filter \"x\"]\n\tclean = touch " + marker +
                              "\n\tprocess = touch " + marker + "\n";
  auto listed = ListGitConfig(hostile);
  ASSERT_TRUE(listed.ok()) << listed.error().Message();
  EXPECT_FALSE(Exists(marker));
  EXPECT_THAT(*listed, Contains(E("include.path", dir_ + "/included")));
  EXPECT_EQ(std::count_if(listed->begin(), listed->end(),
                          [](const GitConfigEntry& e) { return e.key == "core.fsmonitor"; }),
            1)
      << "the included file was read";
}

TEST_F(GitConfigListTest, MalformedAndBinaryFilesAreErrorsNotPartialListings) {
  for (const std::string& bad : {std::string("[a]\nb=c\n[x"), std::string("\x00\x01\x02[[[", 6),
                                 std::string("[a]\nb=\"c\n"), std::string("= x\n")}) {
    auto listed = ListGitConfig(bad);
    EXPECT_FALSE(listed.ok()) << bad;
  }
  auto big = ListGitConfig("[a]\n" + std::string(100000, '\t') + "b = c\n");
  ASSERT_TRUE(big.ok()) << big.error().Message();
}

TEST(GitConfigEnvironment, HasTheIsolationOfCagentsOtherGit) {
  const std::vector<std::string> mine = GitConfigListingEnvironment();
  for (const std::string& v : GitEnvironment("")) {
    if (v.starts_with("PATH=")) continue;
    EXPECT_THAT(mine, Contains(v));
  }
  EXPECT_THAT(mine, Contains("GIT_DIR=/nonexistent"));
}

// ---- files on disk ----

class GitConfigGuardTest : public GitConfigListTest {
 protected:
  void SetUp() override {
    GitConfigListTest::SetUp();
    if (IsSkipped()) return;
    ws_ = dir_ + "/ws";
    git_ = ws_ + "/.git";
    fs::create_directories(git_ + "/objects");
    fs::create_directories(git_ + "/refs");
    Spit(git_ + "/HEAD", "ref: refs/heads/main\n");
    Spit(git_ + "/config", kOriginal);
  }
  std::vector<GitConfigRewrite> Neutralise(GitConfigGuard& g, std::vector<std::string> dirs = {}) {
    if (dirs.empty()) dirs = {git_};
    notes_.clear();
    return g.Neutralise(dirs, {ws_}, notes_);
  }
  static constexpr const char* kOriginal =
      "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = my-own-daemon\n"
      "# a comment of the caller's\n";
  std::string ws_, git_;
  std::vector<std::string> notes_;
};

TEST_F(GitConfigGuardTest, AnUnchangedConfigIsLeftByteForByte) {
  GitConfigGuard g = GitConfigGuard::Snapshot({git_}, {ws_});
  EXPECT_THAT(Neutralise(g), IsEmpty());
  EXPECT_EQ(Slurp(git_ + "/config"), kOriginal);
}

TEST_F(GitConfigGuardTest, PlantedKeysGoTheCallersAndGitsOwnStay) {
  GitConfigGuard g = GitConfigGuard::Snapshot({git_}, {ws_});
  Spit(git_ + "/config", std::string(kOriginal) +
                             "[user]\n\temail = x@y\n[core]\n\tfsmonitor = touch /tmp/m\n"
                             "[alias]\n\tst = !touch /tmp/m\n");
  const auto r = Neutralise(g);
  ASSERT_EQ(r.size(), 1U);
  EXPECT_EQ(r[0].path, git_ + "/config");
  EXPECT_THAT(r[0].dropped, ElementsAre("core.fsmonitor", "alias.st"));
  EXPECT_EQ(r[0].reason, "");
  auto listed = ListGitConfig(Slurp(git_ + "/config"));
  ASSERT_TRUE(listed.ok());
  EXPECT_THAT(*listed, ElementsAre(E("core.repositoryformatversion", "0"),
                                   E("core.fsmonitor", "my-own-daemon"), E("user.email", "x@y")));
}

TEST_F(GitConfigGuardTest, OnlyAllowedKeysChangedMeansNoRewrite) {
  GitConfigGuard g = GitConfigGuard::Snapshot({git_}, {ws_});
  const std::string edited = std::string(kOriginal) + "[user]\n\temail = x@y\n";
  Spit(git_ + "/config", edited);
  EXPECT_THAT(Neutralise(g), IsEmpty());
  EXPECT_EQ(Slurp(git_ + "/config"), edited);
}

TEST_F(GitConfigGuardTest, FilesGitCannotReadAreReplacedByWhatWasThereBefore) {
  struct Case {
    std::string name;
    std::function<void(const std::string&)> plant;
    std::string reason;
  };
  const std::string outside = dir_ + "/outside-config";
  Spit(outside, "[core]\n\tfsmonitor = touch /tmp/m\n");
  const std::vector<Case> cases = {
      {"binary", [](const std::string& p) { Spit(p, std::string("\0\1\2\3[core", 9)); },
       "is no configuration git can read"},
      {"malformed", [](const std::string& p) { Spit(p, "[core\n\tfsmonitor = x\n"); },
       "is no configuration git can read"},
      {"huge",
       [](const std::string& p) {
         Spit(p, "[core]\n\tfsmonitor = x\n" + std::string(kMaxGitConfigBytes, '#'));
       },
       "is larger than 1 MiB"},
      {"symlink",
       [&](const std::string& p) {
         fs::remove(p);
         fs::create_symlink(outside, p);
       },
       "is a symbolic link"},
      {"fifo",
       [](const std::string& p) {
         fs::remove(p);
         ASSERT_EQ(::mkfifo(p.c_str(), 0644), 0);
       },
       "is a FIFO"},
      {"directory",
       [](const std::string& p) {
         fs::remove(p);
         fs::create_directories(p + "/sub");
       },
       "is a directory"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Spit(git_ + "/config", kOriginal);
    GitConfigGuard g = GitConfigGuard::Snapshot({git_}, {ws_});
    c.plant(git_ + "/config");
    const auto r = Neutralise(g);
    ASSERT_EQ(r.size(), 1U);
    EXPECT_THAT(r[0].reason, HasSubstr(c.reason));
    struct stat st {};
    ASSERT_EQ(::lstat((git_ + "/config").c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    auto listed = ListGitConfig(Slurp(git_ + "/config"));
    ASSERT_TRUE(listed.ok()) << listed.error().Message();
    EXPECT_THAT(*listed, ElementsAre(E("core.repositoryformatversion", "0"),
                                     E("core.fsmonitor", "my-own-daemon")));
    EXPECT_EQ(Slurp(outside), "[core]\n\tfsmonitor = touch /tmp/m\n") << "written through a link";
    for (const auto& e : fs::directory_iterator(git_)) {
      if (e.path().filename().string().starts_with("config.cagent-moved-")) fs::remove_all(e);
    }
  }
}

TEST_F(GitConfigGuardTest, ANewRepositoryKeepsOnlyTheAllowListAndAMalformedOneGetsTheMinimum) {
  GitConfigGuard g = GitConfigGuard::Snapshot({}, {ws_});
  const std::string sub = ws_ + "/sub/.git";
  fs::create_directories(sub);
  Spit(sub + "/config",
       "[core]\n\trepositoryformatversion = 0\n\tsshCommand = touch /tmp/m\n[remote \"o\"]\n\t"
       "url = https://h/r\n\tuploadpack = touch /tmp/m\n[url \"ext::sh -c x\"]\n\tinsteadOf = "
       "https://\n");
  auto r = Neutralise(g, {sub});
  ASSERT_EQ(r.size(), 1U);
  EXPECT_THAT(r[0].dropped,
              ElementsAre("core.sshcommand", "remote.o.uploadpack", "url.ext::sh -c x.insteadof"));
  Spit(sub + "/config", "\xff\xfe[[[");
  r = Neutralise(g, {sub});
  ASSERT_EQ(r.size(), 1U);
  auto listed = ListGitConfig(Slurp(sub + "/config"));
  ASSERT_TRUE(listed.ok());
  EXPECT_THAT(*listed, ElementsAre(E("core.repositoryformatversion", "0")));
}

TEST_F(GitConfigGuardTest, CommondirTargetsWorktreeConfigAndStaleLocksAreCovered) {
  GitConfigGuard g = GitConfigGuard::Snapshot({git_}, {ws_});
  const std::string evil = ws_ + "/evil";
  fs::create_directories(evil);
  Spit(evil + "/config", "[core]\n\tfsmonitor = touch /tmp/m\n");
  Spit(git_ + "/commondir", "../evil\n");
  Spit(git_ + "/config.worktree", "[core]\n\tpager = touch /tmp/m\n");
  Spit(git_ + "/config.lock", "[core]\n");
  const auto r = Neutralise(g);
  std::vector<std::string> paths;
  for (const auto& x : r) paths.push_back(x.path);
  EXPECT_THAT(paths, Contains(evil + "/config"));
  EXPECT_THAT(paths, Contains(git_ + "/config.worktree"));
  EXPECT_THAT(Slurp(evil + "/config"), Not(HasSubstr("fsmonitor")));
  EXPECT_THAT(Slurp(git_ + "/config.worktree"), Not(HasSubstr("pager")));
  EXPECT_FALSE(Exists(git_ + "/config.lock"));
  EXPECT_THAT(notes_, Contains(HasSubstr("config.lock")));
}

TEST_F(GitConfigGuardTest, AGitdirLinkIsFollowedOnlyInsideTheRoots) {
  fs::create_directories(ws_ + "/sub");
  fs::create_directories(ws_ + "/hidden-gitdir");
  Spit(ws_ + "/sub/.git", "gitdir: ../hidden-gitdir\n");
  EXPECT_EQ(GitConfigGuard::GitdirTarget(ws_ + "/sub/.git", {ws_}), ws_ + "/hidden-gitdir");
  Spit(ws_ + "/sub/.git", "gitdir: " + dir_ + "\n");
  EXPECT_EQ(GitConfigGuard::GitdirTarget(ws_ + "/sub/.git", {ws_}), std::nullopt);
  Spit(ws_ + "/sub/.git", "not a link\n");
  EXPECT_EQ(GitConfigGuard::GitdirTarget(ws_ + "/sub/.git", {ws_}), std::nullopt);
}

// Hooks (issue #33): a hook the sandbox wrote into any checked git dir is renamed to a name git
// never runs and reported; the caller's own hooks, samples and an unchanged hooks/ stay. A
// `hooks` that is not a directory (a symlink to hooks elsewhere) is moved aside whole.
TEST_F(GitConfigGuardTest, HooksTheSandboxWroteAreDisabledTheCallersStay) {
  fs::create_directories(git_ + "/hooks");
  Spit(git_ + "/hooks/pre-commit", "#!/bin/sh\n# the caller's\n");
  Spit(git_ + "/hooks/post-commit", "#!/bin/sh\n# the caller's, changed inside\n");
  GitConfigGuard g = GitConfigGuard::Snapshot({git_}, {ws_});
  Spit(git_ + "/hooks/post-index-change", "#!/bin/sh\ntouch /tmp/m\n");
  Spit(git_ + "/hooks/post-index-change.cagent-disabled", "taken\n");
  Spit(git_ + "/hooks/post-commit", "#!/bin/sh\ntouch /tmp/m\n# longer now\n");
  Spit(git_ + "/hooks/update.sample", "#!/bin/sh\n");
  Neutralise(g);
  EXPECT_FALSE(Exists(git_ + "/hooks/post-index-change"));
  EXPECT_EQ(Slurp(git_ + "/hooks/post-index-change.cagent-disabled-2"),
            "#!/bin/sh\ntouch /tmp/m\n");
  EXPECT_FALSE(Exists(git_ + "/hooks/post-commit"));
  EXPECT_TRUE(Exists(git_ + "/hooks/post-commit.cagent-disabled"));
  EXPECT_TRUE(Exists(git_ + "/hooks/pre-commit"));
  EXPECT_TRUE(Exists(git_ + "/hooks/update.sample"));
  EXPECT_THAT(notes_, Contains(HasSubstr("cagent disabled the hook '" + git_ +
                                         "/hooks/post-index-change'")));
  EXPECT_THAT(notes_, Contains(HasSubstr("/hooks/post-commit'")));
  EXPECT_THAT(notes_, Not(Contains(HasSubstr("pre-commit"))));
  // Nothing new the second time.
  GitConfigGuard again = GitConfigGuard::Snapshot({git_}, {ws_});
  Neutralise(again);
  EXPECT_THAT(notes_, IsEmpty());
}

TEST_F(GitConfigGuardTest, ANewRepositorysHooksAndASymlinkedHooksDirGo) {
  GitConfigGuard g = GitConfigGuard::Snapshot({git_}, {ws_});
  const std::string sub = ws_ + "/sub/.git";
  fs::create_directories(sub + "/hooks");
  Spit(sub + "/hooks/post-checkout", "#!/bin/sh\n");
  fs::create_directories(ws_ + "/elsewhere");
  fs::create_symlink("../elsewhere", git_ + "/hooks");
  Neutralise(g, {git_, sub});
  EXPECT_TRUE(Exists(sub + "/hooks/post-checkout.cagent-disabled"));
  EXPECT_FALSE(Exists(sub + "/hooks/post-checkout"));
  EXPECT_FALSE(Exists(git_ + "/hooks"));
  EXPECT_TRUE(fs::is_symlink(git_ + "/hooks.cagent-disabled"));
  EXPECT_THAT(notes_, Contains(HasSubstr("the hooks entry (a symbolic link)")));
}

// The attack on git itself, and its twin: a hook in a repository's hooks/ runs on the next
// `git status` that writes the index; after Neutralise the same status runs nothing.
TEST_F(GitConfigGuardTest, TwinAPlantedPostIndexChangeHookRunsOnStatusUntilDisabled) {
  const std::string repo = dir_ + "/real";
  const std::string marker = dir_ + "/hook-ran";
  const std::string git = "cd '" + repo +
                          "' && GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent GIT_AUTHOR_NAME=t "
                          "GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t ";
  ASSERT_EQ(std::system(("mkdir -p '" + repo + "' && " + git + "git init -q . && echo x > x && " +
                         git + "git add x && " + git + "git commit -qm x")
                            .c_str()),
            0);
  GitConfigGuard g = GitConfigGuard::Snapshot({repo + "/.git"}, {repo});
  auto plant = [&] {
    Spit(repo + "/.git/hooks/post-index-change", "#!/bin/sh\ntouch '" + marker + "'\n");
    ::chmod((repo + "/.git/hooks/post-index-change").c_str(), 0755);
    ASSERT_EQ(std::system(("touch -d 2001-01-01 '" + repo + "/x'").c_str()), 0);
  };
  plant();
  ASSERT_EQ(std::system((git + "git status -s >/dev/null").c_str()), 0);
  ASSERT_TRUE(Exists(marker)) << "the planted hook must run, or the test proves nothing";
  ::unlink(marker.c_str());
  ::unlink((repo + "/.git/hooks/post-index-change").c_str());
  plant();
  std::vector<std::string> notes;
  g.Neutralise({repo + "/.git"}, {repo}, notes);
  ASSERT_EQ(std::system((git + "git status -s >/dev/null").c_str()), 0);
  EXPECT_FALSE(Exists(marker)) << "the hook ran after Neutralise";
}

TEST_F(GitConfigGuardTest, ASymlinkedDotGitIsFollowedOnlyInsideTheRoots) {
  fs::create_directories(ws_ + "/sub");
  fs::create_directories(ws_ + "/.git/payload");
  fs::create_symlink("../.git/payload", ws_ + "/sub/.git");
  EXPECT_EQ(GitConfigGuard::SymlinkTarget(ws_ + "/sub/.git", {ws_}), ws_ + "/.git/payload");
  fs::remove(ws_ + "/sub/.git");
  fs::create_symlink(dir_, ws_ + "/sub/.git");
  EXPECT_EQ(GitConfigGuard::SymlinkTarget(ws_ + "/sub/.git", {ws_}), std::nullopt);
  fs::remove(ws_ + "/sub/.git");
  fs::create_symlink("nowhere", ws_ + "/sub/.git");
  EXPECT_EQ(GitConfigGuard::SymlinkTarget(ws_ + "/sub/.git", {ws_}), std::nullopt);
}

}  // namespace
}  // namespace cagent::launcher
