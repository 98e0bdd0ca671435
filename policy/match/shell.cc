#include "policy/match/shell.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <forward_list>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cagent::policy {
namespace {

// How deep code may nest in code before the parse gives up: `sh -c '...'`, eval and trap
// strings, $( ) and `...` substitutions, here-documents fed to a shell. And how deep ( ) and { }
// groups and compound commands may nest within one script (bounds the recursion of the parser).
constexpr int kMaxStringNesting = 4;
constexpr int kMaxGroupNesting = 64;
// How many wrappers (timeout, env, nice, xargs, find -exec ...) may wrap one command:
// `nice timeout 5 env X=1 make` is three.
constexpr int kMaxWrapperNesting = 8;
// Bounds the strings a parse may produce: group redirections and carried-over assignments are
// copied into many commands, which a crafted script could multiply into gigabytes.
constexpr std::size_t kMaxOutputStrings = 200'000;
constexpr std::size_t kMaxStickyAssignments = 256;
// Brace expansion: words one brace word may become, and expansion steps spent on one word.
constexpr std::size_t kMaxBraceWords = 64;
constexpr int kMaxBraceSteps = 256;
// Variable names remembered for the arithmetic check (read as arithmetic; set to untrusted text).
constexpr std::size_t kMaxTrackedNames = 4096;
constexpr std::string_view kTooComplex = "command line too complex to check";
constexpr std::string_view kTooDeep =
    "shell code nested more than 4 levels deep (sh -c, eval, trap, $( ), here-documents) cannot "
    "be checked";

// Opaque reasons. Each names the construct so the user can rewrite the command.
constexpr std::string_view kArithmeticChars =
    "arithmetic expansion $(( )) may only hold numbers, operators, parentheses and variable "
    "names; anything else in it cannot be checked before it runs";

// What runs the commands of a nested script (SimpleCommand::run_by).
constexpr std::string_view kRunByCommandSubstitution = "$( )";
constexpr std::string_view kRunByInputProcess = "<( )";
constexpr std::string_view kRunByOutputProcess = ">( )";
constexpr std::string_view kRunByXargs = "xargs";
constexpr std::string_view kRunByFind = "find -exec";
constexpr std::string_view kRunBySource = "source";
constexpr std::string_view kRunByDashTest = "[[ (sh)";

constexpr bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsNameStart(char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsName(std::string_view w) {
  if (w.empty() || !IsNameStart(w[0])) return false;
  return std::all_of(w.begin() + 1, w.end(), IsNameChar);
}
// Bytes that end an unquoted word.
constexpr bool IsMeta(char c) {
  return IsBlank(c) || c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')' ||
         c == '<' || c == '>';
}

// Bytes that stand for themselves in an unquoted word: not a word end, quote, escape, expansion,
// glob or brace character (ShellLexer::LexWord handles those one at a time). A table, because
// the lexer asks for every byte of every word.
constexpr std::array<bool, 256> kPlainWordByte = [] {
  std::array<bool, 256> plain{};
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    plain[b] = !IsMeta(c) && c != '\\' && c != '\'' && c != '"' && c != '`' && c != '$' &&
               c != '*' && c != '?' && c != '[' && c != ']' && c != '{';
  }
  return plain;
}();
bool IsPlainWordByte(char c) { return kPlainWordByte[static_cast<unsigned char>(c)]; }

enum class TokKind : std::uint8_t { kWord, kSeparator, kLParen, kRParen, kRedirect, kEnd };

enum class RedirKind : std::uint8_t {
  kRead,        // <
  kWrite,       // > >> >| &> &>>
  kReadWrite,   // <>
  kDupOut,      // >&  (a fd move when the target is a number or '-', else a write)
  kDupIn,       // <&  (a fd move when the target is a number or '-', else a read)
  kHereDoc,     // << <<-  (the next token is the delimiter word)
  kHereString,  // <<<
};

struct ShellToken {
  TokKind kind = TokKind::kEnd;
  // kWord: after quote removal (into the script, or into ShellParseView::owned); otherwise the
  // operator as written (into the script).
  std::string_view text;
  RedirKind redir = RedirKind::kRead;
  bool quoted = false;      // some part was quoted or escaped
  bool expansion = false;   // contains $NAME, ${...}, $1, $( ), `...`, $(( )) (kept literally)
  bool glob = false;        // unquoted '*', '?' or '[...]'
  bool tilde = false;       // unquoted leading '~'
  bool assignment = false;  // starts with an unquoted NAME= or NAME+=
  bool adjacent = false;    // no blank between this token and the previous one
  bool procsub = false;     // the word is one process substitution <( ) or >( )
  bool brace = false;       // brace expansion: its words are brace_words[brace_begin, brace_end)
  bool other_fd = false;    // kRedirect: of a descriptor other than 0/1 (3<file), given by number
  // Substitutions run when the word is expanded: LexedScript::subs[sub_begin, sub_end). For a
  // here-document delimiter, those of its body.
  std::uint32_t sub_begin = 0;
  std::uint32_t sub_end = 0;
  std::uint32_t brace_begin = 0;
  std::uint32_t brace_end = 0;
};

struct Substitution;

struct HereDoc {
  std::size_t token = 0;    // the delimiter word's index in LexedScript::tokens
  std::string_view body;    // the lines between the operator's line and the delimiter line
  bool quoted = false;      // some part of the delimiter was quoted: the body is literal
  bool strip_tabs = false;  // <<-: leading tabs of each line are not part of it
};

// A script split into tokens, with what its words hold.
struct LexedScript {
  std::vector<ShellToken> tokens;  // ends with a kEnd token
  std::vector<Substitution> subs;  // in source order
  std::vector<HereDoc> heredocs;
  std::vector<std::string_view> brace_words;
};

enum class SubKind { kCommand, kInputProcess, kOutputProcess };

struct Substitution {
  LexedScript script;
  SubKind kind = SubKind::kCommand;
  int depth = 0;  // string nesting of its code
};

// Variable names the whole parse (nested code included) has seen, for the arithmetic check.
struct NameLists {
  std::vector<std::string_view> arithmetic;  // read as arithmetic
  std::vector<std::string_view> assigned;    // assigned by arithmetic (x=1, x++)
  std::vector<std::string_view> untrusted;   // set to text the line did not write
};

// What nested lexers and parsers share.
struct ParseState {
  explicit ParseState(ShellParseView& o) : out(o) {}
  ShellParseView& out;
  std::vector<std::string_view> sticky;  // assignments carried to later commands
  std::size_t budget = kMaxOutputStrings;
  std::uint32_t pipelines = 0;
  NameLists names;
};

// The text of the word being lexed. Quote removal only ever drops bytes, so a word is a
// sequence of slices of the script; while they follow each other (or there is only one), the
// word is a view of the script. The first slice that does not follow the text so far (after a
// quote or an escape) copies the text into a new string in `owned`, which then takes the rest.
// A discarding one (for here-document bodies, which are scanned but not kept) keeps nothing.
class WordText {
 public:
  WordText(std::string_view script, std::forward_list<std::string>* owned)
      : s_(script), owned_(owned) {}

  // Appends s_[pos, pos + len).
  void Append(std::size_t pos, std::size_t len) {
    if (len == 0 || owned_ == nullptr) return;
    if (buf_ != nullptr) {
      buf_->append(s_.substr(pos, len));
    } else if (size_ == 0) {
      begin_ = pos;
      size_ = len;
    } else if (begin_ + size_ == pos) {
      size_ += len;
    } else {
      buf_ = &owned_->emplace_front(s_.substr(begin_, size_));
      buf_->append(s_.substr(pos, len));
    }
  }
  [[nodiscard]] std::size_t size() const { return buf_ != nullptr ? buf_->size() : size_; }
  [[nodiscard]] std::string_view view() const {
    return buf_ != nullptr ? std::string_view{*buf_} : s_.substr(begin_, size_);
  }

 private:
  std::string_view s_;
  std::forward_list<std::string>* owned_;
  std::string* buf_ = nullptr;  // in owned_, once the word is not one slice
  std::size_t begin_ = 0;
  std::size_t size_ = 0;
};

// Checks an arithmetic expression: only numbers, blanks, operators, parentheses and variable
// names (NAME, $NAME, ${NAME}, and the numbers $# $? $$ $! ${#NAME} ${#NAME[@]} and a nested
// $(( ))). Names go to
// names.arithmetic; when the expression assigns (x=1, x+=1, x++), all its names go to
// names.assigned too. Returns false with `why` set otherwise.
bool CheckArithmetic(std::string_view e, NameLists& names, std::string& why) {
  const std::size_t first_name = names.arithmetic.size();
  bool assigns = false;
  for (std::size_t i = 0; i < e.size();) {
    const char c = e[i];
    if (IsBlank(c) || c == '\n') {
      ++i;
    } else if (IsDigit(c)) {  // 42, 0x1f, 16#ff, 2#1010
      while (i < e.size() && (IsNameChar(e[i]) || e[i] == '#' || e[i] == '@')) ++i;
    } else if (IsNameStart(c)) {
      const std::size_t b = i;
      while (i < e.size() && IsNameChar(e[i])) ++i;
      names.arithmetic.push_back(e.substr(b, i - b));
    } else if (c == '$') {
      const char d = i + 1 < e.size() ? e[i + 1] : '\0';
      if (d == '#' || d == '?' || d == '$' || d == '!') {
        i += 2;
        continue;
      }
      if (d == '(' && i + 2 < e.size() && e[i + 2] == '(') {
        // A nested $(( )): checked the same way.
        int depth = 0;
        std::size_t j = i + 3;
        for (; j < e.size(); ++j) {
          if (e[j] == '(') {
            ++depth;
          } else if (e[j] == ')') {
            if (depth == 0) break;
            --depth;
          }
        }
        if (j + 1 >= e.size() || e[j + 1] != ')') {
          why = std::string(kArithmeticChars);
          return false;
        }
        if (!CheckArithmetic(e.substr(i + 3, j - i - 3), names, why)) return false;
        i = j + 2;
        continue;
      }
      if (d == '{' && i + 2 < e.size() && e[i + 2] == '#') {
        // ${#NAME}, ${#NAME[@]}, ${#NAME[*]}: a length, a number.
        std::size_t j = i + 3;
        while (j < e.size() && IsNameChar(e[j])) ++j;
        if (j > i + 3 && e.substr(j).starts_with("[@]")) j += 3;
        if (j > i + 3 && e.substr(j).starts_with("[*]")) j += 3;
        if (j == i + 3 || j >= e.size() || e[j] != '}') {
          why = std::string(kArithmeticChars);
          return false;
        }
        i = j + 1;
        continue;
      }
      std::size_t b = i + 1;
      const bool braced = d == '{';
      if (braced) ++b;
      std::size_t j = b;
      while (j < e.size() && IsNameChar(e[j])) ++j;
      if (j == b || !IsNameStart(e[b]) || (braced && (j >= e.size() || e[j] != '}'))) {
        why = std::string(kArithmeticChars);
        return false;
      }
      names.arithmetic.push_back(e.substr(b, j - b));
      i = braced ? j + 1 : j;
    } else if (std::string_view("+-*/%<>=!&|^~?:,()").find(c) != std::string_view::npos) {
      const char prev = i > 0 ? e[i - 1] : '\0';
      const char next = i + 1 < e.size() ? e[i + 1] : '\0';
      if ((c == '+' || c == '-') && next == c) assigns = true;  // ++ --
      if (c == '=' && next != '=' && prev != '=' && prev != '!' &&
          !((prev == '<' || prev == '>') && (i < 2 || e[i - 2] != prev))) {
        assigns = true;  // = += -= *= /= %= <<= >>= &= ^= |=
      }
      ++i;
    } else {
      why = std::string(kArithmeticChars);
      return false;
    }
  }
  if (names.arithmetic.size() > kMaxTrackedNames) {
    why = std::string(kTooComplex);
    return false;
  }
  if (assigns) {
    names.assigned.insert(names.assigned.end(),
                          names.arithmetic.begin() + static_cast<std::ptrdiff_t>(first_name),
                          names.arithmetic.end());
  }
  return true;
}

// Splits a script into words and operators, removing quotes. Everything it cannot represent
// faithfully ends the scan with a reason. Word texts that are not slices of the script are kept
// in the parse's `owned`. A nested lexer (for $( ) and <( )) scans the same script from inside
// the parenthesis and stops at the ')' that closes it.
class ShellLexer {
 public:
  ShellLexer(std::string_view script, ParseState& st, int depth)
      : s_(script), st_(st), depth_(depth) {}

  // Fills `out` (tokens terminated by a kEnd token) and returns true, or returns false with
  // reason().
  bool Tokenize(LexedScript& out);
  [[nodiscard]] const std::string& reason() const { return reason_; }
  // How many separator operators (; & && || | |& newline) Tokenize found.
  [[nodiscard]] std::size_t separators() const { return separators_; }

 private:
  struct PendingHereDoc {
    std::size_t token;
    std::string_view delimiter;
    bool quoted;
    bool strip_tabs;
  };

  bool Fail(std::string_view reason) {
    reason_ = std::string(reason);
    return false;
  }
  [[nodiscard]] char At(std::size_t i) const { return i < s_.size() ? s_[i] : '\0'; }
  bool LexOperator(bool adjacent);
  bool LexWord(ShellToken& tok);
  bool LexDoubleQuoted(ShellToken& tok, WordText& text);
  bool LexDollar(ShellToken& tok, WordText& text, bool in_double_quotes);
  bool LexBacktick(ShellToken& tok, WordText& text, bool in_double_quotes);
  bool LexArithmetic(ShellToken& tok, WordText& text, std::size_t begin, std::size_t end,
                     std::size_t after);
  // Lexes the code of a $( ) or <( ) starting at `start` into a new substitution; i_ ends past
  // its ')'.
  bool LexNested(std::size_t start, SubKind kind);
  bool LexProcessSubstitution(bool adjacent);
  bool LexHereDocOperator(bool adjacent);
  bool ReadHereDocBodies();
  bool ScanHereDocBody(std::size_t begin, std::size_t end);
  // Brace-expands the word just lexed from `begin`, if bash would (`substitutes`: it holds a
  // $( ), `...` or $(( )), which is refused then).
  bool ExpandBraces(std::size_t begin, bool substitutes, ShellToken& tok);
  void Push(const ShellToken& tok) { lx_->tokens.push_back(tok); }

  std::string_view s_;
  ParseState& st_;
  int depth_;
  LexedScript* lx_ = nullptr;
  std::size_t i_ = 0;
  std::size_t separators_ = 0;
  bool nested_ = false;  // stops at the unmatched ')'
  int paren_depth_ = 0;  // ( ) opened and not closed, for a nested lexer
  bool expand_braces_ = true;
  std::size_t arithmetic_ = 0;  // $(( )) and $[ ] lexed so far
  bool other_fd_ = false;       // the operator lexed next follows an io_number other than 0
  std::vector<PendingHereDoc> pending_;
  std::string reason_;
};

bool ShellLexer::Tokenize(LexedScript& out) {
  lx_ = &out;
  // Command lines average a token every four or five bytes; reserving that (up to a bound, past
  // which the vector grows as usual) saves most of the reallocations, each of which moves every
  // token so far.
  if (!nested_) out.tokens.reserve(std::min<std::size_t>(s_.size() / 4 + 2, 1024));
  while (true) {
    bool blank = false;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (IsBlank(c)) {
        ++i_;
        blank = true;
      } else if (c == '\\' && At(i_ + 1) == '\n') {
        i_ += 2;  // line continuation
      } else if (c == '#') {
        // A comment starts only where a word would start.
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
    const bool adjacent = !blank && !out.tokens.empty();
    if (i_ >= s_.size()) {
      if (nested_) return Fail("unterminated $( ) or <( ): missing ')'");
      // Here-documents started on the last line have empty bodies.
      if (!pending_.empty() && !ReadHereDocBodies()) return false;
      ShellToken end;
      end.kind = TokKind::kEnd;
      Push(end);
      return true;
    }
    if (nested_ && s_[i_] == ')' && paren_depth_ == 0) {
      if (!pending_.empty()) {
        return Fail(
            "a here-document inside $( ) or <( ) must end before the ')'; put the ')' on a line "
            "after the delimiter");
      }
      ShellToken end;
      end.kind = TokKind::kEnd;
      Push(end);
      return true;  // i_ is at the ')'
    }
    if (IsMeta(s_[i_])) {
      if (!LexOperator(adjacent)) return false;
      continue;
    }
    ShellToken word;
    word.kind = TokKind::kWord;
    word.adjacent = adjacent;
    if (!LexWord(word)) return false;
    const char next = At(i_);
    const bool is_target = !out.tokens.empty() && out.tokens.back().kind == TokKind::kRedirect;
    if ((next == '<' || next == '>') && !word.quoted && !is_target) {
      // "2>file": an io_number is all digits, directly before the operator; we record no fd
      // numbers, so it is dropped. "{fd}>file" (bash allocates a fd into $fd) is not supported.
      bool digits = !word.text.empty();
      for (char c : word.text) digits = digits && IsDigit(c);
      if (digits) {
        other_fd_ = word.text != "0";
        continue;
      }
      if (word.text.size() > 2 && word.text.front() == '{' && word.text.back() == '}') {
        return Fail("named file descriptor redirection {name}> is not supported");
      }
    }
    Push(word);
  }
}

// operator := '\n' | ';' | '&' | '&&' | '|' | '||' | '|&' | '(' | ')' | redirection
//           | '<(' list ')' | '>(' list ')'
// redirection := '<' | '<>' | '<&' | '>' | '>>' | '>|' | '>&' | '&>' | '&>>' | '<<<'
//              | '<<' delimiter | '<<-' delimiter
bool ShellLexer::LexOperator(bool adjacent) {
  ShellToken tok;
  tok.adjacent = adjacent;
  tok.other_fd = other_fd_;
  const char c = s_[i_];
  const char c1 = At(i_ + 1);
  std::size_t len = 1;
  tok.kind = TokKind::kSeparator;
  switch (c) {
    case '\n':
    case ';':
      break;
    case '&':
      if (c1 == '&') {
        len = 2;
      } else if (c1 == '>') {
        tok.kind = TokKind::kRedirect;
        tok.redir = RedirKind::kWrite;
        len = At(i_ + 2) == '>' ? 3 : 2;
      }
      break;
    case '|':
      if (c1 == '|' || c1 == '&') len = 2;
      break;
    case '(':
      tok.kind = TokKind::kLParen;
      ++paren_depth_;
      break;
    case ')':
      tok.kind = TokKind::kRParen;
      --paren_depth_;
      break;
    case '<':
      tok.kind = TokKind::kRedirect;
      if (c1 == '<') {
        if (At(i_ + 2) == '<') {
          tok.redir = RedirKind::kHereString;
          len = 3;
          break;
        }
        return LexHereDocOperator(adjacent);
      }
      if (c1 == '(') return LexProcessSubstitution(adjacent);
      if (c1 == '>') {
        tok.redir = RedirKind::kReadWrite;
        len = 2;
      } else if (c1 == '&') {
        tok.redir = RedirKind::kDupIn;
        len = 2;
      } else {
        tok.redir = RedirKind::kRead;
      }
      break;
    case '>':
      tok.kind = TokKind::kRedirect;
      tok.redir = RedirKind::kWrite;
      if (c1 == '(') return LexProcessSubstitution(adjacent);
      if (c1 == '>' || c1 == '|') {
        len = 2;
      } else if (c1 == '&') {
        tok.redir = RedirKind::kDupOut;
        len = 2;
      }
      break;
    default:  // blanks are skipped by the caller
      break;
  }
  other_fd_ = false;
  tok.text = s_.substr(i_, len);
  if (tok.kind == TokKind::kSeparator) ++separators_;
  i_ += len;
  Push(tok);
  if (c == '\n' && !pending_.empty()) return ReadHereDocBodies();
  return true;
}

// '<<' ['-'] word: the delimiter is lexed here, and the body read after the next newline.
bool ShellLexer::LexHereDocOperator(bool adjacent) {
  ShellToken op;
  op.kind = TokKind::kRedirect;
  op.redir = RedirKind::kHereDoc;
  op.adjacent = adjacent;
  op.other_fd = other_fd_;
  other_fd_ = false;
  const bool strip = At(i_ + 2) == '-';
  const std::size_t len = strip ? 3 : 2;
  op.text = s_.substr(i_, len);
  i_ += len;
  Push(op);
  while (i_ < s_.size() && IsBlank(s_[i_])) ++i_;
  if (i_ >= s_.size() || IsMeta(s_[i_])) return Fail("here-document '<<' without a delimiter");
  ShellToken delim;
  delim.kind = TokKind::kWord;
  delim.sub_begin = delim.sub_end = static_cast<std::uint32_t>(lx_->subs.size());
  const bool saved = expand_braces_;
  expand_braces_ = false;
  const bool ok = LexWord(delim);
  expand_braces_ = saved;
  if (!ok) return false;
  if (delim.expansion || delim.sub_end != delim.sub_begin) {
    return Fail("here-document delimiter with $ or a substitution is not supported");
  }
  pending_.push_back({lx_->tokens.size(), delim.text, delim.quoted, strip});
  Push(delim);
  return true;
}

// Reads the bodies of the here-documents started on the line that just ended (i_ is at the
// start of the next line): each is the lines up to one equal to its delimiter (after leading
// tabs, for <<-), or the rest of the input.
bool ShellLexer::ReadHereDocBodies() {
  std::vector<PendingHereDoc> pending;
  pending.swap(pending_);
  for (const PendingHereDoc& p : pending) {
    const std::size_t start = i_;
    std::size_t line = i_;
    std::size_t body_end = s_.size();
    std::size_t next = s_.size();
    while (line < s_.size()) {
      std::size_t eol = s_.find('\n', line);
      if (eol == std::string_view::npos) eol = s_.size();
      std::string_view l = s_.substr(line, eol - line);
      if (p.strip_tabs) {
        while (!l.empty() && l.front() == '\t') l.remove_prefix(1);
      }
      if (l == p.delimiter) {
        body_end = line;
        next = eol < s_.size() ? eol + 1 : eol;
        break;
      }
      line = eol + 1;
    }
    i_ = next;
    HereDoc doc;
    doc.token = p.token;
    doc.body = s_.substr(start, body_end - start);
    doc.quoted = p.quoted;
    doc.strip_tabs = p.strip_tabs;
    if (!p.quoted) {
      // Parameter expansion, command substitution and arithmetic happen in the body.
      const auto first = static_cast<std::uint32_t>(lx_->subs.size());
      if (!ScanHereDocBody(start, body_end)) return false;
      lx_->tokens[p.token].sub_begin = first;
      lx_->tokens[p.token].sub_end = static_cast<std::uint32_t>(lx_->subs.size());
    }
    lx_->heredocs.push_back(doc);
  }
  return true;
}

// An unquoted here-document body: as inside double quotes, except that '"' is an ordinary byte.
bool ShellLexer::ScanHereDocBody(std::size_t begin, std::size_t end) {
  const std::size_t resume = i_;
  ShellToken scratch;
  WordText text(s_, nullptr);
  i_ = begin;
  while (i_ < end) {
    const char c = s_[i_];
    if (c == '\\') {
      i_ += 2;
      continue;
    }
    if (c == '$' || c == '`') {
      const bool ok = c == '$' ? LexDollar(scratch, text, /*in_double_quotes=*/true)
                               : LexBacktick(scratch, text, /*in_double_quotes=*/false);
      if (!ok) return false;
      if (i_ > end) return Fail("a substitution in a here-document runs past its end");
      continue;
    }
    ++i_;
  }
  i_ = resume;
  return true;
}

// '<(' list ')' and '>(' list ')', standing alone as a word.
bool ShellLexer::LexProcessSubstitution(bool adjacent) {
  if (adjacent && !lx_->tokens.empty() && lx_->tokens.back().kind == TokKind::kWord) {
    return Fail("process substitution <( ) joined to other text in a word is not supported");
  }
  other_fd_ = false;
  ShellToken tok;
  tok.kind = TokKind::kWord;
  tok.adjacent = adjacent;
  tok.expansion = true;
  tok.procsub = true;
  const std::size_t begin = i_;
  tok.sub_begin = static_cast<std::uint32_t>(lx_->subs.size());
  if (!LexNested(i_ + 2, s_[i_] == '<' ? SubKind::kInputProcess : SubKind::kOutputProcess)) {
    return false;
  }
  tok.sub_end = static_cast<std::uint32_t>(lx_->subs.size());
  tok.text = s_.substr(begin, i_ - begin);
  if (i_ < s_.size() && !IsMeta(s_[i_])) {
    return Fail("process substitution <( ) joined to other text in a word is not supported");
  }
  Push(tok);
  return true;
}

bool ShellLexer::LexNested(std::size_t start, SubKind kind) {
  if (depth_ + 1 > kMaxStringNesting) return Fail(kTooDeep);
  Substitution sub;
  sub.kind = kind;
  sub.depth = depth_ + 1;
  ShellLexer inner(s_, st_, depth_ + 1);
  inner.i_ = start;
  inner.nested_ = true;
  if (!inner.Tokenize(sub.script)) return Fail(inner.reason());
  const std::vector<ShellToken>& t = sub.script.tokens;
  if (kind == SubKind::kCommand && t.size() == 3 && t[0].kind == TokKind::kRedirect &&
      t[0].redir == RedirKind::kRead) {
    return Fail("$(< file) is not supported; write $(cat file)");
  }
  i_ = inner.i_ + 1;  // past the ')'
  lx_->subs.push_back(std::move(sub));
  return true;
}

// word := ( '\' any | "'" ... "'" | '"' dq '"' | '$' expansion | '`' ... '`' | byte )+
bool ShellLexer::LexWord(ShellToken& tok) {
  WordText text(s_, &st_.out.owned);
  const std::size_t begin = i_;
  std::size_t special_at = std::string::npos;  // text length at the first quote/escape/expansion
  const auto mark = [&] {
    if (special_at == std::string::npos) special_at = text.size();
  };
  bool open_bracket = false;
  bool brace = false;
  const std::size_t arithmetic_before = arithmetic_;
  tok.sub_begin = tok.sub_end = static_cast<std::uint32_t>(lx_->subs.size());
  if (At(i_) == '~') tok.tilde = true;
  while (i_ < s_.size()) {
    // A run of bytes that need no handling below is copied in one go.
    std::size_t run = i_;
    while (run < s_.size() && IsPlainWordByte(s_[run])) ++run;
    if (run > i_) {
      text.Append(i_, run - i_);
      i_ = run;
      continue;
    }
    const char c = s_[i_];
    if (IsMeta(c)) break;
    switch (c) {
      case '\\':
        if (i_ + 1 >= s_.size()) {  // a lone trailing backslash stays literal, as in sh
          text.Append(i_, 1);
          ++i_;
          continue;
        }
        if (s_[i_ + 1] == '\n') {  // line continuation joins the word
          i_ += 2;
          continue;
        }
        mark();
        tok.quoted = true;
        text.Append(i_ + 1, 1);
        i_ += 2;
        continue;
      case '\'': {
        mark();
        tok.quoted = true;
        const std::size_t close = s_.find('\'', i_ + 1);
        if (close == std::string_view::npos) return Fail("unterminated single quote");
        text.Append(i_ + 1, close - i_ - 1);
        i_ = close + 1;
        continue;
      }
      case '"':
        mark();
        tok.quoted = true;
        if (!LexDoubleQuoted(tok, text)) return false;
        continue;
      case '`':
        mark();
        if (!LexBacktick(tok, text, /*in_double_quotes=*/false)) return false;
        continue;
      case '$':
        mark();
        if (!LexDollar(tok, text, /*in_double_quotes=*/false)) return false;
        continue;
      case '*':
      case '?':
        tok.glob = true;
        break;
      case '[':
        open_bracket = true;
        break;
      case ']':
        if (open_bracket) tok.glob = true;
        break;
      case '{':
        brace = true;
        break;
      default:
        break;
    }
    text.Append(i_, 1);
    ++i_;
  }
  tok.text = text.view();
  tok.sub_end = static_cast<std::uint32_t>(lx_->subs.size());
  // NAME=value or NAME+=value, with NAME and '=' unquoted.
  std::size_t eq = tok.text.find('=');
  if (eq != std::string::npos && eq > 0 && (special_at == std::string::npos || eq < special_at)) {
    std::size_t name_end = eq;
    if (tok.text[name_end - 1] == '+') --name_end;
    bool name = name_end > 0 && IsNameStart(tok.text[0]);
    for (std::size_t k = 1; k < name_end && name; ++k) name = IsNameChar(tok.text[k]);
    tok.assignment = name;
  }
  if (brace && expand_braces_) {
    const bool substitutes = tok.sub_end != tok.sub_begin || arithmetic_ != arithmetic_before;
    return ExpandBraces(begin, substitutes, tok);
  }
  return true;
}

// Inside "...", a backslash escapes only " \ $ ` and newline; other backslashes are literal.
bool ShellLexer::LexDoubleQuoted(ShellToken& tok, WordText& text) {
  ++i_;  // the opening quote
  while (i_ < s_.size()) {
    // A run of bytes that stand for themselves inside double quotes is taken in one go.
    std::size_t run = i_;
    while (run < s_.size() && s_[run] != '"' && s_[run] != '\\' && s_[run] != '`' &&
           s_[run] != '$') {
      ++run;
    }
    if (run > i_) {
      text.Append(i_, run - i_);
      i_ = run;
      continue;
    }
    const char c = s_[i_];
    if (c == '"') {
      ++i_;
      return true;
    }
    if (c == '\\' && i_ + 1 < s_.size()) {
      const char d = s_[i_ + 1];
      if (d == '\n') {
        i_ += 2;
        continue;
      }
      if (d == '"' || d == '\\' || d == '$' || d == '`') {
        text.Append(i_ + 1, 1);
        i_ += 2;
        continue;
      }
    }
    if (c == '`') {
      if (!LexBacktick(tok, text, /*in_double_quotes=*/true)) return false;
      continue;
    }
    if (c == '$') {
      if (!LexDollar(tok, text, /*in_double_quotes=*/true)) return false;
      continue;
    }
    text.Append(i_, 1);
    ++i_;
  }
  return Fail("unterminated double quote");
}

// '`' code '`': inside, a backslash escapes only ` \ $ (and " inside double quotes, which is
// refused: shells disagree on it). The code, unescaped, is lexed as a script of its own.
bool ShellLexer::LexBacktick(ShellToken& tok, WordText& text, bool in_double_quotes) {
  const std::size_t begin = i_;
  std::size_t j = i_ + 1;
  bool escapes = false;
  while (j < s_.size() && s_[j] != '`') {
    if (s_[j] == '\\' && j + 1 < s_.size()) {
      const char d = s_[j + 1];
      if (d == '"' && in_double_quotes) {
        return Fail(
            "\\\" inside `...` inside double quotes is read differently by shells; use $( )");
      }
      if (d == '`' || d == '\\' || d == '$') escapes = true;
      j += 2;
      continue;
    }
    ++j;
  }
  if (j >= s_.size()) return Fail("unterminated command substitution `...`");
  if (depth_ + 1 > kMaxStringNesting) return Fail(kTooDeep);
  std::string_view code = s_.substr(begin + 1, j - begin - 1);
  if (escapes) {
    std::string& own = st_.out.owned.emplace_front();
    own.reserve(code.size());
    for (std::size_t k = 0; k < code.size(); ++k) {
      if (code[k] == '\\' && k + 1 < code.size() &&
          (code[k + 1] == '`' || code[k + 1] == '\\' || code[k + 1] == '$')) {
        ++k;
      }
      own += code[k];
    }
    code = own;
  }
  Substitution sub;
  sub.kind = SubKind::kCommand;
  sub.depth = depth_ + 1;
  ShellLexer inner(code, st_, depth_ + 1);
  if (!inner.Tokenize(sub.script)) return Fail(inner.reason());
  lx_->subs.push_back(std::move(sub));
  text.Append(begin, j + 1 - begin);
  tok.expansion = true;
  i_ = j + 1;
  return true;
}

// The inside of $(( )) or $[ ], s_[begin, end); `after` is just past the closing bracket.
bool ShellLexer::LexArithmetic(ShellToken& tok, WordText& text, std::size_t begin, std::size_t end,
                               std::size_t after) {
  std::string why;
  if (!CheckArithmetic(s_.substr(begin, end - begin), st_.names, why)) return Fail(why);
  ++arithmetic_;
  text.Append(i_, after - i_);
  tok.expansion = true;
  i_ = after;
  return true;
}

// expansion := '$(' list ')' | '$((' arith '))' | '$[' arith ']' | '${' param '}' | '$' name
//            | '$' special | "$'" ... | '$"' ... | '$' (literal)
// The parameter and arithmetic forms are kept literally ('$' included) and $( ) is lexed as
// code; ANSI-C and locale quoting are opaque.
bool ShellLexer::LexDollar(ShellToken& tok, WordText& text, bool in_double_quotes) {
  const char d = At(i_ + 1);
  if (d == '(' && At(i_ + 2) == '(') {
    // $(( ... )) is arithmetic when the '(' that opens it is closed by '))'; otherwise it is a
    // command substitution that starts with a subshell: $( (a; b) | c ).
    int depth = 0;
    for (std::size_t j = i_ + 3; j < s_.size(); ++j) {
      const char e = s_[j];
      if (e == '(') {
        ++depth;
      } else if (e == ')') {
        if (depth > 0) {
          --depth;
        } else if (At(j + 1) == ')') {
          return LexArithmetic(tok, text, i_ + 3, j, j + 2);
        } else {
          break;
        }
      }
    }
  }
  if (d == '(') {
    const std::size_t begin = i_;
    if (!LexNested(i_ + 2, SubKind::kCommand)) return false;
    text.Append(begin, i_ - begin);
    tok.expansion = true;
    return true;
  }
  if (d == '[') {
    int depth = 0;
    for (std::size_t j = i_ + 2; j < s_.size(); ++j) {
      if (s_[j] == '[') {
        ++depth;
      } else if (s_[j] == ']') {
        if (depth == 0) return LexArithmetic(tok, text, i_ + 2, j, j + 1);
        --depth;
      }
    }
    return Fail("unterminated arithmetic expansion $[");
  }
  if (d == '{') {
    // Only ${NAME} and simple operator forms such as ${NAME:-word} with a plain word: quotes,
    // blanks or nested expansions inside the braces change word splitting and can hide a
    // substitution, so they are refused rather than guessed at.
    std::size_t j = i_ + 2;
    while (j < s_.size() && s_[j] != '}') {
      const char e = s_[j];
      const bool plain =
          IsNameChar(e) || std::string_view(":-=?+#%/^,@*!.~[]").find(e) != std::string_view::npos;
      if (!plain) {
        return Fail(
            "parameter expansion ${...} with quotes, blanks or nested expansions is "
            "not supported");
      }
      ++j;
    }
    if (j >= s_.size()) return Fail("unterminated parameter expansion ${");
    if (j == i_ + 2) return Fail("empty parameter expansion ${}");
    // Subscripts (${a[i]}), offsets (${s:i:n}) and indirection (${!x}) evaluate names as
    // arithmetic or as parameter references: every name but the expanded one is listed as read
    // as arithmetic (the names in ${X:-word} too, which over-approximates).
    const std::string_view inner = s_.substr(i_ + 2, j - i_ - 2);
    std::size_t k = 0;
    const bool indirect = inner[0] == '!';
    if (indirect || inner[0] == '#') ++k;
    if (!indirect) {
      while (k < inner.size() && IsNameChar(inner[k])) ++k;
    }
    while (k < inner.size()) {
      if (IsNameStart(inner[k])) {
        const std::size_t b = k;
        while (k < inner.size() && IsNameChar(inner[k])) ++k;
        st_.names.arithmetic.push_back(inner.substr(b, k - b));
      } else if (IsDigit(inner[k])) {
        while (k < inner.size() && IsNameChar(inner[k])) ++k;
      } else {
        ++k;
      }
    }
    if (st_.names.arithmetic.size() > kMaxTrackedNames) return Fail(kTooComplex);
    text.Append(i_, j + 1 - i_);
    tok.expansion = true;
    i_ = j + 1;
    return true;
  }
  if (!in_double_quotes && d == '\'') return Fail("ANSI-C quoting $'...' is not supported");
  if (!in_double_quotes && d == '"') return Fail("locale quoting $\"...\" is not supported");
  if (IsNameStart(d)) {
    std::size_t j = i_ + 1;
    while (j < s_.size() && IsNameChar(s_[j])) ++j;
    text.Append(i_, j - i_);
    tok.expansion = true;
    i_ = j;
    return true;
  }
  if (IsDigit(d) || (d != '\0' && std::string_view("@*#?$!-").find(d) != std::string_view::npos)) {
    text.Append(i_, 2);
    tok.expansion = true;
    i_ += 2;
    return true;
  }
  text.Append(i_, 1);  // a '$' before anything else is literal
  ++i_;
  return true;
}

// A brace pair of a raw word that bash expands: {a,b} or a sequence {x..y[..incr]}.
struct BracePair {
  std::size_t open = 0;
  std::size_t close = 0;
  bool list = false;  // has a ',' of its own; else a sequence
};

// Whether `inner` is a sequence bash expands: integers, or two letters of one case, with an
// optional integer increment. Fills its items (at most kMaxBraceWords; more is `too_many`).
bool BraceSequence(std::string_view inner, std::vector<std::string>* items, bool* too_many) {
  const auto split = [](std::string_view s, std::vector<std::string_view>& parts) {
    std::size_t at = 0;
    while (true) {
      const std::size_t dots = s.find("..", at);
      parts.push_back(s.substr(at, dots == std::string_view::npos ? dots : dots - at));
      if (dots == std::string_view::npos) break;
      at = dots + 2;
    }
  };
  const auto integer = [](std::string_view s, std::int64_t* v) {
    if (s.empty() || s.size() > 18) return false;
    std::size_t k = (s[0] == '-' || s[0] == '+') ? 1 : 0;
    if (k == s.size()) return false;
    std::int64_t n = 0;
    for (std::size_t j = k; j < s.size(); ++j) {
      if (!IsDigit(s[j])) return false;
      n = n * 10 + (s[j] - '0');
    }
    *v = s[0] == '-' ? -n : n;
    return true;
  };
  if (inner.size() > 48) return false;  // keeps the pair scan linear
  std::vector<std::string_view> parts;
  split(inner, parts);
  if (parts.size() != 2 && parts.size() != 3) return false;
  std::int64_t step = 1;
  if (parts.size() == 3 && !integer(parts[2], &step)) return false;
  step = (step < 0 ? -step : step);
  if (step == 0) step = 1;
  std::int64_t from = 0;
  std::int64_t to = 0;
  const bool letters = parts[0].size() == 1 && parts[1].size() == 1 && IsNameStart(parts[0][0]) &&
                       IsNameStart(parts[1][0]) && parts[0][0] != '_' && parts[1][0] != '_';
  if (letters) {
    const bool lower0 = parts[0][0] >= 'a';
    const bool lower1 = parts[1][0] >= 'a';
    if (lower0 != lower1) return false;  // {Z..a} passes through [ \ ] ^ _ `
    from = static_cast<unsigned char>(parts[0][0]);
    to = static_cast<unsigned char>(parts[1][0]);
  } else if (!integer(parts[0], &from) || !integer(parts[1], &to)) {
    return false;
  }
  const std::int64_t count = (from <= to ? to - from : from - to) / step + 1;
  if (count > static_cast<std::int64_t>(kMaxBraceWords)) {
    *too_many = true;
    return true;
  }
  // {01..10}: a leading zero pads every item to the wider end's width.
  std::size_t width = 0;
  for (int e = 0; e < 2 && !letters; ++e) {
    const std::string_view p = parts[e];
    const std::size_t digits = p[0] == '-' || p[0] == '+' ? 1 : 0;
    if (p.size() > digits + 1 && p[digits] == '0') {
      width = std::max({width, parts[0].size(), parts[1].size()});
    }
  }
  for (std::int64_t k = 0; k < count; ++k) {
    const std::int64_t v = from <= to ? from + k * step : from - k * step;
    if (letters) {
      items->emplace_back(1, static_cast<char>(v));
      continue;
    }
    std::string digits = std::to_string(v < 0 ? -v : v);
    const std::size_t w = width > 0 && v < 0 ? width - 1 : width;
    if (digits.size() < w) digits.insert(0, w - digits.size(), '0');
    items->push_back(v < 0 ? "-" + digits : digits);
  }
  return true;
}

// The first brace pair of raw word `w` (by its '{') that bash expands, skipping quoted parts,
// escapes and ${...}. One pass with a stack, so it is linear in the word.
bool FindBracePair(std::string_view w, BracePair* found) {
  struct Open {
    std::size_t at;
    bool comma;
  };
  std::vector<Open> stack;
  bool any = false;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const char c = w[i];
    if (c == '\\') {
      ++i;
    } else if (c == '\'') {
      const std::size_t close = w.find('\'', i + 1);
      i = close == std::string_view::npos ? w.size() : close;
    } else if (c == '"') {
      for (++i; i < w.size() && w[i] != '"'; ++i) {
        if (w[i] == '\\') ++i;
      }
    } else if (c == '$' && i + 1 < w.size() && w[i + 1] == '{') {
      const std::size_t close = w.find('}', i + 2);
      i = close == std::string_view::npos ? w.size() : close;
    } else if (c == '{') {
      stack.push_back({i, false});
    } else if (c == ',' && !stack.empty()) {
      stack.back().comma = true;
    } else if (c == '}' && !stack.empty()) {
      const Open o = stack.back();
      stack.pop_back();
      bool valid = o.comma;
      if (!valid) {
        std::vector<std::string> items;
        bool too_many = false;
        valid = BraceSequence(w.substr(o.at + 1, i - o.at - 1), &items, &too_many);
      }
      if (valid && (!any || o.at < found->open)) {
        *found = {o.at, i, o.comma};
        any = true;
      }
    }
  }
  return any;
}

// Expands the brace pairs of raw word `w` the way bash does, into `out` (raw words, quotes
// still in them). False when it would give more than kMaxBraceWords words, take more than
// kMaxBraceSteps steps, or when an expansion makes a brace before it expandable (bash's result
// then depends on details of its algorithm).
bool BraceExpand(std::string_view w, std::size_t min_open, std::vector<std::string>& out,
                 int& steps) {
  if (++steps > kMaxBraceSteps) return false;
  BracePair p;
  if (!FindBracePair(w, &p)) {
    out.emplace_back(w);
    return out.size() <= kMaxBraceWords;
  }
  if (p.open < min_open) return false;
  const std::string_view prefix = w.substr(0, p.open);
  const std::string_view suffix = w.substr(p.close + 1);
  const std::string_view inner = w.substr(p.open + 1, p.close - p.open - 1);
  std::vector<std::string> alternatives;
  if (p.list) {
    // Split at the commas of this pair itself (not of nested pairs or quoted parts).
    int depth = 0;
    std::size_t from = 0;
    for (std::size_t i = 0; i <= inner.size(); ++i) {
      const char c = i < inner.size() ? inner[i] : ',';
      if (i < inner.size() && c == '\\') {
        ++i;
      } else if (i < inner.size() && c == '\'') {
        const std::size_t close = inner.find('\'', i + 1);
        i = close == std::string_view::npos ? inner.size() - 1 : close;
      } else if (i < inner.size() && c == '"') {
        for (++i; i < inner.size() && inner[i] != '"'; ++i) {
          if (inner[i] == '\\') ++i;
        }
      } else if (i < inner.size() && c == '$' && i + 1 < inner.size() && inner[i + 1] == '{') {
        const std::size_t close = inner.find('}', i + 2);
        i = close == std::string_view::npos ? inner.size() - 1 : close;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}') {
        --depth;
      } else if (c == ',' && depth == 0) {
        alternatives.emplace_back(inner.substr(from, i - from));
        from = i + 1;
      }
    }
  } else {
    bool too_many = false;
    BraceSequence(inner, &alternatives, &too_many);
    if (too_many) return false;
  }
  for (const std::string& alt : alternatives) {
    std::string next;
    next.reserve(prefix.size() + alt.size() + suffix.size());
    next.append(prefix).append(alt).append(suffix);
    if (!BraceExpand(next, p.open, out, steps)) return false;
  }
  return true;
}

bool ShellLexer::ExpandBraces(std::size_t begin, bool substitutes, ShellToken& tok) {
  const std::string_view raw = s_.substr(begin, i_ - begin);
  BracePair p;
  if (!FindBracePair(raw, &p)) return true;
  if (substitutes) {
    return Fail(
        "brace expansion {a,b} in a word with $( ), `...` or $(( )) cannot be checked before it "
        "runs");
  }
  std::vector<std::string> words;
  int steps = 0;
  if (!BraceExpand(raw, 0, words, steps)) {
    return Fail(
        "brace expansion {a,b} giving more than 64 words, or nested in ways bash reads "
        "idiosyncratically, cannot be checked");
  }
  tok.brace = true;
  tok.brace_begin = static_cast<std::uint32_t>(lx_->brace_words.size());
  for (std::string& w : words) {
    // Each expanded word is a word of its own: lexed again for its quotes and escapes.
    const std::string& own = st_.out.owned.emplace_front(std::move(w));
    ShellLexer sub(own, st_, depth_);
    LexedScript scratch;
    sub.lx_ = &scratch;
    sub.expand_braces_ = false;
    ShellToken t;
    if (!sub.LexWord(t)) return Fail(sub.reason());
    if (sub.i_ != own.size() || !scratch.subs.empty()) return Fail(kTooComplex);
    lx_->brace_words.push_back(t.text);
  }
  tok.brace_end = static_cast<std::uint32_t>(lx_->brace_words.size());
  return true;
}

bool IsShellName(std::string_view argv0) {
  const std::size_t slash = argv0.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? argv0 : argv0.substr(slash + 1);
  return base == "sh" || base == "bash" || base == "dash" || base == "ash" || base == "ksh" ||
         base == "mksh" || base == "zsh" || base == "rbash";
}

// Reserved words, refused as the name of a simple command (after assignments or redirections,
// where a shell would not read them as reserved words, or ones we do not model).
bool IsReservedWord(std::string_view w) {
  // Most words are longer or start with another byte: they are told apart without comparing.
  if (w.empty() || w.size() > 8 ||
      std::string_view("itefwudcs![]{}").find(w[0]) == std::string_view::npos) {
    return false;
  }
  static constexpr std::string_view kWords[] = {
      "if",   "then", "else",     "elif",   "fi",     "for", "while", "until", "do", "done",
      "case", "esac", "function", "select", "coproc", "!",   "[[",    "]]",    "{",  "}",
  };
  for (std::string_view k : kWords) {
    if (w == k) return true;
  }
  return false;
}

std::string_view BaseName(std::string_view argv0) {
  const std::size_t slash = argv0.rfind('/');
  return slash == std::string_view::npos ? argv0 : argv0.substr(slash + 1);
}
// Options of a wrapper command, as its manual documents them (GNU coreutils 9, util-linux 2.38,
// POSIX sh for command and exec). Anything else makes the line opaque: an option we do not know
// might take an argument, and then we would judge the wrong word as the command.
struct WrapperSpec {
  std::string_view name;
  std::string_view flags;       // short options without an argument
  std::string_view with_arg;    // short options taking an argument (-s SIG, -sSIG)
  std::string_view no_command;  // short options after which the arguments are not a command
  std::vector<std::string_view> long_flags;     // --preserve-status
  std::vector<std::string_view> long_with_arg;  // --signal SIG, --signal=SIG
  bool operand_first = false;   // one operand before the command (timeout's DURATION)
  bool assignments = false;     // NAME=value words before the command (env)
  bool numeric_option = false;  // -N is an option (nice -10)
};

const WrapperSpec* FindWrapper(std::string_view base) {
  static const WrapperSpec kSpecs[] = {
      {"timeout",
       "v",
       "sk",
       "",
       {"--preserve-status", "--foreground", "--verbose"},
       {"--signal", "--kill-after"},
       true,
       false,
       false},
      {"nice", "", "n", "", {}, {"--adjustment"}, false, false, true},
      {"nohup", "", "", "", {}, {}, false, false, false},
      {"time",
       "pvq",
       "f",
       "",
       {"--portability", "--verbose", "--quiet"},
       {"--format"},
       false,
       false,
       false},
      {"stdbuf", "", "ioe", "", {}, {"--input", "--output", "--error"}, false, false, false},
      {"ionice", "t", "cn", "pPu", {"--ignore"}, {"--class", "--classdata"}, false, false, false},
      {"env",
       "i0v",
       "u",
       "",
       {"--ignore-environment", "--null", "--debug"},
       {"--unset"},
       false,
       true,
       false},
      {"command", "p", "", "vV", {}, {}, false, false, false},
      {"exec", "cl", "a", "", {}, {}, false, false, false},
  };
  for (const WrapperSpec& w : kSpecs) {
    if (w.name == base) return &w;
  }
  return nullptr;
}

// Where a wrapper's command starts in `argv` (argv.size(): it runs none), and what env sets for
// it; or why that cannot be told.
struct WrapperArgs {
  std::size_t command = 0;
  bool runs_nothing = false;  // an option says it runs no command (command -v, ionice -p)
  std::vector<std::string_view> assignments;  // env NAME=value, as written
  std::vector<std::string_view> unset;        // env -u NAME
  std::string error;
};

WrapperArgs ParseWrapperArgs(const WrapperSpec& w, const std::vector<std::string_view>& argv) {
  WrapperArgs out;
  const auto refuse = [&](std::string_view why) {
    out.error = "cannot tell which command '" + std::string(w.name) +
                "' runs: " + std::string(why) + "; run the command without it";
    return out;
  };
  std::size_t k = 1;
  bool unset_next = false;
  while (k < argv.size()) {
    const std::string_view a = argv[k];
    if (a == "--") {
      ++k;
      break;
    }
    if (w.name == "env" && a == "-") {  // the old spelling of -i
      ++k;
      continue;
    }
    if (a.size() < 2 || a[0] != '-') break;
    if (a[1] == '-') {
      const std::size_t eq = a.find('=');
      const std::string_view opt = a.substr(0, eq);
      if (w.name == "env" && (opt == "--split-string" || opt == "--chdir")) {
        return refuse(opt == "--split-string"
                          ? "env --split-string makes a command line of a string"
                          : "env --chdir runs the command in another directory");
      }
      if (w.name == "time" && (opt == "--output" || opt == "--append")) {
        return refuse("time --output writes a file; redirect its output instead");
      }
      if (w.name == "env" && (opt == "--default-signal" || opt == "--ignore-signal" ||
                              opt == "--block-signal" || opt == "--list-signal-handling")) {
        ++k;  // their argument, if any, is attached with '='
        continue;
      }
      const bool flag =
          std::find(w.long_flags.begin(), w.long_flags.end(), opt) != w.long_flags.end();
      const bool takes =
          std::find(w.long_with_arg.begin(), w.long_with_arg.end(), opt) != w.long_with_arg.end();
      if ((!flag && !takes) || (flag && eq != std::string_view::npos)) {
        return refuse("option '" + std::string(opt) + "' is not understood");
      }
      if (takes && opt == "--unset") {
        if (eq != std::string_view::npos) {
          out.unset.push_back(a.substr(eq + 1));
        } else {
          unset_next = true;
        }
      }
      k += (takes && eq == std::string_view::npos) ? 2 : 1;
      if (unset_next) {
        if (k - 1 < argv.size()) out.unset.push_back(argv[k - 1]);
        unset_next = false;
      }
      continue;
    }
    if (w.numeric_option && IsDigit(a[1])) {  // nice -10
      ++k;
      continue;
    }
    if (IsDigit(a[1]) && w.operand_first) break;  // not an option: timeout's duration
    // A cluster of short options: "-pv", "-sKILL", "-k" "5".
    bool consumed_next = false;
    for (std::size_t c = 1; c < a.size(); ++c) {
      const char o = a[c];
      if (w.name == "env" && (o == 'S' || o == 'C')) {
        return refuse(o == 'S' ? "env -S makes a command line of a string"
                               : "env -C runs the command in another directory");
      }
      if (w.name == "time" && (o == 'o' || o == 'a')) {
        return refuse("time -o writes a file; redirect its output instead");
      }
      if (w.no_command.find(o) != std::string_view::npos) {
        out.command = argv.size();
        out.runs_nothing = true;
        return out;
      }
      if (w.flags.find(o) != std::string_view::npos) continue;
      if (w.with_arg.find(o) != std::string_view::npos) {
        std::string_view arg;
        if (c + 1 < a.size()) {
          arg = a.substr(c + 1);
        } else if (k + 1 < argv.size()) {
          arg = argv[k + 1];
          consumed_next = true;
        } else {
          return refuse("option '-" + std::string(1, o) + "' without its argument");
        }
        if (w.name == "env") out.unset.push_back(arg);  // -u is env's only one
        break;
      }
      return refuse("option '-" + std::string(1, o) + "' is not understood");
    }
    k += consumed_next ? 2 : 1;
  }
  if (w.operand_first && k < argv.size()) ++k;  // timeout DURATION
  if (w.assignments) {
    while (k < argv.size() && argv[k].find('=') != std::string_view::npos) {
      out.assignments.push_back(argv[k]);
      ++k;
    }
  }
  out.command = std::min(k, argv.size());
  return out;
}

// Options of GNU findutils 4.9 xargs: its getopt string "+0a:E:e::hi::I:l::L:n:prP:s:txvd:o"
// and its long options (abbreviated long options are refused). Options end at the first operand.
struct XargsArgs {
  std::size_t command = 0;    // argv.size(): it runs echo
  bool runs_nothing = false;  // --help, --version
  bool replace = false;       // -I R, -i[R], --replace[=R]
  std::string_view replace_text;
  std::string_view slot_var;                // --process-slot-var=NAME
  std::vector<std::string_view> arg_files;  // -a FILE, --arg-file=FILE
  std::string error;
};

XargsArgs ParseXargsArgs(const std::vector<std::string_view>& argv) {
  XargsArgs out;
  const auto refuse = [&](const std::string& why) {
    out.error = "cannot tell which command 'xargs' runs: " + why + "; run the command without it";
    return out;
  };
  const auto listed = [](std::initializer_list<std::string_view> list, std::string_view w) {
    return std::find(list.begin(), list.end(), w) != list.end();
  };
  std::size_t k = 1;
  while (k < argv.size()) {
    const std::string_view a = argv[k];
    if (a == "--") {
      ++k;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;
    if (a[1] == '-') {
      const std::size_t eq = a.find('=');
      const std::string_view opt = a.substr(0, eq);
      const bool has_value = eq != std::string_view::npos;
      const std::string_view value = has_value ? a.substr(eq + 1) : std::string_view{};
      if (opt == "--help" || opt == "--version") {
        out.runs_nothing = true;
        return out;
      }
      if (listed({"--null", "--no-run-if-empty", "--verbose", "--interactive", "--exit",
                  "--open-tty", "--show-limits"},
                 opt)) {
        if (has_value) return refuse("option '" + std::string(opt) + "' takes no argument");
        ++k;
        continue;
      }
      if (listed({"--eof", "--replace", "--max-lines"}, opt)) {  // optional argument, after '='
        if (opt == "--replace") {
          out.replace = true;
          out.replace_text = has_value ? value : std::string_view("{}");
        }
        ++k;
        continue;
      }
      if (listed({"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars",
                  "--process-slot-var"},
                 opt)) {
        std::string_view v = value;
        if (!has_value) {
          if (k + 1 >= argv.size()) {
            return refuse("option '" + std::string(opt) + "' without its argument");
          }
          v = argv[k + 1];
        }
        if (opt == "--arg-file") out.arg_files.push_back(v);
        if (opt == "--process-slot-var") out.slot_var = v;
        k += has_value ? 1 : 2;
        continue;
      }
      return refuse("option '" + std::string(opt) + "' is not understood");
    }
    bool consumed_next = false;
    for (std::size_t c = 1; c < a.size(); ++c) {
      const char o = a[c];
      if (o == 'h' || o == 'v') {
        out.runs_nothing = true;
        return out;
      }
      if (std::string_view("0rptxo").find(o) != std::string_view::npos) continue;
      if (std::string_view("eil").find(o) != std::string_view::npos) {
        // An optional argument, only ever attached: -e[EOF] -i[R] -l[N].
        if (o == 'i') {
          out.replace = true;
          out.replace_text = c + 1 < a.size() ? a.substr(c + 1) : std::string_view("{}");
        }
        break;
      }
      if (std::string_view("aEILnPsd").find(o) != std::string_view::npos) {
        std::string_view arg;
        if (c + 1 < a.size()) {
          arg = a.substr(c + 1);
        } else if (k + 1 < argv.size()) {
          arg = argv[k + 1];
          consumed_next = true;
        } else {
          return refuse("option '-" + std::string(1, o) + "' without its argument");
        }
        if (o == 'I') {
          out.replace = true;
          out.replace_text = arg;
        }
        if (o == 'a') out.arg_files.push_back(arg);
        break;
      }
      return refuse("option '-" + std::string(1, o) + "' is not understood");
    }
    k += consumed_next ? 2 : 1;
  }
  out.command = std::min(k, argv.size());
  return out;
}

// Whether `word` (a word's text after quote removal) is exactly one command substitution
// "$( … )": its first "$(" closes at the last byte. Quotes and escapes inside the substitution
// are honoured, so "$(echo '(') x $(echo ')')" is not one.
bool IsOneCommandSubstitution(std::string_view w) {
  if (w.size() < 3 || !w.starts_with("$(") || w[2] == '(' || w.back() != ')') return false;
  int depth = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const char c = w[i];
    if (c == '\\') {
      ++i;
    } else if (c == '\'') {
      const std::size_t close = w.find('\'', i + 1);
      if (close == std::string_view::npos) return false;
      i = close;
    } else if (c == '"') {
      std::size_t j = i + 1;
      while (j < w.size() && w[j] != '"') j += w[j] == '\\' ? 2 : 1;
      if (j >= w.size()) return false;
      i = j;
    } else if (c == '`') {
      return false;  // a backquoted command inside: not worth reading here
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      if (--depth == 0) return i + 1 == w.size();
      if (depth < 0) return false;
    }
  }
  return false;
}

struct WordInfo {
  bool quoted = false;
  bool expansion = false;
  bool glob = false;
  bool tilde = false;
  bool procsub = false;
};

WordInfo InfoOf(const ShellToken& t) { return {t.quoted, t.expansion, t.glob, t.tilde, t.procsub}; }

// What a list stops at: the end of the script, or the word or operator that closes the construct
// it is part of (recognised only where a command would start).
constexpr unsigned kStopEnd = 1U << 0;
constexpr unsigned kStopParen = 1U << 1;
constexpr unsigned kStopBrace = 1U << 2;
constexpr unsigned kStopThen = 1U << 3;
constexpr unsigned kStopElif = 1U << 4;
constexpr unsigned kStopElse = 1U << 5;
constexpr unsigned kStopFi = 1U << 6;
constexpr unsigned kStopDo = 1U << 7;
constexpr unsigned kStopDone = 1U << 8;
constexpr unsigned kStopEsac = 1U << 9;
constexpr unsigned kStopCaseItem = 1U << 10;  // ;; ;& ;;&

unsigned KeywordStop(std::string_view w) {
  if (w.empty() || w.size() > 4) return 0;
  switch (w[0]) {
    case '}':
      return w.size() == 1 ? kStopBrace : 0;
    case 't':
      return w == "then" ? kStopThen : 0;
    case 'e':
      return w == "elif" ? kStopElif : w == "else" ? kStopElse : w == "esac" ? kStopEsac : 0;
    case 'f':
      return w == "fi" ? kStopFi : 0;
    case 'd':
      return w == "do" ? kStopDo : w == "done" ? kStopDone : 0;
    default:
      return 0;
  }
}

// The stdin of the simple command being inspected, when it is a here-document or a here-string
// (a shell there reads it as code).
struct StdinDoc {
  const HereDoc* heredoc = nullptr;
  const ShellToken* word = nullptr;
  [[nodiscard]] bool present() const { return heredoc != nullptr || word != nullptr; }
};

// Recursive descent over the tokens of one script. Commands go to the shared state's `out`
// (nested parsers append to it, so nested code lands right after, or for substitutions right
// before, the command holding it); the first problem sets out.opaque and unwinds.
class ShellParser {
 public:
  ShellParser(const LexedScript& script, int string_depth, ParseState& st, bool bash)
      : lx_(script),
        toks_(script.tokens),
        end_(script.tokens.size()),
        string_depth_(string_depth),
        bash_(bash),
        st_(st),
        out_(st.out) {}

  // script := list EOF
  bool ParseScript() {
    unsigned stop = 0;
    return ParseList(kStopEnd, &stop);
  }
  // Carries the names arithmetic assigns (names.assigned from `from` on) to later commands.
  bool StickAssigned(std::size_t from);
  // The whole-line check of variables read as arithmetic against those set to untrusted text.
  bool CheckArithmeticNames();

 private:
  bool Fail(std::string_view reason) {
    out_.opaque = true;
    out_.opaque_reason = std::string(reason);
    return false;
  }
  [[nodiscard]] const ShellToken& Peek(std::size_t ahead = 0) const {
    const std::size_t k = pos_ + ahead;
    return k < end_ ? toks_[k] : toks_.back();
  }
  [[nodiscard]] bool PeekBareWord(std::string_view w) const {
    return Peek().kind == TokKind::kWord && !Peek().quoted && Peek().text == w;
  }
  [[nodiscard]] bool PeekSeparator(std::string_view s) const {
    return Peek().kind == TokKind::kSeparator && Peek().text == s;
  }
  void SkipNewlines() {
    while (PeekSeparator("\n")) ++pos_;
  }
  // Steps past the current token (a word) and returns its text.
  std::string_view TakeText() { return toks_[pos_++].text; }
  bool Enter() {
    if (++group_depth_ > kMaxGroupNesting) return Fail("( ) or { } groups nested too deep");
    return true;
  }
  bool ParseList(unsigned ends, unsigned* stop);
  bool ParseCommand();
  bool ParseGroup(unsigned end);
  bool ParseIf();
  bool ParseLoop();
  bool ParseFor();
  bool ParseCase();
  bool ParseTest();
  // The redirections after a compound command, which apply to its commands from `first` on.
  bool EndCompound(std::size_t first, std::string_view what);
  bool ParseRedirect(SimpleCommandView& cmd);
  bool ParseSimpleCommand();
  // Parses the substitutions a word holds; their commands are added with run_by naming them.
  bool RunSubstitutions(const ShellToken& t) {
    return t.sub_begin == t.sub_end || dash_reading_ || ParseSubstitutions(t);
  }
  bool ParseSubstitutions(const ShellToken& t);
  bool Inspect(std::size_t index, const std::vector<WordInfo>& info, bool open);
  bool InspectDeclaration(std::size_t index, const std::vector<WordInfo>& info);
  bool InspectLet(const std::vector<std::string_view>& argv);
  bool InspectTest(const std::vector<std::string_view>& argv);
  bool InspectEval(std::size_t index, const std::vector<WordInfo>& info, bool open);
  bool InspectTrap(std::size_t index, const std::vector<WordInfo>& info);
  bool InspectReaders(std::size_t index);
  bool InspectShell(std::size_t index, const std::vector<WordInfo>& info, bool open);
  // Adds the command a wrapper at `index` runs (timeout 60 make: make) after it, and inspects it.
  // `open`: words from xargs's input are appended to the command at `index`.
  bool LookThrough(std::size_t index, const std::vector<WordInfo>& info, const WrapperSpec& wrapper,
                   bool open);
  bool LookThroughXargs(std::size_t index, const std::vector<WordInfo>& info, bool open);
  bool LookThroughFind(std::size_t index, const std::vector<WordInfo>& info, bool open);
  bool LookThroughSource(std::size_t index, const std::vector<WordInfo>& info, bool open);
  // `script` is a word's text (in the script or in out_.owned) or a string in out_.owned: it
  // stays where it is while the nested parse appends to out_.commands.
  bool ParseString(std::string_view script, const WordInfo& info, std::string_view what, bool bash);
  bool ParseCode(std::string_view script, bool bash);
  bool ParseStdinCode(std::string_view shell, bool bash);
  // Fails when a command from `first` on is a shell reading code from the here-document or
  // here-string it inherits.
  bool CheckInheritedCode(std::size_t first, std::string_view what);
  bool CheckArithmeticWord(std::string_view w) {
    std::string why;
    return CheckArithmetic(w, st_.names, why) || Fail(why);
  }
  // NAME[subscript]: bash evaluates the subscript as arithmetic.
  bool CheckSubscript(std::string_view w) {
    const std::size_t open = w.find('[');
    if (open == std::string_view::npos) return true;
    const std::size_t close = w.rfind(']');
    if (close == std::string_view::npos || close < open) return CheckArithmeticWord(w);
    return CheckArithmeticWord(w.substr(open + 1, close - open - 1));
  }
  // Records that the line sets NAME (to text it did not write, when `untrusted`).
  bool NoteSet(std::string_view name, bool untrusted) {
    if (!untrusted) return true;
    if (st_.names.untrusted.size() >= kMaxTrackedNames) return Fail(kTooComplex);
    st_.names.untrusted.push_back(name);
    return true;
  }
  // NAME=value of an assignment word: untrusted when the value holds '[', '$', '`' or a glob.
  bool NoteAssignment(std::string_view word, const WordInfo& info) {
    std::size_t eq = word.find('=');
    if (eq == std::string_view::npos) return true;
    const std::string_view value = word.substr(eq + 1);
    if (eq > 0 && word[eq - 1] == '+') --eq;
    return NoteSet(word.substr(0, eq), info.expansion || info.glob ||
                                           value.find_first_of("[$`") != std::string_view::npos);
  }
  // Carries NAME= (value unknown) to later commands.
  bool StickUnknown(std::string_view name) {
    return AddSticky(out_.owned.emplace_front(std::string(name) + "="));
  }
  // Records NAME=value as set for later commands; a plain '=' replaces earlier values of NAME.
  // False (and opaque) past kMaxStickyAssignments.
  bool AddSticky(std::string_view assignment) {
    const std::size_t eq = assignment.find('=');
    if (eq != std::string_view::npos && eq > 0 && assignment[eq - 1] != '+') {
      const std::string_view name = assignment.substr(0, eq);
      std::erase_if(st_.sticky, [&](std::string_view old) {
        return old.size() > name.size() && old.compare(0, name.size(), name) == 0 &&
               (old[name.size()] == '=' ||
                (old[name.size()] == '+' && old.size() > name.size() + 1 &&
                 old[name.size() + 1] == '='));
      });
    }
    if (st_.sticky.size() >= kMaxStickyAssignments) return Fail(kTooComplex);
    st_.sticky.push_back(assignment);
    return true;
  }
  // Accounts for `n` more strings in the result; false once the budget is spent.
  bool Charge(std::size_t n) {
    if (n > st_.budget) return false;
    st_.budget -= n;
    return true;
  }

  const LexedScript& lx_;
  const std::vector<ShellToken>& toks_;
  std::size_t pos_ = 0;
  // Tokens from here on read as the end: toks_.size(), or less while reading a [[ ]] test as sh.
  std::size_t end_;
  // The words of the simple command being parsed, kept from one command to the next to save
  // allocating it for each (Inspect is done with it before the next command starts).
  std::vector<WordInfo> info_;
  int string_depth_;
  int group_depth_ = 0;
  int wrapper_depth_ = 0;
  bool bash_;  // the code is bash's (bash -c): no sh reading of [[ ]] or of brace words
  bool dash_reading_ = false;  // reading a [[ ]] test as sh (dash) does
  ParseState& st_;
  ShellParseView& out_;
  StdinDoc stdin_doc_;
};

bool ShellParser::StickAssigned(std::size_t from) {
  for (std::size_t k = from; k < st_.names.assigned.size(); ++k) {
    if (!StickUnknown(st_.names.assigned[k])) return false;
  }
  return true;
}

bool ShellParser::CheckArithmeticNames() {
  if (st_.names.arithmetic.empty() || st_.names.untrusted.empty()) return true;
  std::vector<std::string_view> read = st_.names.arithmetic;
  std::vector<std::string_view> set = st_.names.untrusted;
  std::sort(read.begin(), read.end());
  std::sort(set.begin(), set.end());
  std::vector<std::string_view> both;
  std::set_intersection(read.begin(), read.end(), set.begin(), set.end(), std::back_inserter(both));
  if (both.empty()) return true;
  return Fail("variable '" + std::string(both.front()) +
              "' is evaluated as arithmetic ($(( )), let, [[ -eq ]], ${a[i]}) but this line sets "
              "it to text it does not control (read, mapfile, a for loop over a glob or an "
              "expansion, an assignment with '[', '$' or a glob): bash would run any $( ) in an "
              "a[...] subscript of its value");
}

// list := { separator } [ pipeline { separator+ pipeline } ] { separator }   up to a stop
// Every separator (; & && || | |& newline) is treated alike: each side is a command that may run.
// Empty commands between separators (";;", "a ;& b") are skipped (sh would reject the script, so
// nothing runs, and reporting the remaining commands only over-approximates), except that a
// case item's list stops at ;; and ;&.
bool ShellParser::ParseList(unsigned ends, unsigned* stop) {
  std::uint32_t pipeline = 0;
  std::uint32_t stage = 0;
  while (true) {
    while (Peek().kind == TokKind::kSeparator) {
      if ((ends & kStopCaseItem) != 0 && Peek().text == ";" &&
          Peek(1).kind == TokKind::kSeparator && Peek(1).adjacent &&
          (Peek(1).text == ";" || Peek(1).text == "&")) {
        *stop = kStopCaseItem;
        return true;
      }
      ++pos_;
    }
    const ShellToken& t = Peek();
    unsigned here = 0;
    if (t.kind == TokKind::kEnd) {
      here = kStopEnd;
    } else if (t.kind == TokKind::kRParen) {
      here = kStopParen;
    } else if (t.kind == TokKind::kWord && !t.quoted) {
      here = KeywordStop(t.text);
    }
    if (here != 0) {
      if ((ends & here) != 0) {
        *stop = here;
        return true;
      }
      if (here == kStopEnd) {
        if ((ends & kStopParen) != 0) return Fail("unbalanced parentheses: missing ')'");
        if ((ends & kStopBrace) != 0) return Fail("unterminated { } group: missing '}'");
        if ((ends & kStopThen) != 0) return Fail("unterminated if: missing 'then'");
        if ((ends & kStopFi) != 0) return Fail("unterminated if: missing 'fi'");
        if ((ends & kStopDo) != 0) return Fail("unterminated loop: missing 'do'");
        if ((ends & kStopDone) != 0) return Fail("unterminated loop: missing 'done'");
        return Fail("unterminated case: missing 'esac'");
      }
      if (here == kStopParen) return Fail("unbalanced parentheses: unexpected ')'");
      if (here == kStopBrace) return Fail("unbalanced braces: unexpected '}'");
      return Fail("unexpected shell keyword '" + std::string(t.text) + "'");
    }
    const std::size_t first = out_.commands.size();
    if (!ParseCommand()) return false;
    const ShellToken& sep = Peek();
    const bool piped = sep.kind == TokKind::kSeparator && sep.text[0] == '|' &&
                       (sep.text.size() == 1 || sep.text[1] == '&');
    if (pipeline == 0 && piped) {
      pipeline = ++st_.pipelines;
      stage = 0;
    }
    if (pipeline != 0) {
      // A pipeline inside this stage is numbered on from it.
      std::uint32_t deepest = 0;
      for (std::size_t k = first; k < out_.commands.size(); ++k) {
        SimpleCommandView& cmd = out_.commands[k];
        const std::uint32_t inner = cmd.pipeline != 0 ? cmd.stage : 0;
        deepest = std::max(deepest, inner);
        if (stage + inner > std::numeric_limits<std::uint16_t>::max()) return Fail(kTooComplex);
        cmd.pipeline = pipeline;
        cmd.stage = static_cast<std::uint16_t>(stage + inner);
        if (cmd.stage > 0 && cmd.stdin_from == StdinSource::kInherited) {
          cmd.stdin_from = StdinSource::kPipe;
        }
      }
      stage += deepest + 1;
      if (!piped) pipeline = 0;
    }
  }
}

// command := '!'* ( '(' list ')' | '{' list '}' | if | while | until | for | case | '[[' ... ']]'
//                  ) redirect* | simple_command
bool ShellParser::ParseCommand() {
  while (PeekBareWord("!")) ++pos_;  // negation changes only the exit status
  const ShellToken& t = Peek();
  if (t.kind == TokKind::kLParen) {
    if (Peek(1).kind == TokKind::kLParen && Peek(1).adjacent) {
      return Fail("arithmetic command (( )) is not supported");
    }
    return ParseGroup(kStopParen);
  }
  if (t.kind == TokKind::kWord && !t.quoted && !t.text.empty() && t.text.size() <= 5) {
    const std::string_view w = t.text;
    switch (w[0]) {
      case '{':
        if (w.size() == 1) return ParseGroup(kStopBrace);
        break;
      case 'i':
        if (w == "if") return ParseIf();
        break;
      case 'w':
      case 'u':
        if (w == "while" || w == "until") return ParseLoop();
        break;
      case 'f':
        if (w == "for") return ParseFor();
        break;
      case 'c':
        if (w == "case") return ParseCase();
        break;
      case '[':
        if (w == "[[" && !dash_reading_) return ParseTest();
        break;
      default:
        break;
    }
  }
  return ParseSimpleCommand();
}

bool ShellParser::ParseGroup(unsigned end) {
  if (!Enter()) return false;
  const std::size_t first = out_.commands.size();
  ++pos_;
  unsigned stop = 0;
  if (!ParseList(end, &stop)) return false;
  ++pos_;  // ')' or '}'
  --group_depth_;
  return EndCompound(first, "a ( ) or { } group");
}

// if := 'if' list 'then' list { 'elif' list 'then' list } [ 'else' list ] 'fi'
bool ShellParser::ParseIf() {
  if (!Enter()) return false;
  const std::size_t first = out_.commands.size();
  ++pos_;
  unsigned stop = 0;
  while (true) {
    if (!ParseList(kStopThen, &stop)) return false;
    ++pos_;
    if (!ParseList(kStopElif | kStopElse | kStopFi, &stop)) return false;
    ++pos_;
    if (stop == kStopElif) continue;
    if (stop == kStopElse) {
      if (!ParseList(kStopFi, &stop)) return false;
      ++pos_;
    }
    break;
  }
  --group_depth_;
  return EndCompound(first, "if ... fi");
}

// loop := ( 'while' | 'until' ) list 'do' list 'done'
bool ShellParser::ParseLoop() {
  if (!Enter()) return false;
  const std::size_t first = out_.commands.size();
  ++pos_;
  unsigned stop = 0;
  if (!ParseList(kStopDo, &stop)) return false;
  ++pos_;
  if (!ParseList(kStopDone, &stop)) return false;
  ++pos_;
  --group_depth_;
  return EndCompound(first, "a loop");
}

// for := 'for' NAME newline* [ 'in' word* ( ';' | newline ) ] separator* 'do' list 'done'
bool ShellParser::ParseFor() {
  if (!Enter()) return false;
  const std::size_t first = out_.commands.size();
  ++pos_;
  if (Peek().kind == TokKind::kLParen) {
    return Fail("arithmetic for loop for (( )) is not supported");
  }
  const ShellToken& var = Peek();
  if (var.kind != TokKind::kWord || var.quoted || !IsName(var.text)) {
    return Fail("a for loop's variable must be a plain name");
  }
  const std::string_view name = var.text;
  ++pos_;
  SkipNewlines();
  // Without 'in' it loops over the positional parameters: text the line does not control.
  bool untrusted = true;
  if (PeekBareWord("in")) {
    ++pos_;
    untrusted = false;
    while (Peek().kind == TokKind::kWord) {
      const ShellToken& w = Peek();
      if (!RunSubstitutions(w)) return false;
      untrusted = untrusted || w.expansion || w.glob || w.brace || w.tilde ||
                  w.text.find('[') != std::string_view::npos;
      ++pos_;
    }
    if (!PeekSeparator(";") && !PeekSeparator("\n")) {
      return Fail("a for loop's words must end with ';' or a newline");
    }
  }
  while (PeekSeparator(";") || PeekSeparator("\n")) ++pos_;
  if (!PeekBareWord("do")) return Fail("for loop without 'do'");
  ++pos_;
  if (!StickUnknown(name) || !NoteSet(name, untrusted)) return false;
  unsigned stop = 0;
  if (!ParseList(kStopDone, &stop)) return false;
  ++pos_;
  --group_depth_;
  return EndCompound(first, "a loop");
}

// case := 'case' word newline* 'in' { newline* [ '(' ] word { '|' word } ')' list
//         [ ';;' | ';&' | ';;&' ] } newline* 'esac'
bool ShellParser::ParseCase() {
  if (!Enter()) return false;
  const std::size_t first = out_.commands.size();
  ++pos_;
  if (Peek().kind != TokKind::kWord) return Fail("case without a word to match");
  if (!RunSubstitutions(Peek())) return false;
  ++pos_;
  SkipNewlines();
  if (!PeekBareWord("in")) return Fail("case without 'in'");
  ++pos_;
  while (true) {
    SkipNewlines();
    if (PeekBareWord("esac")) {
      ++pos_;
      break;
    }
    if (Peek().kind == TokKind::kEnd) return Fail("unterminated case: missing 'esac'");
    if (Peek().kind == TokKind::kLParen) ++pos_;
    while (true) {
      if (Peek().kind != TokKind::kWord) return Fail("case item without a pattern");
      if (!RunSubstitutions(Peek())) return false;
      ++pos_;
      if (!PeekSeparator("|")) break;
      ++pos_;
    }
    if (Peek().kind != TokKind::kRParen) return Fail("case pattern without its ')'");
    ++pos_;
    unsigned stop = 0;
    if (!ParseList(kStopCaseItem | kStopEsac, &stop)) return false;
    if (stop == kStopEsac) {
      ++pos_;
      break;
    }
    const bool double_semicolon = Peek(1).text == ";";
    pos_ += 2;                                                              // ;; or ;&
    if (double_semicolon && PeekSeparator("&") && Peek().adjacent) ++pos_;  // ;;&
  }
  --group_depth_;
  return EndCompound(first, "case ... esac");
}

// test := '[[' ( word | operator )* ']]'
bool ShellParser::ParseTest() {
  const std::size_t open = pos_;
  std::size_t close = pos_ + 1;
  bool separators = false;
  bool redirections = false;
  bool parens = false;
  for (;; ++close) {
    if (close >= end_ || toks_[close].kind == TokKind::kEnd) {
      return Fail("unterminated [[ ]] test: missing ']]'");
    }
    const ShellToken& t = toks_[close];
    if (t.kind == TokKind::kWord && !t.quoted && t.text == "]]") break;
    if (t.kind == TokKind::kSeparator) separators = true;
    if (t.kind == TokKind::kLParen || t.kind == TokKind::kRParen) parens = true;
    if (t.kind == TokKind::kRedirect) {
      if (t.redir == RedirKind::kHereDoc || t.redir == RedirKind::kHereString) {
        return Fail("here-document or here-string inside [[ ]] is not supported");
      }
      redirections = true;
    }
  }
  if (!bash_ && parens && (separators || redirections)) {
    return Fail(
        "[[ ]] with parentheses and && || < > means different things in bash and in sh (dash); "
        "use bash -c '...' or [ ] tests");
  }
  const std::size_t first = out_.commands.size();
  SimpleCommandView cmd;
  cmd.argv.reserve(close - open + 1);
  for (std::size_t k = open; k <= close; ++k) {
    if (toks_[k].kind == TokKind::kWord && !RunSubstitutions(toks_[k])) return false;
    cmd.argv.push_back(toks_[k].text);
  }
  // Operands of arithmetic comparisons are evaluated as arithmetic; -v NAME[i] too.
  const std::vector<std::string_view>& argv = cmd.argv;
  for (std::size_t k = 1; k + 1 < argv.size(); ++k) {
    const std::string_view a = argv[k];
    if (a == "-eq" || a == "-ne" || a == "-lt" || a == "-le" || a == "-gt" || a == "-ge") {
      if (!CheckArithmeticWord(argv[k - 1]) || !CheckArithmeticWord(argv[k + 1])) return false;
    } else if (a == "-v" && !CheckSubscript(argv[k + 1])) {
      return false;
    }
  }
  if (!st_.sticky.empty()) {
    cmd.assignments.insert(cmd.assignments.begin(), st_.sticky.begin(), st_.sticky.end());
  }
  if (!Charge(cmd.argv.size() + cmd.assignments.size())) return Fail(kTooComplex);
  out_.commands.push_back(std::move(cmd));
  pos_ = close + 1;
  if (!bash_ && (separators || redirections)) {
    // sh (dash) has no [[: `[[ a || b ]]` runs `[[ a` and then `b ]]`.
    const std::size_t dash_first = out_.commands.size();
    const std::size_t saved_end = end_;
    pos_ = open;
    end_ = close + 1;
    dash_reading_ = true;
    unsigned stop = 0;
    const bool ok = ParseList(kStopEnd, &stop);
    dash_reading_ = false;
    end_ = saved_end;
    pos_ = close + 1;
    if (!ok) return false;
    for (std::size_t k = dash_first; k < out_.commands.size(); ++k) {
      if (out_.commands[k].run_by.empty()) out_.commands[k].run_by = kRunByDashTest;
    }
  }
  return EndCompound(first, "[[ ]]");
}

bool ShellParser::EndCompound(std::size_t first, std::string_view what) {
  // Redirections of a compound command apply to every command inside it.
  SimpleCommandView redirs;
  const StdinDoc saved = stdin_doc_;
  stdin_doc_ = {};
  while (Peek().kind == TokKind::kRedirect) {
    if (!ParseRedirect(redirs)) return false;
  }
  const bool doc = stdin_doc_.present();
  stdin_doc_ = saved;
  if (first == out_.commands.size() && (!redirs.writes.empty() || !redirs.reads.empty())) {
    return Fail("redirection without a command");
  }
  const std::size_t targets = redirs.writes.size() + redirs.reads.size();
  if (!Charge(targets * (out_.commands.size() - first))) return Fail(kTooComplex);
  for (std::size_t k = first; k < out_.commands.size(); ++k) {
    SimpleCommandView& cmd = out_.commands[k];
    cmd.writes.insert(cmd.writes.end(), redirs.writes.begin(), redirs.writes.end());
    cmd.reads.insert(cmd.reads.end(), redirs.reads.begin(), redirs.reads.end());
    if (redirs.stdin_from != StdinSource::kInherited && cmd.stdin_from == StdinSource::kInherited) {
      cmd.stdin_from = redirs.stdin_from;
    }
  }
  if (doc && !CheckInheritedCode(first, what)) return false;
  const ShellToken& next = Peek();
  if (next.kind == TokKind::kWord && (next.quoted || KeywordStop(next.text) == 0)) {
    return Fail("unexpected word after " + std::string(what));
  }
  if (next.kind == TokKind::kLParen) return Fail("unexpected '(' after " + std::string(what));
  return true;
}

bool ShellParser::CheckInheritedCode(std::size_t first, std::string_view what) {
  for (std::size_t k = first; k < out_.commands.size(); ++k) {
    const SimpleCommandView& cmd = out_.commands[k];
    if (cmd.stdin_is_code && (cmd.stdin_from == StdinSource::kInherited ||
                              cmd.stdin_from == StdinSource::kHereDocument ||
                              cmd.stdin_from == StdinSource::kHereString)) {
      return Fail("a shell inside " + std::string(what) +
                  " reads a here-document or here-string as code, which cannot be checked; "
                  "give it to the shell directly (bash <<'EOF')");
    }
  }
  return true;
}

// redirect := redirection_operator word
bool ShellParser::ParseRedirect(SimpleCommandView& cmd) {
  const ShellToken& op_token = Peek();
  const RedirKind kind = op_token.redir;
  const std::string_view op = op_token.text;
  // An input redirection of another descriptor (3<file) leaves stdin as it is.
  const bool is_stdin = !op_token.other_fd;
  ++pos_;
  if (Peek().kind != TokKind::kWord) {
    return Fail("redirection '" + std::string(op) + "' without a target");
  }
  const ShellToken& target = Peek();
  if (!RunSubstitutions(target)) return false;
  if (kind == RedirKind::kHereDoc || kind == RedirKind::kHereString) {
    // Data for stdin: recorded nowhere (its substitutions are listed above).
    if (is_stdin) {
      cmd.stdin_from =
          kind == RedirKind::kHereDoc ? StdinSource::kHereDocument : StdinSource::kHereString;
      stdin_doc_ = {};
      if (kind == RedirKind::kHereString) {
        stdin_doc_.word = &target;
      } else {
        for (const HereDoc& h : lx_.heredocs) {
          if (h.token == pos_) stdin_doc_.heredoc = &h;
        }
      }
    }
    ++pos_;
    return true;
  }
  if (target.procsub) {
    // A pipe to or from the commands inside (listed above), not a file.
    if (is_stdin && (kind == RedirKind::kRead || kind == RedirKind::kReadWrite)) {
      cmd.stdin_from = StdinSource::kPipe;
      stdin_doc_ = {};
    }
    ++pos_;
    return true;
  }
  // Unlike an argument, which a policy only matches against patterns, a target is resolved as a
  // path: "$PWD/.git/config" would be judged as a workspace directory named "$PWD", "~user/x"
  // as a workspace path. The shell expands them first, so we cannot know the file.
  if (target.expansion || target.tilde || target.glob || target.brace) {
    return Fail("expansion ($X, ~, *) in a redirection target cannot be checked before it runs");
  }
  const std::string_view text = TakeText();
  bool fd_move = false;
  if (kind == RedirKind::kDupOut || kind == RedirKind::kDupIn) {
    // ">&2", "<&0", ">&-", "2>&1-": fd duplication, closing or moving; not a file.
    std::string_view t = text;
    if (t.size() > 1 && t.back() == '-') t.remove_suffix(1);
    fd_move = !t.empty();
    if (t != "-") {
      for (char c : t) fd_move = fd_move && IsDigit(c);
    }
  }
  if (fd_move) {
    if (kind == RedirKind::kDupIn && is_stdin) {
      cmd.stdin_from = StdinSource::kInherited;  // another descriptor of the shell's
      stdin_doc_ = {};
    }
    return true;
  }
  switch (kind) {
    case RedirKind::kRead:
    case RedirKind::kDupIn:
      cmd.reads.push_back(text);
      break;
    case RedirKind::kWrite:
    case RedirKind::kDupOut:
      cmd.writes.push_back(text);
      return true;
    case RedirKind::kReadWrite:
      cmd.reads.push_back(text);
      cmd.writes.push_back(text);
      break;
    case RedirKind::kHereDoc:
    case RedirKind::kHereString:
      break;
  }
  if (is_stdin) {
    cmd.stdin_from = StdinSource::kFile;
    stdin_doc_ = {};
  }
  return true;
}

bool ShellParser::ParseSubstitutions(const ShellToken& t) {
  for (std::uint32_t k = t.sub_begin; k < t.sub_end; ++k) {
    const Substitution& sub = lx_.subs[k];
    const std::size_t first = out_.commands.size();
    ShellParser inner(sub.script, sub.depth, st_, bash_);
    if (!inner.ParseScript()) return false;
    const std::string_view by = sub.kind == SubKind::kCommand        ? kRunByCommandSubstitution
                                : sub.kind == SubKind::kInputProcess ? kRunByInputProcess
                                                                     : kRunByOutputProcess;
    for (std::size_t c = first; c < out_.commands.size(); ++c) {
      if (out_.commands[c].run_by.empty()) out_.commands[c].run_by = by;
    }
  }
  return true;
}

// simple_command := ( assignment | redirect )* ( word | redirect )*
bool ShellParser::ParseSimpleCommand() {
  SimpleCommandView cmd;
  std::vector<WordInfo>& info = info_;
  info.clear();
  stdin_doc_ = {};
  // At most this many words (arguments, assignments, redirection targets) before the next
  // separator; reserving for them saves growing argv and info one word at a time.
  std::size_t words = 0;
  for (std::size_t k = pos_; k < end_; ++k) {
    if (toks_[k].kind == TokKind::kWord) {
      ++words;
    } else if (toks_[k].kind != TokKind::kRedirect) {
      break;
    }
  }
  cmd.argv.reserve(words);
  info.reserve(words);
  // The words as written, once a brace expansion made them differ (what dash runs).
  bool braces = false;
  std::vector<std::string_view> literal;
  std::vector<WordInfo> literal_info;
  bool after_amp_redirect = false;
  while (true) {
    const ShellToken& t = Peek();
    if (t.kind == TokKind::kWord) {
      // bash reads "a &>f b" as a(b) writing f; POSIX sh (dash is /bin/sh on Debian) as "a &"
      // then "b >f". With no word after the target both readings run the same commands.
      if (after_amp_redirect) {
        return Fail(
            "'&>' followed by more words means different things in bash and sh; write "
            "'>file 2>&1' at the end of the command");
      }
      if (!RunSubstitutions(t)) return false;
      const WordInfo wi = InfoOf(t);
      if (cmd.argv.empty() && t.assignment) {
        if (!NoteAssignment(t.text, wi)) return false;
        cmd.assignments.push_back(TakeText());
        continue;
      }
      if (cmd.argv.empty() && !t.quoted && IsReservedWord(t.text) &&
          !(dash_reading_ && t.text == "[[")) {
        return Fail("shell keyword '" + std::string(t.text) +
                    "' is not supported here; write simple commands joined by ;, && or ||");
      }
      if (t.brace && !dash_reading_) {
        if (cmd.argv.empty()) {
          return Fail("brace expansion {a,b} in the command name cannot be checked before it runs");
        }
        if (!braces && !bash_) {
          braces = true;
          literal = cmd.argv;
          literal_info = info;
        }
        for (std::uint32_t k = t.brace_begin; k < t.brace_end; ++k) {
          cmd.argv.push_back(lx_.brace_words[k]);
          info.push_back(wi);
        }
        if (braces) {
          literal.push_back(t.text);
          literal_info.push_back(wi);
        }
        ++pos_;
        continue;
      }
      info.push_back(wi);
      cmd.argv.push_back(TakeText());
      if (braces) {
        literal.push_back(cmd.argv.back());
        literal_info.push_back(wi);
      }
    } else if (t.kind == TokKind::kRedirect) {
      if (t.text.starts_with("&>")) after_amp_redirect = true;
      if (!ParseRedirect(cmd)) return false;
    } else if (t.kind == TokKind::kLParen) {
      if (cmd.argv.size() == 1 && Peek(1).kind == TokKind::kRParen) {
        return Fail("function definition '" + std::string(cmd.argv[0]) + "()' is not supported");
      }
      return Fail("unexpected '(' in a command");
    } else {
      break;  // separator, ')' or end
    }
  }
  if (cmd.argv.empty()) {
    if (!cmd.writes.empty() || !cmd.reads.empty()) return Fail("redirection without a command");
    // A bare NAME=value changes the shell's variables for every later command (PATH=/x; git),
    // so it is carried into their assignments.
    for (const std::string_view a : cmd.assignments) {
      if (!AddSticky(a)) return false;
    }
    return true;
  }
  if (info[0].expansion) {
    return Fail("parameter expansion in the command name ($X) cannot be checked before it runs");
  }
  if (info[0].glob) {
    return Fail(
        "pathname expansion (*, ?, [...]) in the command name cannot be checked before "
        "it runs");
  }
  if (!st_.sticky.empty()) {
    cmd.assignments.insert(cmd.assignments.begin(), st_.sticky.begin(), st_.sticky.end());
  }
  if (!Charge(cmd.argv.size() + cmd.assignments.size() + cmd.writes.size() + cmd.reads.size())) {
    return Fail(kTooComplex);
  }
  if (!braces) {
    out_.commands.push_back(std::move(cmd));
    return Inspect(out_.commands.size() - 1, info, false);
  }
  SimpleCommandView as_written = cmd;
  as_written.argv = std::move(literal);
  if (!Charge(as_written.argv.size() + as_written.assignments.size() + as_written.writes.size() +
              as_written.reads.size())) {
    return Fail(kTooComplex);
  }
  out_.commands.push_back(std::move(cmd));
  if (!Inspect(out_.commands.size() - 1, info, false)) return false;
  out_.commands.push_back(std::move(as_written));
  return Inspect(out_.commands.size() - 1, literal_info, false);
}

// Looks inside commands that run other commands or code (sh -c, eval, trap, wrappers, xargs,
// find -exec, source) and records variables set for later commands (export and friends, read,
// mapfile, getopts, printf -v, let).
// `index` is the command's place in out_.commands. A nested parse appends to out_.commands, so
// the references taken here are not used after one. `open`: the command gets words from xargs's
// input appended.
bool ShellParser::Inspect(std::size_t index, const std::vector<WordInfo>& info, bool open) {
  if (open) out_.commands[index].more_args = true;
  const std::vector<std::string_view>& argv = out_.commands[index].argv;
  const std::string_view name = argv[0];
  const std::string_view base = BaseName(name);
  if (base.empty()) return true;
  // Builtins by their exact name; commands looked through by name or by a path ending in it.
  // Told apart by the first byte first: most commands are none of them.
  const bool path = base.size() != name.size();
  switch (base[0]) {
    case 'e':
      if (!path && base == "export") return InspectDeclaration(index, info);
      if (!path && base == "eval") return InspectEval(index, info, open);
      break;
    case 'r':
      if (!path && (base == "readonly")) return InspectDeclaration(index, info);
      if (!path && (base == "read" || base == "readarray")) return InspectReaders(index);
      break;
    case 'd':
      if (!path && base == "declare") return InspectDeclaration(index, info);
      break;
    case 't':
      if (!path && base == "typeset") return InspectDeclaration(index, info);
      if (!path && base == "test") return InspectTest(argv);
      if (!path && base == "trap") return InspectTrap(index, info);
      break;
    case 'l':
      if (!path && base == "local") return InspectDeclaration(index, info);
      if (!path && base == "let") return InspectLet(argv);
      break;
    case 'u':
      if (!path && base == "unset") return InspectDeclaration(index, info);
      break;
    case 'm':
      if (!path && base == "mapfile") return InspectReaders(index);
      break;
    case 'g':
      if (!path && base == "getopts") return InspectReaders(index);
      break;
    case 'p':
      if (!path && base == "printf") return InspectReaders(index);
      break;
    case '[':
      if (!path && base == "[") return InspectTest(argv);
      break;
    case 'a':
      if (!path && base == "alias") {
        for (std::size_t k = 1; k < argv.size(); ++k) {
          if (argv[k].find('=') != std::string_view::npos) {
            return Fail("alias definitions change how later commands are parsed");
          }
        }
        return true;
      }
      break;
    case 's':
      if (!path && base == "source") return LookThroughSource(index, info, open);
      break;
    case '.':
      if (!path && base == ".") return LookThroughSource(index, info, open);
      break;
    case 'x':
      if (base == "xargs") return LookThroughXargs(index, info, open);
      break;
    case 'f':
      if (base == "find") return LookThroughFind(index, info, open);
      break;
    default:
      break;
  }
  if (std::string_view("tnsiec").find(base[0]) != std::string_view::npos) {
    if (const WrapperSpec* wrapper = FindWrapper(base)) {
      return LookThrough(index, info, *wrapper, open);
    }
  }
  if (std::string_view("sbdakmzr").find(base[0]) != std::string_view::npos && IsShellName(base)) {
    return InspectShell(index, info, open);
  }
  return true;
}

bool ShellParser::InspectLet(const std::vector<std::string_view>& argv) {
  const std::size_t assigned = st_.names.assigned.size();
  for (std::size_t k = 1; k < argv.size(); ++k) {
    if (!CheckArithmeticWord(argv[k])) return false;
  }
  return StickAssigned(assigned);
}

// bash's test -v NAME[i] evaluates the subscript.
bool ShellParser::InspectTest(const std::vector<std::string_view>& argv) {
  for (std::size_t k = 1; k + 1 < argv.size(); ++k) {
    if (argv[k] == "-v" && !CheckSubscript(argv[k + 1])) return false;
  }
  return true;
}

// eval joins its arguments with spaces and runs the result.
bool ShellParser::InspectEval(std::size_t index, const std::vector<WordInfo>& info, bool open) {
  if (open) return Fail("'xargs' would run eval on words from its input");
  const std::vector<std::string_view>& argv = out_.commands[index].argv;
  // eval "$(CMD)": the code is CMD's output, and CMD was parsed with the word. Nothing else may
  // be in the code: a literal part would run unseen.
  if (argv.size() == 2 && info[1].expansion && !info[1].glob && !info[1].tilde &&
      !info[1].procsub && IsOneCommandSubstitution(argv[1])) {
    out_.commands[index].code_from_output = true;
    return true;
  }
  std::string& script = out_.owned.emplace_front();
  WordInfo merged;
  for (std::size_t k = 1; k < argv.size(); ++k) {
    if (k > 1) script += ' ';
    script += argv[k];
    merged.expansion = merged.expansion || info[k].expansion;
    merged.glob = merged.glob || info[k].glob;
    merged.tilde = merged.tilde || info[k].tilde;
  }
  return ParseString(script, merged, "eval", bash_);
}

// trap [--] action condition...: the action runs later as shell code.
bool ShellParser::InspectTrap(std::size_t index, const std::vector<WordInfo>& info) {
  const std::vector<std::string_view>& argv = out_.commands[index].argv;
  std::size_t k = 1;
  if (k < argv.size() && argv[k] == "--") ++k;
  if (k + 1 < argv.size() && argv[k] != "-" && !(argv[k].size() > 1 && argv[k][0] == '-')) {
    return ParseString(argv[k], info[k], "trap", bash_);
  }
  return true;
}

// export|readonly|declare|typeset|local|unset [options] [NAME[=value]...]
bool ShellParser::InspectDeclaration(std::size_t index, const std::vector<WordInfo>& info) {
  const std::vector<std::string_view>& argv = out_.commands[index].argv;
  const bool declares = argv[0] == "declare" || argv[0] == "typeset" || argv[0] == "local";
  bool options = true;
  for (std::size_t k = 1; k < argv.size(); ++k) {
    const std::string_view a = argv[k];
    if (options && a.size() > 1 && (a[0] == '-' || a[0] == '+')) {
      if (a == "--") {
        options = false;
      } else if (declares && a.find_first_of("in") != std::string_view::npos) {
        return Fail(
            "declare -i and -n make later assignments to the variable code; they cannot "
            "be checked");
      }
      continue;
    }
    options = false;
    const std::size_t eq = a.find('=');
    // bash evaluates the subscript of NAME[i]=value and of unset NAME[i].
    if (!CheckSubscript(eq == std::string_view::npos ? a : a.substr(0, eq))) return false;
    if (argv[0] != "unset" && eq != std::string_view::npos && eq > 0 && IsNameStart(a[0])) {
      if (!NoteAssignment(a, info[k]) || !AddSticky(a)) return false;
    }
  }
  return true;
}

// read, mapfile/readarray, getopts, printf -v: the names they set are carried as "NAME=".
bool ShellParser::InspectReaders(std::size_t index) {
  const std::vector<std::string_view> argv = out_.commands[index].argv;  // a copy: StickUnknown
  const std::string_view cmd = argv[0];
  std::vector<std::string_view> names;
  std::size_t k = 1;
  if (cmd == "printf") {
    if (argv.size() > 1 && argv[1].starts_with("-v")) {
      if (argv[1].size() > 2) {
        names.push_back(argv[1].substr(2));
      } else if (argv.size() > 2) {
        names.push_back(argv[2]);
      }
    }
  } else if (cmd == "getopts") {
    if (argv.size() > 2) names.push_back(argv[2]);
    names.push_back("OPTARG");
    names.push_back("OPTIND");
  } else {
    // read: -a NAME -d D -i T -n N -N N -p P -t T -u FD take an argument; mapfile: -d -n -O -s
    // -u -C -c. Other letters are flags.
    const bool is_read = cmd == "read";
    const std::string_view with_arg = is_read ? "adinNptu" : "dnOsuCc";
    while (k < argv.size() && argv[k].size() > 1 && argv[k][0] == '-') {
      const std::string_view a = argv[k];
      if (a == "--") {
        ++k;
        break;
      }
      bool consumed_next = false;
      for (std::size_t c = 1; c < a.size(); ++c) {
        const char o = a[c];
        if (with_arg.find(o) == std::string_view::npos) continue;
        if (!is_read && o == 'C') {
          return Fail("mapfile -C runs its callback as code, which cannot be checked");
        }
        std::string_view arg;
        if (c + 1 < a.size()) {
          arg = a.substr(c + 1);
        } else if (k + 1 < argv.size()) {
          arg = argv[k + 1];
          consumed_next = true;
        }
        if (is_read && o == 'a') names.push_back(arg);
        break;
      }
      k += consumed_next ? 2 : 1;
    }
    if (is_read) {
      for (; k < argv.size(); ++k) names.push_back(argv[k]);
      if (names.empty()) names.push_back("REPLY");
    } else {
      names.push_back(k < argv.size() ? argv[k] : std::string_view("MAPFILE"));
    }
  }
  for (const std::string_view n : names) {
    // A subscript (read 'a[$(id)]') or an expansion would be evaluated or could name any
    // variable.
    if (!IsName(n)) {
      return Fail(std::string(cmd) + " into '" + std::string(n) +
                  "': only plain variable names can be checked");
    }
    // getopts sets OPTIND to a number; everything else here is text from input or arguments.
    if (!StickUnknown(n) || !NoteSet(n, n != "OPTIND")) return false;
  }
  return true;
}

// sh [options] -c string [name [args...]] or sh [options] [script [args...]]: options may come
// in any order and clusters ("-ec", "-xc"); -o and -O take an argument; the string or the script
// is the first operand after them.
bool ShellParser::InspectShell(std::size_t index, const std::vector<WordInfo>& info, bool open) {
  const std::vector<std::string_view>& argv = out_.commands[index].argv;
  const std::string_view name = argv[0];
  const std::string_view base = BaseName(name);
  const bool bash = base == "bash" || base == "rbash";
  bool has_c = false;
  bool has_s = false;
  std::size_t k = 1;
  while (k < argv.size()) {
    const std::string_view a = argv[k];
    if (a == "--" || a == "-") {
      ++k;
      break;
    }
    if (a.size() > 2 && a[0] == '-' && a[1] == '-') {
      k += (a == "--rcfile" || a == "--init-file") ? 2 : 1;
      continue;
    }
    if (a.size() > 1 && (a[0] == '-' || a[0] == '+')) {
      for (std::size_t c = 1; c < a.size(); ++c) {
        if (a[c] == 'c') has_c = true;
        if (a[c] == 's' && a[0] == '-') has_s = true;
        if (a[c] == 'o' || a[c] == 'O') ++k;
      }
      ++k;
      continue;
    }
    break;
  }
  if (has_c) {
    if (k >= argv.size()) return Fail(std::string(name) + " -c without a command string");
    const bool doc = stdin_doc_.present();
    const std::size_t first = out_.commands.size();
    if (!ParseString(argv[k], info[k], std::string(name) + " -c", bash)) return false;
    return !doc || CheckInheritedCode(first, std::string(name) + " -c");
  }
  const bool from_stdin = k >= argv.size() || has_s || argv[k] == "/dev/stdin" ||
                          argv[k] == "/dev/fd/0" || argv[k] == "/proc/self/fd/0";
  if (!from_stdin && info[k].procsub) {
    return Fail(
        "a shell running a process substitution <( ) as its script runs code that cannot "
        "be checked");
  }
  if (open) {
    return Fail("'xargs' would run '" + std::string(name) +
                "' with a script named by its input; use sh -c '...' with the words as "
                "arguments");
  }
  if (!from_stdin) return true;
  out_.commands[index].stdin_is_code = true;
  if (out_.commands[index].stdin_from == StdinSource::kPipe) {
    return Fail(
        "a shell reading its code from a process substitution <( ) runs code that cannot "
        "be checked");
  }
  if (!stdin_doc_.present()) return true;
  return ParseStdinCode(name, bash);
}

bool ShellParser::ParseStdinCode(std::string_view shell, bool bash) {
  if (stdin_doc_.word != nullptr) {
    const ShellToken& w = *stdin_doc_.word;
    return ParseString(w.text, InfoOf(w), std::string(shell) + " <<<", bash);
  }
  const HereDoc& h = *stdin_doc_.heredoc;
  if (!h.quoted && h.body.find_first_of("$`") != std::string_view::npos) {
    return Fail("a here-document with an unquoted delimiter and $ or ` in it, fed to " +
                std::string(shell) + " as code, cannot be checked; quote the delimiter (<<'EOF')");
  }
  std::string_view code = h.body;
  if (h.strip_tabs || (!h.quoted && code.find('\\') != std::string_view::npos)) {
    // What the shell reads: without the leading tabs (<<-) and, unquoted, with \\ and
    // backslash-newline processed.
    std::string& own = out_.owned.emplace_front();
    own.reserve(code.size());
    bool line_start = true;
    for (std::size_t k = 0; k < code.size(); ++k) {
      const char c = code[k];
      if (line_start && h.strip_tabs && c == '\t') continue;
      line_start = c == '\n';
      if (!h.quoted && c == '\\' && k + 1 < code.size()) {
        if (code[k + 1] == '\n') {
          ++k;
          continue;
        }
        if (code[k + 1] == '\\') ++k;
      }
      own += code[k];
    }
    code = own;
  }
  return ParseCode(code, bash);
}

bool ShellParser::LookThrough(std::size_t index, const std::vector<WordInfo>& info,
                              const WrapperSpec& wrapper, bool open) {
  // Copies: the push_back below may move out_.commands.
  const std::vector<std::string_view> argv = out_.commands[index].argv;
  const std::vector<std::string_view> outer_assignments = out_.commands[index].assignments;
  WrapperArgs args = ParseWrapperArgs(wrapper, argv);
  if (!args.error.empty()) return Fail(args.error);
  if (args.command >= argv.size()) {
    if (open && !args.runs_nothing) {
      return Fail("'xargs' would run '" + std::string(argv[0]) +
                  "' with the command taken from its input");
    }
    return true;  // it runs nothing (command -v, ionice -p)
  }
  if (++wrapper_depth_ > kMaxWrapperNesting) {
    return Fail("commands wrapped in more than " + std::to_string(kMaxWrapperNesting) +
                " wrappers (timeout, env, nice ...) cannot be checked");
  }
  const WordInfo& name = info[args.command];
  if (name.expansion) {
    return Fail("parameter expansion in the command name ($X) cannot be checked before it runs");
  }
  if (name.glob) {
    return Fail(
        "pathname expansion (*, ?, [...]) in the command name cannot be checked before "
        "it runs");
  }
  SimpleCommandView inner;
  inner.argv.assign(argv.begin() + static_cast<std::ptrdiff_t>(args.command), argv.end());
  inner.assignments = outer_assignments;
  inner.assignments.insert(inner.assignments.end(), args.assignments.begin(),
                           args.assignments.end());
  for (std::size_t k = 0; k < args.assignments.size(); ++k) {
    if (!NoteAssignment(args.assignments[k], info[args.command - args.assignments.size() + k])) {
      return false;
    }
  }
  for (const std::string_view name_unset : args.unset) {
    // Unsetting PATH (or LD_PRELOAD...) changes what runs as much as setting it: judged as an
    // assignment of the empty value.
    inner.assignments.push_back(out_.owned.emplace_front(std::string(name_unset) + "="));
  }
  inner.run_by = argv[0];
  inner.stdin_from = out_.commands[index].stdin_from;
  if (!Charge(inner.argv.size() + inner.assignments.size())) return Fail(kTooComplex);
  const std::vector<WordInfo> inner_info(info.begin() + static_cast<std::ptrdiff_t>(args.command),
                                         info.end());
  out_.commands.push_back(std::move(inner));
  const bool ok = Inspect(out_.commands.size() - 1, inner_info, open);
  --wrapper_depth_;
  return ok;
}

bool ShellParser::LookThroughXargs(std::size_t index, const std::vector<WordInfo>& info,
                                   bool open) {
  // Copies: the push_back below may move out_.commands.
  const std::vector<std::string_view> argv = out_.commands[index].argv;
  const std::vector<std::string_view> outer_assignments = out_.commands[index].assignments;
  XargsArgs args = ParseXargsArgs(argv);
  if (!args.error.empty()) return Fail(args.error);
  if (args.runs_nothing) return true;
  for (const std::string_view file : args.arg_files) {
    if (file.empty() || file[0] == '~' || file.find_first_of("$`*?[") != std::string_view::npos) {
      return Fail("expansion ($X, ~, *) in the file of xargs -a cannot be checked before it runs");
    }
    if (!Charge(1)) return Fail(kTooComplex);
    out_.commands[index].reads.push_back(file);
  }
  if (open && args.command >= argv.size()) {
    return Fail("'xargs' would run 'xargs' with the command taken from its input");
  }
  if (++wrapper_depth_ > kMaxWrapperNesting) {
    return Fail("commands wrapped in more than " + std::to_string(kMaxWrapperNesting) +
                " wrappers (timeout, env, xargs ...) cannot be checked");
  }
  SimpleCommandView inner;
  std::vector<WordInfo> inner_info;
  if (args.command >= argv.size()) {
    inner.argv.emplace_back("echo");  // xargs without a command runs echo
    inner_info.emplace_back();
  } else {
    inner.argv.assign(argv.begin() + static_cast<std::ptrdiff_t>(args.command), argv.end());
    inner_info.assign(info.begin() + static_cast<std::ptrdiff_t>(args.command), info.end());
  }
  if (args.replace) {
    // Each occurrence of the replacement string becomes a line of the input.
    for (std::size_t k = 0; k < inner.argv.size(); ++k) {
      if (inner.argv[k].find(args.replace_text) != std::string_view::npos) {
        inner_info[k].expansion = true;
      }
    }
  }
  if (inner_info[0].expansion) {
    if (args.replace && inner.argv[0].find(args.replace_text) != std::string_view::npos) {
      return Fail("the command xargs runs is built from its input (" +
                  std::string(args.replace_text) + " in the command name)");
    }
    return Fail("parameter expansion in the command name ($X) cannot be checked before it runs");
  }
  if (inner_info[0].glob) {
    return Fail(
        "pathname expansion (*, ?, [...]) in the command name cannot be checked before "
        "it runs");
  }
  inner.assignments = outer_assignments;
  if (!args.slot_var.empty()) {
    if (!IsName(args.slot_var)) {
      return Fail("xargs --process-slot-var with a name that is not a plain variable name");
    }
    inner.assignments.push_back(out_.owned.emplace_front(std::string(args.slot_var) + "="));
  }
  inner.run_by = kRunByXargs;
  const bool inner_open = open || !args.replace;
  if (!Charge(inner.argv.size() + inner.assignments.size())) return Fail(kTooComplex);
  out_.commands.push_back(std::move(inner));
  const bool ok = Inspect(out_.commands.size() - 1, inner_info, inner_open);
  --wrapper_depth_;
  return ok;
}

// find [options] [paths] [expression]: each -exec/-execdir/-ok/-okdir CMD ... ; or ... {} + runs
// CMD; -fprint/-fprint0/-fls FILE and -fprintf FILE FORMAT write FILE.
bool ShellParser::LookThroughFind(std::size_t index, const std::vector<WordInfo>& info, bool open) {
  if (open) {
    return Fail("'xargs' would run find with expressions (-exec ...) taken from its input");
  }
  // Copies: the push_back below may move out_.commands.
  const std::vector<std::string_view> argv = out_.commands[index].argv;
  const std::vector<std::string_view> outer_assignments = out_.commands[index].assignments;
  std::vector<std::string_view> writes;
  std::size_t k = 1;
  while (k < argv.size()) {
    const std::string_view a = argv[k];
    if (a == "-exec" || a == "-execdir" || a == "-ok" || a == "-okdir") {
      const std::size_t start = k + 1;
      std::size_t end = start;
      while (end < argv.size() && argv[end] != ";" &&
             !(argv[end] == "+" && end > start && argv[end - 1] == "{}")) {
        ++end;
      }
      if (end >= argv.size()) {
        return Fail("find " + std::string(a) + " without its terminating ';' or '+'");
      }
      if (end == start) return Fail("find " + std::string(a) + " without a command");
      if (++wrapper_depth_ > kMaxWrapperNesting) {
        return Fail("commands wrapped in more than " + std::to_string(kMaxWrapperNesting) +
                    " wrappers (timeout, env, find -exec ...) cannot be checked");
      }
      SimpleCommandView inner;
      inner.argv.assign(argv.begin() + static_cast<std::ptrdiff_t>(start),
                        argv.begin() + static_cast<std::ptrdiff_t>(end));
      std::vector<WordInfo> inner_info(info.begin() + static_cast<std::ptrdiff_t>(start),
                                       info.begin() + static_cast<std::ptrdiff_t>(end));
      for (std::size_t w = 0; w < inner.argv.size(); ++w) {
        if (inner.argv[w].find("{}") != std::string_view::npos) inner_info[w].expansion = true;
      }
      if (inner_info[0].expansion) {
        return Fail("the command find " + std::string(a) +
                    " runs is a found file name ({} or $X in the command name)");
      }
      if (inner_info[0].glob) {
        return Fail(
            "pathname expansion (*, ?, [...]) in the command name cannot be checked before "
            "it runs");
      }
      inner.assignments = outer_assignments;
      inner.run_by = kRunByFind;
      if (!Charge(inner.argv.size() + inner.assignments.size())) return Fail(kTooComplex);
      out_.commands.push_back(std::move(inner));
      const bool ok = Inspect(out_.commands.size() - 1, inner_info, false);
      --wrapper_depth_;
      if (!ok) return false;
      k = end + 1;
      continue;
    }
    if (a == "-fprint" || a == "-fprint0" || a == "-fls" || a == "-fprintf") {
      if (k + 1 < argv.size()) {
        const WordInfo& file = info[k + 1];
        if (file.expansion || file.glob || file.tilde) {
          return Fail("expansion ($X, ~, *) in the file of find " + std::string(a) +
                      " cannot be checked before it runs");
        }
        writes.push_back(argv[k + 1]);
      }
      k += a == "-fprintf" ? 3 : 2;
      continue;
    }
    ++k;
  }
  if (!writes.empty()) {
    if (!Charge(writes.size())) return Fail(kTooComplex);
    std::vector<std::string_view>& w = out_.commands[index].writes;
    w.insert(w.end(), writes.begin(), writes.end());
  }
  return true;
}

// source FILE [ARGS] / . FILE [ARGS]: judged as sh FILE ARGS; afterwards any variable may differ.
bool ShellParser::LookThroughSource(std::size_t index, const std::vector<WordInfo>& info,
                                    bool open) {
  if (open) return Fail("'xargs' would source a file named by its input");
  const std::vector<std::string_view> argv = out_.commands[index].argv;
  if (argv.size() < 2) return true;
  if (info[1].procsub) {
    return Fail("sourcing a process substitution <( ) runs code that cannot be checked");
  }
  SimpleCommandView inner;
  inner.argv.reserve(argv.size());
  inner.argv.emplace_back("sh");
  inner.argv.insert(inner.argv.end(), argv.begin() + 1, argv.end());
  inner.assignments = out_.commands[index].assignments;
  inner.run_by = kRunBySource;
  inner.stdin_from = out_.commands[index].stdin_from;
  if (!Charge(inner.argv.size() + inner.assignments.size())) return Fail(kTooComplex);
  std::vector<WordInfo> inner_info;
  inner_info.reserve(info.size());
  inner_info.emplace_back();
  inner_info.insert(inner_info.end(), info.begin() + 1, info.end());
  out_.commands.push_back(std::move(inner));
  // `source /dev/stdin <<'EOF'` reads the here-document as code.
  if (!Inspect(out_.commands.size() - 1, inner_info, false)) return false;
  // The sourced file may set PATH (a virtualenv's activate does) or anything else.
  return AddSticky("PATH=");
}

bool ShellParser::ParseString(std::string_view script, const WordInfo& info, std::string_view what,
                              bool bash) {
  // The outer shell expands the word before the inner one parses it, so "$X" or a glob in it
  // could become any code at all.
  if (info.expansion || info.glob || info.tilde) {
    return Fail("parameter or pathname expansion in code run by " + std::string(what) +
                " cannot be checked before it runs");
  }
  return ParseCode(script, bash);
}

bool ShellParser::ParseCode(std::string_view script, bool bash) {
  if (string_depth_ + 1 > kMaxStringNesting) return Fail(kTooDeep);
  ShellLexer lexer(script, st_, string_depth_ + 1);
  LexedScript tokens;
  const std::size_t assigned = st_.names.assigned.size();
  if (!lexer.Tokenize(tokens)) return Fail(lexer.reason());
  if (!StickAssigned(assigned)) return false;
  ShellParser inner(tokens, string_depth_ + 1, st_, bash);
  return inner.ParseScript();
}

}  // namespace

ShellParseView ParseShellView(std::string_view script) {
  ShellParseView out;
  if (script.size() > kMaxShellScript) {
    out.opaque = true;
    out.opaque_reason = "command line too long to check";
    return out;
  }
  // execve() cuts a string at its first NUL, so the shell would see less than we would.
  if (script.find('\0') != std::string_view::npos) {
    out.opaque = true;
    out.opaque_reason = "NUL byte in command line";
    return out;
  }
  ParseState st(out);
  ShellLexer lexer(script, st, 0);
  LexedScript tokens;
  if (!lexer.Tokenize(tokens)) {
    out.opaque = true;
    out.opaque_reason = lexer.reason();
    out.owned.clear();
    return out;
  }
  // Usually one command per separator and one more; nested code may add to that.
  out.commands.reserve(std::min<std::size_t>(lexer.separators() + 1, 64));
  ShellParser parser(tokens, 0, st, /*bash=*/false);
  // An opaque parse lists no commands: the engine refuses it as a whole and must not judge a
  // partial list.
  if (!parser.StickAssigned(0) || !parser.ParseScript() || !parser.CheckArithmeticNames()) {
    out.commands.clear();
    out.owned.clear();
  }
  return out;
}

ShellParse ParseShell(std::string_view script) {
  ShellParseView view = ParseShellView(script);
  ShellParse out;
  out.opaque = view.opaque;
  out.opaque_reason = std::move(view.opaque_reason);
  const auto copy = [](const std::vector<std::string_view>& from, std::vector<std::string>& to) {
    to.reserve(from.size());
    for (const std::string_view w : from) to.emplace_back(w);
  };
  out.commands.resize(view.commands.size());
  for (std::size_t k = 0; k < view.commands.size(); ++k) {
    const SimpleCommandView& from = view.commands[k];
    SimpleCommand& to = out.commands[k];
    copy(from.argv, to.argv);
    copy(from.assignments, to.assignments);
    copy(from.writes, to.writes);
    copy(from.reads, to.reads);
    to.run_by = std::string(from.run_by);
    to.pipeline = from.pipeline;
    to.stage = from.stage;
    to.stdin_from = from.stdin_from;
    to.stdin_is_code = from.stdin_is_code;
    to.more_args = from.more_args;
    to.code_from_output = from.code_from_output;
  }
  return out;
}

}  // namespace cagent::policy
