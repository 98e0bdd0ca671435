#include "launcher/cli/cache_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/exit_codes.h"
#include "common/json_text.h"
#include "common/terminal_text.h"
#include "launcher/profile/caches.h"
#include "launcher/sandbox/rlimits.h"

namespace cagent::launcher::cli {

CLI::App* AddCacheCommand(CLI::App& app, CacheOptions& o) {
  CLI::App* cache = app.add_subcommand(
      "cache",
      "List or clear the profiles' caches: the directories a profile's `cache ~/PATH` keeps "
      "between runs, under $XDG_CACHE_HOME/cagent/caches/PROFILE/ (default ~/.cache/cagent). "
      "Setup commands write them; the agent and verification see them read-only unless the "
      "profile says `cache read-write`.");
  cache->require_subcommand(1);
  CLI::App* ls = cache->add_subcommand("ls", "List every cache: profile, path, size, files.");
  ls->add_flag("--json", o.json, "Print the list as one JSON array.");
  ls->callback([&o] { o.action = "ls"; });
  CLI::App* clear = cache->add_subcommand(
      "clear",
      "Remove one profile's caches (PROFILE, for every repository), or every profile's (--all).");
  clear->add_option("profile", o.profile, "The profile whose caches to remove.");
  clear->add_flag("--all", o.all, "Remove the caches of every profile.");
  clear->add_flag("--json", o.json, "Print what was removed as one JSON object.");
  clear->callback([&o] { o.action = "clear"; });
  return cache;
}

int RunCacheCommand(const CacheOptions& o) {
  const std::string root = CacheRoot();
  if (o.action == "ls") {
    auto list = ListCaches(root);
    if (!list) {
      std::fprintf(stderr, "cagent cache: %s\n", list.error().Message().c_str());
      return ToInt(ExitCode::kFailed);
    }
    if (o.json) {
      nlohmann::json j = nlohmann::json::array();
      for (const CacheEntry& e : *list) {
        j.push_back({{"profile", e.profile},
                     {"repository", e.repository},
                     {"path", e.path},
                     {"dir", e.dir},
                     {"bytes", e.bytes},
                     {"files", e.files},
                     {"complete", e.complete}});
      }
      std::cout << JsonText(j, 2) << std::endl;
      return ToInt(ExitCode::kOk);
    }
    if (list->empty()) {
      std::printf("No caches under %s\n", TerminalSafe(root, TerminalLines::kOne).c_str());
      return ToInt(ExitCode::kOk);
    }
    std::printf("%-20s %-30s %-28s %10s %8s\n", "PROFILE", "REPOSITORY", "PATH", "SIZE", "FILES");
    for (const CacheEntry& e : *list) {
      std::printf(
          "%-20s %-30s %-28s %10s %8llu%s\n", TerminalSafe(e.profile, TerminalLines::kOne).c_str(),
          TerminalSafe(e.repository.empty() ? "-" : e.repository, TerminalLines::kOne).c_str(),
          TerminalSafe(e.path, TerminalLines::kOne).c_str(), HumanReadableSize(e.bytes).c_str(),
          static_cast<unsigned long long>(e.files), e.complete ? "" : " (partial count)");
    }
    std::printf("\n%s\n", TerminalSafe(root + "/caches", TerminalLines::kOne).c_str());
    return ToInt(ExitCode::kOk);
  }
  if (o.profile.empty() == !o.all) {
    std::fprintf(stderr, "cagent cache clear: name a profile, or pass --all (not both)\n");
    return ToInt(ExitCode::kUsage);
  }
  auto removed = ClearCaches(root, o.all ? std::string() : o.profile);
  if (!removed) {
    std::fprintf(stderr, "cagent cache clear: %s\n", removed.error().Message().c_str());
    return ToInt(ExitCode::kFailed);
  }
  if (o.json) {
    std::cout << JsonText(nlohmann::json{{"removed", *removed},
                                         {"profile", o.all ? nlohmann::json(nullptr)
                                                           : nlohmann::json(o.profile)}},
                          2)
              << std::endl;
  } else {
    std::printf("Removed %zu cache%s%s\n", *removed, *removed == 1 ? "" : "s",
                o.all ? "" : (" of " + TerminalSafe(o.profile, TerminalLines::kOne)).c_str());
  }
  return ToInt(ExitCode::kOk);
}

}  // namespace cagent::launcher::cli
