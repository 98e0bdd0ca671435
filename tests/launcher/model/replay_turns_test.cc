// Replay: the neutral recorded-turn format of launcher/model/model_provider.h, and the recorded
// session the end-to-end demo plays (tests/testdata/replay/fix_add.jsonl), which must keep working
// unchanged. Ported from the agent's former replay adapter tests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/model/replay_provider.h"

namespace cagent::launcher::model {
namespace {

using nlohmann::json;
using protocol::StopReason;
using ::testing::HasSubstr;

std::vector<ModelResponse> Turns(const std::string& text) {
  auto turns = ParseReplayTurns(text, "session.jsonl");
  EXPECT_TRUE(turns.ok()) << turns.error().Message();
  return turns.ok() ? *turns : std::vector<ModelResponse>{};
}

std::string Error(const std::string& text) {
  auto turns = ParseReplayTurns(text, "session.jsonl");
  if (!turns.ok()) return turns.error().Message();
  ADD_FAILURE() << "expected an error for " << text;
  return {};
}

TEST(ReplayTurns, ParsesARecordedTurn) {
  const auto turns =
      Turns(R"({"text": "I will read the test first.", "tool_calls": [)"
            R"({"id": "call_1", "name": "read_file", "arguments": {"path": "test_calc.py"}}, )"
            R"({"id": "call_2", "name": "grep", "arguments": "{\"pattern\": \"add\"}"}], )"
            R"("usage": {"input_tokens": 812, "output_tokens": 40}})");
  ASSERT_EQ(turns.size(), 1U);
  const ModelResponse& r = turns[0];
  EXPECT_EQ(r.turn.text, "I will read the test first.");
  ASSERT_EQ(r.turn.tool_calls.size(), 2U);
  EXPECT_EQ(r.turn.tool_calls[0].arguments, (json{{"path", "test_calc.py"}}));
  EXPECT_EQ(r.turn.tool_calls[1].arguments, (json{{"pattern", "add"}}));  // string form accepted
  EXPECT_EQ(r.turn.stop_reason, StopReason::kToolCalls);
  EXPECT_EQ(r.provider_stop_reason, "tool_calls");
  EXPECT_EQ(r.usage.input_tokens, 812U);
  EXPECT_EQ(r.usage.output_tokens, 40U);
}

TEST(ReplayTurns, FinalAnswerAndMissingUsage) {
  const auto turns = Turns("{\"text\": \"done\"}\n");
  ASSERT_EQ(turns.size(), 1U);
  EXPECT_TRUE(turns[0].turn.tool_calls.empty());
  EXPECT_EQ(turns[0].turn.stop_reason, StopReason::kEnd);
  EXPECT_EQ(turns[0].usage.input_tokens, 0U);
  EXPECT_EQ(turns[0].raw, (json{{"text", "done"}}));
}

TEST(ReplayTurns, StopReasonInNeutralWordsIsKept) {
  const auto turns = Turns(
      "{\"text\": \"cut\", \"stop_reason\": \"max_tokens\"}\n"
      "{\"text\": \"no\", \"stop_reason\": \"refused\"}\n");
  ASSERT_EQ(turns.size(), 2U);
  EXPECT_EQ(turns[0].turn.stop_reason, StopReason::kMaxTokens);
  EXPECT_EQ(turns[1].turn.stop_reason, StopReason::kRefused);
  EXPECT_EQ(turns[1].provider_stop_reason, "refused");
}

TEST(ReplayTurns, MissingIdsAreGeneratedAndUnusableArgumentsAreCallErrors) {
  const auto turns = Turns(
      R"({"tool_calls": [{"name": "glob", "arguments": {}}, {"id": "call_1", "name": "glob"}, )"
      R"({"id": "c", "name": "read_file", "arguments": "{not json"}]})");
  ASSERT_EQ(turns.size(), 1U);
  const auto& calls = turns[0].turn.tool_calls;
  ASSERT_EQ(calls.size(), 3U);
  EXPECT_FALSE(calls[0].id.empty());
  EXPECT_NE(calls[0].id, "call_1");  // never the id another call of the turn has
  EXPECT_EQ(calls[1].id, "call_1");
  EXPECT_EQ(calls[1].arguments, json::object());
  EXPECT_THAT(calls[2].arguments_error, HasSubstr("not valid JSON"));
}

TEST(ReplayTurns, RejectsMalformedTurns) {
  EXPECT_THAT(Error("{}\n"), HasSubstr("session.jsonl:1: a turn needs"));
  EXPECT_THAT(Error("{\"text\": 3}\n"), HasSubstr("\"text\" must be a string"));
  EXPECT_THAT(Error("{\"tool_calls\": \"read_file\"}\n"), HasSubstr("must be a list"));
  EXPECT_THAT(Error("{\"tool_calls\": [{\"id\": \"x\"}]}\n"), HasSubstr("needs a \"name\""));
  EXPECT_THAT(Error("{\"text\": \"a\"}\n{\"text\": \"b\", \"stop_reason\": 1}\n"),
              HasSubstr("session.jsonl:2: \"stop_reason\" must be"));
  json many = {{"tool_calls", json::array()}};
  for (std::size_t i = 0; i <= protocol::kMaxToolCallsPerTurn; ++i) {
    many["tool_calls"].push_back({{"id", "c" + std::to_string(i)}, {"name", "glob"}});
  }
  EXPECT_THAT(Error(many.dump()), HasSubstr("calls (at most 512)"));
}

TEST(ReplayTurns, FixAddSessionParsesAndEndsWithFinish) {
  std::ifstream in(std::string(CAGENT_SOURCE_DIR) + "/tests/testdata/replay/fix_add.jsonl");
  ASSERT_TRUE(in) << "tests/testdata/replay/fix_add.jsonl is missing";
  std::ostringstream text;
  text << in.rdbuf();
  const auto turns = Turns(text.str());
  ASSERT_EQ(turns.size(), 4U);
  std::vector<std::string> tools;
  std::vector<std::string> ids;
  for (const ModelResponse& r : turns) {
    EXPECT_EQ(r.turn.stop_reason, StopReason::kToolCalls);
    for (const protocol::ToolCall& call : r.turn.tool_calls) {
      EXPECT_TRUE(call.arguments_error.empty()) << call.name;
      tools.push_back(call.name);
      ids.push_back(call.id);
    }
  }
  EXPECT_EQ(tools, (std::vector<std::string>{"read_file", "edit_file", "run_command", "finish"}));
  EXPECT_EQ(ids, (std::vector<std::string>{"call_1", "call_2", "call_3", "call_4"}));
}

}  // namespace
}  // namespace cagent::launcher::model
