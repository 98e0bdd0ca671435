#include "launcher/broker/audit_log.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <string_view>
#include <utility>

#include "common/json_text.h"
#include "common/sha256.h"

namespace cagent::launcher::broker {
namespace {

const std::string kZeroDigest(64, '0');

// Serialises without throwing: invalid UTF-8 in a string (tool output, file names) becomes U+FFFD
// instead of an exception in the middle of a request.
std::string DumpCompact(const nlohmann::json& value) { return JsonText(value); }

bool IsLowerHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<std::string> ReadAll(int fd, const std::string& path) {
  std::string data;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read " + path);
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
  }
  return data;
}

}  // namespace

AuditVerifyReport VerifyAuditLogText(std::string_view content) {
  AuditVerifyReport report;
  report.head = kZeroDigest;
  std::string expected_prev = kZeroDigest;
  std::uint64_t line_no = 0;
  std::size_t pos = 0;
  const auto fail = [&report](std::uint64_t line, const std::string& what) {
    report.ok = false;
    report.first_bad_line = line;
    report.message = "line " + std::to_string(line) + ": " + what;
    return report;
  };
  while (pos < content.size()) {
    ++line_no;
    const std::size_t nl = content.find('\n', pos);
    if (nl == std::string_view::npos) {
      return fail(line_no,
                  "truncated final line (no newline at the end of the file): the log was cut "
                  "short during a write, or text was appended to it");
    }
    const std::string_view line = content.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) return fail(line_no, "empty line (every entry is one JSON object)");
    bool too_deep = false;
    const nlohmann::json entry = ParseJsonWithin(line, kMaxAuditEntryDepth, &too_deep);
    if (too_deep) {
      return fail(line_no, "nested deeper than " + std::to_string(kMaxAuditEntryDepth) + " levels");
    }
    if (entry.is_discarded()) return fail(line_no, "not valid JSON");
    if (!entry.is_object()) return fail(line_no, "not a JSON object");

    const auto run = entry.find("run");
    if (run == entry.end() || !run->is_string()) return fail(line_no, "no \"run\" string");
    if (line_no == 1) {
      report.run_id = run->get<std::string>();
    } else if (run->get<std::string>() != report.run_id) {
      return fail(line_no, "run is \"" + run->get<std::string>() + "\", but line 1 has run \"" +
                               report.run_id + "\" (lines from another run's log)");
    }

    const auto seq = entry.find("seq");
    if (seq == entry.end() || !seq->is_number_unsigned()) {
      return fail(line_no, "no \"seq\" number");
    }
    const std::uint64_t want_seq = line_no - 1;
    if (seq->get<std::uint64_t>() != want_seq) {
      return fail(line_no, "seq is " + std::to_string(seq->get<std::uint64_t>()) + ", expected " +
                               std::to_string(want_seq) +
                               " (a line is missing, inserted or out of order here)");
    }

    const auto prev = entry.find("prev");
    if (prev == entry.end() || !prev->is_string() || !IsLowerHex64(prev->get<std::string>())) {
      return fail(line_no, "no \"prev\" digest (64 lowercase hex digits)");
    }
    if (prev->get<std::string>() != expected_prev) {
      if (line_no == 1) {
        return fail(line_no, "prev of the first entry is not 64 zeros");
      }
      return fail(line_no, "prev does not match the SHA-256 of line " +
                               std::to_string(line_no - 1) + " (line " +
                               std::to_string(line_no - 1) +
                               " was changed, or this line was changed or forged)");
    }
    expected_prev = Sha256Hex(line);
    report.entries = line_no;
  }
  report.ok = true;
  report.head = expected_prev;
  report.message = "ok: " + std::to_string(report.entries) + " entries";
  return report;
}

std::string CanonicalDigest(const nlohmann::json& value) {
  // nlohmann::json's object_t is a std::map, so dump() emits keys sorted bytewise; indent -1 means
  // no whitespace. The same value therefore always has the same bytes, whatever order the agent
  // sent its keys in.
  return Sha256Hex(DumpCompact(value));
}

std::string StringDigest(std::string_view text) {
  std::string quoted;
  quoted.reserve(text.size() + 2);
  AppendJsonString(quoted, text);
  return Sha256Hex(quoted);
}

Result<AuditLog> AuditLog::Open(const std::string& path, std::string run_id,
                                std::string policy_digest, bool resume) {
  AuditLog log;
  log.path_ = path;
  log.run_id_ = std::move(run_id);
  log.policy_digest_ = std::move(policy_digest);
  log.run_field_ = "{\"run\":";
  AppendJsonString(log.run_field_, log.run_id_);
  log.run_field_ += ",\"seq\":";
  log.policy_field_ = ",\"policy\":";
  AppendJsonString(log.policy_field_, log.policy_digest_);
  if (!resume) {
    // O_EXCL: never adopt a file someone prepared (or a log of another run); O_NOFOLLOW: never
    // write through a symlink planted where the log goes.
    const int fd =
        open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return ErrnoError("create audit log " + path);
    log.fd_.Reset(fd);
    // The umask can only narrow 0600, but say it explicitly so the mode never depends on it.
    if (fchmod(fd, 0600) != 0) return ErrnoError("chmod 0600 audit log " + path);
    return log;
  }
  const int fd = open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoError("open audit log " + path + " to resume");
  log.fd_.Reset(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0) return ErrnoError("stat audit log " + path);
  if (!S_ISREG(st.st_mode)) {
    return PlainError("resume audit log " + path, "not a regular file");
  }
  Result<std::string> content = ReadAll(fd, path);
  if (!content.ok()) return std::move(content.error()).Context("resume audit log");
  const AuditVerifyReport report = VerifyAuditLogText(*content);
  if (!report.ok) {
    return PlainError("resume audit log " + path,
                      "the existing chain does not verify: " + report.message);
  }
  if (report.entries > 0 && report.run_id != log.run_id_) {
    return PlainError("resume audit log " + path,
                      "it belongs to run \"" + report.run_id + "\", not \"" + log.run_id_ + "\"");
  }
  log.seq_ = report.entries;
  log.prev_ = report.head;
  log.size_ = static_cast<std::uint64_t>(content->size());
  return log;
}

void AuditLog::AppendTime() {
  // RFC 3339, UTC, milliseconds: "2024-05-01T12:34:56.789Z". The calendar part is formatted once
  // per second; entries come far more often than that.
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  if (ts.tv_sec != time_second_) {
    tm utc{};
    gmtime_r(&ts.tv_sec, &utc);
    char buf[40];
    const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
    time_text_.assign(buf, n);
    time_second_ = ts.tv_sec;
  }
  const auto ms = static_cast<int>(ts.tv_nsec / 1000000);
  line_ += ",\"time\":\"";
  line_ += time_text_;
  line_ += '.';
  line_ += static_cast<char>('0' + ms / 100);
  line_ += static_cast<char>('0' + ms / 10 % 10);
  line_ += static_cast<char>('0' + ms % 10);
  line_ += "Z\"";
}

bool AuditLog::Append(const AuditEvent& event) {
  // The line is written field by field into one reused buffer, so its fields keep a readable
  // order and no json value is made per field: the names are constants, strings go through
  // AppendJsonString (the escapes and the invalid-UTF-8 replacement of JsonText), and only the
  // detail object is serialised, by the non-throwing JsonText, so a hostile string cannot make
  // the record throw.
  const auto number = [this](std::uint64_t value) {
    char buf[24];
    const auto res = std::to_chars(buf, buf + sizeof buf, value);
    line_.append(buf, res.ptr);
  };
  const auto string_field = [this](std::string_view name, std::string_view value) {
    line_ += ",\"";
    line_ += name;
    line_ += "\":";
    AppendJsonString(line_, value);
  };
  line_.clear();
  line_ += run_field_;
  number(seq_);
  AppendTime();
  string_field("actor", AuditActorName(event.actor));
  string_field("event", AuditKindName(event.kind));
  line_ += policy_field_;
  string_field("tool", event.tool);
  string_field("args", event.args_digest);
  string_field("verdict", event.verdict);
  string_field("rule", event.rule);
  string_field("result", event.result_digest);
  line_ += ",\"detail\":";
  if (!event.fields.empty()) {
    // The per-call kinds' typed fields, in the key order a json object has.
    char sep = '{';
    for (const AuditDetailField& f : event.fields) {
      line_ += sep;
      sep = ',';
      line_ += '"';
      line_ += f.name;
      line_ += "\":";
      switch (f.type) {
        case AuditDetailField::Type::kCount:
          number(f.count);
          break;
        case AuditDetailField::Type::kBoolean:
          line_ += f.count != 0 ? "true" : "false";
          break;
        case AuditDetailField::Type::kString:
          AppendJsonString(line_, f.text);
          break;
        case AuditDetailField::Type::kStringList: {
          char item_sep = '[';
          for (const std::string& item : f.list) {
            line_ += item_sep;
            item_sep = ',';
            AppendJsonString(line_, item);
          }
          line_ += f.list.empty() ? "[]" : "]";
          break;
        }
      }
    }
    line_ += '}';
  } else {
    line_ += event.detail.is_object() ? DumpCompact(event.detail)
                                      : DumpCompact(nlohmann::json{{"value", event.detail}});
  }
  // Entries lost so far (full disk ...): the next entry that does get written says so, so the gap
  // is visible in the log itself and not only in the run record.
  if (lost_ > 0) {
    line_ += ",\"lost\":";
    number(lost_);
  }
  string_field("prev", prev_);
  line_ += "}\n";
  const std::string_view out = line_;

  // One write(2) for the whole line: with O_APPEND the line lands at the end in one piece. No
  // fdatasync: "flushed per event" means handed to the kernel, so the entry survives a crash of
  // cagent; surviving a power loss would cost a disk flush per tool call.
  int err = fd_.valid() ? 0 : EBADF;
  std::size_t done = 0;
  while (err == 0 && done < out.size()) {
    const ssize_t n = write(fd_.get(), out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno != EINTR) err = errno;
      continue;
    }
    if (n == 0) err = EIO;
    done += static_cast<std::size_t>(n);  // a short write: the retry reports the real errno
  }
  if (err == 0) {
    size_ += out.size();
    Sha256ToHex(Sha256Digest(out.substr(0, out.size() - 1)), prev_.data());
    ++seq_;
    Stream(out);
    if (observer_) observer_(out.substr(0, out.size() - 1), event.transcript);
    return true;
  }
  if (done > 0) {
    // Part of the line got out before the disk filled up: cut it off again so the entries before
    // it still verify and the next successful entry continues the chain.
    if (ftruncate(fd_.get(), static_cast<off_t>(size_)) != 0) {
      // Nothing more to do here: the verifier will report the truncated line.
    }
  }
  ++lost_;
  if (observer_) observer_(out.substr(0, out.size() - 1), event.transcript);
  if (!reported_) {
    reported_ = true;
    spdlog::warn(
        "audit log {}: write failed ({}); this and later failed entries are counted as lost and "
        "the run continues; free space on that file system to resume recording",
        path_, std::strerror(err));
  }
  return false;
}

void AuditLog::Stream(std::string_view line) {
  std::size_t done = 0;
  while (stream_fd_ >= 0 && done < line.size()) {
    const ssize_t n = write(stream_fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      spdlog::warn("the event stream stopped ({}); the run goes on, and its events.jsonl is whole",
                   n < 0 ? std::strerror(errno) : "nothing written");
      stream_fd_ = -1;
      return;
    }
    done += static_cast<std::size_t>(n);
  }
}

Result<AuditVerifyReport> VerifyAuditLog(const std::string& path) {
  const int raw = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (raw < 0) return ErrnoError("open " + path);
  UniqueFd fd(raw);
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return ErrnoError("stat " + path);
  if (!S_ISREG(st.st_mode)) return PlainError("read " + path, "not a regular file");
  Result<std::string> content = ReadAll(fd.get(), path);
  if (!content.ok()) return std::move(content.error());
  return VerifyAuditLogText(*content);
}

}  // namespace cagent::launcher::broker
