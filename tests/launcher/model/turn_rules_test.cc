// The rules every parsed turn passes before it goes to the (untrusted) agent: ids that bind tool
// requests are present, short and unique; unusable names and arguments become call errors; the
// number of calls is bounded.
#include "launcher/model/turn_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace cagent::launcher::model {
namespace {

using nlohmann::json;
using protocol::AssistantTurn;
using protocol::StopReason;
using protocol::ToolCall;
using ::testing::HasSubstr;

ToolCall Call(std::string id, std::string name = "glob") {
  ToolCall c;
  c.id = std::move(id);
  c.name = std::move(name);
  c.arguments = {{"pattern", "*"}};
  return c;
}

TEST(TurnRules, MissingDuplicateAndOversizeIdsAreReplacedByGeneratedOnes) {
  AssistantTurn turn;
  turn.tool_calls = {
      Call(""),      Call("a"), Call("a"), Call(std::string(257, 'x')), Call(std::string(256, 'y')),
      Call("call_1")};
  CallIdSource ids;
  ASSERT_TRUE(FinishTurn(turn, ids, "p").ok());
  const auto& c = turn.tool_calls;
  EXPECT_EQ(c[1].id, "a");                    // the first "a" keeps its id
  EXPECT_EQ(c[4].id, std::string(256, 'y'));  // exactly at the limit is kept
  EXPECT_EQ(c[5].id, "call_1");               // a provider id is kept...
  EXPECT_EQ(c[0].id, "call_2");               // ...and a generated one never collides with it
  EXPECT_EQ(c[2].id, "call_3");
  EXPECT_EQ(c[3].id, "call_4");
  std::set<std::string> unique;
  for (const ToolCall& call : c) {
    EXPECT_FALSE(call.id.empty());
    EXPECT_LE(call.id.size(), protocol::kMaxIdBytes);
    unique.insert(call.id);
    EXPECT_TRUE(call.arguments_error.empty()) << call.id;  // an id problem is not a call error
  }
  EXPECT_EQ(unique.size(), c.size());
}

TEST(TurnRules, GeneratedIdsDoNotRepeatAcrossTurnsOfOneSource) {
  CallIdSource ids;
  AssistantTurn first;
  first.tool_calls = {Call("")};
  AssistantTurn second;
  second.tool_calls = {Call("")};
  ASSERT_TRUE(FinishTurn(first, ids, "p").ok());
  ASSERT_TRUE(FinishTurn(second, ids, "p").ok());
  EXPECT_NE(first.tool_calls[0].id, second.tool_calls[0].id);
}

TEST(TurnRules, EmptyAndOverlongNamesAreCallErrors) {
  AssistantTurn turn;
  turn.tool_calls = {Call("a", ""), Call("b", std::string(300, 'n')),
                     Call("c", std::string(255, 'n') + "\xC3\xA9"), Call("d", "read_file")};
  CallIdSource ids;
  ASSERT_TRUE(FinishTurn(turn, ids, "p").ok());
  const auto& c = turn.tool_calls;
  EXPECT_EQ(c[0].name, "unnamed");
  EXPECT_EQ(c[0].arguments_error, "the tool call has no name");
  EXPECT_EQ(c[0].arguments, json::object());
  EXPECT_EQ(c[1].name, std::string(256, 'n'));
  EXPECT_EQ(c[1].arguments_error, "the tool name is 300 bytes long (at most 256)");
  EXPECT_EQ(c[1].arguments, json::object());
  // Cut without splitting the two-byte character that straddles the limit.
  EXPECT_EQ(c[2].name, std::string(255, 'n'));
  EXPECT_THAT(c[2].arguments_error, HasSubstr("257 bytes"));
  EXPECT_TRUE(c[3].arguments_error.empty());
  EXPECT_EQ(c[3].arguments, (json{{"pattern", "*"}}));
}

TEST(TurnRules, TooManyCallsIsAnError) {
  AssistantTurn turn;
  for (std::size_t i = 0; i <= protocol::kMaxToolCallsPerTurn; ++i) {
    turn.tool_calls.push_back(Call("c" + std::to_string(i)));
  }
  CallIdSource ids;
  const Status st = FinishTurn(turn, ids, "the provider at x");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().Message(), HasSubstr("the provider at x answered with 513 tool calls"));
  turn.tool_calls.pop_back();
  EXPECT_TRUE(FinishTurn(turn, ids, "p").ok());  // exactly the limit is fine
}

TEST(TurnRules, CallsWithEndAreToolCallsAndOtherReasonsStay) {
  CallIdSource ids;
  AssistantTurn end;
  end.tool_calls = {Call("a")};
  ASSERT_TRUE(FinishTurn(end, ids, "p").ok());
  EXPECT_EQ(end.stop_reason, StopReason::kToolCalls);
  AssistantTurn cut;
  cut.tool_calls = {Call("a")};
  cut.stop_reason = StopReason::kMaxTokens;
  ASSERT_TRUE(FinishTurn(cut, ids, "p").ok());
  EXPECT_EQ(cut.stop_reason, StopReason::kMaxTokens);
  AssistantTurn text;
  ASSERT_TRUE(FinishTurn(text, ids, "p").ok());
  EXPECT_EQ(text.stop_reason, StopReason::kEnd);
}

TEST(TurnRules, ArgumentsFromTextAndJson) {
  ToolCall c;
  SetArgumentsFromText(c, "  \n");
  EXPECT_EQ(c.arguments, json::object());
  EXPECT_TRUE(c.arguments_error.empty());
  SetArgumentsFromText(c, "{" + std::string(1000, 'x'));
  EXPECT_THAT(c.arguments_error, HasSubstr("not valid JSON"));
  EXPECT_LT(c.arguments_error.size(), 300U);  // the quote is cut
  ToolCall n;
  SetArgumentsFromJson(n, json(nullptr));
  EXPECT_EQ(n.arguments, json::object());
  EXPECT_TRUE(n.arguments_error.empty());
  SetArgumentsFromJson(n, json("x"));
  EXPECT_THAT(n.arguments_error, HasSubstr("must be a JSON object, got: \"x\""));
}

// Arguments nested deeper than kMaxArgumentsDepth are {} with an error, as text and as JSON; at
// the limit they are taken. (model_provider_test has the twin: such text crashes JsonText.)
TEST(TurnRules, ArgumentsNestedTooDeepAreACallError) {
  const auto nested = [](std::size_t levels) {  // {"a": [[...]]}: `levels` in all
    return "{\"a\":" + std::string(levels - 1, '[') + std::string(levels - 1, ']') + "}";
  };
  ToolCall at;
  SetArgumentsFromText(at, nested(kMaxArgumentsDepth));
  EXPECT_TRUE(at.arguments_error.empty()) << at.arguments_error;
  EXPECT_TRUE(at.arguments.contains("a"));
  ToolCall over;
  SetArgumentsFromText(over, nested(kMaxArgumentsDepth + 1));
  EXPECT_EQ(over.arguments, json::object());
  EXPECT_EQ(over.arguments_error, "the arguments nest deeper than 64 levels");
  ToolCall huge;
  SetArgumentsFromText(huge, nested(300'000));
  EXPECT_EQ(huge.arguments, json::object());
  EXPECT_THAT(huge.arguments_error, HasSubstr("nest deeper"));
  // Already JSON (Anthropic's input, an Ollama object).
  ToolCall j;
  SetArgumentsFromJson(j, json::parse(nested(kMaxArgumentsDepth)));
  EXPECT_TRUE(j.arguments_error.empty());
  SetArgumentsFromJson(j, json::parse(nested(kMaxArgumentsDepth + 1)));
  EXPECT_EQ(j.arguments, json::object());
  EXPECT_THAT(j.arguments_error, HasSubstr("nest deeper"));
}

}  // namespace
}  // namespace cagent::launcher::model
