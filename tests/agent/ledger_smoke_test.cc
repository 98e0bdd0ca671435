#include <gtest/gtest.h>

#include "agent/ledger.h"

namespace cagent::agent {
namespace {

TEST(LedgerSmoke, NeverReadFileIsNotFresh) {
  Ledger ledger;
  EXPECT_EQ(ledger.Check("a.txt", "d1"), Ledger::State::kNeverRead);
  ledger.RecordRead("a.txt", "d1");
  EXPECT_EQ(ledger.Check("a.txt", "d1"), Ledger::State::kFresh);
  EXPECT_EQ(ledger.Check("a.txt", "d2"), Ledger::State::kChanged);
}

}  // namespace
}  // namespace cagent::agent
