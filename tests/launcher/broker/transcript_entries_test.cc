// What the broker hands an observed audit log for the --verbose transcript
// (AuditEvent::transcript): the model's text and calls, a call's arguments, a tool's output; all
// redacted as the log is, none of it written to the log itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/launcher/broker/broker_test_util.h"

namespace cagent::launcher::broker::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kSecret = "tok-1234567890-secret";  // the harness's redactor knows it

struct Seen {
  json entry;
  json transcript;
};

const Seen* Find(const std::vector<Seen>& seen, const std::string& event) {
  for (const Seen& s : seen) {
    if (s.entry.value("event", "") == event) return &s;
  }
  return nullptr;
}

TEST(BrokerTranscript, AnObservedLogGetsTheTextArgumentsAndOutputRedacted) {
  Harness h;
  std::vector<Seen> seen;
  std::vector<std::string> lines;
  h.audit->SetObserver([&](std::string_view line, const json& t) {
    lines.emplace_back(line);
    seen.push_back({json::parse(line, nullptr, false), t});
  });
  h.Hello();
  const std::string command = std::string("echo ") + kSecret;
  const json turn = h.ModelTurn({Call("call_t", "run_command", {{"command", command}})},
                                std::string("I will print ") + kSecret);
  ASSERT_EQ(turn.value("type", ""), "model_result");
  const json d = h.ToolRequestAs("call_t", "run_command", {{"command", command}});
  ASSERT_EQ(d.value("verdict", ""), "allow") << d.dump();
  h.ToolResult(d["id"], true, std::string("exit code 0\n") + kSecret + "\n");

  const Seen* result = Find(seen, "model_result");
  ASSERT_NE(result, nullptr);
  const std::string text = result->transcript.value("text", "");
  EXPECT_THAT(text, HasSubstr("I will print [REDACTED"));
  ASSERT_EQ(result->transcript["tool_calls"].size(), 1U);
  EXPECT_EQ(result->transcript["tool_calls"][0]["name"], "run_command");
  EXPECT_THAT(result->transcript["tool_calls"][0]["arguments"].dump(), HasSubstr("[REDACTED"));

  const Seen* decision = Find(seen, "decision");
  ASSERT_NE(decision, nullptr);
  const std::string args = decision->transcript["arguments"].value("command", "");
  EXPECT_THAT(args, HasSubstr("echo [REDACTED"));

  const Seen* output = Find(seen, "tool_result");
  ASSERT_NE(output, nullptr);
  EXPECT_THAT(output->transcript.value("output", ""), HasSubstr("exit code 0\n[REDACTED"));

  // The secret reached the broker (the twin: each of those texts held it), and is in no
  // transcript, no observed line and not in the file; the output itself is not logged.
  for (const Seen& s : seen) EXPECT_THAT(s.transcript.dump(), Not(HasSubstr(kSecret)));
  for (const std::string& l : lines) {
    EXPECT_THAT(l, Not(HasSubstr(kSecret)));
    EXPECT_THAT(l, Not(HasSubstr("exit code 0")));
  }
  // What is written is what was observed, line for line: the transcript changes nothing on disk.
  std::ifstream in(h.audit_path);
  std::vector<std::string> written;
  for (std::string l; std::getline(in, l);) written.push_back(l);
  EXPECT_EQ(written, lines);
  // Entries without content of their own carry none.
  const Seen* hello = Find(seen, "hello");
  ASSERT_NE(hello, nullptr);
  EXPECT_TRUE(hello->transcript.is_null());
}

// The twin of the redaction above: with a redactor that does not know the value, the same text
// reaches the transcript as it is, so the test above shows redaction, not a text that never
// arrived.
TEST(BrokerTranscript, WhatTheRedactorDoesNotKnowReachesTheTranscript) {
  HarnessOptions o;
  o.secrets.clear();
  Harness h(o);
  std::vector<Seen> seen;
  h.audit->SetObserver([&](std::string_view line, const json& t) {
    seen.push_back({json::parse(line, nullptr, false), t});
  });
  h.Hello();
  const json d = h.ToolRequest("read_file", {{"path", "notes.txt"}});
  ASSERT_EQ(d.value("verdict", ""), "allow");
  h.ToolResult(d["id"], true, std::string("key ") + kSecret + "\n");
  const Seen* output = Find(seen, "tool_result");
  ASSERT_NE(output, nullptr);
  EXPECT_THAT(output->transcript.value("output", ""), HasSubstr(kSecret));
}

}  // namespace
}  // namespace cagent::launcher::broker::testing
