#include "common/text.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace cagent {
namespace {

TEST(TrimSpace, RemovesAsciiWhitespaceAtBothEndsOnly) {
  EXPECT_EQ(TrimSpace("  max 100\n"), "max 100");
  EXPECT_EQ(TrimSpace("\r\n\tyes\r\n"), "yes");  // a terminal answer typed with CR LF
  EXPECT_EQ(TrimSpace("a \t b"), "a \t b");      // inner whitespace is kept
  EXPECT_EQ(TrimSpace(" \t\r\n"), "");
  EXPECT_EQ(TrimSpace(""), "");
  EXPECT_EQ(TrimSpace("\vx\f"), "\vx\f");  // only space, tab, CR and LF count
}

TEST(ShellQuote, SingleQuotesWithEmbeddedQuotes) {
  EXPECT_EQ(ShellQuote("plain"), "'plain'");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$(x) `y` \"z\""), "'$(x) `y` \"z\"'");
}

TEST(ShellWord, QuotesOnlyWhatShWouldReadOtherwise) {
  EXPECT_EQ(ShellWord("/results/fix-1/state"), "/results/fix-1/state");
  EXPECT_EQ(ShellWord("a b"), "'a b'");
  EXPECT_EQ(ShellWord(""), "''");
  EXPECT_EQ(ShellWord("~x"), "'~x'");
  EXPECT_EQ(ShellWord("#x"), "'#x'");
  EXPECT_EQ(ShellWord("it's"), "'it'\\''s'");
}

// What /bin/sh prints for `printf %s WORD`.
std::string ShEcho(const std::string& word) {
  const std::string command = "printf %s " + word + " 2>/dev/null";
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return "<popen failed>";
  std::string out;
  std::array<char, 256> buf{};
  for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;)
    out.append(buf.data(), n);
  const int status = ::pclose(p);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "<sh failed>";
  return out;
}

// The real check: sh reads back exactly the bytes given, whatever they hold. The twin: each word
// but the plain one, unquoted, does not come back intact (so the comparison can fail).
TEST(ShellQuote, ShReadsEachWordBackByteForByte) {
  const std::array<std::string, 6> words = {
      "plain", "two words", "it's", "$(echo ran) `echo ran` $HOME", "a\\b\"c", "~;|&<>#"};
  for (const std::string& w : words) {
    EXPECT_EQ(ShEcho(ShellQuote(w)), w) << w;
    EXPECT_EQ(ShEcho(ShellWord(w)), w) << w;
    if (w == "plain") {
      EXPECT_EQ(ShEcho(w), w);
    } else {
      EXPECT_NE(ShEcho(w), w) << "unquoted: " << w;
    }
  }
}

}  // namespace
}  // namespace cagent
