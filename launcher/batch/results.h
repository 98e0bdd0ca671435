// A batch's results directory, DIR (`cagent batch run --results DIR`, `cagent batch report DIR`).
// Runs in cagent (trusted); every file read back from DIR is treated as damaged or hostile until
// checked (the runs wrote them, and their strings quote the agent and the repository).
//
//   DIR/summary.jsonl            one line appended per task that ended (O_APPEND under flock:
//                                array tasks on several nodes append to one file)
//   DIR/<id>/result.json         the task's run's result.json plus a "batch" object (below); the
//                                truth `batch report` and `--resume` read
//   DIR/<id>/task.md             the task's text, when the task file gave it inline
//   DIR/<id>/repo/               the clone, when the task's repository is a git URL
//   DIR/<id>/state/runs/<run>/   the run directory of `cagent run --state-dir DIR/<id>/state`
//   DIR/<id>/run.json, run.log   that cagent run's stdout (--json) and stderr
//   DIR/.previous/<id>-<time>/   a task's earlier attempt, moved aside when it is run again
//
// result.json's "batch" object: task_id, index, line, exit_status (cagent run's, null when it
// died of a signal or never started), signal, wall_time_ms, run_dir, host, started_at,
// finished_at, rerun_reason (why an earlier result was not kept, null on a first run).
//
// Statuses: a run's final state (completed, failed, cancelled, needs-approval), or batch's own:
// "crashed" (cagent run died of a signal before it recorded a result), "not-run" (the batch was
// cancelled before the task started). A cagent run that exited without a result (its task or
// profile was refused, the clone failed) is "failed" with the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/result.h"
#include "launcher/batch/tasks.h"
#include "launcher/run/run_record.h"

namespace cagent::launcher::batch {

inline constexpr const char* kSummaryFile = "summary.jsonl";
inline constexpr const char* kPreviousDir = ".previous";

// What batch knows about a task's end besides the run's own record.
struct BatchFields {
  std::optional<int> exit_status;  // cagent run's exit status
  std::optional<int> signal;       // the signal that killed it
  std::uint64_t wall_time_ms = 0;
  std::string run_dir;  // "" when no run directory was made
  std::string host;
  std::string started_at;
  std::string finished_at;
  std::string rerun_reason;
};

// The "batch" object of a task's result.json.
struct BatchRecord {
  std::string task_id;
  std::uint64_t index = 0;
  std::uint64_t line = 0;
  BatchFields fields;
};

// A task's result.json (DIR/<id>/result.json): the run's record (run_record.h) with a "batch"
// object added or, when cagent run recorded none, batch's own status and reason. The run's part
// is the RunRecord, not its own copy of the fields: batch reads and writes it with the run's
// ToJson/FromJson, and RunRecord::FromJson ignores the "batch" member.
struct TaskResult {
  std::optional<run::RunRecord> run;  // nullopt: no run recorded a result
  // Without a run: "crashed", "not-run", "failed" or "cancelled", and why.
  std::string status;
  std::string reason;
  BatchRecord batch;

  [[nodiscard]] std::string Status() const { return run ? run->status() : status; }
  [[nodiscard]] std::string Reason() const { return run ? run->reason : reason; }
  // Completed and verified (as the run recorded it).
  [[nodiscard]] bool Verified() const { return run && run->verified(); }

  // The file's object: the run's ToJson() or {"status", "reason", "verified": false}, with
  // "batch" added. Never throws.
  [[nodiscard]] nlohmann::json ToJson() const;
  // `j` read back like the run's record (every field type-checked, defaults for the rest); a run
  // is there when `j` has a non-empty string "run_id". An error unless `j` is an object with a
  // "batch" object. Never throws.
  [[nodiscard]] static Result<TaskResult> FromJson(const nlohmann::json& j);
};

// DIR/<id>.
[[nodiscard]] std::string TaskDir(const std::string& results_dir, const BatchTask& task);

// The task's result: `run` (the run's record read back, or nullopt when there is none) with the
// batch's fields; without a run, `status` and `reason` are the task's.
[[nodiscard]] TaskResult MakeResult(const BatchTask& task, const std::optional<run::RunRecord>& run,
                                    const std::string& status, const std::string& reason,
                                    const BatchFields& fields);

// The summary.jsonl line of a result (one line, no newline): id, index, line, status, verified,
// exit_status, signal, turns, tokens, wall_time_ms, reason, run_id, host, finished_at.
[[nodiscard]] nlohmann::json SummaryLine(const TaskResult& result);

// Writes DIR/<id>/result.json (a temporary file renamed over it) and appends the summary line to
// DIR/summary.jsonl: one write(2) of the whole line on an O_APPEND descriptor held under
// flock(LOCK_EX), so lines from concurrent writers (other nodes' array tasks) never interleave.
Status RecordResult(const std::string& results_dir, const BatchTask& task,
                    const TaskResult& result);

// Reads a result.json (at most 16 MiB, nested at most 64 deep), then TaskResult::FromJson.
Result<TaskResult> ReadResult(const std::string& path);

// For --resume: nothing when DIR/<id>/result.json records a finished run (completed, failed or
// needs-approval) of this task whose evidence still holds — the run's own result.json agrees with
// the copy, patch.diff's SHA-256 is the recorded patch digest, and the event log's hash chain
// verifies with the recorded entry count and head (what `cagent log verify` checks); otherwise
// why not, one line (the task is then run again and its new result says why).
[[nodiscard]] Refusal CheckComplete(const std::string& results_dir, const BatchTask& task);

// Whether a result counts as a success: completed and verified.
[[nodiscard]] bool Succeeded(const TaskResult& result);

// A string member, "" when absent or not a string; a number member, 0 likewise.
[[nodiscard]] std::string Str(const nlohmann::json& obj, const char* key);
[[nodiscard]] std::uint64_t Num(const nlohmann::json& obj, const char* key);

// UTC now as "2026-12-03T13:45:00Z".
[[nodiscard]] std::string UtcNow();

}  // namespace cagent::launcher::batch
