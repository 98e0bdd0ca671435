#include "policy/match/glob.h"

#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"

namespace cagent::policy {
namespace {

struct MatchCase {
  std::string_view pattern;
  std::string_view subject;
  bool match;
};

std::ostream& operator<<(std::ostream& os, const MatchCase& c) {
  return os << "'" << c.pattern << "' vs '" << c.subject << "' -> " << c.match;
}

// ---- WordGlob ----

class WordGlobMatchTest : public testing::TestWithParam<MatchCase> {};

TEST_P(WordGlobMatchTest, Matches) {
  const MatchCase& c = GetParam();
  Result<WordGlob> glob = WordGlob::Compile(c.pattern);
  ASSERT_TRUE(glob.ok()) << glob.error().Message();
  EXPECT_EQ(glob->Match(c.subject), c.match);
}

INSTANTIATE_TEST_SUITE_P(
    Table, WordGlobMatchTest,
    testing::Values(
        // literals
        MatchCase{"", "", true}, MatchCase{"", "a", false}, MatchCase{"git", "git", true},
        MatchCase{"git", "gi", false}, MatchCase{"git", "gitk", false},
        MatchCase{"git", "GIT", false},
        // '*'
        MatchCase{"*", "", true}, MatchCase{"*", "anything/at/all", true},
        MatchCase{"--force*", "--force-with-lease", true}, MatchCase{"--force*", "--forc", false},
        MatchCase{"*.c", "a.c", true}, MatchCase{"*.c", ".c", true}, MatchCase{"*.c", "a.h", false},
        MatchCase{"*.c", "dir/a.c", true},  // '*' crosses '/' in a word glob
        MatchCase{"a*b*c", "abc", true}, MatchCase{"a*b*c", "aXbYc", true},
        MatchCase{"a*b*c", "aXbYcZ", false}, MatchCase{"a*b*c", "acb", false},
        MatchCase{"a**b", "ab", true}, MatchCase{"*a", "aaa", true}, MatchCase{"*ab", "aab", true},
        MatchCase{"*aab", "aaab", true}, MatchCase{"a*", "a", true}, MatchCase{"**", "", true},
        // '?'
        MatchCase{"?", "a", true}, MatchCase{"?", "", false}, MatchCase{"?", "ab", false},
        MatchCase{"?", "/", true}, MatchCase{"a?c", "abc", true}, MatchCase{"a?c", "ac", false},
        MatchCase{"*?", "", false}, MatchCase{"*?", "x", true}, MatchCase{"?*?", "xy", true},
        // sets
        MatchCase{"[abc]", "b", true}, MatchCase{"[abc]", "d", false},
        MatchCase{"[a-z]x", "qx", true}, MatchCase{"[a-z]x", "Qx", false},
        MatchCase{"[!a-z]", "Q", true}, MatchCase{"[!a-z]", "q", false},
        MatchCase{"[^a-z]", "Q", true}, MatchCase{"[^a-z]", "q", false},
        MatchCase{"[]]", "]", true}, MatchCase{"[]a]", "a", true}, MatchCase{"[!]]", "]", false},
        MatchCase{"[!]]", "x", true}, MatchCase{"[a-]", "-", true}, MatchCase{"[-a]", "-", true},
        MatchCase{"[a\\-z]", "-", true}, MatchCase{"[a\\-z]", "m", false},
        MatchCase{"[\\]]", "]", true}, MatchCase{"[[]", "[", true},
        MatchCase{"[[:digit:]]", "7", true}, MatchCase{"[[:digit:]]", "x", false},
        MatchCase{"[[:alpha:]_]*", "_x1", true}, MatchCase{"[![:space:]]", " ", false},
        MatchCase{"[[:upper:][:digit:]]", "Q", true}, MatchCase{"[[:xdigit:]]", "F", true},
        MatchCase{"[[:lower:]]", "F", false}, MatchCase{"[[:punct:]]", "!", true},
        MatchCase{"[[:alnum:]]", "-", false}, MatchCase{"[[:blank:]]", "\t", true},
        MatchCase{"[[:cntrl:]]", "\x01", true}, MatchCase{"[[:graph:]]", " ", false},
        MatchCase{"[[:print:]]", " ", true},
        MatchCase{"[[:x]", "[", true},          // no ":]": '[' is an ordinary member
        MatchCase{"[\xc3\xa9]", "\xc3", true},  // bytes, not characters
        // escapes
        MatchCase{"\\*", "*", true}, MatchCase{"\\*", "x", false}, MatchCase{"a\\?", "a?", true},
        MatchCase{"a\\?", "ab", false}, MatchCase{"\\[x]", "[x]", true},
        MatchCase{"\\\\", "\\", true}, MatchCase{"\\a", "a", true}, MatchCase{"*\\*", "abc*", true},
        MatchCase{"*\\*", "abc", false},
        // bytes beyond ASCII
        MatchCase{"caf\xc3\xa9", "caf\xc3\xa9", true}, MatchCase{"caf?", "caf\xc3\xa9", false},
        MatchCase{"caf??", "caf\xc3\xa9", true}));

TEST(WordGlobTest, LiteralDetection) {
  EXPECT_TRUE(WordGlob::Compile("git")->IsLiteral());
  EXPECT_TRUE(WordGlob::Compile("")->IsLiteral());
  EXPECT_TRUE(WordGlob::Compile("a\\*b")->IsLiteral());
  EXPECT_TRUE(WordGlob::Compile("a\\*b")->Match("a*b"));
  EXPECT_FALSE(WordGlob::Compile("a\\*b")->Match("axb"));
  EXPECT_FALSE(WordGlob::Compile("a*")->IsLiteral());
  EXPECT_FALSE(WordGlob::Compile("a?")->IsLiteral());
  EXPECT_FALSE(WordGlob::Compile("[a]")->IsLiteral());
  EXPECT_EQ(WordGlob::Compile("a\\*b")->pattern(), "a\\*b");
}

struct ErrorCase {
  std::string_view pattern;
  std::string_view message;
};

std::ostream& operator<<(std::ostream& os, const ErrorCase& c) {
  return os << "'" << c.pattern << "'";
}

class WordGlobErrorTest : public testing::TestWithParam<ErrorCase> {};

TEST_P(WordGlobErrorTest, Fails) {
  Result<WordGlob> glob = WordGlob::Compile(GetParam().pattern);
  ASSERT_FALSE(glob.ok());
  EXPECT_EQ(glob.error().Message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Table, WordGlobErrorTest,
    testing::Values(
        ErrorCase{"a[bc",
                  "unterminated '[' in glob: 'a[bc' opens a set at offset 1 without a "
                  "closing ']'; write '\\[' to match a literal '['"},
        ErrorCase{"[",
                  "unterminated '[' in glob: '[' opens a set at offset 0 without a closing "
                  "']'; write '\\[' to match a literal '['"},
        ErrorCase{"[]",
                  "unterminated '[' in glob: '[]' opens a set at offset 0 without a "
                  "closing ']'; write '\\[' to match a literal '['"},
        ErrorCase{"x[!]",
                  "unterminated '[' in glob: 'x[!]' opens a set at offset 1 without a "
                  "closing ']'; write '\\[' to match a literal '['"},
        ErrorCase{"[a\\",
                  "unterminated '[' in glob: '[a\\' opens a set at offset 0 without a "
                  "closing ']'; write '\\[' to match a literal '['"},
        ErrorCase{"[a-",
                  "unterminated '[' in glob: '[a-' opens a set at offset 0 without a "
                  "closing ']'; write '\\[' to match a literal '['"},
        ErrorCase{"[[:alpha:]",
                  "unterminated '[' in glob: '[[:alpha:]' opens a set at offset 0 "
                  "without a closing ']'; write '\\[' to match a literal '['"},
        ErrorCase{"abc\\",
                  "trailing '\\' in glob: 'abc\\' ends with an escape; write '\\\\' to "
                  "match a literal backslash"},
        ErrorCase{"\\",
                  "trailing '\\' in glob: '\\' ends with an escape; write '\\\\' to match a "
                  "literal backslash"},
        ErrorCase{"[z-a]",
                  "empty range 'z-a' in glob: in '[z-a]': write the lower bound first "
                  "(as in 'a-z'), or write '\\-' for a literal '-'"},
        ErrorCase{"[[:word:]]",
                  "unknown character class '[:word:]' in glob: in '[[:word:]]'; "
                  "use alnum, alpha, blank, cntrl, digit, graph, lower, print, "
                  "punct, space, upper or xdigit"}));

TEST(WordGlobTest, ErrorsPutTheProblemInOpAndTheHintInDetail) {
  Result<WordGlob> glob = WordGlob::Compile("a[b");
  ASSERT_FALSE(glob.ok());
  EXPECT_EQ(glob.error().op, "unterminated '[' in glob");
  EXPECT_EQ(glob.error().err, 0);
  EXPECT_FALSE(glob.error().detail.empty());
}

TEST(WordGlobTest, PathologicalPatternsFinish) {
  // Exponential backtracking would take ages on these; the iterative matcher is O(n*m).
  const std::string stars(50, '*');
  const std::string long_subject(100'000, 'a');
  EXPECT_FALSE(WordGlob::Compile(stars + "b")->Match(long_subject));
  EXPECT_TRUE(WordGlob::Compile(stars)->Match(long_subject));
  std::string alternating;
  for (int k = 0; k < 50; ++k) alternating += "a*";
  EXPECT_FALSE(WordGlob::Compile(alternating + "b")->Match(std::string(5'000, 'a')));
  EXPECT_TRUE(WordGlob::Compile(alternating)->Match(std::string(5'000, 'a')));
  std::string questions;
  for (int k = 0; k < 50; ++k) questions += "*?";
  EXPECT_FALSE(WordGlob::Compile(questions + "b")->Match(std::string(5'000, 'a')));
  EXPECT_FALSE(WordGlob::Compile(questions)->Match(std::string(49, 'a')));
  EXPECT_TRUE(WordGlob::Compile(questions)->Match(std::string(50, 'a')));
}

// ---- PathGlob ----

class PathGlobMatchTest : public testing::TestWithParam<MatchCase> {};

TEST_P(PathGlobMatchTest, Matches) {
  const MatchCase& c = GetParam();
  Result<PathGlob> glob = PathGlob::Compile(c.pattern);
  ASSERT_TRUE(glob.ok()) << glob.error().Message();
  EXPECT_EQ(glob->Match(c.subject), c.match);
}

INSTANTIATE_TEST_SUITE_P(
    Table, PathGlobMatchTest,
    testing::Values(
        // literals
        MatchCase{"src/main.c", "src/main.c", true}, MatchCase{"src/main.c", "src/main.h", false},
        MatchCase{"src/main.c", "src", false}, MatchCase{"src", "src/main.c", false},
        MatchCase{"src/", "src", true},  // a trailing '/' in the pattern is dropped
        MatchCase{"src", "src/", true},  // and ignored in the path
        MatchCase{"a/b", "a//b", true},  // runs of '/' in the path count as one
        MatchCase{"a\\*b", "a*b", true}, MatchCase{"a\\*b", "axb", false},
        // '*', '?' and sets stay within one component
        MatchCase{"src/*.c", "src/main.c", true}, MatchCase{"src/*.c", "src/a/main.c", false},
        MatchCase{"src/*", "src", false}, MatchCase{"src/*", "src/x", true},
        MatchCase{"*", "a", true}, MatchCase{"*", "a/b", false}, MatchCase{"*", "", false},
        MatchCase{"*/b", "a/b", true}, MatchCase{"*/b", "b", false}, MatchCase{"a/?", "a/x", true},
        MatchCase{"a/?", "a/xy", false}, MatchCase{"a?b", "a/b", false},
        MatchCase{"[ab]/x", "b/x", true}, MatchCase{"[!a]", "b", true},
        MatchCase{"*", ".hidden", true},
        // '**'
        MatchCase{"**", "", true}, MatchCase{"**", "a", true}, MatchCase{"**", "a/b/c", true},
        MatchCase{"a/**", "a", true}, MatchCase{"a/**", "a/b", true},
        MatchCase{"a/**", "a/b/c/d", true}, MatchCase{"a/**", "ab", false},
        MatchCase{"a/**", "b/a", false}, MatchCase{"**/x", "x", true},
        MatchCase{"**/x", "a/x", true}, MatchCase{"**/x", "a/b/c/x", true},
        MatchCase{"**/x", "a/b/c/xy", false}, MatchCase{"**/x", "x/a", false},
        MatchCase{"a/**/b", "a/b", true}, MatchCase{"a/**/b", "a/x/b", true},
        MatchCase{"a/**/b", "a/x/y/z/b", true}, MatchCase{"a/**/b", "a/x/y/z/c", false},
        MatchCase{"a/**/b", "a/b/c", false}, MatchCase{"a/**/b", "a/b/b", true},
        MatchCase{"a/**/b/**/c", "a/b/c", true}, MatchCase{"a/**/b/**/c", "a/x/b/y/c", true},
        MatchCase{"a/**/b/**/c", "a/x/c/y/b", false}, MatchCase{"**/*.c", "a/b/c.c", true},
        MatchCase{"**/*.c", "c.c", true}, MatchCase{"**/*.c", "a/b/c.h", false},
        MatchCase{"**/.git/**", ".git", true}, MatchCase{"**/.git/**", "x/.git/config", true},
        MatchCase{"**/.git/**", "x/.gitignore", false}, MatchCase{"**/**", "a/b", true},
        MatchCase{"a/**/**/b", "a/b", true},
        // absolute and relative never mix
        MatchCase{"/etc/*", "/etc/passwd", true}, MatchCase{"/etc/*", "etc/passwd", false},
        MatchCase{"etc/*", "/etc/passwd", false}, MatchCase{"/", "/", true},
        MatchCase{"/", "/x", false}, MatchCase{"/**", "/", true}, MatchCase{"/**", "/a/b", true},
        MatchCase{"/**", "a/b", false}, MatchCase{"**", "/a", false},
        MatchCase{"/home/*/.ssh/**", "/home/u/.ssh/id", true},
        MatchCase{"/home/*/.ssh/**", "/home/u/x/.ssh/id", false}, MatchCase{"/tmp/", "/tmp", true},
        MatchCase{"/tmp", "//tmp", true}));

TEST(PathGlobTest, Properties) {
  Result<PathGlob> abs = PathGlob::Compile("/etc/passwd");
  ASSERT_TRUE(abs.ok());
  EXPECT_TRUE(abs->IsAbsolute());
  EXPECT_TRUE(abs->IsLiteral());
  EXPECT_EQ(abs->pattern(), "/etc/passwd");
  Result<PathGlob> rel = PathGlob::Compile("src/*.c");
  ASSERT_TRUE(rel.ok());
  EXPECT_FALSE(rel->IsAbsolute());
  EXPECT_FALSE(rel->IsLiteral());
  EXPECT_FALSE(PathGlob::Compile("a/**")->IsLiteral());
  EXPECT_TRUE(PathGlob::Compile("a/b\\*")->IsLiteral());
  EXPECT_TRUE(PathGlob::Compile("/")->IsLiteral());
}

TEST(PathGlobTest, LiteralPrefix) {
  struct Case {
    std::string_view pattern;
    std::string_view prefix;
  };
  const Case cases[] = {
      {"src/a/*.c", "src/a"},
      {"**/x", ""},
      {"*", ""},
      {"a/**", "a"},
      {"a/**/b", "a"},
      {"/etc/*.conf", "/etc"},
      {"/*", "/"},
      {"/", "/"},
      {"/**", "/"},
      {"a/b/c", "a/b/c"},
      {"a\\*/b*", "a*"},
      {"src/", "src"},
      {"a/[bc]/d", "a"},
      {"/home/u/.ssh/**", "/home/u/.ssh"},
  };
  for (const Case& c : cases) {
    Result<PathGlob> glob = PathGlob::Compile(c.pattern);
    ASSERT_TRUE(glob.ok()) << c.pattern << ": " << glob.error().Message();
    EXPECT_EQ(glob->LiteralPrefix(), c.prefix) << c.pattern;
  }
}

class PathGlobErrorTest : public testing::TestWithParam<ErrorCase> {};

TEST_P(PathGlobErrorTest, Fails) {
  Result<PathGlob> glob = PathGlob::Compile(GetParam().pattern);
  ASSERT_FALSE(glob.ok());
  EXPECT_EQ(glob.error().Message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Table, PathGlobErrorTest,
    testing::Values(
        ErrorCase{"",
                  "empty glob: a path glob needs at least one component; write '**' to match "
                  "every path"},
        ErrorCase{"a**",
                  "'**' must be a whole path component: in 'a**', 'a**': write 'a/**/b' "
                  "to match any depth, or '*' (as in 'a*') to match within one "
                  "component"},
        ErrorCase{"src/**.c",
                  "'**' must be a whole path component: in 'src/**.c', '**.c': write "
                  "'a/**/b' to match any depth, or '*' (as in 'a*') to match within "
                  "one component"},
        ErrorCase{"/a/***/b",
                  "'**' must be a whole path component: in '/a/***/b', '***': write "
                  "'a/**/b' to match any depth, or '*' (as in 'a*') to match within "
                  "one component"},
        ErrorCase{"a/[b",
                  "unterminated '[' in glob: 'a/[b' opens a set at offset 2 without a "
                  "closing ']'; write '\\[' to match a literal '['"},
        ErrorCase{"a[/]b",
                  "'/' inside '[...]' in a path glob: in 'a[/]b': a set matches one "
                  "character within a component, never '/'"},
        ErrorCase{"a[b/c",
                  "unterminated '[' in glob: 'a[b/c' opens a set at offset 1 without a "
                  "closing ']'; write '\\[' to match a literal '['"},
        ErrorCase{"a//b",
                  "empty path component in glob: in 'a//b': write a single '/' between "
                  "components"},
        ErrorCase{"//a",
                  "empty path component in glob: in '//a': write a single '/' between "
                  "components"},
        ErrorCase{"a//",
                  "empty path component in glob: in 'a//': write a single '/' between "
                  "components"},
        ErrorCase{"a/./b",
                  "'.' is not allowed in a glob: in 'a/./b': globs match normalized "
                  "paths; write the path without '.' components"},
        ErrorCase{".",
                  "'.' is not allowed in a glob: in '.': globs match normalized paths; write "
                  "the path without '.' components"},
        ErrorCase{"a/../b",
                  "'..' is not allowed in a glob: in 'a/../b': globs match normalized "
                  "paths; write the path without '..' components"},
        ErrorCase{"/..",
                  "'..' is not allowed in a glob: in '/..': globs match normalized paths; "
                  "write the path without '..' components"},
        ErrorCase{"a/\\.\\.",
                  "'..' is not allowed in a glob: in 'a/\\.\\.': globs match "
                  "normalized paths; write the path without '..' components"},
        ErrorCase{"a\\",
                  "trailing '\\' in glob: 'a\\' ends with an escape; write '\\\\' to "
                  "match a literal backslash"},
        ErrorCase{"a\\/b",
                  "escaped '/' in a path glob: in 'a\\/b': '/' always separates "
                  "components and cannot be matched literally"},
        ErrorCase{"a/[z-a]",
                  "empty range 'z-a' in glob: in 'a/[z-a]': write the lower bound "
                  "first (as in 'a-z'), or write '\\-' for a literal '-'"}));

TEST(PathGlobTest, StarsInsideSetsAndEscapesAreNotDoubleStar) {
  EXPECT_TRUE(PathGlob::Compile("a\\*\\*").ok());
  EXPECT_TRUE(PathGlob::Compile("a\\**").ok());
  EXPECT_TRUE(PathGlob::Compile("[*]*").ok());
  EXPECT_TRUE(PathGlob::Compile("a\\**")->Match("a*xyz"));
  EXPECT_TRUE(PathGlob::Compile("..x/.y").ok());
}

TEST(PathGlobTest, PathologicalPatternsFinish) {
  std::string deep;
  for (int k = 0; k < 2'000; ++k) deep += "a/";
  deep += "c";
  std::string pattern;
  for (int k = 0; k < 50; ++k) pattern += "**/a/";
  pattern += "b";
  Result<PathGlob> glob = PathGlob::Compile(pattern);
  ASSERT_TRUE(glob.ok());
  EXPECT_FALSE(glob->Match(deep));
  Result<PathGlob> stars = PathGlob::Compile("**/*/b");
  ASSERT_TRUE(stars.ok());
  EXPECT_FALSE(stars->Match(deep));
  // A component of 50 '*' is an error ('**' inside a component), but 50 '*?' is fine.
  std::string comp;
  for (int k = 0; k < 50; ++k) comp += "*?";
  Result<PathGlob> word = PathGlob::Compile("**/" + comp + "b");
  ASSERT_TRUE(word.ok());
  EXPECT_FALSE(word->Match(deep + "/" + std::string(10'000, 'a')));
}

}  // namespace
}  // namespace cagent::policy
