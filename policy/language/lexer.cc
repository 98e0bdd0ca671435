#include "policy/language/lexer.h"

#include <cstdio>
#include <string_view>
#include <utility>

namespace cagent::policy {
namespace {

// Control bytes other than tab. '\n' and '\r' are included: callers check for a newline first.
bool IsControl(unsigned char c) { return c < 0x20 && c != '\t'; }

// True for bytes that may continue a WORD (lexer.h): everything but whitespace, newlines, the
// punctuation, '"' and control bytes. '#' is allowed: it starts a comment only at token start.
bool IsWordByte(unsigned char c) {
  switch (c) {
    case ' ':
    case '\t':
    case '"':
    case '{':
    case '}':
    case '(':
    case ')':
    case '|':
    case ';':
      return false;
    default:
      return !IsControl(c);
  }
}

std::string Hex2(unsigned char c) {
  char buf[8];
  (void)std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned>(c));
  return buf;
}

// Length of the newline at `pos` ("\n" is 1, "\r\n" is 2), or 0 if there is none.
std::size_t NewlineLengthAt(std::string_view s, std::size_t pos) {
  if (pos < s.size() && s[pos] == '\n') return 1;
  if (pos + 1 < s.size() && s[pos] == '\r' && s[pos + 1] == '\n') return 2;
  return 0;
}

}  // namespace

Lexer::Lexer(const SourceFile& file, std::uint32_t file_index, Diagnostics& diags)
    : file_(file), index_(file_index), diags_(diags) {}

Token Lexer::Next() {
  const std::string_view s(file_.text);
  auto here = [&](std::size_t pos) {
    return Location{index_, line_, static_cast<std::uint32_t>(pos - line_start_ + 1)};
  };
  auto make = [&](TokenKind kind, std::size_t start, std::string text = {}) {
    return Token{kind, std::move(text), here(start), static_cast<std::uint32_t>(pos_ - start)};
  };
  auto start_line = [&](std::size_t next_line_start) {
    ++line_;
    line_start_ = next_line_start;
  };
  // Reports a run of control bytes starting at pos_ (one diagnostic for the run, naming its first
  // byte) and moves past it. Stops before a newline.
  auto control_run = [&]() {
    const std::size_t start = pos_;
    while (pos_ < s.size() && IsControl(static_cast<unsigned char>(s[pos_])) &&
           NewlineLengthAt(s, pos_) == 0) {
      ++pos_;
    }
    diags_.Error(here(start), static_cast<std::uint32_t>(pos_ - start),
                 "control character " + Hex2(static_cast<unsigned char>(s[start])) + " in profile",
                 "remove it; profiles must be plain text");
    return start;
  };

  // Skip blanks, line continuations and comments.
  for (;;) {
    while (pos_ < s.size() && (s[pos_] == ' ' || s[pos_] == '\t')) ++pos_;
    if (pos_ >= s.size()) return make(TokenKind::kEof, pos_);
    if (s[pos_] == '\\') {
      // A backslash immediately before a newline joins the lines; it separates tokens like a
      // blank does ("a \<newline> b" is two words).
      const std::size_t newline = NewlineLengthAt(s, pos_ + 1);
      if (newline != 0) {
        pos_ += 1 + newline;
        start_line(pos_);
        continue;
      }
    }
    if (s[pos_] == '#') {
      // A comment runs to the end of the line; the newline is a token. Control bytes are an error
      // here too (docs/policy-language.md): a comment must not hide binary content or terminal
      // escapes. They are reported without a token, since the comment produces none.
      while (pos_ < s.size() && NewlineLengthAt(s, pos_) == 0) {
        if (IsControl(static_cast<unsigned char>(s[pos_]))) {
          control_run();
        } else {
          ++pos_;
        }
      }
      continue;
    }
    break;
  }

  const std::size_t start = pos_;
  const auto c = static_cast<unsigned char>(s[pos_]);
  if (const std::size_t newline = NewlineLengthAt(s, pos_); newline != 0) {
    pos_ += newline;
    Token t = make(TokenKind::kNewline, start);
    start_line(pos_);
    return t;
  }
  switch (c) {
    case '{':
      ++pos_;
      return make(TokenKind::kLBrace, start);
    case '}':
      ++pos_;
      return make(TokenKind::kRBrace, start);
    case '(':
      ++pos_;
      return make(TokenKind::kLParen, start);
    case ')':
      ++pos_;
      return make(TokenKind::kRParen, start);
    case '|':
      ++pos_;
      return make(TokenKind::kPipe, start);
    case ';':
      ++pos_;
      return make(TokenKind::kSemicolon, start);
    default:
      break;
  }
  if (IsControl(c)) {
    control_run();
    return make(TokenKind::kError, start);
  }

  if (c == '"') {
    // STRING: '"' ... '"' on one line. On an error the string is still scanned to its end (or to
    // the end of the line) so that scanning resumes after it, and a kError token stands for it.
    ++pos_;
    std::string text;
    bool bad = false;
    for (;;) {
      if (pos_ >= s.size() || NewlineLengthAt(s, pos_) != 0) {
        // Do not consume the newline: it still ends the statement.
        diags_.Error(here(start), static_cast<std::uint32_t>(pos_ - start), "unterminated string",
                     "close it with '\"' on the same line");
        return make(TokenKind::kError, start);
      }
      const auto b = static_cast<unsigned char>(s[pos_]);
      if (b == '"') {
        ++pos_;
        break;
      }
      if (b == '\\') {
        if (pos_ + 1 >= s.size() || NewlineLengthAt(s, pos_ + 1) != 0) {
          // No line continuation inside a string: the next iteration reports it unterminated.
          ++pos_;
          continue;
        }
        const auto e = static_cast<unsigned char>(s[pos_ + 1]);
        char resolved = 0;
        switch (e) {
          case '"':
            resolved = '"';
            break;
          case '\\':
            resolved = '\\';
            break;
          case 'n':
            resolved = '\n';
            break;
          case 't':
            resolved = '\t';
            break;
          default:
            break;
        }
        if (resolved != 0) {
          text += resolved;
          pos_ += 2;
          continue;
        }
        if (IsControl(e)) {
          // "\<control>": the control byte is the bigger problem; report that one.
          ++pos_;
          continue;
        }
        // Show the whole UTF-8 sequence after the backslash, never a lone byte of it.
        std::size_t seq = 1;
        if (e >= 0x80) {
          while (seq < 4 && pos_ + 1 + seq < s.size() &&
                 (static_cast<unsigned char>(s[pos_ + 1 + seq]) & 0xC0) == 0x80) {
            ++seq;
          }
        }
        std::string shown = e == 0x7F ? "\\" : "\\" + std::string(s.substr(pos_ + 1, seq));
        std::string message = e == 0x7F ? "unknown escape '\\' followed by byte 0x7f in string"
                                        : "unknown escape '" + shown + "' in string";
        diags_.Error(here(pos_), static_cast<std::uint32_t>(1 + seq), std::move(message),
                     "valid escapes are \\\" \\\\ \\n \\t");
        bad = true;
        pos_ += 1 + seq;
        continue;
      }
      if (IsControl(b)) {
        control_run();
        bad = true;
        continue;
      }
      text += static_cast<char>(b);
      ++pos_;
    }
    if (bad) return make(TokenKind::kError, start);
    return make(TokenKind::kString, start, std::move(text));
  }

  // WORD. The first byte is a word byte (everything else was handled above).
  while (pos_ < s.size() && IsWordByte(static_cast<unsigned char>(s[pos_]))) {
    if (s[pos_] == '\\' && NewlineLengthAt(s, pos_ + 1) != 0) break;  // continuation ends it
    ++pos_;
  }
  return make(TokenKind::kWord, start, std::string(s.substr(start, pos_ - start)));
}

}  // namespace cagent::policy
