// run_command's process handling (cagent-agent, inside the sandbox).
//
// A command is `/bin/sh -c COMMAND` in its own process group, cwd the workspace, stdin /dev/null,
// stdout and stderr merged into one pipe. A call leaves no process behind: on timeout the group
// gets SIGTERM, then SIGKILL after the grace period; and whenever the shell exits (on its own or
// not), whatever is left of its group is killed, and so is every process that was re-parented to
// this process (the agent is a child subreaper, see Toolbox::Open) — a background job that
// ignores SIGTERM or one that setsid()s away included. All of them are reaped.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace cagent::agent {

struct CommandSpec {
  std::string command;  // the shell string (no NUL byte)
  int cwd_fd = -1;      // directory fd the shell starts in (fchdir); not owned
  std::chrono::milliseconds timeout{120000};
  std::chrono::milliseconds kill_grace{2000};
  std::uint64_t output_cap = 64 * 1024;  // bytes kept: the first half and the last half
  // Cancellation (a served session): while the command runs, `interrupt_fd` is polled too; when it
  // becomes readable, `interrupted()` is asked (it reads what arrived) and a true answer stops the
  // command as a timeout does (SIGTERM to the group, SIGKILL after the grace), marked cancelled.
  // -1 = none.
  int interrupt_fd = -1;
  std::function<bool()> interrupted;
};

struct CommandRun {
  std::string start_error;  // non-empty: the shell could not be started (nothing ran)
  bool exited = false;      // normal exit: exit_code valid
  int exit_code = 0;
  int term_signal = 0;  // killed by this signal (when !exited)
  bool timed_out = false;
  bool cancelled = false;          // stopped through CommandSpec::interrupted
  bool escalated = false;          // timed out and the grace period ended with SIGKILL
  std::string output;              // head + "[... N bytes cut ...]" + tail (raw bytes)
  std::uint64_t output_bytes = 0;  // everything the command wrote
  std::uint64_t cut_bytes = 0;     // how much of it was dropped from the middle
  int leftovers_killed = 0;        // processes still alive after the shell exited, killed by us
  bool proc_scan = true;           // /proc was readable (orphans could be found)
};

// Runs the command to completion (or timeout) in the calling process's child. Blocks. Must not be
// called concurrently from two threads (the orphan scan would kill the other call's processes).
// The child side between fork and exec only makes async-signal-safe calls.
CommandRun RunShellCommand(const CommandSpec& spec);

// "SIGKILL (signal 9)".
std::string SignalDescription(int sig);

}  // namespace cagent::agent
