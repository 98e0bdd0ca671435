// The compiler: a chain of checked profiles (root parent first) to one normalised Policy.
//
// Merge rules, the same for every key (docs/policy-language.md, "Inheritance"):
//   - scalars (network, approval, workspace, each limit, description): the nearest profile that
//   sets
//     one wins;
//   - rules (commands, tools, filesystem deny/ask) and requirements: the union — a child can add
//     rules but never remove a parent's, so a parent's deny always stands;
//   - mounts: per path, the nearest profile wins (a child may remount a parent's path; audit flags
//     it when that widens access);
//   - environment: pass and scrub are unions, set is per name, nearest wins;
//   - verify: a child that writes `verify` replaces its parent's list.
// Then everything is sorted and de-duplicated, cross-key conflicts are checked (a requirement that
// is also best-effort, `require memory-limit` without a memory limit), and the last profile's own
// examples are run against the result with the engine.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policy/language/checker.h"
#include "policy/language/diagnostics.h"
#include "policy/language/ir.h"

namespace cagent::policy {

struct ChainLink {
  std::string name;
  CheckedProfile profile;
};

// `chain` is root first; `sources` holds the files its locations point into (kept in the result).
// The result's `files` and `name` are left for the loader.
std::optional<Policy> Compile(std::vector<ChainLink> chain,
                              std::shared_ptr<const SourceSet> sources, Diagnostics& diags);

}  // namespace cagent::policy
