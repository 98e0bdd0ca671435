// Small text helpers shared by the launcher's parsers (cgroup files, approval answers).
#pragma once

#include <string_view>

namespace cagent {

// `s` without the ASCII whitespace (space, tab, CR, LF) at either end.
[[nodiscard]] std::string_view TrimSpace(std::string_view s);

}  // namespace cagent
