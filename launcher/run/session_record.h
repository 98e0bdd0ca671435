// The record of a `cagent agent` session, so that `cagent runs` lists sessions with the runs and
// `cagent log` finds their audit logs (issue #20). Runs in cagent (trusted).
//
// A session keeps three files in <state>/sessions/: RUN.audit.jsonl (the hash-chained audit
// log, unless --audit-log put it elsewhere), RUN.agent.log, and RUN.session.json, this record:
// written when the session starts with status "unfinished", rewritten (atomically) when it ends
// with how it ended. A session whose record still says "unfinished" is running, or cagent died
// before it could say how it ended. Sessions made before the record existed have only the audit
// log; they are listed as "unfinished", without a number.
//
// The record's fields: kind ("agent"), run_id, sequence (the run counter's number: runs and
// sessions share it, state_dir.h), status (completed | failed | cancelled | needs-approval |
// unfinished), reason, profile, model, workspace, created_at, finished_at, audit_log,
// agent_log, summary, downgrades, event_log_entries and event_log_head (the log's length and last
// line digest at the end, which `cagent log` compares with the log).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace cagent::launcher::run {

// <state_dir>/sessions, where `cagent agent` keeps its sessions' files.
[[nodiscard]] std::string SessionsDirectory(const std::string& state_dir);

// <sessions_dir>/<id>.session.json.
[[nodiscard]] std::string SessionRecordPath(const std::string& sessions_dir, const std::string& id);

// Writes `record` to `path` through a temporary file and rename (mode 0600, no link followed).
[[nodiscard]] Status WriteSessionRecord(const std::string& path, const nlohmann::json& record);

// The status a session ended with, in `cagent run`'s words: "finished" -> "completed"; "failed",
// "cancelled" and "needs-approval" as they are.
[[nodiscard]] std::string SessionStatus(std::string_view broker_status);

// One session found in the sessions directory.
struct SessionEntry {
  std::string id;
  std::string record_path;  // "" when there is no record (a session from before records)
  std::string audit_log;    // the record's audit_log, else <sessions_dir>/<id>.audit.jsonl
  std::string agent_log;    // <sessions_dir>/<id>.agent.log
  std::optional<std::uint64_t> sequence;
  // The record as read (an object), or null when absent or unreadable. Its strings are as the
  // session wrote them: the reason and summary may quote the agent.
  nlohmann::json record;
  // status: the record's, or "unfinished" when it has none.
  [[nodiscard]] std::string Status() const;
};

// Every session under `sessions_dir`: a regular file named ID.session.json or ID.audit.jsonl
// (symlinks are not sessions), ordered by id. Never fails: an unreadable directory has none.
[[nodiscard]] std::vector<SessionEntry> ListSessions(const std::string& sessions_dir);

}  // namespace cagent::launcher::run
