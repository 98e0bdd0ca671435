#include "launcher/run/last_resort.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

namespace cagent::launcher::run {
namespace {

// Two fixed buffers, swapped on arm, so the terminate handler never reads a half-written one
// and never needs a lock or the heap.
constexpr std::size_t kMaxPath = 4096;
constexpr std::size_t kMaxRecord = 1 << 20;

struct Slot {
  char result_path[kMaxPath];
  char tmp_path[kMaxPath];
  char record[kMaxRecord];
  std::size_t record_len;
};

Slot g_slots[2];
std::atomic<int> g_armed{-1};  // index of the slot in use, or -1
std::mutex g_arm_mu;

void WriteAll(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void OnTerminate() {
  const bool wrote = WriteLastResortRecord();
  static const char kMsg[] = "cagent: internal error: cagent is stopping unexpectedly";
  WriteAll(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
  if (wrote) {
    static const char kRec[] = "; the run is recorded as failed in its result.json";
    WriteAll(STDERR_FILENO, kRec, sizeof(kRec) - 1);
  }
  WriteAll(STDERR_FILENO, "\n", 1);
  std::abort();
}

}  // namespace

void ArmLastResortRecord(const std::string& run_dir, const std::string& json_text) {
  const std::string result = run_dir + "/result.json";
  const std::string tmp = run_dir + "/result.json.last-resort";
  if (result.size() >= kMaxPath || tmp.size() >= kMaxPath || json_text.size() >= kMaxRecord) return;
  const std::lock_guard<std::mutex> lock(g_arm_mu);
  const int next = g_armed.load() == 0 ? 1 : 0;
  Slot& s = g_slots[next];
  std::memcpy(s.result_path, result.c_str(), result.size() + 1);
  std::memcpy(s.tmp_path, tmp.c_str(), tmp.size() + 1);
  std::memcpy(s.record, json_text.data(), json_text.size());
  s.record_len = json_text.size();
  g_armed.store(next);
}

void DisarmLastResortRecord() {
  const std::lock_guard<std::mutex> lock(g_arm_mu);
  g_armed.store(-1);
}

bool WriteLastResortRecord() noexcept {
  const int i = g_armed.exchange(-1);
  if (i < 0) return false;
  const Slot& s = g_slots[i];
  if (::access(s.result_path, F_OK) == 0) return false;  // the run recorded itself
  const int fd = ::open(s.tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  WriteAll(fd, s.record, s.record_len);
  ::fsync(fd);
  ::close(fd);
  return ::rename(s.tmp_path, s.result_path) == 0;
}

void InstallLastResortHandler() { std::set_terminate(OnTerminate); }

}  // namespace cagent::launcher::run
