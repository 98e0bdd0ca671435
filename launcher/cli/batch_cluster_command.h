// `cagent batch slurm` and `cagent batch k8s`: a batch's tasks on a cluster. `slurm` writes and
// submits one sbatch job array (array task i runs task i with `cagent batch run --index i`);
// `k8s` writes an Indexed Job manifest for kubectl. Both validate the task file first (LoadTasks)
// and end with results that `cagent batch report DIR` reads as it reads a local batch's.
// The `batch` subcommand (batch_command.cc) adds these children and dispatches to them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace cagent::launcher::cli {

struct BatchClusterOptions {
  std::string action;  // "slurm" or "k8s" once parsed; "" when neither was
  std::string tasks;   // TASKS.jsonl
  bool dry_run = false;
  std::string cagent;             // slurm: default the running binary; k8s: default "cagent"
  std::string task_root;          // --task-root DIR ("" = the task file's directory)
  bool trust_task_paths = false;  // --trust-task-paths
  // slurm
  std::string results;
  std::string partition;
  std::string job_name = "cagent-batch";
  std::size_t array_limit = 0;
  std::string time_limit;  // --time
  std::string account;
  std::string qos;
  // k8s
  std::string image;
  std::string results_pvc;
  std::string name = "cagent-batch";
  std::string name_space;
  std::vector<std::string> volumes;  // CLAIM:PATH
  std::vector<std::string> secrets;
  std::size_t parallelism = 0;
  std::int64_t run_as_user = 1000;
  std::string output;  // -o FILE; "" or "-" = stdout
};

// Adds --task-root DIR and --trust-task-paths (launcher/batch/tasks.h: where a task file's paths
// may lead) to `cmd`, one help text for batch run, slurm and k8s.
void AddTaskPathOptions(CLI::App* cmd, std::string& task_root, bool& trust_task_paths);

// Adds `slurm` and `k8s` under `batch`; parsing one sets options.action.
void AddBatchClusterCommands(CLI::App* batch, BatchClusterOptions& options);

// Runs the parsed one. 0 on success; 2 for a bad command line or task file (every bad line
// listed); 1 when sbatch or writing the manifest fails.
int RunBatchClusterCommand(const BatchClusterOptions& options);

}  // namespace cagent::launcher::cli
