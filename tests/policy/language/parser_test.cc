// Tests for policy/language/parser.h: the AST for valid input (values, groups, blocks, locations
// and lengths) and the exact rendered diagnostics, caret line included, for invalid input.
#include "policy/language/parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/language/ast.h"
#include "policy/language/diagnostics.h"
#include "policy/language/source.h"

namespace cagent::policy {
namespace {

std::string DumpValue(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kWord:
      return v.text;
    case Value::Kind::kString:
      return "\"" + v.text + "\"";
    case Value::Kind::kGroup: {
      std::string out = "(";
      for (std::size_t i = 0; i < v.alternatives.size(); ++i) {
        if (i > 0) out += "|";
        out += DumpValue(v.alternatives[i]);
      }
      return out + ")";
    }
  }
  return "?";
}

std::string DumpStatements(const std::vector<Statement>& statements);

std::string DumpStatement(const Statement& s) {
  std::string out = s.keyword;
  for (const Value& v : s.args) out += " " + DumpValue(v);
  if (s.has_block) out += " {" + DumpStatements(s.block) + "}";
  return out;
}

// Statements separated by "; ": `a 1; b { c; d }`.
std::string DumpStatements(const std::vector<Statement>& statements) {
  std::string out;
  for (const Statement& s : statements) {
    if (!out.empty()) out += "; ";
    out += DumpStatement(s);
  }
  return out;
}

struct Parsed {
  SourceSet sources;
  Diagnostics diags;
  File file;

  [[nodiscard]] std::string Ast() const { return DumpStatements(file.statements); }
  [[nodiscard]] std::string Rendered() const { return RenderAll(sources, diags); }
};

Parsed ParseText(const std::string& text) {
  Parsed p;
  p.sources.Add("base.cagent", "");
  const std::uint32_t index = p.sources.Add("t.cagent", text);
  p.file = Parse(p.sources, index, p.diags);
  return p;
}

// Parses text that must be valid and returns its dump.
std::string Ast(const std::string& text) {
  const Parsed p = ParseText(text);
  EXPECT_EQ(p.Rendered(), "") << "input:\n" << text;
  return p.Ast();
}

// Parses text that must be invalid and returns all rendered diagnostics.
std::string Errors(const std::string& text) {
  const Parsed p = ParseText(text);
  EXPECT_TRUE(p.diags.HasErrors()) << "input:\n" << text;
  return p.Rendered();
}

// ---- valid input ----

TEST(ParserTest, EmptyAndBlankFiles) {
  EXPECT_EQ(Ast(""), "");
  EXPECT_EQ(Ast("\n\n  \t\n"), "");
  EXPECT_EQ(Ast("# only a comment\n  # another\n"), "");
  EXPECT_EQ(Ast(";;\n;"), "");
}

TEST(ParserTest, FileIndexIsRecorded) {
  const Parsed p = ParseText("a");
  EXPECT_EQ(p.file.file, 1u);
  EXPECT_EQ(p.file.statements[0].loc.file, 1u);
}

TEST(ParserTest, StatementWithWordsAndStrings) {
  const Parsed p = ParseText("allow exec git \"my tool\" --flag\n");
  EXPECT_EQ(p.Rendered(), "");
  ASSERT_EQ(p.file.statements.size(), 1u);
  const Statement& s = p.file.statements[0];
  EXPECT_EQ(s.keyword, "allow");
  EXPECT_EQ(s.loc, (Location{1, 1, 1}));
  EXPECT_EQ(s.keyword_length, 5u);
  EXPECT_FALSE(s.has_block);
  ASSERT_EQ(s.args.size(), 4u);
  EXPECT_EQ(s.args[0].kind, Value::Kind::kWord);
  EXPECT_EQ(s.args[0].text, "exec");
  EXPECT_EQ(s.args[0].loc, (Location{1, 1, 7}));
  EXPECT_EQ(s.args[0].length, 4u);
  EXPECT_EQ(s.args[2].kind, Value::Kind::kString);
  EXPECT_EQ(s.args[2].text, "my tool");
  EXPECT_EQ(s.args[2].loc, (Location{1, 1, 16}));
  EXPECT_EQ(s.args[2].length, 9u);
  EXPECT_EQ(s.args[3].text, "--flag");
}

TEST(ParserTest, StatementsEndAtNewlineSemicolonBraceAndEof) {
  EXPECT_EQ(Ast("a 1\nb 2; c 3;d\ne { f 4 }\ng {h}"), "a 1; b 2; c 3; d; e {f 4}; g {h}");
}

TEST(ParserTest, CommentsAndHashInsideWords) {
  EXPECT_EQ(Ast("# header\nallow a#b # comment\n  deny c# # d\n"), "allow a#b; deny c#");
}

TEST(ParserTest, StringsWithEscapesAndKeywordsLookingLikePunctuation) {
  EXPECT_EQ(Ast(R"x(env "A=\"x\"" "tab\there" "{not a block}" "a|b" "(x)" "#")x"),
            "env \"A=\"x\"\" \"tab\there\" \"{not a block}\" \"a|b\" \"(x)\" \"#\"");
}

TEST(ParserTest, ContinuationLines) {
  const Parsed p = ParseText("allow exec \\\n    git \\\n    make\nnext\n");
  EXPECT_EQ(p.Rendered(), "");
  EXPECT_EQ(p.Ast(), "allow exec git make; next");
  EXPECT_EQ(p.file.statements[0].args[2].loc, (Location{1, 3, 5}));
  EXPECT_EQ(p.file.statements[1].loc, (Location{1, 4, 1}));
}

TEST(ParserTest, CrLfLineEndings) {
  const Parsed p = ParseText("limits {\r\n  memory 4G\r\n}\r\nnet off\r\n");
  EXPECT_EQ(p.Rendered(), "");
  EXPECT_EQ(p.Ast(), "limits {memory 4G}; net off");
  EXPECT_EQ(p.file.statements[1].loc, (Location{1, 4, 1}));
}

TEST(ParserTest, NestedBlocks) {
  const Parsed p = ParseText(
      "profile backend {\n"
      "  inherit base\n"
      "\n"
      "  fs {\n"
      "    read /usr /etc; write ./build\n"
      "    deny **/.env\n"
      "  }\n"
      "  limits { memory 4G; wall-time 10m }\n"
      "  empty {}\n"
      "}\n");
  EXPECT_EQ(p.Rendered(), "");
  EXPECT_EQ(p.Ast(),
            "profile backend {inherit base; fs {read /usr /etc; write ./build; deny **/.env}; "
            "limits {memory 4G; wall-time 10m}; empty {}}");
  const Statement& profile = p.file.statements[0];
  EXPECT_TRUE(profile.has_block);
  EXPECT_EQ(profile.block_loc, (Location{1, 1, 17}));
  const Statement& fs = profile.block[1];
  EXPECT_EQ(fs.loc, (Location{1, 4, 3}));
  EXPECT_EQ(fs.keyword_length, 2u);
  EXPECT_EQ(fs.block_loc, (Location{1, 4, 6}));
  EXPECT_EQ(fs.block[1].loc, (Location{1, 5, 21}));
  EXPECT_TRUE(profile.block[3].has_block);
  EXPECT_TRUE(profile.block[3].block.empty());
}

TEST(ParserTest, BlockCanFollowArgumentsOrNothing) {
  EXPECT_EQ(Ast("a {}\nb x \"y\" (z) {\n}\n"), "a {}; b x \"y\" (z) {}");
}

TEST(ParserTest, Groups) {
  const Parsed p = ParseText("allow net (github.com | \"pypi.org\"|x) (single)\n");
  EXPECT_EQ(p.Rendered(), "");
  EXPECT_EQ(p.Ast(), "allow net (github.com|\"pypi.org\"|x) (single)");
  const Value& g = p.file.statements[0].args[1];
  EXPECT_EQ(g.kind, Value::Kind::kGroup);
  EXPECT_EQ(g.text, "");
  EXPECT_EQ(g.loc, (Location{1, 1, 11}));
  EXPECT_EQ(g.length, 27u);  // "(github.com | \"pypi.org\"|x)"
  ASSERT_EQ(g.alternatives.size(), 3u);
  EXPECT_EQ(g.alternatives[1].kind, Value::Kind::kString);
  EXPECT_EQ(g.alternatives[1].loc, (Location{1, 1, 25}));
  EXPECT_EQ(g.alternatives[1].length, 10u);
  EXPECT_EQ(p.file.statements[0].args[2].length, 8u);
}

TEST(ParserTest, GroupsMaySpanLines) {
  const Parsed p = ParseText(
      "allow exec (\n"
      "    git\n"
      "  | make   # build\n"
      "  | \"cmake\"\n"
      ") more\n"
      "next\n");
  EXPECT_EQ(p.Rendered(), "");
  EXPECT_EQ(p.Ast(), "allow exec (git|make|\"cmake\") more; next");
  // A multi-line group's caret span stops at the end of its first line.
  EXPECT_EQ(p.file.statements[0].args[1].length, 1u);
  EXPECT_EQ(p.file.statements[0].args[2].loc, (Location{1, 5, 3}));
}

TEST(ParserTest, EightLevelsOfBlocksAreAllowed) {
  EXPECT_EQ(Ast("a{b{c{d{e{f{g{h{i}}}}}}}}"), "a {b {c {d {e {f {g {h {i}}}}}}}}");
}

// ---- errors, with the exact rendering ----

TEST(ParserErrorTest, UnterminatedStringInABlock) {
  const Parsed p = ParseText("limits {\n  memory \"4G\n}\n");
  EXPECT_EQ(p.Rendered(),
            "t.cagent:2:10: error: unterminated string\n"
            "    memory \"4G\n"
            "           ^~~\n"
            "  hint: close it with '\"' on the same line\n");
  // The broken statement is dropped; the block around it survives.
  EXPECT_EQ(p.Ast(), "limits {}");
}

TEST(ParserErrorTest, UnknownEscapeDropsTheStatement) {
  const Parsed p = ParseText("env X \"a\\qb\"\nenv Y z\n");
  EXPECT_EQ(p.Rendered(),
            "t.cagent:1:9: error: unknown escape '\\q' in string\n"
            "  env X \"a\\qb\"\n"
            "          ^~\n"
            "  hint: valid escapes are \\\" \\\\ \\n \\t\n");
  EXPECT_EQ(p.Ast(), "env Y z");
}

TEST(ParserErrorTest, ControlCharacter) {
  EXPECT_EQ(Errors(std::string("a\0b\n", 4)),
            "t.cagent:1:2: error: control character 0x00 in profile\n"
            "  a?b\n"
            "   ^\n"
            "  hint: remove it; profiles must be plain text\n");
}

TEST(ParserErrorTest, StatementStartingWithAString) {
  EXPECT_EQ(Errors("\"allow\" git\n"),
            "t.cagent:1:1: error: expected a key at the start of a statement, found string "
            "\"allow\"\n"
            "  \"allow\" git\n"
            "  ^~~~~~~\n"
            "  hint: keys are bare words; only values can be quoted\n");
}

TEST(ParserErrorTest, StringsInMessagesAreEscapedAndShortened) {
  EXPECT_EQ(Errors("\"a\\nb\\\"c\"\n\"0123456789012345678901234567890123456789\"\n"),
            "t.cagent:1:1: error: expected a key at the start of a statement, found string "
            "\"a\\nb\\\"c\"\n"
            "  \"a\\nb\\\"c\"\n"
            "  ^~~~~~~~~\n"
            "  hint: keys are bare words; only values can be quoted\n"
            "t.cagent:2:1: error: expected a key at the start of a statement, found string "
            "\"01234567890123456789012345678901...\"\n"
            "  \"0123456789012345678901234567890123456789\"\n"
            "  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n"
            "  hint: keys are bare words; only values can be quoted\n");
}

TEST(ParserErrorTest, StatementStartingWithPunctuation) {
  EXPECT_EQ(Errors("(a | b)\n|\n)\n"),
            "t.cagent:1:1: error: expected a key at the start of a statement, found '('\n"
            "  (a | b)\n"
            "  ^\n"
            "t.cagent:2:1: error: expected a key at the start of a statement, found '|'\n"
            "  |\n"
            "  ^\n"
            "t.cagent:3:1: error: expected a key at the start of a statement, found ')'\n"
            "  )\n"
            "  ^\n");
}

TEST(ParserErrorTest, BraceOnTheNextLine) {
  const Parsed p = ParseText("limits\n{\n  memory 4G\n}\nnet off\n");
  EXPECT_EQ(p.Rendered(),
            "t.cagent:2:1: error: expected a key at the start of a statement, found '{'\n"
            "  {\n"
            "  ^\n"
            "  hint: a block's '{' goes on the same line as its key\n");
  EXPECT_EQ(p.Ast(), "limits; net off");
}

TEST(ParserErrorTest, UnbalancedCloseBrace) {
  const Parsed p = ParseText("a {\n}\n}\nb\n");
  EXPECT_EQ(p.Rendered(),
            "t.cagent:3:1: error: unbalanced '}'\n"
            "  }\n"
            "  ^\n"
            "  hint: no block is open here; remove it or add the missing '{'\n");
  EXPECT_EQ(p.Ast(), "a {}; b");
}

TEST(ParserErrorTest, UnterminatedBlockIsReportedAtItsBrace) {
  EXPECT_EQ(Errors("profile x {\n  fs {\n    read /usr\n  }\n"),
            "t.cagent:1:11: error: unterminated block: expected '}' to close the block opened "
            "at 1:11\n"
            "  profile x {\n"
            "            ^\n");
}

TEST(ParserErrorTest, EveryUnterminatedBlockIsReported) {
  EXPECT_EQ(Errors("a {\n\tb {\n"),
            "t.cagent:1:3: error: unterminated block: expected '}' to close the block opened "
            "at 1:3\n"
            "  a {\n"
            "    ^\n"
            "t.cagent:2:4: error: unterminated block: expected '}' to close the block opened "
            "at 2:4\n"
            "  \tb {\n"
            "  \t  ^\n");
}

TEST(ParserErrorTest, BlocksNestedTooDeep) {
  const Parsed p = ParseText("a{b{c{d{e{f{g{h{i{j{}}}}}}}}}}\nafter\n");
  EXPECT_EQ(p.Rendered(),
            "t.cagent:1:18: error: blocks nested deeper than 8 levels\n"
            "  a{b{c{d{e{f{g{h{i{j{}}}}}}}}}}\n"
            "                   ^\n"
            "  hint: flatten the profile\n");
  // The too-deep block is skipped as a whole (only the statement that opened it is dropped);
  // parsing goes on after it.
  EXPECT_EQ(p.Ast(), "a {b {c {d {e {f {g {h {}}}}}}}}; after");
}

TEST(ParserErrorTest, HostileNestingDoesNotExhaustTheStack) {
  const Parsed braces = ParseText(std::string(200000, '{'));
  EXPECT_TRUE(braces.diags.HasErrors());
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "a{";
  const Parsed nested = ParseText(deep + std::string(100000, '}'));
  ASSERT_EQ(nested.diags.list().size(), 1u);
  EXPECT_EQ(nested.diags.list()[0].message, "blocks nested deeper than 8 levels");
  const Parsed parens = ParseText("a " + std::string(100000, '(') + std::string(100000, ')'));
  ASSERT_EQ(parens.diags.list().size(), 1u);
  EXPECT_EQ(parens.diags.list()[0].message, "groups cannot be nested");
}

TEST(ParserErrorTest, TextAfterABlock) {
  const Parsed p = ParseText("a { b } c\nd {} \"e\"; f\n");
  EXPECT_EQ(p.Rendered(),
            "t.cagent:1:9: error: expected end of statement after '}', found word 'c'\n"
            "  a { b } c\n"
            "          ^\n"
            "  hint: start the next statement on a new line or after ';'\n"
            "t.cagent:2:6: error: expected end of statement after '}', found string \"e\"\n"
            "  d {} \"e\"; f\n"
            "       ^~~\n"
            "  hint: start the next statement on a new line or after ';'\n");
  EXPECT_EQ(p.Ast(), "f");
}

TEST(ParserErrorTest, BlockThenBlock) {
  EXPECT_EQ(Errors("a {} {}\n"),
            "t.cagent:1:6: error: expected end of statement after '}', found '{'\n"
            "  a {} {}\n"
            "       ^\n"
            "  hint: start the next statement on a new line or after ';'\n");
}

TEST(ParserErrorTest, EmptyGroup) {
  EXPECT_EQ(Errors("allow exec ()\nallow exec (\n  )\n"),
            "t.cagent:1:12: error: empty group '()'\n"
            "  allow exec ()\n"
            "             ^~\n"
            "  hint: a group needs at least one alternative: (a | b)\n"
            "t.cagent:2:12: error: empty group '()'\n"
            "  allow exec (\n"
            "             ^\n"
            "  hint: a group needs at least one alternative: (a | b)\n");
}

TEST(ParserErrorTest, MissingPipeInGroup) {
  EXPECT_EQ(Errors("allow net (a.com b.com) x\n"),
            "t.cagent:1:18: error: expected '|' or ')' in group, found word 'b.com'\n"
            "  allow net (a.com b.com) x\n"
            "                   ^~~~~\n");
}

TEST(ParserErrorTest, StringAfterAlternative) {
  EXPECT_EQ(Errors("k (a \"b c\")\n"),
            "t.cagent:1:6: error: expected '|' or ')' in group, found string \"b c\"\n"
            "  k (a \"b c\")\n"
            "       ^~~~~\n");
}

TEST(ParserErrorTest, MissingAlternative) {
  EXPECT_EQ(Errors("k (a |)\nk (| a)\nk (a || b)\n"),
            "t.cagent:1:7: error: expected a word or string in group, found ')'\n"
            "  k (a |)\n"
            "        ^\n"
            "t.cagent:2:4: error: expected a word or string in group, found '|'\n"
            "  k (| a)\n"
            "     ^\n"
            "t.cagent:3:7: error: expected a word or string in group, found '|'\n"
            "  k (a || b)\n"
            "        ^\n");
}

TEST(ParserErrorTest, NestedGroup) {
  const Parsed p = ParseText("k (a | (b | c) | d) e\nk ((x)) \nk (a (b))\nok\n");
  EXPECT_EQ(p.Rendered(),
            "t.cagent:1:8: error: groups cannot be nested\n"
            "  k (a | (b | c) | d) e\n"
            "         ^\n"
            "t.cagent:2:4: error: groups cannot be nested\n"
            "  k ((x)) \n"
            "     ^\n"
            "t.cagent:3:6: error: groups cannot be nested\n"
            "  k (a (b))\n"
            "       ^\n");
  EXPECT_EQ(p.Ast(), "ok");
}

TEST(ParserErrorTest, UnterminatedGroupAtEndOfFile) {
  EXPECT_EQ(Errors("allow exec (git |\n   make"),
            "t.cagent:1:12: error: unterminated group: expected ')'\n"
            "  allow exec (git |\n"
            "             ^\n");
}

TEST(ParserErrorTest, UnterminatedGroupBeforeBlockStillParsesTheBlock) {
  EXPECT_EQ(Errors("k (a | b {\n  \"x\"\n}\n"),
            "t.cagent:1:3: error: unterminated group: expected ')'\n"
            "  k (a | b {\n"
            "    ^\n"
            "t.cagent:2:3: error: expected a key at the start of a statement, found string "
            "\"x\"\n"
            "    \"x\"\n"
            "    ^~~\n"
            "  hint: keys are bare words; only values can be quoted\n");
}

TEST(ParserErrorTest, UnterminatedGroupBeforeSemicolonOrBrace) {
  EXPECT_EQ(Errors("a { k (x; k (y }\n"),
            "t.cagent:1:7: error: unterminated group: expected ')'\n"
            "  a { k (x; k (y }\n"
            "        ^\n"
            "t.cagent:1:13: error: unterminated group: expected ')'\n"
            "  a { k (x; k (y }\n"
            "              ^\n");
}

TEST(ParserErrorTest, UnclosedGroupEndsAtTheNextLineThatIsNotAContinuation) {
  // The next line does not continue the group (it has no '|'), so it parses on its own.
  const Parsed p = ParseText("allow exec (git | make\ndeny net x\n");
  EXPECT_EQ(p.Rendered(),
            "t.cagent:1:12: error: unterminated group: expected ')'\n"
            "  allow exec (git | make\n"
            "             ^\n");
  EXPECT_EQ(p.Ast(), "deny net x");
}

TEST(ParserErrorTest, StrayPipeOrParenInArguments) {
  EXPECT_EQ(Errors("allow a | b\nallow a ) b\n"),
            "t.cagent:1:9: error: expected a value, '{' or end of statement, found '|'\n"
            "  allow a | b\n"
            "          ^\n"
            "  hint: alternatives go inside a group: (a | b)\n"
            "t.cagent:2:9: error: expected a value, '{' or end of statement, found ')'\n"
            "  allow a ) b\n"
            "          ^\n"
            "  hint: no group is open here\n");
}

TEST(ParserErrorTest, UnterminatedStringInsideAGroup) {
  // The string swallows the ')', so the group is unterminated too; both are reported, in order.
  EXPECT_EQ(Errors("k (a | \"b) c\n"),
            "t.cagent:1:3: error: unterminated group: expected ')'\n"
            "  k (a | \"b) c\n"
            "    ^\n"
            "t.cagent:1:8: error: unterminated string\n"
            "  k (a | \"b) c\n"
            "         ^~~~~\n"
            "  hint: close it with '\"' on the same line\n");
}

TEST(ParserErrorTest, AllErrorsInAFileAreReportedSortedAndGoodStatementsKept) {
  const Parsed p = ParseText(
      "profile p {\n"
      "  fs {\n"
      "    read \"/usr\n"
      "    write ./build\n"
      "  }\n"
      "  net (a b)\n"
      "  exec git\n"
      "}\n"
      "}\n"
      "\"x\" y\n"
      "limits { memory 4G } z\n"
      "end\n");
  EXPECT_EQ(p.diags.ErrorCount(), 5u);
  EXPECT_EQ(p.Rendered(),
            "t.cagent:3:10: error: unterminated string\n"
            "      read \"/usr\n"
            "           ^~~~~\n"
            "  hint: close it with '\"' on the same line\n"
            "t.cagent:6:10: error: expected '|' or ')' in group, found word 'b'\n"
            "    net (a b)\n"
            "           ^\n"
            "t.cagent:9:1: error: unbalanced '}'\n"
            "  }\n"
            "  ^\n"
            "  hint: no block is open here; remove it or add the missing '{'\n"
            "t.cagent:10:1: error: expected a key at the start of a statement, found string "
            "\"x\"\n"
            "  \"x\" y\n"
            "  ^~~\n"
            "  hint: keys are bare words; only values can be quoted\n"
            "t.cagent:11:22: error: expected end of statement after '}', found word 'z'\n"
            "  limits { memory 4G } z\n"
            "                       ^\n"
            "  hint: start the next statement on a new line or after ';'\n");
  EXPECT_EQ(p.Ast(), "profile p {fs {write ./build}; exec git}; end");
}

TEST(ParserErrorTest, ErrorsInsideADroppedStatementsBlockAreStillReported) {
  const Parsed p = ParseText("a \"b {\nc {\n  \"d\"\n}\n");
  // Line 1 is broken (unterminated string); the block of line 2 is still checked.
  EXPECT_EQ(p.diags.ErrorCount(), 2u);
  EXPECT_EQ(p.diags.Sorted()[1].message,
            "expected a key at the start of a statement, found string \"d\"");
  EXPECT_EQ(p.Ast(), "c {}");
}

TEST(ParserErrorTest, NoSuchFile) {
  SourceSet s;
  Diagnostics d;
  const File f = Parse(s, 3, d);
  EXPECT_TRUE(f.statements.empty());
  EXPECT_EQ(RenderAll(s, d),
            "error: internal: no source file with index 3\n"
            "  hint: this is a bug in cagent; please report it\n");
}

TEST(ParserErrorTest, ArbitraryBytesNeverCrash) {
  const std::string pieces[] = {"a",    " ",  "\n", "\r\n", "\\\n",
                                "{",    "}",  "(",  ")",    "|",
                                ";",    "\"", "\\", "#",    std::string(1, '\0'),
                                "\xff", "\r"};
  // Every sequence of three pieces.
  for (const std::string& x : pieces) {
    for (const std::string& y : pieces) {
      for (const std::string& z : pieces) {
        std::string text = x;
        text += y;
        text += z;
        const Parsed p = ParseText(text);
        (void)p.Rendered();
      }
    }
  }
}

}  // namespace
}  // namespace cagent::policy
