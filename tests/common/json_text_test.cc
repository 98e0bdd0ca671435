// AppendJsonString against JsonText(json(text)), the reference it must equal byte for byte (the
// audit log writes its strings with the one and digests are computed over the other).
#include "common/json_text.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace cagent {
namespace {

std::string Appended(std::string_view text) {
  std::string out = "x";  // appends: what was there stays
  AppendJsonString(out, text);
  return out.substr(1);
}

TEST(AppendJsonString, EqualsJsonTextForEverySingleByte) {
  for (int c = 0; c < 256; ++c) {
    const std::string text(1, static_cast<char>(c));
    EXPECT_EQ(Appended(text), JsonText(nlohmann::json(text))) << "byte " << c;
  }
}

TEST(AppendJsonString, EscapesAndUtf8AsJsonText) {
  const std::vector<std::string> cases = {
      "",
      "plain ascii",
      "quote \" backslash \\ slash /",
      "controls \b\f\n\r\t\x01\x1f\x7f end",
      "utf-8: \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd",
      "edges: \xc2\x80 \xdf\xbf \xe0\xa0\x80 \xed\x9f\xbf \xee\x80\x80 \xf0\x90\x80\x80 "
      "\xf4\x8f\xbf\xbf",
      "invalid: \xff\xfe",
      "overlong: \xc0\xaf \xe0\x80\xaf",
      "surrogate: \xed\xa0\x80",
      "too high: \xf4\x90\x80\x80",
      "cut short: \xe2\x82",
      "lone continuation: \x80 x",
      std::string("nul \0 inside", 12),
  };
  for (const std::string& text : cases) {
    EXPECT_EQ(Appended(text), JsonText(nlohmann::json(text))) << text;
  }
}

TEST(AppendJsonString, EqualsJsonTextOnRandomBytes) {
  std::mt19937 rng(18);  // fixed seed: the same strings every run
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> length(0, 24);
  for (int i = 0; i < 5000; ++i) {
    std::string text;
    const int n = length(rng);
    for (int k = 0; k < n; ++k) {
      // Mostly high bytes, so that valid and invalid UTF-8 sequences both come up often.
      const int b = byte(rng);
      text.push_back(static_cast<char>(b < 64 ? b : 0x80 | (b & 0x7f)));
    }
    ASSERT_EQ(Appended(text), JsonText(nlohmann::json(text))) << "case " << i;
  }
}

// A NUL ends nlohmann's input: the twin parses a valid value followed by NUL and anything.
TEST(ParseJsonText, ANulByteIsRefused) {
  for (const std::string& text :
       {std::string("1\0x", 3), std::string("{\"a\":1}\0{\"b\"", 12), std::string("[]\0", 3)}) {
    EXPECT_FALSE(nlohmann::json::parse(text, nullptr, false).is_discarded());  // the twin
    EXPECT_TRUE(ParseJsonText(text).is_discarded());
    EXPECT_TRUE(ParseJsonWithin(text, 10).is_discarded());
  }
  EXPECT_EQ(ParseJsonText(R"({"a":"\u0000"})")["a"], std::string(1, '\0'));  // escaped is fine
}

TEST(ParseJsonWithin, RefusesExactlyWhatIsDeeperThanTheLimit) {
  bool deep = true;
  EXPECT_EQ(ParseJsonWithin("[[1]]", 2, &deep), nlohmann::json::parse("[[1]]"));
  EXPECT_FALSE(deep);
  EXPECT_TRUE(ParseJsonWithin("[[1]]", 1, &deep).is_discarded());
  EXPECT_TRUE(deep);
  EXPECT_TRUE(ParseJsonWithin("[\"[[[\"]", 1, &deep).is_array());  // brackets in strings
  EXPECT_FALSE(deep);
  EXPECT_TRUE(ParseJsonWithin("{", 5, &deep).is_discarded());  // invalid, not deep
  EXPECT_FALSE(deep);
}

}  // namespace
}  // namespace cagent
