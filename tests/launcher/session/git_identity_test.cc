// Reading the caller's git identity (launcher/session/git_identity.h) from test-made configuration
// files: which files count and in which order, includes, values that are refused, and that a
// repository's configuration never does.
#include "launcher/session/git_identity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

namespace cagent::launcher::session {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class GitIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/git", X_OK) != 0) GTEST_SKIP() << "git is not installed";
    char tmpl[] = "/tmp/cagent-gitid-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    home_ = dir_ + "/home";
    fs::create_directories(home_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  static void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }
  // The environment of a caller with this test's home and no system file.
  std::vector<std::string> Env(std::vector<std::string> extra = {}) const {
    std::vector<std::string> env = {"HOME=" + home_, "GIT_CONFIG_NOSYSTEM=1"};
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  std::string dir_;
  std::string home_;
};

TEST_F(GitIdentityTest, ReadsTheGlobalFileAndMakesTheFourVariables) {
  Write(home_ + "/.gitconfig", "[user]\n\tname = Ada Lovelace\n\temail = ada@example.test\n");
  const GitIdentity id = ReadGitIdentity(Env(), home_);
  EXPECT_EQ(id.name, "Ada Lovelace");
  EXPECT_EQ(id.email, "ada@example.test");
  EXPECT_TRUE(id.notes.empty());
  const std::vector<EnvVar> env = id.Env();
  ASSERT_EQ(env.size(), 4u);
  EXPECT_EQ(env[0].name, "GIT_AUTHOR_NAME");
  EXPECT_EQ(env[1].name, "GIT_COMMITTER_NAME");
  EXPECT_EQ(env[2].name, "GIT_AUTHOR_EMAIL");
  EXPECT_EQ(env[3].value, "ada@example.test");
}

TEST_F(GitIdentityTest, NothingConfiguredSetsNothing) {
  const GitIdentity id = ReadGitIdentity(Env(), home_);
  EXPECT_EQ(id.name, "");
  EXPECT_EQ(id.email, "");
  EXPECT_TRUE(id.Env().empty());
}

TEST_F(GitIdentityTest, HomeFileWinsOverXdgAndFollowsIncludes) {
  Write(dir_ + "/xdg/git/config", "[user]\n\tname = From Xdg\n\temail = xdg@example.test\n");
  Write(home_ + "/.gitconfig", "[include]\n\tpath = ~/identity.inc\n");
  Write(home_ + "/identity.inc", "[user]\n\tname = From Include\n");
  const GitIdentity id = ReadGitIdentity(Env({"XDG_CONFIG_HOME=" + dir_ + "/xdg"}), home_);
  EXPECT_EQ(id.name, "From Include");
  EXPECT_EQ(id.email, "xdg@example.test");  // only ~/.gitconfig's keys replace the XDG file's
}

TEST_F(GitIdentityTest, GitConfigGlobalReplacesTheHomeFiles) {
  Write(home_ + "/.gitconfig", "[user]\n\tname = Home\n");
  Write(dir_ + "/other.cfg", "[user]\n\tname = Other\n");
  EXPECT_EQ(ReadGitIdentity(Env({"GIT_CONFIG_GLOBAL=" + dir_ + "/other.cfg"}), home_).name,
            "Other");
  // The system file counts unless GIT_CONFIG_NOSYSTEM; the global one wins over it.
  Write(dir_ + "/system.cfg", "[user]\n\tname = System\n\temail = sys@example.test\n");
  const GitIdentity id =
      ReadGitIdentity({"HOME=" + home_, "GIT_CONFIG_SYSTEM=" + dir_ + "/system.cfg"}, home_);
  EXPECT_EQ(id.name, "Home");
  EXPECT_EQ(id.email, "sys@example.test");
}

TEST_F(GitIdentityTest, RefusesControlCharactersLongValuesAndAngleBrackets) {
  // git's \t and \n escapes in a quoted value give a real tab and newline.
  Write(home_ + "/.gitconfig", "[user]\n\tname = \"Eve\\tTab\"\n\temail = \"a<b>@x\"\n");
  GitIdentity id = ReadGitIdentity(Env(), home_);
  EXPECT_EQ(id.name, "");
  EXPECT_EQ(id.email, "");
  ASSERT_EQ(id.notes.size(), 2u);
  EXPECT_THAT(id.notes[0], HasSubstr("skipped user.name"));
  EXPECT_THAT(id.notes[0], HasSubstr("control character"));
  EXPECT_THAT(id.notes[1], HasSubstr("'<' or '>'"));

  // A refused value in a later file is not replaced by an earlier file's: git would use it.
  Write(dir_ + "/xdg/git/config", "[user]\n\tname = Fine\n");
  Write(home_ + "/.gitconfig", "[user]\n\tname = " + std::string(300, 'n') + "\n");
  id = ReadGitIdentity(Env({"XDG_CONFIG_HOME=" + dir_ + "/xdg"}), home_);
  EXPECT_EQ(id.name, "");
  ASSERT_EQ(id.notes.size(), 1u);
  EXPECT_THAT(id.notes[0], HasSubstr("longer than 256 bytes"));

  EXPECT_EQ(GitIdentityProblem("Ada"), std::nullopt);
  EXPECT_EQ(GitIdentityProblem(std::string(256, 'a')), std::nullopt);
  EXPECT_NE(GitIdentityProblem(std::string(257, 'a')), std::nullopt);
  EXPECT_NE(GitIdentityProblem(""), std::nullopt);
  EXPECT_NE(GitIdentityProblem("a\x7f"), std::nullopt);
}

TEST_F(GitIdentityTest, AFifoIsSkippedInsteadOfBlockingTheLaunch) {
  ASSERT_EQ(::mkfifo((home_ + "/.gitconfig").c_str(), 0600), 0);
  Write(dir_ + "/xdg/git/config", "[user]\n\tname = Fine\n");
  const GitIdentity id = ReadGitIdentity(Env({"XDG_CONFIG_HOME=" + dir_ + "/xdg"}), home_);
  EXPECT_EQ(id.name, "Fine");
  ASSERT_EQ(id.notes.size(), 1u);
  EXPECT_THAT(id.notes[0], HasSubstr("not a regular file"));
}

TEST_F(GitIdentityTest, ARepositoryAroundTheCurrentDirectoryIsNeverRead) {
  // cagent is often started inside the workspace, whose .git/config is hostile.
  const std::string repo = dir_ + "/repo";
  fs::create_directories(repo + "/.git");
  ASSERT_EQ(std::system(("git init -q " + repo).c_str()), 0);
  Write(repo + "/.git/config",
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[user]\n\tname = Mallory\n"
        "\temail = mallory@evil.test\n");
  Write(home_ + "/.gitconfig", "[user]\n\temail = ada@example.test\n[includeIf \"gitdir:" + repo +
                                   "/\"]\n\tpath = " + repo + "/.git/config\n");
  const fs::path before = fs::current_path();
  fs::current_path(repo);
  const GitIdentity id = ReadGitIdentity(Env({"GIT_DIR=" + repo + "/.git"}), home_);
  fs::current_path(before);
  EXPECT_EQ(id.name, "");  // neither the repository's config nor an includeIf gitdir: of it
  EXPECT_EQ(id.email, "ada@example.test");
  // Twin: git asked the ordinary way from inside the repository takes the hostile name.
  FILE* p = ::popen(
      ("cd " + repo + " && HOME=" + home_ + " GIT_CONFIG_NOSYSTEM=1 git config --get user.name")
          .c_str(),
      "r");
  ASSERT_NE(p, nullptr);
  char buf[64] = {};
  const std::size_t n = std::fread(buf, 1, sizeof(buf) - 1, p);
  ::pclose(p);
  EXPECT_EQ(std::string(buf, n), "Mallory\n");
}

}  // namespace
}  // namespace cagent::launcher::session

namespace cagent::launcher::session {
namespace {

// git's own answer for `key` in configuration file `path` (the last value, as --get gives it), or
// nullopt when git says it is not set or cannot read the file.
std::optional<std::string> GitSays(const std::string& path, const std::string& key) {
  const std::string cmd = "cd / && GIT_CONFIG_NOSYSTEM=1 git config --file '" + path +
                          "' -z --get '" + key + "' 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string out;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(p);
  if (status != 0) return std::nullopt;
  if (!out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

std::optional<std::string> Last(const std::vector<std::pair<std::string, std::string>>& entries,
                                const std::string& key) {
  std::optional<std::string> v;
  for (const auto& [k, value] : entries) {
    if (k == key) v = value;
  }
  return v;
}

// cagent's own reader of the usual ~/.gitconfig (ParseIdentitySettings), side by side with git on
// the same files: where it gives an answer it is git's, and the plain forms are read without git.
TEST_F(GitIdentityTest, TheBuiltInReaderAgreesWithGitOrLeavesTheFileToGit) {
  struct Case {
    std::string text;
    bool plain;  // the reader must answer (no git process for it)
  };
  const std::vector<Case> cases = {
      {"[user]\n\tname = Ada Lovelace\n\temail = ada@example.test\n", true},
      {"[User]\n  NAME=Ada\n  Email  =  a@b.test  # comment\n", true},
      {"[core]\n\teditor = vim\n[user]\n\tname = First\n[user]\n\tname = Second\n", true},
      {"[user]\r\n\tname = Crlf Name\r\n\temail = c@d.test\r\n", true},
      {"\xEF\xBB\xBF[user]\n\tname = Bom\n", true},
      {"[user]\n\tname = \"  Quoted  # not a comment \"\n", true},
      {"[user]\n\tname = Ada   \t Lovelace ; trailing\n", true},
      {"[user]\n\tname = Con\\\n tinued\n", true},
      {"[user]\n\tname = say \\\"hi\\\" \\\\o/\n", true},
      {"[user \"work\"]\n\tname = Sub Section\n[user]\n\temail = top@x.test\n", true},
      {"[user.work]\n\tname = Legacy Sub\n", true},
      {"# only a comment\n; and another\n[user]\n\tname=NoSpaces\n", true},
      {"[user]\n\tname = Ünïcödé Nämé\n", true},
      {"[user]\n\tname = tab\\there\n", true},
      // Not plain: git reads these (the reader declines, or the file has an include).
      {"[user]\n\tname\n", false},
      {"[user] name = same line\n", false},
      {"[user]\n\tname = bad \\q escape\n", false},
      {"[user]\n\tname = \"unterminated\n", false},
      {"name = before any section\n[user]\n\temail = e@x.test\n", false},
      {"[include]\n\tpath = /nonexistent\n[user]\n\tname = Inc\n", false},
      {"[user\n\tname = broken header\n", false},
  };
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string path = dir_ + "/case" + std::to_string(i++);
    Write(path, c.text);
    const auto parsed = ParseIdentitySettings(c.text);
    if (c.plain) {
      ASSERT_TRUE(parsed.has_value()) << "the reader declined a plain file";
    }
    if (parsed && c.text.find("include") == std::string::npos) {
      for (const std::string key : {"user.name", "user.email"}) {
        EXPECT_EQ(Last(*parsed, key), GitSays(path, key)) << key;
      }
    }
    // Whatever path it takes, ReadGitIdentity ends with git's answer (values it refuses aside).
    const GitIdentity id = ReadGitIdentity(Env({"GIT_CONFIG_GLOBAL=" + path}), home_);
    const auto git_name = GitSays(path, "user.name");
    if (git_name && !GitIdentityProblem(*git_name)) {
      EXPECT_EQ(id.name, *git_name);
    } else {
      EXPECT_EQ(id.name, "");
    }
  }
}

}  // namespace
}  // namespace cagent::launcher::session
