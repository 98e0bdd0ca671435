// Golden test of the audit log: a recorded broker session (a scripted agent on the socketpair, a
// scripted model) writes its log through the real broker and AuditLog; the log, normalised (the
// time and the chain digests, which depend on it, are replaced after the chain is verified), must
// equal tests/golden/audit/broker_session.jsonl byte for byte, and every line must conform to
// the schema. A change to what the broker records is then a reviewable diff of that file.
//
// To regenerate after an intended change:
//   CAGENT_UPDATE_GOLDEN=1 build/tests/cagent_broker_tests --gtest_filter='AuditGolden*'
// then review `git diff tests/golden/audit/`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_text.h"
#include "launcher/broker/audit_log.h"
#include "launcher/broker/audit_schema.h"
#include "tests/launcher/broker/broker_test_util.h"

namespace cagent::launcher::broker::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Replaces the string value of `"name":"..."` in `line` (a value without escapes: a time or a
// digest) with `with`.
void ReplaceValue(std::string& line, std::string_view name, std::string_view with) {
  const std::string key = "\"" + std::string(name) + "\":\"";
  const std::size_t at = line.find(key);
  if (at == std::string::npos) return;
  const std::size_t from = at + key.size();
  const std::size_t to = line.find('"', from);
  if (to == std::string::npos) return;
  line.replace(from, to - from, with);
}

// The log with what varies from run to run replaced, and otherwise byte for byte as written (field
// order included): `time`, and `prev` (it hashes the previous line, time included; the chain is
// verified before this), and the harness's temporary directory wherever it appears.
std::string Normalise(const std::string& content, const std::string& tmp_dir) {
  std::string out;
  std::istringstream in(content);
  for (std::string line; std::getline(in, line);) {
    ReplaceValue(line, "time", "TIME");
    ReplaceValue(line, "prev", "PREV");
    for (std::size_t at = 0;
         !tmp_dir.empty() && (at = line.find(tmp_dir, at)) != std::string::npos;) {
      line.replace(at, tmp_dir.size(), "TMP");
      at += 3;
    }
    out += line + "\n";
  }
  return out;
}

// One session that touches most of what the broker records: hello, model turns with tool calls,
// an allowed call and its result (with a secret in the output, redacted), an ask approved by the
// person, a policy denial, a call the model did not make, an unknown tool, progress, finish.
void RecordSession(Harness& h) {
  h.Hello();

  const json read = h.ToolRequest("read_file", {{"path", "calc.py"}}, {"calc.py"});
  EXPECT_EQ(read.value("verdict", ""), "allow") << JsonText(read);
  h.ToolResult(read.value("id", 0U), true,
               "def add(a, b):\n  return a - b  # tok-1234567890-secret\n");

  const json ask =
      h.ToolRequest("write_file", {{"path", "Cargo.lock"}, {"content", "x"}}, {"Cargo.lock"});
  EXPECT_EQ(ask.value("verdict", ""), "ask") << JsonText(ask);
  const std::optional<json> approval = h.peer->Recv();
  EXPECT_TRUE(approval.has_value());
  h.ToolResult(ask.value("id", 0U), true, "wrote 1 byte", {"Cargo.lock"});

  const json denied = h.ToolRequest("run_command", {{"command", "cat .env"}});
  EXPECT_EQ(denied.value("verdict", ""), "deny") << JsonText(denied);

  // A call id the model's latest turn does not have.
  const json forged = h.ToolRequestAs("call_forged", "run_command", {{"command", "make"}});
  EXPECT_EQ(forged.value("verdict", ""), "deny") << JsonText(forged);

  // A tool that does not exist, asked for by the model.
  const json unknown = h.ToolRequest("launch_missiles", {{"target", "moon"}});
  EXPECT_EQ(unknown.value("verdict", ""), "deny") << JsonText(unknown);

  h.Request(h.Msg("progress", {{"state", "thinking"}, {"text", "about to finish"}}));
  h.ModelTurn({}, "The test passes now.");
  h.Request(h.Msg("finish", {{"outcome", "done"}, {"summary", "fixed add"}}));
  EXPECT_TRUE(h.WaitEnded());
}

TEST(AuditGoldenTest, ARecordedSessionWritesTheGoldenLog) {
  Harness h;
  ASSERT_TRUE(h.broker) << "the harness did not start";
  RecordSession(h);
  ASSERT_FALSE(HasFailure()) << "the scripted session did not go as scripted";
  h.broker.reset();  // the shutdown entry is written by now; nothing more is

  // The chain holds and every line conforms to the schema.
  Result<AuditVerifyReport> chain = VerifyAuditLog(h.audit_path);
  ASSERT_TRUE(chain.ok()) << chain.error().Message();
  EXPECT_TRUE(chain->ok) << chain->message;
  Result<AuditSchemaReport> schema = ValidateAuditLogFile(h.audit_path);
  ASSERT_TRUE(schema.ok()) << schema.error().Message();
  for (const AuditSchemaProblem& p : schema->problems) {
    ADD_FAILURE() << h.audit_path << ":" << p.line << ": " << p.message;
  }

  const std::string got = Normalise(ReadAll(h.audit_path), h.dir);
  const std::string golden_path =
      std::string(CAGENT_SOURCE_DIR) + "/tests/golden/audit/broker_session.jsonl";
  if (std::getenv("CAGENT_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(golden_path, std::ios::binary | std::ios::trunc) << got;
    GTEST_SKIP() << "rewrote " << golden_path << "; review it with git diff and commit it";
  }
  const std::string want = ReadAll(golden_path);
  ASSERT_FALSE(want.empty()) << "cannot read " << golden_path
                             << "; create it with CAGENT_UPDATE_GOLDEN=1 (see the file comment)";
  // Line by line, so a difference names its line.
  std::istringstream g(got);
  std::istringstream w(want);
  std::string gl;
  std::string wl;
  int line = 0;
  while (true) {
    const bool more_g = static_cast<bool>(std::getline(g, gl));
    const bool more_w = static_cast<bool>(std::getline(w, wl));
    ++line;
    if (!more_g && !more_w) break;
    EXPECT_EQ(more_g ? gl : "<no line>", more_w ? wl : "<no line>")
        << "line " << line << " of the normalised log differs from " << golden_path
        << " (CAGENT_UPDATE_GOLDEN=1 rewrites it; review the diff)";
  }
}

}  // namespace
}  // namespace cagent::launcher::broker::testing
