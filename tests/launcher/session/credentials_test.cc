// Reading a profile's credentials when a sandbox starts (issue 36): values from cagent's
// environment and from files, placeholders in their place, optional ones skipped with a note, and
// every refusal naming the credential and where it looked — never the value.
#include "launcher/session/credentials.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "policy/language/compiler.h"
#include "policy/language/diagnostics.h"
#include "policy/language/loader.h"

namespace cagent::launcher::session {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-credentials-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    std::filesystem::create_directories(home_ + "/.config/tea");
  }
  void TearDown() override { std::filesystem::remove_all(home_); }

  std::shared_ptr<const policy::Policy> Compile(const std::string& text) {
    policy::SearchPath search;
    policy::Compiled c = policy::CompileText("t.cagent", text, search);
    EXPECT_TRUE(c.ok()) << policy::RenderAll(*c.sources, c.diags);
    return c.policy;
  }
  void Write(const std::string& rel, const std::string& text) {
    std::ofstream(home_ + "/" + rel, std::ios::binary) << text;
  }

  std::string home_;
};

constexpr const char* kProfile =
    "credentials {\n"
    "  gh env GITHUB_TOKEN for github.com api.github.com\n"
    "  tea file ~/.config/tea/token for git.example.org:443\n"
    "  npm optional env NPM_TOKEN for registry.npmjs.org\n"
    "}\n";

TEST_F(CredentialsTest, ValuesComeFromTheEnvironmentAndFilesAndPlaceholdersStandIn) {
  auto p = Compile(kProfile);
  ASSERT_NE(p, nullptr);
  Write(".config/tea/token", "tea-SECRETFROMFILE123\n");
  auto loaded = LoadCredentials(*p, {{"GITHUB_TOKEN", "ghp_SECRETFROMENV456"}}, home_);
  ASSERT_TRUE(loaded.ok()) << loaded.error().Message();
  ASSERT_EQ(loaded->credentials.size(), 2U);
  const egress::SandboxCredential& gh = loaded->credentials[0];
  EXPECT_EQ(gh.name, "gh");
  EXPECT_EQ(gh.value, "ghp_SECRETFROMENV456");
  EXPECT_TRUE(gh.placeholder.starts_with("ghp_"));
  EXPECT_NE(gh.placeholder, gh.value);
  EXPECT_EQ(loaded->env.at("GITHUB_TOKEN"), gh.placeholder);
  const egress::SandboxCredential& tea = loaded->credentials[1];
  EXPECT_EQ(tea.value, "tea-SECRETFROMFILE123");  // the trailing newline is not part of it
  EXPECT_EQ(loaded->files.at(home_ + "/.config/tea/token"), tea.placeholder);
  EXPECT_EQ(loaded->hosts.at("gh").size(), 2U);
  // The optional one without a value is skipped, and said so.
  ASSERT_EQ(loaded->skipped.size(), 1U);
  EXPECT_THAT(loaded->skipped[0], HasSubstr("npm: no value (NPM_TOKEN in cagent's environment)"));
}

TEST_F(CredentialsTest, AMissingValueIsAnErrorUnlessOptional) {
  auto p = Compile(kProfile);
  ASSERT_NE(p, nullptr);
  Write(".config/tea/token", "tea-x");
  auto none = LoadCredentials(*p, {{"GITHUB_TOKEN", ""}}, home_);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.error().Message(), HasSubstr("credential 'gh'"));
  EXPECT_THAT(none.error().Message(), HasSubstr("nothing in GITHUB_TOKEN in cagent's environment"));
  std::filesystem::remove(home_ + "/.config/tea/token");
  auto no_file = LoadCredentials(*p, {{"GITHUB_TOKEN", "ghp_x"}}, home_);
  ASSERT_FALSE(no_file.ok());
  EXPECT_THAT(no_file.error().Message(), HasSubstr(home_ + "/.config/tea/token"));
}

TEST_F(CredentialsTest, ABadValueIsRefusedWithoutShowingIt) {
  auto p = Compile(kProfile);
  ASSERT_NE(p, nullptr);
  Write(".config/tea/token", "tea-x");
  auto bad = LoadCredentials(*p, {{"GITHUB_TOKEN", "ghp_SECRET\r\nX-Injected: yes"}}, home_);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().Message(), HasSubstr("control character"));
  EXPECT_THAT(bad.error().Message(), Not(HasSubstr("SECRET")));
  // A directory, a FIFO or a huge file is no credential.
  std::filesystem::remove(home_ + "/.config/tea/token");
  std::filesystem::create_directory(home_ + "/.config/tea/token");
  auto dir = LoadCredentials(*p, {{"GITHUB_TOKEN", "ghp_x"}}, home_);
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(dir.error().Message(), HasSubstr("not a regular file"));
  std::filesystem::remove(home_ + "/.config/tea/token");
  ASSERT_EQ(::mkfifo((home_ + "/.config/tea/token").c_str(), 0600), 0);
  auto fifo = LoadCredentials(*p, {{"GITHUB_TOKEN", "ghp_x"}}, home_);  // does not block
  ASSERT_FALSE(fifo.ok());
  std::filesystem::remove(home_ + "/.config/tea/token");
  Write(".config/tea/token", std::string(kMaxCredentialBytes + 1, 'a'));
  auto huge = LoadCredentials(*p, {{"GITHUB_TOKEN", "ghp_x"}}, home_);
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.error().Message(), HasSubstr("not a credential"));
}

}  // namespace
}  // namespace cagent::launcher::session
