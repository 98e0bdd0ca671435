// `cagent batch run|report` (and the cluster children slurm|k8s, batch_cluster_command.h): many
// sandboxed runs from one task file (launcher/batch/). Runs in cagent (trusted).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "launcher/cli/batch_cluster_command.h"

namespace CLI {
class App;
}

namespace cagent::launcher::cli {

struct BatchOptions {
  std::string action;    // "run" or "report" once parsed; "" otherwise (then cluster.action)
  std::string tasks;     // run: TASKS.jsonl
  std::string results;   // run: --results DIR; report: DIR
  std::size_t jobs = 0;  // 0 = half the CPUs
  bool resume = false;
  std::vector<std::size_t> indices;  // run: --index I (repeatable)
  bool quiet = false;
  std::string task_root;          // run: --task-root DIR ("" = the task file's directory)
  bool trust_task_paths = false;  // run: --trust-task-paths
  bool json = false;              // report --json
  bool csv = false;               // report --csv
  BatchClusterOptions cluster;    // slurm, k8s (batch_cluster_command.h)
};

// Adds `batch` with run, report, slurm and k8s; returns it.
CLI::App* AddBatchCommand(CLI::App& app, BatchOptions& options);

// Runs the parsed child. run: 0 every task completed and verified, 1 some did not, 2 usage or
// an invalid task file (nothing run), 130 cancelled. report: 0 every task completed and
// verified, 1 some did not, 2 DIR holds no results.
int RunBatchCommand(const BatchOptions& options);

}  // namespace cagent::launcher::cli
