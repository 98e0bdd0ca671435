#include "common/terminal_text.h"

#include <gtest/gtest.h>

#include "common/json_text.h"

namespace cagent {
namespace {

TEST(TerminalSafe, PlainTextIsUnchanged) {
  EXPECT_EQ(TerminalSafe("src/calc.py: fixed add()"), "src/calc.py: fixed add()");
  EXPECT_EQ(TerminalSafe("héllo wörld — ok ✓"), "héllo wörld — ok ✓");
  EXPECT_TRUE(IsTerminalSafe("a\\b"));
}

TEST(TerminalSafe, EscapeSequencesCannotRewriteTheScreen) {
  // Cursor up, erase line, then a forged status: the classic rewrite of an earlier line.
  const std::string forged = "x\x1b[1A\x1b[2K\rverify passed\x07";
  const std::string safe = TerminalSafe(forged);
  EXPECT_EQ(safe, "x\\x1b[1A\\x1b[2K\\rverify passed\\x07");
  EXPECT_EQ(safe.find('\x1b'), std::string::npos);
  EXPECT_FALSE(IsTerminalSafe(forged));
}

TEST(TerminalSafe, NewlinesAreEscapedOnOneLineAndKeptOnMany) {
  EXPECT_EQ(TerminalSafe("a\nb\tc"), "a\\nb\\tc");
  EXPECT_EQ(TerminalSafe("a\nb\tc\r", TerminalLines::kMultiple), "a\nb\tc\\r");
}

TEST(TerminalSafe, C1ControlsAreEscaped) {
  // U+009B is a one-character CSI on terminals that honour C1 controls.
  EXPECT_EQ(TerminalSafe("a\xc2\x9b"
                         "31mred"),
            "a\\u{009b}31mred");
  EXPECT_EQ(TerminalSafe("\x7f"), "\\x7f");
}

TEST(TerminalSafe, BidiAndInvisibleCodePointsAreShown) {
  // RIGHT-TO-LEFT OVERRIDE makes "test_gpj.py" read as "test_yp.jpg"-like text.
  EXPECT_EQ(TerminalSafe("test_\xe2\x80\xaegpj.py"), "test_\\u{202e}gpj.py");
  EXPECT_EQ(TerminalSafe("a\xe2\x80\x8b"
                         "b"),
            "a\\u{200b}b");  // zero-width space
  EXPECT_EQ(TerminalSafe("a\xe2\x81\xa6"
                         "b"),
            "a\\u{2066}b");  // LRI
  EXPECT_EQ(TerminalSafe("\xef\xbb\xbf"
                         "x"),
            "\\u{feff}x");  // BOM
  EXPECT_EQ(TerminalSafe("a\xe2\x80\xa8"
                         "b"),
            "a\\u{2028}b");                                   // line separator
  EXPECT_EQ(TerminalSafe("\xf3\xa0\x80\x81"), "\\u{e0001}");  // language tag
}

TEST(TerminalSafe, InvalidUtf8BecomesHexBytes) {
  EXPECT_EQ(TerminalSafe("a\xff"
                         "b"),
            "a\\xffb");
  EXPECT_EQ(TerminalSafe("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(TerminalSafe("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(TerminalSafe("\xe2\x80"), "\\xe2\\x80");           // cut short
}

TEST(JsonText, InvalidUtf8DoesNotThrow) {
  nlohmann::json j = {{"path", std::string("bad\xff name")}};
  // The library's own dump throws on it: this is what JsonText exists for.
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);
  const std::string text = JsonText(j);
  EXPECT_EQ(text, "{\"path\":\"bad\xef\xbf\xbd name\"}");
  EXPECT_FALSE(nlohmann::json::parse(text, nullptr, false).is_discarded());
  EXPECT_EQ(JsonText(nlohmann::json{{"a", 1}}, 2), "{\n  \"a\": 1\n}");
}

}  // namespace
}  // namespace cagent
