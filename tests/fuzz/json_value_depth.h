// How deep a parsed JSON value nests (an object or array is one level; a scalar is 0), for the
// fuzz targets' invariants. Recursive: only for values parsed within a depth limit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <nlohmann/json.hpp>

namespace cagent::fuzz {

inline std::size_t JsonValueDepth(const nlohmann::json& value) {
  if (!value.is_structured()) return 0;
  std::size_t deepest = 0;
  for (const nlohmann::json& child : value) deepest = std::max(deepest, JsonValueDepth(child));
  return deepest + 1;
}

}  // namespace cagent::fuzz
