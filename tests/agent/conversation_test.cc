// The conversation as protocol v2's model_call: the agent sends message content only.
#include "agent/conversation.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>
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

// The plan is the model's own "Plan:" block (no tool): the last one in a message, its items only.
TEST(ExtractPlan, TakesTheItemsAfterAPlanLine) {
  EXPECT_EQ(ExtractPlan("I'll do this.\n\nPlan:\n- [done] read a.c\n- [doing] fix b.c\n  (the "
                        "loop at line 40)\n- [todo] run tests\n\nNow reading a.c."),
            "- [done] read a.c\n- [doing] fix b.c\n  (the loop at line 40)\n- [todo] run tests");
  EXPECT_EQ(ExtractPlan("## Plan\n\n1. one\n2) two\nThen prose."), "1. one\n2) two");
  EXPECT_EQ(ExtractPlan("**Plan:**\n* a\n+ b"), "* a\n+ b");
  EXPECT_EQ(ExtractPlan("PLAN:\n- only"), "- only");
}

TEST(ExtractPlan, NoPlanBlockIsNothing) {
  EXPECT_EQ(ExtractPlan(""), std::nullopt);
  EXPECT_EQ(ExtractPlan("The plan: read the file, then fix it."), std::nullopt);
  EXPECT_EQ(ExtractPlan("Plan:\nread the file, then fix it.\n- too late"), std::nullopt);
  EXPECT_EQ(ExtractPlan("My plan:\n- a"), std::nullopt);
  EXPECT_EQ(ExtractPlan("Plan:"), std::nullopt);
}

TEST(ExtractPlan, TheLastBlockWinsAndLongPlansAreCut) {
  EXPECT_EQ(ExtractPlan("Plan:\n- old\n\nPlan:\n- new"), "- new");
  EXPECT_EQ(ExtractPlan("Plan:\n- kept\n\nPlan:\nno items"), "- kept");
  std::string many = "Plan:\n";
  for (std::size_t i = 0; i < kMaxPlanLines + 5; ++i) many += "- step " + std::to_string(i) + "\n";
  many += "- " + std::string(1000, 'x');
  const std::string plan = ExtractPlan(many).value_or("");
  EXPECT_EQ(plan.substr(plan.rfind('\n') + 1), "(6 more lines not kept)");
  EXPECT_EQ(ExtractPlan("Plan:\n- " + std::string(1000, 'y'))->size(), kMaxPlanLineBytes + 3);
}

TEST(Conversation, KeepsTheLatestPlanAndTheFilesTheFileToolsChanged) {
  Conversation c;
  c.AddSystem("s");
  c.AddTask("t");
  EXPECT_EQ(c.plan(), "");
  EXPECT_EQ(c.plan_turn(), 0U);
  c.AddAssistant("Plan:\n- a\n- b", {});
  c.AddAssistant("no plan here", {});
  EXPECT_EQ(c.plan(), "- a\n- b");
  EXPECT_EQ(c.plan_turn(), 1U);
  c.AddAssistant("Plan:\n- [done] a\n- [doing] b", {ToolCall{"c1", "edit_file", {}, ""}});
  EXPECT_EQ(c.plan(), "- [done] a\n- [doing] b");
  EXPECT_EQ(c.plan_turn(), 3U);
  ToolResultInfo info;
  info.tool = "edit_file";
  info.changed_paths = {"src/b.c"};
  c.AddToolResult({"c1", "diff", false}, info);
  info.changed_paths = {"a.c", "src/b.c"};
  c.AddToolResult({"c1", "diff", false}, info);
  EXPECT_EQ(c.changed_files(), (std::set<std::string>{"a.c", "src/b.c"}));
  // The state is not a message: the conversation holds only what was added.
  EXPECT_EQ(c.messages().size(), 7U);
}

}  // namespace
}  // namespace cagent::agent
