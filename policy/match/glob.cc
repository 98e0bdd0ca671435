#include "policy/match/glob.h"

#include <algorithm>
#include <array>
#include <bitset>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace cagent::policy {
namespace {

constexpr std::size_t kNpos = std::string_view::npos;

std::string Quoted(std::string_view s) {
  std::string out = "'";
  out += s;
  out += '\'';
  return out;
}

Error UnterminatedSet(std::string_view pattern, std::size_t open) {
  return PlainError("unterminated '[' in glob",
                    Quoted(pattern) + " opens a set at offset " + std::to_string(open) +
                        " without a closing ']'; write '\\[' to match a literal '['");
}

Error TrailingBackslash(std::string_view pattern) {
  return PlainError(
      "trailing '\\' in glob",
      Quoted(pattern) + " ends with an escape; write '\\\\' to match a literal backslash");
}

// The POSIX character classes, ASCII only (matching is on bytes, never locale-dependent).
bool AddClass(std::string_view name, std::bitset<256>& bits) {
  struct Class {
    std::string_view name;
    bool (*test)(int c);
  };
  static constexpr std::array<Class, 12> kClasses = {{
      {"alnum",
       [](int c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }},
      {"alpha", [](int c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }},
      {"blank", [](int c) { return c == ' ' || c == '\t'; }},
      {"cntrl", [](int c) { return c < 0x20 || c == 0x7f; }},
      {"digit", [](int c) { return c >= '0' && c <= '9'; }},
      {"graph", [](int c) { return c > 0x20 && c < 0x7f; }},
      {"lower", [](int c) { return c >= 'a' && c <= 'z'; }},
      {"print", [](int c) { return c >= 0x20 && c < 0x7f; }},
      {"punct",
       [](int c) {
         return c > 0x20 && c < 0x7f && !(c >= '0' && c <= '9') &&
                !((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
       }},
      {"space", [](int c) { return c == ' ' || (c >= '\t' && c <= '\r'); }},
      {"upper", [](int c) { return c >= 'A' && c <= 'Z'; }},
      {"xdigit",
       [](int c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }},
  }};
  for (const Class& cls : kClasses) {
    if (cls.name != name) continue;
    for (int c = 0; c < 0x80; ++c) {
      if (cls.test(c)) bits.set(static_cast<std::size_t>(c));
    }
    return true;
  }
  return false;
}

struct ParsedSet {
  std::bitset<256> bits;   // negation applied
  std::size_t end = 0;     // index of the closing ']'
  bool has_slash = false;  // '/' is written inside (an error in path globs)
};

// set := '[' ['!' | '^'] [']'] member* ']'
// member := '[:' class ':]' | char ['-' char]      char := '\' any | any byte
// `open` is the index of the '['. A ']' right after '[' or '[!' is a member, not the end.
Result<ParsedSet> ParseSet(std::string_view pattern, std::size_t open) {
  ParsedSet set;
  std::size_t i = open + 1;
  bool negate = false;
  if (i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^')) {
    negate = true;
    ++i;
  }
  bool first = true;
  // Reads one (possibly escaped) member byte at i; false at the end of the pattern.
  auto read_char = [&](std::size_t& pos, unsigned char& out) {
    if (pos >= pattern.size()) return false;
    if (pattern[pos] == '\\') {
      if (pos + 1 >= pattern.size()) return false;
      ++pos;
    }
    out = static_cast<unsigned char>(pattern[pos]);
    ++pos;
    return true;
  };
  while (true) {
    if (i >= pattern.size()) return UnterminatedSet(pattern, open);
    if (pattern[i] == ']' && !first) break;
    first = false;
    if (pattern[i] == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      std::size_t close = pattern.find(":]", i + 2);
      if (close != kNpos) {
        std::string_view name = pattern.substr(i + 2, close - (i + 2));
        if (!AddClass(name, set.bits)) {
          return PlainError("unknown character class '[:" + std::string(name) + ":]' in glob",
                            "in " + Quoted(pattern) +
                                "; use alnum, alpha, blank, cntrl, digit, graph, lower, print, "
                                "punct, space, upper or xdigit");
        }
        i = close + 2;
        continue;
      }
    }
    unsigned char lo = 0;
    std::size_t start = i;
    if (!read_char(i, lo)) return UnterminatedSet(pattern, open);
    unsigned char hi = lo;
    if (i + 1 < pattern.size() && pattern[i] == '-' && pattern[i + 1] != ']') {
      std::size_t range_pos = i + 1;
      if (!read_char(range_pos, hi)) return UnterminatedSet(pattern, open);
      if (hi < lo) {
        std::string range(pattern.substr(start, range_pos - start));
        return PlainError("empty range '" + range + "' in glob",
                          "in " + Quoted(pattern) +
                              ": write the lower bound first (as in 'a-z'), or write '\\-' for a "
                              "literal '-'");
      }
      i = range_pos;
    }
    for (unsigned c = lo; c <= hi; ++c) set.bits.set(c);
    if (lo == '/' || hi == '/') set.has_slash = true;
  }
  if (negate) set.bits.flip();
  set.end = i;
  return set;
}

// Yields the next path component at or after `pos` (skipping any run of '/'), and the offset just
// past it. False when only slashes (or nothing) remain.
inline bool NextComponent(std::string_view path, std::size_t pos, std::string_view& comp,
                          std::size_t& next) {
  const std::size_t n = path.size();
  while (pos < n && path[pos] == '/') ++pos;
  if (pos >= n) return false;
  std::size_t end = pos;
  while (end < n && path[end] != '/') ++end;
  comp = path.substr(pos, end - pos);
  next = end;
  return true;
}

// The mirror of NextComponent: the last path component that ends at or before `end` (skipping
// any run of '/' before `end`), and the offset where it starts. False when only slashes (or
// nothing) remain.
inline bool PrevComponent(std::string_view path, std::size_t end, std::string_view& comp,
                          std::size_t& start) {
  while (end > 0 && path[end - 1] == '/') --end;
  if (end == 0) return false;
  std::size_t begin = end;
  while (begin > 0 && path[begin - 1] != '/') --begin;
  comp = path.substr(begin, end - begin);
  start = begin;
  return true;
}

}  // namespace

// word := ( '*' | '?' | set | '\' any | any byte )*
Result<WordGlob> WordGlob::Compile(std::string_view pattern) {
  WordGlob glob;
  glob.pattern_ = std::string(pattern);
  for (std::size_t i = 0; i < pattern.size();) {
    const char c = pattern[i];
    Token token;
    switch (c) {
      case '*':
        ++i;
        glob.literal_ = false;
        glob.has_star_ = true;
        // "**" and longer runs mean the same as "*" here; folding them keeps Match linear in
        // the number of distinct stars.
        if (!glob.tokens_.empty() && glob.tokens_.back().op == Op::kStar) continue;
        token.op = Op::kStar;
        glob.tokens_.push_back(token);
        continue;
      case '?':
        ++i;
        glob.literal_ = false;
        token.op = Op::kAny;
        break;
      case '[': {
        Result<ParsedSet> set = ParseSet(pattern, i);
        if (!set.ok()) return std::move(set.error());
        glob.literal_ = false;
        token.op = Op::kSet;
        token.set = static_cast<std::uint32_t>(glob.sets_.size());
        glob.sets_.push_back(set->bits);
        i = set->end + 1;
        break;
      }
      case '\\':
        if (i + 1 >= pattern.size()) return TrailingBackslash(pattern);
        token.ch = static_cast<unsigned char>(pattern[i + 1]);
        glob.unescaped_ += pattern[i + 1];
        i += 2;
        break;
      default:
        token.ch = static_cast<unsigned char>(c);
        glob.unescaped_ += c;
        ++i;
        break;
    }
    glob.tokens_.push_back(token);
    ++glob.min_length_;
  }
  if (!glob.literal_) glob.unescaped_.clear();
  return glob;
}

// The classic iterative matcher: on a mismatch, return to the last '*' and let it swallow one
// more byte. Only the last star needs remembering (an earlier star can absorb whatever a later
// one would), so this is O(pattern * word) with no recursion and no allocation.
bool WordGlob::RequiresByte(unsigned char c) const {
  if (literal_) return unescaped_.find(static_cast<char>(c)) != std::string::npos;
  return std::any_of(tokens_.begin(), tokens_.end(),
                     [c](const Token& t) { return t.op == Op::kChar && t.ch == c; });
}

bool WordGlob::Match(std::string_view word) const {
  if (literal_) return word == unescaped_;
  const std::size_t n = word.size();
  if (n < min_length_ || (!has_star_ && n != min_length_)) return false;
  const std::size_t m = tokens_.size();
  std::size_t p = 0;
  std::size_t i = 0;
  std::size_t star_p = kNpos;
  std::size_t star_i = 0;
  while (i < n) {
    if (p < m) {
      const Token& t = tokens_[p];
      const auto c = static_cast<unsigned char>(word[i]);
      bool accepts = false;
      switch (t.op) {
        case Op::kStar:
          star_p = p++;
          star_i = i;
          continue;
        case Op::kChar:
          accepts = c == t.ch;
          break;
        case Op::kAny:
          accepts = true;
          break;
        case Op::kSet:
          accepts = sets_[t.set].test(c);
          break;
      }
      if (accepts) {
        ++p;
        ++i;
        continue;
      }
    }
    if (star_p == kNpos) return false;
    p = star_p + 1;
    i = ++star_i;
  }
  while (p < m && tokens_[p].op == Op::kStar) ++p;
  return p == m;
}

// path := ['/'] component ('/' component)* ['/']
// component := '**' | word (without '/', and without '**' inside)
Result<PathGlob> PathGlob::Compile(std::string_view pattern) {
  if (pattern.empty()) {
    return PlainError("empty glob",
                      "a path glob needs at least one component; write '**' to match every path");
  }
  PathGlob glob;
  glob.pattern_ = std::string(pattern);
  std::size_t start = 0;
  if (pattern.front() == '/') {
    glob.absolute_ = true;
    start = 1;
  }

  // Split at every '/' outside a set and not escaped, validating sets and escapes against the
  // whole pattern so that offsets in messages refer to what the user wrote.
  std::vector<std::string_view> parts;
  if (start < pattern.size()) {
    std::size_t begin = start;
    for (std::size_t i = start; i <= pattern.size();) {
      if (i == pattern.size() || pattern[i] == '/') {
        parts.push_back(pattern.substr(begin, i - begin));
        begin = ++i;
        continue;
      }
      if (pattern[i] == '\\') {
        if (i + 1 >= pattern.size()) return TrailingBackslash(pattern);
        if (pattern[i + 1] == '/') {
          return PlainError("escaped '/' in a path glob",
                            "in " + Quoted(pattern) +
                                ": '/' always separates components and cannot be matched "
                                "literally");
        }
        i += 2;
        continue;
      }
      if (pattern[i] == '[') {
        Result<ParsedSet> set = ParseSet(pattern, i);
        if (!set.ok()) return std::move(set.error());
        if (set->has_slash) {
          return PlainError("'/' inside '[...]' in a path glob",
                            "in " + Quoted(pattern) +
                                ": a set matches one character within a component, never '/'");
        }
        i = set->end + 1;
        continue;
      }
      ++i;
    }
    // "dir/" names the directory: drop one trailing '/'.
    if (parts.size() > 1 && parts.back().empty()) parts.pop_back();
  }

  for (std::string_view part : parts) {
    if (part.empty()) {
      return PlainError("empty path component in glob",
                        "in " + Quoted(pattern) + ": write a single '/' between components");
    }
    Component comp;
    if (part == "**") {
      comp.any_depth = true;
      glob.literal_ = false;
      // "**/**" means the same as "**".
      if (!glob.components_.empty() && glob.components_.back().any_depth) continue;
      glob.components_.push_back(std::move(comp));
      continue;
    }
    for (std::size_t i = 0; i + 1 < part.size(); ++i) {
      if (part[i] == '\\') {
        ++i;
      } else if (part[i] == '[') {
        i = ParseSet(part, i)->end;  // validated above
      } else if (part[i] == '*' && part[i + 1] == '*') {
        return PlainError("'**' must be a whole path component",
                          "in " + Quoted(pattern) + ", " + Quoted(part) +
                              ": write 'a/**/b' to match any depth, or '*' (as in 'a*') to "
                              "match within one component");
      }
    }
    Result<WordGlob> word = WordGlob::Compile(part);
    if (!word.ok()) return std::move(word.error());
    comp.glob = std::move(word.value());
    if (comp.glob.IsLiteral()) {
      // Reconstruct the unescaped text (the WordGlob keeps it private).
      for (std::size_t i = 0; i < part.size(); ++i) {
        if (part[i] == '\\') ++i;
        comp.literal += part[i];
      }
      if (comp.literal == "." || comp.literal == "..") {
        return PlainError("'" + comp.literal + "' is not allowed in a glob",
                          "in " + Quoted(pattern) +
                              ": globs match normalized paths; write the path without '" +
                              comp.literal + "' components");
      }
    } else {
      glob.literal_ = false;
    }
    glob.components_.push_back(std::move(comp));
  }
  glob.suffix_only_ = glob.components_.size() > 1 && glob.components_.front().any_depth &&
                      std::none_of(glob.components_.begin() + 1, glob.components_.end(),
                                   [](const Component& c) { return c.any_depth; });
  return glob;
}

// The path is split lazily (no allocation). Runs of '/' count as one separator and a trailing
// '/' is ignored; "." and ".." are ordinary names here, so callers pass normalized paths.
// '**' is handled like '*' in WordGlob::Match, one level up: every other component matches
// exactly one path component, so remembering only the last '**' is enough and the walk is
// O(components * path components) component matches.
bool PathGlob::Match(std::string_view path) const {
  const bool path_absolute = !path.empty() && path.front() == '/';
  if (path_absolute != absolute_) return false;
  if (suffix_only_) return MatchSuffix(path);
  const std::size_t m = components_.size();
  std::size_t p = 0;
  std::size_t pos = 0;
  std::size_t star_p = kNpos;
  std::size_t star_pos = 0;
  std::string_view comp;
  std::size_t next = 0;
  while (NextComponent(path, pos, comp, next)) {
    if (p < m) {
      const Component& c = components_[p];
      if (c.any_depth) {
        star_p = p++;
        star_pos = pos;
        continue;
      }
      if (c.glob.Match(comp)) {
        ++p;
        pos = next;
        continue;
      }
    }
    if (star_p == kNpos) return false;
    p = star_p + 1;
    // Let the '**' swallow one more component.
    NextComponent(path, star_pos, comp, star_pos);
    pos = star_pos;
  }
  while (p < m && components_[p].any_depth) ++p;
  return p == m;
}

// "**/c1/.../ck": the '**' takes all but the last k components (possibly none), so compare those
// k, from the last one back. O(k) component matches.
bool PathGlob::MatchSuffix(std::string_view path) const {
  std::size_t end = path.size();
  std::string_view comp;
  for (std::size_t p = components_.size() - 1; p >= 1; --p) {
    if (!PrevComponent(path, end, comp, end)) return false;
    if (!components_[p].glob.Match(comp)) return false;
  }
  return true;
}

std::string PathGlob::LiteralPrefix() const {
  std::string out = absolute_ ? "/" : "";
  for (const Component& c : components_) {
    if (c.any_depth || !c.glob.IsLiteral()) break;
    if (!out.empty() && out.back() != '/') out += '/';
    out += c.literal;
  }
  return out;
}

}  // namespace cagent::policy
