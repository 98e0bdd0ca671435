// Small text helpers shared by the launcher's parsers (cgroup files, approval answers), the JSON
// writer and the agent's tools.
#pragma once

#include <cstddef>
#include <string_view>

namespace cagent {

// `s` without the ASCII whitespace (space, tab, CR, LF) at either end.
[[nodiscard]] std::string_view TrimSpace(std::string_view s);

// Length of the well-formed UTF-8 sequence starting at s[i] (1 for ASCII), 0 if it is not one:
// invalid lead byte, cut short, overlong, a surrogate or above U+10FFFF (Unicode table 3-7).
[[nodiscard]] std::size_t Utf8SequenceLength(std::string_view s, std::size_t i);

}  // namespace cagent
