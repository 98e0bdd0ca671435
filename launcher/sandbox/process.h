// The command process: environment, descriptors, session and execve.
//
// prepare (parent): PrepareExec() builds the argv/envp arrays and the list of absolute paths to try
//   for argv[0] (the sandbox's PATH, not the caller's) so the child needs no allocation.
// apply-in-child: ExecCommand() runs in the command's process (pid 2 of the sandbox) right before
//   execve.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/sandbox/launch_spec.h"

namespace cagent::launcher {

struct ExecPlan {
  std::vector<std::string> candidates;  // absolute paths to try for argv[0], in order
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<char*> argv;  // null-terminated, pointing into argv_storage
  std::vector<char*> envp;  // null-terminated, pointing into env_storage
  std::string cwd;
  std::vector<int> keep_fds;  // sorted; fds >= 3 that survive into the command
  bool new_session = true;
  bool close_fds = true;
  // `exec --tty`: fd 0 is the sandbox's own terminal (launcher/sandbox/tty.h); the command, leader
  // of its new session, makes it its controlling terminal (TIOCSCTTY), so it is the foreground job.
  bool controlling_terminal = false;

  ExecPlan() = default;
  ExecPlan(const ExecPlan&) = delete;  // argv/envp point into the storage
  ExecPlan& operator=(const ExecPlan&) = delete;
  ExecPlan(ExecPlan&&) = default;
  ExecPlan& operator=(ExecPlan&&) = default;
};

// The environment the command gets: spec.env_override, then spec.env_set, then each spec.env_pass
// name present in `caller_env` (a null-terminated environ array). With the env layer switched
// off, spec.env_override then `caller_env` whole. Later entries do not override earlier ones, so
// an override always wins.
std::vector<std::string> BuildEnvironment(const LaunchSpec& spec, char** caller_env);

// Prepare: builds the plan. `caller_env` is normally `environ`.
Result<ExecPlan> PrepareExec(const LaunchSpec& spec, char** caller_env);

// Records where this process's argv strings live (call once from main). The sandbox's init is a
// clone of cagent and, without this, would show cagent's whole command line — including any
// --env values — in /proc/1/cmdline, which every process in the sandbox can read.
void RememberArgvArea(int argc, char** argv);

// Apply-in-child: overwrites the remembered argv area with "cagent-init". Async-signal-safe.
void SetInitProcessTitle();

// Closes every fd >= 3 except those in `keep` (sorted ascending). Async-signal-safe.
// Returns 0 or an errno.
int CloseFdsExcept(const int* keep, size_t n_keep);

// Apply-in-child, never returns: resets signal state, starts a new session, changes directory,
// closes inherited fds except `keep_fds` and `report_fd` (close-on-exec), and executes the command.
// On failure sends a kExecFailed or kSetupFailed report on `report_fd` and exits with 126/127/125.
[[noreturn]] void ExecCommand(const ExecPlan& plan, int report_fd);

}  // namespace cagent::launcher
