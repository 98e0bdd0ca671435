// `cagent batch slurm`: the batch script of one Slurm job array whose array task i runs task i of
// the file (`cagent batch run TASKS --results DIR --index i --jobs 1 --resume`) on whatever node
// Slurm picks. A pure generator: tasks + options -> script text; submitting it is the CLI's
// business (launcher/cli/batch_cluster_command.cc).
//
// The script is run by /bin/sh on a cluster node as the submitting user, so everything taken from
// the command line is either checked against a strict alphabet (partition, job name) or quoted:
// single-quoted in the shell body, double-quoted in the #SBATCH lines (which sbatch itself
// parses, not a shell). A value that cannot be written safely is refused, never mangled.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/batch/tasks.h"

namespace cagent::launcher::batch {

struct SlurmOptions {
  std::string cagent;       // absolute path of cagent on the nodes
  std::string tasks_file;   // absolute path of the task file, on a filesystem the nodes share
  std::string results_dir;  // absolute path of DIR, shared likewise
  std::string partition;    // "" = the cluster's default partition
  std::string job_name = "cagent-batch";
  std::size_t array_limit = 0;  // at most this many array tasks at once; 0 = no limit
  // Each array task's time limit (#SBATCH --time) in one of Slurm's forms: MM, MM:SS, HH:MM:SS,
  // D-HH, D-HH:MM, D-HH:MM:SS; "" = the partition's default. At the limit Slurm sends SIGTERM,
  // which cancels the task's run (recorded `cancelled`).
  std::string time_limit;
  std::string account;  // #SBATCH --account; "" = the user's default
  std::string qos;      // #SBATCH --qos; "" = the default
  // Passed on to every array task's `cagent batch run` (tasks.h: where the file's paths may
  // lead), so a node checks the task file as the submitting command did.
  std::string task_root;  // absolute --task-root; "" = the task file's directory
  bool trust_task_paths = false;
};

// The name of array task i's output file (stdout and stderr of `cagent batch run`), relative to
// DIR, as Slurm's filename pattern: "%A" is the array's job id, "%a" the array index. A leading
// '_' cannot start a task id, so the file never collides with DIR/<task-id>/.
inline constexpr const char* kSlurmOutputPattern = "_slurm-%A_%a.out";

// Checks the options and returns the script. kInvalidInput when there are no tasks, a path is not
// absolute or holds a character the script cannot carry (a newline or other control character
// anywhere; '"' or '\' in DIR, which goes into an #SBATCH line), the partition, job name,
// account or QOS is not [A-Za-z0-9._-]{1,64} (all but the job name may be empty), or the time
// limit is not one of the forms above.
Result<std::string> SlurmScript(const std::vector<BatchTask>& tasks, const SlurmOptions& options);

// Whether `text` is a time limit sbatch --time reads the way written here: 1 to 3 ':'-separated
// groups of 1 to 6 digits (MM, MM:SS, HH:MM:SS), optionally after "D-" (then HH, HH:MM or
// HH:MM:SS). Nothing else: no spaces, signs or words.
[[nodiscard]] bool IsSlurmTimeLimit(const std::string& text);

}  // namespace cagent::launcher::batch
