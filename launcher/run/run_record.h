// A run's record read back (result.json under the state directory) and shown: `cagent runs`
// lists it, `cagent show` prints it, `rm` and `log` select by it.
//
// The record is cagent's own, written outside the sandbox, but it quotes the agent (the reason,
// changed paths, verification details) and the file may be damaged or planted by anything that
// can write the state directory. So it is read like hostile input: a regular file of bounded size
// and nesting, every field type-checked before use, every string escaped before it reaches the
// terminal. Pure except ReadRunResult; nothing here throws (tests/fuzz/run_record_fuzz.cc).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/exit_codes.h"
#include "common/result.h"

namespace cagent::launcher::run {

// The largest result.json read back (the file lists changed paths and findings; the biggest real
// ones are a few hundred KiB) and the deepest nesting (its own is 3).
inline constexpr std::size_t kMaxRunResultBytes = 16U << 20U;
inline constexpr std::size_t kMaxRunResultDepth = 32;

// Reads <run_dir>/result.json: a regular file, not a link, at most kMaxRunResultBytes, then
// ParseRunResult. A missing file says the run may still be going.
Result<nlohmann::json> ReadRunResult(const std::string& run_dir);

// `text` as a run record: a JSON object nested at most kMaxRunResultDepth deep (refused before
// the recursive parser sees it). `origin` names it in errors. Pure; never throws.
Result<nlohmann::json> ParseRunResult(std::string_view text, const std::string& origin);

// `j[key]` when `j` is an object and that member is a string; "" otherwise.
std::string RecordString(const nlohmann::json& j, const char* key);

// A reason for a one-line listing: its first line, escaped, at most 80 bytes (not cutting a UTF-8
// character), with "…" when anything was left out.
std::string OneLineReason(std::string_view reason);

// `cagent runs`' row for run `id` (kind "run"): status, profile, repo, base commit, creation time,
// number of changed files and reason from `record` (a ParseRunResult object), or status "unknown"
// when there is no record (nullptr).
nlohmann::json RunRow(const std::string& id, const nlohmann::json* record);

// One line of `cagent runs` (with its newline) for a row of RunRow (or an agent session's row):
// every field escaped; `home` (the caller's home directory, or "") is written "~" in paths.
std::string RunListLine(const nlohmann::json& row, const std::string& home);

// `cagent show`'s text for a record: status and reason, profile, base, repository, patch, changed
// files, what the outputs left out, verification, findings. Every line escaped.
std::string RunShowText(const nlohmann::json& record);

// The exit code `cagent show` gives for a record: its status's (run_state.h), a failed or
// timed-out verification included; kRunFailed for a status that is no run state.
ExitCode RunShowExitCode(const nlohmann::json& record);

}  // namespace cagent::launcher::run
