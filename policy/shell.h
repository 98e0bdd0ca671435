// A conservative parser for the POSIX shell command lines the agent asks to run.
//
// Command rules match parsed argv, never regexes over shell text (DESIGN.md). This splits a
// `/bin/sh -c` string into its simple commands so each can be judged, and reports what it cannot
// see through as "opaque" so the engine can refuse it instead of guessing. It is not a shell: it
// never expands anything.
//
// Understood:
//   - words with '...' (literal), "..." (backslash escapes \" \\ \$ \` only), \c, and their
//     concatenation ("a"'b'c -> abc);
//   - separators ; & && || | and newlines: each side is a separate simple command;
//   - leading assignments NAME=value (kept in `assignments`, not in argv);
//   - redirections [n]> [n]>> [n]< [n]>| [n]<> &> &>> >& <& with their target word; targets of
//     output redirections are kept in `writes`, of input in `reads` ("&1"/"-" targets are fd moves
//     and recorded nowhere);
//   - ( list ) subshells and { list; } groups: their commands are parsed recursively;
//   - sh|bash|dash -c 'string': the string is parsed recursively (nesting at most 4 deep), and the
//     outer command is kept as well;
//   - wrappers that run the rest of their arguments as a command (timeout, nice, nohup, time,
//     stdbuf, ionice, env, command, exec): the wrapper is kept, and the command it runs is added
//     after it as a command of its own (run_by names the wrapper), with env's NAME=value words as
//     its assignments (`env -u NAME` counts as assigning NAME). Wrapper options are parsed
//     conservatively: an option not listed in LookThroughWrapper, env -S (a string split into a
//     command line), env -C and time -o make the parse opaque;
//   - '#' comments at word start.
// Opaque (the whole parse is marked opaque, with a reason naming the construct):
//   - command substitution $( ) and backticks, process substitution <( ) >( ), arithmetic $(( )),
//     here-documents <<, parameter expansion in the command name ($X, ${X}) ;
//   - reserved words in command position: if then else elif fi for while until do done case esac
//     function select '!' '[[' and function definitions "name()";
//   - unterminated quotes, unbalanced parentheses, nesting deeper than the limit.
// Parameter expansion elsewhere ("$HOME/x") is kept literally in the word (with the '$'), so it
// can only ever match a wildcard in a pattern.
#pragma once

#include <forward_list>
#include <string>
#include <string_view>
#include <vector>

namespace cagent::policy {

struct SimpleCommand {
  std::vector<std::string> argv;         // never empty in a ShellParse's commands
  std::vector<std::string> assignments;  // "NAME=value" as written (after quote removal)
  std::vector<std::string> writes;       // output redirection targets
  std::vector<std::string> reads;        // input redirection targets
  // For a command run by a wrapper (`timeout 60 make test` gives `timeout 60 make test`, then
  // `make test` with run_by "timeout"): the wrapper's argv[0]. Empty otherwise.
  std::string run_by;
};

struct ShellParse {
  std::vector<SimpleCommand> commands;  // in source order, nested -c strings after their caller
  bool opaque = false;
  std::string opaque_reason;  // e.g. "command substitution $( ) cannot be checked before it runs"
};

// Parses `script`. Never fails: problems make the result opaque. Inputs longer than kMaxScript
// bytes are opaque ("command line too long to check").
inline constexpr std::size_t kMaxShellScript = 64 * 1024;
ShellParse ParseShell(std::string_view script);

// The same parse with every word as a view instead of a string of its own, for callers that only
// read the words (the engine judges each command line this way).
struct SimpleCommandView {
  std::vector<std::string_view> argv;
  std::vector<std::string_view> assignments;
  std::vector<std::string_view> writes;
  std::vector<std::string_view> reads;
  std::string_view run_by;
};

// A word written without quotes or escapes ("make", "$HOME/x", or one quoted part alone such as
// 'a b') is a view into the script; the others ("a'b'c", a\ b, the joined arguments of eval) are
// views into `owned`, whose strings never move. So the views stay valid as long as both the
// script passed to ParseShellView and this object (or the one it is moved into) live. Not
// copyable: a copy's views would still point into the original.
struct ShellParseView {
  ShellParseView() = default;
  ShellParseView(const ShellParseView&) = delete;
  ShellParseView& operator=(const ShellParseView&) = delete;
  ShellParseView(ShellParseView&&) noexcept = default;
  ShellParseView& operator=(ShellParseView&&) noexcept = default;
  ~ShellParseView() = default;

  std::vector<SimpleCommandView> commands;  // as ShellParse::commands
  bool opaque = false;
  std::string opaque_reason;
  std::forward_list<std::string> owned;  // texts of the words that are not slices of the script
};

// Exactly the words, commands and reasons of ParseShell(script) (which is built from it).
ShellParseView ParseShellView(std::string_view script);

}  // namespace cagent::policy
