// Glob patterns for paths and for single words (argv elements, environment variable names).
//
// Path globs (PathGlob) match a whole '/'-separated path:
//   *      any run of characters within one component (not '/'), including empty
//   ?      one character other than '/'
//   [abc] [a-z] [!abc]   one character from (or not from) the set, never '/'
//   **     as a whole component: zero or more components. "a/**" matches "a" itself and
//          everything below it; "**/x" matches "x" at any depth; "a/**/b" matches "a/b", "a/x/b"...
//   \c     the character c literally
// A '**' that is not a whole component ("a**") is an error. Leading '/' means absolute; the path
// given to Match() must then be absolute too. Matching is on bytes, case-sensitive, and never
// touches the filesystem. Match() runs in O(pattern * path) time without recursion blow-up.
//
// Word globs (WordGlob) match one string with *, ?, [...] and \c, where '*' may match '/'.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace cagent::policy {

class WordGlob {
 public:
  // Fails on an unterminated '[' or a trailing lone '\'.
  static Result<WordGlob> Compile(std::string_view pattern);
  [[nodiscard]] bool Match(std::string_view word) const;
  // True if the pattern has no wildcard at all (then Match is string equality).
  [[nodiscard]] bool IsLiteral() const { return literal_; }
  // Whether every word the pattern matches contains the byte `c` (it is one of the pattern's
  // literal characters, outside any [...] set).
  [[nodiscard]] bool RequiresByte(unsigned char c) const;
  [[nodiscard]] const std::string& pattern() const { return pattern_; }

 private:
  // The compiled pattern: Match() walks these without parsing or allocating.
  enum class Op : std::uint8_t { kChar, kAny, kStar, kSet };
  struct Token {
    Op op = Op::kChar;
    unsigned char ch = 0;   // kChar: the byte
    std::uint32_t set = 0;  // kSet: index into sets_
  };

  std::string pattern_;
  bool literal_ = true;
  std::string unescaped_;               // the literal text when literal_
  std::vector<Token> tokens_;           // consecutive '*' folded into one kStar
  std::vector<std::bitset<256>> sets_;  // negation already applied
  std::size_t min_length_ = 0;          // number of non-star tokens
  bool has_star_ = false;
};

class PathGlob {
 public:
  // Fails on: empty pattern, "**" inside a component, unterminated '[', empty components ("a//b"),
  // "." or ".." components, a trailing '\'. A trailing '/' is dropped.
  static Result<PathGlob> Compile(std::string_view pattern);
  [[nodiscard]] bool Match(std::string_view path) const;
  [[nodiscard]] bool IsAbsolute() const { return absolute_; }
  // True if the pattern has no wildcard (then it names exactly one path).
  [[nodiscard]] bool IsLiteral() const { return literal_; }
  [[nodiscard]] const std::string& pattern() const { return pattern_; }
  // The longest wildcard-free leading directory ("src/a/*.c" -> "src/a", "**/x" -> ""), used to
  // limit a filesystem walk to where matches can be.
  [[nodiscard]] std::string LiteralPrefix() const;

 private:
  struct Component {
    bool any_depth = false;  // "**"
    WordGlob glob;           // otherwise; '*' here never sees a '/' because paths are split first
    std::string literal;     // the unescaped text when glob.IsLiteral()
  };
  [[nodiscard]] bool MatchSuffix(std::string_view path) const;

  std::string pattern_;
  bool absolute_ = false;
  bool literal_ = true;
  // The pattern is "**/c1/.../ck" (k >= 1) with no other '**': it matches exactly the paths whose
  // last k components match c1..ck, which MatchSuffix checks from the end of the path instead of
  // letting the '**' try every depth.
  bool suffix_only_ = false;
  std::vector<Component> components_;
};

}  // namespace cagent::policy
