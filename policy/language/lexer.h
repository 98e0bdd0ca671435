// Lexer for the policy language: a hand-written scanner over one SourceFile.
//
// Tokens: WORD, STRING, '{', '}', '(', ')', '|', ';', NEWLINE, EOF, and ERROR (reported as a
// diagnostic, scanning continues). Rules:
//   - whitespace is space and tab; "\r\n" counts as a newline; a backslash immediately before a
//     newline joins the lines (no NEWLINE token).
//   - '#' starts a comment to the end of the line only at the start of a token ("a#b" is a word).
//   - WORD: a run of bytes that are not whitespace, newline, '"', '{', '}', '(', ')', '|', ';', '#'
//     at token start. Any other byte (including UTF-8 and '*', '?', '[', ']', '~', '=', ',', '/')
//     is part of a word. NUL and other control bytes (< 0x20 except tab) are an error.
//   - STRING: '"' ... '"' on one line; escapes \" \\ \n \t; any other escape is an error, as is a
//     newline or EOF before the closing quote ("unterminated string").
#pragma once

#include <cstdint>
#include <string>

#include "policy/language/diagnostics.h"
#include "policy/language/source.h"

namespace cagent::policy {

enum class TokenKind : std::uint8_t {
  kWord,
  kString,
  kLBrace,
  kRBrace,
  kLParen,
  kRParen,
  kPipe,
  kSemicolon,
  kNewline,
  kEof,
  kError,
};

struct Token {
  TokenKind kind = TokenKind::kEof;
  std::string text;  // WORD: the word; STRING: the unescaped content
  Location loc;
  std::uint32_t length = 0;  // bytes of source, quotes included
};

class Lexer {
 public:
  // `file_index` is the file's index in the SourceSet (used in locations). The SourceFile must
  // outlive the Lexer. Errors go to `diags`.
  Lexer(const SourceFile& file, std::uint32_t file_index, Diagnostics& diags);
  Token Next();

 private:
  const SourceFile& file_;
  std::uint32_t index_;
  Diagnostics& diags_;
  std::size_t pos_ = 0;
  std::uint32_t line_ = 1;
  std::size_t line_start_ = 0;
};

}  // namespace cagent::policy
