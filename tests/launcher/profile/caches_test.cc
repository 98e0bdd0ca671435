// Profile caches on the host (launcher/profile/caches.h) and the binds a profile's `cache` and
// `carry` add to a sandbox (SpecFromPolicy). The e2e tests (run_setup_test) show them in real runs;
// these check the host side, where a cache or a checkout written by a sandbox is hostile.
#include "launcher/profile/caches.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launcher/profile/spec.h"
#include "policy/language/diagnostics.h"
#include "policy/language/loader.h"

namespace cagent::launcher {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CachesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-caches-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    cache_ = root_ + "/cache/cagent";
    ws_ = root_ + "/ws";
    checkout_ = root_ + "/checkout";
    fs::create_directories(ws_);
    fs::create_directories(checkout_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::shared_ptr<const policy::Policy> Compile(const std::string& text) {
    policy::SearchPath search;
    policy::Compiled c = policy::CompileText("p.cagent", text, search);
    EXPECT_TRUE(c.ok()) << policy::RenderAll(*c.sources, c.diags);
    return c.policy;
  }
  Result<ProfileLaunch> Build(const policy::Policy& p, bool setup = false) {
    ProfileContext ctx{policy::Binding{ws_, root_ + "/home"}, {}};
    ctx.cache_root = cache_;
    ctx.caches_writable = setup;
    ctx.carry_from = checkout_;
    return SpecFromPolicy(p, {"true"}, ctx);
  }

  std::string root_, cache_, ws_, checkout_;
};

TEST(CacheNames, PathsAreEscapedFlatAndBack) {
  EXPECT_EQ(EscapeCachePath(".cache/pip"), ".cache%2Fpip");
  EXPECT_EQ(EscapeCachePath("a%2Fb"), "a%252Fb");
  for (const std::string rel : {".npm", ".cache/pip", "a%2Fb", "x/y/z", "%"}) {
    EXPECT_EQ(UnescapeCachePath(EscapeCachePath(rel)), rel);
    EXPECT_EQ(EscapeCachePath(rel).find('/'), std::string::npos);
  }
  EXPECT_EQ(CacheProfileDirName("backend"), "backend");
  EXPECT_EQ(CacheProfileDirName("my profile/../x"), "my_profile_.._x");
  EXPECT_EQ(CacheProfileDirName(".."), "_..");
}

TEST_F(CachesTest, ACacheDirectoryIsMadeFlatAndPrivate) {
  auto dir = EnsureCacheDir(cache_, "backend", "", ".cache/pip");
  ASSERT_TRUE(dir.ok()) << dir.error().Message();
  EXPECT_EQ(*dir, cache_ + "/caches/backend/.cache%2Fpip");
  struct stat st {};
  ASSERT_EQ(::lstat(dir->c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700U);
  // Again: the same directory.
  auto again = EnsureCacheDir(cache_, "backend", "", ".cache/pip");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *dir);
}

TEST_F(CachesTest, ACacheDirectoryReplacedByALinkIsRefused) {
  fs::create_directories(root_ + "/elsewhere");
  fs::create_directories(cache_ + "/caches/backend");
  // Twin: a real directory is accepted, the same name as a link to another directory is not.
  ASSERT_TRUE(EnsureCacheDir(cache_, "backend", "", ".npm").ok());
  fs::remove(cache_ + "/caches/backend/.npm");
  fs::create_directory_symlink(root_ + "/elsewhere", cache_ + "/caches/backend/.npm");
  auto linked = EnsureCacheDir(cache_, "backend", "", ".npm");
  ASSERT_FALSE(linked.ok());
  EXPECT_THAT(linked.error().Message(), HasSubstr("not a directory"));
  // And the profile level too.
  fs::remove_all(cache_ + "/caches/backend");
  fs::create_directory_symlink(root_ + "/elsewhere", cache_ + "/caches/backend");
  EXPECT_FALSE(EnsureCacheDir(cache_, "backend", "", ".npm").ok());
}

TEST_F(CachesTest, ListCountsAndClearRemovesWithoutFollowingLinks) {
  auto npm = EnsureCacheDir(cache_, "frontend", "", ".npm");
  auto pip = EnsureCacheDir(cache_, "backend", "", ".cache/pip");
  ASSERT_TRUE(npm.ok() && pip.ok());
  fs::create_directories(*npm + "/_cacache/index");
  std::ofstream(*npm + "/_cacache/index/a") << std::string(5000, 'x');
  // A link a sandbox left in its cache, to a file of the caller's: clearing removes the link,
  // never the file.
  std::ofstream(root_ + "/precious") << "keep";
  fs::create_symlink(root_ + "/precious", *npm + "/link");
  auto list = ListCaches(cache_);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2U);
  EXPECT_EQ((*list)[0].profile, "backend");
  EXPECT_EQ((*list)[0].path, "~/.cache/pip");
  EXPECT_EQ((*list)[1].path, "~/.npm");
  EXPECT_EQ((*list)[1].files, 2U);
  EXPECT_GE((*list)[1].bytes, 5000U);

  auto removed = ClearCaches(cache_, "frontend");
  ASSERT_TRUE(removed.ok()) << removed.error().Message();
  EXPECT_EQ(*removed, 1U);
  EXPECT_TRUE(fs::exists(root_ + "/precious"));
  EXPECT_FALSE(fs::exists(cache_ + "/caches/frontend"));
  EXPECT_TRUE(fs::exists(*pip));
  auto all = ClearCaches(cache_, "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, 1U);
  auto empty = ListCaches(cache_);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST_F(CachesTest, CachesAreBoundReadOnlyToTheAgentAndWritableInSetup) {
  auto p = Compile("cache ~/.npm\ncache read-write ~/.ccache\n");
  ASSERT_TRUE(p);
  auto agent = Build(*p);
  ASSERT_TRUE(agent.ok()) << agent.error().Message();
  ASSERT_EQ(agent->spec.dir_binds.size(), 2U);
  for (const DirBind& b : agent->spec.dir_binds) {
    EXPECT_EQ(b.writable, b.target == agent->spec.home + "/.ccache") << b.target;
    // Read-only caches get a private writable layer where overlayfs works (issue 32).
    if (!b.writable) {
      EXPECT_TRUE(b.scratch || !agent->notes.empty()) << b.target;
    }
    // Keyed by the workspace's repository (here the workspace directory itself).
    EXPECT_TRUE(b.source.starts_with(cache_ + "/caches/p@ws-")) << b.source;
  }
  auto setup = Build(*p, /*setup=*/true);
  ASSERT_TRUE(setup.ok());
  for (const DirBind& b : setup->spec.dir_binds) EXPECT_TRUE(b.writable) << b.target;
  EXPECT_TRUE(ValidateLaunchSpec(setup->spec).ok());
}

TEST_F(CachesTest, EachRepositoryHasItsOwnCachesAndClearTakesAllOfAProfiles) {
  auto a = EnsureCacheDir(cache_, "node", "app-111111111111", ".npm");
  auto b = EnsureCacheDir(cache_, "node", "lib-222222222222", ".npm");
  auto other = EnsureCacheDir(cache_, "nodex", "app-111111111111", ".npm");
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  EXPECT_EQ(*a, cache_ + "/caches/node@app-111111111111/.npm");
  EXPECT_NE(*a, *b);
  EXPECT_EQ(CacheDirName("node", ""), "node");
  EXPECT_EQ(CacheDirName("n@de", "k/../x"), "n_de@k_.._x");
  auto list = ListCaches(cache_);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3U);
  EXPECT_EQ((*list)[0].profile, "node");
  EXPECT_EQ((*list)[0].repository, "app-111111111111");
  EXPECT_EQ((*list)[1].repository, "lib-222222222222");
  auto removed = ClearCaches(cache_, "node");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 2U);
  EXPECT_TRUE(fs::exists(*other)) << "nodex is another profile";

  // A sandbox's cache is keyed by the context's scope when given (a run: the caller's
  // repository, not the run's copy of it).
  auto p = Compile("cache ~/.npm\n");
  ASSERT_TRUE(p);
  ProfileContext ctx{policy::Binding{ws_, root_ + "/home"}, {}};
  ctx.cache_root = cache_;
  ctx.cache_scope = "callers-repo-333333333333";
  auto built = SpecFromPolicy(*p, {"true"}, ctx);
  ASSERT_TRUE(built.ok()) << built.error().Message();
  ASSERT_EQ(built->spec.dir_binds.size(), 1U);
  EXPECT_EQ(built->spec.dir_binds[0].source, cache_ + "/caches/p@callers-repo-333333333333/.npm");
}

TEST_F(CachesTest, CarryBindsAnIgnoredCheckoutDirectoryReadOnly) {
  fs::create_directories(checkout_ + "/node_modules/dep");
  auto p = Compile("carry node_modules\n");
  ASSERT_TRUE(p);
  auto built = Build(*p);
  ASSERT_TRUE(built.ok()) << built.error().Message();
  ASSERT_EQ(built->spec.dir_binds.size(), 1U);
  EXPECT_EQ(built->spec.dir_binds[0].source, checkout_ + "/node_modules");
  EXPECT_EQ(built->spec.dir_binds[0].target, ws_ + "/node_modules");
  EXPECT_FALSE(built->spec.dir_binds[0].writable);
  // cagent made the mount point, empty.
  EXPECT_TRUE(fs::is_directory(ws_ + "/node_modules"));
  EXPECT_TRUE(fs::is_empty(ws_ + "/node_modules"));
  // A second launch of the same run finds it and carries again.
  EXPECT_TRUE(Build(*p).ok());
}

TEST_F(CachesTest, TheWorkspaceDenyRulesReachIntoACarriedDirectory) {
  // node_modules/pkg/.env is workspace content to the agent; the host's workspace has only the
  // empty mount point, so the files are found beneath the checkout's directory.
  fs::create_directories(checkout_ + "/node_modules/pkg");
  fs::create_directories(checkout_ + "/node_modules/other");
  std::ofstream(checkout_ + "/node_modules/pkg/.env") << "secret";
  std::ofstream(checkout_ + "/node_modules/pkg/index.js") << "code";
  std::ofstream(checkout_ + "/node_modules/other/key.txt") << "secret";
  // A link under a denied name leads to a file of the carried tree: that file is hidden.
  fs::create_symlink("../other/key.txt", checkout_ + "/node_modules/pkg/secret.pem");
  auto p = Compile("filesystem {\n  deny **/.env **/*.pem\n}\ncarry node_modules\n");
  ASSERT_TRUE(p);
  auto built = Build(*p);
  ASSERT_TRUE(built.ok()) << built.error().Message();
  const auto& hidden = built->spec.hidden_paths;
  EXPECT_THAT(hidden, ::testing::Contains(ws_ + "/node_modules/pkg/.env"));
  EXPECT_THAT(hidden, ::testing::Contains(ws_ + "/node_modules/other/key.txt"));
  EXPECT_THAT(hidden, ::testing::Not(::testing::Contains(ws_ + "/node_modules/pkg/index.js")));
  EXPECT_TRUE(ValidateLaunchSpec(built->spec).ok());

  // Twin: without the carry, the same checkout adds no hide in the workspace (the walk of the
  // workspace alone never saw these files).
  auto plain = Compile("filesystem {\n  deny **/.env **/*.pem\n}\n");
  ASSERT_TRUE(plain);
  auto without = Build(*plain);
  ASSERT_TRUE(without.ok()) << without.error().Message();
  for (const std::string& h : without->spec.hidden_paths) {
    EXPECT_FALSE(h.starts_with(ws_ + "/node_modules")) << h;
  }
}

TEST_F(CachesTest, CarryRefusesWhatIsAbsentTrackedOrReachedThroughALink) {
  auto p = Compile("carry node_modules\n");
  ASSERT_TRUE(p);
  auto absent = Build(*p);
  ASSERT_FALSE(absent.ok());
  EXPECT_THAT(absent.error().Message(), HasSubstr("there is no node_modules in"));

  // A link in the caller's checkout (to a directory of secrets): refused. Twin: the same name as
  // a real directory is carried (previous test).
  fs::create_directories(root_ + "/secrets");
  fs::create_directory_symlink(root_ + "/secrets", checkout_ + "/node_modules");
  auto linked = Build(*p);
  ASSERT_FALSE(linked.ok());
  EXPECT_THAT(linked.error().Message(), HasSubstr("never carries what a link points at"));
  fs::remove(checkout_ + "/node_modules");

  // The repository tracks it: the workspace already has content there.
  fs::create_directories(checkout_ + "/node_modules");
  fs::create_directories(ws_ + "/node_modules");
  std::ofstream(ws_ + "/node_modules/tracked.js") << "x";
  auto tracked = Build(*p);
  ASSERT_FALSE(tracked.ok());
  EXPECT_THAT(tracked.error().Message(), HasSubstr("carry only paths the repository ignores"));

  // A link in the workspace on the way to the mount point (committed by the repository).
  fs::remove_all(ws_ + "/node_modules");
  fs::create_directory_symlink(root_ + "/secrets", ws_ + "/node_modules");
  auto ws_link = Build(*p);
  ASSERT_FALSE(ws_link.ok());
  EXPECT_THAT(ws_link.error().Message(), HasSubstr("a link or a file on its way"));
  EXPECT_TRUE(fs::is_empty(root_ + "/secrets"));
}

}  // namespace
}  // namespace cagent::launcher
