// `cagent cache ls|clear`: the profiles' caches kept between runs (launcher/profile/caches.h).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace cagent::launcher::cli {

struct CacheOptions {
  std::string action;   // "ls" or "clear"
  std::string profile;  // clear: one profile's caches; "" with all = every profile's
  bool all = false;
  bool json = false;
};

CLI::App* AddCacheCommand(CLI::App& app, CacheOptions& options);

// 0 on success, 1 when the cache directory cannot be read or cleared, 2 on a usage error.
int RunCacheCommand(const CacheOptions& options);

}  // namespace cagent::launcher::cli
