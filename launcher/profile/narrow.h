// `cagent exec`'s command-line overrides applied to the spec a profile built: the command line may
// narrow the sandbox, never widen it. Pure (no I/O, no logging): runs in cagent (trusted) before
// anything is prepared.
//
// The profile is what was reviewed (and what `cagent policy audit` judged). With a profile, an
// override that would widen it is refused: extra read-only/read-write binds, a switched-off layer,
// passing a variable the profile scrubs, loopback networking over `network none`, a limit above
// the profile's (policy/language/lowering.h, the same check as the broker's budgets), best effort
// for a restriction the profile requires. Without a profile (`--profile default`) every override is
// taken as given: the launcher's defaults were not reviewed by anyone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/sandbox/launch_spec.h"
#include "policy/language/ir.h"

namespace cagent::launcher {

// What `cagent exec` accepts on top of the profile, as typed (literals are parsed by Narrow).
struct ExecOverrides {
  std::vector<std::string> ro_paths;              // --ro
  std::vector<std::string> rw_paths;              // --rw
  std::vector<std::string> hide_paths;            // --hide
  std::vector<std::string> env_set;               // --env NAME=VALUE
  std::vector<std::string> env_pass;              // --pass-env NAME
  std::string timeout;                            // --timeout, duration literal; "" = the profile's
  std::string hostname;                           // --hostname; "" = the default
  std::vector<std::string> disable_layers;        // --disable-layer
  std::vector<std::string> best_effort;           // --best-effort
  std::string network;                            // --network; "" = the profile's
  std::string cpu_time, file_size, memory, cpus;  // literals; "" = the profile's
  std::optional<std::uint64_t> open_files, processes, pids;
};

// `spec` (from SpecFromPolicy(*policy, ...), or DefaultLaunchSpec when `policy` is null) with
// `overrides` applied. Fails with Error::Code::kInvalidInput, naming the flag (and, for a widening,
// the profile's value and where it is set), when an override does not parse or would widen
// `policy`; then nothing is returned. Does not call ValidateLaunchSpec: the caller does, after it
// has warned about the layers switched off (spec.disabled).
[[nodiscard]] Result<LaunchSpec> Narrow(LaunchSpec spec, const ExecOverrides& overrides,
                                        const policy::Policy* policy);

}  // namespace cagent::launcher
