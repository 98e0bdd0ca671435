// `cagent batch report DIR`: what a batch's tasks came to, read from DIR/<id>/result.json (the
// truth; summary.jsonl is a log of ends, and array tasks on other nodes may not all have
// appended). Runs in cagent (trusted); every string in a result is hostile (the agent's reason,
// the model's name) and is escaped where it meets a terminal or a spreadsheet.
//
// The JSON form is stable: rows sorted by task index (then id), object keys sorted, so the report
// of the same task file run locally and on a cluster differ only in the fields that vary by
// nature: results_dir, wall_time_ms (totals and rows), and each row's run_id, run_dir, host and
// finished_at.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"

namespace cagent::launcher::batch {

// The report of DIR:
//   {"results_dir", "tasks", "counts": {status: n}, "verified", "verified_rate" (0..1, 4 places),
//    "turns", "tokens": {"input", "output", "total"}, "wall_time_ms" (sum over tasks),
//    "cost": {CURRENCY: {"micros", "text"}} (what the tasks with prices spent, per currency),
//    "rows": [{"index", "id", "line", "status", "verified", "turns", "tokens", "input_tokens",
//              "output_tokens", "cache_read_tokens", "cost" ("0.0123 USD", or null without
//              prices), "cost_micros", "currency", "tool_calls", "wall_time_ms", "exit_status",
//              "reason", "rerun_reason", "run_id", "run_dir", "host", "finished_at"}]}
// A task directory without a readable result.json is a row of status "unknown" (still running,
// or its batch was killed). kInvalidInput when DIR is not a directory or holds no task.
Result<nlohmann::json> BuildReport(const std::string& results_dir);

// The report for a terminal: counts, verified rate, totals, then one row per task (id, status,
// verified, turns, tokens, wall time, the reason on one line), every string TerminalSafe.
std::string ReportText(const nlohmann::json& report);

// RFC 4180 CSV, one header line then one line per task. A field that starts with = + - @ or a
// tab/CR is prefixed with ' (a spreadsheet would run it as a formula); reasons are one line,
// escaped as in ReportText.
std::string ReportCsv(const nlohmann::json& report);

// Whether every task of the report completed and verified (the report's exit status: 0, else 1).
bool AllSucceeded(const nlohmann::json& report);

}  // namespace cagent::launcher::batch
