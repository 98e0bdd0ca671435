// Sandbox: builds the sandbox described by a LaunchSpec, runs its command, and reports how it
// ended. This module is the only place that knows the order of the launch steps (see sandbox.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/exit_codes.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "launcher/guard/git_config_guard.h"
#include "launcher/sandbox/child_report.h"
#include "launcher/sandbox/launch_spec.h"
#include "launcher/sandbox/tty.h"

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
  std::string error;        // human-readable, for kSetupFailed/kExecFailed
  std::string failed_step;  // ChildStep name or parent-side step, for kSetupFailed/kExecFailed
  int err = 0;              // errno for kSetupFailed/kExecFailed
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
  // The git guard (LaunchSpec::guard_git_metadata), in words: which repositories, which
  // placeholders; "off" when switched off.
  std::string git_guard;
  // What cagent found and did on the host after the sandbox exited (LaunchSpec::guard_*), one line
  // each, unescaped: planted repositories, cleared setuid bits. Also logged as warnings on stderr
  // (escaped) by RunSandbox. Callers put them in their JSON ("host_findings").
  std::vector<std::string> host_findings;
  // `.git` entries the command created or replaced in the writable trees (absolute paths).
  std::vector<std::string> planted_repositories;
  // Files whose setuid/setgid bits or file capabilities were removed (absolute paths).
  std::vector<std::string> cleared_files;
  // Git configuration files the command changed that cagent rewrote after it exited, with the
  // keys it dropped (launcher/guard/git_config_guard.h); each is a host_findings line too.
  std::vector<GitConfigRewrite> git_config_rewrites;
};

// The status of an outcome of kind kTimedOut (LaunchSpec's wall-clock limit expired): the table's
// kTimedOut (common/exit_codes.h).
inline constexpr int kExitTimedOut = ToInt(ExitCode::kTimedOut);

// Builds the sandbox, runs spec.argv inside it and waits for it to end. Runs in cagent (the
// parent). While it runs, SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to cagent are forwarded to the command
// (a second SIGINT or SIGTERM kills the whole sandbox). The caller's signal mask is restored on
// return. Before the launch and after the exit it applies the host-side guards of the spec
// (guard_git_metadata, guard_privileged_files) to the writable trees; see SandboxOutcome's
// host_findings. Never returns an error Result for failures inside the sandbox: those are outcomes;
// an error Result means cagent itself could not proceed (e.g. out of memory).
Result<SandboxOutcome> RunSandbox(const LaunchSpec& spec);

// For callers that run something beside the sandbox (the broker of `cagent run`).
struct SandboxControl {
  // When this fd becomes readable (e.g. an eventfd written once), the sandbox is stopped: SIGTERM
  // to the command, then SIGKILL to the whole sandbox after spec.kill_grace. -1 = none. Not owned.
  int stop_fd = -1;
  // false: RunSandbox leaves SIGINT/SIGTERM/SIGHUP/SIGQUIT and the signal mask alone; the caller
  // handles them (on another thread) and stops the sandbox through stop_fd.
  bool forward_signals = true;
  // Called in cagent right after clone, before the sandbox is released; e.g. closes cagent's copy
  // of a descriptor passed with keep_fds, so the peer sees EOF when the sandbox ends.
  std::function<void()> after_clone;
  // Called in cagent with the sockets of LaunchSpec::net_listeners (in the spec's order), made in
  // the sandbox's network namespace, before the command starts; e.g. starts the egress proxy on
  // them. An error stops the launch (setup failed at "start the egress proxy").
  std::function<Status(std::vector<UniqueFd>)> on_listeners;
  // Descriptors that become the sandbox's stdin, stdout and stderr (-1 = cagent's own). Not owned;
  // e.g. /dev/null for an agent that must not read the operator's terminal, a log file for its
  // output.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // `cagent exec --tty`: the sandbox gets a terminal of its own (launcher/sandbox/tty.h), made from
  // this plan in the view's devpts; its slave replaces stdin, stdout and stderr (the three above
  // are then unused) and becomes the command's controlling terminal. Not owned; null = no terminal,
  // the stdio as they are. Needs the session layer (the command's own session owns it).
  const TerminalPlan* terminal = nullptr;
  // Called in cagent with the terminal's master, the only one (the sandbox keeps none), as soon as
  // the child has sent it; the command may already be running and writing (the pty buffers it).
  // An error stops the launch (setup failed at "start the terminal relay").
  std::function<Status(UniqueFd)> on_terminal;
};
// RunSandbox with control. Must run on the thread that stays alive for the whole run: the
// sandbox's death signal (PR_SET_PDEATHSIG) fires when the creating thread exits.
Result<SandboxOutcome> RunSandbox(const LaunchSpec& spec, const SandboxControl& control);

// "SIGKILL" (or "signal 42" for a number without a name).
std::string SignalName(int sig);
// "SIGKILL (Killed)".
std::string DescribeSignal(int sig);

// "sandbox setup failed at <step>: <error>" plus a hint where one helps; used by the CLI.
std::string DescribeOutcome(const SandboxOutcome& outcome);

}  // namespace cagent::launcher
