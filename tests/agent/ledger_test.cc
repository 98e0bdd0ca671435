#include "agent/ledger.h"

#include <gtest/gtest.h>

namespace cagent::agent {
namespace {

TEST(Ledger, NeverReadFileIsNotFresh) {
  Ledger ledger;
  EXPECT_EQ(ledger.Check("a.txt", "d1"), Ledger::State::kNeverRead);
  EXPECT_FALSE(ledger.Digest("a.txt").has_value());
  ledger.RecordRead("a.txt", "d1");
  EXPECT_EQ(ledger.Check("a.txt", "d1"), Ledger::State::kFresh);
  EXPECT_EQ(ledger.Check("a.txt", "d2"), Ledger::State::kChanged);
  EXPECT_EQ(ledger.Digest("a.txt"), "d1");
}

TEST(Ledger, WriteRecordsTheNewDigest) {
  Ledger ledger;
  ledger.RecordRead("a.txt", "d1");
  ledger.RecordWrite("a.txt", "d2");
  EXPECT_EQ(ledger.Check("a.txt", "d2"), Ledger::State::kFresh);
  EXPECT_EQ(ledger.Check("a.txt", "d1"), Ledger::State::kChanged);
}

TEST(Ledger, InvalidationNeedsANewRead) {
  Ledger ledger;
  ledger.Invalidate("never-seen");  // no entry: nothing happens
  EXPECT_EQ(ledger.Check("never-seen", "x"), Ledger::State::kNeverRead);
  ledger.RecordRead("a.txt", "d1");
  ledger.Invalidate("a.txt");
  EXPECT_EQ(ledger.Check("a.txt", "d1"), Ledger::State::kInvalidated);
  EXPECT_FALSE(ledger.Digest("a.txt").has_value());
  ledger.RecordRead("a.txt", "d1");
  EXPECT_EQ(ledger.Check("a.txt", "d1"), Ledger::State::kFresh);
}

TEST(Ledger, MarkAllStaleKeepsUnchangedFilesFresh) {
  Ledger ledger;
  ledger.RecordRead("same", "d1");
  ledger.RecordRead("changed", "d2");
  ledger.MarkAllStale();
  EXPECT_TRUE(ledger.MaybeStale("same"));
  EXPECT_EQ(ledger.Check("same", "d1"), Ledger::State::kFresh);
  EXPECT_EQ(ledger.Check("changed", "d3"), Ledger::State::kChanged);
  ledger.RecordRead("changed", "d3");
  EXPECT_FALSE(ledger.MaybeStale("changed"));
  EXPECT_EQ(ledger.size(), 2U);
}

}  // namespace
}  // namespace cagent::agent
