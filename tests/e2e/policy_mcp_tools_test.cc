// End-to-end tests of `cagent policy explain --mcp-tool` and of `policy check`/`policy test` on
// MCP tool rules: the real binary, the same output shape and exit codes as the other requests
// (0 allow, 6 ask, 5 deny, 2 usage), and the built-in mcp-server profile.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class PolicyMcpToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    dir_ = h_.MakeDir("mcp-tools");
    profile_ = dir_ + "/wrap.cagent";
    WriteFile(profile_,
              "approval on-request\n"
              "tools {\n"
              "  allow read_file mcp:echo mcp:get-*\n"
              "  ask mcp:write_*\n"
              "  deny mcp:printEnv\n"
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

TEST_F(PolicyMcpToolsTest, ExplainAllowedMcpTool) {
  const RunResult r = Run({"policy", "explain", profile_, "--mcp-tool", "get-sum"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("request:   mcp-tool get-sum\n"));
  EXPECT_THAT(r.out, HasSubstr("verdict:   allow\n"));
  EXPECT_THAT(r.out, HasSubstr("rule:      tools: allow read_file mcp:echo mcp:get-*\n"));
  EXPECT_THAT(r.out, HasSubstr("wrap.cagent:3:9\n"));
  EXPECT_THAT(r.out, HasSubstr("reason:    the profile allows this MCP tool\n"));
}

TEST_F(PolicyMcpToolsTest, ExplainAskedMcpToolExitsSix) {
  const RunResult r = Run({"policy", "explain", profile_, "--mcp-tool", "write_note"});
  EXPECT_EQ(r.exit_code, 6) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("verdict:   ask\n"));
  EXPECT_THAT(r.out, HasSubstr("rule:      tools: ask mcp:write_*\n"));
}

TEST_F(PolicyMcpToolsTest, ExplainDeniedMcpToolsExitFive) {
  RunResult r = Run({"policy", "explain", profile_, "--mcp-tool", "printEnv"});
  EXPECT_EQ(r.exit_code, 5) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("rule:      tools: deny mcp:printEnv\n"));
  // No rule names it: the default, and how to allow it.
  r = Run({"policy", "explain", profile_, "--mcp-tool", "add"});
  EXPECT_EQ(r.exit_code, 5) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("rule:      default\n"));
  EXPECT_THAT(r.out, HasSubstr("reason:    no tools rule allows MCP tool 'add'; to allow it, write "
                               "`allow mcp:add` in the profile's tools section\n"));
  // cagent's own read_file is allowed; the wrapped server's read_file is not.
  r = Run({"policy", "explain", profile_, "--mcp-tool", "read_file"});
  EXPECT_EQ(r.exit_code, 5) << Describe(r);
  const RunResult own = Run({"policy", "explain", profile_, "--tool", "read_file"});
  EXPECT_EQ(own.exit_code, 0) << Describe(own);
}

TEST_F(PolicyMcpToolsTest, ExplainAsJson) {
  const RunResult r = Run({"policy", "explain", profile_, "--mcp-tool", "echo", "--json"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << Describe(r);
  EXPECT_EQ(j["request"]["kind"], "mcp-tool");
  EXPECT_EQ(j["request"]["text"], "mcp-tool echo");
  EXPECT_EQ(j["request"]["mcp_tool"], "echo");
  EXPECT_EQ(j["verdict"], "allow");
}

TEST_F(PolicyMcpToolsTest, ExplainTakesOneRequest) {
  const RunResult two =
      Run({"policy", "explain", profile_, "--mcp-tool", "echo", "--read", "/etc/passwd"});
  EXPECT_EQ(two.exit_code, 2) << Describe(two);
  EXPECT_THAT(two.err, HasSubstr("one request at a time"));
  const RunResult none = Run({"policy", "explain", profile_});
  EXPECT_EQ(none.exit_code, 2) << Describe(none);
  EXPECT_THAT(none.err, HasSubstr("--mcp-tool NAME"));
}

TEST_F(PolicyMcpToolsTest, BuiltinMcpServerProfile) {
  RunResult r = Run({"policy", "explain", "mcp-server", "--mcp-tool", "echo"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("rule:      tools: allow mcp:*\n"));
  // An invalid name is denied even there.
  r = Run({"policy", "explain", "mcp-server", "--mcp-tool", "srv/echo"});
  EXPECT_EQ(r.exit_code, 5) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("is not a valid MCP tool name"));
  r = Run({"policy", "check", "mcp-server"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("ok: mcp-server (base -> mcp-server;"));
  r = Run({"policy", "list"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("\nmcp-server "));
  // The audit reports mcp:* (low) and nothing high.
  r = Run({"policy", "audit", "mcp-server", "--format", "json"});
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("CAGENT015"));
}

TEST_F(PolicyMcpToolsTest, CasesFileWithMcpToolRequests) {
  WriteFile(dir_ + "/t.cases",
            "allow mcp-tool echo\n"
            "ask mcp-tool write_note\n"
            "deny mcp-tool printEnv\n"
            "deny mcp-tool read_file\n"
            "allow tool read_file\n");
  const RunResult r = Run({"policy", "test", profile_, dir_ + "/t.cases"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  // Its twin: a wrong expectation fails.
  WriteFile(dir_ + "/bad.cases", "allow mcp-tool printEnv\n");
  const RunResult bad = Run({"policy", "test", profile_, dir_ + "/bad.cases"});
  EXPECT_NE(bad.exit_code, 0) << Describe(bad);
  EXPECT_THAT(bad.out + bad.err, HasSubstr("mcp-tool printEnv"));
}

}  // namespace
}  // namespace cagent::testing
