// An audit (audit.h) as SARIF 2.1.0, the format code-scanning tools read (GitHub code scanning
// among them). Pure: builds the document; the caller writes it (`cagent policy audit --format
// sarif`).
//
// Shape: {$schema, version "2.1.0", runs: [{tool: {driver: {name "cagent", version,
// informationUri, rules}}, originalUriBaseIds, results}]}. The driver's rules are AuditRules() in
// order, each with its help text, a helpUri into the audit documentation, and properties
// `security-severity` (SecuritySeverity of its default risk; GitHub shows the severity from it)
// and `tags`. Each result names its ruleId and ruleIndex, its level (SarifLevel), the message,
// properties `severity` (RiskName) and `security-severity`, and, when the finding is located in a
// file, one physicalLocation (ArtifactOf) with the line and column.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>

#include "policy/language/ir.h"
#include "policy/review/audit.h"

namespace cagent::policy {

// SARIF's level for a risk: high -> "error", medium -> "warning", low and info -> "note".
[[nodiscard]] std::string_view SarifLevel(Risk risk);

// `name` (a file's display name, which may be any bytes a file name can hold) as a URI reference:
// unreserved and sub-delimiter characters, '/', ':' and '@' are kept; every other byte,
// including '%', blanks, '#', '?', controls and non-ASCII bytes, is percent-encoded (uppercase).
[[nodiscard]] std::string UriOf(std::string_view name);

// SARIF's `security-severity` (a score from 0.1 to 10, as a string) for a risk: high "8.0",
// medium "5.5", low "3.0", info "1.0" (GitHub: 7.0-8.9 high, 4.0-6.9 medium, 0.1-3.9 low).
[[nodiscard]] std::string_view SecuritySeverity(Risk risk);

// The base id of paths relative to the directory the audit ran in (the repository's root for
// `cagent policy audit ./.cagent/project.cagent`); originalUriBaseIds says where it is.
inline constexpr std::string_view kSarifSourceRoot = "SRCROOT";

// A profile file's display name as a SARIF artifactLocation:
//   "<built-in>/base.cagent"    -> {"uri": "cagent-builtin:base.cagent"} (compiled into cagent)
//   "./.cagent/p.cagent", "p"   -> {"uri": ".cagent/p.cagent", "uriBaseId": "SRCROOT"}
//   "/abs/x.cagent" in `root`   -> relative to SRCROOT, as above
//   "/abs/x.cagent" elsewhere   -> {"uri": "file:///abs/x.cagent"}
// `root` is the audit's directory (absolute, "" when unknown); every path is UriOf-encoded.
[[nodiscard]] nlohmann::json ArtifactOf(std::string_view display_name, std::string_view root);

struct SarifOptions {
  std::string_view version;      // cagent's version, for the driver
  std::string_view source_root;  // absolute directory SRCROOT stands for ("" = not said)
  // Where each rule's help lives: the rule's helpUri is this plus "#cagent001-network" (the
  // anchor of its section in docs/auditing-profiles.md).
  std::string_view help_base = "file:///usr/share/doc/cagent/auditing-profiles.md";
};

// The SARIF log of `findings` (from Audit(policy, ...)). Locations are resolved against
// `policy`'s sources.
[[nodiscard]] nlohmann::json AuditSarif(const Policy& policy, std::span<const Finding> findings,
                                        const SarifOptions& options);

}  // namespace cagent::policy
