#include "launcher/run/state_dir.h"

#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "launcher/profile_spec.h"

namespace cagent::launcher::run {

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

std::string StateDirectory() {
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return std::string(xdg) + "/cagent";
  }
  const std::string home = CallerHome();
  return (home.empty() ? std::string("/tmp") : home + "/.local/state") + "/cagent";
}

}  // namespace cagent::launcher::run
