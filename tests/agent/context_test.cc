// Context management: budget-driven compaction, stub text, ledger invalidation, tool call/result
// pairs never split, the system prompt and the task always kept.
#include "agent/context.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/agent/scripted_broker_util.h"

namespace cagent::agent {
namespace {

using nlohmann::json;

// One turn: an assistant call of `tool` on `path` and its result of `bytes` bytes.
void AddTurn(Conversation& c, int n, const std::string& tool, const std::string& path,
             std::size_t bytes, bool is_error = false) {
  const std::string id = "call_" + std::to_string(n);
  c.AddAssistant("step " + std::to_string(n), {ToolCall{id, tool, {{"path", path}}, ""}});
  ToolResultInfo info;
  info.tool = tool;
  info.subject = path;
  info.paths = {path};
  if (is_error) info.error_code = "not_found";
  c.AddToolResult({id, std::string(bytes, 'x'), is_error}, info);
}

Conversation Base() {
  Conversation c;
  c.AddSystem("SYSTEM PROMPT");
  c.AddTask("THE TASK");
  return c;
}

// Every tool message directly follows an assistant message (or another tool message) that made
// the call with its id.
void ExpectPairsIntact(const Conversation& c) {
  const auto& m = c.messages();
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m[i].role != Role::kTool) continue;
    std::size_t j = i;
    while (j > 0 && m[j - 1].role == Role::kTool) --j;
    ASSERT_GT(j, 0U);
    const Message& assistant = m[j - 1];
    ASSERT_EQ(assistant.role, Role::kAssistant) << "result " << m[i].result.call_id << " orphaned";
    bool found = false;
    for (const ToolCall& call : assistant.tool_calls) found |= call.id == m[i].result.call_id;
    EXPECT_TRUE(found) << m[i].result.call_id;
  }
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m[i].role != Role::kAssistant) continue;
    for (std::size_t k = 0; k < m[i].tool_calls.size(); ++k) {
      ASSERT_LT(i + 1 + k, m.size());
      EXPECT_EQ(m[i + 1 + k].role, Role::kTool);
      EXPECT_EQ(m[i + 1 + k].result.call_id, m[i].tool_calls[k].id);
    }
  }
}

void ExpectPinnedKept(const Conversation& c) {
  ASSERT_GE(c.messages().size(), 2U);
  EXPECT_EQ(c.messages()[0].role, Role::kSystem);
  EXPECT_EQ(c.messages()[0].text, "SYSTEM PROMPT");
  EXPECT_EQ(c.messages()[1].role, Role::kUser);
  EXPECT_EQ(c.messages()[1].text, "THE TASK");
}

TEST(Context, EstimateIsBytesOverFourPlusOverhead) {
  Message m;
  m.text = std::string(10, 'a');  // ceil(10/4) = 3, + 4 overhead
  EXPECT_EQ(EstimateTokens(m), 7U);
  m.tool_calls.push_back(ToolCall{"i", "n", json::object(), ""});  // "i" "n" "{}" = 4 bytes, +8
  EXPECT_EQ(EstimateTokens(m), 4U + 8U + 4U);                      // (10 + 4) / 4 rounded up = 4
}

TEST(Context, BudgetIsThreeQuartersOfWindowMinusOutput) {
  ContextLimits limits;
  limits.context_window = 10000;
  limits.max_output_tokens = 2000;
  EXPECT_EQ(limits.Budget(), 6000U);
  limits.context_window = 0;
  EXPECT_EQ(limits.Budget(), 0U);
}

TEST(Context, NothingHappensUnderBudget) {
  Conversation c = Base();
  AddTurn(c, 1, "read_file", "a.py", 4000);
  ContextLimits limits;
  limits.context_window = 100000;
  Ledger ledger;
  ledger.RecordRead("a.py", "d");
  const auto before = c.messages().size();
  CompactionReport report = Compact(c, limits, &ledger);
  EXPECT_FALSE(report.compacted());
  EXPECT_EQ(c.messages().size(), before);
  EXPECT_EQ(ledger.Check("a.py", "d"), Ledger::State::kFresh);
}

TEST(Context, UnknownWindowNeverCompacts) {
  Conversation c = Base();
  for (int i = 1; i <= 10; ++i) AddTurn(c, i, "read_file", "f" + std::to_string(i), 100000);
  EXPECT_FALSE(Compact(c, ContextLimits{}, nullptr).compacted());
}

TEST(Context, OldLargeOutputsBecomeStubsAndFilesAreInvalidated) {
  Conversation c = Base();
  AddTurn(c, 1, "read_file", "src/x.py", 4120);
  AddTurn(c, 2, "read_file", "src/y.py", 4000);
  AddTurn(c, 3, "run_command", "", 100);
  AddTurn(c, 4, "read_file", "src/z.py", 4000);
  AddTurn(c, 5, "list_dir", ".", 50);
  AddTurn(c, 6, "list_dir", ".", 50);
  ContextLimits limits;
  limits.keep_recent_turns = 3;
  // Total ~3,270 estimated tokens; a budget of 2,325 needs one stub (x.py), not two, when the
  // target is the budget itself (no lower target: this test is about "only as far as needed").
  limits.context_window = 3200;
  limits.max_output_tokens = 100;
  limits.target = 1.0;
  ASSERT_GT(c.EstimateTokens(), limits.Budget());
  Ledger ledger;
  for (const char* p : {"src/x.py", "src/y.py", "src/z.py"}) ledger.RecordRead(p, "d");

  CompactionReport report = Compact(c, limits, &ledger);
  EXPECT_EQ(report.stubbed, 1U);
  EXPECT_EQ(report.summarised, 0U);
  EXPECT_LE(report.tokens_after, limits.Budget());
  EXPECT_EQ(c.messages()[3].result.content,
            "[output of read_file src/x.py (4,120 bytes) dropped to save context; call the tool "
            "again if needed]");
  EXPECT_TRUE(c.messages()[3].info.stubbed);
  EXPECT_EQ(c.messages()[5].result.content.size(), 4000U);  // y.py: not needed
  EXPECT_EQ(ledger.Check("src/x.py", "d"), Ledger::State::kInvalidated);
  EXPECT_EQ(ledger.Check("src/y.py", "d"), Ledger::State::kFresh);
  EXPECT_EQ(ledger.Check("src/z.py", "d"), Ledger::State::kFresh);
  EXPECT_EQ(report.invalidated, std::vector<std::string>{"src/x.py"});
  ExpectPairsIntact(c);
  ExpectPinnedKept(c);
}

TEST(Context, RecentTurnsAreNeverStubbed) {
  Conversation c = Base();
  AddTurn(c, 1, "read_file", "a.py", 40000);
  AddTurn(c, 2, "read_file", "b.py", 40000);
  ContextLimits limits;
  limits.keep_recent_turns = 2;
  limits.context_window = 1000;
  Ledger ledger;
  ledger.RecordRead("a.py", "d");
  CompactionReport report = Compact(c, limits, &ledger);
  // Both turns are recent at first; with fewer kept turns, the older one goes, the last stays.
  EXPECT_EQ(c.messages().back().result.content.size(), 40000U);
  EXPECT_TRUE(report.still_over);
  EXPECT_EQ(ledger.Check("a.py", "d"), Ledger::State::kInvalidated);
  ExpectPairsIntact(c);
  ExpectPinnedKept(c);
}

TEST(Context, StillTooLargeSummarisesOldTurnsMechanically) {
  Conversation c = Base();
  for (int i = 1; i <= 30; ++i) {
    AddTurn(c, i, i % 3 == 0 ? "run_command" : "read_file", "f" + std::to_string(i) + ".py", 800,
            i == 4);
  }
  c.AddUser("a nudge from the loop");
  AddTurn(c, 31, "read_file", "last.py", 100);
  ContextLimits limits;
  limits.keep_recent_turns = 3;
  limits.context_window = 2000;
  limits.max_output_tokens = 0;
  Ledger ledger;
  ledger.RecordRead("f1.py", "d");
  ledger.RecordRead("last.py", "d");
  CompactionReport report = Compact(c, limits, &ledger);
  EXPECT_GT(report.summarised, 0U);
  EXPECT_LE(report.tokens_after, limits.Budget());
  EXPECT_FALSE(report.still_over);
  ExpectPinnedKept(c);
  ExpectPairsIntact(c);
  const Message& summary = c.messages()[2];
  EXPECT_TRUE(summary.summary);
  EXPECT_EQ(summary.role, Role::kUser);
  EXPECT_NE(summary.text.find("- read_file f1.py -> ok"), std::string::npos) << summary.text;
  EXPECT_NE(summary.text.find("- read_file f4.py -> error [not_found]"), std::string::npos);
  EXPECT_NE(summary.text.find("- run_command f3.py -> ok"), std::string::npos);
  EXPECT_NE(summary.text.find("- you said: step 1"), std::string::npos);
  // The turn after the summary starts with an assistant message (no orphaned result).
  EXPECT_EQ(c.messages()[3].role, Role::kAssistant);
  EXPECT_EQ(c.messages().back().result.call_id, "call_31");
  EXPECT_EQ(ledger.Check("f1.py", "d"), Ledger::State::kInvalidated);
  EXPECT_EQ(ledger.Check("last.py", "d"), Ledger::State::kFresh);

  // A second compaction folds the first summary into the new one.
  for (int i = 32; i <= 60; ++i) AddTurn(c, i, "read_file", "g" + std::to_string(i) + ".py", 800);
  CompactionReport second = Compact(c, limits, &ledger);
  EXPECT_GT(second.summarised, 0U);
  const std::string& text = c.messages()[2].text;
  EXPECT_NE(text.find("- read_file f1.py -> ok"), std::string::npos);
  EXPECT_NE(text.find("- read_file g32.py -> ok"), std::string::npos);
  std::size_t summaries = 0;
  for (const Message& m : c.messages()) summaries += m.summary ? 1 : 0;
  EXPECT_EQ(summaries, 1U);
  ExpectPinnedKept(c);
  ExpectPairsIntact(c);
}

TEST(Context, AnIntactLaterReadKeepsTheFileValid) {
  Conversation c = Base();
  AddTurn(c, 1, "read_file", "a.py", 8000);
  AddTurn(c, 2, "list_dir", ".", 10);
  AddTurn(c, 3, "read_file", "a.py", 500);  // re-read, small: stays intact
  AddTurn(c, 4, "list_dir", ".", 10);
  ContextLimits limits;
  limits.keep_recent_turns = 3;
  limits.context_window = 2000;
  Ledger ledger;
  ledger.RecordRead("a.py", "d");
  CompactionReport report = Compact(c, limits, &ledger);
  EXPECT_EQ(report.stubbed, 1U);
  EXPECT_TRUE(report.invalidated.empty());
  EXPECT_EQ(ledger.Check("a.py", "d"), Ledger::State::kFresh);
}

TEST(Context, SeveralCallsOfOneTurnStayWithTheirResults) {
  Conversation c = Base();
  for (int t = 1; t <= 12; ++t) {
    std::vector<ToolCall> calls;
    for (int k = 0; k < 3; ++k) {
      calls.push_back(ToolCall{
          "c" + std::to_string(t) + "_" + std::to_string(k), "grep", {{"pattern", "x"}}, ""});
    }
    c.AddAssistant("", calls);
    for (const ToolCall& call : calls) {
      ToolResultInfo info;
      info.tool = "grep";
      c.AddToolResult({call.id, std::string(600, 'y'), false}, info);
    }
  }
  ContextLimits limits;
  limits.keep_recent_turns = 2;
  limits.context_window = 1500;
  CompactionReport report = Compact(c, limits, nullptr);
  EXPECT_TRUE(report.compacted());
  ExpectPairsIntact(c);
  ExpectPinnedKept(c);
}

// Protocol v2: the broker refuses a model_call whose assistant messages carry calls the model did
// not issue exactly so, or whose tool messages do not answer a call of the nearest assistant
// message before them. Compaction at any budget must keep every kept assistant message's calls
// untouched (all of them, in order) and never leave a result whose call was summarised away.
TEST(Context, CompactionKeepsAConversationTheBrokerAccepts) {
  Conversation original = Base();
  std::vector<ToolCall> issued;
  std::map<std::string, std::vector<ToolCall>> calls_of;  // assistant text -> its calls
  for (int t = 1; t <= 24; ++t) {
    const std::string text = "turn " + std::to_string(t);
    std::vector<ToolCall> calls;
    if (t % 5 == 0) {
      // An answer without calls (then a nudge), like a cut-off reply.
      original.AddAssistant(text, {});
      original.AddUser("Your reply was cut off at the output limit.");
      calls_of[text] = {};
      continue;
    }
    for (int k = 0; k < 1 + t % 3; ++k) {
      const std::string path = "f" + std::to_string(t) + "_" + std::to_string(k) + ".py";
      calls.push_back(ToolCall{"id_" + std::to_string(t) + "_" + std::to_string(k),
                               k == 1 ? "grep" : "read_file",
                               {{"path", path}, {"offset", t}, {"note", nullptr}},
                               ""});
    }
    if (t % 7 == 0) calls.back().arguments_error = "the arguments are not valid JSON: {";
    original.AddAssistant(text, calls);
    for (const ToolCall& call : calls) {
      ToolResultInfo info;
      info.tool = call.name;
      info.subject = call.arguments["path"];
      info.paths = {info.subject};
      const bool error = !call.arguments_error.empty();
      if (error) info.error_code = "bad_arguments";
      original.AddToolResult({call.id, std::string(error ? 40 : 300 + 97 * t, 'z'), error}, info);
    }
    calls_of[text] = calls;
    issued.insert(issued.end(), calls.begin(), calls.end());
  }
  ASSERT_EQ(testing::ConversationProblem(ToModelCall(original), issued), "");

  std::size_t stubbed = 0;
  std::size_t summarised = 0;
  for (std::size_t keep = 1; keep <= 4; ++keep) {
    for (std::uint64_t window = 300; window <= 12000; window += 350) {
      Conversation c = original;
      ContextLimits limits;
      limits.keep_recent_turns = keep;
      limits.context_window = window;
      limits.stub_min_bytes = 1000;
      const CompactionReport report = Compact(c, limits, nullptr);
      stubbed += report.stubbed;
      summarised += report.summarised;
      const std::string where =
          "keep " + std::to_string(keep) + ", window " + std::to_string(window);
      EXPECT_EQ(testing::ConversationProblem(ToModelCall(c), issued), "") << where;
      ExpectPinnedKept(c);
      ExpectPairsIntact(c);  // every call of a kept assistant message still has its result
      for (const Message& m : c.messages()) {
        if (m.role != Role::kAssistant) continue;
        auto it = calls_of.find(m.text);
        ASSERT_NE(it, calls_of.end()) << where << ": assistant text changed to " << m.text;
        ASSERT_EQ(m.tool_calls.size(), it->second.size()) << where << ": " << m.text;
        for (std::size_t k = 0; k < m.tool_calls.size(); ++k) {
          EXPECT_EQ(m.tool_calls[k].id, it->second[k].id) << where;
          EXPECT_EQ(m.tool_calls[k].name, it->second[k].name) << where;
          EXPECT_EQ(m.tool_calls[k].arguments, it->second[k].arguments) << where;
          EXPECT_EQ(m.tool_calls[k].arguments_error, it->second[k].arguments_error) << where;
        }
      }
    }
  }
  // Both stages really ran somewhere in the sweep.
  EXPECT_GT(stubbed, 0U);
  EXPECT_GT(summarised, 0U);
}

// The twin: the rule the test above relies on does catch a result left without its call.
TEST(Context, AResultWithoutItsCallBreaksTheBrokersRule) {
  Conversation c = Base();
  AddTurn(c, 1, "read_file", "a.py", 10);
  AddTurn(c, 2, "read_file", "b.py", 10);
  const std::vector<ToolCall> issued = {c.messages()[2].tool_calls[0],
                                        c.messages()[4].tool_calls[0]};
  EXPECT_EQ(testing::ConversationProblem(ToModelCall(c), issued), "");
  auto& m = c.mutable_messages();
  m.erase(m.begin() + 4);  // turn 2's assistant message; its result now follows turn 1's
  EXPECT_NE(testing::ConversationProblem(ToModelCall(c), issued), "");
  Conversation altered = Base();
  AddTurn(altered, 1, "read_file", "a.py", 10);
  altered.mutable_messages()[2].tool_calls[0].arguments["path"] = "other.py";
  EXPECT_NE(testing::ConversationProblem(ToModelCall(altered), issued), "");
}

// The summary pins the latest plan and the files the file tools changed, once each, also when a
// later compaction folds an earlier summary (its record is carried, not its text re-read).
TEST(Context, TheSummaryPinsTheLatestPlanAndTheChangedFiles) {
  Conversation c = Base();
  c.AddAssistant("Plan:\n- [doing] fix a.py\n- [todo] test", {ToolCall{"e1", "edit_file", {}, ""}});
  ToolResultInfo info;
  info.tool = "edit_file";
  info.subject = "a.py";
  info.paths = {"a.py"};
  info.changed_paths = {"a.py"};
  c.AddToolResult({"e1", "diff", false}, info);
  for (int i = 2; i <= 20; ++i) AddTurn(c, i, "read_file", "f" + std::to_string(i) + ".py", 800);
  ContextLimits limits;
  limits.keep_recent_turns = 2;
  limits.context_window = 2000;
  ASSERT_GT(Compact(c, limits, nullptr).summarised, 0U);
  for (int i = 21; i <= 40; ++i) AddTurn(c, i, "read_file", "g" + std::to_string(i) + ".py", 800);
  ASSERT_GT(Compact(c, limits, nullptr).summarised, 0U);
  ExpectPinnedKept(c);
  const std::string& text = c.messages()[2].text;
  ASSERT_TRUE(c.messages()[2].summary);
  const std::string plan = "- [doing] fix a.py\n- [todo] test";
  ASSERT_NE(text.find(plan), std::string::npos) << text;
  EXPECT_EQ(text.find(plan, text.find(plan) + 1), std::string::npos) << "plan repeated: " << text;
  EXPECT_NE(text.find("(turn 1; write a new \"Plan:\" block when it changes)"), std::string::npos);
  EXPECT_NE(text.find("so far:\n- a.py\nCommands you ran (run_command) may have changed other "
                      "files; this list cannot show them."),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("- edit_file a.py -> ok"), std::string::npos);
  EXPECT_NE(text.find("- read_file g21.py -> ok"), std::string::npos);
}

TEST(Context, WithoutAPlanOrChangesTheSummarySaysSo) {
  Conversation c = Base();
  for (int i = 1; i <= 20; ++i) AddTurn(c, i, "read_file", "f" + std::to_string(i) + ".py", 800);
  ContextLimits limits;
  limits.context_window = 2000;
  ASSERT_GT(Compact(c, limits, nullptr).summarised, 0U);
  const std::string& text = c.messages()[2].text;
  EXPECT_NE(text.find("Your plan: none stated yet."), std::string::npos) << text;
  EXPECT_NE(text.find("Files changed by your file tools (write_file, edit_file): none so far."),
            std::string::npos);
}

// A compaction goes down to the target, below the trigger, so the next turns leave it alone.
TEST(Context, CompactionGoesDownToTheTargetNotJustUnderTheTrigger) {
  Conversation c = Base();
  for (int i = 1; i <= 30; ++i) AddTurn(c, i, "read_file", "f" + std::to_string(i) + ".py", 2000);
  ContextLimits limits;
  limits.context_window = 20000;
  ASSERT_GT(c.EstimateTokens(), limits.Budget());
  const CompactionReport report = Compact(c, limits, nullptr);
  EXPECT_EQ(report.target, limits.Budget() / 2);
  EXPECT_LE(report.tokens_after, limits.Target());
  const auto before = c.messages().size();
  AddTurn(c, 31, "read_file", "g.py", 2000);
  EXPECT_FALSE(Compact(c, limits, nullptr).compacted());
  EXPECT_EQ(c.messages().size(), before + 2);
}

TEST(Context, StubNamesToolSubjectAndSize) {
  EXPECT_EQ(DroppedOutputStub("run_command", "pytest -q", 1234567),
            "[output of run_command pytest -q (1,234,567 bytes) dropped to save context; call the "
            "tool again if needed]");
  EXPECT_EQ(DroppedOutputStub("list_dir", "", 999),
            "[output of list_dir (999 bytes) dropped to save context; call the tool again if "
            "needed]");
}

}  // namespace
}  // namespace cagent::agent
