// Verification: the profile's trusted commands, each in a fresh sandbox over the verification tree
// (a fresh checkout of base + the captured patch, checkout.h — never the agent's workspace), each
// with its own timeout and log file. Runs in cagent (trusted). The agent cannot choose, change or
// skip them: they come from the compiled profile only. The commands share the one tree, in order
// (a build step's output is there for the test step); what they run is the patch's code, so the
// tree is hostile once they have run, like a workspace.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/broker/audit_schema.h"
#include "launcher/egress/proxy.h"
#include "launcher/profile/spec.h"
#include "launcher/run/checkout.h"
#include "launcher/run/run_record.h"
#include "policy/language/ir.h"

namespace cagent::launcher::run {

// VerifyEntry and VerifyStatusName are in run_record.h: the entries are part of the run's record.

// The entries for `policy`'s verify commands, all kNotRun (for runs that end before verifying).
std::vector<VerifyEntry> PlannedVerification(const policy::Policy& policy);

// Filtered egress for verification: a profile with a hosts section verifies with the same rules
// (its own network, as the agent had it); nobody is asked (an `ask` host is refused unless
// pre-approved — verification is unattended), every connection is an audit event (phase
// "verify").
struct VerifyEgress {
  std::shared_ptr<const policy::Policy> policy;  // the policy verification runs under
  std::vector<egress::ResolveOverride> overrides;
  std::function<void(const broker::AuditEvent&)> audit;  // called on the egress io thread
  std::string profile;  // the profile as the run names it, for the hint lines
};

// Runs every verify command in order (all of them: a failure does not hide the next one's
// result). `logs_dir` must exist; logs are NN-verify.log. `on_start` is told each command.
// Each entry records `tree.tree` as the tree it ran on. `egress`: see VerifyEgress; null, or a
// policy without a hosts section, means the profile's network without a proxy (where a name lookup
// answers "no such name" at once: launcher/sandbox/egress_view.h).
std::vector<VerifyEntry> RunVerification(const policy::Policy& policy, const VerifyTree& tree,
                                         const std::string& logs_dir, const ProfileContext& ctx,
                                         const std::function<void(const std::string&)>& on_start,
                                         const VerifyEgress* egress = nullptr);

// The policy setup commands run under: the profile's, with the setup block's own network when it
// has a hosts section (network loopback, the egress proxy on, those hosts rules only).
std::shared_ptr<const policy::Policy> SetupPolicy(const policy::Policy& policy);

// Runs the profile's setup commands in order over `dir` (the run's workspace before the agent, or
// the verification tree before the verify commands), each in a fresh sandbox built from
// `setup_policy` (SetupPolicy), every cache writable when `caches_writable` (before the agent;
// on the verification tree the patch decides what setup runs, so caches are read-only there); stops
// at the first that does not pass (the rest are kNotRun). Logs are NN-`log_kind`.log in `logs_dir`.
// `egress`: as for RunVerification (its policy is replaced by `setup_policy`; connections are phase
// "setup").
std::vector<VerifyEntry> RunSetup(const std::shared_ptr<const policy::Policy>& setup_policy,
                                  const std::string& dir, const std::string& logs_dir,
                                  const char* log_kind, const ProfileContext& ctx,
                                  const std::function<void(const std::string&)>& on_start,
                                  const VerifyEgress* egress, bool caches_writable);

// Default per-command timeout when the profile gives none: its command-timeout, else 10 minutes.
std::chrono::milliseconds VerifyTimeout(const policy::Policy& policy,
                                        const policy::VerifyCommand& v);

}  // namespace cagent::launcher::run
