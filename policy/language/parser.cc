#include "policy/language/parser.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/language/lexer.h"

namespace cagent::policy {
namespace {

// Words and strings quoted in messages are cut to this many bytes (then "...").
constexpr std::size_t kMaxQuotedBytes = 32;

std::string Shorten(std::string_view text) {
  if (text.size() <= kMaxQuotedBytes) return std::string(text);
  std::size_t cut = kMaxQuotedBytes;
  // Do not cut a UTF-8 sequence in half.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

// How a token is named in a message: "word 'abc'", "string \"a b\"", "'}'", "end of line".
std::string Describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::kWord:
      return "word '" + Shorten(t.text) + "'";
    case TokenKind::kString: {
      // Escape again what the lexer resolved, so the message stays on one line.
      std::string escaped;
      for (const char c : Shorten(t.text)) {
        switch (c) {
          case '"':
            escaped += "\\\"";
            break;
          case '\\':
            escaped += "\\\\";
            break;
          case '\n':
            escaped += "\\n";
            break;
          case '\t':
            escaped += "\\t";
            break;
          default:
            escaped += c;
        }
      }
      return "string \"" + escaped + "\"";
    }
    case TokenKind::kLBrace:
      return "'{'";
    case TokenKind::kRBrace:
      return "'}'";
    case TokenKind::kLParen:
      return "'('";
    case TokenKind::kRParen:
      return "')'";
    case TokenKind::kPipe:
      return "'|'";
    case TokenKind::kSemicolon:
      return "';'";
    case TokenKind::kNewline:
      return "end of line";
    case TokenKind::kEof:
      return "end of file";
    case TokenKind::kError:
      break;
  }
  return "an invalid token";
}

class Parser {
 public:
  Parser(const SourceFile& file, std::uint32_t file_index, Diagnostics& diags)
      : file_(file), diags_(diags), lexer_(file, file_index, diags) {}

  // file = { statement } EOF
  std::vector<Statement> ParseFile() {
    std::vector<Statement> out;
    ParseStatements(0, out);  // at depth 0 it only returns at EOF
    return out;
  }

 private:
  // How a group ended: parsed, failed (the statement goes on), or failed at a point where the
  // statement is over (its newline was consumed).
  enum class GroupResult : std::uint8_t { kOk, kBad, kStatementEnded };

  const Token& Peek() {
    if (!peeked_) peeked_ = lexer_.Next();
    return *peeked_;
  }
  Token Take() {
    Token t = peeked_ ? std::move(*peeked_) : lexer_.Next();
    peeked_.reset();
    return t;
  }
  bool At(TokenKind kind) { return Peek().kind == kind; }
  void Error(const Token& at, std::string message, std::string hint = {}) {
    diags_.Error(at.loc, at.length == 0 ? 1 : at.length, std::move(message), std::move(hint));
  }

  // Bytes from `open` to the end of `close` when both are on one line; otherwise to the end of
  // `open`'s line (a caret line shows one line only).
  std::uint32_t Span(const Token& open, const Token& close) const {
    if (open.loc.line == close.loc.line && close.loc.col >= open.loc.col) {
      return close.loc.col + close.length - open.loc.col;
    }
    const std::size_t line_size = file_.Line(open.loc.line).size();
    return line_size >= open.loc.col ? static_cast<std::uint32_t>(line_size - open.loc.col + 1) : 1;
  }

  // statements = { statement | NEWLINE | ";" }
  // Parses until EOF, or (depth > 0) until a '}' that it leaves unconsumed. Returns true if it
  // stopped at a '}'.
  bool ParseStatements(int depth, std::vector<Statement>& out) {
    for (;;) {
      const Token& t = Peek();
      switch (t.kind) {
        case TokenKind::kNewline:
        case TokenKind::kSemicolon:
          Take();
          break;
        case TokenKind::kEof:
          return false;
        case TokenKind::kRBrace:
          if (depth > 0) return true;
          Error(t, "unbalanced '}'", "no block is open here; remove it or add the missing '{'");
          Take();
          break;
        case TokenKind::kWord: {
          Statement st;
          if (ParseStatement(depth, st)) out.push_back(std::move(st));
          break;
        }
        case TokenKind::kError:
          // Already reported by the lexer; the statement it starts is dropped.
          SkipStatement();
          break;
        case TokenKind::kLBrace:
          Error(t, "expected a key at the start of a statement, found " + Describe(t),
                "a block's '{' goes on the same line as its key");
          SkipStatement();
          break;
        case TokenKind::kString:
          Error(t, "expected a key at the start of a statement, found " + Describe(t),
                "keys are bare words; only values can be quoted");
          SkipStatement();
          break;
        default:
          Error(t, "expected a key at the start of a statement, found " + Describe(t));
          SkipStatement();
          break;
      }
    }
  }

  // statement = WORD { value } [ block ] end
  // end       = NEWLINE | ";" | before "}" | EOF
  // Returns false if the statement had an error (it is then dropped; its block, if any, was still
  // parsed for diagnostics).
  bool ParseStatement(int depth, Statement& st) {
    Token keyword = Take();
    st.keyword = std::move(keyword.text);
    st.loc = keyword.loc;
    st.keyword_length = keyword.length;
    bool ok = true;
    for (;;) {
      const Token& t = Peek();
      switch (t.kind) {
        case TokenKind::kWord:
        case TokenKind::kString: {
          Token v = Take();
          st.args.push_back(
              Value{v.kind == TokenKind::kWord ? Value::Kind::kWord : Value::Kind::kString,
                    std::move(v.text),
                    {},
                    v.loc,
                    v.length});
          break;
        }
        case TokenKind::kLParen: {
          Value group;
          switch (ParseGroup(group)) {
            case GroupResult::kOk:
              st.args.push_back(std::move(group));
              break;
            case GroupResult::kBad:
              ok = false;
              break;
            case GroupResult::kStatementEnded:
              return false;
          }
          break;
        }
        case TokenKind::kError:
          Take();
          ok = false;
          break;
        case TokenKind::kNewline:
        case TokenKind::kSemicolon:
          Take();
          return ok;
        case TokenKind::kEof:
        case TokenKind::kRBrace:
          return ok;
        case TokenKind::kLBrace: {
          const Token open = Take();
          st.has_block = true;
          st.block_loc = open.loc;
          if (!ParseBlock(depth, open, st.block)) ok = false;
          const Token& after = Peek();
          switch (after.kind) {
            case TokenKind::kNewline:
            case TokenKind::kSemicolon:
              Take();
              return ok;
            case TokenKind::kEof:
            case TokenKind::kRBrace:
              return ok;
            default:
              Error(after, "expected end of statement after '}', found " + Describe(after),
                    "start the next statement on a new line or after ';'");
              SkipStatement();
              return false;
          }
        }
        case TokenKind::kPipe:
          Error(t, "expected a value, '{' or end of statement, found " + Describe(t),
                "alternatives go inside a group: (a | b)");
          SkipStatement();
          return false;
        case TokenKind::kRParen:
          Error(t, "expected a value, '{' or end of statement, found " + Describe(t),
                "no group is open here");
          SkipStatement();
          return false;
      }
    }
  }

  // block = "{" { statement } "}"     (the '{' has been consumed: `open`)
  // Statements inside are at depth + 1. Returns false if the block was too deep or unterminated.
  bool ParseBlock(int depth, const Token& open, std::vector<Statement>& out) {
    if (depth + 1 > kMaxBlockDepth) {
      // Do not recurse: hostile input must not exhaust the stack. Skip the block iteratively.
      Error(open, "blocks nested deeper than " + std::to_string(kMaxBlockDepth) + " levels",
            "flatten the profile");
      SkipBlockBody();
      return false;
    }
    if (ParseStatements(depth + 1, out)) {
      Take();  // '}'
      return true;
    }
    Error(open, "unterminated block: expected '}' to close the block opened at " +
                    std::to_string(open.loc.line) + ":" + std::to_string(open.loc.col));
    return false;
  }

  // group = "(" alt { "|" alt } ")"     alt = WORD | STRING
  // Newlines inside a group are ignored.
  GroupResult ParseGroup(Value& group) {
    const Token open = Take();
    group.kind = Value::Kind::kGroup;
    group.loc = open.loc;
    group.length = 1;
    bool ok = true;
    auto unterminated = [&]() {
      Error(open, "unterminated group: expected ')'");
      return GroupResult::kBad;
    };
    SkipNewlines();
    if (At(TokenKind::kRParen)) {
      const Token close = Take();
      diags_.Error(open.loc, Span(open, close), "empty group '()'",
                   "a group needs at least one alternative: (a | b)");
      return GroupResult::kBad;
    }
    for (;;) {
      // alt
      SkipNewlines();
      {
        const Token& t = Peek();
        switch (t.kind) {
          case TokenKind::kWord:
          case TokenKind::kString: {
            Token v = Take();
            group.alternatives.push_back(
                Value{v.kind == TokenKind::kWord ? Value::Kind::kWord : Value::Kind::kString,
                      std::move(v.text),
                      {},
                      v.loc,
                      v.length});
            break;
          }
          case TokenKind::kError:
            Take();
            ok = false;
            break;
          case TokenKind::kLParen:
            Error(t, "groups cannot be nested");
            RecoverGroup();
            return GroupResult::kBad;
          case TokenKind::kEof:
          case TokenKind::kLBrace:
          case TokenKind::kRBrace:
          case TokenKind::kSemicolon:
            return unterminated();
          default:
            Error(t, "expected a word or string in group, found " + Describe(t));
            RecoverGroup();
            return GroupResult::kBad;
        }
      }
      // "|" or ")"
      for (;;) {
        const bool crossed_newline = SkipNewlines();
        const Token& t = Peek();
        switch (t.kind) {
          case TokenKind::kPipe:
            Take();
            break;
          case TokenKind::kRParen: {
            const Token close = Take();
            group.length = Span(open, close);
            return ok ? GroupResult::kOk : GroupResult::kBad;
          }
          case TokenKind::kError:
            Take();
            ok = false;
            continue;
          case TokenKind::kEof:
          case TokenKind::kLBrace:
          case TokenKind::kRBrace:
          case TokenKind::kSemicolon:
            return unterminated();
          default:
            if (crossed_newline) {
              // "allow (a | b <newline> deny c": most likely a missing ')'. End the statement at
              // that newline so that the next line parses as a statement of its own.
              Error(open, "unterminated group: expected ')'");
              return GroupResult::kStatementEnded;
            }
            if (t.kind == TokenKind::kLParen) {
              Error(t, "groups cannot be nested");
            } else {
              Error(t, "expected '|' or ')' in group, found " + Describe(t));
            }
            RecoverGroup();
            return GroupResult::kBad;
        }
        break;
      }
    }
  }

  // Returns true if it skipped at least one NEWLINE.
  bool SkipNewlines() {
    bool skipped = false;
    while (At(TokenKind::kNewline)) {
      Take();
      skipped = true;
    }
    return skipped;
  }

  // Error recovery inside a group: skips to the ')' that closes it (consumed), or stops before
  // ';', '{', '}' or EOF.
  void RecoverGroup() {
    int parens = 0;
    for (;;) {
      switch (Peek().kind) {
        case TokenKind::kEof:
        case TokenKind::kSemicolon:
        case TokenKind::kLBrace:
        case TokenKind::kRBrace:
          return;
        case TokenKind::kLParen:
          ++parens;
          break;
        case TokenKind::kRParen:
          if (parens == 0) {
            Take();
            return;
          }
          --parens;
          break;
        default:
          break;
      }
      Take();
    }
  }

  // Error recovery for a statement: skips to the next statement end (NEWLINE or ';', consumed)
  // or to a '}' (not consumed) at the same depth, or EOF. Blocks opened on the way are skipped
  // whole, iteratively.
  void SkipStatement() {
    int braces = 0;
    for (;;) {
      switch (Peek().kind) {
        case TokenKind::kEof:
          return;
        case TokenKind::kNewline:
        case TokenKind::kSemicolon:
          Take();
          if (braces == 0) return;
          continue;
        case TokenKind::kLBrace:
          ++braces;
          break;
        case TokenKind::kRBrace:
          if (braces == 0) return;
          --braces;
          break;
        default:
          break;
      }
      Take();
    }
  }

  // Skips the body of a block whose '{' was consumed, through its matching '}' or to EOF.
  void SkipBlockBody() {
    int braces = 1;
    for (;;) {
      switch (Peek().kind) {
        case TokenKind::kEof:
          return;
        case TokenKind::kLBrace:
          ++braces;
          break;
        case TokenKind::kRBrace:
          if (--braces == 0) {
            Take();
            return;
          }
          break;
        default:
          break;
      }
      Take();
    }
  }

  const SourceFile& file_;
  Diagnostics& diags_;
  Lexer lexer_;
  std::optional<Token> peeked_;
};

}  // namespace

File Parse(const SourceSet& sources, std::uint32_t file_index, Diagnostics& diags) {
  File out;
  out.file = file_index;
  if (file_index >= sources.size()) {
    diags.Error(Location{}, 1, "internal: no source file with index " + std::to_string(file_index),
                "this is a bug in cagent; please report it");
    return out;
  }
  Parser parser(sources.file(file_index), file_index, diags);
  out.statements = parser.ParseFile();
  return out;
}

}  // namespace cagent::policy
