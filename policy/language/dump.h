// Deterministic renderings of a compiled Policy.
//
// Dump() writes the effective profile in the language itself (it parses and compiles back to the
// same policy), one rule per line, sorted, each with the location it came from as a comment. It is
// what `cagent policy show` prints and what the golden files in tests/golden/ hold, so that a
// profile edit is a reviewable diff. ToJson() is the same content for machines.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "policy/language/ir.h"

namespace cagent::policy {

// "90s", "10m", "1500ms": the largest unit that represents `ms` exactly.
std::string FormatDuration(std::uint64_t ms);
// "512M", "4G", "1000": the largest binary unit that represents `bytes` exactly.
std::string FormatSize(std::uint64_t bytes);
// A limit's value as written in a profile ("10m", "4G", "256", "unlimited", "unset").
std::string FormatLimit(Limit limit, const LimitValue& value);

// `with_locations`: append "# file:line:col" to each line.
std::string Dump(const Policy& policy, bool with_locations = true);
nlohmann::json ToJson(const Policy& policy);

}  // namespace cagent::policy
