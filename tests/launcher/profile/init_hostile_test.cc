// `cagent profile init` over a hostile repository (issue #13, class 1): what it reads of the
// repository never follows a symlink out of it, no host path in the plan comes from the
// repository's content, and the profile is never written through a link. Each test shows the
// naive operation the guard replaces reaching outside, then the guarded one refusing.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/profile/init.h"

namespace cagent::launcher {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class ProfileInitHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-init-hostile-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    repo_ = root_ + "/repo";
    home_ = root_ + "/home";
    outside_ = root_ + "/outside";
    fs::create_directories(repo_);
    fs::create_directories(home_);
    fs::create_directories(outside_);
  }
  void TearDown() override { fs::remove_all(root_); }

  InitOptions Options(const std::string& path_env = "") const {
    InitOptions o;
    o.dir = repo_;
    o.name = "project";
    o.in_repository = true;
    o.home = home_;
    o.path_env = path_env;
    o.search.dirs = {repo_ + "/.cagent"};
    return o;
  }
  static void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }
  static std::string Slurp(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string root_, repo_, home_, outside_;
};

TEST_F(ProfileInitHostileTest, BuildFilesLinkedOutOfTheRepositoryAreNotRead) {
  // package.json -> a host file; tests -> /; conf.py -> a host file.
  Write(outside_ + "/host.json", R"({"scripts": {"test": "jest"}})");
  Write(outside_ + "/conf.py", "x = 1\n");
  fs::create_symlink(outside_ + "/host.json", repo_ + "/package.json");
  fs::create_directory_symlink("/", repo_ + "/tests");
  fs::create_symlink("../outside/conf.py", repo_ + "/conf.py");
  // Guard off: following the links reads the host's files.
  ASSERT_THAT(Slurp(repo_ + "/package.json"), HasSubstr("jest"));
  ASSERT_TRUE(fs::is_directory(repo_ + "/tests"));
  // Guard on: the links lead out of the repository, so they count as absent.
  RepoFacts f = InspectRepository(repo_);
  EXPECT_FALSE(f.node);
  EXPECT_EQ(f.node_test, "");
  EXPECT_FALSE(f.python_tests);
  EXPECT_FALSE(f.sphinx);
}

TEST_F(ProfileInitHostileTest, LinksThatStayInsideTheRepositoryAreFollowed) {
  Write(repo_ + "/crates/main/Cargo.toml", "[package]\nname = \"x\"\n");
  fs::create_symlink("crates/main/Cargo.toml", repo_ + "/Cargo.toml");
  RepoFacts f = InspectRepository(repo_);
  EXPECT_TRUE(f.rust);
}

TEST_F(ProfileInitHostileTest, ABinaryOnPathInsideTheRepositoryExposesNothing) {
  // PATH holds the repository's bin/, whose node links to a host tree: the install root the plan
  // would expose read-only is the repository's choice.
  Write(repo_ + "/package.json", R"({"scripts": {"test": "jest"}})");
  const std::string tools = outside_ + "/secret-tools/bin";
  Write(tools + "/node", "#!/bin/sh\n");
  ::chmod((tools + "/node").c_str(), 0755);
  fs::create_directories(repo_ + "/bin");
  fs::create_symlink(tools + "/node", repo_ + "/bin/node");
  RepoFacts f = InspectRepository(repo_);
  ASSERT_TRUE(f.node);
  // Guard off (no repository given: the old search): the host tree is proposed.
  std::vector<Toolchain> naive = FindToolchains(f, home_, repo_ + "/bin");
  ASSERT_EQ(naive.size(), 1u);
  EXPECT_EQ(naive[0].path, outside_ + "/secret-tools");
  // Guard on: the plan for this repository proposes nothing of it.
  EXPECT_THAT(FindToolchains(f, home_, repo_ + "/bin", repo_), IsEmpty());
  auto plan = PlanProfile(Options(repo_ + "/bin"));
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  EXPECT_THAT(plan->exposed, IsEmpty());
  EXPECT_THAT(plan->text, Not(HasSubstr("secret-tools")));
  // A host PATH entry that links into the repository is the repository's too.
  fs::create_directory_symlink(repo_ + "/bin", root_ + "/host-bin");
  EXPECT_THAT(FindToolchains(f, home_, root_ + "/host-bin", repo_), IsEmpty());
}

TEST_F(ProfileInitHostileTest, TheProfileIsNotWrittenThroughASymlinkedCagentDirectory) {
  Write(repo_ + "/Makefile", "test:\n\ttrue\n");
  fs::create_directory_symlink(outside_, repo_ + "/.cagent");
  auto plan = PlanProfile(Options());
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  // Guard off: the profile's path resolves outside the repository (an O_NOFOLLOW open of the last
  // component alone would write there).
  ASSERT_EQ(fs::canonical(fs::path(plan->path).parent_path()), fs::canonical(outside_));
  Status s = WriteProfile(*plan, false);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().Message(), HasSubstr("is a symlink or not a directory"));
  EXPECT_TRUE(fs::is_empty(outside_));
}

TEST_F(ProfileInitHostileTest, ARepositoryNameCannotAddLinesToTheProfile) {
  // The repository directory's name lands in a comment; a newline in it would start a rule.
  const std::string evil = root_ + "/r\nread-write ~";
  fs::create_directories(evil);
  Write(evil + "/Makefile", "test:\n\ttrue\n");
  InitOptions o = Options();
  o.dir = evil;
  o.search.dirs = {evil + "/.cagent"};
  auto plan = PlanProfile(o);
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  std::istringstream lines(plan->text);
  std::string line;
  while (std::getline(lines, line)) EXPECT_FALSE(line.starts_with("read-write")) << plan->text;
  EXPECT_THAT(plan->text, HasSubstr("for r\\nread-write ~."));
}

// Issue 32: a profile written outside the repository goes where the caller's own path to the
// repository says, whatever the repository holds: a .cagent that is a link, a .git file naming
// another repository, a hostile directory name.
TEST_F(ProfileInitHostileTest, TheProfileOutsideTheRepositoryIsPlacedByTheCallersPathAlone) {
  const std::string evil = root_ + "/r\nread-write ~";
  fs::create_directories(evil);
  Write(evil + "/Makefile", "test:\n\ttrue\n");
  Write(evil + "/.git", "gitdir: " + outside_ + "\n");
  fs::create_directory_symlink(outside_, evil + "/.cagent");
  InitOptions o;
  o.dir = evil;
  o.home = home_;
  o.config_dir = root_ + "/config";
  o.search.dirs = {evil + "/.cagent"};
  auto plan = PlanProfile(o);
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  EXPECT_EQ(plan->name, "r-read-write");
  EXPECT_THAT(plan->path, ::testing::StartsWith(root_ + "/config/repos/r-read-write-"));
  EXPECT_EQ(fs::path(plan->path).filename(), "r-read-write.cagent");
  ASSERT_TRUE(WriteProfile(*plan, false).ok());
  EXPECT_TRUE(fs::is_empty(outside_));
  std::istringstream lines(plan->text);
  std::string line;
  while (std::getline(lines, line)) EXPECT_FALSE(line.starts_with("read-write")) << plan->text;
}

}  // namespace
}  // namespace cagent::launcher
