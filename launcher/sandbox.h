// Sandbox: builds the sandbox described by a LaunchSpec, runs its command, and reports how it
// ended. This module is the only place that knows the order of the launch steps (see sandbox.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/child_report.h"
#include "launcher/launch_spec.h"

namespace cagent::launcher {

// How a sandboxed command ended.
struct SandboxOutcome {
  enum class Kind {
    kExited,       // the command exited; exit_code is its status
    kSignaled,     // the command was killed by `signal`; exit_code is 128+signal
    kTimedOut,     // the wall-clock limit expired and the sandbox was stopped; exit_code 124
    kSetupFailed,  // the sandbox could not be built; exit_code 125, `error` says where
    kExecFailed,   // the command could not be executed; exit_code 126/127
  };
  Kind kind = Kind::kExited;
  int exit_code = 0;
  int signal = 0;
  std::string error;       // human-readable, for kSetupFailed/kExecFailed
  std::string failed_step; // ChildStep name or parent-side step, for kSetupFailed/kExecFailed
  int err = 0;             // errno for kSetupFailed/kExecFailed
  std::chrono::milliseconds duration{0};
  // Layers that were switched off for this run, by name.
  std::vector<std::string> disabled_layers;
  // Restrictions that could not be applied in full and were accepted as best effort, in words.
  std::vector<std::string> downgrades;
  // What each hardening layer did, in words, for the run record ("Landlock ABI 7: ...").
  std::string landlock;
  std::string seccomp;
  std::string rlimits;
  std::string cgroup;
  // From the sandbox's cgroup, when one was used.
  std::optional<std::uint64_t> memory_peak_bytes;
  std::uint64_t oom_kills = 0;
  // Set when the command died of a resource ceiling: which one, in words.
  std::string limit_hit;
};

inline constexpr int kExitTimedOut = 124;

// Builds the sandbox, runs spec.argv inside it and waits for it to end. Runs in cagent (the
// parent). While it runs, SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to cagent are forwarded to the command
// (a second SIGINT or SIGTERM kills the whole sandbox). The caller's signal mask is restored on
// return. Never returns an error Result for failures inside the sandbox: those are outcomes; an
// error Result means cagent itself could not proceed (e.g. out of memory).
Result<SandboxOutcome> RunSandbox(const LaunchSpec& spec);

// "SIGKILL" (or "signal 42" for a number without a name).
std::string SignalName(int sig);
// "SIGKILL (Killed)".
std::string DescribeSignal(int sig);

// "sandbox setup failed at <step>: <error>" plus a hint where one helps; used by the CLI.
std::string DescribeOutcome(const SandboxOutcome& outcome);

}  // namespace cagent::launcher
