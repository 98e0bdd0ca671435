// issue 36: what a sandbox with credentials sees. The spec AddCredentialView makes, then real
// sandboxes (label: sandbox) reading it back, each guard with the twin that shows what it stops.
#include "launcher/sandbox/credential_view.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/sandbox/sandbox.h"

namespace cagent::launcher {
namespace {

using ::testing::HasSubstr;

constexpr char kCaPem[] = "-----BEGIN CERTIFICATE-----\nTESTCA\n-----END CERTIFICATE-----\n";

std::string MakeDir(const char* prefix) {
  std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  return tmpl;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const EnvVar* FindVar(const std::vector<EnvVar>& vars, const std::string& name) {
  for (const EnvVar& v : vars) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

TEST(CredentialViewTest, PlaceholdersAndTheBundleAreAddedToTheSpec) {
  const std::string dir = MakeDir("cagent-cred-view");
  std::ofstream(dir + "/system.pem") << "SYSTEM ROOTS";  // no trailing newline
  LaunchSpec spec = DefaultLaunchSpec("/srv/ws", {"true"});
  CredentialViewOptions o;
  o.env = {{"GH_TOKEN", "ghp_placeholder"}};
  o.files = {{"/home/alice/.config/tool/token", "tok_home"}, {"/etc/tool/token", "tok_abs"}};
  o.caller_home = "/home/alice";
  o.ca_pem = kCaPem;
  o.system_bundle = dir + "/system.pem";
  auto view = AddCredentialView(spec, o);
  ASSERT_TRUE(view.ok()) << view.error().Message();

  ASSERT_NE(FindVar(spec.env_override, "GH_TOKEN"), nullptr);
  EXPECT_EQ(FindVar(spec.env_override, "GH_TOKEN")->value, "ghp_placeholder");
  for (const std::string& name : CaBundleVariables()) {
    const EnvVar* v = FindVar(spec.env_override, name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->value, name == "NODE_EXTRA_CA_CERTS" ? spec.home + "/.cagent/cagent-ca.pem"
                                                      : spec.home + "/.cagent/ca-bundle.pem");
  }
  // ~/...: in the sandbox's HOME, and over the caller's file where the view shows it.
  ASSERT_EQ(spec.home_files.size(), 3U);
  EXPECT_EQ(spec.home_files[0].path, spec.home + "/.config/tool/token");
  EXPECT_EQ(spec.home_files[0].content, "tok_home\n");
  EXPECT_EQ(spec.home_files[0].mode, 0600U);
  EXPECT_EQ(spec.home_files[1].path, spec.home + "/.cagent/ca-bundle.pem");
  EXPECT_EQ(spec.home_files[1].content, std::string("SYSTEM ROOTS\n") + kCaPem);
  EXPECT_EQ(spec.home_files[2].content, kCaPem);
  ASSERT_EQ(spec.file_binds.size(), 3U);
  EXPECT_EQ(spec.file_binds[0].target, "/home/alice/.config/tool/token");
  EXPECT_FALSE(spec.file_binds[0].required);
  EXPECT_EQ(Read(spec.file_binds[0].source), "tok_home\n");
  // An absolute path elsewhere must be shown by the view.
  EXPECT_EQ(spec.file_binds[1].target, "/etc/tool/token");
  EXPECT_TRUE(spec.file_binds[1].required);
  EXPECT_EQ(Read(spec.file_binds[1].source), "tok_abs\n");
  struct stat st {};
  ASSERT_EQ(::stat(spec.file_binds[1].source.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444U);
  EXPECT_EQ(spec.file_binds[2].target, "/etc/ssl/certs/ca-certificates.crt");
  EXPECT_EQ(Read(spec.file_binds[2].source), std::string("SYSTEM ROOTS\n") + kCaPem);
  EXPECT_TRUE(ValidateLaunchSpec(spec).ok());

  // The directory goes with the view.
  const std::string written = view->dir();
  EXPECT_TRUE(std::filesystem::exists(written));
  { CredentialView gone = std::move(*view); }
  EXPECT_FALSE(std::filesystem::exists(written));
  std::filesystem::remove_all(dir);
}

TEST(CredentialViewTest, WithoutASystemBundleTheCaIsTheBundle) {
  LaunchSpec spec = DefaultLaunchSpec("/srv/ws", {"true"});
  CredentialViewOptions o;
  o.ca_pem = kCaPem;
  o.system_bundle = "/nonexistent/bundle.pem";
  auto view = AddCredentialView(spec, o);
  ASSERT_TRUE(view.ok()) << view.error().Message();
  ASSERT_EQ(spec.home_files.size(), 2U);
  EXPECT_EQ(spec.home_files[0].content, kCaPem);
}

TEST(CredentialViewTest, RefusesASpecThatShowsTheHostsFilesOrProc) {
  for (const Layer layer : {Layer::kMountView, Layer::kPidNamespace}) {
    LaunchSpec spec = DefaultLaunchSpec("/srv/ws", {"true"});
    spec.disabled.Add(layer);
    CredentialViewOptions o;
    o.env = {{"TOKEN", "placeholder"}};
    auto view = AddCredentialView(spec, o);
    ASSERT_FALSE(view.ok());
    EXPECT_EQ(view.error().code, Error::Code::kInvalidInput);
    EXPECT_THAT(view.error().Message(), HasSubstr("--disable-layer"));
  }
}

TEST(CredentialViewTest, AVariableGivenTwiceIsRefused) {
  LaunchSpec spec = DefaultLaunchSpec("/srv/ws", {"true"});
  CredentialViewOptions o;
  o.env = {{"SSL_CERT_FILE", "placeholder"}};
  o.ca_pem = kCaPem;
  auto view = AddCredentialView(spec, o);
  ASSERT_FALSE(view.ok());
  EXPECT_THAT(view.error().Message(), HasSubstr("SSL_CERT_FILE is given twice"));
}

// ---- real sandboxes ----

struct Sandboxed {
  std::string workspace = MakeDir("cagent-cred-sandbox");
  ~Sandboxed() { std::filesystem::remove_all(workspace); }
};

// The variable holds the placeholder although the spec passes it and the caller has the real
// value; the twin (no view) shows the pass would have brought the real value in.
TEST(CredentialViewSandboxTest, TheVariableIsThePlaceholderEvenWhenPassed) {
  Sandboxed s;
  ASSERT_EQ(::setenv("CAGENT_TEST_CRED_VAR", "real-value-1234", 1), 0);
  auto run = [&](bool with_view) {
    LaunchSpec spec = DefaultLaunchSpec(
        s.workspace, {"/bin/sh", "-c", "printf %s \"$CAGENT_TEST_CRED_VAR\" > out.txt"});
    spec.env_pass.push_back("CAGENT_TEST_CRED_VAR");
    std::optional<CredentialView> view;
    if (with_view) {
      CredentialViewOptions o;
      o.env = {{"CAGENT_TEST_CRED_VAR", "placeholder-5678"}};
      auto made = AddCredentialView(spec, o);
      EXPECT_TRUE(made.ok());
      view.emplace(std::move(*made));
    }
    auto out = RunSandbox(spec);
    EXPECT_TRUE(out.ok());
    EXPECT_EQ(out->exit_code, 0) << out->failed_step << ": " << out->error;
    return Read(s.workspace + "/out.txt");
  };
  EXPECT_EQ(run(true), "placeholder-5678");
  EXPECT_EQ(run(false), "real-value-1234");
  ::unsetenv("CAGENT_TEST_CRED_VAR");
}

// A file credential below a directory the view shows: the placeholder over the real file; the
// twin without the view shows the real file. The bundle is where the variables say, with the CA,
// and over the system's bundle path.
TEST(CredentialViewSandboxTest, FilesAndTheBundleAreWhereTheToolsLook) {
  Sandboxed s;
  const std::string host = MakeDir("cagent-cred-host");
  std::ofstream(host + "/token") << "real-file-value\n";
  auto run = [&](bool with_view) {
    LaunchSpec spec = DefaultLaunchSpec(
        s.workspace,
        {"/bin/sh", "-c",
         "cat " + host +
             "/token > out.txt; cat ~/.tool/token >> out.txt; "
             "cat \"$SSL_CERT_FILE\" > bundle.txt; cat \"$NODE_EXTRA_CA_CERTS\" > ca.txt; "
             "cat /etc/ssl/certs/ca-certificates.crt > system.txt; true"});
    spec.read_only_paths.push_back(host);
    std::optional<CredentialView> view;
    if (with_view) {
      CredentialViewOptions o;
      o.files = {{host + "/token", "placeholder-abs"}, {"/home/alice/.tool/token", "ph-home"}};
      o.caller_home = "/home/alice";
      o.ca_pem = kCaPem;
      auto made = AddCredentialView(spec, o);
      EXPECT_TRUE(made.ok()) << made.error().Message();
      view.emplace(std::move(*made));
    }
    auto out = RunSandbox(spec);
    EXPECT_TRUE(out.ok());
    EXPECT_EQ(out->exit_code, 0) << out->failed_step << ": " << out->error;
  };
  run(true);
  EXPECT_EQ(Read(s.workspace + "/out.txt"), "placeholder-abs\nph-home\n");
  EXPECT_THAT(Read(s.workspace + "/bundle.txt"), HasSubstr(kCaPem));
  EXPECT_EQ(Read(s.workspace + "/ca.txt"), kCaPem);
  if (std::filesystem::exists("/etc/ssl/certs/ca-certificates.crt")) {
    EXPECT_THAT(Read(s.workspace + "/system.txt"), HasSubstr(kCaPem));
    EXPECT_THAT(Read(s.workspace + "/bundle.txt"), HasSubstr("BEGIN CERTIFICATE"));
  }
  run(false);
  EXPECT_EQ(Read(s.workspace + "/out.txt"), "real-file-value\n");
  EXPECT_THAT(Read(s.workspace + "/system.txt"), ::testing::Not(HasSubstr(kCaPem)));
  std::filesystem::remove_all(host);
}

// An absolute credential path the view does not show fails the launch before anything runs.
TEST(CredentialViewSandboxTest, AnAbsoluteFileTheViewDoesNotShowFailsTheLaunch) {
  Sandboxed s;
  const std::string host = MakeDir("cagent-cred-hidden");
  std::ofstream(host + "/token") << "real\n";
  LaunchSpec spec = DefaultLaunchSpec(s.workspace, {"/bin/sh", "-c", "touch ran"});
  CredentialViewOptions o;
  o.files = {{host + "/token", "placeholder"}};
  auto view = AddCredentialView(spec, o);
  ASSERT_TRUE(view.ok()) << view.error().Message();
  auto out = RunSandbox(spec);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->kind, SandboxOutcome::Kind::kSetupFailed);
  EXPECT_THAT(out->error, HasSubstr("the sandbox's view does not show " + host + "/token"));
  EXPECT_FALSE(std::filesystem::exists(s.workspace + "/ran"));
  std::filesystem::remove_all(host);
}

}  // namespace
}  // namespace cagent::launcher
