// End-to-end tests of filtered egress (issue 16) with real clients nobody here wrote: curl, git,
// pip, npm, openssl and Python's urllib, run inside `cagent exec --allow-host ... --resolve ...`
// against servers this test starts on the host's 127.0.0.2 (and 127.0.0.1 for the loopback
// case), never any other address. The sandbox has its own network namespace, so those servers
// are reachable only through cagent's proxy, which connects from the host's namespace.
//
// Every guard has its twin: the same client and URL succeed when the host is allowed and fail
// when only another host is (the proxy is on in both runs, so the allow-list is the only
// difference). The served content comes from tests/egress_fixtures/make_fixtures.py and
// make_ca.sh, served by tests/egress_fixtures/serve.py; its marker is unique to this process, so
// a success cannot come from anywhere else. A test whose client is not installed is skipped with
// the reason.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

extern char** environ;

namespace cagent::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kPython = "/usr/bin/python3";
constexpr auto kClientTimeout = std::chrono::seconds(40);

std::string FixturePath(const std::string& name) {
  return std::string(CAGENT_SOURCE_DIR) + "/tests/egress_fixtures/" + name;
}

// The absolute path of `tool` on the host's PATH, or "" (the sandbox sees the same system
// directories, read-only).
std::string FindTool(const std::string& tool) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, end - start) + "/" + tool;
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return "";
}

// Runs a host command to completion with its output discarded; true when it exited 0.
bool HostOk(const std::string& command) {
  const std::string line = "(" + command + ") >/dev/null 2>&1";
  return std::system(line.c_str()) == 0;
}

// What the whole suite serves, built once.
struct Fixtures {
  std::string skip;   // non-empty: a tool every test needs is missing (which)
  std::string error;  // non-empty: the fixtures could not be made or served (a failure)
  std::string marker;
  std::string site;    // make_fixtures.py's output
  std::string ca_dir;  // make_ca.sh's output, or "" without openssl
  bool have_git = false;
  std::unique_ptr<FixtureServer> http;       // 127.0.0.2, plain HTTP
  std::unique_ptr<FixtureServer> https;      // 127.0.0.2, TLS with the leaf for pkgs.test
  std::unique_ptr<FixtureServer> localhost;  // 127.0.0.1, plain HTTP
};

Fixtures& Shared() {
  static Fixtures f;
  return f;
}

class EgressClients : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Fixtures& f = Shared();
    Harness& h = Harness::Get();
    if (::access(kPython, X_OK) != 0) {
      f.skip = "/usr/bin/python3 is missing: it runs the fixture servers";
      return;
    }
    if (FindTool("curl").empty()) {
      f.skip = "curl is not installed: every test here uses it";
      return;
    }
    f.marker = "egress-marker-" + std::to_string(::getpid());
    f.site = h.base() + "/egress-site";
    f.have_git = !FindTool("git").empty();
    // The content and the CA are made side by side, then the servers start side by side: a test
    // process runs one test under CTest, so this is paid per test.
    std::string make = std::string(kPython) + " '" + FixturePath("make_fixtures.py") + "' '" +
                       f.site + "' --marker " + f.marker + (f.have_git ? " --git" : "") +
                       " & site=$!";
    if (!FindTool("openssl").empty()) {
      f.ca_dir = h.base() + "/egress-ca";
      make += "; bash '" + FixturePath("make_ca.sh") + "' '" + f.ca_dir + "' || exit 1";
    }
    if (!HostOk(make + "; wait $site")) {
      f.error = "making the fixtures failed: " + make;
      return;
    }
    f.http = FixtureServer::Spawn({"--addr", "127.0.0.2", "--root", f.site}, &f.error);
    f.localhost = FixtureServer::Spawn({"--addr", "127.0.0.1", "--root", f.site}, &f.error);
    if (!f.ca_dir.empty()) {
      f.https = FixtureServer::Spawn({"--addr", "127.0.0.2", "--root", f.site, "--tls-cert",
                                      f.ca_dir + "/leaf.pem", "--tls-key", f.ca_dir + "/leaf.key"},
                                     &f.error);
    }
    for (auto* server : {&f.http, &f.localhost, &f.https}) {
      if (*server != nullptr && !(*server)->WaitForPort(&f.error)) {
        server->reset();
      }
    }
  }
  static void TearDownTestSuite() {
    Fixtures& f = Shared();
    f.http.reset();
    f.https.reset();
    f.localhost.reset();
  }

  void SetUp() override {
    if (!h_.skip_reason().empty()) {
      GTEST_SKIP() << h_.skip_reason();
    }
    if (!f_.skip.empty()) {
      GTEST_SKIP() << f_.skip;
    }
    ASSERT_EQ(f_.error, "");
    ASSERT_NE(f_.http, nullptr);
    ASSERT_NE(f_.localhost, nullptr);
    ws_ = h_.MakeDir("egress-ws");
    if (!f_.ca_dir.empty()) {
      WriteFile(ws_ + "/ca.pem", ReadFile(f_.ca_dir + "/ca.pem"));
    }
  }

  bool NeedTls() { return !f_.ca_dir.empty() && f_.https != nullptr; }

  [[nodiscard]] std::string Http() const { return f_.http->port(); }
  [[nodiscard]] std::string Https() const { return f_.https->port(); }
  // --allow-host NAME:PORT plus --resolve of pkgs.test and other.test on PORT to 127.0.0.2.
  static std::vector<std::string> Allow(const std::string& name, const std::string& port) {
    return {"--allow-host", name + ":" + port,
            "--resolve",    "pkgs.test:" + port + ":127.0.0.2",
            "--resolve",    "other.test:" + port + ":127.0.0.2"};
  }
  // `cagent exec -w WS NET... -- /bin/sh -c SCRIPT`; *seconds gets its wall time.
  RunResult Sh(const std::vector<std::string>& net, const std::string& script,
               double* seconds = nullptr) {
    std::vector<std::string> args = {"exec", "-w", ws_};
    args.insert(args.end(), net.begin(), net.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", script});
    RunOptions options;
    options.timeout = kClientTimeout;
    const auto start = std::chrono::steady_clock::now();
    RunResult r = h_.Run(args, options);
    if (seconds != nullptr) {
      *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return r;
  }
  [[nodiscard]] std::string Body() const { return "cagent-egress-fixture " + f_.marker + "\n"; }
  // The refusal cagent's proxy answers a plain-HTTP request with (issue 16's contract).
  static std::string Refusal(const std::string& host_port) {
    return "cagent: connection to " + host_port + " refused";
  }

  // cagent's own line on its stderr for a refused connection (the audit event, as printed), so a
  // twin's failure is shown to be cagent's refusal and not some other fault of the client.
  static std::string Denied(const std::string& host_port) {
    return "cagent: egress: deny " + host_port + " ";
  }

  Harness& h_ = Harness::Get();
  Fixtures& f_ = Shared();
  std::string ws_;
};

#define NEED_TOOL(tool)                                                       \
  do {                                                                        \
    if (FindTool(tool).empty()) {                                             \
      GTEST_SKIP() << (tool) << " is not installed, so this test cannot run"; \
    }                                                                         \
  } while (false)
#define NEED_TLS()                                                              \
  do {                                                                          \
    if (!NeedTls()) {                                                           \
      GTEST_SKIP() << "openssl is not installed: no test CA, so no TLS server"; \
    }                                                                           \
  } while (false)

// ---- curl, plain HTTP through the proxy (the proxy variables set inside) ----

TEST_F(EgressClients, CurlFetchesOverHttpFromAnAllowedHost) {
  const RunResult r =
      Sh(Allow("pkgs.test", Http()), "curl -sS --max-time 20 http://pkgs.test:" + Http() + "/f");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, Body());
}

TEST_F(EgressClients, CurlOverHttpToAHostNotAllowedGets403NamingTheHostAndTheRule) {
  // Twin of the test above: the same URL, only other.test allowed.
  const RunResult r =
      Sh(Allow("other.test", Http()),
         "curl -sS --max-time 20 -w '\\n%{http_code}\\n' http://pkgs.test:" + Http() + "/f");
  EXPECT_EQ(r.exit_code, 0) << r.err;  // curl without --fail: the 403's body is its output
  EXPECT_THAT(r.out, Not(HasSubstr(f_.marker)));
  EXPECT_THAT(r.out, HasSubstr("\n403\n"));
  EXPECT_THAT(r.out, HasSubstr(Refusal("pkgs.test:" + Http())));
  EXPECT_THAT(r.out, HasSubstr("(rule: "));
}

// ---- curl through SOCKS5 (ALL_PROXY, socks5h: the proxy resolves the name) ----

TEST_F(EgressClients, CurlThroughSocks5FetchesFromAnAllowedHost) {
  const RunResult r =
      Sh(Allow("pkgs.test", Http()),
         "curl -sS --max-time 20 -x \"$ALL_PROXY\" http://pkgs.test:" + Http() + "/f");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, Body());
}

TEST_F(EgressClients, CurlThroughSocks5ToAHostNotAllowedIsRefused) {
  // Twin of the test above.
  const RunResult r =
      Sh(Allow("other.test", Http()),
         "curl -sS --max-time 20 -x \"$ALL_PROXY\" http://pkgs.test:" + Http() + "/f");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, Not(HasSubstr(f_.marker)));
  EXPECT_THAT(r.err, HasSubstr(Denied("pkgs.test:" + Http())));
}

// ---- curl, HTTPS through CONNECT, with the test CA ----

TEST_F(EgressClients, CurlFetchesOverHttpsThroughConnectWithTheTestCa) {
  NEED_TLS();
  const RunResult r =
      Sh(Allow("pkgs.test", Https()),
         "curl -sS --max-time 20 --cacert " + ws_ + "/ca.pem https://pkgs.test:" + Https() + "/f");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, Body());
}

TEST_F(EgressClients, CurlOverHttpsToAHostNotAllowedFailsTheConnect) {
  NEED_TLS();
  // Twin of the test above.
  const RunResult r =
      Sh(Allow("other.test", Https()),
         "curl -sS --max-time 20 --cacert " + ws_ + "/ca.pem https://pkgs.test:" + Https() + "/f");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, Not(HasSubstr(f_.marker)));
  EXPECT_THAT(r.err, HasSubstr("CONNECT tunnel failed, response 403"));
  EXPECT_THAT(r.err, HasSubstr(Denied("pkgs.test:" + Https())));
}

// ---- the SNI must match the CONNECT host (no domain fronting through an allowed name) ----

// openssl s_client through the proxy: CONNECT pkgs.test:PORT, then a ClientHello naming `sni`,
// then a GET of /f. The leaf certificate covers both names, so only the proxy's check differs.
std::string SClient(const std::string& ws, const std::string& port, const std::string& sni) {
  return "printf 'GET /f HTTP/1.0\\r\\nHost: pkgs.test\\r\\n\\r\\n' | timeout 20 openssl s_client "
         "-quiet -ign_eof -verify_return_error -CAfile " +
         ws + "/ca.pem -proxy 127.0.0.1:3128 -connect pkgs.test:" + port + " -servername " + sni;
}

TEST_F(EgressClients, TlsWhoseSniIsTheConnectHostPasses) {
  NEED_TLS();
  NEED_TOOL("openssl");
  const RunResult r = Sh(Allow("pkgs.test", Https()), SClient(ws_, Https(), "pkgs.test"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(Body()));
}

TEST_F(EgressClients, TlsWhoseSniIsAnotherHostThanTheConnectHostIsRefused) {
  NEED_TLS();
  NEED_TOOL("openssl");
  // Twin of the test above: the same CONNECT, the ClientHello names other.test.
  const RunResult r = Sh(Allow("pkgs.test", Https()), SClient(ws_, Https(), "other.test"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, Not(HasSubstr(f_.marker)));
  // cagent's refusal names the server name the ClientHello carried.
  EXPECT_THAT(r.err, HasSubstr(Denied("pkgs.test:" + Https())));
  EXPECT_THAT(r.err, HasSubstr("other.test"));
  // curl's way of fronting: CONNECT to the allowed pkgs.test, TLS (SNI, Host) for other.test.
  const RunResult c =
      Sh(Allow("pkgs.test", Https()),
         "curl -sS --max-time 20 --cacert " + ws_ + "/ca.pem --connect-to other.test:" + Https() +
             ":pkgs.test:" + Https() + " https://other.test:" + Https() + "/f");
  EXPECT_NE(c.exit_code, 0);
  EXPECT_THAT(c.out, Not(HasSubstr(f_.marker)));
}

// ---- git clone over dumb HTTP(S) (git honours http_proxy / https_proxy) ----

TEST_F(EgressClients, GitClonesOverHttpAndHttpsFromAnAllowedHost) {
  NEED_TOOL("git");
  ASSERT_TRUE(f_.have_git);
  std::vector<std::string> net = Allow("pkgs.test", Http());
  std::string script = "export GIT_TERMINAL_PROMPT=0; git clone -q http://pkgs.test:" + Http() +
                       "/repo.git c1 && cat c1/README";
  if (NeedTls()) {
    net.insert(net.end(), {"--allow-host", "pkgs.test:" + Https(), "--resolve",
                           "pkgs.test:" + Https() + ":127.0.0.2"});
    script += " && GIT_SSL_CAINFO=" + ws_ + "/ca.pem git clone -q https://pkgs.test:" + Https() +
              "/repo.git c2 && cat c2/README";
  }
  const RunResult r = Sh(net, script);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, NeedTls() ? f_.marker + "\n" + f_.marker + "\n" : f_.marker + "\n");
}

TEST_F(EgressClients, GitCloneFromAHostNotAllowedFails) {
  NEED_TOOL("git");
  ASSERT_TRUE(f_.have_git);
  // Twin of the test above.
  const RunResult r =
      Sh(Allow("other.test", Http()),
         "export GIT_TERMINAL_PROMPT=0; git clone -q http://pkgs.test:" + Http() + "/repo.git c1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("403"));
  EXPECT_THAT(r.err, HasSubstr(Denied("pkgs.test:" + Http())));
  EXPECT_FALSE(std::filesystem::exists(ws_ + "/c1/README"));
}

// ---- pip install from a local PEP 503 index ----

// pip on plain HTTP needs --trusted-host for a name that is not loopback; --isolated keeps the
// caller's PIP_* variables and pip.conf out; --target puts the package in the workspace.
std::string PipInstall(const std::string& ws, const std::string& port) {
  return std::string(kPython) +
         " -m pip install -q --isolated --no-cache-dir --disable-pip-version-check --no-input "
         "--retries 0 --timeout 10 --trusted-host pkgs.test --target " +
         ws + "/site --index-url http://pkgs.test:" + port + "/simple tinypkg";
}

TEST_F(EgressClients, PipInstallsFromAnAllowedIndex) {
  if (!HostOk(std::string(kPython) + " -m pip --version")) {
    GTEST_SKIP() << "pip is not installed for /usr/bin/python3 (Debian: python3-pip)";
  }
  const RunResult r =
      Sh(Allow("pkgs.test", Http()), PipInstall(ws_, Http()) + " && PYTHONPATH=" + ws_ + "/site " +
                                         kPython + " -c 'import tinypkg; print(tinypkg.MARKER)'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(f_.marker + "\n"));
}

TEST_F(EgressClients, PipInstallFromAnIndexNotAllowedFails) {
  if (!HostOk(std::string(kPython) + " -m pip --version")) {
    GTEST_SKIP() << "pip is not installed for /usr/bin/python3 (Debian: python3-pip)";
  }
  // Twin of the test above.
  const RunResult r = Sh(Allow("other.test", Http()), PipInstall(ws_, Http()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(Denied("pkgs.test:" + Http())));
  EXPECT_FALSE(std::filesystem::exists(ws_ + "/site/tinypkg/__init__.py"));
}

// ---- npm install from a local registry ----

// npm reads the proxy from HTTP_PROXY/http_proxy itself (@npmcli/agent); an empty --userconfig
// and a --cache in the workspace keep the caller's ~/.npmrc and cache out.
std::string NpmInstall(const std::string& ws, const std::string& port) {
  return "mkdir -p proj && cd proj && printf "
         "'{\"name\":\"p\",\"version\":\"1.0.0\",\"private\":true}' "
         "> package.json && : > ../npmrc && npm install --userconfig " +
         ws + "/npmrc --cache " + ws + "/npm-cache --registry http://pkgs.test:" + port +
         "/npm/ tinypkg --no-audit --no-fund --fetch-retries=0 --fetch-timeout=10000";
}

TEST_F(EgressClients, NpmInstallsFromAnAllowedRegistry) {
  NEED_TOOL("npm");
  NEED_TOOL("node");
  const RunResult r = Sh(Allow("pkgs.test", Http()),
                         NpmInstall(ws_, Http()) +
                             " >/dev/null && node -e 'console.log(require(\"tinypkg\").marker)'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, f_.marker + "\n");
}

TEST_F(EgressClients, NpmInstallFromARegistryNotAllowedFails) {
  NEED_TOOL("npm");
  NEED_TOOL("node");
  // Twin of the test above.
  const RunResult r = Sh(Allow("other.test", Http()), NpmInstall(ws_, Http()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(Denied("pkgs.test:" + Http())));
  EXPECT_FALSE(std::filesystem::exists(ws_ + "/proj/node_modules/tinypkg/index.js"));
}

// ---- clients that ignore the proxy variables: the DNS stub and transparent capture ----

std::string UrllibGet(const std::string& url) {
  return std::string(kPython) +
         " -c 'import urllib.request as u; o = u.build_opener(u.ProxyHandler({})); "
         "print(o.open(\"" +
         url + "\", timeout=20).read().decode(), end=\"\")'";
}

TEST_F(EgressClients, ClientsIgnoringTheProxyVariablesAreCapturedWhenAllowed) {
  const std::string url = "http://pkgs.test:" + Http() + "/f";
  const RunResult r =
      Sh(Allow("pkgs.test", Http()),
         "curl -sS --max-time 20 --noproxy '*' " + url +
             " && env -u http_proxy -u HTTP_PROXY -u all_proxy -u ALL_PROXY " + UrllibGet(url));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, Body() + Body());
}

TEST_F(EgressClients, ClientsIgnoringTheProxyVariablesAreRefusedAtOnceWhenNotAllowed) {
  // Twin of the test above. A name not allowed, and an allowed name on a port not allowed: both
  // fail within seconds (an immediate refusal, never a hang until curl's own 20 s timeout).
  const std::string url = "http://pkgs.test:" + Http() + "/f";
  double seconds = 0;
  const RunResult r =
      Sh(Allow("other.test", Http()), "curl -sS --max-time 20 --noproxy '*' " + url, &seconds);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, Not(HasSubstr(f_.marker)));
  EXPECT_LT(seconds, 8.0) << r.err;
  const RunResult u = Sh(Allow("other.test", Http()), UrllibGet(url), &seconds);
  EXPECT_NE(u.exit_code, 0);
  EXPECT_THAT(u.out, Not(HasSubstr(f_.marker)));
  EXPECT_LT(seconds, 8.0) << u.err;
  // pkgs.test allowed, but on another port than the one asked for.
  const std::string other_port = f_.https != nullptr ? Https() : "9";
  const RunResult p = Sh({"--allow-host", "pkgs.test:" + other_port, "--resolve",
                          "pkgs.test:" + other_port + ":127.0.0.2"},
                         "curl -sS --max-time 20 --noproxy '*' " + url, &seconds);
  EXPECT_NE(p.exit_code, 0);
  EXPECT_THAT(p.out, Not(HasSubstr(f_.marker)));
  EXPECT_LT(seconds, 8.0) << p.err;
}

// ---- a name that resolves into loopback (DNS rebinding onto the host's own services) ----

// curl through the proxy even for localhost (NO_PROXY lists it: --noproxy '' overrides that).
std::string CurlLocalhost(const std::string& port) {
  return "curl -sS --max-time 20 --noproxy '' -x \"$http_proxy\" -w '\\n%{http_code}\\n' "
         "http://localhost:" +
         port + "/f";
}

TEST_F(EgressClients, ANameResolvingToLoopbackIsRefusedEvenWhenAllowed) {
  const std::string port = f_.localhost->port();
  const RunResult r = Sh({"--allow-host", "localhost:" + port}, CurlLocalhost(port));
  EXPECT_THAT(r.out, Not(HasSubstr(f_.marker))) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\n403\n"));
  EXPECT_THAT(r.out, HasSubstr(Refusal("localhost:" + port)));
}

TEST_F(EgressClients, ANameResolvingToLoopbackIsReachedWhenTheOperatorResolvesIt) {
  // Twin of the test above: the operator's --resolve names the loopback address.
  const std::string port = f_.localhost->port();
  const RunResult r =
      Sh({"--allow-host", "localhost:" + port, "--resolve", "localhost:" + port + ":127.0.0.1"},
         CurlLocalhost(port));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, Body() + "\n200\n");
}

// ---- a profile's hosts section (the same proxy, decided by the profile's rules) ----

TEST_F(EgressClients, AProfilesDenyBeatsItsWildcardAllowAndTheRefusalNamesTheDenyRule) {
  // One run, its own twin: pkgs.test and other.test both match the wildcard allow; other.test is
  // also denied, and deny beats allow.
  const std::string port = Http();
  const std::string profile = ws_ + "/egress.cagent";
  WriteFile(profile, "description \"egress e2e\"\nextends backend\nhosts {\n  allow *.test:" +
                         port + "\n  deny other.test:" + port + "\n}\n");
  h_.GiveToRunUser(ws_);
  const std::string curl = "curl -sS --max-time 20 -w '\\n%{http_code}\\n' http://";
  std::vector<std::string> args = {"exec", "-w", ws_, "--profile", profile};
  const std::vector<std::string> resolve = Allow("unused.test", port);
  args.insert(args.end(), resolve.begin() + 2, resolve.end());  // the --resolve pairs only
  args.insert(args.end(),
              {"--", "/bin/sh", "-c",
               curl + "pkgs.test:" + port + "/f; " + curl + "other.test:" + port + "/f"});
  RunOptions options;
  options.timeout = kClientTimeout;
  const RunResult r = h_.Run(args, options);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(Body() + "\n200\n"));
  EXPECT_THAT(r.out, HasSubstr(Refusal("other.test:" + port)));
  EXPECT_THAT(r.out, HasSubstr("(rule: hosts: deny other.test:" + port + ")"));
  EXPECT_THAT(r.out, HasSubstr("\n403\n"));
}

TEST_F(EgressClients, AllowHostIsRefusedWithAProfile) {
  // Widening options are refused with --profile, --allow-host among them.
  const std::string profile = ws_ + "/egress.cagent";
  WriteFile(profile, "description \"egress e2e\"\nextends base\n");
  const RunResult r = h_.Run({"exec", "-w", ws_, "--profile", profile, "--allow-host",
                              "pkgs.test:" + Http(), "--", "true"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--allow-host"));
}

}  // namespace
}  // namespace cagent::testing
