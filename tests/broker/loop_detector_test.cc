// Loop detection: repeats without a workspace change, and short cycles, are refused before they
// burn the run's turns; each case also shown passing with the guard switched off.
#include "launcher/broker/loop_detector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/broker/broker_test_util.h"

namespace cagent::launcher::broker::testing {
namespace {

using ::testing::HasSubstr;

TEST(LoopDetector, TheThirdIdenticalCallIsRefused) {
  LoopDetector d(LoopLimits{3, 3});
  EXPECT_FALSE(d.Check("A"));
  EXPECT_FALSE(d.Check("A"));
  auto f = d.Check("A");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, LoopFinding::Kind::kRepeat);
  EXPECT_EQ(f->count, 3U);
  EXPECT_TRUE(d.Check("A"));  // and it stays refused
}

TEST(LoopDetector, AWorkspaceChangeResetsRepeats) {
  LoopDetector d(LoopLimits{3, 3});
  EXPECT_FALSE(d.Check("A"));
  EXPECT_FALSE(d.Check("A"));
  d.WorkspaceChanged();
  EXPECT_FALSE(d.Check("A"));
  EXPECT_FALSE(d.Check("A"));
}

TEST(LoopDetector, RepeatsNeedNotBeAdjacent) {
  LoopDetector d(LoopLimits{3, 3});
  EXPECT_FALSE(d.Check("A"));
  EXPECT_FALSE(d.Check("B"));
  EXPECT_FALSE(d.Check("A"));
  EXPECT_FALSE(d.Check("C"));
  EXPECT_TRUE(d.Check("A"));
}

TEST(LoopDetector, PeriodTwoCycleAcrossChangesIsRefused) {
  LoopDetector d(LoopLimits{3, 3});
  // A (a command that "changes" the workspace), B, A, B, A, B.
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(d.Check("A"));
    d.WorkspaceChanged();
    EXPECT_FALSE(d.Check("B"));
  }
  EXPECT_FALSE(d.Check("A"));
  d.WorkspaceChanged();
  auto f = d.Check("B");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, LoopFinding::Kind::kCycle);
  EXPECT_EQ(f->period, 2U);
  EXPECT_EQ(f->count, 3U);
}

TEST(LoopDetector, PeriodThreeCycleIsRefused) {
  LoopDetector d(LoopLimits{100, 3});
  const char* seq[] = {"A", "B", "C", "A", "B", "C", "A", "B"};
  for (const char* s : seq) EXPECT_FALSE(d.Check(s)) << s;
  auto f = d.Check("C");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->period, 3U);
}

TEST(LoopDetector, VariedCallsAreNotACycle) {
  LoopDetector d(LoopLimits{100, 3});
  const char* seq[] = {"A", "B", "A", "B", "A", "C", "A", "B", "C", "B", "A", "B", "A", "C"};
  for (const char* s : seq) EXPECT_FALSE(d.Check(s)) << s;
}

TEST(LoopDetector, SwitchedOffItRefusesNothing) {
  LoopDetector d(LoopLimits{0, 0});
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(d.Check("A"));
    EXPECT_FALSE(d.Check("B"));
  }
}

TEST(LoopDetector, MemoryIsBounded) {
  LoopDetector d(LoopLimits{3, 3});
  for (std::size_t i = 0; i < 3 * LoopDetector::kMaxDistinct; ++i) {
    EXPECT_FALSE(d.Check("call-" + std::to_string(i)));
  }
}

TEST(LoopMessage, ExplainsAndSuggestsSomethingElse) {
  const std::string m = LoopMessage(LoopFinding{LoopFinding::Kind::kRepeat, 3, 1}, "read_file a");
  EXPECT_THAT(m, HasSubstr("read_file a"));
  EXPECT_THAT(m, HasSubstr("3 times"));
  EXPECT_THAT(m, HasSubstr("different approach"));
}

// ---- through the broker ----

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
  ASSERT_TRUE(h.peer->SendPayload(
      R"({"v":1,"type":"tool_request","id":2,"tool":"grep","args":{"pattern":"x","path":"src"}})"));
  ASSERT_TRUE(h.peer->Recv());
  ASSERT_TRUE(h.peer->SendPayload(
      R"({"type":"tool_request","v":1,"id":3,"args":{"path":"src","pattern":"x"},"tool":"grep"})"));
  ASSERT_TRUE(h.peer->Recv());
  ASSERT_TRUE(h.peer->SendPayload(
      R"({"v":1,"id":4,"type":"tool_request","tool":"grep","args":{ "path" : "src", "pattern":"x"}})"));
  auto third = h.peer->Recv();
  ASSERT_TRUE(third);
  EXPECT_EQ((*third)["rule"], "loop detection");
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

TEST(BrokerLoops, ABCycleIsRefused) {
  Harness h;
  h.Hello();
  // run the tests (succeeds: counts as a change), read the same file; three times over.
  for (int round = 0; round < 3; ++round) {
    const json run = h.ToolRequest("run_command", {{"command", "ls -la"}});
    ASSERT_EQ(run["verdict"], "allow") << run.dump();
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
    h.ToolResult(edit["id"], true, "@@ diff", {"src/main.c"});
  }
}

}  // namespace
}  // namespace cagent::launcher::broker::testing
