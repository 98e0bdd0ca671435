#include "policy/shell.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <forward_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cagent::policy {
namespace {

// How deep `sh -c '...'` (and eval/trap strings) may nest before the parse gives up, and how deep
// ( ) and { } groups may nest within one script (bounds the recursion of the parser).
constexpr int kMaxStringNesting = 4;
constexpr int kMaxGroupNesting = 64;
// How many wrappers (timeout, env, nice ...) may wrap one command: `nice timeout 5 env X=1 make`
// is three.
constexpr int kMaxWrapperNesting = 8;
// Bounds the strings a parse may produce: group redirections and carried-over assignments are
// copied into many commands, which a crafted script could multiply into gigabytes.
constexpr std::size_t kMaxOutputStrings = 200'000;
constexpr std::size_t kMaxStickyAssignments = 256;
constexpr std::string_view kTooComplex = "command line too complex to check";

// Opaque reasons. Each names the construct so the user can rewrite the command.
constexpr std::string_view kCommandSubstitution =
    "command substitution $( ) cannot be checked before it runs";
constexpr std::string_view kBacktickSubstitution =
    "command substitution `...` cannot be checked before it runs";
constexpr std::string_view kArithmeticExpansion =
    "arithmetic expansion $(( )) cannot be checked before it runs";

constexpr bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsNameStart(char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
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

enum class TokKind { kWord, kSeparator, kLParen, kRParen, kRedirect, kEnd };

enum class RedirKind {
  kRead,       // <
  kWrite,      // > >> >| &> &>>
  kReadWrite,  // <>
  kDupOut,     // >&  (a fd move when the target is a number or '-', else a write)
  kDupIn,      // <&  (a fd move when the target is a number or '-', else a read)
};

struct ShellToken {
  TokKind kind = TokKind::kEnd;
  // kWord: after quote removal (into the script, or into ShellParseView::owned); otherwise the
  // operator as written (into the script).
  std::string_view text;
  RedirKind redir = RedirKind::kRead;
  bool quoted = false;      // some part was quoted or escaped
  bool expansion = false;   // contains $NAME, ${...} or $1-style expansion (kept literally)
  bool glob = false;        // unquoted '*', '?' or '[...]'
  bool tilde = false;       // unquoted leading '~'
  bool assignment = false;  // starts with an unquoted NAME= or NAME+=
  bool adjacent = false;    // no blank between this token and the previous one
};

// The text of the word being lexed. Quote removal only ever drops bytes, so a word is a
// sequence of slices of the script; while they follow each other (or there is only one), the
// word is a view of the script. The first slice that does not follow the text so far (after a
// quote or an escape) copies the text into a new string in `owned`, which then takes the rest.
class WordText {
 public:
  WordText(std::string_view script, std::forward_list<std::string>& owned)
      : s_(script), owned_(owned) {}

  // Appends s_[pos, pos + len).
  void Append(std::size_t pos, std::size_t len) {
    if (len == 0) return;
    if (buf_ != nullptr) {
      buf_->append(s_.substr(pos, len));
    } else if (size_ == 0) {
      begin_ = pos;
      size_ = len;
    } else if (begin_ + size_ == pos) {
      size_ += len;
    } else {
      buf_ = &owned_.emplace_front(s_.substr(begin_, size_));
      buf_->append(s_.substr(pos, len));
    }
  }
  [[nodiscard]] std::size_t size() const { return buf_ != nullptr ? buf_->size() : size_; }
  [[nodiscard]] std::string_view view() const {
    return buf_ != nullptr ? std::string_view{*buf_} : s_.substr(begin_, size_);
  }

 private:
  std::string_view s_;
  std::forward_list<std::string>& owned_;
  std::string* buf_ = nullptr;  // in owned_, once the word is not one slice
  std::size_t begin_ = 0;
  std::size_t size_ = 0;
};

// Splits a script into words and operators, removing quotes. Everything it cannot represent
// faithfully (substitutions, here-documents, ANSI-C quoting...) ends the scan with a reason.
// Word texts that are not slices of the script are kept in `owned`.
class ShellLexer {
 public:
  ShellLexer(std::string_view script, std::forward_list<std::string>& owned)
      : s_(script), owned_(owned) {}

  // Fills `out` (terminated by a kEnd token) and returns true, or returns false with reason().
  bool Tokenize(std::vector<ShellToken>& out);
  [[nodiscard]] const std::string& reason() const { return reason_; }
  // How many separator operators (; & && || | |& newline) Tokenize found.
  [[nodiscard]] std::size_t separators() const { return separators_; }

 private:
  bool Fail(std::string_view reason) {
    reason_ = std::string(reason);
    return false;
  }
  [[nodiscard]] char At(std::size_t i) const { return i < s_.size() ? s_[i] : '\0'; }
  bool LexOperator(std::vector<ShellToken>& out, bool adjacent);
  bool LexWord(ShellToken& tok);
  bool LexDoubleQuoted(ShellToken& tok, WordText& text);
  bool LexDollar(ShellToken& tok, WordText& text, bool in_double_quotes);
  bool CheckBraceExpansion(std::size_t open);

  std::string_view s_;
  std::forward_list<std::string>& owned_;
  std::size_t i_ = 0;
  std::size_t separators_ = 0;
  std::string reason_;
};

bool ShellLexer::Tokenize(std::vector<ShellToken>& out) {
  // Command lines average a token every four or five bytes; reserving that (up to a bound, past
  // which the vector grows as usual) saves most of the reallocations, each of which moves every
  // token so far.
  out.reserve(out.size() + std::min<std::size_t>(s_.size() / 4 + 2, 1024));
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
    const bool adjacent = !blank && !out.empty();
    if (i_ >= s_.size()) {
      ShellToken end;
      end.kind = TokKind::kEnd;
      out.push_back(end);
      return true;
    }
    if (IsMeta(s_[i_])) {
      if (!LexOperator(out, adjacent)) return false;
      continue;
    }
    ShellToken word;
    word.kind = TokKind::kWord;
    word.adjacent = adjacent;
    if (!LexWord(word)) return false;
    const char next = At(i_);
    const bool is_target = !out.empty() && out.back().kind == TokKind::kRedirect;
    if ((next == '<' || next == '>') && !word.quoted && !is_target) {
      // "2>file": an io_number is all digits, directly before the operator; we record no fd
      // numbers, so it is dropped. "{fd}>file" (bash allocates a fd into $fd) is not supported.
      bool digits = !word.text.empty();
      for (char c : word.text) digits = digits && IsDigit(c);
      if (digits) continue;
      if (word.text.size() > 2 && word.text.front() == '{' && word.text.back() == '}') {
        return Fail("named file descriptor redirection {name}> is not supported");
      }
    }
    out.push_back(word);
  }
}

// operator := '\n' | ';' | '&' | '&&' | '|' | '||' | '|&' | '(' | ')' | redirection
// redirection := '<' | '<>' | '<&' | '>' | '>>' | '>|' | '>&' | '&>' | '&>>'
bool ShellLexer::LexOperator(std::vector<ShellToken>& out, bool adjacent) {
  ShellToken tok;
  tok.adjacent = adjacent;
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
      break;
    case ')':
      tok.kind = TokKind::kRParen;
      break;
    case '<':
      tok.kind = TokKind::kRedirect;
      if (c1 == '<') {
        return Fail(At(i_ + 2) == '<' ? "here-string <<< is not supported"
                                      : "here-document << is not supported");
      }
      if (c1 == '(') return Fail("process substitution <( ) cannot be checked before it runs");
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
      if (c1 == '(') return Fail("process substitution >( ) cannot be checked before it runs");
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
  tok.text = s_.substr(i_, len);
  if (tok.kind == TokKind::kSeparator) ++separators_;
  i_ += len;
  out.push_back(tok);
  return true;
}

// word := ( '\' any | "'" ... "'" | '"' dq '"' | '$' expansion | byte )+
bool ShellLexer::LexWord(ShellToken& tok) {
  WordText text(s_, owned_);
  std::size_t special_at = std::string::npos;  // text length at the first quote/escape/expansion
  const auto mark = [&] {
    if (special_at == std::string::npos) special_at = text.size();
  };
  bool open_bracket = false;
  bool brace_checked = false;
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
        return Fail(kBacktickSubstitution);
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
        // The check scans the rest of the word, so the first unquoted '{' is enough.
        if (!brace_checked && !CheckBraceExpansion(i_)) return false;
        brace_checked = true;
        break;
      default:
        break;
    }
    text.Append(i_, 1);
    ++i_;
  }
  tok.text = text.view();
  // NAME=value or NAME+=value, with NAME and '=' unquoted.
  std::size_t eq = tok.text.find('=');
  if (eq != std::string::npos && eq > 0 && (special_at == std::string::npos || eq < special_at)) {
    std::size_t name_end = eq;
    if (tok.text[name_end - 1] == '+') --name_end;
    bool name = name_end > 0 && IsNameStart(tok.text[0]);
    for (std::size_t k = 1; k < name_end && name; ++k) name = IsNameChar(tok.text[k]);
    tok.assignment = name;
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
    if (c == '`') return Fail(kBacktickSubstitution);
    if (c == '$') {
      if (!LexDollar(tok, text, /*in_double_quotes=*/true)) return false;
      continue;
    }
    text.Append(i_, 1);
    ++i_;
  }
  return Fail("unterminated double quote");
}

// expansion := '$(' ... | '$((' ... | '$[' ... | '${' param '}' | '$' name | '$' special
//            | "$'" ... | '$"' ... | '$' (literal)
// Only the parameter forms are kept (literally, '$' included); the others are opaque.
bool ShellLexer::LexDollar(ShellToken& tok, WordText& text, bool in_double_quotes) {
  const char d = At(i_ + 1);
  if (d == '(') {
    return Fail(At(i_ + 2) == '(' ? kArithmeticExpansion : kCommandSubstitution);
  }
  if (d == '[') return Fail("arithmetic expansion $[ ] cannot be checked before it runs");
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

// bash expands "{a,b}" and "{1..3}" into several words ("{rm,-rf,x}" runs rm), so an unquoted
// '{' followed in the same word by a ',' or '..' and then a '}' makes the parse opaque (this
// over-approximates bash, never under). "{}" and "{x}" (find -exec, git's @{u}) stay literal.
bool ShellLexer::CheckBraceExpansion(std::size_t open) {
  bool list = false;
  for (std::size_t j = open; j < s_.size() && !IsMeta(s_[j]);) {
    const char c = s_[j];
    if (c == '\\') {
      j += 2;
      continue;
    }
    if (c == '\'' || c == '"') {  // quoted parts are part of the word but cannot close it
      const std::size_t close = s_.find(c, j + 1);
      if (close == std::string_view::npos) return true;  // reported by the word scan
      j = close + 1;
      continue;
    }
    if (c == ',' || (c == '.' && At(j + 1) == '.')) list = true;
    if (c == '}' && list) return Fail("brace expansion {a,b} cannot be checked before it runs");
    ++j;
  }
  return true;
}

bool IsShellName(std::string_view argv0) {
  const std::size_t slash = argv0.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? argv0 : argv0.substr(slash + 1);
  return base == "sh" || base == "bash" || base == "dash" || base == "ash" || base == "ksh" ||
         base == "mksh" || base == "zsh" || base == "rbash";
}

// Reserved words that start compound commands we do not model.
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

struct WordInfo {
  bool quoted = false;
  bool expansion = false;
  bool glob = false;
  bool tilde = false;
};

enum class ListEnd { kScript, kParen, kBrace };

// Recursive descent over the tokens of one script. Commands go to `out` (shared by nested
// parsers, so nested -c strings land right after their caller); the first problem sets
// out->opaque and unwinds.
class ShellParser {
 public:
  ShellParser(std::vector<ShellToken> tokens, int string_depth, ShellParseView& out,
              std::vector<std::string_view>& sticky, std::size_t& budget)
      : toks_(std::move(tokens)),
        string_depth_(string_depth),
        out_(out),
        sticky_(sticky),
        budget_(budget) {}

  // script := list EOF
  bool ParseScript() { return ParseList(ListEnd::kScript); }

 private:
  bool Fail(std::string_view reason) {
    out_.opaque = true;
    out_.opaque_reason = std::string(reason);
    return false;
  }
  [[nodiscard]] const ShellToken& Peek(std::size_t ahead = 0) const {
    const std::size_t k = pos_ + ahead;
    return k < toks_.size() ? toks_[k] : toks_.back();
  }
  [[nodiscard]] bool PeekBareWord(std::string_view w) const {
    return Peek().kind == TokKind::kWord && !Peek().quoted && Peek().text == w;
  }
  // Steps past the current token (a word) and returns its text.
  std::string_view TakeText() { return toks_[pos_++].text; }
  bool ParseList(ListEnd end);
  bool ParseCommand();
  bool ParseGroup(ListEnd end);
  bool ParseRedirect(SimpleCommandView& cmd);
  bool ParseSimpleCommand();
  bool Inspect(std::size_t index, const std::vector<WordInfo>& info);
  // Adds the command a wrapper at `index` runs (timeout 60 make: make) after it, and inspects it.
  bool LookThrough(std::size_t index, const std::vector<WordInfo>& info,
                   const WrapperSpec& wrapper);
  // `script` is a word's text (in the script or in out_.owned) or a string in out_.owned: it
  // stays where it is while the nested parse appends to out_.commands.
  bool ParseString(std::string_view script, const WordInfo& info, std::string_view what);
  // Records NAME=value as set for later commands; a plain '=' replaces earlier values of NAME.
  // False (and opaque) past kMaxStickyAssignments.
  bool AddSticky(std::string_view assignment) {
    const std::size_t eq = assignment.find('=');
    if (eq != std::string_view::npos && assignment[eq - 1] != '+') {
      const std::string_view name = assignment.substr(0, eq);
      std::erase_if(sticky_, [&](std::string_view old) {
        return old.size() > name.size() && old.compare(0, name.size(), name) == 0 &&
               (old[name.size()] == '=' ||
                (old[name.size()] == '+' && old.size() > name.size() + 1 &&
                 old[name.size() + 1] == '='));
      });
    }
    if (sticky_.size() >= kMaxStickyAssignments) return Fail(kTooComplex);
    sticky_.push_back(assignment);
    return true;
  }
  // Accounts for `n` more strings in the result; false once the budget is spent.
  bool Charge(std::size_t n) {
    if (n > budget_) return false;
    budget_ -= n;
    return true;
  }

  std::vector<ShellToken> toks_;
  std::size_t pos_ = 0;
  // The words of the simple command being parsed, kept from one command to the next to save
  // allocating it for each (Inspect is done with it before the next command starts).
  std::vector<WordInfo> info_;
  int string_depth_;
  int group_depth_ = 0;
  int wrapper_depth_ = 0;
  ShellParseView& out_;
  std::vector<std::string_view>& sticky_;
  std::size_t& budget_;  // strings the result may still grow by, shared with nested parsers
};

// list := { separator } [ command { separator+ command } ] { separator }
// Every separator (; & && || | |& newline) is treated alike: each side is a command that may run.
// Empty commands between separators (";;", "a ;& b") are skipped: sh would reject the script,
// so nothing runs, and reporting the remaining commands only over-approximates.
bool ShellParser::ParseList(ListEnd end) {
  while (true) {
    while (Peek().kind == TokKind::kSeparator) ++pos_;
    const ShellToken& t = Peek();
    if (t.kind == TokKind::kEnd) {
      if (end == ListEnd::kScript) return true;
      return Fail(end == ListEnd::kParen ? "unbalanced parentheses: missing ')'"
                                         : "unterminated { } group: missing '}'");
    }
    if (t.kind == TokKind::kRParen) {
      if (end == ListEnd::kParen) return true;
      return Fail("unbalanced parentheses: unexpected ')'");
    }
    if (PeekBareWord("}")) {
      if (end == ListEnd::kBrace) return true;
      return Fail("unbalanced braces: unexpected '}'");
    }
    if (!ParseCommand()) return false;
  }
}

// command := '(' list ')' redirect* | '{' list '}' redirect* | simple_command
bool ShellParser::ParseCommand() {
  if (Peek().kind == TokKind::kLParen) {
    if (Peek(1).kind == TokKind::kLParen && Peek(1).adjacent) {
      return Fail("arithmetic command (( )) is not supported");
    }
    return ParseGroup(ListEnd::kParen);
  }
  if (PeekBareWord("{")) return ParseGroup(ListEnd::kBrace);
  return ParseSimpleCommand();
}

bool ShellParser::ParseGroup(ListEnd end) {
  if (++group_depth_ > kMaxGroupNesting) return Fail("( ) or { } groups nested too deep");
  ++pos_;
  const std::size_t first = out_.commands.size();
  if (!ParseList(end)) return false;
  ++pos_;  // ')' or '}', checked by ParseList
  --group_depth_;
  // Redirections of a group apply to every command inside it.
  SimpleCommandView redirs;
  while (Peek().kind == TokKind::kRedirect) {
    if (!ParseRedirect(redirs)) return false;
  }
  if (first == out_.commands.size() && (!redirs.writes.empty() || !redirs.reads.empty())) {
    return Fail("redirection without a command");
  }
  const std::size_t targets = redirs.writes.size() + redirs.reads.size();
  if (!Charge(targets * (out_.commands.size() - first))) return Fail(kTooComplex);
  for (std::size_t k = first; k < out_.commands.size(); ++k) {
    SimpleCommandView& cmd = out_.commands[k];
    cmd.writes.insert(cmd.writes.end(), redirs.writes.begin(), redirs.writes.end());
    cmd.reads.insert(cmd.reads.end(), redirs.reads.begin(), redirs.reads.end());
  }
  const ShellToken& next = Peek();
  if (next.kind == TokKind::kWord && !PeekBareWord("}")) {
    return Fail("unexpected word after a ( ) or { } group");
  }
  if (next.kind == TokKind::kLParen) return Fail("unexpected '(' after a ( ) or { } group");
  return true;
}

// redirect := redirection_operator word
bool ShellParser::ParseRedirect(SimpleCommandView& cmd) {
  const RedirKind kind = Peek().redir;
  const std::string_view op = Peek().text;
  ++pos_;
  if (Peek().kind != TokKind::kWord) {
    return Fail("redirection '" + std::string(op) + "' without a target");
  }
  // Unlike an argument, which a policy only matches against patterns, a target is resolved as a
  // path: "$PWD/.git/config" would be judged as a workspace directory named "$PWD", "~user/x"
  // as a workspace path. The shell expands them first, so we cannot know the file.
  if (Peek().expansion || Peek().tilde || Peek().glob) {
    return Fail("expansion ($X, ~, *) in a redirection target cannot be checked before it runs");
  }
  const std::string_view target = TakeText();
  bool fd_move = false;
  if (kind == RedirKind::kDupOut || kind == RedirKind::kDupIn) {
    // ">&2", "<&0", ">&-", "2>&1-": fd duplication, closing or moving; not a file.
    std::string_view t = target;
    if (t.size() > 1 && t.back() == '-') t.remove_suffix(1);
    fd_move = !t.empty();
    if (t != "-") {
      for (char c : t) fd_move = fd_move && IsDigit(c);
    }
  }
  if (fd_move) return true;
  switch (kind) {
    case RedirKind::kRead:
    case RedirKind::kDupIn:
      cmd.reads.push_back(target);
      break;
    case RedirKind::kWrite:
    case RedirKind::kDupOut:
      cmd.writes.push_back(target);
      break;
    case RedirKind::kReadWrite:
      cmd.reads.push_back(target);
      cmd.writes.push_back(target);
      break;
  }
  return true;
}

// simple_command := ( assignment | redirect )* ( word | redirect )*
bool ShellParser::ParseSimpleCommand() {
  SimpleCommandView cmd;
  std::vector<WordInfo>& info = info_;
  info.clear();
  // At most this many words (arguments, assignments, redirection targets) before the next
  // separator; reserving for them saves growing argv and info one word at a time.
  std::size_t words = 0;
  for (std::size_t k = pos_; k < toks_.size(); ++k) {
    if (toks_[k].kind == TokKind::kWord) {
      ++words;
    } else if (toks_[k].kind != TokKind::kRedirect) {
      break;
    }
  }
  cmd.argv.reserve(words);
  info.reserve(words);
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
      if (cmd.argv.empty() && t.assignment) {
        cmd.assignments.push_back(TakeText());
      } else {
        if (cmd.argv.empty() && !t.quoted && IsReservedWord(t.text)) {
          return Fail("shell keyword '" + std::string(t.text) +
                      "' is not supported; write simple commands joined by ;, && or ||");
        }
        info.push_back({t.quoted, t.expansion, t.glob, t.tilde});
        cmd.argv.push_back(TakeText());
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
  if (!sticky_.empty()) {
    cmd.assignments.insert(cmd.assignments.begin(), sticky_.begin(), sticky_.end());
  }
  if (!Charge(cmd.argv.size() + cmd.assignments.size() + cmd.writes.size() + cmd.reads.size())) {
    return Fail(kTooComplex);
  }
  out_.commands.push_back(std::move(cmd));
  return Inspect(out_.commands.size() - 1, info);
}

// Looks inside commands that run a string as shell code (sh -c, eval, trap) and records
// variables set for later commands by export and friends.
// `index` is the command's place in out_.commands. A nested parse appends to out_.commands, so
// ParseString is always the last use of `argv` (its script is a view of the word's text, which
// does not move with the command).
bool ShellParser::Inspect(std::size_t index, const std::vector<WordInfo>& info) {
  const std::vector<std::string_view>& argv = out_.commands[index].argv;
  const std::string_view name = argv[0];
  if (name == "export" || name == "readonly" || name == "declare" || name == "typeset" ||
      name == "local") {
    for (std::size_t k = 1; k < argv.size(); ++k) {
      const std::size_t eq = argv[k].find('=');
      if (eq != std::string_view::npos && eq > 0 && IsNameStart(argv[k][0])) {
        if (!AddSticky(argv[k])) return false;
      }
    }
    return true;
  }
  if (name == "alias") {
    for (std::size_t k = 1; k < argv.size(); ++k) {
      if (argv[k].find('=') != std::string_view::npos) {
        return Fail("alias definitions change how later commands are parsed");
      }
    }
    return true;
  }
  if (name == "eval") {
    // eval joins its arguments with spaces and runs the result.
    std::string& script = out_.owned.emplace_front();
    WordInfo merged;
    for (std::size_t k = 1; k < argv.size(); ++k) {
      if (k > 1) script += ' ';
      script += argv[k];
      merged.expansion = merged.expansion || info[k].expansion;
      merged.glob = merged.glob || info[k].glob;
      merged.tilde = merged.tilde || info[k].tilde;
    }
    return ParseString(script, merged, "eval");
  }
  if (name == "trap") {
    // trap [--] action condition...: the action runs later as shell code.
    std::size_t k = 1;
    if (k < argv.size() && argv[k] == "--") ++k;
    if (k + 1 < argv.size() && argv[k] != "-" && !(argv[k].size() > 1 && argv[k][0] == '-')) {
      return ParseString(argv[k], info[k], "trap");
    }
    return true;
  }
  if (const WrapperSpec* wrapper = FindWrapper(BaseName(name))) {
    return LookThrough(index, info, *wrapper);
  }
  if (!IsShellName(name)) return true;
  // sh [options] -c string [name [args...]]: options may come in any order and clusters
  // ("-ec", "-xc"); -o and -O take an argument; the string is the first operand after them.
  bool has_c = false;
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
        if (a[c] == 'o' || a[c] == 'O') ++k;
      }
      ++k;
      continue;
    }
    break;
  }
  if (!has_c) return true;
  if (k >= argv.size()) return Fail(std::string(name) + " -c without a command string");
  return ParseString(argv[k], info[k], std::string(name) + " -c");
}

bool ShellParser::LookThrough(std::size_t index, const std::vector<WordInfo>& info,
                              const WrapperSpec& wrapper) {
  // Copies: the push_back below may move out_.commands.
  const std::vector<std::string_view> argv = out_.commands[index].argv;
  const std::vector<std::string_view> outer_assignments = out_.commands[index].assignments;
  WrapperArgs args = ParseWrapperArgs(wrapper, argv);
  if (!args.error.empty()) return Fail(args.error);
  if (args.command >= argv.size()) return true;  // it runs nothing (command -v, ionice -p)
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
  for (const std::string_view name_unset : args.unset) {
    // Unsetting PATH (or LD_PRELOAD...) changes what runs as much as setting it: judged as an
    // assignment of the empty value.
    inner.assignments.push_back(out_.owned.emplace_front(std::string(name_unset) + "="));
  }
  inner.run_by = argv[0];
  if (!Charge(inner.argv.size() + inner.assignments.size())) return Fail(kTooComplex);
  const std::vector<WordInfo> inner_info(info.begin() + static_cast<std::ptrdiff_t>(args.command),
                                         info.end());
  out_.commands.push_back(std::move(inner));
  const bool ok = Inspect(out_.commands.size() - 1, inner_info);
  --wrapper_depth_;
  return ok;
}

bool ShellParser::ParseString(std::string_view script, const WordInfo& info,
                              std::string_view what) {
  // The outer shell expands the word before the inner one parses it, so "$X" or a glob in it
  // could become any code at all.
  if (info.expansion || info.glob || info.tilde) {
    return Fail("parameter or pathname expansion in code run by " + std::string(what) +
                " cannot be checked before it runs");
  }
  if (string_depth_ + 1 > kMaxStringNesting) {
    return Fail("shell code nested more than " + std::to_string(kMaxStringNesting) +
                " levels deep (sh -c, eval, trap) cannot be checked");
  }
  ShellLexer lexer(script, out_.owned);
  std::vector<ShellToken> tokens;
  if (!lexer.Tokenize(tokens)) return Fail(lexer.reason());
  ShellParser inner(std::move(tokens), string_depth_ + 1, out_, sticky_, budget_);
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
  ShellLexer lexer(script, out.owned);
  std::vector<ShellToken> tokens;
  if (!lexer.Tokenize(tokens)) {
    out.opaque = true;
    out.opaque_reason = lexer.reason();
    out.owned.clear();
    return out;
  }
  // Usually one command per separator and one more; nested -c strings may add to that.
  out.commands.reserve(std::min<std::size_t>(lexer.separators() + 1, 64));
  std::vector<std::string_view> sticky;
  std::size_t budget = kMaxOutputStrings;
  ShellParser parser(std::move(tokens), 0, out, sticky, budget);
  // An opaque parse lists no commands: the engine refuses it as a whole and must not judge a
  // partial list.
  if (!parser.ParseScript()) {
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
    copy(view.commands[k].argv, out.commands[k].argv);
    copy(view.commands[k].assignments, out.commands[k].assignments);
    copy(view.commands[k].writes, out.commands[k].writes);
    copy(view.commands[k].reads, out.commands[k].reads);
    out.commands[k].run_by = std::string(view.commands[k].run_by);
  }
  return out;
}

}  // namespace cagent::policy
