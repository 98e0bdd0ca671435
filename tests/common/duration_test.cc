#include "common/duration.h"

#include "gtest/gtest.h"

namespace cagent {
namespace {

using std::chrono::milliseconds;

TEST(DurationTest, Units) {
  EXPECT_EQ(*ParseDuration("90s"), milliseconds(90'000));
  EXPECT_EQ(*ParseDuration("90"), milliseconds(90'000));
  EXPECT_EQ(*ParseDuration("250ms"), milliseconds(250));
  EXPECT_EQ(*ParseDuration("10m"), milliseconds(600'000));
  EXPECT_EQ(*ParseDuration("2h"), milliseconds(7'200'000));
}

TEST(DurationTest, RejectsBadInput) {
  EXPECT_EQ(ParseDuration("").error().Message(),
            "invalid duration '': expected a number followed by an optional unit");
  EXPECT_EQ(ParseDuration("5 parsecs").error().Message(),
            "invalid duration '5 parsecs': unknown unit ' parsecs' (use ms, s, m or h)");
  EXPECT_FALSE(ParseDuration("-5s").ok());
  EXPECT_FALSE(ParseDuration("99999999999999999999999s").ok());
  EXPECT_EQ(ParseDuration("1000h").error().Message(),
            "invalid duration '1000h': longer than 30 days");
}

TEST(SizeTest, Units) {
  EXPECT_EQ(*ParseSize("512M"), 512ULL << 20);
  EXPECT_EQ(*ParseSize("1G"), 1ULL << 30);
  EXPECT_EQ(*ParseSize("4096"), 4096ULL);
  EXPECT_FALSE(ParseSize("1Q").ok());
  EXPECT_FALSE(ParseSize("99999999999T").ok());
}

}  // namespace
}  // namespace cagent
