// `cagent log RUN`'s rendering reads entries through the schema: every kind the builders make is
// described in words, with no field the schema does not declare for it (a misspelt field name in
// the renderer shows as "<undeclared NAME>"), and hostile text stays terminal-safe.
#include "launcher/cli/log_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "launcher/broker/audit_schema.h"

namespace cagent::launcher::cli {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
namespace audit = broker::audit;

const std::string kDigest(64, 'b');

// An entry as the log would hold it (the envelope around the builder's event).
json Entry(const broker::AuditEvent& e) {
  return json{{"run", "r"},
              {"seq", 0},
              {"time", "2024-05-01T12:00:00.000Z"},
              {"actor", broker::AuditActorName(e.actor)},
              {"event", broker::AuditKindName(e.kind)},
              {"policy", "p"},
              {"tool", e.tool},
              {"args", e.args_digest},
              {"verdict", e.verdict},
              {"rule", e.rule},
              {"result", e.result_digest},
              {"detail", e.DetailJson()},
              {"prev", std::string(64, '0')}};
}

TEST(LogCommandTest, EveryKindIsDescribedThroughItsDeclaredFields) {
  const std::vector<broker::AuditEvent> events = {
      audit::State({.state = "created", .profile = "backend", .model = "replay:x"}),
      audit::Workspace({.repo = "/r",
                        .base_commit = "0123456789abcdef",
                        .carried_dirty = true,
                        .carried_paths = {"a"}}),
      audit::Hello({.id = 1, .agent = "cagent-agent/0.1", .protocols = {2}}),
      audit::Welcome({.id = 1, .tools = {"read_file"}, .max_turns = 3}),
      audit::ModelCall({.id = 2,
                        .conversation_digest = kDigest,
                        .turn = 1,
                        .messages = 2,
                        .redactions = 1,
                        .max_tokens = 100}),
      audit::ModelResult(
          {.id = 2,
           .raw_digest = kDigest,
           .turn = 1,
           .stop_reason = "tool_calls",
           .tool_calls = {{.id = "c1", .name = "run_command", .args_digest = kDigest}},
           .body = json{{"tool_calls",
                         {{{"id", "c1"},
                           {"name", "run_command"},
                           {"arguments", {{"command", "make test"}}}}}}}}),
      audit::ModelError({.id = 3, .turn = 2, .code = "provider_error", .message = "503"}),
      audit::ToolRequest({.id = 4, .tool = "run_command", .args_digest = kDigest, .call_id = "c1"}),
      audit::Decision({.id = 4,
                       .tool = "run_command",
                       .args_digest = kDigest,
                       .verdict = "allow",
                       .rule = "allow make",
                       .call_id = "c1",
                       .turn = 1,
                       .reason = "listed",
                       .location = "p.cagent:4:3"}),
      audit::Loop({.id = 5, .tool = "grep", .args_digest = kDigest, .reason = "3 times"}),
      audit::LoopState({.entries = 9, .max_entries = 9, .truncated = true, .not_walked = 2}),
      audit::Approval({.id = 6,
                       .tool = "run_command",
                       .args_digest = kDigest,
                       .approved = true,
                       .rule = "ask npm",
                       .scope = "once",
                       .by = "terminal"}),
      audit::ToolResult({.id = 7,
                         .tool = "run_command",
                         .output_digest = kDigest,
                         .request = 4,
                         .ok = true,
                         .bytes = 12,
                         .changed_paths = {"calc.py"}}),
      audit::UnmatchedToolResult(8, 99),
      audit::Progress({.id = 9, .state = "thinking", .text = "reading"}),
      audit::Finish({.id = 10, .outcome = "done", .summary = "fixed add"}),
      audit::ProtocolError({.id = 0, .code = "malformed", .message = "not JSON"}),
      audit::Budget({.budget = "wall-time", .reason = "wall time 10m used"}),
      audit::Shutdown({.status = "finished"}),
      audit::Patch({.patch_digest = kDigest, .files = 1, .bytes = 100}),
      audit::VerifyTree(
          {.tree = "fedcba9876543210", .base_commit = "0123456789abcdef", .path = "/v"}),
      audit::Verify({.command = "make", .status = "passed", .exit_code = 0, .duration_ms = 12}),
      audit::Setup({.command = "npm ci",
                    .status = "failed",
                    .exit_code = 1,
                    .duration_ms = 40,
                    .where = "verify-tree",
                    .log = "logs/01-verify-setup.log"}),
      audit::Egress({.host = "::1",
                     .port = 8080,
                     .via = "socks5",
                     .reason = "no hosts rule allows [::1]:8080",
                     .phase = "agent"}),
      audit::HttpRequest({.phase = "agent",
                          .host = "github.com",
                          .port = 443,
                          .method = "POST",
                          .path = "/org/repo.git/git-receive-pack",
                          .credentials = {"gh"},
                          .allowed = true,
                          .rule = "hosts: ask github.com POST /org/repo.git/git-receive-pack",
                          .reason = "approved",
                          .status = 200,
                          .bytes_up = 700,
                          .bytes_down = 120,
                          .duration_ms = 300}),
      audit::HttpRequest({.phase = "agent",
                          .host = "evil.test",
                          .port = 443,
                          .method = "GET",
                          .path = "/collect",
                          .reason = "refused",
                          .misdirected = "gh"}),
      audit::McpCall({.mode = "wrap",
                      .request = "7",
                      .tool = "gzip-file",
                      .args_digest = kDigest,
                      .verdict = "deny",
                      .rule = "deny mcp:gzip-file",
                      .reason = "denied"}),
      audit::McpResult({.mode = "wrap", .request = "8", .tool = "echo", .ok = true, .bytes = 40}),
      audit::McpList({.mode = "wrap", .offered = {"echo"}, .hidden = {"gzip-file"}}),
  };
  std::set<std::string> kinds;
  std::map<std::string, json> calls;
  std::map<std::string, std::string> text;
  for (const broker::AuditEvent& e : events) {
    const std::string event(broker::AuditKindName(e.kind));
    kinds.insert(event);
    const std::string d = DescribeAuditEntry(Entry(e), calls);
    SCOPED_TRACE(event + ": " + d);
    EXPECT_FALSE(d.empty());
    EXPECT_THAT(d, Not(HasSubstr("<undeclared")));
    text[event] += d + "\n";
  }
  EXPECT_EQ(kinds.size(), static_cast<std::size_t>(broker::AuditKind::kCount));
  // The tool request shows the arguments the (replayed) model gave, found by call id.
  EXPECT_THAT(text["tool_request"], HasSubstr(R"(run_command {"command":"make test"})"));
  // A decision is also its request's entry: it shows the arguments the same way.
  EXPECT_THAT(
      text["decision"],
      HasSubstr(R"(allow run_command {"command":"make test"} by allow make (p.cagent:4:3))"));
  EXPECT_THAT(text["verify"], HasSubstr("passed: make (exit 0, 12 ms)"));
  EXPECT_THAT(text["egress"],
              HasSubstr("deny [::1]:8080 via socks5: no hosts rule allows [::1]:8080 [agent]"));
  EXPECT_THAT(text["http_request"],
              HasSubstr("allow POST github.com:443/org/repo.git/git-receive-pack with gh (rule "
                        "hosts: ask github.com POST /org/repo.git/git-receive-pack): status 200, "
                        "700 bytes up, 120 down, 300 ms [agent]"));
  EXPECT_THAT(text["http_request"],
              HasSubstr("deny GET evil.test:443/collect: MISDIRECTED placeholder of credential gh: "
                        "refused [agent]"));
  EXPECT_THAT(text["tool_result"], HasSubstr("for request 99, which awaits no result"));
  EXPECT_THAT(text["mcp_call"],
              HasSubstr("deny gzip-file (wrap, request 7) by deny mcp:gzip-file: denied"));
  EXPECT_THAT(text["mcp_result"], HasSubstr("echo (wrap, request 8) ok, 40 bytes"));
  EXPECT_THAT(text["state"], HasSubstr("created (profile backend, model replay:x)"));
}

TEST(LogCommandTest, UntrustedTextIsTerminalSafeAndUnknownEventsShowTheirDetail) {
  std::map<std::string, json> calls;
  const std::string d = DescribeAuditEntry(
      Entry(audit::Finish({.id = 1, .outcome = "done", .summary = "ok\x1b[2Jgone\n"})), calls);
  EXPECT_THAT(d, Not(HasSubstr("\x1b")));
  EXPECT_THAT(d, Not(HasSubstr("\n")));
  json unknown = Entry(audit::Shutdown({.status = "finished"}));
  unknown["event"] = "from_the_future";
  EXPECT_THAT(DescribeAuditEntry(unknown, calls), HasSubstr(R"("status":"finished")"));
}

}  // namespace
}  // namespace cagent::launcher::cli
