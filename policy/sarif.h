// An audit (audit.h) as SARIF 2.1.0, the format code-scanning tools read. Pure: builds the
// document; the caller writes it (`cagent policy audit --format sarif`).
//
// Shape: {$schema, version "2.1.0", runs: [{tool: {driver: {name "cagent", version, rules}},
// results}]}. The driver's rules are AuditRules() in order; each result names its ruleId and
// ruleIndex into them, its level (SarifLevel), the message, a property `severity` (RiskName) and,
// when the finding is located in a file, one physicalLocation whose artifactLocation.uri is the
// file's display name as a URI reference (UriOf) and whose region is its line and column.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>

#include "policy/audit.h"
#include "policy/ir.h"

namespace cagent::policy {

// SARIF's level for a risk: high -> "error", medium -> "warning", low and info -> "note".
[[nodiscard]] std::string_view SarifLevel(Risk risk);

// `name` (a file's display name, which may be any bytes a file name can hold) as a URI reference:
// unreserved and sub-delimiter characters, '/', ':' and '@' are kept; every other byte,
// including '%', blanks, '#', '?', controls and non-ASCII bytes, is percent-encoded (uppercase).
[[nodiscard]] std::string UriOf(std::string_view name);

// The SARIF log of `findings` (from Audit(policy, ...)); `version` is cagent's version for the
// driver. Locations are resolved against `policy`'s sources.
[[nodiscard]] nlohmann::json AuditSarif(const Policy& policy, std::span<const Finding> findings,
                                        std::string_view version);

}  // namespace cagent::policy
