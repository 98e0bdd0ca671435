// Context management over a long session: a recorded 60-turn session (reads of large files, edits,
// a new file, test runs that fail and pass, tool errors, a cut-off reply) replayed through the
// loop's per-turn order (Compact, then the model_call ToModelCall makes, then the model's turn and
// its results) with a context window small enough that compaction happens several times.
//
// The guards, each asserted on every model_call of the replay:
//   - the pinned parts (system prompt, task, the latest plan, the files changed) are never
//     dropped;
//   - a tool call is never separated from its result, and the call is one the broker accepts
//     (testing::ConversationProblem is protocol v2's rule as the broker applies it: the broker's
//     own ModelTurns::CheckConversation lives in cagent_broker, which this layer's tests do not
//     link, see tests/CMakeLists.txt);
//   - between two compactions each call's messages extend the previous call's byte for byte (the
//     provider's prompt cache needs a stable prefix);
//   - compaction happens at most kMaxCompactions times in the 60 turns.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/context.h"
#include "common/json_text.h"
#include "tests/agent/scripted_broker_util.h"

namespace cagent::agent {
namespace {

using nlohmann::json;

constexpr int kTurns = 60;
// The replay's window: 20,000 tokens with 4,000 reserved for the answer, so compaction triggers
// above 12,000 estimated tokens and goes down to 6,000. The session's messages come to about
// 50,000 estimated tokens in all, so it needs several compactions (5 at the time of writing, two
// of them writing a summary); kMaxCompactions is what the lower target buys: compacting only down
// to the trigger compacts three times as often (15; see the twin test).
constexpr std::uint64_t kWindow = 20000;
constexpr std::uint64_t kMaxOutput = 4000;
constexpr std::size_t kMaxCompactions = 6;
constexpr const char* kSystem = "You are a coding agent. (system prompt of the replay)";
constexpr const char* kTask =
    "Fix the handling of escaped quotes in the config parser (src/parser.c) and add a test.";
constexpr const char* kNudge =
    "Your reply was cut off at the output limit. Continue with smaller steps.";
constexpr const char* kSummaryStart = "[Earlier turns were compacted";

// The plans the model states, and the turns it states them in.
struct PlanStatement {
  int turn;
  const char* steps;
};
constexpr PlanStatement kPlans[] = {
    {1,
     "- [doing] find where the parser reads quoted strings\n- [todo] fix escaped quotes\n"
     "- [todo] add a test and run make test"},
    {14,
     "- [done] find where the parser reads quoted strings\n- [doing] fix escaped quotes in "
     "src/parser.c and src/lexer.c\n- [todo] add a test and run make test"},
    {31,
     "- [done] find where the parser reads quoted strings\n- [done] fix escaped quotes\n"
     "- [doing] add tests/test_escape.c\n- [todo] run make test until it passes"},
    {47,
     "- [done] fix escaped quotes\n- [done] add tests/test_escape.c\n- [doing] fix the two "
     "failing cases in src/lexer.c\n- [todo] run make test, then finish"},
};

// What one tool call gave back.
struct Outcome {
  std::string content;
  bool is_error = false;
  std::string error_code;
  std::vector<std::string> changed;  // files written (write_file, edit_file)
};

// One turn of the recorded session: the model's text and calls, and each call's result.
struct RecordedTurn {
  std::string text;
  std::vector<ToolCall> calls;
  std::vector<Outcome> outcomes;  // one per call
  bool cut_off = false;           // no calls: the loop answers with a nudge
};

// `lines` lines of plausible C source.
std::string Source(const std::string& file, int lines) {
  std::string out;
  for (int i = 1; i <= lines; ++i) {
    out += std::to_string(i) + "\tstatic int " + file + "_step_" + std::to_string(i) +
           "(struct parser *p, const char *s) { return p->pos += s[" + std::to_string(i % 7) +
           "] == '\\\\'; }\n";
  }
  return out;
}

std::string CommandOutput(int t, bool fails) {
  std::string out;
  for (int i = 0; i < 40; ++i) {
    out += "cc -O2 -Wall -c src/unit_" + std::to_string(i) + ".c -o build/unit_" +
           std::to_string(i) + ".o\n";
  }
  out += fails ? "test_escape: FAILED: expected \"a\\\"b\" got \"a\\\\\" (run " +
                     std::to_string(t) + ")\nmake: *** [test] Error 1\nexit status 2"
               : "test_escape: 14 passed\nexit status 0";
  return out;
}

ToolCall Call(int t, int k, const std::string& tool, json args) {
  return ToolCall{"toolu_" + std::to_string(t) + "_" + std::to_string(k), tool, std::move(args),
                  ""};
}

// Turn `t` of the session (1-based).
RecordedTurn Recorded(int t) {
  RecordedTurn turn;
  turn.text = "Turn " + std::to_string(t) + ": continuing.";
  for (const PlanStatement& plan : kPlans) {
    if (plan.turn == t) {
      turn.text = "Here is where I stand.\n\nPlan:\n" + std::string(plan.steps) +
                  "\n\nNext I look at the code.";
    }
  }
  const std::string file = t % 3 == 0 ? "lexer" : "parser";
  const std::string path = "src/" + file + ".c";
  if (t == 30) {
    turn.text = "I will now rewrite the whole lexer in one reply: ...";
    turn.cut_off = true;
  } else if (t == 25 || t == 50) {
    turn.calls.push_back(Call(t, 0, "write_file",
                              {{"path", "tests/test_escape.c"}, {"content", Source("test", 30)}}));
    turn.outcomes.push_back(
        {"wrote tests/test_escape.c (2,431 bytes)", false, "", {"tests/test_escape.c"}});
  } else if (t % 10 == 7) {
    turn.calls.push_back(Call(t, 0, "run_command", {{"command", "make test"}}));
    const bool fails = t < 50;
    turn.outcomes.push_back({CommandOutput(t, fails), fails, fails ? "exit_status" : "", {}});
  } else if (t % 6 == 2) {
    const std::string edited = t % 12 == 8 ? "src/lexer.c" : "src/parser.c";
    turn.calls.push_back(
        Call(t, 0, "edit_file",
             {{"path", edited},
              {"old_string", "return p->pos += s[" + std::to_string(t % 7) + "]"},
              {"new_string", "return p->pos += unescape(s, " + std::to_string(t) + ")"}}));
    if (t == 20 || t == 44) {
      turn.outcomes.push_back({"error [no_match]: old_string does not occur in " + edited +
                                   "\nhint: read the file again and copy the text exactly",
                               true,
                               "no_match",
                               {}});
    } else {
      turn.outcomes.push_back({"--- a/" + edited + "\n+++ b/" + edited + "\n@@ -" +
                                   std::to_string(t) + " +" + std::to_string(t) + " @@\n" +
                                   Source(file, 6),
                               false,
                               "",
                               {edited}});
    }
  } else if (t == 9) {
    turn.calls.push_back(Call(t, 0, "read_file", {{"path", "src/escape.c"}}));
    turn.outcomes.push_back(
        {"error [not_found]: src/escape.c does not exist\nhint: list the "
         "directory",
         true,
         "not_found",
         {}});
  } else if (t % 4 == 0) {
    turn.calls.push_back(Call(t, 0, "read_file", {{"path", path}}));
    turn.outcomes.push_back({Source(file, 60 + 2 * t), false, "", {}});
  } else if (t % 5 == 3) {
    turn.calls.push_back(Call(t, 0, "grep", {{"pattern", "unescape"}, {"path", "src"}}));
    turn.outcomes.push_back({Source("grep", 20), false, "", {}});
    turn.calls.push_back(
        Call(t, 1, "read_file", {{"path", "src/util.h"}, {"offset", 1}, {"limit", 40}}));
    turn.outcomes.push_back({Source("util", 40), false, "", {}});
  } else {
    turn.calls.push_back(Call(t, 0, "list_dir", {{"path", "src"}}));
    turn.outcomes.push_back({"lexer.c\nparser.c\nutil.h\nmain.c\nMakefile\n", false, "", {}});
  }
  return turn;
}

// The replay: every model_call the loop would have sent, and whether it compacted before it.
struct Replay {
  std::vector<protocol::ModelCall> calls;
  std::vector<CompactionReport> reports;  // reports[i]: the Compact before calls[i]
  std::vector<ToolCall> issued;           // every call the model made
  ContextLimits limits;
};

Replay Play(double target) {
  Replay replay;
  replay.limits.context_window = kWindow;
  replay.limits.max_output_tokens = kMaxOutput;
  replay.limits.target = target;
  Conversation conversation;
  conversation.AddSystem(kSystem);
  conversation.AddTask(kTask);
  Ledger ledger;
  for (int t = 1; t <= kTurns; ++t) {
    replay.reports.push_back(Compact(conversation, replay.limits, &ledger));
    replay.calls.push_back(ToModelCall(conversation));
    RecordedTurn turn = Recorded(t);
    conversation.AddAssistant(turn.text, turn.calls);
    replay.issued.insert(replay.issued.end(), turn.calls.begin(), turn.calls.end());
    for (std::size_t k = 0; k < turn.calls.size(); ++k) {
      const ToolCall& call = turn.calls[k];
      Outcome& outcome = turn.outcomes[k];
      ToolResultInfo info;
      info.tool = call.name;
      info.subject = call.arguments.value("path", call.arguments.value("command", ""));
      if (call.name != "run_command") info.paths = {info.subject};
      info.error_code = outcome.error_code;
      info.changed_paths = outcome.changed;
      if (call.name == "read_file" && !outcome.is_error) ledger.RecordRead(info.subject, "d");
      conversation.AddToolResult({call.id, std::move(outcome.content), outcome.is_error}, info);
    }
    if (turn.cut_off) conversation.AddUser(kNudge);
  }
  return replay;
}

const Replay& Default() {
  static const Replay replay = Play(ContextLimits{}.target);
  return replay;
}

// The plan as stated by turn `turns` ("" before any) and the files changed by then.
std::string ExpectedPlan(int turns) {
  std::string plan;
  for (const PlanStatement& p : kPlans) {
    if (p.turn <= turns) plan = p.steps;
  }
  return plan;
}

std::set<std::string> ExpectedChanged(int turns) {
  std::set<std::string> files;
  for (int t = 1; t <= turns; ++t) {
    for (const Outcome& o : Recorded(t).outcomes) {
      if (!o.is_error) files.insert(o.changed.begin(), o.changed.end());
    }
  }
  return files;
}

// The summary's "Files changed" lines ("- PATH"), or nothing when `call` has no summary.
std::set<std::string> SummaryFiles(const protocol::ModelCall& call) {
  std::set<std::string> files;
  for (const protocol::ChatMessage& m : call.messages) {
    if (m.role != protocol::Role::kUser || m.text.rfind(kSummaryStart, 0) != 0) continue;
    const std::size_t begin = m.text.find("Files changed by your file tools");
    const std::size_t end = m.text.find("\nCommands you ran (run_command) may have changed");
    if (begin == std::string::npos || end == std::string::npos) return files;
    std::size_t pos = m.text.find('\n', begin);
    while (pos != std::string::npos && pos < end) {
      const std::size_t next = m.text.find('\n', pos + 1);
      const std::string line = m.text.substr(pos + 1, std::min(next, end) - pos - 1);
      if (line.rfind("- ", 0) == 0) files.insert(line.substr(2));
      pos = next;
    }
  }
  return files;
}

// Files named as the path of a write_file or edit_file call still in `call`.
std::set<std::string> KeptWrites(const protocol::ModelCall& call) {
  std::set<std::string> files;
  for (const protocol::ChatMessage& m : call.messages) {
    for (const ToolCall& c : m.tool_calls) {
      if (c.name == "write_file" || c.name == "edit_file")
        files.insert(c.arguments.value("path", ""));
    }
  }
  return files;
}

// "" when every call of an assistant message is answered by one of the tool messages right after
// it (providers refuse a call without its result); else the first unanswered call.
std::string UnansweredCall(const protocol::ModelCall& call) {
  for (std::size_t i = 0; i < call.messages.size(); ++i) {
    for (const ToolCall& c : call.messages[i].tool_calls) {
      bool answered = false;
      for (std::size_t j = i + 1;
           j < call.messages.size() && call.messages[j].role == protocol::Role::kTool; ++j) {
        answered = answered || call.messages[j].call_id == c.id;
      }
      if (!answered) return "messages[" + std::to_string(i) + "]: call " + c.id + " unanswered";
    }
  }
  return {};
}

std::size_t CompactionsIn(const Replay& replay) {
  std::size_t n = 0;
  for (const CompactionReport& r : replay.reports) n += r.compacted() ? 1 : 0;
  return n;
}

TEST(LongSession, CompactsSeveralTimesButAtMostK) {
  const Replay& replay = Default();
  const std::size_t n = CompactionsIn(replay);
  EXPECT_GE(n, 3U) << "the replay is meant to need several compactions";
  std::size_t summaries = 0;
  EXPECT_LE(n, kMaxCompactions);
  for (std::size_t i = 0; i < replay.reports.size(); ++i) {
    const CompactionReport& r = replay.reports[i];
    if (!r.compacted()) continue;
    // Each one went down to the target, well below the trigger.
    EXPECT_LE(r.tokens_after, replay.limits.Target()) << "before turn " << i + 1;
    EXPECT_GT(r.tokens_before, replay.limits.Budget()) << "before turn " << i + 1;
    EXPECT_FALSE(r.still_over);
    summaries += r.summarised > 0 ? 1 : 0;
  }
  EXPECT_GE(summaries, 2U) << "a summary must also be carried into the next one";
}

// The twin: compacting only down to the trigger (target 1.0: the lower target switched off)
// compacts again every few turns, each time breaking the provider's cached prefix.
TEST(LongSession, WithoutALowerTargetCompactionHappensFarMoreOften) {
  const Replay replay = Play(1.0);
  EXPECT_GT(CompactionsIn(replay), kMaxCompactions);
  EXPECT_GE(CompactionsIn(replay), 2 * CompactionsIn(Default()));
}

TEST(LongSession, PinnedPartsAreNeverDropped) {
  const Replay& replay = Default();
  std::size_t plan_only_in_summary = 0;
  std::size_t file_only_in_summary = 0;
  for (std::size_t i = 0; i < replay.calls.size(); ++i) {
    const protocol::ModelCall& call = replay.calls[i];
    const int done = static_cast<int>(i);  // turns answered before this call
    const std::string where = "model call before turn " + std::to_string(i + 1);
    EXPECT_EQ(call.system, kSystem) << where;
    ASSERT_FALSE(call.messages.empty()) << where;
    EXPECT_EQ(call.messages[0].role, protocol::Role::kUser) << where;
    EXPECT_EQ(call.messages[0].text, kTask) << where;

    const std::string plan = ExpectedPlan(done);
    if (!plan.empty()) {
      bool in_summary = false;
      bool in_assistant = false;
      for (const protocol::ChatMessage& m : call.messages) {
        if (m.text.find(plan) == std::string::npos) continue;
        (m.role == protocol::Role::kAssistant ? in_assistant : in_summary) = true;
      }
      EXPECT_TRUE(in_summary || in_assistant) << where << ": the plan is gone";
      plan_only_in_summary += in_summary && !in_assistant ? 1 : 0;
    }
    const std::set<std::string> listed = SummaryFiles(call);
    const std::set<std::string> kept = KeptWrites(call);
    for (const std::string& file : ExpectedChanged(done)) {
      EXPECT_TRUE(listed.count(file) != 0 || kept.count(file) != 0)
          << where << ": changed file " << file << " is gone";
      file_only_in_summary += listed.count(file) != 0 && kept.count(file) == 0 ? 1 : 0;
    }
    // The summary lists only files the file tools changed, and says commands may change others.
    for (const std::string& file : listed) EXPECT_EQ(ExpectedChanged(done).count(file), 1U) << file;
  }
  // The guard was exercised: the plan and changed files outlived the turns that stated them.
  EXPECT_GT(plan_only_in_summary, 0U);
  EXPECT_GT(file_only_in_summary, 0U);
}

TEST(LongSession, ToolCallsStayWithTheirResultsAndTheBrokerAcceptsEveryCall) {
  const Replay& replay = Default();
  for (std::size_t i = 0; i < replay.calls.size(); ++i) {
    const protocol::ModelCall& call = replay.calls[i];
    const std::string where = "model call before turn " + std::to_string(i + 1);
    EXPECT_EQ(testing::ConversationProblem(call, replay.issued), "") << where;
    EXPECT_EQ(UnansweredCall(call), "") << where;
    // The broker's decoder takes it as sent (fields, roles, call ids, frame size).
    const std::string payload =
        JsonText(protocol::ToJson(protocol::Make(protocol::Kind::kModelCall, i + 1, call)));
    EXPECT_LT(payload.size(), protocol::kMaxFrameBytes);
    auto decoded = protocol::Decode(payload, /*from_agent=*/true);
    const auto* message = std::get_if<protocol::Message>(&decoded);
    ASSERT_NE(message, nullptr) << where << ": "
                                << std::get<protocol::DecodeError>(decoded).message;
    ASSERT_TRUE(std::holds_alternative<protocol::ModelCall>(message->body)) << where;
  }
}

TEST(LongSession, BetweenCompactionsEachCallExtendsThePreviousByteForByte) {
  const Replay& replay = Default();
  std::size_t checked = 0;
  for (std::size_t i = 1; i < replay.calls.size(); ++i) {
    if (replay.reports[i].compacted()) continue;  // a compaction may rewrite; nothing else may
    const std::string where = "model call before turn " + std::to_string(i + 1);
    const json before =
        protocol::ToJson(protocol::Make(protocol::Kind::kModelCall, 1, replay.calls[i - 1]));
    const json after =
        protocol::ToJson(protocol::Make(protocol::Kind::kModelCall, 1, replay.calls[i]));
    EXPECT_EQ(JsonText(before["system"]), JsonText(after["system"])) << where;
    const json& old_messages = before["messages"];
    const json& new_messages = after["messages"];
    ASSERT_GT(new_messages.size(), old_messages.size()) << where;
    for (std::size_t k = 0; k < old_messages.size(); ++k) {
      ASSERT_EQ(JsonText(old_messages[k]), JsonText(new_messages[k]))
          << where << ": messages[" << k << "] was rewritten";
    }
    ++checked;
  }
  EXPECT_GE(checked, static_cast<std::size_t>(kTurns) - kMaxCompactions - 1);
}

}  // namespace
}  // namespace cagent::agent
