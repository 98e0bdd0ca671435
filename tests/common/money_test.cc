// Money for cost budgets: parsing what a person writes, printing it back, and costing tokens at
// prices per million tokens without losing a micro to rounding in the provider's favour.
#include "common/money.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cagent {
namespace {

using ::testing::HasSubstr;

TEST(Money, ParsesAmountsWithUpToSixDecimals) {
  auto m = ParseMoney("2.50", "USD");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->micros, 2500000U);
  EXPECT_EQ(m->currency, "USD");
  EXPECT_EQ(ParseMoney("0.000001", "EUR")->micros, 1U);
  EXPECT_EQ(ParseMoney("12", "USD")->micros, 12000000U);
  EXPECT_EQ(ParseMoney("1000000", "USD")->micros, 1000000000000U);
}

TEST(Money, RefusesWhatIsNotAnAmountSayingWhy) {
  for (const char* bad : {"", ".5", "2.", "-1", "1e3", "2,50", "1.2.3", "0x10", " 1"}) {
    auto m = ParseMoney(bad, "USD");
    EXPECT_FALSE(m.ok()) << bad;
  }
  EXPECT_THAT(ParseMoney("0.0000001", "USD").error().Message(), HasSubstr("six decimals"));
  EXPECT_THAT(ParseMoney("1000001", "USD").error().Message(), HasSubstr("at most 1000000"));
  EXPECT_THAT(ParseMoney("1", "usd").error().Message(), HasSubstr("three capital letters"));
  EXPECT_FALSE(ParseMoney("1", "DOLLARS").ok());
}

TEST(Money, OneWordTakesItsCurrencyOrTheDefault) {
  auto with = ParseMoneyWord("0.50USD", "");
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(with->micros, 500000U);
  EXPECT_EQ(with->currency, "USD");
  auto without = ParseMoneyWord("0.01", "");
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->micros, 10000U);
  EXPECT_EQ(without->currency, "");
  EXPECT_EQ(ParseMoneyWord("3", "EUR")->currency, "EUR");
  EXPECT_EQ(ParseMoneyWord("0.50 USD", "")->micros, 500000U);
  EXPECT_FALSE(ParseMoneyWord("0.50  USD", "").ok());
  EXPECT_FALSE(ParseMoneyWord("USD", "").ok());
}

TEST(Money, PrintsTwoDecimalsOrAsManyAsNeeded) {
  EXPECT_EQ(FormatMoney(2500000, "USD"), "2.50 USD");
  EXPECT_EQ(FormatMoney(0, "USD"), "0.00 USD");
  EXPECT_EQ(FormatMoney(4321, "USD"), "0.004321 USD");
  EXPECT_EQ(FormatMoney(6000, "USD"), "0.006 USD");
  EXPECT_EQ(FormatMoney(12000000, ""), "12.00");
  EXPECT_EQ(FormatMoney(Money{10000, "EUR"}), "0.01 EUR");
}

TEST(TokenPrices, CostsEachPartAtItsPriceAndRoundsUp) {
  TokenPrices p{"USD", 3.0, 0.30, 3.75, 15.0};
  EXPECT_EQ(p.CostMicros(1000, 0, 0, 0), 3000U);
  EXPECT_EQ(p.CostMicros(1000, 1000, 0, 0), 300U);
  EXPECT_EQ(p.CostMicros(1000, 0, 1000, 0), 3750U);
  EXPECT_EQ(p.CostMicros(0, 0, 0, 100), 1500U);
  EXPECT_EQ(p.CostMicros(1, 1, 0, 0), 1U);  // 0.3 micro is billed as 1
  // Parts larger than the whole (a provider's inconsistent report) are cut to the whole.
  EXPECT_EQ(p.CostMicros(100, 500, 500, 0), 30U);
  EXPECT_EQ(p.WorstInputMicros(1000), 3750U);
}

}  // namespace
}  // namespace cagent
