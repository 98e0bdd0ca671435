// The sandbox's pid 1.
//
// A tiny init that runs in the child after the sandbox is built: it starts the command as pid 2,
// reaps every zombie, forwards SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 *from cagent* to the
// command, ignores the same signals when they come from inside the sandbox (so nothing inside can
// make init act), and exits with the command's status (128+N for signal N) as soon as the command
// exits. Its exit tears down the pid namespace: the kernel SIGKILLs everything left inside,
// including double-forked daemons.
#pragma once

#include "launcher/sandbox/process.h"

namespace cagent::launcher {

struct InitOptions {
  // Without a pid namespace init is not pid 1: it marks itself a child subreaper so orphans are
  // still reaped, but they survive its exit (that is what the pid layer prevents).
  bool pid_namespace = true;
  bool new_session = true;
};

// Apply-in-child, never returns. Uses signalfd, clone (CLONE_VM | CLONE_VFORK, as posix_spawn
// does) and waitpid only; reports the command's wait status on `report_fd` before exiting.
[[noreturn]] void RunInit(const ExecPlan& exec, const InitOptions& options, int report_fd);

}  // namespace cagent::launcher
