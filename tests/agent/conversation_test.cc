// The conversation as protocol v2's model_call: the agent sends message content only.
#include "agent/conversation.h"

#include <gtest/gtest.h>

#include <string>

#include "common/json_text.h"

namespace cagent::agent {
namespace {

using nlohmann::json;

TEST(ToModelCall, MapsRolesAndKeepsCallsExactly) {
  Conversation c;
  c.AddSystem("SYSTEM ONE");
  c.AddTask("THE TASK");
  const ToolCall call{"toolu_1", "read_file", {{"path", "a.py"}, {"offset", nullptr}}, ""};
  const ToolCall broken{"toolu_2", "grep", json::object(), "not JSON"};
  c.AddAssistant("Reading.", {call, broken});
  ToolResultInfo info;
  info.tool = "read_file";
  info.subject = "a.py";
  info.paths = {"a.py"};
  info.error_code = "private";
  c.AddToolResult({"toolu_1", "1\tx = 1", false}, info);
  c.AddToolResult({"toolu_2", "error [bad_arguments]: ...", true}, {});
  c.AddUser("a nudge");

  const protocol::ModelCall out = ToModelCall(c);
  EXPECT_EQ(out.system, "SYSTEM ONE");
  ASSERT_EQ(out.messages.size(), 5U);
  EXPECT_EQ(out.messages[0].role, protocol::Role::kUser);
  EXPECT_EQ(out.messages[0].text, "THE TASK");
  EXPECT_EQ(out.messages[1].role, protocol::Role::kAssistant);
  EXPECT_EQ(out.messages[1].text, "Reading.");
  ASSERT_EQ(out.messages[1].tool_calls.size(), 2U);
  EXPECT_EQ(out.messages[1].tool_calls[0].id, "toolu_1");
  EXPECT_EQ(out.messages[1].tool_calls[0].arguments, call.arguments);  // null kept
  EXPECT_EQ(out.messages[1].tool_calls[1].arguments_error, "not JSON");
  EXPECT_EQ(out.messages[2].role, protocol::Role::kTool);
  EXPECT_EQ(out.messages[2].call_id, "toolu_1");
  EXPECT_EQ(out.messages[2].text, "1\tx = 1");
  EXPECT_FALSE(out.messages[2].is_error);
  EXPECT_TRUE(out.messages[3].is_error);
  EXPECT_EQ(out.messages[4].role, protocol::Role::kUser);
  EXPECT_EQ(out.messages[4].text, "a nudge");
  // What context management knows about a result stays in the agent.
  const std::string wire =
      JsonText(protocol::ToJson(protocol::Make(protocol::Kind::kModelCall, 1, out)));
  EXPECT_EQ(wire.find("private"), std::string::npos);
}

TEST(ToModelCall, SeveralSystemMessagesAreJoinedByABlankLine) {
  Conversation c;
  c.AddSystem("first");
  c.AddSystem("second");
  c.AddTask("task");
  const protocol::ModelCall out = ToModelCall(c);
  EXPECT_EQ(out.system, "first\n\nsecond");
  ASSERT_EQ(out.messages.size(), 1U);
  EXPECT_EQ(out.messages[0].text, "task");
}

TEST(ToModelCall, NoSystemMessageIsAnEmptySystemText) {
  Conversation c;
  c.AddTask("task");
  EXPECT_EQ(ToModelCall(c).system, "");
  EXPECT_EQ(ToModelCall(c).messages.size(), 1U);
}

}  // namespace
}  // namespace cagent::agent
