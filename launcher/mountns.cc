#include "launcher/mountns.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <memory>
#include <set>

namespace cagent::launcher {
namespace {

// Prefixes used between the first pivot_root (into the staging tmpfs) and the second (into the
// finished root): the host's root is reachable at kOldRoot, the view being built at kNewRoot.
constexpr const char kNewRoot[] = "/newroot";
constexpr const char kOldRoot[] = "/oldroot";

// A mount destination in the view and how to populate it, before ordering and prefixing.
struct Entry {
  enum class What { kBindDir, kBindFile, kSymlink, kTmpfs, kProc, kDevpts, kHideDir, kHideFile };
  What what;
  std::string dest;    // absolute path in the view
  std::string source;  // host path (binds), link text (symlinks), options (tmpfs)
  std::uint64_t attr_set = 0;
  unsigned mode = 0755;
  std::string description;
  bool optional = false;
};

size_t Depth(const std::string& p) { return static_cast<size_t>(std::count(p.begin(), p.end(), '/')); }

bool IsUnder(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

std::string Dirname(const std::string& p) {
  const size_t slash = p.rfind('/');
  return slash == 0 ? "/" : p.substr(0, slash);
}

// realpath() of the parent directory joined with the last component: the destination for a host
// path whose leading components may be symlinks (e.g. /lib/x -> /usr/lib/x), while a symlink in the
// last component is kept as a symlink.
Result<std::string> CanonicalParent(const std::string& path) {
  const std::string dir = Dirname(path);
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(dir.c_str(), nullptr), &std::free);
  if (!real) return ErrnoError("resolve '" + dir + "'");
  std::string out(real.get());
  if (out != "/") out += "/";
  out += path.substr(path.rfind('/') + 1);
  return out;
}

// Adds the binds for one host path; ENOENT means "not on this system" and is skipped unless
// `required`.
Status AddHostPath(const std::string& requested, bool writable, bool required,
                   std::vector<Entry>& entries) {
  auto dest = CanonicalParent(requested);
  if (!dest) {
    if (!required && dest.error().err == ENOENT) return Ok{};
    return std::move(dest.error()).Context("bind " + requested);
  }
  struct stat st {};
  if (::lstat(dest->c_str(), &st) != 0) {
    if (!required && errno == ENOENT) return Ok{};
    return ErrnoError("lstat '" + *dest + "'").Context("bind " + requested);
  }
  const char* how = writable ? " read-write" : " read-only";
  if (S_ISLNK(st.st_mode)) {
    std::array<char, PATH_MAX> buf{};
    const ssize_t n = ::readlink(dest->c_str(), buf.data(), buf.size() - 1);
    if (n < 0) return ErrnoError("readlink '" + *dest + "'");
    entries.push_back({Entry::What::kSymlink, *dest, std::string(buf.data(), static_cast<size_t>(n)),
                       0, 0, "symlink " + *dest});
    return Ok{};
  }
  const std::uint64_t attrs =
      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (writable ? 0 : MOUNT_ATTR_RDONLY);
  const auto what = S_ISDIR(st.st_mode) ? Entry::What::kBindDir : Entry::What::kBindFile;
  entries.push_back({what, *dest, *dest, attrs, 0, "bind " + *dest + how});
  return Ok{};
}

void AddDev(std::vector<Entry>& entries) {
  entries.push_back({Entry::What::kTmpfs, "/dev", "mode=0755,size=64k", 0, 0, "tmpfs /dev"});
  // Device nodes cannot be created in a user namespace; bind the host's. nodev must not be set on
  // these mounts, nosuid and noexec are.
  for (const char* node : {"null", "zero", "full", "random", "urandom", "tty"}) {
    const std::string host = std::string("/dev/") + node;
    entries.push_back({Entry::What::kBindFile, host, host, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, 0,
                       "bind " + host});
  }
  entries.push_back({Entry::What::kDevpts, "/dev/pts", "newinstance,ptmxmode=0666,mode=620", 0, 0,
                     "devpts /dev/pts"});
  entries.push_back({Entry::What::kSymlink, "/dev/ptmx", "pts/ptmx", 0, 0, "symlink /dev/ptmx"});
  entries.push_back({Entry::What::kTmpfs, "/dev/shm", "mode=1777,size=64m", 0, 0, "tmpfs /dev/shm"});
  entries.push_back({Entry::What::kSymlink, "/dev/fd", "/proc/self/fd", 0, 0, "symlink /dev/fd"});
  entries.push_back({Entry::What::kSymlink, "/dev/stdin", "/proc/self/fd/0", 0, 0, "symlink"});
  entries.push_back({Entry::What::kSymlink, "/dev/stdout", "/proc/self/fd/1", 0, 0, "symlink"});
  entries.push_back({Entry::What::kSymlink, "/dev/stderr", "/proc/self/fd/2", 0, 0, "symlink"});
}

void AddProc(const LaunchSpec& spec, std::vector<Entry>& entries) {
  if (spec.disabled.Has(Layer::kPidNamespace)) {
    // A new procfs is only allowed for a pid namespace we own; without one, show the host's.
    entries.push_back({Entry::What::kBindDir, "/proc", "/proc", 0, 0, "bind host /proc"});
    return;
  }
  entries.push_back({Entry::What::kProc, "/proc", "", 0, 0, "mount /proc"});
  // Kernel knobs stay read-only even though the user namespace's root could write some of them.
  for (const char* sub : {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"}) {
    entries.push_back({Entry::What::kBindDir, sub, "", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                                          MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                       0, std::string("read-only ") + sub, /*optional=*/true});
  }
}

// Turns entries (already ordered parents-first) into ops with every path prefixed for the child.
MountPlan Lower(std::vector<Entry> entries, bool fresh_root) {
  MountPlan plan;
  plan.fresh_root = fresh_root;
  const std::string dst_prefix = fresh_root ? kNewRoot : "";
  const std::string src_prefix = fresh_root ? kOldRoot : "";
  std::set<std::string> made;  // view paths known to exist as directories
  std::vector<std::string> bound;  // bind destinations: their contents come from the host

  auto ensure_dirs = [&](const std::string& view_path, const std::string& why) {
    // Create each missing ancestor (and nothing inside a bind: those exist on the host already).
    std::string cur;
    size_t pos = 1;
    while ((pos = view_path.find('/', pos)) != std::string::npos) {
      cur = view_path.substr(0, pos);
      ++pos;
      if (made.count(cur)) continue;
      made.insert(cur);
      plan.ops.push_back({MountOp::Kind::kMkdir, dst_prefix + cur, "", "", 0, 0, 0755,
                          "create directory " + cur + " for " + why});
    }
  };

  for (auto& e : entries) {
    // An entry inside a host bind that is the same host path needs nothing: it is already there.
    const bool inside_same_bind =
        std::any_of(bound.begin(), bound.end(), [&](const std::string& b) { return IsUnder(e.dest, b); });
    if (inside_same_bind && e.what == Entry::What::kSymlink) continue;
    ensure_dirs(e.dest, e.description);
    const std::string target = dst_prefix + e.dest;
    switch (e.what) {
      case Entry::What::kBindDir:
      case Entry::What::kBindFile: {
        const bool dir = e.what == Entry::What::kBindDir;
        // A path bound onto itself exists already; every other bind needs a mount point.
        if (!made.count(e.dest) && !e.source.empty()) {
          plan.ops.push_back({dir ? MountOp::Kind::kMkdir : MountOp::Kind::kTouch, target, "", "", 0,
                              0, dir ? 0755U : 0444U, e.description, e.optional});
          if (dir) made.insert(e.dest);
        }
        // An empty source means "this view path, bound onto itself" (to change its flags).
        const std::string source = e.source.empty() ? target : src_prefix + e.source;
        plan.ops.push_back({MountOp::Kind::kBind, target, source, "", 0, e.attr_set, 0, e.description,
                            e.optional});
        if (!e.source.empty()) bound.push_back(e.dest);
        break;
      }
      case Entry::What::kSymlink:
        plan.ops.push_back({MountOp::Kind::kSymlink, target, e.source, "", 0, 0, 0, e.description});
        break;
      case Entry::What::kTmpfs:
        if (!made.count(e.dest)) {
          plan.ops.push_back({MountOp::Kind::kMkdir, target, "", "", 0, 0, 0755, e.description});
          made.insert(e.dest);
        }
        plan.ops.push_back({MountOp::Kind::kTmpfs, target, "", e.source, MS_NOSUID | MS_NODEV, 0, 0,
                            e.description});
        break;
      case Entry::What::kProc:
        if (!made.count(e.dest)) {
          plan.ops.push_back({MountOp::Kind::kMkdir, target, "", "", 0, 0, 0555, e.description});
          made.insert(e.dest);
        }
        plan.ops.push_back({MountOp::Kind::kProc, target, "", "", MS_NOSUID | MS_NODEV | MS_NOEXEC, 0,
                            0, e.description});
        break;
      case Entry::What::kDevpts:
        if (!made.count(e.dest)) {
          plan.ops.push_back({MountOp::Kind::kMkdir, target, "", "", 0, 0, 0755, e.description});
          made.insert(e.dest);
        }
        plan.ops.push_back({MountOp::Kind::kDevpts, target, "", e.source, MS_NOSUID | MS_NOEXEC, 0, 0,
                            e.description});
        break;
      case Entry::What::kHideDir:
        // An empty, read-only, mode-000 tmpfs over the directory.
        plan.ops.push_back({MountOp::Kind::kTmpfs, target, "", "mode=000,size=4k",
                            MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, 0, 0, e.description});
        break;
      case Entry::What::kHideFile:
        plan.ops.push_back({MountOp::Kind::kBind, target, src_prefix + "/dev/null", "", 0,
                            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, 0,
                            e.description});
        break;
    }
  }
  if (fresh_root) {
    // Finally the root itself becomes read-only: writes outside the workspace, /tmp and HOME fail
    // with EROFS instead of landing silently in a tmpfs.
    plan.ops.push_back({MountOp::Kind::kSetAttr, kNewRoot, "", "", 0,
                        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0,
                        "make the root read-only"});
  }
  return plan;
}

// ---- child side: syscalls only ----

int MountSetattr(const char* path, unsigned flags, std::uint64_t attr_set) {
  struct mount_attr attr {};
  attr.attr_set = attr_set;
  return static_cast<int>(::syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &attr, sizeof(attr)));
}

int PivotRoot(const char* new_root, const char* put_old) {
  return static_cast<int>(::syscall(SYS_pivot_root, new_root, put_old));
}

// Runs one op; returns 0 or an errno.
int RunOp(const MountOp& op) {
  switch (op.kind) {
    case MountOp::Kind::kMkdir:
      if (::mkdir(op.target.c_str(), op.mode) != 0 && errno != EEXIST) {
        return errno == ENOENT && op.optional ? 0 : errno;
      }
      return 0;
    case MountOp::Kind::kTouch: {
      // An existing file is the mountpoint already. Opening it for writing would fail with EROFS
      // when an earlier op made its directory read-only (a file below a write-protected tree).
      struct stat st {};
      if (::lstat(op.target.c_str(), &st) == 0) return 0;
      const int fd = ::open(op.target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, op.mode);
      if (fd < 0) return errno == EEXIST ? 0 : errno;
      ::close(fd);
      return 0;
    }
    case MountOp::Kind::kSymlink:
      if (::symlink(op.source.c_str(), op.target.c_str()) != 0 && errno != EEXIST) return errno;
      return 0;
    case MountOp::Kind::kBind:
      if (::mount(op.source.c_str(), op.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
        return errno == ENOENT && op.optional ? 0 : errno;
      }
      // mount_setattr (Linux 5.12) applies the flags to every mount in the tree; the old
      // MS_REMOUNT|MS_BIND only touched the top one, leaving submounts writable.
      if (op.attr_set != 0 && MountSetattr(op.target.c_str(), AT_RECURSIVE, op.attr_set) != 0) {
        return errno;
      }
      return 0;
    case MountOp::Kind::kTmpfs:
      if (::mount("tmpfs", op.target.c_str(), "tmpfs", op.flags, op.data.c_str()) != 0) return errno;
      return 0;
    case MountOp::Kind::kProc:
      if (::mount("proc", op.target.c_str(), "proc", op.flags, nullptr) != 0) return errno;
      return 0;
    case MountOp::Kind::kDevpts:
      if (::mount("devpts", op.target.c_str(), "devpts", op.flags, op.data.c_str()) != 0) {
        return errno;
      }
      return 0;
    case MountOp::Kind::kSetAttr:
      if (MountSetattr(op.target.c_str(), 0, op.attr_set) != 0) return errno;
      return 0;
  }
  return EINVAL;
}

}  // namespace

Result<MountPlan> PrepareMountPlan(const LaunchSpec& spec) {
  const bool fresh_root = !spec.disabled.Has(Layer::kMountView);
  std::vector<Entry> entries;
  if (fresh_root) {
    for (const auto& p : spec.read_only_paths) {
      if (auto s = AddHostPath(p, false, false, entries); !s) return s.error();
    }
    entries.push_back({Entry::What::kTmpfs, "/tmp",
                       "mode=1777,size=" + std::to_string(spec.tmp_size_bytes), 0, 0, "tmpfs /tmp"});
    entries.push_back({Entry::What::kTmpfs, spec.home,
                       "mode=0755,size=" + std::to_string(spec.home_size_bytes), 0, 0,
                       "tmpfs " + spec.home + " (HOME)"});
    for (const auto& p : spec.read_write_paths) {
      if (auto s = AddHostPath(p, true, false, entries); !s) return s.error();
    }
    if (auto s = AddHostPath(spec.workspace, spec.workspace_writable, true, entries); !s) {
      return std::move(s.error()).Context("workspace");
    }
    AddDev(entries);
    for (const auto& p : spec.hidden_paths) {
      struct stat st {};
      if (::lstat(p.c_str(), &st) != 0) continue;  // nothing to hide
      // Only what the view shows needs covering: a path outside every bind (a profile that does
      // not mount /etc, a symlink target elsewhere on the host) is invisible already, and
      // mounting over it would need directories the view does not have.
      const bool visible = std::any_of(entries.begin(), entries.end(), [&](const Entry& e) {
        const bool shows = e.what == Entry::What::kBindDir || e.what == Entry::What::kBindFile ||
                           e.what == Entry::What::kTmpfs;
        return shows && (e.dest == p || IsUnder(p, e.dest));
      });
      if (!visible) continue;
      if (S_ISLNK(st.st_mode)) continue;  // the link's target is what a bind would expose
      entries.push_back({S_ISDIR(st.st_mode) ? Entry::What::kHideDir : Entry::What::kHideFile, p, "",
                         0, 0, "hide " + p});
    }
  }
  AddProc(spec, entries);

  // Parents before children; among equals, the order above (which puts the tmpfs mounts before
  // what is bound inside them and hidden paths after what they cover).
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return Depth(a.dest) < Depth(b.dest); });
  if (fresh_root) {
    // Hidden paths must land after every bind that could cover them.
    std::stable_partition(entries.begin(), entries.end(), [](const Entry& e) {
      return e.what != Entry::What::kHideDir && e.what != Entry::What::kHideFile;
    });
  }
  return Lower(std::move(entries), fresh_root);
}

ChildResult ApplyMountView(const MountPlan& plan) {
  // Nothing we mount may propagate back to the host.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return ChildResult::Failure(ChildStep::kMountPrivate, errno);
  }
  if (!plan.fresh_root) {
    for (size_t i = 0; i < plan.ops.size(); ++i) {
      if (const int e = RunOp(plan.ops[i]); e != 0) {
        return ChildResult::Failure(ChildStep::kMountOp, e, static_cast<int>(i));
      }
    }
    return ChildResult::Success();
  }
  // Stage: a tmpfs on a host directory (visible only in this namespace) becomes the root, with the
  // host's root at /oldroot, so that binds of host paths under the staging directory (e.g. a
  // workspace in /tmp) still reach the host's files.
  if (::mount("tmpfs", plan.staging.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") != 0) {
    return ChildResult::Failure(ChildStep::kMountStaging, errno);
  }
  if (::chdir(plan.staging.c_str()) != 0 || ::mkdir("newroot", 0755) != 0 ||
      ::mkdir("oldroot", 0755) != 0) {
    return ChildResult::Failure(ChildStep::kMountStaging, errno);
  }
  if (PivotRoot(".", "oldroot") != 0 || ::chdir("/") != 0) {
    return ChildResult::Failure(ChildStep::kPivotToStaging, errno);
  }
  if (::mount("tmpfs", kNewRoot, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0) {
    return ChildResult::Failure(ChildStep::kMountNewRoot, errno);
  }
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    if (const int e = RunOp(plan.ops[i]); e != 0) {
      return ChildResult::Failure(ChildStep::kMountOp, e, static_cast<int>(i));
    }
  }
  // Detach the host's root: from here nothing in this namespace can reach it.
  if (::umount2(kOldRoot, MNT_DETACH) != 0) {
    return ChildResult::Failure(ChildStep::kDetachOldRoot, errno);
  }
  // pivot_root(".", ".") stacks the old root (the staging tmpfs) under the new one; detaching "."
  // then removes it, leaving only the view.
  if (::chdir(kNewRoot) != 0 || PivotRoot(".", ".") != 0 || ::umount2(".", MNT_DETACH) != 0 ||
      ::chdir("/") != 0) {
    return ChildResult::Failure(ChildStep::kPivotToNewRoot, errno);
  }
  return ChildResult::Success();
}

}  // namespace cagent::launcher
