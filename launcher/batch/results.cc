#include "launcher/batch/results.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <fstream>
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

json MakeResult(const BatchTask& task, const json& run_result, const std::string& status,
                const std::string& reason, const BatchFields& f) {
  json out;
  if (run_result.is_object() && run_result.contains("status") && run_result["status"].is_string()) {
    out = run_result;
  } else {
    out = json{{"status", status}, {"reason", reason}, {"verified", false}};
  }
  out["batch"] =
      json{{"task_id", task.id},
           {"index", task.index},
           {"line", task.line},
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

json SummaryLine(const json& result) {
  const json batch = result.contains("batch") ? result["batch"] : json::object();
  const json usage =
      result.contains("usage") && result["usage"].is_object() ? result["usage"] : json::object();
  return json{{"id", Str(batch, "task_id")},
              {"index", Num(batch, "index")},
              {"line", Num(batch, "line")},
              {"status", Str(result, "status")},
              {"verified", result.value("verified", false) == true},
              {"exit_status", batch.value("exit_status", json(nullptr))},
              {"signal", batch.value("signal", json(nullptr))},
              {"turns", Num(usage, "model_turns")},
              {"tokens", Num(usage, "input_tokens") + Num(usage, "output_tokens")},
              {"wall_time_ms", Num(batch, "wall_time_ms")},
              {"reason", Str(result, "reason")},
              {"run_id", Str(result, "run_id")},
              {"host", Str(batch, "host")},
              {"finished_at", Str(batch, "finished_at")}};
}

Status RecordResult(const std::string& results_dir, const BatchTask& task, const json& result) {
  const std::string dir = TaskDir(results_dir, task);
  if (auto s = session::WriteFileAtomic(dir + "/result.json", JsonText(result, 2) + "\n"); !s) {
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

Result<json> ReadResult(const std::string& path) {
  auto text = ReadSmallFile(path, kMaxResultBytes);
  if (!text) return text.error();
  bool too_deep = false;
  json j = ParseJsonWithin(*text, kMaxResultDepth, &too_deep);
  if (too_deep) return PlainError(path, "is nested too deeply");
  if (!j.is_object()) return PlainError(path, "is not a JSON object");
  if (!j.contains("batch") || !j["batch"].is_object()) {
    return PlainError(path, "has no \"batch\" object (not written by cagent batch)");
  }
  return j;
}

bool Succeeded(const json& result) {
  return Str(result, "status") == "completed" && result.value("verified", false) == true;
}

std::string CheckComplete(const std::string& results_dir, const BatchTask& task) {
  const std::string dir = TaskDir(results_dir, task);
  struct stat st {};
  if (::lstat((dir + "/result.json").c_str(), &st) != 0) {
    return "no result.json (the task did not finish)";
  }
  auto r = ReadResult(dir + "/result.json");
  if (!r) return "result.json unreadable: " + r.error().Message();
  const json& res = *r;
  const json& b = res["batch"];
  if (Str(b, "task_id") != task.id) return "result.json is of another task";
  const std::string status = Str(res, "status");
  if (status != "completed" && status != "failed" && status != "needs-approval" &&
      status != "no-change") {
    return "the previous attempt ended " +
           (status.empty() ? std::string("without a status") : "'" + status + "'");
  }
  // A "failed" batch could not start cagent run: it has no run to check, and is tried again.
  const std::string run_dir = Str(b, "run_dir");
  if (run_dir.empty() || !res.contains("run_id")) return "the previous attempt recorded no run";
  // The run directory must be this task's own (a result copied from elsewhere names another).
  if (run_dir.rfind(dir + "/state/runs/", 0) != 0) {
    return "the recorded run directory is not under " + dir + "/state/runs/";
  }
  auto run = ReadSmallFile(run_dir + "/result.json", kMaxResultBytes);
  if (!run) return "the run's result.json is missing: " + run.error().Message();
  json own = ParseJsonWithin(*run, kMaxResultDepth);  // compared below, which recurses
  json copy = res;
  copy.erase("batch");
  if (!own.is_object() || own != copy) {
    return "the run's result.json differs from the batch's copy";
  }
  const json patch = res.contains("patch") && res["patch"].is_object() ? res["patch"] : json();
  const std::string want = Str(patch, "sha256");
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
  if (chain->entries != Num(res, "event_log_entries") ||
      chain->head != Str(res, "event_log_head")) {
    return "the event log has " + std::to_string(chain->entries) +
           " entries, result.json records " + std::to_string(Num(res, "event_log_entries")) +
           " (or another head)";
  }
  return {};
}

}  // namespace cagent::launcher::batch
