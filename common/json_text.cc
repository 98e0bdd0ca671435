#include "common/json_text.h"

#include <algorithm>

namespace cagent {

std::string JsonText(const nlohmann::json& value, int indent) noexcept {
  try {
    return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception&) {
    // With error_handler_t::replace dump() has nothing left to throw on; should a future version
    // find something, the caller still gets valid JSON rather than an abort.
    return "null";
  }
}

std::size_t JsonDepth(std::string_view text, std::size_t limit) noexcept {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return limit + 1;
      deepest = std::max(deepest, depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace cagent
