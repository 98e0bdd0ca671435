// A run's record (result.json in the run directory): the RunRecord the run fills and writes with
// ToJson, and every reader reads back with FromJson — `cagent runs` lists it, `cagent show` prints
// it, `apply`, `rm`, `log check` and `batch` take their fields from it. One declaration of the
// file's fields, here (docs/architecture.md, "A run").
//
// The record is cagent's own, written outside the sandbox, but it quotes the agent (the reason,
// changed paths, verification details) and the file may be damaged or planted by anything that
// can write the state directory. So it is read like hostile input: a regular file of bounded size
// and nesting, every field type-checked before use (FromJson), every string escaped before it
// reaches the terminal. Pure except the two ReadRunResult*; nothing here throws
// (tests/fuzz/run_record_fuzz.cc).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/exit_codes.h"
#include "common/result.h"
#include "launcher/broker/budgets.h"
#include "launcher/egress/proxy.h"
#include "launcher/guard/git_config_guard.h"
#include "launcher/run/run_state.h"
#include "policy/language/ir.h"

namespace cagent::launcher::run {

// ---- The record's parts (the capture's, verification's and the broker's results) ----

struct ChangedFile {
  std::string path;
  // A added, M modified, D deleted, T type changed; read back, '?' when the record's "status" is
  // not one character.
  char status = 'M';
  std::string old_mode, new_mode;
  bool binary = false;
  bool submodule = false;  // a gitlink (mode 160000) appeared, changed or went away
};

// What the capture left out of the change set because the profile's `outputs` cover it
// (issue 32): files git does not track and does not ignore, at or below an outputs glob.
struct LeftOut {
  struct Root {
    std::string path;  // the covered path nearest the top ("build", "src/a/__pycache__")
    std::size_t files = 0;
  };
  std::size_t files = 0;    // every file left out
  std::vector<Root> roots;  // sorted by path
  // Left-out files that look like source code (*.c, *.py, *.go, *.rs, *.js, *.ts, *.java, ...):
  // a new source file below a build directory is more likely the agent's work than a build's, so
  // each is named (the first kMaxNamed) with a warning. Sorted.
  std::vector<std::string> sources;
  std::size_t sources_total = 0;
  static constexpr std::size_t kMaxNamed = 100;
  [[nodiscard]] bool empty() const { return files == 0; }
};

struct CapturedPatch {
  std::string patch;   // binary-safe (git diff --binary --full-index), a/ b/ prefixes
  std::string sha256;  // of `patch`
  std::string tree;    // the tree git recorded (base + patch), as `git write-tree` names it
  std::vector<ChangedFile> files;
  std::string check_output;  // git diff --check (whitespace errors, conflict markers)
  bool check_clean = true;
  LeftOut left_out;  // what `outputs` kept out of the change set (issue 32)
};

struct PatchViolation {
  std::string rule;     // "deny write .github/**" at "backend.cagent:12:3", "changed-files 50"
  std::string path;     // "" for whole-patch limits
  std::string message;  // one line for the human
};

struct VerifyEntry {
  enum class Status { kPassed, kFailed, kTimedOut, kInfrastructure, kNotRun };
  std::string command;
  Status status = Status::kNotRun;
  int exit_code = -1;
  std::chrono::milliseconds duration{0};
  std::string log_path;  // the command's stdout+stderr
  std::string tree;      // the git tree id it ran on (VerifyTree::tree); "" = not run on one
  std::string detail;    // why, in words ("exit status 1", "timed out after 300 s", ...)
  // What the sandbox applied only in part (SandboxOutcome::downgrades): a run records the union
  // of its sandboxes' once (RunRecord::downgrades), not per entry. Not in result.json.
  std::vector<std::string> downgrades;
  // When it did not pass: what its sandbox's network refused and cagent's hint lines
  // (launcher/session/network_hint.h; also appended to `detail`, which the run's summary prints).
  // Not in result.json.
  std::vector<std::string> network_refused;
  std::vector<std::string> network_hints;
};
std::string_view VerifyStatusName(VerifyEntry::Status status);  // "passed", "failed", ...
// The status VerifyStatusName names; nullopt for any other text.
std::optional<VerifyEntry::Status> ParseVerifyStatus(std::string_view name);

// needs-approval: the action that stopped the run, as recorded (the part of the broker's
// ApprovalRequest that result.json keeps); the pre-approval that allows exactly it is
// "sha256:" + digest.
struct PendingApproval {
  std::string tool;    // "run_command"
  std::string action;  // exactly what would run / be touched
  std::vector<std::string> resolved_paths;
  std::string digest;    // CallDigest of {tool, args, resolved paths}
  std::string rule;      // the rule that asked
  std::string location;  // "backend.cagent:31:5"
};

// issue 36: one credential of the agent's sandbox as result.json summarises it (a name, never a
// value or a placeholder).
struct CredentialSummary {
  std::string name;
  std::string source;              // "env" or "file"
  std::vector<std::string> hosts;  // the bound hosts, as the profile wrote them
  std::uint64_t requests = 0;      // requests its real value went into
  std::uint64_t refused = 0;       // requests to its hosts that were refused (not misdirected)
  std::uint64_t misdirected = 0;   // requests carrying its placeholder elsewhere (all refused)
};

// The summaries of `policy`'s credentials named in `loaded` (those that had a value), in the
// profile's order, counted over the requests read on intercepted connections. Pure.
std::vector<CredentialSummary> SummarizeCredentials(
    const policy::Policy& policy, const std::vector<std::string>& loaded,
    const std::vector<egress::ExchangeRecord>& exchanges);

// ---- The record ----

struct RunRecord {
  std::string run_id;
  std::uint64_t sequence = 0;  // the run's number (state_dir.h): the order of `cagent runs`
  RunState state = RunState::kCreated;
  std::string reason;  // why it failed / was cancelled
  std::string run_dir;
  std::string profile;
  std::string profile_file;    // the file compiled (absolute, or "<built-in>/NAME.cagent")
  std::string profile_sha256;  // of that file's text
  // The profile's `outputs` globs as written: `cagent apply` lets untracked files there be.
  std::vector<std::string> outputs;
  bool profile_from_repository = false;
  std::string policy_digest;
  std::string repo;
  std::string base_commit;
  bool carried_dirty = false;
  std::vector<std::string> carried_paths;
  std::string task_file;
  std::string model;
  std::string agent_summary;
  CapturedPatch patch;  // patch text itself lives in patch.diff
  std::vector<PatchViolation> violations;
  std::vector<VerifyEntry> verification;
  // The profile's setup commands: before the agent on the workspace, and again on the
  // verification tree before the verify commands (its own entries, tree set).
  std::vector<VerifyEntry> setup;
  std::vector<VerifyEntry> verify_setup;
  broker::BudgetUsage used;
  broker::Budgets budgets;              // tool_calls_by_kind is not recorded
  std::vector<std::string> layers;      // sandbox layers active
  std::vector<std::string> downgrades;  // restrictions applied only in part
  // The host-side guards of the agent's sandbox (SandboxOutcome): the git guard in words, and what
  // cagent found and undid after it exited (planted repositories, cleared setuid/setgid bits).
  std::string git_guard;
  std::vector<std::string> host_findings;
  std::vector<std::string> planted_repositories;
  std::vector<std::string> cleared_files;
  // Git configuration files the agent's sandbox changed that cagent rewrote before capture, with
  // the keys it dropped (launcher/guard/git_config_guard.h).
  std::vector<GitConfigRewrite> git_config_rewrites;
  std::uint64_t denials = 0;
  std::uint64_t approvals_asked = 0;
  // The agent's filtered egress (a profile with a hosts section), null without: relayed and
  // refused connections, bytes each way, the hosts reached, why the proxy stopped early. Every
  // connection is an `egress` event in the event log. Kept as JSON (read back: an object or null).
  nlohmann::json egress;
  // The agent's sandbox's credentials (issue 36) and the optional ones skipped for want of a
  // value ("npm: no value (...); optional, so skipped"). result.json's "credentials":
  // {"loaded": [...], "skipped": [...]}, read back as empty when absent.
  std::vector<CredentialSummary> credentials;
  std::vector<std::string> credentials_skipped;
  // needs-approval: the action that stopped the run, and the pre-approval that allows exactly it.
  std::optional<PendingApproval> needs_approval;
  std::string created_at;
  std::string finished_at;
  // The log's entry count when the result was written; nullopt only read back from a record
  // without it (ToJson writes 0).
  std::optional<std::uint64_t> event_log_entries;
  // Digest of the log's last line when the result was written: the chain alone cannot show lines
  // cut from the end or an edited last line; this and the entry count can.
  std::string event_log_head;
  std::uint64_t event_log_lost = 0;

  // Read back only (FromJson); unset in a record the run makes.
  //   unknown_status: "status" when it names no RunState ("" when it is missing or no string: a
  //     damaged record, or a newer cagent's state); `state` is then kFailed.
  //   patch_bytes: patch.bytes as recorded (the text stays in patch.diff); nullopt when it is
  //     missing or no count. ToJson writes it in place of the size of `patch.patch` when set.
  //   recorded_verified: "verified" as recorded (a boolean), which verified() then answers.
  std::optional<std::string> unknown_status;
  std::optional<std::uint64_t> patch_bytes;
  std::optional<bool> recorded_verified;

  // "completed", "failed", ...: the state's name, or the unknown status read back.
  [[nodiscard]] std::string status() const;
  [[nodiscard]] bool verification_failed() const;
  // What ToJson records as "verified": completed, with verify commands that ran (read back: as
  // recorded, when it was).
  [[nodiscard]] bool verified() const;
  // The patch's size in bytes: patch_bytes when read back, else the text's.
  [[nodiscard]] std::uint64_t patch_size() const;
  // The tree verification ran on (a fresh checkout of base + patch), "" when nothing ran.
  [[nodiscard]] std::string verified_tree() const;
  // The run's event log: run_dir + "/events.jsonl".
  [[nodiscard]] std::string event_log() const;

  // result.json's object. Besides the members: exit_code (ExitCodeFor), verified, patch.bytes and
  // patch.file, verified_tree and verify_tree, the paths of event_log, agent_log and workspace,
  // needs_approval.pre_approve. Never throws (JsonText writes it, replacing invalid UTF-8).
  [[nodiscard]] nlohmann::json ToJson() const;

  // `j` read back: every member type-checked; a member that is missing, of another type, a
  // negative or fractional count, or out of range is left at its default (records of older cagent
  // versions lack fields; a damaged one may have anything); an element of a list of entries that
  // is no object is an entry of defaults, one of a list of strings that is no string is left out;
  // members the record does not know (a batch's "batch", say) are ignored. An error only for a
  // `j` that is no object. Never throws. For a record the run wrote,
  // FromJson(r.ToJson()).ToJson() == r.ToJson().
  [[nodiscard]] static Result<RunRecord> FromJson(const nlohmann::json& j);
};

// ---- Reading it back ----

// The largest result.json read back (the file lists changed paths and findings; the biggest real
// ones are a few hundred KiB) and the deepest nesting (its own is 3).
inline constexpr std::size_t kMaxRunResultBytes = 16U << 20U;
inline constexpr std::size_t kMaxRunResultDepth = 32;

// Reads <run_dir>/result.json: a regular file, not a link, at most kMaxRunResultBytes, then
// ParseRunResult. A missing file says the run may still be going. The file as it is, for what
// prints or compares the raw record (`cagent show --json`, batch's evidence check).
Result<nlohmann::json> ReadRunResultJson(const std::string& run_dir);

// ReadRunResultJson, then RunRecord::FromJson: the record every reader uses.
Result<RunRecord> ReadRunResult(const std::string& run_dir);

// `text` as a run record: a JSON object nested at most kMaxRunResultDepth deep (refused before
// the recursive parser sees it). `origin` names it in errors. Pure; never throws.
Result<nlohmann::json> ParseRunResult(std::string_view text, const std::string& origin);

// `j[key]` when `j` is an object and that member is a string; "" otherwise.
std::string RecordString(const nlohmann::json& j, const char* key);

// A reason for a one-line listing: its first line, escaped, at most 80 bytes (not cutting a UTF-8
// character), with "…" when anything was left out.
std::string OneLineReason(std::string_view reason);

// `cagent runs`' row for run `id` (kind "run"): status, profile, repo, base commit, creation time,
// number of changed files and reason from `record`, or status "unknown" when there is no record
// (nullptr).
nlohmann::json RunRow(const std::string& id, const RunRecord* record);

// One line of `cagent runs` (with its newline) for a row of RunRow (or an agent session's row):
// every field escaped; `home` (the caller's home directory, or "") is written "~" in paths.
std::string RunListLine(const nlohmann::json& row, const std::string& home);

// `cagent show`'s text for a record: status and reason, profile, base, repository, patch, changed
// files, what the outputs left out, verification, findings. Every line escaped.
std::string RunShowText(const RunRecord& record);

// The exit code `cagent show` gives for a record: its status's (run_state.h), a failed or
// timed-out verification included; kRunFailed for a status that is no run state.
ExitCode RunShowExitCode(const RunRecord& record);

}  // namespace cagent::launcher::run
