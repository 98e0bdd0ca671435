// A sandbox without network beyond loopback (issue #32, "no network looks like a broken network"):
// under --profile frontend (network loopback, no hosts section) a name lookup fails at once with a
// permanent "no such name" (cagent's DNS stub answers NXDOMAIN), /etc/hosts still resolves, the
// host's resolver is not named inside, and cagent says once, even with -q, why and how to allow a
// host. Under network none the same lookup fails the same way without any socket. With filtered
// egress, a name resolving to a loopback address gets the --resolve hint. Nothing here contacts a
// non-loopback address: every lookup is answered inside the sandbox's own network namespace.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kHintMark = "has no network beyond loopback (network loopback)";

std::size_t Count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// The nameserver addresses of the host's /etc/resolv.conf.
std::vector<std::string> HostNameservers() {
  std::vector<std::string> out;
  std::istringstream in(ReadFile("/etc/resolv.conf"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key, value;
    if (words >> key >> value && key == "nameserver") out.push_back(value);
  }
  return out;
}

class NoNetworkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    ws_ = h_.MakeDir("nonet");
    // The probe in the workspace: a profile's view cannot be widened with --ro.
    ASSERT_EQ(std::system(("cp " + h_.probe() + " " + ws_ + "/probe").c_str()), 0);
    h_.GiveToRunUser(ws_);
  }
  RunResult Exec(const std::vector<std::string>& options, const std::string& script) {
    std::vector<std::string> args = {"exec", "-w", ws_};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", script});
    return h_.RunJson(args);
  }
  Harness& h_ = Harness::Get();
  std::string ws_;
};

TEST_F(NoNetworkTest, ALookupIsNoSuchNameAtOnceAndLocalhostStillResolves) {
  const RunResult r = Exec(
      {"--profile", "frontend", "--json"},
      "getent hosts example.com; echo \"first=$?\"; getent hosts example.com; "
      "echo \"second=$?\"; getent hosts localhost >/dev/null; echo \"localhost=$?\"; "
      "./probe resolve example.com; ./probe resolve localhost; echo ---; cat /etc/resolv.conf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // getent's exit status 2: "one or more supplied key could not be found".
  EXPECT_THAT(r.out, HasSubstr("first=2\n"));
  EXPECT_THAT(r.out, HasSubstr("second=2\n"));
  EXPECT_THAT(r.out, HasSubstr("localhost=0\n")) << "/etc/hosts still answers first";
  EXPECT_THAT(r.out, HasSubstr("fail EAI_NONAME")) << "a permanent error, not EAI_AGAIN";
  EXPECT_THAT(r.out, Not(HasSubstr("EAI_AGAIN")));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("ok (127\\.0\\.0\\.1|::1)\n"));
  const std::string resolv = r.out.substr(r.out.find("---"));
  EXPECT_THAT(resolv, HasSubstr("nameserver 127.0.0.1\n"));
  for (const std::string& ns : HostNameservers()) {
    if (ns == "127.0.0.1") continue;  // the stub's own address, inside the sandbox's namespace
    EXPECT_THAT(resolv, Not(HasSubstr(ns))) << "the host's resolver is named inside";
  }
  // One line for every lookup (getent asks twice, and A and AAAA each time), naming the profile,
  // its mode and the ways to allow a host.
  EXPECT_EQ(Count(r.err, kHintMark), 1U) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cagent: network: profile 'frontend' has no network beyond "
                               "loopback (network loopback), so every name lookup (example.com "
                               "first) answers \"no such name\""));
  EXPECT_THAT(r.err, HasSubstr("a hosts section"));
  EXPECT_THAT(r.err, HasSubstr("--profile backend-registries or frontend-registries"));
  EXPECT_THAT(r.err, HasSubstr("cagent exec --allow-host HOST without --profile"));
  const json j = json::parse(r.json, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.json;
  EXPECT_TRUE(j["egress"].is_null()) << "no filtered egress";
  EXPECT_EQ(j["network_refusals"]["refused"], json::array({"example.com (lookup)"}));
  EXPECT_EQ(j["network_refusals"]["hints"].size(), 1U);
  EXPECT_GE(j["network_refusals"]["lookups_refused"].get<int>(), 2);
}

TEST_F(NoNetworkTest, QuietKeepsTheHintLine) {
  const RunResult r = Exec({"--profile", "frontend", "-q"}, "getent hosts example.com");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Count(r.err, kHintMark), 1U) << "-q drops the outcome line, not the cause:\n" << r.err;
}

TEST_F(NoNetworkTest, WithTtyTheHintComesAfterTheTerminalIsGivenBack) {
  // --tty without a terminal still gives the command a pty of its own, relayed to stdout; the
  // hint is cagent's, on its stderr, printed once the command's terminal is closed.
  const RunResult r = Exec({"--profile", "frontend", "--tty"},
                           "getent hosts example.com; getent hosts example.com; echo done");
  EXPECT_THAT(r.out, HasSubstr("done"));
  EXPECT_THAT(r.out, Not(HasSubstr("network:"))) << "the hint went into the command's terminal";
  EXPECT_EQ(Count(r.err, kHintMark), 1U) << r.err;
}

TEST_F(NoNetworkTest, TheDefaultViewNamesAllowHost) {
  const RunResult r = Exec({}, "getent hosts pypi.org");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("cagent exec without a profile has no network beyond loopback"));
  EXPECT_THAT(r.err, HasSubstr("to let the command reach a host: --allow-host HOST"));
}

TEST_F(NoNetworkTest, WithoutTheStubTheSameLookupIsATemporaryFailure) {
  // The twin of the tests above: a network namespace with lo only and the host's resolv.conf,
  // which is what the sandbox had before (made here with unshare on the host, outside cagent).
  // The host's resolver cannot be reached from it, and glibc reports that as EAI_AGAIN, which
  // clients retry. No packet leaves the namespace: it has no route.
  if (std::system("command -v unshare >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "unshare(1) is not installed, so the namespace without the stub cannot be made";
  }
  const std::string out = ws_ + "/twin.out";
  const int rc = h_.ShAsUser(ws_, "unshare -rn sh -c './probe resolve example.com' > " + out);
  if (rc != 0 && rc != 1) {
    GTEST_SKIP() << "unshare -rn failed here (exit " << rc
                 << "): no unprivileged network namespace for the twin";
  }
  const std::string got = ReadFile(out);
  EXPECT_THAT(got, HasSubstr("fail EAI_AGAIN")) << got;
}

TEST_F(NoNetworkTest, NetworkNoneFailsAtOnceWithoutAServer) {
  const RunResult r =
      Exec({"--profile", "frontend", "--network", "none"},
           "./probe resolve example.com; getent hosts localhost >/dev/null; echo \"localhost=$?\"; "
           "echo ---; cat /etc/resolv.conf; grep '^hosts:' /etc/nsswitch.conf");
  EXPECT_THAT(r.out, HasSubstr("fail EAI_NONAME")) << r.err;
  EXPECT_THAT(r.out, HasSubstr("localhost=0\n"));
  const std::string after = r.out.substr(r.out.find("---"));
  EXPECT_THAT(after, Not(HasSubstr("nameserver")));
  EXPECT_THAT(after, HasSubstr("hosts: files"));
  EXPECT_THAT(after, Not(HasSubstr(" dns")));
  for (const std::string& ns : HostNameservers()) {
    EXPECT_THAT(after, Not(HasSubstr(ns))) << "the host's resolver is named inside";
  }
}

TEST_F(NoNetworkTest, NetworkNoneAskingDnsDirectlyIsATemporaryFailure) {
  // The twin of the test above: the same sandbox, its resolver asked directly as nsswitch's `dns`
  // source would ask it (the view's nsswitch.conf cannot be put back: --ro binds of the host's
  // file are covered by cagent's). The socket is refused (seccomp) and glibc calls that TRY_AGAIN,
  // the temporary failure getaddrinfo reports as EAI_AGAIN. Under network loopback the stub
  // answers the same question NXDOMAIN (HOST_NOT_FOUND), a permanent failure.
  const RunResult none =
      Exec({"--profile", "frontend", "--network", "none"}, "./probe res-query example.com");
  EXPECT_THAT(none.out, HasSubstr("fail TRY_AGAIN")) << none.out << none.err;
  const RunResult loopback = Exec({"--profile", "frontend"}, "./probe res-query example.com");
  EXPECT_THAT(loopback.out, HasSubstr("fail HOST_NOT_FOUND")) << loopback.out << loopback.err;
}

// npm under frontend: the error class npm reports, and the hint. npm's own retries of a temporary
// error are what made this take more than a minute before; no time is asserted here.
TEST_F(NoNetworkTest, NpmReportsENOTFOUNDAndTheHintIsPrinted) {
  if (std::system("command -v npm >/dev/null 2>&1") != 0) GTEST_SKIP() << "npm is not installed";
  const RunResult r = Exec({"--profile", "frontend"},
                           "npm view left-pad version --registry https://registry.npmjs.org/ 2>&1; "
                           "echo \"npm=$?\"");
  EXPECT_THAT(r.out, HasSubstr("ENOTFOUND")) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("EAI_AGAIN")));
  EXPECT_THAT(r.out, Not(HasSubstr("npm=0")));
  EXPECT_EQ(Count(r.err, kHintMark), 1U) << r.err;
  EXPECT_THAT(r.err, HasSubstr("registry.npmjs.org first"));
}

// Filtered egress: a name cagent resolves to a loopback address (localhost, from the host's
// /etc/hosts) is refused unless named, and the hint says how to name it.
TEST_F(NoNetworkTest, ANameResolvingToLoopbackGetsTheResolveHint) {
  if (::access("/usr/bin/curl", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/curl";
  HostTcpListener host;  // never reached: the refusal comes first
  const std::string profile = ws_ + "/local.cagent";
  WriteFile(profile, "extends backend\nhosts {\n  allow localhost:" + host.port() + "\n}\n");
  h_.GiveToRunUser(ws_);
  // Through the proxy explicitly: curl would take localhost from /etc/hosts and NO_PROXY.
  // -f: the proxy's 403 is a failure. The twin's connection reaches the listener, which never
  // answers: -m 2 ends it.
  const std::string via = " --noproxy '' -x http://127.0.0.1:3128 http://localhost:" + host.port();
  const std::string curl = "curl -fsS -m 10" + via;
  const RunResult r = Exec({"--profile", profile, "-q"}, curl + "; " + curl);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out + r.err, HasSubstr("403"));
  const std::string mark = "network: localhost resolves to ";
  EXPECT_EQ(Count(r.err, mark), 1U) << r.err;
  EXPECT_THAT(r.err, HasSubstr("a loopback address, which cagent refuses unless the address is "
                               "named"));
  EXPECT_THAT(r.err, HasSubstr("to reach it: --resolve localhost:" + host.port() + ":"));
  EXPECT_THAT(r.err, HasSubstr(", or a rule in the profile's hosts section: allow "));
  // The twin: the same request with the address named by --resolve is not refused for it.
  const RunResult named =
      Exec({"--profile", profile, "-q", "--resolve", "localhost:" + host.port() + ":127.0.0.1"},
           "curl -fsS -m 2" + via);
  EXPECT_THAT(named.err, Not(HasSubstr(mark))) << named.err;
  EXPECT_THAT(named.out + named.err, Not(HasSubstr("403")));
}

}  // namespace
}  // namespace cagent::testing
