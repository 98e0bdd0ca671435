// Profile caches on the host: where a profile's `cache ~/PATH` directories live between runs, and
// the listing and clearing behind `cagent cache ls|clear`. Runs in cagent (trusted).
//
// Layout: $XDG_CACHE_HOME/cagent/caches/PROFILE@REPO/ESCAPED, one flat directory per cache path,
// where REPO is the per-repository key of the work the sandbox is for
// (launcher/profile/repo_profiles.h, CacheScope: one repository's setup never fills another's
// caches, issue 32) and ESCAPED is the path below HOME with '%' written %25 and '/' written %2F
// (".cache%2Fpip"). Without a key (no directory to key on) the directory is PROFILE alone, as
// before issue 32. Flat on purpose: the sandboxes that write a cache see only its own directory,
// never its parent, so no sandbox can turn one cache's directory into a link that another cache's
// path would go through.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace cagent::launcher {

// $XDG_CACHE_HOME/cagent when XDG_CACHE_HOME is absolute, else ~/.cache/cagent, or
// /tmp/cagent-cache-UID without a home. Not created here.
[[nodiscard]] std::string CacheRoot();

// A profile name as a directory name: [A-Za-z0-9._-] kept, anything else '_', never "." or "..";
// "" for an empty name.
[[nodiscard]] std::string CacheProfileDirName(const std::string& profile);

// ".cache/pip" -> ".cache%2Fpip" (and back).
[[nodiscard]] std::string EscapeCachePath(const std::string& rel);
[[nodiscard]] std::string UnescapeCachePath(const std::string& name);

// The directory name of `profile`'s caches for the repository key `scope` ("" = none):
// PROFILE@SCOPE, both through CacheProfileDirName.
[[nodiscard]] std::string CacheDirName(const std::string& profile, const std::string& scope);

// The directory of `profile`'s cache `rel` for the repository key `scope` under `root`
// (CacheRoot()), created (mode 0700, every level) when absent. Fails when a level is not a
// directory owned by the caller (a symlink included): cagent never binds what a link points at.
Result<std::string> EnsureCacheDir(const std::string& root, const std::string& profile,
                                   const std::string& scope, const std::string& rel);

struct CacheEntry {
  std::string profile;     // the profile's part of the directory name under caches/
  std::string repository;  // its repository key ("" for a directory made without one)
  std::string path;        // "~/.npm"
  std::string dir;         // its host directory
  std::uint64_t bytes = 0;
  std::uint64_t files = 0;
  bool complete = true;  // false: the walk stopped at a limit or an unreadable directory
};

// Every cache under `root`, sorted by (profile, path). Sizes are counted without following links.
Result<std::vector<CacheEntry>> ListCaches(const std::string& root);

// Removes `profile`'s caches ("" = every profile's), for every repository, under `root`, without
// following links. Returns how many cache directories were removed.
Result<std::size_t> ClearCaches(const std::string& root, const std::string& profile);

}  // namespace cagent::launcher
