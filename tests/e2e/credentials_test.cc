// End-to-end tests of credentials that never enter the sandbox (issue 36), with real clients:
// curl, git (clone and push over smart HTTP), npm, pip and Python's urllib, run inside
// `cagent exec --profile P --resolve ...` against an HTTPS server this test starts on 127.0.0.2
// (tests/egress_fixtures/serve.py) that answers only requests carrying the real value
// (`Authorization: Bearer SECRET`, or Basic credentials whose password is SECRET). cagent gets the
// value in its own environment (TEST_TOKEN) and trusts the server's test CA through its own
// SSL_CERT_FILE; inside, TEST_TOKEN holds a placeholder and the clients trust the sandbox's CA.
//
// Each success has its twin: the same client and request without cagent's swap (the profile has
// no credentials section, and the sandbox gets a made-up token) fails with the server's 401.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kPython = "/usr/bin/python3";
constexpr const char* kSecret = "ghp_e2eSecretValue4f1c9d2b7a3e8f60c5d4";
constexpr auto kClientTimeout = std::chrono::seconds(60);

std::string FixturePath(const std::string& name) {
  return std::string(CAGENT_SOURCE_DIR) + "/tests/egress_fixtures/" + name;
}

bool HostOk(const std::string& command) {
  return std::system(("(" + command + ") >/dev/null 2>&1").c_str()) == 0;
}

bool Have(const std::string& tool) { return HostOk("command -v " + tool); }

std::string Base64(const std::string& in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16U) |
                       (static_cast<unsigned char>(in[i + 1]) << 8U) |
                       static_cast<unsigned char>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6)
      out.push_back(kAlphabet[(v >> static_cast<unsigned>(s)) & 63U]);
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16U;
    out += {kAlphabet[(v >> 18U) & 63U], kAlphabet[(v >> 12U) & 63U], '=', '='};
  } else if (i + 2 == in.size()) {
    const unsigned v =
        (static_cast<unsigned char>(in[i]) << 16U) | (static_cast<unsigned char>(in[i + 1]) << 8U);
    out +=
        {kAlphabet[(v >> 18U) & 63U], kAlphabet[(v >> 12U) & 63U], kAlphabet[(v >> 6U) & 63U], '='};
  }
  return out;
}

struct Fixtures {
  std::string skip;
  std::string error;
  std::string marker;
  std::string site;
  std::string ca_dir;
  std::string request_log;
  std::unique_ptr<FixtureServer> https;  // 127.0.0.2, TLS, the real value required
  std::unique_ptr<FixtureServer> http;   // 127.0.0.2, plain, no authorization
};

Fixtures& Shared() {
  static Fixtures f;
  return f;
}

class Credentials : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Fixtures& f = Shared();
    Harness& h = Harness::Get();
    if (::access(kPython, X_OK) != 0) {
      f.skip = "/usr/bin/python3 is missing: it runs the fixture servers";
      return;
    }
    for (const char* tool : {"curl", "openssl", "git"}) {
      if (!Have(tool)) {
        f.skip = std::string(tool) + " is not installed: the fixtures need it";
        return;
      }
    }
    f.marker = "credentials-marker-" + std::to_string(::getpid());
    f.site = h.base() + "/credentials-site";
    f.ca_dir = h.base() + "/credentials-ca";
    f.request_log = h.base() + "/credentials-requests.log";
    const std::string make = std::string(kPython) + " '" + FixturePath("make_fixtures.py") + "' '" +
                             f.site + "' --marker " + f.marker + " --git && bash '" +
                             FixturePath("make_ca.sh") + "' '" + f.ca_dir + "'";
    if (!HostOk(make)) {
      f.error = "making the fixtures failed: " + make;
      return;
    }
    f.https = FixtureServer::Spawn(
        {"--addr", "127.0.0.2", "--root", f.site, "--tls-cert", f.ca_dir + "/leaf.pem", "--tls-key",
         f.ca_dir + "/leaf.key", "--git-backend", f.site, "--request-log", f.request_log,
         "--require-auth", std::string("Bearer ") + kSecret, "--require-auth",
         "Basic " + Base64(std::string("x-access-token:") + kSecret), "--require-auth",
         "Basic " + Base64(std::string("__token__:") + kSecret)},
        &f.error);
    f.http = FixtureServer::Spawn({"--addr", "127.0.0.2", "--root", f.site}, &f.error);
    for (auto* server : {&f.https, &f.http}) {
      if (*server != nullptr && !(*server)->WaitForPort(&f.error)) server->reset();
    }
  }
  static void TearDownTestSuite() {
    Shared().https.reset();
    Shared().http.reset();
  }

  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    if (!f_.skip.empty()) GTEST_SKIP() << f_.skip;
    ASSERT_EQ(f_.error, "");
    ASSERT_NE(f_.https, nullptr);
    ASSERT_NE(f_.http, nullptr);
    ws_ = h_.MakeDir("cred-ws");
    WriteFile(ws_ + "/ca.pem", ReadFile(f_.ca_dir + "/ca.pem"));  // for the twins' clients
  }

  [[nodiscard]] std::string Port() const { return f_.https->port(); }
  [[nodiscard]] std::string Origin() const { return "https://pkgs.test:" + Port(); }
  [[nodiscard]] std::string Body() const { return "cagent-egress-fixture " + f_.marker + "\n"; }

  // The profile: both test hosts allowed, `credentials` (a section's body; "" for none, and then
  // TEST_TOKEN is passed into the sandbox: the twins) and extra hosts rules.
  std::string Profile(const std::string& credentials, const std::string& extra_hosts = "") {
    const std::string path = ws_ + "/cred.cagent";
    // Not `extends base`: it scrubs *_TOKEN, and the twins pass the variable in.
    std::string text =
        "description \"credentials e2e\"\nworkspace read-write\nnetwork loopback\n"
        "filesystem {\n  read-only /usr /etc /bin /sbin /lib /lib64\n}\n"
        "environment {\n  pass PATH" +
        std::string(credentials.empty() ? " TEST_TOKEN" : "") +
        "\n}\nhosts {\n  allow pkgs.test:" + Port() + "\n  allow other.test:" + f_.http->port() +
        "\n" + extra_hosts + "}\n";
    if (!credentials.empty()) text += "credentials {\n  " + credentials + "\n}\n";
    if (extra_hosts.find("ask ") != std::string::npos) text += "approval on-request\n";
    WriteFile(path, text);
    return path;
  }
  [[nodiscard]] std::string Bound() const { return "tok env TEST_TOKEN for pkgs.test:" + Port(); }

  // `cagent exec --profile PROFILE` running SCRIPT, with TEST_TOKEN=SECRET and the test CA as
  // SSL_CERT_FILE in cagent's environment. `pass_fake`: the twin, whose sandbox gets a made-up
  // TEST_TOKEN (the profile then has no credentials section).
  RunResult Sh(const std::string& profile, const std::string& script, bool pass_fake = false,
               const std::vector<std::string>& more = {}) {
    h_.GiveToRunUser(ws_);
    std::vector<std::string> args = {"exec",
                                     "-w",
                                     ws_,
                                     "--profile",
                                     profile,
                                     "--resolve",
                                     "pkgs.test:" + Port() + ":127.0.0.2",
                                     "--resolve",
                                     "other.test:" + f_.http->port() + ":127.0.0.2"};
    args.insert(args.end(), more.begin(), more.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", script});
    RunOptions options;
    options.timeout = kClientTimeout;
    options.extra_env = {
        "TEST_TOKEN=" + std::string(pass_fake ? "ghp_madeUpTokenThatIsNotTheSecret00" : kSecret),
        "SSL_CERT_FILE=" + f_.ca_dir + "/ca.pem"};
    return h_.Run(args, options);
  }

  Harness& h_ = Harness::Get();
  Fixtures& f_ = Shared();
  std::string ws_;
};

// ---- curl with a bearer header: the issue's own example ----

TEST_F(Credentials, CurlWithThePlaceholderGetsTheDataWhileNothingInsideHoldsTheValue) {
  const RunResult r =
      Sh(Profile(Bound()),
         "curl -sS --fail --max-time 20 -H \"Authorization: Bearer $TEST_TOKEN\" " + Origin() +
             "/f && printf '%s\\n' \"$TEST_TOKEN\" && "
             "cat /proc/self/environ /proc/1/environ | tr '\\0' '\\n' | "
             "grep -c " +
             kSecret + " || true");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(Body()));
  EXPECT_THAT(r.out, Not(HasSubstr(kSecret)));
  EXPECT_THAT(r.out, HasSubstr("ghp_"));   // the placeholder keeps the token's form
  EXPECT_THAT(r.out, HasSubstr("\n0\n"));  // grep found the value nowhere
  EXPECT_THAT(r.err, Not(HasSubstr(kSecret)));
}

TEST_F(Credentials, CurlWithoutTheSwapGetsTheServers401) {
  // Twin: no credentials section, a made-up token in the sandbox, the test CA given to curl.
  const RunResult r = Sh(Profile(""),
                         "curl -sS --fail --max-time 20 --cacert " + ws_ +
                             "/ca.pem -H \"Authorization: Bearer $TEST_TOKEN\" " + Origin() + "/f",
                         /*pass_fake=*/true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("401"));
  EXPECT_THAT(r.out, Not(HasSubstr(f_.marker)));
}

// ---- the placeholder on its way to another host ----

TEST_F(Credentials, ThePlaceholderSentToAnUnboundHostIsRefused) {
  const std::string url = "http://other.test:" + f_.http->port() + "/f";
  const RunResult r =
      Sh(Profile(Bound()), "curl -sS --max-time 20 -w '\\n%{http_code}\\n' '" + url +
                               "?leak='\"$TEST_TOKEN\"; curl -sS --max-time 20 " + url);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\n403\n"));
  EXPECT_THAT(r.out, HasSubstr("placeholder of credential 'tok'"));
  // Twin, in the same run: the same URL without the placeholder is served.
  EXPECT_THAT(r.out, HasSubstr(Body()));
}

// ---- git over smart HTTP: clone with the placeholder as the Basic password ----

std::string GitEnv() {
  return "export GIT_TERMINAL_PROMPT=0 GIT_CONFIG_NOSYSTEM=1; git config --global user.email "
         "a@b.test && git config --global user.name tester && ";
}

TEST_F(Credentials, GitClonesWithThePlaceholderInItsUrl) {
  const RunResult r =
      Sh(Profile(Bound()), GitEnv() + "git clone -q https://x-access-token:$TEST_TOKEN@pkgs.test:" +
                               Port() + "/git/repo.git c && cat c/README");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, f_.marker + "\n");
}

TEST_F(Credentials, GitCloneWithoutTheSwapFails) {
  // Twin.
  const RunResult r =
      Sh(Profile(""),
         GitEnv() + "GIT_SSL_CAINFO=" + ws_ +
             "/ca.pem git clone -q https://x-access-token:$TEST_TOKEN@pkgs.test:" + Port() +
             "/git/repo.git c",
         /*pass_fake=*/true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("Authentication failed"));
}

// ---- npm with _authToken from a registry that requires it ----

std::string NpmInstall(const std::string& ws, const std::string& origin) {
  const std::string registry = origin + "/npm/";
  const std::string auth = registry.substr(registry.find("//"));
  return "mkdir -p proj && cd proj && printf "
         "'{\"name\":\"p\",\"version\":\"1.0.0\",\"private\":true}' "
         "> package.json && printf '%s\\n' '" +
         auth +
         ":_authToken=${TEST_TOKEN}' > ../npmrc && "
         "npm install --userconfig " +
         ws + "/npmrc --cache " + ws + "/npm-cache --registry " + registry +
         " tinypkg --no-audit --no-fund --fetch-retries=0 --fetch-timeout=20000";
}

TEST_F(Credentials, NpmInstallsWithThePlaceholderAuthToken) {
  if (!Have("npm") || !Have("node")) GTEST_SKIP() << "npm or node is not installed";
  const RunResult r =
      Sh(Profile(Bound()), NpmInstall(ws_, Origin()) +
                               " >/dev/null && node -e 'console.log(require(\"tinypkg\").marker)'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, f_.marker + "\n");
}

TEST_F(Credentials, NpmInstallWithoutTheSwapFails) {
  if (!Have("npm") || !Have("node")) GTEST_SKIP() << "npm or node is not installed";
  // Twin.
  const RunResult r = Sh(Profile(""), NpmInstall(ws_, Origin()) + " --cafile " + ws_ + "/ca.pem",
                         /*pass_fake=*/true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("401"));
}

// ---- pip from an index whose URL carries the placeholder ----

std::string PipInstall(const std::string& ws, const std::string& port) {
  return std::string(kPython) +
         " -m pip install -q --isolated --no-cache-dir --disable-pip-version-check --no-input "
         "--retries 0 --timeout 20 --target " +
         ws + "/site --index-url \"https://__token__:$TEST_TOKEN@pkgs.test:" + port +
         "/simple\" tinypkg";
}

TEST_F(Credentials, PipInstallsFromTheIndexWithThePlaceholder) {
  if (!HostOk(std::string(kPython) + " -m pip --version")) {
    GTEST_SKIP() << "pip is not installed for /usr/bin/python3 (Debian: python3-pip)";
  }
  const RunResult r =
      Sh(Profile(Bound()), PipInstall(ws_, Port()) + " && PYTHONPATH=" + ws_ + "/site " + kPython +
                               " -c 'import tinypkg; print(tinypkg.MARKER)'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(f_.marker + "\n"));
}

TEST_F(Credentials, PipInstallWithoutTheSwapFails) {
  if (!HostOk(std::string(kPython) + " -m pip --version")) {
    GTEST_SKIP() << "pip is not installed for /usr/bin/python3 (Debian: python3-pip)";
  }
  // Twin.
  const RunResult r =
      Sh(Profile(""), "export PIP_CERT=" + ws_ + "/ca.pem; " + PipInstall(ws_, Port()),
         /*pass_fake=*/true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(ws_ + "/site/tinypkg/__init__.py"));
}

// ---- Python's urllib with the bearer header ----

std::string Urllib(const std::string& url) {
  return std::string(kPython) + " -c 'import os, urllib.request as u; r = u.Request(\"" + url +
         "\", headers={\"Authorization\": \"Bearer \" + os.environ[\"TEST_TOKEN\"]}); "
         "print(u.urlopen(r, timeout=20).read().decode(), end=\"\")'";
}

TEST_F(Credentials, UrllibGetsTheDataWithThePlaceholder) {
  const RunResult r = Sh(Profile(Bound()), Urllib(Origin() + "/f"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, Body());
}

TEST_F(Credentials, UrllibWithoutTheSwapGets401) {
  // Twin.
  const RunResult r =
      Sh(Profile(""), "export SSL_CERT_FILE=" + ws_ + "/ca.pem; " + Urllib(Origin() + "/f"),
         /*pass_fake=*/true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("401"));
}

// ---- a credential whose value cagent cannot find ----

TEST_F(Credentials, AMissingValueStopsBeforeAnythingRuns) {
  const std::string profile = Profile("tok env CAGENT_E2E_UNSET_TOKEN for pkgs.test:" + Port());
  const RunResult r = Sh(profile, "touch ran");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("CAGENT_E2E_UNSET_TOKEN"));
  EXPECT_FALSE(std::filesystem::exists(ws_ + "/ran"));
}

}  // namespace
}  // namespace cagent::testing

namespace cagent::testing {
namespace {

// ---- a method rule: the credential may clone but pushing asks ----

TEST_F(Credentials, APushIsRefusedByItsMethodRuleThenAllowedByAnApproval) {
  const std::string ask = "  ask pkgs.test:" + Port() + " POST /git/repo.git/git-receive-pack\n";
  const std::string profile = Profile(Bound(), ask);
  const std::string url =
      "https://x-access-token:$TEST_TOKEN@pkgs.test:" + Port() + "/git/repo.git";
  auto push = [&](const std::string& dir) {
    return GitEnv() + "git clone -q " + url + " " + dir + " && cd " + dir +
           " && echo more >> README && git commit -qam more && git push -q origin HEAD:main";
  };
  const std::size_t before = ReadFile(f_.request_log).size();
  const RunResult refused = Sh(profile, push("c1"));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("403"));
  EXPECT_THAT(refused.err,
              HasSubstr("http: deny POST pkgs.test:" + Port() + " /git/repo.git/git-receive-pack"));
  // The clone's requests went through; the push's POST never reached the server.
  const std::string seen = ReadFile(f_.request_log).substr(before);
  EXPECT_THAT(seen, HasSubstr("POST /git/repo.git/git-upload-pack 200"));
  EXPECT_THAT(seen, Not(HasSubstr("git-receive-pack 200")));
  // The refusal names the approval that would allow exactly this request.
  const std::size_t at = refused.err.find("--pre-approve sha256:");
  ASSERT_NE(at, std::string::npos) << refused.err;
  const std::string digest = refused.err.substr(at + 21, 64);
  const RunResult approved = Sh(profile, push("c2"), false, {"--pre-approve", "sha256:" + digest});
  ASSERT_EQ(approved.exit_code, 0) << approved.err;
  EXPECT_THAT(ReadFile(f_.request_log).substr(before),
              HasSubstr("POST /git/repo.git/git-receive-pack 200"));
  EXPECT_THAT(approved.err, Not(HasSubstr(kSecret)));
}

}  // namespace
}  // namespace cagent::testing
