// End-to-end tests of `cagent policy explain --host` and of `policy check`/`policy test` on
// hosts rules: the real binary, the same output shape and exit codes as the other requests
// (0 allow, 6 ask, 5 deny, 2 usage).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class PolicyHostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    dir_ = h_.MakeDir("hosts");
    profile_ = dir_ + "/egress.cagent";
    WriteFile(profile_,
              "network loopback\n"
              "approval on-request\n"
              "hosts {\n"
              "  allow pypi.org:443\n"
              "  ask *.example.com\n"
              "  deny evil.example.com\n"
              "  allow [fd00::5]:8443\n"
              "}\n");
  }

  RunResult Run(const std::vector<std::string>& args) const {
    RunOptions o;
    o.cwd = dir_;
    return h_.Run(args, o);
  }

  static std::string Describe(const RunResult& r) {
    return "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
  }

  Harness& h_ = Harness::Get();
  std::string dir_, profile_;
};

TEST_F(PolicyHostsTest, ExplainAllowedHost) {
  const RunResult r = Run({"policy", "explain", profile_, "--host", "PyPI.org"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("request:   host PyPI.org:443\n"));
  EXPECT_THAT(r.out, HasSubstr("verdict:   allow\n"));
  EXPECT_THAT(r.out, HasSubstr("rule:      hosts: allow pypi.org:443\n"));
  EXPECT_THAT(r.out, HasSubstr("egress.cagent:4:9\n"));
  EXPECT_THAT(r.out, HasSubstr("reason:    the profile allows connections to this host\n"));
}

TEST_F(PolicyHostsTest, ExplainAskedHostExitsSix) {
  const RunResult r = Run({"policy", "explain", profile_, "--host", "files.example.com:80"});
  EXPECT_EQ(r.exit_code, 6) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("verdict:   ask\n"));
  EXPECT_THAT(r.out, HasSubstr("rule:      hosts: ask *.example.com\n"));
}

TEST_F(PolicyHostsTest, ExplainDeniedHostsExitFive) {
  RunResult r = Run({"policy", "explain", profile_, "--host", "evil.example.com:443"});
  EXPECT_EQ(r.exit_code, 5) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("rule:      hosts: deny evil.example.com\n"));
  // The port matters: pypi.org is allowed on 443 only.
  r = Run({"policy", "explain", profile_, "--host", "pypi.org:80"});
  EXPECT_EQ(r.exit_code, 5) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("reason:    no hosts rule allows pypi.org:80\n"));
}

TEST_F(PolicyHostsTest, ExplainIpv6AsJson) {
  const RunResult r =
      Run({"policy", "explain", profile_, "--host", "[fd00:0:0::5]:8443", "--json"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << Describe(r);
  EXPECT_EQ(j["request"]["kind"], "host");
  EXPECT_EQ(j["request"]["host"], "fd00:0:0::5");
  EXPECT_EQ(j["request"]["port"], 8443);
  EXPECT_EQ(j["rule"], "hosts: allow [fd00::5]:8443");
  EXPECT_EQ(j["verdict"], "allow");
}

TEST_F(PolicyHostsTest, ExplainWithoutAHostsSectionSaysSo) {
  const RunResult r = Run({"policy", "explain", "backend", "--host", "pypi.org"});
  EXPECT_EQ(r.exit_code, 5) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("the profile has no hosts section"));
  // Its twin: the opt-in child allows it.
  const RunResult twin = Run({"policy", "explain", "backend-registries", "--host", "pypi.org"});
  EXPECT_EQ(twin.exit_code, 0) << Describe(twin);
}

TEST_F(PolicyHostsTest, ExplainRejectsABadPort) {
  const RunResult r = Run({"policy", "explain", profile_, "--host", "pypi.org:0"});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("invalid port '0'"));
  const RunResult two =
      Run({"policy", "explain", profile_, "--host", "pypi.org", "--read", "/etc/passwd"});
  EXPECT_EQ(two.exit_code, 2) << Describe(two);
  EXPECT_THAT(two.err, HasSubstr("one request at a time"));
}

TEST_F(PolicyHostsTest, CasesFileWithHostRequests) {
  WriteFile(dir_ + "/t.cases",
            "allow host pypi.org:443\n"
            "ask host a.example.com\n"
            "deny host evil.example.com\n"
            "deny host pypi.org:8080\n");
  const RunResult r = Run({"policy", "test", profile_, dir_ + "/t.cases"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  // Its twin: a wrong expectation fails.
  WriteFile(dir_ + "/bad.cases", "allow host evil.example.com\n");
  const RunResult bad = Run({"policy", "test", profile_, dir_ + "/bad.cases"});
  EXPECT_NE(bad.exit_code, 0) << Describe(bad);
}

TEST_F(PolicyHostsTest, CheckRegistriesProfiles) {
  const RunResult r = Run({"policy", "check", "backend-registries", "frontend-registries"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("ok: backend-registries"));
  EXPECT_THAT(r.out, HasSubstr("ok: frontend-registries"));
}

}  // namespace
}  // namespace cagent::testing
