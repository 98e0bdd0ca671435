// Auditing a compiled policy: the risks a reviewer should know about, each located at the
// statement responsible.
//
// Audit(policy) reports, with a stable rule id and a severity:
//   CAGENT001 network     network is not `none`
//   CAGENT002 writable    read-write mounts outside the workspace
//   CAGENT003 secrets     host paths that hold credentials (~, ~/.ssh, ~/.aws, ~/.config, ...)
//                         readable inside the sandbox
//   CAGENT004 workspace-secrets  secret files in the workspace (.env, *.pem, *.key, ...) readable:
//                         no deny rule covers them
//   CAGENT005 interpreter  shells, interpreters and command runners allowed: equivalent to
//                         allowing everything the sandbox allows; a first pattern element `*`
//   CAGENT006 silent-ask  `ask` rules under approval never-ask: silent denials
//   CAGENT007 auto-approval  approval auto: every ask becomes an allow
//   CAGENT008 unbounded   limits that are unset or `unlimited`
//   CAGENT009 best-effort  layers the run may go without
//   CAGENT010 not-required  no `require landlock` / `require seccomp`
//   CAGENT011 weakens-parent  a child profile widening what its parent allows
//   CAGENT012 any-host    a hosts rule allowing or asking for `*` (every host)
//   CAGENT013 shared-hosting  a hosts wildcard over a domain where anyone publishes content
//                         (*.githubusercontent.com, *.s3.amazonaws.com, *.pages.dev, ...)
//   CAGENT014 internal-address  an allowed IP literal in loopback, private, link-local or
//                         cloud-metadata space (the proxy runs outside the sandbox)
//   CAGENT015 any-mcp-tool  a tools rule allowing (low) or asking for (info) `mcp:*`, every tool
//                         of a server run by `cagent mcp wrap`
//   CAGENT017 outputs     an `outputs` glob (info), or one that covers source paths (low):
//                         untracked files below it are left out of the agent's patch
// CAGENT001 says what a hosts section opens; CAGENT008 reports a missing egress budget (info)
// only while some hosts rule allows or asks.
// Pure: it asks the engine (with its default bindings) and the diff (diff.h) and reads nothing.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/language/ir.h"

namespace cagent::policy {

enum class Risk : std::uint8_t { kHigh, kMedium, kLow, kInfo };
std::string_view RiskName(Risk r);  // "high", "medium", "low", "info"

// A kind of finding, for SARIF's rule table and `--help`.
struct AuditRule {
  std::string_view id;    // "CAGENT001": stable, never reused
  std::string_view name;  // "network"
  std::string_view short_description;
  Risk default_risk;      // the usual severity; a finding may be rated differently
  std::string_view help;  // what to do about it, for a reader of a SARIF log (one paragraph)
};
std::span<const AuditRule> AuditRules();

struct Finding {
  std::string_view rule_id;  // one of AuditRules()
  Risk risk = Risk::kInfo;
  std::string message;  // one sentence: what, where it leads, what to do
  // The statement responsible, in the audited policy's sources. When the risk is an absence
  // (no limit, no require) this is the start of the profile's own file; invalid only for a policy
  // without sources.
  Location loc;
};

// The findings for `policy`, most severe first, then in rule order. `parent`, when given, is the
// compiled parent profile (policy.chain minus its last element), loaded the same way; wider
// differences from it are reported as CAGENT011, located in the child.
std::vector<Finding> Audit(const Policy& policy, const Policy* parent = nullptr);

}  // namespace cagent::policy
