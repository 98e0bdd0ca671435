// AuditLog: the run's append-only, hash-chained record (one JSON object per line, mode 0600,
// flushed per event). Each entry carries the SHA-256 of the previous line, so an edited, deleted or
// reordered line breaks the chain and VerifyAuditLog() says where. Runs in cagent (trusted).
//
// Entry fields: run, seq (0-based, consecutive), time (RFC 3339 UTC, ms), actor, event, policy
// (digest), tool, args (digest of the canonical JSON arguments), verdict, rule, result (digest),
// detail (JSON object, already redacted), lost (only after lost entries), prev (hex SHA-256 of the
// previous line's bytes without its newline; 64 zeros for the first). Which events exist and what
// each one's detail holds is audit_schema.h's (documented in docs/audit-log.md); this file only
// writes and chains lines.
//
// A failed write (full disk, I/O error) is reported once on the operational log and never fails
// the request that caused it; the entry is counted as lost and the run record says so.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "launcher/broker/audit_schema.h"

namespace cagent::launcher::broker {

class AuditLog {
 public:
  // Creates `path` (O_CREAT|O_EXCL|O_APPEND|O_CLOEXEC|O_NOFOLLOW, mode 0600) or, with `resume`,
  // appends to an existing regular file after verifying its chain and that it belongs to `run_id`
  // (the run's later phases add to the same log). Not thread-safe: one owner (the io_context).
  static Result<AuditLog> Open(const std::string& path, std::string run_id,
                               std::string policy_digest, bool resume = false);

  // Appends one entry with one write(2) of the whole line (no fdatasync: the entry survives a crash
  // of cagent, not a power loss). Never fails the caller: returns false when the entry was lost
  // (full disk, I/O error); the first loss is reported once with spdlog::warn, a partial line is
  // cut off again so the chain stays intact, and the next entry written carries "lost": N.
  bool Append(const AuditEvent& event);

  // Also writes every entry appended from now on, the same line, to `fd` (borrowed; -1 = stop),
  // as it is appended: `cagent run --events-jsonl`. Blocking writes, best effort: when the stream
  // fails (the reader went away) it is dropped with one warning and the log goes on.
  void StreamTo(int fd) { stream_fd_ = fd; }

  // Called with every entry appended from now on (the line without its newline, and the event's
  // `transcript`, null when it has none), on the appending thread, after the write; also for an
  // entry that could not be written. `cagent run --verbose` prints a transcript from it. Empty =
  // none. The broker builds transcripts only when observed() is true.
  using Observer = std::function<void(std::string_view line, const nlohmann::json& transcript)>;
  void SetObserver(Observer observer) { observer_ = std::move(observer); }
  [[nodiscard]] bool observed() const { return static_cast<bool>(observer_); }

  [[nodiscard]] std::uint64_t entries() const { return seq_; }
  [[nodiscard]] std::uint64_t lost() const { return lost_; }
  [[nodiscard]] const std::string& path() const { return path_; }
  // SHA-256 of the last line written (64 zeros before the first): the value the next entry's
  // `prev` carries. A run record that stores it (with entries()) makes removal or editing of the
  // log's last lines detectable too, which the chain alone cannot show.
  [[nodiscard]] const std::string& head() const { return prev_; }

 private:
  AuditLog() = default;
  void AppendTime();                   // "time":"..." of now, into line_
  void Stream(std::string_view line);  // to stream_fd_, if any
  UniqueFd fd_;
  std::string path_;
  std::string run_id_;
  std::string policy_digest_;
  // The constant parts of every line, escaped once: `{"run":"RUN","seq":` and `,"policy":"D"`.
  std::string run_field_;
  std::string policy_field_;
  std::string line_;  // the line being built; its capacity is kept from one entry to the next
  std::int64_t time_second_ = -1;  // the second time_text_ holds ("2024-05-01T12:34:56")
  std::string time_text_;
  std::string prev_ = std::string(64, '0');
  std::uint64_t seq_ = 0;
  std::uint64_t lost_ = 0;
  std::uint64_t size_ = 0;  // bytes of complete lines in the file (a partial line is cut back)
  bool reported_ = false;
  int stream_fd_ = -1;
  Observer observer_;
};

// Digest of a JSON value in canonical form (keys sorted, no whitespace): used for args and
// results, and by loop detection and approval binding.
std::string CanonicalDigest(const nlohmann::json& value);
// CanonicalDigest(json(text)), without copying `text` into a json value (tool output, per call).
std::string StringDigest(std::string_view text);

struct AuditVerifyReport {
  bool ok = false;
  std::uint64_t entries = 0;
  std::uint64_t first_bad_line = 0;  // 1-based; 0 when ok
  std::string message;               // what is wrong there ("line 7: prev does not match line 6")
  std::string run_id;
  std::string head;  // when ok: SHA-256 of the last line (64 zeros for an empty log)
};
// Reads `path` and checks every line: JSON object, consecutive seq, same run, prev chain.
Result<AuditVerifyReport> VerifyAuditLog(const std::string& path);
// The same checks over `content`, a whole log's text. Pure; never fails (problems are in the
// report).
AuditVerifyReport VerifyAuditLogText(std::string_view content);

}  // namespace cagent::launcher::broker
