#include "launcher/session/state_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string_view>
#include <utility>

#include "common/unique_fd.h"
#include "launcher/profile/spec.h"

namespace cagent::launcher::session {

std::string NewRunId() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
  unsigned char bytes[3] = {};
  if (::getrandom(bytes, sizeof(bytes), 0) != static_cast<ssize_t>(sizeof(bytes))) {
    const auto t = std::chrono::steady_clock::now().time_since_epoch().count();
    bytes[0] = static_cast<unsigned char>(t);
    bytes[1] = static_cast<unsigned char>(t >> 8);
    bytes[2] = static_cast<unsigned char>(::getpid());
  }
  char suffix[8];
  std::snprintf(suffix, sizeof(suffix), "%02x%02x%02x", bytes[0], bytes[1], bytes[2]);
  return std::string(stamp) + "-" + suffix;
}

namespace {

// A decimal number from a small file read through `fd` (no link followed), or 0 when empty.
std::optional<std::uint64_t> ReadNumber(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n < 0) return std::nullopt;
  std::uint64_t v = 0;
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] == '\n') break;
    if (buf[i] < '0' || buf[i] > '9' || v > UINT64_MAX / 10) return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(buf[i] - '0');
  }
  return v;
}

}  // namespace

Result<std::uint64_t> NextRunSequence(const std::string& runs_dir) {
  const std::string path = runs_dir + "/sequence";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return ErrnoError("open " + path);
  if (::flock(fd.get(), LOCK_EX) != 0) return ErrnoError("lock " + path);
  const std::optional<std::uint64_t> last = ReadNumber(fd.get());
  if (!last) return PlainError(path, "is not a run counter (a decimal number)");
  const std::string next = std::to_string(*last + 1) + "\n";
  if (::pwrite(fd.get(), next.data(), next.size(), 0) != static_cast<ssize_t>(next.size()) ||
      ::ftruncate(fd.get(), static_cast<off_t>(next.size())) != 0) {
    return ErrnoError("write " + path);
  }
  return *last + 1;  // the lock goes with the descriptor
}

std::optional<std::uint64_t> RunSequence(const std::string& run_dir) {
  const std::string path = run_dir + "/sequence";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return std::nullopt;
  auto v = ReadNumber(fd.get());
  if (!v || *v == 0) return std::nullopt;
  return v;
}

Status WriteFileAtomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return ErrnoError("open " + tmp);
  std::size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("write " + tmp);
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0 || ::close(fd.Release()) != 0) return ErrnoError("write " + tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError("rename " + tmp);
  return Ok{};
}

namespace {
// Set by the command (cli/run_command.cc) before it reads the state directory, on its one thread.
std::string& StateDirectoryOverride() {
  static std::string dir;
  return dir;
}
}  // namespace

void UseStateDirectory(std::string dir) { StateDirectoryOverride() = std::move(dir); }

std::string StateDirectory() {
  if (const std::string& dir = StateDirectoryOverride(); !dir.empty()) return dir;
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return std::string(xdg) + "/cagent";
  }
  const std::string home = CallerHome();
  return (home.empty() ? std::string("/tmp") : home + "/.local/state") + "/cagent";
}

}  // namespace cagent::launcher::session
