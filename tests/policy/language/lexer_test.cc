// Tests for policy/language/lexer.h: token kinds, texts, locations and lengths, and the exact
// diagnostics for malformed input.
#include "policy/language/lexer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/language/diagnostics.h"
#include "policy/language/source.h"

namespace cagent::policy {
namespace {

std::string KindName(TokenKind k) {
  switch (k) {
    case TokenKind::kWord:
      return "WORD";
    case TokenKind::kString:
      return "STRING";
    case TokenKind::kLBrace:
      return "{";
    case TokenKind::kRBrace:
      return "}";
    case TokenKind::kLParen:
      return "(";
    case TokenKind::kRParen:
      return ")";
    case TokenKind::kPipe:
      return "|";
    case TokenKind::kSemicolon:
      return ";";
    case TokenKind::kNewline:
      return "NL";
    case TokenKind::kEof:
      return "EOF";
    case TokenKind::kError:
      return "ERROR";
  }
  return "?";
}

struct Lexed {
  SourceSet sources;
  Diagnostics diags;
  std::vector<Token> tokens;  // through the first EOF

  // "WORD(a) STRING(b c) NL EOF"
  [[nodiscard]] std::string Kinds() const {
    std::string out;
    for (const Token& t : tokens) {
      if (!out.empty()) out += ' ';
      out += KindName(t.kind);
      if (t.kind == TokenKind::kWord || t.kind == TokenKind::kString) out += "(" + t.text + ")";
    }
    return out;
  }
  // "line:col+length" for every token.
  [[nodiscard]] std::string Positions() const {
    std::string out;
    for (const Token& t : tokens) {
      if (!out.empty()) out += ' ';
      out += std::to_string(t.loc.line) + ":" + std::to_string(t.loc.col) + "+" +
             std::to_string(t.length);
    }
    return out;
  }
  [[nodiscard]] std::string Rendered() const { return RenderAll(sources, diags); }
};

Lexed Lex(const std::string& text) {
  Lexed out;
  out.sources.Add("t.cagent", text);
  out.sources.Add("u.cagent", text);
  // Lex the second file so that the file index is seen to be carried into locations.
  Lexer lexer(out.sources.file(1), 1, out.diags);
  for (std::size_t i = 0; i <= text.size() + 1; ++i) {
    out.tokens.push_back(lexer.Next());
    if (out.tokens.back().kind == TokenKind::kEof) break;
  }
  return out;
}

TEST(LexerTest, EmptyInputIsEof) {
  const Lexed l = Lex("");
  EXPECT_EQ(l.Kinds(), "EOF");
  EXPECT_EQ(l.Positions(), "1:1+0");
  EXPECT_EQ(l.tokens[0].loc.file, 1u);
}

TEST(LexerTest, EofRepeats) {
  SourceSet s;
  s.Add("t", "a");
  Diagnostics d;
  Lexer lexer(s.file(0), 0, d);
  EXPECT_EQ(lexer.Next().kind, TokenKind::kWord);
  EXPECT_EQ(lexer.Next().kind, TokenKind::kEof);
  EXPECT_EQ(lexer.Next().kind, TokenKind::kEof);
  EXPECT_EQ(lexer.Next().kind, TokenKind::kEof);
}

TEST(LexerTest, WordsAndPunctuation) {
  const Lexed l = Lex("allow git { } ( a|b ) ;\n");
  EXPECT_EQ(l.Kinds(), "WORD(allow) WORD(git) { } ( WORD(a) | WORD(b) ) ; NL EOF");
  EXPECT_EQ(l.Positions(),
            "1:1+5 1:7+3 1:11+1 1:13+1 1:15+1 1:17+1 1:18+1 1:19+1 1:21+1 "
            "1:23+1 1:24+1 2:1+0");
  EXPECT_FALSE(l.diags.HasErrors());
}

TEST(LexerTest, PunctuationEndsWordsWithoutBlanks) {
  const Lexed l = Lex("a{b}c(d)e|f;g\"h\"i");
  EXPECT_EQ(l.Kinds(),
            "WORD(a) { WORD(b) } WORD(c) ( WORD(d) ) WORD(e) | WORD(f) ; WORD(g) STRING(h) "
            "WORD(i) EOF");
}

TEST(LexerTest, WordsKeepGlobAndPathCharacters) {
  const Lexed l = Lex("**/.env [a-z]*? ~/x=1,2 /usr/lib read-only 10m a\\b caf\xc3\xa9 \x7f");
  EXPECT_EQ(l.Kinds(),
            "WORD(**/.env) WORD([a-z]*?) WORD(~/x=1,2) WORD(/usr/lib) WORD(read-only) WORD(10m) "
            "WORD(a\\b) WORD(caf\xc3\xa9) WORD(\x7f) EOF");
  EXPECT_FALSE(l.diags.HasErrors());
}

TEST(LexerTest, BlanksAreSpacesAndTabs) {
  const Lexed l = Lex(" \t a\t\tb ");
  EXPECT_EQ(l.Kinds(), "WORD(a) WORD(b) EOF");
  EXPECT_EQ(l.Positions(), "1:4+1 1:7+1 1:9+0");
}

TEST(LexerTest, CommentsRunToEndOfLine) {
  const Lexed l = Lex("# whole line { ( \"\n  a # trailing \"unterminated\n# last");
  EXPECT_EQ(l.Kinds(), "NL WORD(a) NL EOF");
  EXPECT_EQ(l.Positions(), "1:19+1 2:3+1 2:29+1 3:7+0");
  EXPECT_FALSE(l.diags.HasErrors());
}

TEST(LexerTest, HashInsideAWordIsPartOfIt) {
  const Lexed l = Lex("a#b c# #d\ne");
  EXPECT_EQ(l.Kinds(), "WORD(a#b) WORD(c#) NL WORD(e) EOF");
}

TEST(LexerTest, CommentIsNotAContinuation) {
  const Lexed l = Lex("a # x \\\nb");
  EXPECT_EQ(l.Kinds(), "WORD(a) NL WORD(b) EOF");
  EXPECT_FALSE(l.diags.HasErrors());
}

TEST(LexerTest, ControlBytesInCommentsAreErrors) {
  const Lexed l = Lex("a # x\x01\x1b[0m \r y\r\nb");
  // The comment yields no token, so neither does the error inside it.
  EXPECT_EQ(l.Kinds(), "WORD(a) NL WORD(b) EOF");
  EXPECT_EQ(l.Rendered(),
            "u.cagent:1:6: error: control character 0x01 in profile\n"
            "  a # x??[0m ? y\n"
            "       ^~\n"
            "  hint: remove it; profiles must be plain text\n"
            "u.cagent:1:12: error: control character 0x0d in profile\n"
            "  a # x??[0m ? y\n"
            "             ^\n"
            "  hint: remove it; profiles must be plain text\n");
}

TEST(LexerTest, ContinuationJoinsLines) {
  const Lexed l = Lex("allow a \\\n      b\\\nc \\\r\n d\n");
  EXPECT_EQ(l.Kinds(), "WORD(allow) WORD(a) WORD(b) WORD(c) WORD(d) NL EOF");
  EXPECT_EQ(l.Positions(), "1:1+5 1:7+1 2:7+1 3:1+1 4:2+1 4:3+1 5:1+0");
}

TEST(LexerTest, BackslashNotBeforeNewlineIsAWordByte) {
  const Lexed l = Lex("a\\ b \\ \\");
  EXPECT_EQ(l.Kinds(), "WORD(a\\) WORD(b) WORD(\\) WORD(\\) EOF");
}

TEST(LexerTest, CrLfIsOneNewline) {
  const Lexed l = Lex("a\r\nb c\r\n\r\n");
  EXPECT_EQ(l.Kinds(), "WORD(a) NL WORD(b) WORD(c) NL NL EOF");
  EXPECT_EQ(l.Positions(), "1:1+1 1:2+2 2:1+1 2:3+1 2:4+2 3:1+2 4:1+0");
  EXPECT_FALSE(l.diags.HasErrors());
}

TEST(LexerTest, StringsResolveEscapes) {
  const Lexed l = Lex(R"(x "a b" "q\"uote" "back\\slash" "n\nt\t" "" "#not comment" "{(|;)}")");
  ASSERT_EQ(l.tokens.size(), 9u);
  EXPECT_EQ(l.tokens[1].text, "a b");
  EXPECT_EQ(l.tokens[2].text, "q\"uote");
  EXPECT_EQ(l.tokens[3].text, "back\\slash");
  EXPECT_EQ(l.tokens[4].text, "n\nt\t");
  EXPECT_EQ(l.tokens[5].text, "");
  EXPECT_EQ(l.tokens[6].text, "#not comment");
  EXPECT_EQ(l.tokens[7].text, "{(|;)}");
  for (std::size_t i = 1; i < 8; ++i) EXPECT_EQ(l.tokens[i].kind, TokenKind::kString) << i;
  // Lengths count the source bytes, quotes and backslashes included.
  EXPECT_EQ(l.Positions(), "1:1+1 1:3+5 1:9+9 1:19+13 1:33+8 1:42+2 1:45+14 1:60+8 1:68+0");
  EXPECT_FALSE(l.diags.HasErrors());
}

TEST(LexerTest, StringKeepsUtf8AndTabs) {
  const Lexed l = Lex("\"caf\xc3\xa9\tx\"");
  EXPECT_EQ(l.Kinds(), "STRING(caf\xc3\xa9\tx) EOF");
  EXPECT_EQ(l.tokens[0].length, 9u);
}

TEST(LexerTest, UnterminatedStringAtEndOfLine) {
  const Lexed l = Lex("limits {\n  memory \"4G\n}\n");
  EXPECT_EQ(l.Kinds(), "WORD(limits) { NL WORD(memory) ERROR NL } NL EOF");
  EXPECT_EQ(l.tokens[4].loc, (Location{1, 2, 10}));
  EXPECT_EQ(l.tokens[4].length, 3u);
  EXPECT_EQ(l.Rendered(),
            "u.cagent:2:10: error: unterminated string\n"
            "    memory \"4G\n"
            "           ^~~\n"
            "  hint: close it with '\"' on the same line\n");
}

TEST(LexerTest, UnterminatedStringAtEndOfFile) {
  const Lexed l = Lex("a \"bc");
  EXPECT_EQ(l.Kinds(), "WORD(a) ERROR EOF");
  EXPECT_EQ(l.Rendered(),
            "u.cagent:1:3: error: unterminated string\n"
            "  a \"bc\n"
            "    ^~~\n"
            "  hint: close it with '\"' on the same line\n");
}

TEST(LexerTest, UnterminatedStringBeforeCrLf) {
  const Lexed l = Lex("\"x\r\ny");
  EXPECT_EQ(l.Kinds(), "ERROR NL WORD(y) EOF");
  EXPECT_EQ(l.Positions(), "1:1+2 1:3+2 2:1+1 2:2+0");
  EXPECT_EQ(l.diags.ErrorCount(), 1u);
}

TEST(LexerTest, NoContinuationInsideAString) {
  const Lexed l = Lex("\"a\\\nb\"");
  EXPECT_EQ(l.Kinds(), "ERROR NL WORD(b) ERROR EOF");
  EXPECT_EQ(l.Rendered(),
            "u.cagent:1:1: error: unterminated string\n"
            "  \"a\\\n"
            "  ^~~\n"
            "  hint: close it with '\"' on the same line\n"
            "u.cagent:2:2: error: unterminated string\n"
            "  b\"\n"
            "   ^\n"
            "  hint: close it with '\"' on the same line\n");
}

TEST(LexerTest, UnknownEscape) {
  const Lexed l = Lex("k \"a\\qb\" next");
  EXPECT_EQ(l.Kinds(), "WORD(k) ERROR WORD(next) EOF");
  EXPECT_EQ(l.Positions(), "1:1+1 1:3+6 1:10+4 1:14+0");
  EXPECT_EQ(l.Rendered(),
            "u.cagent:1:5: error: unknown escape '\\q' in string\n"
            "  k \"a\\qb\" next\n"
            "      ^~\n"
            "  hint: valid escapes are \\\" \\\\ \\n \\t\n");
}

TEST(LexerTest, EveryUnknownEscapeInAStringIsReported) {
  const Lexed l = Lex(R"("\x\'\ ")");
  EXPECT_EQ(l.Kinds(), "ERROR EOF");
  ASSERT_EQ(l.diags.list().size(), 3u);
  EXPECT_EQ(l.diags.list()[0].message, "unknown escape '\\x' in string");
  EXPECT_EQ(l.diags.list()[1].message, "unknown escape '\\'' in string");
  EXPECT_EQ(l.diags.list()[2].message, "unknown escape '\\ ' in string");
  EXPECT_EQ(l.diags.list()[2].loc.col, 6u);
}

TEST(LexerTest, UnknownEscapeOfAUtf8CharacterShowsTheWholeCharacter) {
  const Lexed l = Lex("\"\\\xc3\xa9\"");
  ASSERT_EQ(l.diags.list().size(), 1u);
  EXPECT_EQ(l.diags.list()[0].message, "unknown escape '\\\xc3\xa9' in string");
  EXPECT_EQ(l.diags.list()[0].length, 3u);
}

TEST(LexerTest, NulIsAnError) {
  const Lexed l = Lex(std::string("a\0b", 3));
  EXPECT_EQ(l.Kinds(), "WORD(a) ERROR WORD(b) EOF");
  EXPECT_EQ(l.Rendered(),
            "u.cagent:1:2: error: control character 0x00 in profile\n"
            "  a?b\n"
            "   ^\n"
            "  hint: remove it; profiles must be plain text\n");
}

TEST(LexerTest, RunOfControlBytesIsOneError) {
  const Lexed l = Lex("x \x01\x02\x1b y");
  EXPECT_EQ(l.Kinds(), "WORD(x) ERROR WORD(y) EOF");
  EXPECT_EQ(l.Positions(), "1:1+1 1:3+3 1:7+1 1:8+0");
  ASSERT_EQ(l.diags.list().size(), 1u);
  EXPECT_EQ(l.diags.list()[0].message, "control character 0x01 in profile");
  EXPECT_EQ(l.diags.list()[0].length, 3u);
}

TEST(LexerTest, LoneCarriageReturnIsAControlCharacter) {
  const Lexed l = Lex("a\rb\r\r\n");
  EXPECT_EQ(l.Kinds(), "WORD(a) ERROR WORD(b) ERROR NL EOF");
  ASSERT_EQ(l.diags.list().size(), 2u);
  EXPECT_EQ(l.diags.list()[0].message, "control character 0x0d in profile");
  EXPECT_EQ(l.diags.list()[1].length, 1u);
}

TEST(LexerTest, ControlCharacterInsideAString) {
  const Lexed l = Lex("\"a\x07z\" \"\\\x01\"");
  EXPECT_EQ(l.Kinds(), "ERROR ERROR EOF");
  ASSERT_EQ(l.diags.list().size(), 2u);
  EXPECT_EQ(l.diags.list()[0].message, "control character 0x07 in profile");
  EXPECT_EQ(l.diags.list()[0].loc.col, 3u);
  EXPECT_EQ(l.diags.list()[1].message, "control character 0x01 in profile");
  EXPECT_EQ(l.diags.list()[1].loc.col, 9u);
}

TEST(LexerTest, DeleteAfterBackslashIsNamedByValue) {
  const Lexed l = Lex("\"\\\x7f\"");
  ASSERT_EQ(l.diags.list().size(), 1u);
  EXPECT_EQ(l.diags.list()[0].message, "unknown escape '\\' followed by byte 0x7f in string");
}

TEST(LexerTest, AllSingleBytesAndPairsTerminate) {
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; b += (a < 128 ? 1 : 37)) {
      const std::string text{static_cast<char>(a), static_cast<char>(b)};
      const Lexed l = Lex(text);
      ASSERT_EQ(l.tokens.back().kind, TokenKind::kEof) << a << " " << b;
    }
  }
}

}  // namespace
}  // namespace cagent::policy
