// issue 36: session::Prepare with a profile's credentials section. Every value is read before
// anything runs; the sandbox's spec holds placeholders and the CA bundle only; without filtered
// egress, or bound to a wildcard, the session is refused. Nothing is launched here.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/egress/tls.h"
#include "launcher/egress/tls/openssl_tls.h"
#include "launcher/profile/spec.h"
#include "launcher/sandbox/credential_view.h"
#include "launcher/session/session.h"
#include "policy/language/loader.h"

namespace cagent::launcher::session {
namespace {

using ::testing::HasSubstr;

constexpr char kSecret[] = "SECRETVALUE-0123456789";

class SessionCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-session-cred-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::filesystem::create_directories(dir_ + "/ws");
    std::filesystem::create_directories(dir_ + "/home/.config/tool");
    std::ofstream(dir_ + "/home/.config/tool/token") << "FILESECRET-abcdefghij\n";
    // As cagent-full does at start: the CA and interception come from OpenSSL.
    egress::InstallTls(&egress::OpenSslTls());
  }
  void TearDown() override {
    egress::InstallTls(nullptr);
    std::filesystem::remove_all(dir_);
  }

  std::shared_ptr<const policy::Policy> Compile(const std::string& text) {
    policy::Compiled c = policy::CompileText("creds.cagent", text, policy::SearchPath{});
    EXPECT_TRUE(c.ok()) << "the profile did not compile";
    return c.policy;
  }

  SessionOptions Options(std::shared_ptr<const policy::Policy> p) {
    SessionOptions o;
    o.policy = p;
    o.egress_policy = p;
    o.argv = {"true"};
    o.profile.binding = RunBinding(dir_ + "/ws");
    o.profile.binding.home = dir_ + "/home";
    o.profile.git_identity = {{"GIT_AUTHOR_NAME", "t"}};
    o.credential_env = std::map<std::string, std::string>{{"TEST_TOKEN", kSecret}};
    o.audit_log_path = dir_ + "/audit.jsonl";
    return o;
  }

  static constexpr char kProfile[] =
      "network loopback\n"
      "environment {\n  pass TEST_TOKEN\n}\n"
      "hosts {\n  allow pkgs.test:8080\n}\n"
      "credentials {\n  tok env TEST_TOKEN for pkgs.test:8080\n"
      "  cfg file ~/.config/tool/token for pkgs.test:8080\n"
      "  extra optional env NOT_SET for pkgs.test:8080\n}\n";
  std::string dir_;
};

TEST_F(SessionCredentialsTest, TheSpecHoldsPlaceholdersAndTheBundleNeverAValue) {
  auto plan = Prepare(Options(Compile(kProfile)));
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  const LoadedCredentials* loaded = (*plan)->credentials();
  ASSERT_NE(loaded, nullptr);
  ASSERT_EQ(loaded->credentials.size(), 2U);
  // The optional one without a value is a note.
  EXPECT_THAT((*plan)->notes(), ::testing::Contains(HasSubstr("extra: no value")));

  const LaunchSpec& spec = (*plan)->spec();
  std::string placeholder;
  for (const EnvVar& v : spec.env_override) {
    if (v.name == "TEST_TOKEN") placeholder = v.value;
  }
  ASSERT_FALSE(placeholder.empty());
  EXPECT_NE(placeholder, kSecret);
  // MakePlaceholder keeps the value's leading letters and separator ("SECRETVALUE-").
  EXPECT_TRUE(placeholder.starts_with("SECRETVALUE-")) << placeholder;
  bool bundle = false;
  bool file = false;
  for (const HomeFile& f : spec.home_files) {
    if (f.path == CaBundlePathInside(spec.home)) bundle = true;
    if (f.path == spec.home + "/.config/tool/token") {
      file = true;
      // The placeholder keeps the value's form ("FILESECRET-"), never the value.
      EXPECT_THAT(f.content, ::testing::Not(HasSubstr("FILESECRET-abcdefghij")));
      EXPECT_THAT(f.content, ::testing::StartsWith("FILESECRET-"));
    }
  }
  EXPECT_TRUE(bundle);
  EXPECT_TRUE(file);
  // No value anywhere in what the launch gets.
  auto holds_value = [](const std::string& text) {
    return text.find(kSecret) != std::string::npos ||
           text.find("FILESECRET-abcdefghij") != std::string::npos;
  };
  for (const auto* vars : {&spec.env_set, &spec.env_override}) {
    for (const EnvVar& v : *vars) EXPECT_FALSE(holds_value(v.value)) << v.name;
  }
  for (const HomeFile& f : spec.home_files) EXPECT_FALSE(holds_value(f.content)) << f.path;
  for (const std::string& a : spec.argv) EXPECT_FALSE(holds_value(a));
  for (const FileBind& b : spec.file_binds) {
    std::ifstream in(b.source);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_FALSE(holds_value(text)) << b.source;
  }
}

TEST_F(SessionCredentialsTest, AMissingValueFailsBeforeTheAuditLogExists) {
  SessionOptions o = Options(Compile(kProfile));
  o.credential_env->clear();
  auto plan = Prepare(std::move(o));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code, Error::Code::kInvalidInput);
  EXPECT_THAT(plan.error().Message(), HasSubstr("credential 'tok'"));
  EXPECT_THAT(plan.error().Message(), ::testing::Not(HasSubstr(kSecret)));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/audit.jsonl"));
}

// A program without TLS (the launcher, `cagent`) cannot put credentials in: it refuses before
// anything exists (its `exec` hands such a profile to cagent-full first). With TLS, the same
// profile is prepared (the test above).
TEST_F(SessionCredentialsTest, WithoutTlsTheSessionIsRefusedBeforeAnythingExists) {
  egress::InstallTls(nullptr);
  auto plan = Prepare(Options(Compile(kProfile)));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code, Error::Code::kInvalidInput);
  EXPECT_THAT(plan.error().Message(), HasSubstr("built without TLS"));
  EXPECT_THAT(plan.error().Message(), ::testing::Not(HasSubstr(kSecret)));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/audit.jsonl"));
}

TEST_F(SessionCredentialsTest, CredentialsWithoutFilteredEgressAreRefused) {
  auto plan = Prepare(Options(
      Compile("network loopback\ncredentials {\n  tok env TEST_TOKEN for pkgs.test:8080\n}\n")));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code, Error::Code::kInvalidInput);
  EXPECT_THAT(plan.error().Message(), HasSubstr("need filtered egress"));
}

TEST_F(SessionCredentialsTest, ACredentialBoundToAWildcardIsRefused) {
  auto plan =
      Prepare(Options(Compile("network loopback\nhosts {\n  allow *.example.org\n}\n"
                              "credentials {\n  tok env TEST_TOKEN for *.example.org\n}\n")));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code, Error::Code::kInvalidInput);
  EXPECT_THAT(plan.error().Message(), HasSubstr("is bound to *.example.org, a wildcard"));
}

TEST_F(SessionCredentialsTest, OnlyOptionalCredentialsWithoutValuesChangeNothing) {
  auto plan = Prepare(
      Options(Compile("network loopback\nhosts {\n  allow pkgs.test:8080\n}\n"
                      "credentials {\n  extra optional env NOT_SET for pkgs.test:8080\n}\n")));
  ASSERT_TRUE(plan.ok()) << plan.error().Message();
  EXPECT_TRUE((*plan)->spec().env_override.empty());
  EXPECT_TRUE((*plan)->spec().home_files.empty());
  EXPECT_EQ((*plan)->notes().size(), 1U);
}

}  // namespace
}  // namespace cagent::launcher::session
