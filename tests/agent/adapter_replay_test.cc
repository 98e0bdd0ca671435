// Replay adapter: the recorded-turn format of launcher/broker/model_provider.h, and the recorded
// session the end-to-end demo plays (tests/testdata/replay/fix_add.jsonl).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/adapters/replay.h"

namespace cagent::agent {
namespace {

using nlohmann::json;

std::vector<json> ReadSession(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> turns;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    turns.push_back(json::parse(line));
  }
  return turns;
}

TEST(ReplayAdapter, RequestNamesTheTurn) {
  ReplayAdapter adapter;
  Conversation c;
  c.AddSystem("sys");
  c.AddTask("task");
  EXPECT_EQ(adapter.BuildRequest(c, json::array()), (json{{"turn", 1}}));
  c.AddAssistant("x", {});
  c.AddAssistant("y", {});
  EXPECT_EQ(adapter.BuildRequest(c, json::array()), (json{{"turn", 3}}));
}

TEST(ReplayAdapter, ParsesARecordedTurn) {
  const json turn_json = json::parse(R"({"text": "I will read the test first.",
    "tool_calls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "test_calc.py"}},
                   {"id": "call_2", "name": "grep", "arguments": "{\"pattern\": \"add\"}"}],
    "usage": {"input_tokens": 812, "output_tokens": 40}})");
  auto turn = ReplayAdapter().Parse(turn_json);
  ASSERT_TRUE(turn.ok()) << turn.error().Message();
  EXPECT_EQ(turn->text, "I will read the test first.");
  ASSERT_EQ(turn->tool_calls.size(), 2U);
  EXPECT_EQ(turn->tool_calls[0].arguments, (json{{"path", "test_calc.py"}}));
  EXPECT_EQ(turn->tool_calls[1].arguments, (json{{"pattern", "add"}}));  // string form accepted
  EXPECT_EQ(turn->stop_reason, "tool_use");
  EXPECT_EQ(turn->usage.input_tokens, 812U);
  EXPECT_EQ(turn->usage.output_tokens, 40U);
}

TEST(ReplayAdapter, FinalAnswerAndMissingUsage) {
  auto turn = ReplayAdapter().Parse(json{{"text", "done"}});
  ASSERT_TRUE(turn.ok());
  EXPECT_TRUE(turn->tool_calls.empty());
  EXPECT_EQ(turn->stop_reason, "end_turn");
  EXPECT_FALSE(turn->usage_reported);
}

TEST(ReplayAdapter, RejectsMalformedTurns) {
  ReplayAdapter adapter;
  EXPECT_FALSE(adapter.Parse(json::object()).ok());
  EXPECT_FALSE(adapter.Parse(json{{"text", 3}}).ok());
  EXPECT_FALSE(adapter.Parse(json{{"tool_calls", "read_file"}}).ok());
  EXPECT_FALSE(adapter.Parse(json{{"tool_calls", json::array({{{"id", "x"}}})}}).ok());
  auto bad_args = adapter.Parse(json::parse(
      R"({"tool_calls": [{"id": "c", "name": "read_file", "arguments": "{not json"}]})"));
  ASSERT_TRUE(bad_args.ok());
  EXPECT_FALSE(bad_args->tool_calls[0].arguments_error.empty());
}

TEST(ReplayAdapter, FixAddSessionParsesAndEndsWithFinish) {
  const auto turns =
      ReadSession(std::string(CAGENT_SOURCE_DIR) + "/tests/testdata/replay/fix_add.jsonl");
  ASSERT_EQ(turns.size(), 4U);
  std::vector<std::string> tools;
  for (const json& t : turns) {
    auto turn = ReplayAdapter().Parse(t);
    ASSERT_TRUE(turn.ok()) << turn.error().Message();
    for (const ToolCall& call : turn->tool_calls) {
      EXPECT_TRUE(call.arguments_error.empty()) << call.name;
      tools.push_back(call.name);
    }
  }
  EXPECT_EQ(tools, (std::vector<std::string>{"read_file", "edit_file", "run_command", "finish"}));
}

}  // namespace
}  // namespace cagent::agent
