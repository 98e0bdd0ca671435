#include "launcher/cli/batch_command.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iostream>

#include "common/exit_codes.h"
#include "common/json_text.h"
#include "common/terminal_text.h"
#include "launcher/batch/report.h"
#include "launcher/batch/runner.h"
#include "launcher/batch/tasks.h"
#include "launcher/cli/run_command.h"

namespace cagent::launcher::cli {
namespace {

// ./cagent-batch-20261203T134500Z: a fresh directory per batch unless --results names one.
std::string DefaultResultsDir() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "cagent-batch-%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

int DoRun(const BatchOptions& o) {
  if (o.resume && o.results.empty()) {
    spdlog::error("--resume needs --results DIR: the results of the batch to continue");
    return ToInt(ExitCode::kUsage);
  }
  auto tasks = batch::LoadTasks(o.tasks, {o.task_root, o.trust_task_paths});
  if (!tasks) {
    // Quotes the task file (escaped by LoadTasks where it echoes values).
    spdlog::error("{}", TerminalSafe(tasks.error().Message(), TerminalLines::kMultiple));
    return ToInt(ExitCodeFor(tasks.error(), ExitCode::kUsage));
  }
  batch::BatchRunOptions ro;
  ro.tasks_file = o.tasks;
  ro.results_dir = o.results.empty() ? DefaultResultsDir() : o.results;
  ro.jobs = o.jobs;
  ro.resume = o.resume;
  ro.indices = o.indices;
  ro.quiet = o.quiet;
  ro.redraw =
      ProgressRedraws(::isatty(STDERR_FILENO) == 1, std::getenv("TERM"), std::getenv("NO_COLOR"));
  auto out = batch::RunBatch(*tasks, ro);
  if (!out) {
    spdlog::error("{}", TerminalSafe(out.error().Message(), TerminalLines::kMultiple));
    return ToInt(ExitCodeFor(out.error(), ExitCode::kFailed));
  }
  return out->exit_status;
}

int DoReport(const BatchOptions& o) {
  if (o.json && o.csv) {
    spdlog::error("batch report: --json and --csv are alternatives; give one");
    return ToInt(ExitCode::kUsage);
  }
  auto report = batch::BuildReport(o.results);
  if (!report) {
    spdlog::error("{}", TerminalSafe(report.error().Message()));
    return ToInt(ExitCodeFor(report.error(), ExitCode::kFailed));
  }
  if (o.json) {
    std::cout << JsonText(*report, 2) << "\n";
  } else if (o.csv) {
    std::cout << batch::ReportCsv(*report);
  } else {
    std::cout << batch::ReportText(*report);
  }
  std::cout << std::flush;
  return ToInt(batch::AllSucceeded(*report) ? ExitCode::kOk : ExitCode::kFailed);
}

}  // namespace

CLI::App* AddBatchCommand(CLI::App& app, BatchOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "batch",
      "Run many tasks from a task file (JSON Lines: id, repo, commit, task or task_file, profile, "
      "model, budgets), each an ordinary sandboxed 'cagent run' with its own run directory, "
      "workspace and audit log, on this machine (run) or a cluster (slurm, k8s); then compare "
      "the results (report). See docs/batch.md.");
  cmd->require_subcommand(1);

  CLI::App* run = cmd->add_subcommand(
      "run",
      "Run the tasks of TASKS concurrently, each as a child 'cagent run' (--approve stop: an ask "
      "ends the task needs-approval) in its own process group, with a live summary on stderr. "
      "Results: DIR/<task-id>/result.json (the run's result.json plus a \"batch\" object) and "
      "DIR/summary.jsonl. SIGINT/SIGTERM cancel every running task (a second one kills them); "
      "tasks not started are recorded not-run.");
  run->add_option("tasks", o.tasks,
                  "The task file (JSON Lines, checked whole before anything runs).")
      ->required();
  run->add_option("--results", o.results,
                  "The results directory DIR (created if missing). Default: a new "
                  "./cagent-batch-<UTC time>. Without --resume, no selected task may have a "
                  "directory in it already.");
  run->add_option("-j,--jobs", o.jobs,
                  "Tasks at once (default: half the CPUs this process may use).")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
  run->add_flag("--resume", o.resume,
                "Keep the tasks whose result in DIR is final (completed, failed, needs-approval) "
                "and whose evidence checks (the run's result.json, patch.diff's SHA-256, the event "
                "log's chain, entry count and head); run the others again, saying why. The "
                "earlier attempt is moved to DIR/.previous/.");
  run->add_option("--index", o.indices,
                  "Run only task I (0-based, among the file's tasks; repeatable): what a Slurm "
                  "array task or a Kubernetes pod runs.")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  run->add_flag("-q,--quiet", o.quiet, "No live summary; only the final line.");
  AddTaskPathOptions(run, o.task_root, o.trust_task_paths);
  run->footer(
      "Exit status: 0 every selected task completed and verified; 1 some did not (failed, "
      "verification failed, needs approval, crashed); 2 usage or an invalid task file (nothing "
      "ran); 130 cancelled.");
  run->callback([&o] { o.action = "run"; });

  CLI::App* report = cmd->add_subcommand(
      "report",
      "Summarise a batch's results from DIR/*/result.json: counts by status, verified rate, "
      "tokens and wall time totals, one row per task (id, status, verified, turns, tokens, wall "
      "time, reason). The same for a local and a cluster run of one task file.");
  report->add_option("dir", o.results, "The batch's results directory.")->required();
  report->add_flag("--json", o.json,
                   "One JSON object, rows sorted by task index; only results_dir, wall_time_ms, "
                   "run_id, run_dir, host and finished_at differ between two runs of one file.");
  report->add_flag("--csv", o.csv, "CSV (RFC 4180), one row per task.");
  report->footer(
      "Exit status: 0 every task completed and verified; 1 some did not; 2 DIR holds "
      "no batch results.");
  report->callback([&o] { o.action = "report"; });

  AddBatchClusterCommands(cmd, o.cluster);
  return cmd;
}

int RunBatchCommand(const BatchOptions& o) {
  if (o.action == "run") return DoRun(o);
  if (o.action == "report") return DoReport(o);
  if (!o.cluster.action.empty()) return RunBatchClusterCommand(o.cluster);
  return ToInt(ExitCode::kUsage);
}

}  // namespace cagent::launcher::cli
