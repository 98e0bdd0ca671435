// The syntax tree of a profile file, with source locations.
//
// The grammar is deliberately generic (like nginx's or ninja's): a file is a list of statements, a
// statement is a keyword, arguments, and an optional block of nested statements. What each keyword
// means, how many arguments it takes and of which type, is the checker's business (checker.h), so
// the parser never needs to change when a key is added, and "unknown key" is one diagnostic in one
// place. Grammar (docs/policy-language.md has the full version):
//
//   file       = { statement } EOF
//   statement  = WORD { value } [ block ] end
//   block      = "{" { statement } "}"
//   value      = WORD | STRING | group
//   group      = "(" alt { "|" alt } ")"        alt = WORD | STRING
//   end        = NEWLINE | ";" | before "}" | EOF
#pragma once

#include <string>
#include <vector>

#include "policy/language/source.h"

namespace cagent::policy {

// One argument.
struct Value {
  enum class Kind : std::uint8_t {
    kWord,    // bare: git, 10m, /usr, **/.env, read-only
    kString,  // "quoted" (escapes \" \\ \n \t resolved in `text`)
    kGroup,   // (a | b | "c d"): alternatives, each a kWord or kString Value
  };
  Kind kind = Kind::kWord;
  std::string text;                 // empty for kGroup
  std::vector<Value> alternatives;  // only for kGroup
  Location loc;                     // first byte of the token ('"' or '(' included)
  std::uint32_t length = 1;         // bytes of source the value spans (for carets)
};

struct Statement {
  std::string keyword;
  Location loc;  // the keyword's first byte
  std::uint32_t keyword_length = 1;
  std::vector<Value> args;
  bool has_block = false;
  std::vector<Statement> block;  // nested statements when has_block
  Location block_loc;            // the '{'
};

struct File {
  std::uint32_t file = Location::kNoFile;  // index in the SourceSet
  std::vector<Statement> statements;
};

}  // namespace cagent::policy
