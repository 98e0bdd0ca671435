// Small text helpers shared by the launcher's parsers (cgroup files, approval answers), the JSON
// writer and the agent's tools.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cagent {

// `s` without the ASCII whitespace (space, tab, CR, LF) at either end.
[[nodiscard]] std::string_view TrimSpace(std::string_view s);

// Length of the well-formed UTF-8 sequence starting at s[i] (1 for ASCII), 0 if it is not one:
// invalid lead byte, cut short, overlong, a surrogate or above U+10FFFF (Unicode table 3-7).
[[nodiscard]] std::size_t Utf8SequenceLength(std::string_view s, std::size_t i);

// `text` as one word of POSIX sh: single-quoted, each ' written as '\''. Any byte but NUL
// survives. (For a script; on a terminal the result still goes through TerminalSafe.)
[[nodiscard]] std::string ShellQuote(std::string_view text);

// `word` as ShellQuote writes it only when sh would read it otherwise (a space, a quote, a
// metacharacter, a glob, ~ or #, or the empty word); else as it is. For commands shown to a user.
[[nodiscard]] std::string ShellWord(std::string_view word);

}  // namespace cagent
