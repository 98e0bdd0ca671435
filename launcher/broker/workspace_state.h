// Workspace state digest: what loop detection compares to tell "the same call again, to the same
// workspace" from "the same call after something changed". Runs in cagent (trusted, on the host),
// on the broker's thread; synchronous, bounded.
//
// The workspace is hostile (the agent and the commands it ran wrote it), so the walk only looks:
// directories are opened with O_NOFOLLOW | O_DIRECTORY | O_NONBLOCK beneath the fd of their
// parent, every entry is fstatat(AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT)'d, a symlink's text is read
// with readlinkat and never followed, and no file is opened or read: a FIFO, a device, a socket or
// a /dev/zero look-alike costs one stat. The digest covers, per entry, its path relative to the
// root, type, mode, size, mtime and ctime (ns), inode and link count, and a symlink's text; entries
// are taken in sorted name order so the digest does not depend on readdir order.
//
// Bounded: at most `max_entries` entries are stat'ed and at most `max_depth` levels descended;
// what lies beyond is not walked, and that is said (WorkspaceState::truncated, ::not_walked) and
// folded into the digest, never skipped silently. Other filesystems mounted inside the root are
// recorded as an entry but not entered (counted in not_walked).
//
// Not a security boundary by itself: a collision or a missed change (two writes of the same size
// within one timestamp tick) can only make loop detection refuse a call that might have had a
// different answer; it can never make a real repeat look like progress without a real change.
#pragma once

#include <cstddef>
#include <string>

namespace cagent::launcher::broker {

struct WorkspaceStateLimits {
  std::size_t max_entries = 100000;
  std::size_t max_depth = 64;
};

struct WorkspaceState {
  std::string digest;          // lowercase hex SHA-256 over everything below
  std::size_t entries = 0;     // entries stat'ed (the root included)
  bool truncated = false;      // max_entries was reached; the rest was not looked at
  std::size_t not_walked = 0;  // directories not entered: too deep, another filesystem, or
                               // could not be opened (errno folded into the digest)
  std::string error;           // set when the root itself could not be opened ("open /w: ENOENT")
};

// The state of the tree at `root` (an absolute host path). Never throws; a root that cannot be
// opened gives a digest of the error (stable while the error is), with `error` set.
WorkspaceState DigestWorkspaceState(const std::string& root,
                                    const WorkspaceStateLimits& limits = {});

}  // namespace cagent::launcher::broker
