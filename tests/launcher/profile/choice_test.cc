#include "launcher/profile/choice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/sha256.h"

namespace cagent::launcher {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ProfileChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-choice-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    repo_ = root_ + "/repo/.cagent";
    user_ = root_ + "/user";
    fs::create_directories(repo_);
    fs::create_directories(user_);
    search_.dirs = {repo_, user_};
  }
  void TearDown() override { fs::remove_all(root_); }

  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }

  std::string root_, repo_, user_;
  policy::SearchPath search_;
};

TEST_F(ProfileChoiceTest, ARepositoryProfileShadowingABuiltInIsRefusedByName) {
  Write(repo_ + "/backend.cagent", "extends <built-in>/backend.cagent\n");
  auto c = ChooseProfile("backend", search_, false, repo_);
  ASSERT_FALSE(c.ok());
  const std::string msg = c.error().Message();
  EXPECT_THAT(msg, HasSubstr(repo_ + "/backend.cagent"));
  EXPECT_THAT(msg, HasSubstr("the built-in profile 'backend'"));
  EXPECT_THAT(msg, HasSubstr("--trust-repo-profile"));
  EXPECT_THAT(msg, HasSubstr("--profile '<built-in>/backend.cagent'"));
}

TEST_F(ProfileChoiceTest, TheSameProfileIsAcceptedWhenTrustedOrNamedByPath) {
  const std::string text = "extends <built-in>/backend.cagent\n";
  Write(repo_ + "/backend.cagent", text);
  auto trusted = ChooseProfile("backend", search_, true, repo_);
  ASSERT_TRUE(trusted.ok()) << trusted.error().Message();
  EXPECT_TRUE(trusted->from_repository);
  EXPECT_EQ(trusted->file, fs::canonical(repo_ + "/backend.cagent").string());
  EXPECT_EQ(trusted->sha256, Sha256Hex(text));
  EXPECT_EQ(trusted->shadows, std::vector<std::string>{"<built-in>/backend.cagent"});

  auto by_path = ChooseProfile(repo_ + "/backend.cagent", search_, false, repo_);
  ASSERT_TRUE(by_path.ok()) << by_path.error().Message();
  EXPECT_EQ(by_path->sha256, Sha256Hex(text));
  EXPECT_TRUE(by_path->from_repository) << "named by path, still the repository's file";
  auto elsewhere = ChooseProfile(user_ + "/../repo/.cagent/backend.cagent", search_, false, user_);
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_FALSE(elsewhere->from_repository);
}

TEST_F(ProfileChoiceTest, ARepositoryProfileShadowingAUserProfileIsRefused) {
  Write(user_ + "/myrepo.cagent", "extends backend\n");
  Write(repo_ + "/myrepo.cagent", "extends backend\n");
  auto c = ChooseProfile("myrepo", search_, false, repo_);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.error().Message(), HasSubstr(user_ + "/myrepo.cagent"));
}

TEST_F(ProfileChoiceTest, ARepositoryProfileOfItsOwnNameIsFine) {
  // The demo's fix-add: nothing of that name elsewhere, so nothing is replaced.
  Write(repo_ + "/fix-add.cagent", "extends backend\n");
  auto c = ChooseProfile("fix-add", search_, false, repo_);
  ASSERT_TRUE(c.ok()) << c.error().Message();
  EXPECT_TRUE(c->from_repository);
  EXPECT_TRUE(c->shadows.empty());
  EXPECT_EQ(c->path, repo_ + "/fix-add.cagent");
}

TEST_F(ProfileChoiceTest, AUserProfileMayReplaceABuiltIn) {
  Write(user_ + "/backend.cagent", "extends <built-in>/backend.cagent\n");
  auto c = ChooseProfile("backend", search_, false, repo_);
  ASSERT_TRUE(c.ok()) << c.error().Message();
  EXPECT_FALSE(c->from_repository);
  EXPECT_EQ(c->path, user_ + "/backend.cagent");
}

TEST_F(ProfileChoiceTest, BuiltInsAreRecordedWithTheDigestOfTheirText) {
  auto c = ChooseProfile("backend", search_, false, repo_);
  ASSERT_TRUE(c.ok()) << c.error().Message();
  EXPECT_EQ(c->file, "<built-in>/backend.cagent");
  EXPECT_EQ(c->sha256.size(), 64U);
  auto explicit_builtin = ChooseProfile("<built-in>/backend.cagent", search_, false, repo_);
  ASSERT_TRUE(explicit_builtin.ok());
  EXPECT_EQ(explicit_builtin->sha256, c->sha256);
  EXPECT_FALSE(ChooseProfile("<built-in>/nope", search_, false, repo_).ok());
}

TEST_F(ProfileChoiceTest, AProfileThatIsAFifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((root_ + "/evil.cagent").c_str(), 0600), 0);
  auto c = ChooseProfile(root_ + "/evil.cagent", search_, false, repo_);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.error().Message(), HasSubstr("not a regular file"));
}

TEST_F(ProfileChoiceTest, AnUnknownNameIsLeftForTheLoaderToReport) {
  auto c = ChooseProfile("no-such-profile", search_, false, repo_);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->path, "no-such-profile");
  EXPECT_TRUE(c->sha256.empty());
}

}  // namespace
}  // namespace cagent::launcher
