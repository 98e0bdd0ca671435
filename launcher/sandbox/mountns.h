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
//
// The prepare-to-mount race. Prepare decides from what it sees on the host; the child mounts
// later, and a concurrent writer on the host (another sandbox or an agent sharing the workspace)
// may swap a path component for a symlink, or rename a directory and put another in its place, in
// between. Without a check a bind source would then come from elsewhere on the host (a `sub ->
// ../home` link in the workspace turns a read-write self-bind into the caller's real HOME), and a
// hide or read-only bind would land on a different file than the one checked, leaving the real one
// visible or writable. So:
//   - prepare records the identity (st_dev, st_ino, file type) of every bind source and of every
//     target inside a host-bound tree (hidden paths, self-binds such as the git guard's), from
//     lstat of the canonical path (the last component is never a symlink for these ops);
//   - every path the plan holds is canonical, so the child resolves each one with
//     openat2(RESOLVE_NO_SYMLINKS): meeting any symlink means something changed;
//   - the child mounts by file descriptor, never by path string: a bind is open_tree(src_fd,
//     OPEN_TREE_CLONE) + move_mount onto the target's fd, a filesystem is mounted on a private
//     scratch point of the staging root and moved onto the target's fd; directories, files and
//     symlinks are created with *at() calls beneath the parent's fd. What gets mounted on is the
//     very inode whose identity was compared, so no window is left between check and mount.
// A mismatch fails the launch at ChildStep::kMountChanged, naming the op. Mounts cannot be made
// from file descriptors the parent opened before clone: open_tree(OPEN_TREE_CLONE) of a path in
// another mount namespace fails with EINVAL (checked on 6.18), hence identities rather than fds.
// With the mount view switched off (only /proc is replaced, on the host's tree) binds still go by
// fd; /proc itself is mounted by path, as nobody but root can change the host's /proc.
// Not covered, because it happens after the view is built: since Linux 3.18 a process in another
// mount namespace may unlink or rename over a path that is a mount point only in ours, which
// detaches our mount (a hidden file or a read-only placeholder in a shared workspace). Inside the
// sandbox those paths are local mount points (EBUSY); only processes outside it that can write the
// workspace — the caller's own, or a sandbox without the same mounts — can do that.
// A host layout that needs a symlink on the way to a mount point (HOME below a symlinked /home
// that the profile also binds) fails closed at kMountChanged (ELOOP) rather than being followed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/sandbox/child_report.h"
#include "launcher/sandbox/launch_spec.h"

namespace cagent::launcher {

// What the parent saw at a path: enough to tell that the child reached the same file.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  mode_t type = 0;  // st_mode & S_IFMT; 0 = not recorded (nothing to compare)
  [[nodiscard]] bool Known() const { return type != 0; }
};

struct MountOp {
  enum class Kind : std::uint8_t {
    kMkdir,      // mkdir(target, mode); EEXIST is fine
    kTouch,      // create an empty file as a mount point; EEXIST is fine
    kSymlink,    // symlink(source, target)
    kBind,       // bind source on target (recursive), then mount_setattr(attr_set, recursive)
    kTmpfs,      // tmpfs with `data` options and `flags`
    kProc,       // a new procfs instance
    kDevpts,     // a new devpts instance with `data` options
    kSetAttr,    // mount_setattr(target, attr_set), not recursive
    kOverlay,    // overlayfs (`data`) over `source` read-only, its upper layer on a tmpfs (`layer`)
    kWriteFile,  // create target (O_EXCL, never through a link) with `mode`, write `source` to it
  };
  Kind kind;
  std::string target;          // full path in the child's namespace at the time the op runs
  std::string source;          // bind source / symlink text
  std::string data;            // filesystem options
  unsigned long flags = 0;     // NOLINT(google-runtime-int): mount(2)'s type
  std::uint64_t attr_set = 0;  // MOUNT_ATTR_* bits
  unsigned mode = 0755;
  std::string description;  // what a user is told when this op fails, e.g. "bind /usr read-only"
  bool optional = false;    // ENOENT from the mount is not an error (kernel-dependent /proc files)
  // kBind: the host file at `source` as prepare saw it (unknown for a view path bound onto itself).
  FileIdentity source_id{};
  // The host file `target` must still be before it is mounted on, when the target lies inside a
  // host-bound tree (hidden paths, self-binds); unknown for mount points cagent creates itself.
  FileIdentity target_id{};
  // dirname / basename of `target`, for the ops that create it beneath the parent's fd.
  std::string parent{};
  std::string name{};
  // kOverlay: the staging root's directory where the tmpfs holding the upper and work directories
  // is mounted, and that tmpfs's options.
  std::string layer{};
  std::string layer_options{};
};

struct MountPlan {
  // False when the mount view layer is switched off: the host root stays, only /proc is replaced.
  bool fresh_root = true;
  // Host directory the staging tmpfs is mounted on (inside the private mount namespace only).
  std::string staging = "/tmp";
  // Directory of the staging root where filesystems are mounted before being moved onto their
  // verified target (fresh_root only; empty: mount by path).
  std::string scratch;
  std::vector<MountOp> ops;
  // Twin tests only (tests/launcher/sandbox/mount_race_test.cc): false makes the child resolve
  // paths as mount(2) does (following symlinks) and skip the identity checks, to show the race they
  // close. cagent never sets it.
  bool verify_paths = true;
};

// Prepare: builds the plan for `spec`. Fails if the workspace or a required path is unusable.
// Records the identities described above; every target and bind source in the plan is canonical
// (hidden paths are canonicalised through their parent directory like the bound paths).
Result<MountPlan> PrepareMountPlan(const LaunchSpec& spec);

// Apply-in-child: builds the view. Async-signal-safe: performs only syscalls on `plan`'s
// preallocated strings; every fd it opens is closed before it returns. On failure the ChildResult
// names the step and, for kMountOp and kMountChanged, the op index in `detail`. kMountChanged:
// a path resolved through a symlink (err ELOOP), vanished (ENOENT) or is another file than prepare
// saw (ESTALE).
ChildResult ApplyMountView(const MountPlan& plan);

}  // namespace cagent::launcher
