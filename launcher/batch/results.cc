#include "launcher/batch/results.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "common/json_text.h"
#include "common/sha256.h"
#include "common/small_file.h"
#include "common/unique_fd.h"
#include "launcher/broker/audit_log.h"
#include "launcher/session/state_dir.h"

namespace cagent::launcher::batch {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxResultBytes = 16U << 20U;
// A result nests a few levels; deeper text is refused before it is parsed (ParseJsonWithin).
constexpr std::size_t kMaxResultDepth = 64;

Status WriteAll(int fd, const std::string& text, const std::string& what) {
  std::size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("write " + what);
    off += static_cast<std::size_t>(n);
  }
  return Ok{};
}

// SHA-256 of a file streamed (a patch may be large), or "" when it cannot be read.
std::string FileSha256(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return {};
  Sha256 h;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return {};
    if (n == 0) break;
    h.Update(buf, static_cast<std::size_t>(n));
  }
  return h.FinishHex();
}

json OptInt(const std::optional<int>& v) { return v ? json(*v) : json(nullptr); }

// An integer member within int; nullopt when absent, null, of another type or out of range.
std::optional<int> IntMember(const json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned()) {
    const auto v = it->get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) return std::nullopt;
    return static_cast<int>(v);
  }
  const auto v = it->get<std::int64_t>();
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  return static_cast<int>(v);
}

}  // namespace

std::string Str(const json& obj, const char* key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::uint64_t Num(const json& obj, const char* key) {
  if (!obj.is_object()) return 0;
  auto it = obj.find(key);
  return it != obj.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

std::string UtcNow() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string TaskDir(const std::string& results_dir, const BatchTask& task) {
  return results_dir + "/" + task.id;
}

json TaskResult::ToJson() const {
  json out =
      run ? run->ToJson() : json{{"status", status}, {"reason", reason}, {"verified", false}};
  const BatchFields& f = batch.fields;
  out["batch"] =
      json{{"task_id", batch.task_id},
           {"index", batch.index},
           {"line", batch.line},
           {"exit_status", OptInt(f.exit_status)},
           {"signal", OptInt(f.signal)},
           {"wall_time_ms", f.wall_time_ms},
           {"run_dir", f.run_dir},
           {"host", f.host},
           {"started_at", f.started_at},
           {"finished_at", f.finished_at},
           {"rerun_reason", f.rerun_reason.empty() ? json(nullptr) : json(f.rerun_reason)}};
  return out;
}

Result<TaskResult> TaskResult::FromJson(const json& j) {
  if (!j.is_object()) return PlainError("a task's result.json", "is not a JSON object");
  const auto b = j.find("batch");
  if (b == j.end() || !b->is_object()) {
    return PlainError("a task's result.json",
                      "has no \"batch\" object (not written by cagent batch)");
  }
  TaskResult r;
  if (!Str(j, "run_id").empty()) {
    auto run = run::RunRecord::FromJson(j);
    if (!run) return run.error();
    r.run = std::move(*run);
  } else {
    r.status = Str(j, "status");
    r.reason = Str(j, "reason");
  }
  r.batch.task_id = Str(*b, "task_id");
  r.batch.index = Num(*b, "index");
  r.batch.line = Num(*b, "line");
  BatchFields& f = r.batch.fields;
  f.exit_status = IntMember(*b, "exit_status");
  f.signal = IntMember(*b, "signal");
  f.wall_time_ms = Num(*b, "wall_time_ms");
  f.run_dir = Str(*b, "run_dir");
  f.host = Str(*b, "host");
  f.started_at = Str(*b, "started_at");
  f.finished_at = Str(*b, "finished_at");
  f.rerun_reason = Str(*b, "rerun_reason");
  return r;
}

TaskResult MakeResult(const BatchTask& task, const std::optional<run::RunRecord>& run,
                      const std::string& status, const std::string& reason, const BatchFields& f) {
  TaskResult out;
  out.run = run;
  if (!run) {
    out.status = status;
    out.reason = reason;
  }
  out.batch.task_id = task.id;
  out.batch.index = task.index;
  out.batch.line = task.line;
  out.batch.fields = f;
  return out;
}

json SummaryLine(const TaskResult& result) {
  const BatchRecord& b = result.batch;
  const broker::BudgetUsage used = result.run ? result.run->used : broker::BudgetUsage{};
  return json{{"id", b.task_id},
              {"index", b.index},
              {"line", b.line},
              {"status", result.Status()},
              {"verified", result.Verified()},
              {"exit_status", OptInt(b.fields.exit_status)},
              {"signal", OptInt(b.fields.signal)},
              {"turns", used.model_turns},
              {"tokens", used.input_tokens + used.output_tokens},
              {"wall_time_ms", b.fields.wall_time_ms},
              {"reason", result.Reason()},
              {"run_id", result.run ? result.run->run_id : std::string()},
              {"host", b.fields.host},
              {"finished_at", b.fields.finished_at}};
}

Status RecordResult(const std::string& results_dir, const BatchTask& task,
                    const TaskResult& result) {
  const std::string dir = TaskDir(results_dir, task);
  if (auto s = session::WriteFileAtomic(dir + "/result.json", JsonText(result.ToJson(), 2) + "\n");
      !s) {
    return std::move(s).Context("record the result of task " + task.id);
  }
  const std::string path = results_dir + "/" + kSummaryFile;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return ErrnoError("open " + path);
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return ErrnoError("flock " + path);
  }
  // One write of the whole line: with O_APPEND the kernel places it at the end atomically for a
  // local file; the lock covers filesystems (NFS) where it does not.
  auto s = WriteAll(fd.get(), JsonText(SummaryLine(result)) + "\n", path);
  ::flock(fd.get(), LOCK_UN);
  return s;
}

Result<TaskResult> ReadResult(const std::string& path) {
  auto text = ReadSmallFile(path, kMaxResultBytes);
  if (!text) return text.error();
  bool too_deep = false;
  json j = ParseJsonWithin(*text, kMaxResultDepth, &too_deep);
  if (too_deep) return PlainError(path, "is nested too deeply");
  if (!j.is_object()) return PlainError(path, "is not a JSON object");
  if (!j.contains("batch") || !j["batch"].is_object()) {
    return PlainError(path, "has no \"batch\" object (not written by cagent batch)");
  }
  return TaskResult::FromJson(j);
}

bool Succeeded(const TaskResult& result) {
  return result.Status() == "completed" && result.Verified();
}

Refusal CheckComplete(const std::string& results_dir, const BatchTask& task) {
  const std::string dir = TaskDir(results_dir, task);
  struct stat st {};
  if (::lstat((dir + "/result.json").c_str(), &st) != 0) {
    return "no result.json (the task did not finish)";
  }
  auto r = ReadResult(dir + "/result.json");
  if (!r) return "result.json unreadable: " + r.error().Message();
  const TaskResult& res = *r;
  if (res.batch.task_id != task.id) return "result.json is of another task";
  const std::string status = res.Status();
  if (status != "completed" && status != "failed" && status != "needs-approval" &&
      status != "no-change") {
    return "the previous attempt ended " +
           (status.empty() ? std::string("without a status") : "'" + status + "'");
  }
  // A "failed" batch could not start cagent run: it has no run to check, and is tried again.
  const std::string& run_dir = res.batch.fields.run_dir;
  if (run_dir.empty() || !res.run) return "the previous attempt recorded no run";
  // The run directory must be this task's own (a result copied from elsewhere names another).
  if (run_dir.rfind(dir + "/state/runs/", 0) != 0) {
    return "the recorded run directory is not under " + dir + "/state/runs/";
  }
  // Compared as records (each read back the one way, every field the record has): the copy is
  // the run's own record unless one of them was edited.
  auto own = run::ReadRunResult(run_dir);
  if (!own) return "the run's result.json is missing or unreadable: " + own.error().Message();
  if (own->ToJson() != res.run->ToJson()) {
    return "the run's result.json differs from the batch's copy";
  }
  const run::RunRecord& rec = *res.run;
  const std::string& want = rec.patch.sha256;
  if (!want.empty()) {
    const std::string got = FileSha256(run_dir + "/patch.diff");
    if (got != want) {
      return got.empty() ? "patch.diff is missing"
                         : "patch.diff's sha256 " + got.substr(0, 16) + "... is not the recorded " +
                               want.substr(0, 16) + "...";
    }
  }
  auto chain = broker::VerifyAuditLog(run_dir + "/events.jsonl");
  if (!chain) return "the event log cannot be read: " + chain.error().Message();
  if (!chain->ok) return "the event log does not verify: " + chain->message;
  const std::uint64_t recorded = rec.event_log_entries.value_or(0);
  if (chain->entries != recorded || chain->head != rec.event_log_head) {
    return "the event log has " + std::to_string(chain->entries) +
           " entries, result.json records " + std::to_string(recorded) + " (or another head)";
  }
  return {};
}

}  // namespace cagent::launcher::batch
