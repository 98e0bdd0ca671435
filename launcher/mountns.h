// Mount namespace: the sandbox's view of the filesystem.
//
// prepare (parent, before clone): PrepareMountPlan() looks at the host (lstat, readlink, realpath)
//   and turns the spec into a flat list of MountOps whose strings are all built in advance.
// apply-in-child: ApplyMountView() performs the plan with syscalls only — no allocation, no
//   exceptions — in the child that owns the new user and mount namespaces.
//
// The view: a fresh tmpfs root (read-only once built), read-only binds of the spec's system paths
// (symlinks such as /bin -> usr/bin re-created), the workspace read-write at its own path, private
// tmpfs /tmp and HOME, a new /proc (with /proc/sys and friends read-only), a minimal /dev (null,
// zero, full, random, urandom, tty, a private devpts instance with ptmx, shm), the spec's hidden
// paths covered by empty read-only mounts. Every mount is nosuid; every mount except the bound
// device nodes and devpts is nodev. The old root is detached after pivot_root.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/child_report.h"
#include "launcher/launch_spec.h"

namespace cagent::launcher {

struct MountOp {
  enum class Kind : std::uint8_t {
    kMkdir,    // mkdir(target, mode); EEXIST is fine
    kTouch,    // create an empty file as a mount point; EEXIST is fine
    kSymlink,  // symlink(source, target)
    kBind,     // bind source on target (recursive), then mount_setattr(attr_set, recursive)
    kTmpfs,    // tmpfs with `data` options and `flags`
    kProc,     // a new procfs instance
    kDevpts,   // a new devpts instance with `data` options
    kSetAttr,  // mount_setattr(target, attr_set), not recursive
  };
  Kind kind;
  std::string target;  // full path in the child's namespace at the time the op runs
  std::string source;  // bind source / symlink text
  std::string data;    // filesystem options
  unsigned long flags = 0;       // NOLINT(google-runtime-int): mount(2)'s type
  std::uint64_t attr_set = 0;    // MOUNT_ATTR_* bits
  unsigned mode = 0755;
  std::string description;  // what a user is told when this op fails, e.g. "bind /usr read-only"
  bool optional = false;    // ENOENT from the mount is not an error (kernel-dependent /proc files)
};

struct MountPlan {
  // False when the mount view layer is switched off: the host root stays, only /proc is replaced.
  bool fresh_root = true;
  // Host directory the staging tmpfs is mounted on (inside the private mount namespace only).
  std::string staging = "/tmp";
  std::vector<MountOp> ops;
};

// Prepare: builds the plan for `spec`. Fails if the workspace or a required path is unusable.
Result<MountPlan> PrepareMountPlan(const LaunchSpec& spec);

// Apply-in-child: builds the view. Async-signal-safe: performs only syscalls on `plan`'s
// preallocated strings. On failure the ChildResult names the step and, for kMountOp, the op index.
ChildResult ApplyMountView(const MountPlan& plan);

}  // namespace cagent::launcher
