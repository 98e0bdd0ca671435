// A batch's task file: JSON Lines, one task per line (`cagent batch run|slurm|k8s TASKS.jsonl`).
// Trusted code reading an input the operator wrote, but usually generated from a benchmark's data:
// every field is checked up front, and nothing in a task can widen the profile it names (there is
// no field for hosts, pre-approvals, approval mode, extra paths or a dirty tree; budgets may only
// lower the profile's, which `cagent run` itself enforces).
//
//   {"id": "fix-add-1", "repo": "repos/calc", "commit": "main", "task_file": "task.md",
//    "profile": "fix-add", "model": "replay:sessions/fix-add.jsonl",
//    "budgets": {"max_turns": 20, "max_tool_calls": 40, "max_tokens": 200000, "wall_time": "20m"}}
//
// Blank lines are skipped; every other line is one task. A task's index is its position among the
// tasks (0-based): the Slurm array task id and the Kubernetes completion index run task `index`.
//
// Whose files a task names. A task file is often someone else's (a benchmark's, a colleague's, a
// download), and the files it names are read by cagent with the caller's rights: the task text
// goes to the model provider, a replay session and a profile file into the run's record. So the
// local paths in a task (a repository path or file:// URL, task_file, a replay: session, a
// profile given as a file) must lie beneath the task root: the task file's own directory, or the
// directory the operator names (`--task-root DIR`). Each is opened beneath the root with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), the kernel's check rather than a string
// prefix: "..", an absolute path elsewhere and a symlink that leads out are refused alike (a
// relative symlink that stays beneath the root is followed; an absolute one is refused). The path
// kept is the file's own, link-free
// (/proc/self/fd), so what runs later names what was checked. `--trust-task-paths` turns the rule
// off for a task file the operator wrote or vetted: then paths resolve anywhere, as a shell would.
// Profile NAMES are not paths: they resolve through cagent run's search path as always.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace cagent::launcher::batch {

struct TaskBudgets {
  std::optional<std::uint64_t> max_turns;
  std::optional<std::uint64_t> max_tool_calls;
  std::optional<std::uint64_t> max_tokens;
  std::optional<std::string> wall_time;  // as `--wall-time` takes it ("20m")
};

struct BatchTask {
  std::size_t line = 0;   // 1-based line of the file
  std::size_t index = 0;  // 0-based among the tasks
  std::string id;         // [A-Za-z0-9][A-Za-z0-9._-]{0,63}, unique in the file: DIR/<id>/
  std::string repo;       // an absolute path (relative ones resolved against the file's
                          // directory), or a git URL when repo_is_url
  bool repo_is_url = false;
  std::string commit;     // "" = the repository's HEAD
  std::string task_text;  // exactly one of task_text and task_file is set
  std::string task_file;  // absolute (resolved like repo)
  std::string profile;    // a name or a .cagent file (a relative file resolved like repo)
  std::string model;      // as `cagent run --model` takes it; "replay:FILE" resolved like repo
  TaskBudgets budgets;
  // The local paths above were confined beneath the task root (TaskPaths::trust was false): the
  // runner then reads task_file again without following any symlink (batch/runner.h).
  bool paths_confined = false;
};

// Where a task file's local paths may lead (see the top of this file).
struct TaskPaths {
  std::string root;    // the task root; "" = the task file's directory
  bool trust = false;  // --trust-task-paths: resolve paths anywhere, following symlinks
};

// Reads and checks the whole file. On any problem: one kInvalidInput error whose detail lists
// every bad line as "PATH:LINE: what is wrong" (unknown or missing fields, wrong types, a bad or
// duplicate id, both or neither of task/task_file, a repository path that does not exist, a path
// that leads outside the task root, naming the task and the path). kInvalidInput too when
// `paths.root` is not a directory.
Result<std::vector<BatchTask>> LoadTasks(const std::string& path, const TaskPaths& paths = {});

}  // namespace cagent::launcher::batch
