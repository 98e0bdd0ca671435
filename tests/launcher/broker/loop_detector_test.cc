// Loop detection: repeats in an unchanged workspace, and short cycles, are refused before they
// burn the run's turns; each case also shown passing with the guard switched off. Issue #13: the
// workspace counts as changed only when cagent's own digest of it on the host changes, never
// because a call succeeded or the agent said it changed files.
#include "launcher/broker/loop_detector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "common/json_text.h"
#include "launcher/broker/tool_mapping.h"
#include "tests/launcher/broker/broker_test_util.h"

namespace cagent::launcher::broker::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kS1 = "state-1";
constexpr const char* kS2 = "state-2";

TEST(LoopDetector, TheThirdIdenticalCallIsRefused) {
  LoopDetector d(LoopLimits{3, 3});
  EXPECT_FALSE(d.Check("A", kS1));
  EXPECT_FALSE(d.Check("A", kS1));
  auto f = d.Check("A", kS1);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, LoopFinding::Kind::kRepeat);
  EXPECT_EQ(f->count, 3U);
  EXPECT_TRUE(d.Check("A", kS1));  // and it stays refused
}

TEST(LoopDetector, AChangedWorkspaceStateResetsRepeats) {
  LoopDetector d(LoopLimits{3, 3});
  EXPECT_FALSE(d.Check("A", kS1));
  EXPECT_FALSE(d.Check("A", kS1));
  EXPECT_FALSE(d.Check("A", kS2));
  EXPECT_FALSE(d.Check("A", kS2));
  EXPECT_TRUE(d.Check("A", kS2));
}

TEST(LoopDetector, SuspectsARepeatOnlyInTheSameState) {
  LoopDetector d(LoopLimits{3, 3});
  EXPECT_FALSE(d.SuspectsRepeat("A", kS1));
  EXPECT_FALSE(d.Check("A", kS1));
  EXPECT_TRUE(d.SuspectsRepeat("A", kS1));
  EXPECT_FALSE(d.SuspectsRepeat("A", kS2));
  EXPECT_FALSE(d.SuspectsRepeat("B", kS1));
}

TEST(LoopDetector, RepeatsNeedNotBeAdjacent) {
  LoopDetector d(LoopLimits{3, 3});
  EXPECT_FALSE(d.Check("A", kS1));
  EXPECT_FALSE(d.Check("B", kS1));
  EXPECT_FALSE(d.Check("A", kS1));
  EXPECT_FALSE(d.Check("C", kS1));
  EXPECT_TRUE(d.Check("A", kS1));
}

TEST(LoopDetector, PeriodTwoCycleAcrossChangesIsRefused) {
  LoopDetector d(LoopLimits{3, 3});
  // A (a command that really changes the workspace), B, A, B, A, B.
  int state = 0;
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(d.Check("A", std::to_string(state++)));
    EXPECT_FALSE(d.Check("B", std::to_string(state)));
  }
  EXPECT_FALSE(d.Check("A", std::to_string(state++)));
  auto f = d.Check("B", std::to_string(state));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, LoopFinding::Kind::kCycle);
  EXPECT_EQ(f->period, 2U);
  EXPECT_EQ(f->count, 3U);
}

TEST(LoopDetector, PeriodThreeCycleIsRefused) {
  LoopDetector d(LoopLimits{100, 3});
  const char* seq[] = {"A", "B", "C", "A", "B", "C", "A", "B"};
  for (const char* s : seq) EXPECT_FALSE(d.Check(s, kS1)) << s;
  auto f = d.Check("C", kS1);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->period, 3U);
}

TEST(LoopDetector, VariedCallsAreNotACycle) {
  LoopDetector d(LoopLimits{100, 3});
  const char* seq[] = {"A", "B", "A", "B", "A", "C", "A", "B", "C", "B", "A", "B", "A", "C"};
  for (const char* s : seq) EXPECT_FALSE(d.Check(s, kS1)) << s;
}

TEST(LoopDetector, SwitchedOffItRefusesNothing) {
  LoopDetector d(LoopLimits{0, 0});
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(d.Check("A", kS1));
    EXPECT_FALSE(d.Check("B", kS1));
  }
}

TEST(LoopDetector, MemoryIsBounded) {
  LoopDetector d(LoopLimits{3, 3});
  for (std::size_t i = 0; i < 3 * LoopDetector::kMaxDistinct; ++i) {
    EXPECT_FALSE(d.Check("call-" + std::to_string(i), kS1));
  }
}

TEST(LoopMessage, ExplainsAndSuggestsSomethingElse) {
  const std::string m = LoopMessage(LoopFinding{LoopFinding::Kind::kRepeat, 3, 1}, "read_file a");
  EXPECT_THAT(m, HasSubstr("read_file a"));
  EXPECT_THAT(m, HasSubstr("3 times"));
  EXPECT_THAT(m, HasSubstr("workspace did not change"));
  EXPECT_THAT(m, HasSubstr("different approach"));
}

// ---- through the broker ----

void Append(const std::string& file, const std::string& text) {
  std::ofstream out(file, std::ios::app);
  out << text;
}

TEST(BrokerLoops, ThirdIdenticalCallIsRefusedWithLoopDetection) {
  Harness h;
  h.Hello();
  const json args = {{"path", "src/main.c"}};
  EXPECT_EQ(h.ToolRequest("read_file", args)["verdict"], "allow");
  EXPECT_EQ(h.ToolRequest("read_file", args)["verdict"], "allow");
  const json third = h.ToolRequest("read_file", args);
  EXPECT_EQ(third["verdict"], "deny");
  EXPECT_EQ(third["rule"], "loop detection");
  EXPECT_THAT(third["message"].get<std::string>(), HasSubstr("read_file src/main.c"));
  EXPECT_THAT(third["message"].get<std::string>(), HasSubstr("different approach"));
  bool audited = false;
  for (const json& e : h.AuditEntries()) audited = audited || e.value("event", "") == "loop";
  EXPECT_TRUE(audited);
}

TEST(BrokerLoops, KeyOrderDoesNotHideARepeat) {
  Harness h;
  h.Hello();
  // The same call three times, each a call of its own model turn, with the keys in another order
  // and other spacing each time.
  const std::vector<std::string> spellings = {
      R"("tool":"grep","args":{"pattern":"x","path":"src"})",
      R"("args":{"path":"src","pattern":"x"},"tool":"grep")",
      R"("tool":"grep","args":{ "path" : "src", "pattern":"x"})"};
  std::optional<json> reply;
  for (std::size_t i = 0; i < spellings.size(); ++i) {
    const std::string call_id = "c" + std::to_string(i);
    h.ModelTurn({Call(call_id, "grep", {{"pattern", "x"}, {"path", "src"}})});
    ASSERT_TRUE(h.peer->SendPayload(R"({"v":2,"type":"tool_request","id":)" +
                                    std::to_string(h.NextId()) + R"(,"call_id":")" + call_id +
                                    "\"," + spellings[i] + "}"));
    reply = h.peer->Recv();
    ASSERT_TRUE(reply);
  }
  EXPECT_EQ((*reply)["rule"], "loop detection") << JsonText(*reply);
}

TEST(BrokerLoops, SwitchedOffTheSameCallsAreAllowed) {
  HarnessOptions o;
  o.loop = LoopLimits{0, 0};
  Harness h(o);
  h.Hello();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(h.ToolRequest("read_file", {{"path", "src/main.c"}})["verdict"], "allow");
  }
}

// `run_command true` again and again, each time successful, with nothing in the workspace
// changing: this kept going without limit when a successful command counted as a change.
// Returns how many of `n` attempts were allowed, and the first refusal.
std::pair<int, json> RepeatTrue(Harness& h, int n, std::vector<std::string> claimed_changes = {}) {
  int allowed = 0;
  json refusal;
  for (int i = 0; i < n; ++i) {
    const json d = h.ToolRequest("run_command", {{"command", "true"}});
    if (d["verdict"] != "allow") {
      if (refusal.is_null()) refusal = d;
      continue;
    }
    ++allowed;
    EXPECT_EQ(h.ToolResult(d["id"], true, "", claimed_changes)["type"], "result_ack");
  }
  return {allowed, refusal};
}

TEST(BrokerLoops, ASuccessfulCommandRepeatedInAnUnchangedWorkspaceIsStoppedAtTheThird) {
  Harness h;
  h.Hello();
  Append(h.workspace + "/calc.py", "def add(a, b): return a - b\n");
  const auto [allowed, refusal] = RepeatTrue(h, 10);
  EXPECT_EQ(allowed, 2);
  EXPECT_EQ(refusal["rule"], "loop detection");
  EXPECT_THAT(refusal["message"].get<std::string>(), HasSubstr("made this exact call (true) 3"));
}

TEST(BrokerLoops, TwinWithTheOldSuccessResetTheSameCommandRunsWithoutLimit) {
  HarnessOptions o;
  o.loop.trust_agent_results = true;  // the behaviour before issue #13
  Harness h(o);
  h.Hello();
  const auto [allowed, refusal] = RepeatTrue(h, 10);
  EXPECT_EQ(allowed, 10) << "the attack: every success reset the count";
  EXPECT_TRUE(refusal.is_null());
}

TEST(BrokerLoops, ChangedPathsTheAgentClaimsDoNotCountAsAChange) {
  Harness h;
  h.Hello();
  const auto [allowed, refusal] = RepeatTrue(h, 5, {"calc.py"});
  EXPECT_EQ(allowed, 2);
  EXPECT_EQ(refusal["rule"], "loop detection");
  // Twin: trusting the claim lets it repeat.
  HarnessOptions o;
  o.loop.trust_agent_results = true;
  Harness trusting(o);
  trusting.Hello();
  EXPECT_EQ(RepeatTrue(trusting, 5, {"calc.py"}).first, 5);
}

TEST(BrokerLoops, VaryingTheResolvedPathsDoesNotMakeARepeatLookNew) {
  // `paths` is the agent's to fill in; it binds approvals but must not key loop detection, or a
  // different made-up list each time would let `true` repeat forever.
  Harness h;
  h.Hello();
  int allowed = 0;
  json refusal;
  for (int i = 0; i < 6; ++i) {
    const json d = h.ToolRequest("run_command", {{"command", "true"}}, {"p" + std::to_string(i)});
    if (d["verdict"] != "allow") {
      if (refusal.is_null()) refusal = d;
      continue;
    }
    ++allowed;
    h.ToolResult(d["id"], true, "");
  }
  EXPECT_EQ(allowed, 2);
  EXPECT_EQ(refusal["rule"], "loop detection");
  // Twin: keyed on the approval digest (which covers the paths), no two of those calls repeat.
  LoopDetector keyed_on_paths(LoopLimits{3, 3});
  const json args = {{"command", "true"}};
  for (int i = 0; i < 6; ++i) {
    EXPECT_FALSE(keyed_on_paths.Check(CallDigest("run_command", args, {"p" + std::to_string(i)}),
                                      "same state"))
        << "the attack, with the paths in the key";
  }
}

TEST(BrokerLoops, ACommandThatReallyChangesTheWorkspaceEachTimeIsNotStopped) {
  Harness h;
  h.Hello();
  for (int i = 0; i < 8; ++i) {
    const json d = h.ToolRequest("run_command", {{"command", "echo x >> log.txt"}});
    ASSERT_EQ(d["verdict"], "allow") << "run " << i << ": " << d.dump();
    Append(h.workspace + "/log.txt", "x\n");  // what the command did
    h.ToolResult(d["id"], true, "");
  }
}

TEST(BrokerLoops, AFailedCommandThatChangedTheWorkspaceIsNotARepeat) {
  Harness h;
  h.Hello();
  for (int i = 0; i < 5; ++i) {
    const json d = h.ToolRequest("run_command", {{"command", "ls missing"}});
    ASSERT_EQ(d["verdict"], "allow") << "run " << i;
    Append(h.workspace + "/out.log", "fail\n");
    h.ToolResult(d["id"], false, "1 failing");
  }
}

TEST(BrokerLoops, AChangeMadeOutsideAnyToolIsSeenWhenARepeatIsSuspected) {
  // A background process (or the operator) changes the workspace between two reads: the
  // suspected repeat takes a fresh look and sees it.
  Harness h;
  h.Hello();
  for (int i = 0; i < 5; ++i) {
    const json d = h.ToolRequest("read_file", {{"path", "notes.txt"}});
    ASSERT_EQ(d["verdict"], "allow") << "read " << i;
    h.ToolResult(d["id"], true, "...");
    Append(h.workspace + "/notes.txt", "more\n");
  }
}

TEST(BrokerLoops, ABCycleIsRefused) {
  Harness h;
  h.Hello();
  // run the tests (which write a report: a real change), read the same file; three times over.
  for (int round = 0; round < 3; ++round) {
    const json run = h.ToolRequest("run_command", {{"command", "ls -la"}});
    ASSERT_EQ(run["verdict"], "allow") << run.dump();
    Append(h.workspace + "/report.txt", "run\n");
    EXPECT_EQ(h.ToolResult(run["id"], true, "1 failing")["type"], "result_ack");
    const json read = h.ToolRequest("read_file", {{"path", "test/app.test.js"}});
    if (round < 2) {
      ASSERT_EQ(read["verdict"], "allow") << "round " << round;
      h.ToolResult(read["id"], true, "test source");
    } else {
      EXPECT_EQ(read["verdict"], "deny");
      EXPECT_EQ(read["rule"], "loop detection");
      EXPECT_THAT(read["message"].get<std::string>(), HasSubstr("repeat the same 2 calls 3 times"));
    }
  }
}

TEST(BrokerLoops, PeriodThreeCycleThroughTheBrokerIsRefused) {
  Harness h;
  h.Hello();
  const std::vector<std::string> files = {"a.c", "b.c", "c.c"};
  json last;
  for (int round = 0; round < 3; ++round) {
    for (const std::string& f : files) {
      last = h.ToolRequest("edit_file", {{"path", f}, {"old", "x"}, {"new", "y"}});
      if (last["verdict"] != "allow") break;
      Append(h.workspace + "/" + f, "y");  // each edit really changes the workspace
      h.ToolResult(last["id"], true, "@@ diff", {f});
    }
  }
  EXPECT_EQ(last["rule"], "loop detection");
  EXPECT_THAT(last["message"].get<std::string>(), HasSubstr("repeat the same 3 calls 3 times"));
}

TEST(BrokerLoops, IdenticalCallsSeparatedByAWorkspaceChangeAreAllowed) {
  Harness h;
  h.Hello();
  for (int i = 0; i < 4; ++i) {
    const json read = h.ToolRequest("read_file", {{"path", "src/main.c"}});
    ASSERT_EQ(read["verdict"], "allow") << "read " << i;
    h.ToolResult(read["id"], true, "int main() {}");
    // A different edit each time: the workspace changed, and no cycle forms.
    const json edit = h.ToolRequest(
        "edit_file", {{"path", "src/main.c"}, {"old", "x" + std::to_string(i)}, {"new", "y"}});
    ASSERT_EQ(edit["verdict"], "allow");
    Append(h.workspace + "/main.c", "y" + std::to_string(i));
    h.ToolResult(edit["id"], true, "@@ diff", {"src/main.c"});
  }
}

TEST(BrokerLoops, AWorkspaceTooLargeToWalkIsSaidOnceInTheAuditLog) {
  HarnessOptions o;
  o.loop.state_max_entries = 5;
  Harness h(o);
  for (int i = 0; i < 10; ++i) Append(h.workspace + "/f" + std::to_string(i), "x");
  h.Hello();
  EXPECT_EQ(h.ToolRequest("read_file", {{"path", "f1"}})["verdict"], "allow");
  EXPECT_EQ(h.ToolRequest("read_file", {{"path", "f1"}})["verdict"], "allow");
  EXPECT_EQ(h.ToolRequest("read_file", {{"path", "f1"}})["rule"], "loop detection");
  int said = 0;
  for (const json& e : h.AuditEntries()) {
    if (e.value("event", "") != "loop_state") continue;
    ++said;
    EXPECT_EQ(e["detail"]["truncated"], true) << e.dump();
    EXPECT_EQ(e["detail"]["entries"], 5) << e.dump();
  }
  EXPECT_EQ(said, 1);
}

}  // namespace
}  // namespace cagent::launcher::broker::testing
