#include "common/duration.h"

#include <limits>
#include <string>

namespace cagent {
namespace {

// Splits "123abc" into 123 and "abc". Fails on no digits or overflow.
Result<std::pair<std::uint64_t, std::string_view>> SplitNumber(std::string_view text,
                                                               const char* what) {
  std::uint64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
      return PlainError(std::string("invalid ") + what + " '" + std::string(text) + "'",
                        "number too large");
    }
    value = value * 10 + digit;
  }
  if (i == 0) {
    return PlainError(std::string("invalid ") + what + " '" + std::string(text) + "'",
                      "expected a number followed by an optional unit");
  }
  return std::pair{value, text.substr(i)};
}

}  // namespace

Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  auto split = SplitNumber(text, "duration");
  if (!split) return split.error();
  const auto [n, unit] = *split;
  std::uint64_t ms_per_unit = 0;
  if (unit.empty() || unit == "s") {
    ms_per_unit = 1000;
  } else if (unit == "ms") {
    ms_per_unit = 1;
  } else if (unit == "m") {
    ms_per_unit = 60'000;
  } else if (unit == "h") {
    ms_per_unit = 3'600'000;
  } else {
    return PlainError("invalid duration '" + std::string(text) + "'",
                      "unknown unit '" + std::string(unit) + "' (use ms, s, m or h)");
  }
  constexpr std::uint64_t kMaxMs = 30ULL * 24 * 3'600'000;
  if (n > kMaxMs / ms_per_unit) {
    return PlainError("invalid duration '" + std::string(text) + "'", "longer than 30 days");
  }
  return std::chrono::milliseconds(n * ms_per_unit);
}

Result<std::uint64_t> ParseSize(std::string_view text) {
  auto split = SplitNumber(text, "size");
  if (!split) return split.error();
  const auto [n, unit] = *split;
  int shift = 0;
  if (unit.empty() || unit == "B") {
    shift = 0;
  } else if (unit == "K") {
    shift = 10;
  } else if (unit == "M") {
    shift = 20;
  } else if (unit == "G") {
    shift = 30;
  } else if (unit == "T") {
    shift = 40;
  } else {
    return PlainError("invalid size '" + std::string(text) + "'",
                      "unknown unit '" + std::string(unit) + "' (use K, M, G or T)");
  }
  if (shift > 0 && n > (std::numeric_limits<std::uint64_t>::max() >> shift)) {
    return PlainError("invalid size '" + std::string(text) + "'", "number too large");
  }
  return n << shift;
}

}  // namespace cagent
