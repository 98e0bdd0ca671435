// `cagent batch run`: the tasks of a task file run concurrently on this machine, each an ordinary
// `cagent run` in a child process. Runs in cagent (trusted), single-threaded: one loop waits on a
// signalfd for SIGCHLD (a stage ended), SIGINT/SIGTERM/SIGHUP (cancel) and a one-second tick (the
// live summary, the clone timeout).
//
// Isolation between tasks: every task has its own directory DIR/<id>/ (results.h) and its own
// `cagent run --state-dir DIR/<id>/state`, so its run directory, workspace and audit log are its
// own; two tasks on one repository get two workspaces. Each child runs in its own process group
// with PR_SET_PDEATHSIG(SIGTERM), so a task that crashes or hangs affects no other and none
// outlives the batch; a child that dies without a result is recorded, never waited on forever.
//
// A task whose repository is a git URL is cloned first, by cagent (not the agent), into
// DIR/<id>/repo with the hardening of launcher/guard/git.h (no system or global config, no hooks,
// no templates, no submodules, no prompts; only the URL's own protocol allowed), a wall-clock
// limit and RLIMIT_FSIZE, then checked out with its attributes neutralised.
//
// Cancel: the first SIGINT/SIGTERM/SIGHUP is forwarded to every running child's process group
// (cagent run records the run cancelled and exits 130); a second one sends SIGKILL. Tasks not
// started are recorded "not-run".
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/batch/tasks.h"

namespace cagent::launcher::batch {

struct BatchRunOptions {
  std::string tasks_file;                 // as given (for messages)
  std::string results_dir;                // made absolute by RunBatch; created (0700) if missing
  std::size_t jobs = 0;                   // 0 = DefaultJobs()
  bool resume = false;                    // skip tasks CheckComplete accepts; rerun the others
  std::vector<std::size_t> indices;       // --index: only these tasks (0-based); empty = all
  std::string cagent = "/proc/self/exe";  // the cagent the children run
  bool redraw = false;                    // the live summary is one line redrawn in place
  bool quiet = false;                     // no live summary, only the final line
  std::chrono::seconds clone_timeout{1800};
};

// The counts of one batch run, over the selected tasks.
struct BatchRunOutcome {
  std::size_t selected = 0;
  std::size_t skipped = 0;    // --resume: already complete
  std::size_t succeeded = 0;  // completed and verified (skipped ones included)
  std::size_t unsuccessful = 0;
  bool cancelled = false;
  // 0 every selected task completed and verified; 1 some did not; 130 cancelled.
  int exit_status = 0;
};

// Half the CPUs this process may run on (sched_getaffinity, so a Slurm or cgroup cpuset counts),
// at least 1.
[[nodiscard]] std::size_t DefaultJobs();

// Runs the selected tasks. An error (Error::Code::kInvalidInput: exit 2) before anything started
// when an --index is out of range, DIR cannot be made, or (without --resume) a selected task's
// DIR/<id> already exists; everything after that is in the results.
Result<BatchRunOutcome> RunBatch(const std::vector<BatchTask>& tasks,
                                 const BatchRunOptions& options);

}  // namespace cagent::launcher::batch
