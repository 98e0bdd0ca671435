// The audit log schema: one spec per kind in enum order; every typed builder's output, written by
// the real AuditLog, conforms; the validator names each kind of non-conformance (each check is
// shown failing on a line broken in exactly that way); docs/audit-log.md embeds the schema's
// Markdown exactly (CAGENT_UPDATE_GOLDEN=1 rewrites the embedded part).
#include "launcher/broker/audit_schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/broker/audit_log.h"

namespace cagent::launcher::broker {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

const std::string kDigest(64, 'a');

class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "cagent_schema_XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    if (!path_.empty()) {
      const std::string cmd = "rm -rf '" + path_ + "'";
      if (std::system(cmd.c_str()) != 0) {
        // best effort
      }
    }
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every builder, with its optional fields both set and unset where it has any.
std::vector<AuditEvent> EveryEvent() {
  std::vector<std::string> many(audit::kMaxLoggedPaths + 1, "p");
  std::vector<std::string> many_changed(audit::kMaxLoggedChangedPaths + 1, "c");
  return {
      audit::State({.state = "created", .profile = "backend", .model = "replay:s.jsonl"}),
      audit::State({.state = "failed", .reason = "the agent gave up"}),
      audit::Workspace({.repo = "/r", .base_commit = "abc", .carried_paths = {"x"}}),
      audit::Hello({.id = 1, .agent = "cagent-agent/0.1", .protocols = {2, -1}}),
      audit::Welcome({.id = 1, .tools = {"read_file"}, .max_turns = 10}),
      audit::ModelCall({.id = 2,
                        .conversation_digest = kDigest,
                        .turn = 1,
                        .messages = 1,
                        .max_tokens = 4096,
                        .tools = {"read_file", "finish"}}),
      audit::ModelResult({.id = 2,
                          .raw_digest = kDigest,
                          .turn = 1,
                          .usage = {.input_tokens = 10, .output_tokens = 5},
                          .stop_reason = "tool_calls",
                          .provider_stop_reason = "tool_use",
                          .tool_calls = {{.id = "c1", .name = "read_file", .args_digest = kDigest}},
                          .body = json{{"content", json::array()}}}),
      audit::ModelResult({.id = 2, .raw_digest = kDigest, .body = json::array()}),
      audit::ModelError({.id = 3, .turn = 2, .code = "provider_error", .message = "503"}),
      audit::ToolRequest(
          {.id = 4, .tool = "read_file", .args_digest = kDigest, .call_id = "c1", .paths = {"a"}}),
      audit::ToolRequest(
          {.id = 4, .tool = "nope", .args_digest = kDigest, .call_id = "c1", .paths = many}),
      audit::Decision({.id = 4,
                       .tool = "read_file",
                       .args_digest = kDigest,
                       .verdict = "allow",
                       .rule = "workspace read",
                       .call_id = "c1",
                       .turn = 1,
                       .reason = "r",
                       .location = "p.cagent:3:1",
                       .pending = false,
                       .note = "auto"}),
      audit::Decision({.id = 4,
                       .tool = "x",
                       .args_digest = kDigest,
                       .verdict = "deny",
                       .rule = "model turn",
                       .call_id = "forged",
                       .reason = "not a call of turn 1"}),
      audit::Loop({.id = 5, .tool = "grep", .args_digest = kDigest, .reason = "3 times"}),
      audit::LoopState({.entries = 10, .max_entries = 10, .truncated = true}),
      audit::Approval({.id = 6,
                       .tool = "run_command",
                       .args_digest = kDigest,
                       .approved = true,
                       .rule = "ask npm",
                       .call_id = "c2",
                       .turn = 2,
                       .scope = "once",
                       .by = "terminal"}),
      audit::ToolResult({.id = 7,
                         .tool = "edit_file",
                         .output_digest = kDigest,
                         .request = 4,
                         .call_id = "c1",
                         .turn = 1,
                         .ok = true,
                         .bytes = 3,
                         .changed_paths = many_changed}),
      audit::UnmatchedToolResult(8, 99),
      audit::Progress({.id = 9, .state = "thinking", .text = "t"}),
      audit::Finish({.id = 10, .outcome = "done", .summary = "s"}),
      audit::ProtocolError({.id = 0, .code = "malformed", .message = "m"}),
      audit::Budget({.id = 11, .reason = "model turns 10 of 10"}),
      audit::Budget({.budget = "wall-time", .reason = "wall time 10m"}),
      audit::Shutdown({.status = "finished"}),
      audit::Patch({.patch_digest = kDigest, .files = 1, .bytes = 100}),
      audit::VerifyTree({.tree = "t", .base_commit = "b", .path = "/v"}),
      audit::Verify({.command = "make", .status = "passed", .exit_code = 0, .duration_ms = 12}),
      audit::Verify({.command = "make", .status = "not-run"}),
      audit::Setup({.command = "npm ci",
                    .status = "passed",
                    .exit_code = 0,
                    .duration_ms = 900,
                    .where = "workspace",
                    .log = "logs/01-setup.log"}),
      audit::Egress({.host = "pypi.org",
                     .port = 443,
                     .address = "151.101.0.223",
                     .via = "connect",
                     .allowed = true,
                     .rule = "hosts: allow pypi.org",
                     .reason = "allowed",
                     .bytes_up = 600,
                     .bytes_down = 9000,
                     .duration_ms = 80,
                     .phase = "agent"}),
      audit::Egress({.host = "evil.test",
                     .port = 80,
                     .via = "http",
                     .reason = "no hosts rule allows evil.test:80",
                     .error = "refused",
                     .phase = "exec"}),
      audit::HttpRequest({.phase = "agent",
                          .host = "github.com",
                          .port = 443,
                          .method = "POST",
                          .path = "/org/repo.git/git-receive-pack",
                          .credentials = {"gh"},
                          .allowed = true,
                          .rule = "hosts: ask github.com POST /org/repo.git/git-receive-pack",
                          .reason = "the profile asks a person before this request; approved",
                          .status = 200,
                          .bytes_up = 700,
                          .bytes_down = 120,
                          .duration_ms = 300}),
      audit::HttpRequest(
          {.phase = "exec",
           .host = "evil.test",
           .port = 443,
           .method = "GET",
           .path = "/collect",
           .reason = "a placeholder was sent to a host its credential is not bound to",
           .misdirected = "gh",
           .error = "refused"}),
      audit::McpCall({.mode = "wrap",
                      .request = "7",
                      .tool = "echo",
                      .args_digest = kDigest,
                      .verdict = "allow",
                      .rule = "allow mcp:echo",
                      .location = "wrap.cagent:3:3",
                      .reason = "allowed",
                      .note = "approved (terminal)"}),
      audit::McpCall({.mode = "serve",
                      .request = "\"a\"",
                      .tool = "x",
                      .args_digest = kDigest,
                      .verdict = "deny",
                      .reason = "no tools rule allows mcp:x"}),
      audit::McpResult({.mode = "wrap",
                        .request = "7",
                        .tool = "echo",
                        .result_digest = kDigest,
                        .ok = true,
                        .bytes = 50}),
      audit::McpResult({.mode = "wrap",
                        .request = "8",
                        .tool = "echo",
                        .error = "the server exited before answering"}),
      audit::McpList({.mode = "wrap", .offered = {"echo"}, .hidden = {}}),
  };
}

// One conforming line to break in the validator tests.
json GoodDecisionLine() {
  return json{
      {"run", "run-1"},
      {"seq", 0},
      {"time", "2024-05-01T12:00:00.000Z"},
      {"actor", "broker"},
      {"event", "decision"},
      {"policy", "p"},
      {"tool", "read_file"},
      {"args", kDigest},
      {"verdict", "allow"},
      {"rule", "workspace read"},
      {"result", ""},
      {"detail", {{"id", 4}, {"call_id", "c1"}, {"turn", 1}, {"reason", "r"}, {"pending", false}}},
      {"prev", std::string(64, '0')}};
}

TEST(AuditSchemaTest, OneSpecPerKindInEnumOrderWithUniqueNames) {
  const auto specs = AuditSpecs();
  ASSERT_EQ(specs.size(), static_cast<std::size_t>(AuditKind::kCount));
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const AuditEventSpec& s = specs[i];
    SCOPED_TRACE(std::string(s.name));
    EXPECT_EQ(static_cast<std::size_t>(s.kind), i);
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate event name";
    EXPECT_EQ(ParseAuditKind(s.name), s.kind);
    EXPECT_EQ(AuditKindName(s.kind), s.name);
    EXPECT_FALSE(s.actors.empty());
    EXPECT_FALSE(s.meaning.empty());
    std::set<std::string_view> fields;
    for (const AuditField& f : s.detail) {
      EXPECT_TRUE(fields.insert(f.name).second) << "duplicate field " << f.name;
      EXPECT_FALSE(f.meaning.empty()) << f.name;
    }
  }
  EXPECT_EQ(ParseAuditKind("decisions"), std::nullopt);
  EXPECT_EQ(ParseAuditActor("operator"), AuditActor::kOperator);
  EXPECT_EQ(ParseAuditActor("root"), std::nullopt);
}

TEST(AuditSchemaTest, EveryBuilderWrittenByTheLogConformsAndEveryKindIsBuilt) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir.path() + "/events.jsonl";
  Result<AuditLog> log = AuditLog::Open(path, "run-1", "policy-digest");
  ASSERT_TRUE(log.ok()) << log.error().Message();
  std::set<AuditKind> kinds;
  for (const AuditEvent& e : EveryEvent()) {
    ASSERT_TRUE(log->Append(e));
    kinds.insert(e.kind);
  }
  EXPECT_EQ(kinds.size(), static_cast<std::size_t>(AuditKind::kCount))
      << "a kind without a builder in EveryEvent()";

  Result<AuditSchemaReport> report = ValidateAuditLogFile(path);
  ASSERT_TRUE(report.ok()) << report.error().Message();
  EXPECT_EQ(report->entries, EveryEvent().size());
  for (const AuditSchemaProblem& p : report->problems) {
    ADD_FAILURE() << "line " << p.line << ": " << p.message << "\n" << ReadFile(path);
  }
  // The capped lists are recorded as counts.
  const std::string content = ReadFile(path);
  EXPECT_NE(content.find("\"paths\":\"33 paths\""), std::string::npos) << content;
  EXPECT_NE(content.find("\"changed_paths\":\"65\""), std::string::npos) << content;
}

// The builders come from the table (audit_events.h), one per kind: built from empty fields, each
// writes every detail field the schema requires and nothing it does not declare, and its optional
// fields only when set. A row whose type and requirement disagree does not compile (the struct's
// static_assert); this is the run-time half: a writer that drops a required field fails here.
TEST(AuditSchemaTest, EveryGeneratedBuilderWritesExactlyTheRequiredFieldsWhenEmpty) {
  std::vector<AuditEvent> events;
#define CAGENT_TEST_BUILD(Kind, kName, kActor, kWriter, kMeaning) \
  events.push_back(audit::Kind(audit::Kind##Fields{}));
#define CAGENT_TEST_NONE(...)
  CAGENT_AUDIT_EVENTS(CAGENT_TEST_BUILD, CAGENT_TEST_NONE, CAGENT_TEST_NONE, CAGENT_TEST_NONE)
#undef CAGENT_TEST_BUILD
#undef CAGENT_TEST_NONE
  ASSERT_EQ(events.size(), static_cast<std::size_t>(AuditKind::kCount));
  for (std::size_t i = 0; i < events.size(); ++i) {
    const AuditEvent& e = events[i];
    EXPECT_EQ(e.kind, static_cast<AuditKind>(i));
    const AuditEventSpec& spec = AuditSpec(e.kind);
    EXPECT_EQ(e.actor, spec.actors.front()) << spec.name;
    const json detail = e.DetailJson();
    std::set<std::string> required;
    for (const AuditField& f : spec.detail) {
      if (f.required) required.insert(std::string(f.name));
    }
    std::set<std::string> written;
    for (const auto& [key, value] : detail.items()) written.insert(key);
    // tool_result's fields are optional only because its unmatched variant leaves them out;
    // the builder of the matched result writes them all (their types are plain).
    for (const std::string& name : required) {
      EXPECT_TRUE(written.contains(name)) << spec.name << "." << name << " not written";
    }
    for (const std::string& name : written) {
      bool declared = false;
      for (const AuditField& f : spec.detail) declared = declared || f.name == name;
      EXPECT_TRUE(declared) << spec.name << "." << name << " written but not declared";
    }
  }
  // Optional fields are absent when unset: a state without a reason, a patch with nothing dropped.
  EXPECT_FALSE(audit::State({.state = "running"}).detail.contains("reason"));
  EXPECT_FALSE(audit::Patch({}).detail.contains("git_config_dropped"));
  EXPECT_FALSE(audit::Budget({.reason = "r"}).detail.contains("id"));
  EXPECT_TRUE(audit::Budget({.id = 0, .reason = "r"}).detail.contains("id"));
  // The typed kinds keep their fields sorted by name, as a json object writes them.
  const AuditEvent d = audit::Decision({.reason = "r", .note = "n"});
  ASSERT_FALSE(d.fields.empty());
  for (std::size_t i = 1; i < d.fields.size(); ++i) {
    EXPECT_LT(d.fields[i - 1].name, d.fields[i].name);
  }
}

// An event not made by a builder has no kind: the log says so and the validator refuses it.
TEST(AuditSchemaTest, AnEventWithoutAKindIsWrittenAsInvalidAndRefused) {
  TempDir dir;
  const std::string path = dir.path() + "/events.jsonl";
  Result<AuditLog> log = AuditLog::Open(path, "run-1", "policy-digest");
  ASSERT_TRUE(log.ok()) << log.error().Message();
  ASSERT_TRUE(log->Append(AuditEvent{}));
  Result<AuditSchemaReport> report = ValidateAuditLogFile(path);
  ASSERT_TRUE(report.ok()) << report.error().Message();
  ASSERT_EQ(report->problems.size(), 1U) << ReadFile(path);
  EXPECT_EQ(report->problems[0].message, "event: \"invalid\" is not a known event");
  EXPECT_NE(ReadFile(path).find(R"("actor":"invalid","event":"invalid")"), std::string::npos);
}

TEST(AuditSchemaTest, ValidatorAcceptsTheGoodLine) {
  EXPECT_THAT(ValidateAuditEntry(GoodDecisionLine()), IsEmpty());
}

// Each case breaks the good line in one way and expects exactly the message for it: the twins of
// the validator's checks (a check never seen failing is not tested).
TEST(AuditSchemaTest, ValidatorNamesEachProblem) {
  struct Case {
    const char* what;
    void (*edit)(json&);
    std::string message;
  };
  const std::vector<Case> cases = {
      {"unknown event", [](json& j) { j["event"] = "decisions"; },
       "event: \"decisions\" is not a known event"},
      {"actor not allowed", [](json& j) { j["actor"] = "agent"; },
       "actor: \"agent\" does not record decision (only broker)"},
      {"unknown actor", [](json& j) { j["actor"] = "root"; },
       "actor: \"root\" does not record decision (only broker)"},
      {"missing required detail", [](json& j) { j["detail"].erase("call_id"); },
       "detail.call_id: missing (required)"},
      {"wrong detail type", [](json& j) { j["detail"]["turn"] = "1"; },
       "detail.turn: string, expected count"},
      {"negative count", [](json& j) { j["detail"]["turn"] = -1; },
       "detail.turn: negative integer, expected count"},
      {"undeclared detail", [](json& j) { j["detail"]["secret"] = "x"; },
       "detail.secret: not a field of decision"},
      {"wrong optional type", [](json& j) { j["detail"]["pending"] = 1; },
       "detail.pending: count, expected boolean"},
      {"envelope field the kind never sets", [](json& j) { j["result"] = kDigest; },
       "result: set, but decision never sets it"},
      {"envelope field the kind always sets", [](json& j) { j["rule"] = ""; },
       "rule: empty, but decision always sets it"},
      {"args not a digest", [](json& j) { j["args"] = "make test"; },
       "args: not a SHA-256 digest (64 lowercase hex digits)"},
      {"bad verdict", [](json& j) { j["verdict"] = "maybe"; },
       "verdict: \"maybe\" is not allow, deny or ask"},
      {"missing envelope field", [](json& j) { j.erase("policy"); }, "policy: missing (required)"},
      {"wrong envelope type", [](json& j) { j["seq"] = "0"; }, "seq: string, expected count"},
      {"unknown envelope field", [](json& j) { j["note"] = "x"; }, "note: not an envelope field"},
      {"detail not an object", [](json& j) { j["detail"] = json::array(); },
       "detail: array, expected object"},
      {"bad prev", [](json& j) { j["prev"] = "zz"; }, "prev: not 64 lowercase hex digits"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    json line = GoodDecisionLine();
    c.edit(line);
    EXPECT_THAT(ValidateAuditEntry(line), ElementsAre(c.message));
  }
  EXPECT_THAT(ValidateAuditEntry(json::array()), ElementsAre("not a JSON object"));
}

TEST(AuditSchemaTest, ValidatorChecksStringListsElementByElement) {
  json line = GoodDecisionLine();
  line["event"] = "welcome";
  line["tool"] = line["args"] = line["verdict"] = line["rule"] = "";
  line["detail"] = {{"id", 1}, {"tools", {"read_file", 7}}, {"max_turns", 0}};
  EXPECT_THAT(ValidateAuditEntry(line),
              ElementsAre("detail.tools: array, expected array of strings"));
  line["detail"]["tools"] = json::array({"read_file"});
  EXPECT_THAT(ValidateAuditEntry(line), IsEmpty());
}

TEST(AuditSchemaTest, FileValidationReportsLineNumbers) {
  TempDir dir;
  const std::string path = dir.path() + "/events.jsonl";
  json bad = GoodDecisionLine();
  bad["detail"]["extra"] = 1;
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  std::ofstream(path) << GoodDecisionLine().dump() << "\nnot json\n"
                      << bad.dump() << "\n"
                      << deep << "\n";
  Result<AuditSchemaReport> report = ValidateAuditLogFile(path);
  ASSERT_TRUE(report.ok()) << report.error().Message();
  EXPECT_EQ(report->entries, 4U);
  ASSERT_EQ(report->problems.size(), 3U);
  EXPECT_EQ(report->problems[0].line, 2U);
  EXPECT_EQ(report->problems[0].message, "not valid JSON");
  EXPECT_EQ(report->problems[1].line, 3U);
  EXPECT_EQ(report->problems[1].message, "detail.extra: not a field of decision");
  EXPECT_EQ(report->problems[2].line, 4U);
  EXPECT_EQ(report->problems[2].message, "nested deeper than 256 levels");
  EXPECT_FALSE(ValidateAuditLogFile(dir.path() + "/missing.jsonl").ok());
}

TEST(AuditSchemaTest, TypeNames) {
  EXPECT_EQ(AuditTypesName(kAuditString), "string");
  EXPECT_EQ(AuditTypesName(kAuditStringList | kAuditString), "array of strings | string");
  EXPECT_EQ(AuditTypesName(kAuditCount | kAuditBoolean), "count | boolean");
}

TEST(AuditSchemaTest, SchemaJsonListsEveryEvent) {
  const json schema = AuditSchemaJson();
  ASSERT_TRUE(schema["events"].is_array());
  EXPECT_EQ(schema["events"].size(), static_cast<std::size_t>(AuditKind::kCount));
  EXPECT_EQ(schema["envelope"].size(), AuditEnvelope().size());
  EXPECT_EQ(schema["events"][0]["event"], "state");
}

// docs/audit-log.md embeds AuditSchemaMarkdown() between these markers, so the documentation
// cannot drift from the definitions the broker writes with and `cagent log check` reads with.
constexpr std::string_view kBegin = "<!-- BEGIN GENERATED: cagent log schema -->\n";
constexpr std::string_view kEnd = "<!-- END GENERATED: cagent log schema -->\n";

TEST(AuditSchemaTest, TheDocumentationEmbedsTheSchema) {
  const std::string path = std::string(CAGENT_SOURCE_DIR) + "/docs/audit-log.md";
  const std::string doc = ReadFile(path);
  ASSERT_FALSE(doc.empty()) << "cannot read " << path;
  const std::size_t begin = doc.find(kBegin);
  const std::size_t end = doc.find(kEnd);
  ASSERT_NE(begin, std::string::npos) << path << " has no line " << kBegin;
  ASSERT_NE(end, std::string::npos) << path << " has no line " << kEnd;
  ASSERT_LT(begin, end);
  const std::size_t from = begin + kBegin.size();
  const std::string embedded = doc.substr(from, end - from);
  const std::string want = "\n" + AuditSchemaMarkdown() + "\n";
  if (embedded != want && std::getenv("CAGENT_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        << doc.substr(0, from) << want << doc.substr(end);
    GTEST_SKIP() << "rewrote the generated part of " << path << "; review and commit it";
  }
  EXPECT_EQ(embedded, want) << path << " does not embed the current schema; regenerate it with "
                            << "CAGENT_UPDATE_GOLDEN=1 cagent_broker_tests "
                            << "--gtest_filter=AuditSchemaTest.TheDocumentationEmbedsTheSchema";
}

}  // namespace
}  // namespace cagent::launcher::broker
