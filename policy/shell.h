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

#include <string>
#include <string_view>
#include <vector>

namespace cagent::policy {

struct SimpleCommand {
  std::vector<std::string> argv;         // never empty in a ShellParse's commands
  std::vector<std::string> assignments;  // "NAME=value" as written (after quote removal)
  std::vector<std::string> writes;       // output redirection targets
  std::vector<std::string> reads;        // input redirection targets
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

}  // namespace cagent::policy
