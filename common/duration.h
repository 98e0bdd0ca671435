// Parsing of the human duration and size literals used on the command line ("90s", "10m", "512M").
// The policy language has its own typed values; these helpers are shared so both spell them alike.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "common/result.h"

namespace cagent {

// Parses "<digits>[ms|s|m|h]" (no unit = seconds). Rejects zero-length numbers, overflow, unknown
// units and values above 30 days.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

// Parses "<digits>[K|M|G|T]" (binary multiples; no unit = bytes).
Result<std::uint64_t> ParseSize(std::string_view text);

}  // namespace cagent
