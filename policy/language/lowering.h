// "The command line may only lower the profile": the one check behind every value a command line
// can give against a reviewed profile's ceiling (`cagent exec`'s limits, `cagent run`'s and
// `cagent agent`'s budgets). Pure: no I/O.
//
// The profile is what was reviewed (and what `cagent policy audit` judged), so a command line may
// narrow the sandbox or a budget, never widen it. Both the launcher's narrowing
// (launcher/profile/narrow.h) and the broker's budget lowering (launcher/broker/budgets.cc) call
// CheckLowers, so the rule and its message are written once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "policy/language/ir.h"

namespace cagent::policy {

// One ceiling a profile sets.
struct Ceiling {
  std::string name;                    // as a profile writes it: "cpu-time", "tool-calls[grep]"
  std::optional<std::uint64_t> value;  // in the limit's unit; nullopt = unbounded
  LimitKind kind = LimitKind::kCount;  // how values are written: 10m, 4G, 256, 2.50 USD
  std::string where;                   // "'base' sets it at FILE:L:C", or "" when not known
  std::string currency;                // kMoney: the currency of value ("USD")
};

// The ceiling `policy` sets for `limit`: unbounded when the limit is unset or `unlimited`, with
// the profile's name and the location that set it otherwise.
[[nodiscard]] Ceiling CeilingOf(const Policy& policy, Limit limit);

// `value` in `kind`'s notation: FormatDuration for durations (ms), FormatSize for sizes (bytes),
// the number for counts, FormatMoney for money (millionths of `currency`).
[[nodiscard]] std::string FormatValue(LimitKind kind, std::uint64_t value,
                                      const std::string& currency = "");

// Ok when `requested` (in the ceiling's unit) is at most the ceiling, or the ceiling is unbounded.
// Otherwise an Error with code kInvalidInput whose message names `flag` (as the user typed it:
// "--cpu-time"), the value asked for and the profile's, e.g.
//   --cpu-time can only lower the profile's limit: 2h asked, but 'backend' sets cpu-time 20m at
//   <built-in>/base.cagent:12:3; pass at most 20m
[[nodiscard]] Status CheckLowers(std::string_view flag, const Ceiling& ceiling,
                                 std::uint64_t requested);

}  // namespace cagent::policy
