// AdaptivePoll: the broker's poll window grows while a longer window would have caught the
// agent's next message, shrinks when the agent takes longer than any window, and stops for a
// while when polling does not pay (a preempted io thread, misses in a row).
#include "launcher/broker/adaptive_poll.h"

#include <gtest/gtest.h>

#include <chrono>

namespace cagent::launcher::broker {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr microseconds kMax{100};

TEST(AdaptivePoll, StartsOffAndGrowsToTheMaximumWhileWaitsAreShort) {
  AdaptivePoll poll(kMax);
  EXPECT_EQ(poll.window(), microseconds(0));
  poll.Blocked(microseconds(30), false);
  EXPECT_EQ(poll.window(), AdaptivePoll::kStart);
  poll.Blocked(microseconds(30), false);
  EXPECT_EQ(poll.window(), 2 * AdaptivePoll::kStart);
  poll.Hit();  // a hit keeps the window
  EXPECT_EQ(poll.window(), 2 * AdaptivePoll::kStart);
  for (int i = 0; i < 5; ++i) {
    poll.Hit();
    poll.Blocked(microseconds(90), false);
  }
  EXPECT_EQ(poll.window(), kMax);  // never beyond the maximum
}

TEST(AdaptivePoll, AWaitLongerThanTheMaximumHalvesTheWindowDownToOff) {
  AdaptivePoll poll(kMax);
  for (int i = 0; i < 5; ++i) {
    poll.Blocked(microseconds(20), false);
    poll.Hit();
  }
  ASSERT_EQ(poll.window(), kMax);
  poll.Blocked(milliseconds(5), false);
  EXPECT_EQ(poll.window(), kMax / 2);
  poll.Hit();
  poll.Blocked(milliseconds(5), false);
  poll.Hit();
  poll.Blocked(milliseconds(5), false);
  EXPECT_EQ(poll.window(), std::chrono::nanoseconds(12500));  // 100 / 8
  poll.Hit();
  poll.Blocked(milliseconds(5), false);  // 6.25 us is below the first window: off
  EXPECT_EQ(poll.window(), microseconds(0));
}

TEST(AdaptivePoll, APreemptedThreadStopsPollingForTheHoldOff) {
  AdaptivePoll poll(kMax);
  poll.Blocked(microseconds(20), false);
  ASSERT_GT(poll.window(), microseconds(0));
  poll.Blocked(microseconds(20), true);
  EXPECT_EQ(poll.window(), microseconds(0));
  // Short waits do not bring it back before the hold-off has passed.
  for (std::uint32_t i = 0; i < AdaptivePoll::kHoldoff; ++i) {
    EXPECT_EQ(poll.window(), microseconds(0)) << i;
    poll.Blocked(microseconds(20), false);
  }
  poll.Blocked(microseconds(20), false);
  EXPECT_EQ(poll.window(), AdaptivePoll::kStart);
}

TEST(AdaptivePoll, TheSwitchCountIsNeededOnlyOutsideTheHoldOff) {
  AdaptivePoll poll(kMax);
  EXPECT_TRUE(poll.UsesPreemption());
  poll.Blocked(microseconds(20), true);
  EXPECT_FALSE(poll.UsesPreemption());
  for (std::uint32_t i = 0; i + 1 < AdaptivePoll::kHoldoff; ++i)
    poll.Blocked(microseconds(20), false);
  EXPECT_TRUE(poll.UsesPreemption());  // the last block of the hold-off takes the new count
}

TEST(AdaptivePoll, MissesInARowStopPolling) {
  // A peer that can only run once the poller blocks: every poll misses, yet every wait is short.
  AdaptivePoll poll(kMax);
  poll.Blocked(microseconds(5), false);
  int polled = 0;
  for (std::uint32_t i = 0; i < AdaptivePoll::kMaxMisses; ++i) {
    if (poll.window() > microseconds(0)) ++polled;
    poll.Blocked(microseconds(5), false);
  }
  EXPECT_EQ(polled, static_cast<int>(AdaptivePoll::kMaxMisses));
  EXPECT_EQ(poll.window(), microseconds(0));
  // Without the rule it would have kept growing: a hit in between resets the count.
  AdaptivePoll hit(kMax);
  hit.Blocked(microseconds(5), false);
  for (std::uint32_t i = 0; i < 2 * AdaptivePoll::kMaxMisses; ++i) {
    hit.Hit();
    hit.Blocked(microseconds(5), false);
  }
  EXPECT_EQ(hit.window(), kMax);
}

TEST(AdaptivePoll, AZeroMaximumNeverPolls) {
  AdaptivePoll poll(microseconds(0));
  for (int i = 0; i < 10; ++i) poll.Blocked(microseconds(1), false);
  EXPECT_EQ(poll.window(), microseconds(0));
  EXPECT_FALSE(poll.UsesPreemption());
}

}  // namespace
}  // namespace cagent::launcher::broker
