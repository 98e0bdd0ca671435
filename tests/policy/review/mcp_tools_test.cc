// MCP tools in the tools section (`allow mcp:GLOB`), for `cagent mcp wrap`: the checker's
// diagnostics with their carets, Engine::McpTool's precedence and default, the separation of
// cagent's own tools from a wrapped server's, `mcp-tool` requests in examples and cases files,
// dump, JSON, diff and audit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "policy/language/dump.h"
#include "policy/language/engine.h"
#include "policy/language/loader.h"
#include "policy/review/audit.h"
#include "policy/review/cases.h"
#include "policy/review/diff.h"
#include "tests/policy/policy_test_util.h"

namespace cagent::policy {
namespace {

using ::testing::HasSubstr;
using testing::MustCompile;
using testing::MustFail;

std::string WithTools(std::string_view rules, std::string_view rest = "") {
  return "tools {\n" + std::string(rules) + "}\n" + std::string(rest);
}

std::string FirstLine(const std::string& rendered) {
  return rendered.substr(0, rendered.find('\n'));
}

// ---------------------------------------------------------------------------------------------
// The checker: each mistake with its caret

TEST(McpToolChecker, BareMcpPrefixIsAnError) {
  EXPECT_EQ(MustFail(WithTools("  allow mcp:\n")),
            "test.cagent:2:9: error: 'mcp:' needs an MCP tool name or glob\n"
            "    allow mcp:\n"
            "          ^~~~\n"
            "  hint: write mcp:NAME as the wrapped server's tools/list names it, or mcp:* for all "
            "of them\n");
}

TEST(McpToolChecker, ACharacterOutsideTheAlphabetIsPointedAt) {
  EXPECT_EQ(MustFail(WithTools("  deny mcp:srv/echo\n")),
            "test.cagent:2:15: error: invalid MCP tool glob 'mcp:srv/echo': '/' cannot be in an "
            "MCP tool name\n"
            "    deny mcp:srv/echo\n"
            "                ^\n"
            "  hint: MCP tool names are 1 to 128 characters of A-Z a-z 0-9 _ - . (a glob adds * ? "
            "and [...])\n");
  // Quoted, the caret still lands on the character (one column later for the quote).
  EXPECT_EQ(FirstLine(MustFail(WithTools("  deny \"mcp:a b\"\n"))),
            "test.cagent:2:14: error: invalid MCP tool glob \"mcp:a b\": ' ' cannot be in an MCP "
            "tool name");
  EXPECT_EQ(FirstLine(MustFail(WithTools("  deny mcp:a\\*\n"))),
            "test.cagent:2:13: error: invalid MCP tool glob 'mcp:a\\*': '\\' cannot be in an MCP "
            "tool name");
  EXPECT_EQ(FirstLine(MustFail(WithTools("  deny mcp:srv:echo\n"))),
            "test.cagent:2:15: error: invalid MCP tool glob 'mcp:srv:echo': ':' cannot be in an "
            "MCP tool name");
}

TEST(McpToolChecker, SetsAreNameCharactersOnly) {
  EXPECT_NE(MustCompile(WithTools("  allow mcp:get-[a-z]* mcp:[!_]x mcp:v[^0-9]\n")), nullptr);
  EXPECT_EQ(FirstLine(MustFail(WithTools("  allow mcp:[a/]\n"))),
            "test.cagent:2:15: error: invalid MCP tool glob 'mcp:[a/]': '/' cannot be in an MCP "
            "tool name");
  EXPECT_EQ(FirstLine(MustFail(WithTools("  allow mcp:[]x]\n"))),
            "test.cagent:2:14: error: invalid MCP tool glob 'mcp:[]x]': ']' cannot be in an MCP "
            "tool name");
  EXPECT_EQ(FirstLine(MustFail(WithTools("  allow mcp:[[:alpha:]]\n"))),
            "test.cagent:2:14: error: invalid MCP tool glob 'mcp:[[:alpha:]]': '[' cannot be in "
            "an MCP tool name");
  EXPECT_EQ(MustFail(WithTools("  allow mcp:get-[a-z\n")),
            "test.cagent:2:17: error: invalid MCP tool glob 'mcp:get-[a-z': unterminated '['\n"
            "    allow mcp:get-[a-z\n"
            "                  ^\n"
            "  hint: close the set with ']': mcp:get-[a-z]*\n");
  EXPECT_EQ(FirstLine(MustFail(WithTools("  allow mcp:a]\n"))),
            "test.cagent:2:14: error: invalid MCP tool glob 'mcp:a]': ']' cannot be in an MCP "
            "tool name");
}

TEST(McpToolChecker, AGlobOnlyLongerNamesCouldMatchIsAnError) {
  EXPECT_NE(MustCompile(WithTools("  allow mcp:" + std::string(128, 'a') + "*\n")), nullptr);
  EXPECT_EQ(FirstLine(MustFail(WithTools("  allow mcp:" + std::string(128, 'a') + "?\n"))),
            "test.cagent:2:9: error: invalid MCP tool glob 'mcp:" + std::string(128, 'a') +
                "?': it matches only names longer than 128 characters");
}

TEST(McpToolChecker, OnDoesNotApplyToMcpTools) {
  EXPECT_EQ(MustFail(WithTools("  allow read_file mcp:read_file on src/**\n")),
            "test.cagent:2:33: error: 'on' does not apply to MCP tools: cagent cannot judge "
            "their arguments\n"
            "    allow read_file mcp:read_file on src/**\n"
            "                                  ^~\n"
            "  hint: write the mcp: words in a rule of their own, without 'on'; the sandbox "
            "confines what a wrapped server's tools can reach\n");
  // Twin: without the mcp: word the same rule compiles.
  EXPECT_NE(MustCompile(WithTools("  allow read_file on src/**\n")), nullptr);
}

TEST(McpToolChecker, UnknownToolHintMentionsMcp) {
  EXPECT_EQ(FirstLine(MustFail(WithTools("  allow echo\n"))),
            "test.cagent:2:9: error: unknown tool 'echo'");
  EXPECT_THAT(MustFail(WithTools("  allow echo\n")),
              HasSubstr("; a wrapped MCP server's tool is mcp:NAME"));
}

TEST(McpToolChecker, RuleTextIsSortedAndUnique) {
  auto p = MustCompile(WithTools("  allow mcp:zeta mcp:alpha grep mcp:zeta read_file\n"));
  ASSERT_EQ(p->tools.size(), 1u);
  const ToolRule& r = p->tools[0];
  EXPECT_EQ(r.text, "read_file grep mcp:alpha mcp:zeta");
  ASSERT_EQ(r.mcp_tools.size(), 2u);
  EXPECT_EQ(r.mcp_tools[0].pattern(), "alpha");
  EXPECT_TRUE(r.paths.empty());
}

// ---------------------------------------------------------------------------------------------
// The engine

TEST(McpToolEngine, AllowedByNameAndByGlob) {
  auto p = MustCompile(WithTools("  allow mcp:echo mcp:get-*\n"));
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.McpTool("echo"), "tools: allow mcp:echo mcp:get-*");
  EXPECT_ALLOW(e.McpTool("get-sum"), "tools: allow mcp:echo mcp:get-*");
  EXPECT_ALLOW(e.McpTool("get-"), "tools: allow mcp:echo mcp:get-*");
  EXPECT_DENY(e.McpTool("Echo"), "default");  // names are case-sensitive
  EXPECT_DENY(e.McpTool("echo2"), "default");
  EXPECT_DENY(e.McpTool("printEnv"), "default");
  // The same decision through Decide(Request).
  EXPECT_ALLOW(e.Decide(Request::McpTool("get-sum")), "tools: allow mcp:echo mcp:get-*");
  EXPECT_DENY(e.Decide(Request::McpTool("printEnv")), "default");
}

TEST(McpToolEngine, DefaultDenySaysHowToAllow) {
  auto p = MustCompile(WithTools("  allow mcp:echo\n"));
  Engine e(*p, PortableBinding());
  const Decision d = e.McpTool("printEnv");
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.rule, "default");
  EXPECT_FALSE(d.loc.valid());
  EXPECT_EQ(d.reason,
            "no tools rule allows MCP tool 'printEnv'; to allow it, write `allow mcp:printEnv` in "
            "the profile's tools section");
}

TEST(McpToolEngine, PrecedenceDenyOverAskOverAllow) {
  auto p = MustCompile(
      WithTools("  allow mcp:*\n  ask mcp:write_*\n  deny mcp:write_secrets mcp:printEnv\n"));
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.McpTool("echo"), "tools: allow mcp:*");
  EXPECT_ASK(e.McpTool("write_file"), "tools: ask mcp:write_*");
  EXPECT_DENY(e.McpTool("write_secrets"), "tools: deny mcp:printEnv mcp:write_secrets");
  EXPECT_DENY(e.McpTool("printEnv"), "tools: deny mcp:printEnv mcp:write_secrets");
  EXPECT_EQ(e.McpTool("write_file").reason, "the profile asks a person before this MCP tool call");
  EXPECT_EQ(e.McpTool("printEnv").reason, "the profile forbids this MCP tool");
  EXPECT_EQ(e.McpTool("echo").reason, "the profile allows this MCP tool");
}

TEST(McpToolEngine, PrecedenceHoldsWhicheverOrderTheRulesAreWritten) {
  // Twins of the test above with the rules in the other order and across a chain: the verdict
  // does not depend on where a rule is written.
  auto reversed = MustCompile(WithTools("  deny mcp:printEnv\n  ask mcp:*\n  allow mcp:p*\n"));
  Engine e(*reversed, PortableBinding());
  EXPECT_DENY(e.McpTool("printEnv"), "tools: deny mcp:printEnv");
  EXPECT_ASK(e.McpTool("ping"), "tools: ask mcp:*");
  // Without the deny, the same name is asked; without the ask, allowed.
  auto no_deny = MustCompile(WithTools("  ask mcp:*\n  allow mcp:p*\n"));
  EXPECT_ASK(Engine(*no_deny, PortableBinding()).McpTool("printEnv"), "tools: ask mcp:*");
  auto no_ask = MustCompile(WithTools("  allow mcp:p*\n"));
  EXPECT_ALLOW(Engine(*no_ask, PortableBinding()).McpTool("printEnv"), "tools: allow mcp:p*");
}

TEST(McpToolEngine, BuiltInToolNamesNeverMatchAnMcpCall) {
  // server-filesystem has a tool called read_file: `allow read_file` is about cagent's own.
  auto p = MustCompile(WithTools("  allow read_file list_dir\n"));
  Engine e(*p, PortableBinding());
  const Decision d = e.McpTool("read_file");
  EXPECT_DENY(d, "default");
  EXPECT_THAT(d.reason, HasSubstr("write `allow mcp:read_file`"));
  EXPECT_THAT(d.reason, HasSubstr("a bare 'read_file' in tools names cagent's own tool"));
  // Twin: mcp:read_file allows the wrapped server's read_file.
  auto q = MustCompile(WithTools("  allow mcp:read_file\n"));
  EXPECT_ALLOW(Engine(*q, PortableBinding()).McpTool("read_file"), "tools: allow mcp:read_file");
}

TEST(McpToolEngine, McpWordsNeverMatchACallOfCagentsOwnTools) {
  auto p = MustCompile(WithTools("  allow mcp:*\n"));
  Engine e(*p, PortableBinding());
  EXPECT_DENY(e.Decide(Request::ToolCall(Tool::kReadFile, "src/a.c")), "default");
  EXPECT_DENY(e.Decide(Request::ToolCall(Tool::kFinish)), "default");
  // Twin: the built-in name allows it.
  auto q = MustCompile(WithTools("  allow mcp:* finish\n"));
  EXPECT_ALLOW(Engine(*q, PortableBinding()).Decide(Request::ToolCall(Tool::kFinish)),
               "tools: allow finish mcp:*");
}

TEST(McpToolEngine, AMixedRuleDecidesBothKinds) {
  auto p = MustCompile(WithTools("  allow grep mcp:search\n"));
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.McpTool("search"), "tools: allow grep mcp:search");
  EXPECT_ALLOW(e.Decide(Request::ToolCall(Tool::kGrep)), "tools: allow grep mcp:search");
  EXPECT_DENY(e.McpTool("grep"), "default");
  EXPECT_DENY(e.Decide(Request::ToolCall(Tool::kListDir, "src")), "default");
}

TEST(McpToolEngine, InvalidNamesAreDeniedEvenUnderAllowAll) {
  auto p = MustCompile(WithTools("  allow mcp:*\n"));
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.McpTool(std::string(128, 'a')), "tools: allow mcp:*");
  // The rule's glob alone would match them: the name check is what denies.
  ASSERT_TRUE(p->tools[0].mcp_tools[0].Match("a b"));
  ASSERT_TRUE(p->tools[0].mcp_tools[0].Match("\x1b[2J"));
  for (const std::string& bad :
       {std::string(), std::string(129, 'a'), std::string("a b"), std::string("srv/echo"),
        std::string("echo\n"), std::string("\x1b[2J"), std::string("caf\xc3\xa9")}) {
    const Decision d = e.McpTool(bad);
    EXPECT_DENY(d, "default") << bad;
    EXPECT_THAT(d.reason, HasSubstr("is not a valid MCP tool name")) << bad;
  }
  // The name is shown escaped and cut short.
  EXPECT_THAT(e.McpTool("\x1b[2J").reason, HasSubstr("\"\\x1b[2J\""));
  EXPECT_THAT(e.McpTool(std::string(200, 'x')).reason, HasSubstr("...\" (200 bytes)"));
}

TEST(McpToolNames, Alphabet) {
  EXPECT_TRUE(IsMcpToolName("get_sum-v2.1"));
  EXPECT_TRUE(IsMcpToolName("A"));
  EXPECT_FALSE(IsMcpToolName(""));
  EXPECT_FALSE(IsMcpToolName("a:b"));
  EXPECT_FALSE(IsMcpToolName("a*"));
  EXPECT_TRUE(IsMcpToolName(std::string(kMaxMcpToolName, 'z')));
  EXPECT_FALSE(IsMcpToolName(std::string(kMaxMcpToolName + 1, 'z')));
}

// ---------------------------------------------------------------------------------------------
// Requests: examples and cases

Request Read(std::vector<std::string> words) {
  auto r = ParseRequestWords(words);
  EXPECT_TRUE(std::holds_alternative<Request>(r)) << words.back();
  return std::holds_alternative<Request>(r) ? std::get<Request>(r) : Request{};
}

TEST(McpToolRequests, ParseAndDescribe) {
  const Request r = Read({"mcp-tool", "get-sum"});
  EXPECT_EQ(r.kind, Request::Kind::kMcpTool);
  EXPECT_EQ(r.mcp_tool, "get-sum");
  EXPECT_EQ(r, Request::McpTool("get-sum"));
  EXPECT_EQ(KindName(r), "mcp-tool");
  EXPECT_EQ(Describe(r), "mcp-tool get-sum");
  // A name that needs quoting is quoted, and re-reads as the same request.
  const Request odd = Request::McpTool("a b");
  EXPECT_EQ(Describe(odd), "mcp-tool \"a b\"");
  EXPECT_EQ(Read({"mcp-tool", "a b"}), odd);
  EXPECT_NE(Request::McpTool("read_file"), Request::ToolCall(Tool::kReadFile));
  EXPECT_THAT(RequestUsage(), HasSubstr("mcp-tool get-sum"));

  for (const auto& words :
       {std::vector<std::string>{"mcp-tool"}, std::vector<std::string>{"mcp-tool", "a", "b"}}) {
    auto parsed = ParseRequestWords(words);
    ASSERT_TRUE(std::holds_alternative<RequestWordsError>(parsed));
    const auto& e = std::get<RequestWordsError>(parsed);
    EXPECT_EQ(e.message, "'mcp-tool' takes one MCP tool name");
    EXPECT_EQ(e.word, words.size() == 1 ? 0u : 2u);
  }
}

TEST(McpToolRequests, ExamplesRunAgainstTheProfile) {
  EXPECT_NE(MustCompile(WithTools("  allow mcp:echo mcp:get-*\n  deny mcp:printEnv\n",
                                  "examples {\n  allow mcp-tool echo\n  allow mcp-tool get-sum\n"
                                  "  deny mcp-tool printEnv\n  deny mcp-tool other\n}\n")),
            nullptr);
  const std::string failed =
      MustFail(WithTools("  allow read_file\n", "examples {\n  allow mcp-tool read_file\n}\n"));
  EXPECT_EQ(FirstLine(failed),
            "test.cagent:5:9: error: example failed: expected allow for mcp-tool read_file, got "
            "deny");
  EXPECT_THAT(failed, HasSubstr("write `allow mcp:read_file`"));
  EXPECT_THAT(MustFail(WithTools("  allow mcp:*\n", "examples {\n  allow mcp-tool\n}\n")),
              HasSubstr("error: 'mcp-tool' takes one MCP tool name"));
}

TEST(McpToolRequests, CasesFileReadsMcpToolRequests) {
  SourceSet sources;
  const std::uint32_t file =
      sources.Add("t.cases", "allow mcp-tool echo\nask mcp-tool write_note\ndeny mcp-tool x\n");
  Diagnostics diags;
  std::vector<Case> cases = ParseCases(sources, file, diags);
  ASSERT_FALSE(diags.HasErrors()) << RenderAll(sources, diags);
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].request, Request::McpTool("echo"));
  EXPECT_EQ(cases[1].expect, Verdict::kAsk);
  auto p = MustCompile(WithTools("  allow mcp:echo\n  ask mcp:write_*\n"));
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.Decide(cases[0].request), "tools: allow mcp:echo");
  EXPECT_ASK(e.Decide(cases[1].request), "tools: ask mcp:write_*");
  EXPECT_DENY(e.Decide(cases[2].request), "default");

  SourceSet bad_sources;
  const std::uint32_t bad = bad_sources.Add("t.cases", "allow mcp-tool a b\n");
  Diagnostics bad_diags;
  EXPECT_TRUE(ParseCases(bad_sources, bad, bad_diags).empty());
  EXPECT_EQ(FirstLine(RenderAll(bad_sources, bad_diags)),
            "t.cases:1:18: error: 'mcp-tool' takes one MCP tool name");
}

// ---------------------------------------------------------------------------------------------
// Dump, JSON, diff, audit

TEST(McpToolDump, RoundTrips) {
  auto p = MustCompile(WithTools(
      "  allow read_file mcp:echo mcp:get-[a-z]*\n  ask mcp:write_*\n  deny mcp:printEnv\n"));
  const std::string dump = Dump(*p, false);
  EXPECT_THAT(dump, HasSubstr("tools {\n"
                              "  deny mcp:printEnv\n"
                              "  ask mcp:write_*\n"
                              "  allow read_file mcp:echo mcp:get-[a-z]*\n"
                              "}\n"));
  SearchPath search;
  Compiled again = CompileText("again.cagent", dump, search);
  ASSERT_TRUE(again.ok()) << RenderAll(*again.sources, again.diags) << dump;
  const std::string redump = Dump(*again.policy, false);
  EXPECT_EQ(dump.substr(dump.find('\n')), redump.substr(redump.find('\n')));
  Engine e(*again.policy, PortableBinding());
  EXPECT_ALLOW(e.McpTool("get-sum"), "tools: allow read_file mcp:echo mcp:get-[a-z]*");

  const auto j = ToJson(*p);
  ASSERT_EQ(j["tools"].size(), 3u);
  const auto& allow = j["tools"][2];
  EXPECT_EQ(allow["verdict"], "allow");
  EXPECT_EQ(allow["tools"], nlohmann::json::array({"read_file"}));
  EXPECT_EQ(allow["mcp_tools"], nlohmann::json::array({"echo", "get-[a-z]*"}));
  EXPECT_EQ(j["tools"][0]["tools"], nlohmann::json::array());
}

TEST(McpToolDiff, AllowsAreWiderDeniesNarrower) {
  auto from = MustCompile(WithTools("  allow read_file\n  deny mcp:printEnv\n"));
  auto to = MustCompile(WithTools("  allow read_file mcp:echo\n  ask mcp:write_*\n"));
  std::vector<std::string> lines;
  for (const auto& e : Diff(*from, *to)) {
    lines.push_back(std::string(DirectionName(e.direction)) + " " + e.area + ": " + e.text);
  }
  EXPECT_THAT(lines, ::testing::Contains("wider tools: added: allow read_file mcp:echo"));
  EXPECT_THAT(lines, ::testing::Contains("narrower tools: removed: allow read_file"));
  EXPECT_THAT(lines, ::testing::Contains("wider tools: removed: deny mcp:printEnv"));
  EXPECT_THAT(lines, ::testing::Contains(HasSubstr("neutral tools: added: ask mcp:write_*")));
  EXPECT_THAT(Diff(*to, *to), ::testing::IsEmpty());
}

std::vector<const Finding*> AnyMcp(const std::vector<Finding>& fs) {
  std::vector<const Finding*> out;
  for (const auto& f : fs) {
    if (f.rule_id == "CAGENT015") out.push_back(&f);
  }
  return out;
}

TEST(McpToolAudit, AllowAllIsLowAskAllIsInfo) {
  auto p = MustCompile(WithTools("  allow mcp:*\n  deny mcp:printEnv\n"));
  const auto fs = Audit(*p);
  const auto any = AnyMcp(fs);
  ASSERT_EQ(any.size(), 1u);
  EXPECT_EQ(any[0]->risk, Risk::kLow);
  EXPECT_EQ(any[0]->message,
            "'tools: allow mcp:*' allows every tool of a wrapped MCP server, including any the "
            "server adds later: only the sandbox confines what they do; list the tools you use "
            "(allow mcp:NAME) or deny the ones you do not");
  EXPECT_EQ(p->Where(any[0]->loc), "test.cagent:2:9");

  auto asked = MustCompile("approval on-request\n" + WithTools("  ask mcp:*?*\n"));
  const auto asked_fs = Audit(*asked);
  const auto asked_any = AnyMcp(asked_fs);
  ASSERT_EQ(asked_any.size(), 1u);
  EXPECT_EQ(asked_any[0]->risk, Risk::kInfo);
  EXPECT_THAT(asked_any[0]->message, HasSubstr("asks a person for every tool"));
}

TEST(McpToolAudit, NamedToolsAndSilentAsksAreNotReported) {
  // Twins of the finding: named tools and globs that leave names out are what the finding asks
  // for; an ask under never-ask is CAGENT006's, a deny is no risk.
  for (const std::string& text :
       {WithTools("  allow mcp:echo mcp:get-*\n"), WithTools("  ask mcp:*\n"),
        WithTools("  deny mcp:*\n"), WithTools("  allow mcp:??*\n")}) {
    auto p = MustCompile(text);
    EXPECT_TRUE(AnyMcp(Audit(*p)).empty()) << text;
  }
  const auto rule = std::find_if(AuditRules().begin(), AuditRules().end(),
                                 [](const AuditRule& r) { return r.id == "CAGENT015"; });
  ASSERT_NE(rule, AuditRules().end());
  EXPECT_EQ(rule->name, "any-mcp-tool");
}

// The example in docs/policy-language.md ("MCP tools of a wrapped server") compiles, its examples
// hold, and it narrows the built-in it extends.
TEST(McpToolDocs, TheLanguageReferenceExampleCompiles) {
  std::ifstream in(std::string(CAGENT_SOURCE_DIR) + "/docs/policy-language.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const std::size_t start = doc.find("# .cagent/everything.cagent");
  ASSERT_NE(start, std::string::npos) << "the example is gone from the docs";
  const std::size_t end = doc.find("```", start);
  ASSERT_NE(end, std::string::npos);
  auto p = MustCompile(doc.substr(start, end - start), "everything.cagent");
  ASSERT_NE(p, nullptr);
  Engine e(*p, PortableBinding());
  EXPECT_ALLOW(e.McpTool("echo"), "tools: allow mcp:*");
  EXPECT_DENY(e.McpTool("get-env"), "tools: deny mcp:get-env");
}

}  // namespace
}  // namespace cagent::policy
