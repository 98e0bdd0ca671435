// A conservative parser for the POSIX shell command lines the agent asks to run.
//
// Command rules match parsed argv, never regexes over shell text (DESIGN.md). This splits a
// `/bin/sh -c` string into its simple commands so each can be judged, and reports what it cannot
// see through as "opaque" so the engine can refuse it instead of guessing. It is not a shell: it
// expands nothing except brace expansion (below), and keeps every other expansion literally in
// its word ("$f", "$(date)", "$((n+1))"), so an expanded word can only match a wildcard.
//
// The one rule it keeps: every command that may run is listed in `commands` (listing one that
// does not run is harmless, missing one is a policy bypass), every file a redirection names is in
// `writes`/`reads`, and every variable a construct sets is carried to the commands after it as
// an assignment (so the engine's "PATH=... changes what runs" check sees it). /bin/sh may be
// dash or bash: where they read a line differently, both readings are listed.
//
// Understood:
//   - words with '...' (literal), "..." (backslash escapes \" \\ \$ \` only), \c, and their
//     concatenation ("a"'b'c -> abc); '#' comments at word start;
//   - separators ; & && || | |& and newlines: each side is a separate simple command;
//   - leading assignments NAME=value (kept in `assignments`, not in argv); a bare NAME=value, and
//     export/readonly/declare/typeset/local NAME=value, are carried into the assignments of every
//     later command ("sticky");
//   - redirections [n]> [n]>> [n]< [n]>| [n]<> &> &>> >& <& with their target word; targets of
//     output redirections are kept in `writes`, of input in `reads` ("&1"/"-" targets are fd moves
//     and recorded nowhere);
//   - here-documents <<DELIM <<-DELIM <<'DELIM' <<"DELIM" (several per line; bodies are read
//     after the next newline, up to the delimiter line or the end of input) and here-strings
//     <<< WORD: stdin data, recorded nowhere. An unquoted body is scanned as a double-quoted
//     string is, so a $( ) or `...` in it is listed. When the command reading it is a shell run
//     without -c and without a script (`bash <<'EOF'`, `sh -s <<< 'cmd'`), the body is its code
//     and is parsed as a nested script (an unquoted body or a here-string with any expansion is
//     then opaque);
//   - ( list ) subshells and { list; } groups, and the compound commands
//       if LIST; then LIST; [elif LIST; then LIST;]... [else LIST;] fi
//       while|until LIST; do LIST; done
//       for NAME [in WORDS]; do LIST; done   (NAME is carried as the assignment "NAME=")
//       case WORD in [(]PAT[|PAT]...) LIST ;; ... esac   (also ;& and ;;&; WORD and PATs are data)
//       ! PIPELINE
//       [[ ... ]]   one test command, argv {"[[", ..., "]]"}: && || ( ) < > inside are words.
//                   Outside `bash -c` (where /bin/sh may be dash, for which [[ is an ordinary
//                   command name and && || ; | < > inside keep their usual meaning) the dash
//                   reading is listed too, its commands with run_by "[[ (sh)";
//     their commands parsed recursively; reserved words are recognised only in command position;
//     redirections after ')' '}' 'done' 'fi' 'esac' ']]' apply to every command inside;
//   - command substitution $( ) and `...`, process substitution <( ) >( ) (in words, double
//     quotes, here-document bodies, assignments, for/case words): the inside is parsed as a
//     nested script and its commands are listed (run_by "$( )" for both command substitution
//     forms, "<( )" or ">( )"); the word holding it counts as an expansion (its value is
//     unknown). A process substitution as a redirection target (`done < <(find .)`) is a pipe and
//     recorded nowhere;
//   - arithmetic $(( )) and $[ ]: only digits, blanks, operators, parentheses and variable names
//     (NAME, $NAME, ${NAME}); the word is an expansion. A name an arithmetic expression assigns
//     (x=1, x+=2, x++) is carried as "NAME=" to every command of the line. bash evaluates a
//     variable's value as an arithmetic expression again, running any $( ) in an a[...]
//     subscript of it; so a variable read as arithmetic ($(( )), $[ ], let, [[ -eq ]], names
//     inside ${...} other than the expanded one, array subscripts of declare/unset) must not be
//     one the line sets to text it did not write as a plain literal without '[' (set by read,
//     mapfile, getopts, printf -v, a for loop over globs or expansions, or an assignment whose
//     value holds '[', '$', '`' or a glob): such a line is opaque. Variables the line never sets
//     come from the sandbox's environment (set by the profile) and are trusted;
//   - brace expansion {a,b} {1..3} {a..e} {1..9..2} in arguments (bash, zsh and ksh expand it,
//     dash does not): the command is listed with its words expanded (at most 64 words per brace
//     word) and, unless the code is known to be bash's (bash -c), once more with the words as
//     written, which is what dash runs: `git {push,status}` lists {git, push, status} and
//     {git, {push,status}}. Words that are assignments, redirection targets, for/case words and
//     [[ ]] operands are not brace-expanded (as in bash);
//   - read [opts] [NAME...] (-a NAME too), mapfile/readarray [opts] [NAME], getopts OPTS NAME,
//     printf -v NAME, let EXPR...: the names are carried as "NAME=" (value unknown);
//   - sh|bash|dash|ash|ksh|mksh|zsh|rbash -c 'string': the string is parsed recursively, and the
//     outer command is kept as well; `sh|bash [opts] SCRIPT [args]` is a command like any other
//     (the engine's rule for running a shell on a file decides it); eval ARGS and trap ACTION are
//     parsed the same way. Nesting (sh -c, eval, trap, $( ), `...`, here-document code) is at
//     most 4 deep;
//   - commands run by another command, added after it as commands of their own with run_by
//     naming what runs them:
//       wrappers (timeout, nice, nohup, time, stdbuf, ionice, env, command, exec): run_by is the
//         wrapper's argv[0]; env's NAME=value words (and `env -u NAME`, as "NAME=") are the
//         command's assignments. Options are parsed conservatively (LookThroughWrapper);
//       xargs [GNU findutils options] CMD ARGS...: run_by "xargs"; no CMD runs echo; with -I/-i/
//         --replace the words holding the replacement string are expansions, without it the
//         command gets words from the input appended (more_args); --process-slot-var=NAME gives
//         the command the assignment "NAME="; -a/--arg-file FILE is a read of FILE. A command
//         xargs runs that would take its command, script or expression from those appended
//         words (env, timeout... without a command, a shell without -c, find, xargs, source)
//         is opaque;
//       find ... -exec|-execdir|-ok|-okdir CMD ... ;|+: each CMD, run_by "find -exec"; words
//         holding {} are expansions; -fprint/-fprint0/-fls/-fprintf FILE are writes of FILE;
//       source FILE [ARGS] and . FILE [ARGS]: the command {"sh", FILE, ARGS...}, run_by
//         "source", so the profile's rule for running a shell on a file decides it; sourcing can
//         set any variable, so every later command of the line gets the assignment "PATH="
//         (which the engine reads as "what runs may have changed").
// Opaque (the whole parse is marked opaque, with a reason naming the construct):
//   - parameter expansion, pathname expansion, brace expansion, $( ), <( ) in the command name,
//     and expansions in a redirection target or in code given to sh -c, eval or trap;
//   - function definitions (name() {...}, function name), select, coproc, (( )) commands,
//     for (( )) loops, alias definitions, declare/local/typeset -i/-n, mapfile -C;
//   - $(< file) (write $(cat file)); ${...} with quotes, blanks or nested expansions; ANSI-C $'...'
//     and locale $"..." quoting; named descriptor redirections {fd}>; '&>' followed by more words;
//   - arithmetic holding anything but numbers, operators and names, and arithmetic on untrusted
//     variables (above); read/mapfile/getopts/printf -v into anything but a plain name;
//   - a here-document inside $( ) that does not end before its ')'; a shell reading a here-
//     document or here-string as code through a group or an sh -c string; a shell running a
//     process substitution as its script or stdin; [[ ]] with parentheses (and && || < >)
//     outside bash -c, or with here-documents inside, or whose sh reading is opaque itself
//     ([[ $a < $b ]]: sh redirects to a file named by an expansion);
//   - a shell whose code comes from a pipe or a file (`curl x | sh`, `bash < f`) is NOT opaque:
//     it is listed with stdin_is_code and stdin_from, and the engine decides;
//   - unterminated quotes, substitutions, compound commands or [[ ]]; unbalanced parentheses;
//     nesting deeper than the limits; too many words (brace expansion, carried assignments).
#pragma once

#include <cstdint>
#include <forward_list>
#include <string>
#include <string_view>
#include <vector>

namespace cagent::policy {

// Where a simple command's standard input comes from.
enum class StdinSource : std::uint8_t {
  kInherited,     // the shell's own stdin (nothing said, or a fd duplication such as <&3)
  kPipe,          // an earlier stage of its pipeline, or a process substitution (< <(cmd))
  kFile,          // a file: < FILE or <> FILE (in `reads`), on it or on its compound command
  kHereDocument,  // << DELIM
  kHereString,    // <<< WORD
};

struct SimpleCommand {
  std::vector<std::string> argv;         // never empty in a ShellParse's commands
  std::vector<std::string> assignments;  // "NAME=value" as written; "NAME=" when unknown
  std::vector<std::string> writes;       // output redirection targets
  std::vector<std::string> reads;        // input redirection targets
  // What runs this command, when another command does (see the header comment): a wrapper's
  // argv[0] ("timeout"), "xargs", "find -exec", "source", "$( )", "<( )", ">( )", or "[[ (sh)"
  // for the sh (dash) reading of a [[ ]] test. Empty for a command of the line itself, of a
  // group, compound command, sh -c string, eval, trap or here-document script.
  std::string run_by;
  // Non-zero when the command is part of a pipeline of two or more stages: an id shared by every
  // command of that pipeline (unique within one parse). All commands of one stage share its
  // `stage` (0-based), including those in a group, compound command, substitution or sh -c
  // string that is the stage. A pipeline inside a stage of another one is numbered on from that
  // stage in the outer id (`(curl x | tee f) | sh`: curl 0, tee 1, sh 2), so within one id data
  // only ever flows from a lower stage to a higher one.
  std::uint32_t pipeline = 0;
  std::uint16_t stage = 0;
  StdinSource stdin_from = StdinSource::kInherited;
  // A shell (sh, bash, dash, ash, ksh, mksh, zsh, rbash) that reads the commands it runs from
  // stdin: run without -c and without a script operand, or with -s, or with the script
  // /dev/stdin, /dev/fd/0 or /proc/self/fd/0. When stdin is a here-document or here-string its
  // code has been parsed and listed; from a pipe or a file it has not (`curl x | sh`). Other
  // interpreters (python3 -, node, perl) are not marked: the engine decides those.
  bool stdin_is_code = false;
  // More arguments, unknown here, are appended when it runs (a command run by xargs without
  // -I/--replace): argv is only a prefix of what it gets.
  bool more_args = false;
  // `eval "$(CMD)"`: the code eval runs is the output of one command substitution, whose
  // commands are listed (run_by "$( )"). Like `CMD | sh`, the code is not known here; the engine
  // decides (an allow-list refuses it, as any code it cannot read).
  bool code_from_output = false;
};

struct ShellParse {
  std::vector<SimpleCommand> commands;  // in source order, nested -c strings after their caller
  bool opaque = false;
  std::string opaque_reason;  // e.g. "function definition 'f()' is not supported"
};

// Parses `script`. Never fails: problems make the result opaque. Inputs longer than kMaxScript
// bytes are opaque ("command line too long to check").
inline constexpr std::size_t kMaxShellScript = 64 * 1024;
ShellParse ParseShell(std::string_view script);

// The same parse with every word as a view instead of a string of its own, for callers that only
// read the words (the engine judges each command line this way). Fields as in SimpleCommand.
struct SimpleCommandView {
  std::vector<std::string_view> argv;
  std::vector<std::string_view> assignments;
  std::vector<std::string_view> writes;
  std::vector<std::string_view> reads;
  std::string_view run_by;
  std::uint32_t pipeline = 0;
  std::uint16_t stage = 0;
  StdinSource stdin_from = StdinSource::kInherited;
  bool stdin_is_code = false;
  bool more_args = false;
  bool code_from_output = false;
};

// A word written without quotes or escapes ("make", "$HOME/x", or one quoted part alone such as
// 'a b') is a view into the script; the others ("a'b'c", a\ b, the joined arguments of eval,
// brace-expanded words, unescaped `...` code, here-document code, "NAME=" assignments the parser
// makes) are views into `owned`, whose strings never move; run_by is a string literal or a word.
// So the views stay valid as long as both the script passed to ParseShellView and this object
// (or the one it is moved into) live. Not copyable: a copy's views would still point into the
// original.
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
