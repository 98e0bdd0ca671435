// The run's lifecycle (launcher/run/run_state.h): every legal edge, and every other (state, event)
// pair refused. The e2e run tests (tests/e2e/run_test.cc) show ExecuteRun walking these edges.
#include "launcher/run/run_state.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>

namespace cagent::launcher::run {
namespace {

using S = RunState;
using E = RunEvent;

// The whole table, written out independently of Next()'s switch.
const std::map<std::pair<S, E>, S>& LegalEdges() {
  static const std::map<std::pair<S, E>, S> edges = {
      {{S::kCreated, E::kStart}, S::kPreparing},
      {{S::kPreparing, E::kPrepared}, S::kRunning},
      {{S::kPreparing, E::kFailed}, S::kFailed},
      {{S::kRunning, E::kAgentDone}, S::kVerifying},
      {{S::kRunning, E::kFailed}, S::kFailed},
      {{S::kRunning, E::kCancelled}, S::kCancelled},
      {{S::kRunning, E::kNeedsApproval}, S::kNeedsApproval},
      {{S::kRunning, E::kNoChange}, S::kNoChange},
      {{S::kVerifying, E::kVerified}, S::kCompleted},
      {{S::kVerifying, E::kFailed}, S::kFailed},
  };
  return edges;
}

TEST(RunState, EveryLegalTransitionLeadsWhereTheTableSays) {
  for (const auto& [from_event, to] : LegalEdges()) {
    const auto [from, event] = from_event;
    EXPECT_EQ(Next(from, event), to) << RunStateName(from) << " --" << RunEventName(event) << "-->";
    EXPECT_TRUE(CanTransition(from, to)) << RunStateName(from) << " -> " << RunStateName(to);
  }
}

TEST(RunState, EveryOtherStateAndEventIsRefused) {
  int refused = 0;
  for (int s = 0; s < kRunStateCount; ++s) {
    for (int e = 0; e < kRunEventCount; ++e) {
      const auto from = static_cast<S>(s);
      const auto event = static_cast<E>(e);
      if (LegalEdges().contains({from, event})) continue;
      EXPECT_EQ(Next(from, event), std::nullopt)
          << RunStateName(from) << " --" << RunEventName(event) << "--> must not exist";
      ++refused;
    }
  }
  EXPECT_EQ(refused, kRunStateCount * kRunEventCount - static_cast<int>(LegalEdges().size()));
}

TEST(RunState, CanTransitionHoldsForExactlyTheTablesPairsOfStates) {
  for (int a = 0; a < kRunStateCount; ++a) {
    for (int b = 0; b < kRunStateCount; ++b) {
      const auto from = static_cast<S>(a);
      const auto to = static_cast<S>(b);
      bool legal = false;
      for (const auto& [from_event, target] : LegalEdges()) {
        legal = legal || (from_event.first == from && target == to);
      }
      EXPECT_EQ(CanTransition(from, to), legal) << RunStateName(from) << " -> " << RunStateName(to);
    }
  }
  // The ones that matter most: nothing is completed without verifying, nothing leaves an end.
  EXPECT_FALSE(CanTransition(S::kRunning, S::kCompleted));
  EXPECT_FALSE(CanTransition(S::kPreparing, S::kCompleted));
  EXPECT_FALSE(CanTransition(S::kFailed, S::kRunning));
  EXPECT_FALSE(CanTransition(S::kCompleted, S::kVerifying));
}

TEST(RunState, FinalStatesAreTheOnesWithNoWayOut) {
  for (int s = 0; s < kRunStateCount; ++s) {
    const auto state = static_cast<S>(s);
    bool way_out = false;
    for (int e = 0; e < kRunEventCount; ++e) way_out = way_out || Next(state, static_cast<E>(e));
    EXPECT_EQ(IsFinal(state), !way_out) << RunStateName(state);
  }
}

TEST(RunState, NamesRoundTrip) {
  for (int s = 0; s < kRunStateCount; ++s) {
    const auto state = static_cast<S>(s);
    EXPECT_EQ(ParseRunState(RunStateName(state)), state);
  }
  EXPECT_EQ(RunStateName(S::kNeedsApproval), "needs-approval");
  EXPECT_EQ(ParseRunState("finished"), std::nullopt);
  EXPECT_EQ(ParseRunState(""), std::nullopt);
}

TEST(RunState, ExitCodesComeFromTheOneTable) {
  EXPECT_EQ(ExitCodeFor(S::kCompleted, false), ExitCode::kOk);
  EXPECT_EQ(ExitCodeFor(S::kFailed, true), ExitCode::kFailed);
  EXPECT_EQ(ExitCodeFor(S::kFailed, false), ExitCode::kRunFailed);
  EXPECT_EQ(ExitCodeFor(S::kNeedsApproval, false), ExitCode::kNeedsApproval);
  EXPECT_EQ(ExitCodeFor(S::kCancelled, false), ExitCode::kCancelled);
  EXPECT_EQ(ExitCodeFor(S::kNoChange, false), ExitCode::kNoChange);
  EXPECT_EQ(ToInt(ExitCodeFor(S::kNoChange, false)), 7);
  EXPECT_EQ(RunStateName(S::kNoChange), "no-change");
  EXPECT_EQ(ExitCodeFor(S::kRunning, false), ExitCode::kRunFailed);
  EXPECT_EQ(ToInt(ExitCodeFor(S::kFailed, false)), 3);
}

}  // namespace
}  // namespace cagent::launcher::run
