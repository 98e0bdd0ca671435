// Leftovers: what a sandbox leaves behind in the host trees it could write, checked by cagent (the
// parent) before the launch and after the sandbox has exited. Two classes of trap for whatever
// runs on the host later (issue #13):
//
//   * planted repositories: an entry named `.git` that the command created or replaced below a
//     writable root (`sub/.git` with a config whose core.fsmonitor runs code, or a `gitdir:` file
//     pointing at another repository). A later `cd sub && git status` on the host would obey it.
//     They are reported, never followed: the walk opens nothing it finds by name except
//     directories (O_NOFOLLOW) and O_PATH handles of regular files.
//   * privileged files: a regular file that gained S_ISUID / S_ISGID or a security.capability
//     attribute while the sandbox ran. A root caller's sandbox is uid 0 over its files, so a
//     setuid bit there is a setuid-root executable for the host. The sweep clears the bits and
//     removes the attribute, through an O_PATH handle of the very inode it inspected, and reports
//     each file. Files that were privileged before the launch (same inode, same mode) are left
//     alone: they are the caller's.
//
// The walk is bounded (kMaxLeftoverEntries), never follows a symlink, never opens a FIFO or a
// device, and tolerates entries vanishing under it. It runs in cagent, outside the sandbox.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"

namespace cagent::launcher {

// The most entries one walk visits (over all roots); past it the walk stops and says so.
inline constexpr std::size_t kMaxLeftoverEntries = 2000000;

// What the walk records of one entry.
struct EntryId {
  dev_t dev = 0;
  ino_t ino = 0;
  mode_t mode = 0;
  off_t size = 0;
  long long mtime_ns = 0;  // NOLINT(google-runtime-int)
  bool has_capability = false;
};

// The state of the writable roots before the sandbox ran.
struct TreeSnapshot {
  std::vector<std::string> roots;
  // Every entry named ".git" (directory, file or symlink), by absolute path, roots' own included,
  // except those inside another .git directory (git's internals).
  std::map<std::string, EntryId> git_entries;
  // Directories not named .git (and not inside one) laid out like a git dir — entries HEAD and
  // objects + refs, or HEAD and commondir: what git's discovery accepts as a bare repository or a
  // worktree's git dir. By absolute path; the entry is the directory's own.
  std::map<std::string, EntryId> bare_git_dirs;
  // Regular files with S_ISUID/S_ISGID or a security.capability attribute, by absolute path.
  std::map<std::string, EntryId> privileged;
  std::size_t entries = 0;
  bool truncated = false;  // the walk stopped at kMaxLeftoverEntries
};

// Parent, before clone: walks `roots` (absolute directories; missing ones are skipped). Fails only
// when a root cannot be opened for another reason than ENOENT. `privileged_files`: record the
// privileged files too (every entry is stat'ed, .git directories included); without it only the
// `.git` entries are recorded, from directory entry types, which is several times cheaper.
Result<TreeSnapshot> SnapshotTrees(const std::vector<std::string>& roots, bool privileged_files,
                                   std::size_t max_entries = kMaxLeftoverEntries);

struct LeftoverReport {
  // One line per finding, for stderr and the run record (paths escaped by the caller).
  std::vector<std::string> findings;
  // Absolute paths of `.git` entries created or replaced while the sandbox ran.
  std::vector<std::string> planted_repositories;
  // Absolute paths of files whose privilege bits or capability attribute were removed.
  std::vector<std::string> cleared_files;
  // With `report_repositories`: every git dir in the trees after the sandbox, by absolute path —
  // `.git` directories and directories laid out like one (TreeSnapshot::bare_git_dirs) — and
  // every `.git` that is a regular file (a `gitdir:` link), for the git config guard.
  std::vector<std::string> git_dirs;
  std::vector<std::string> gitdir_links;
  // Every `.git` that is a symbolic link (git follows it to a git dir), for the same guard.
  std::vector<std::string> gitdir_symlinks;
};

// Parent, after the sandbox has exited: walks `before.roots` again. `report_repositories`: list
// `.git` entries that are new or changed since `before`. `clear_privileges`: strip S_ISUID/S_ISGID
// and security.capability from regular files that were not privileged in `before`.
LeftoverReport SweepLeftovers(const TreeSnapshot& before, bool report_repositories,
                              bool clear_privileges, std::size_t max_entries = kMaxLeftoverEntries);

}  // namespace cagent::launcher
