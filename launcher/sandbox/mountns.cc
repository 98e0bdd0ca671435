#include "launcher/sandbox/mountns.h"

#include <fcntl.h>
#include <linux/openat2.h>
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

#include "common/beneath.h"
#include "common/unique_fd.h"

namespace cagent::launcher {
namespace {

// Prefixes used between the first pivot_root (into the staging tmpfs) and the second (into the
// finished root): the host's root is reachable at kOldRoot, the view being built at kNewRoot.
constexpr const char kNewRoot[] = "/newroot";
constexpr const char kOldRoot[] = "/oldroot";
// Where filesystems are mounted before being moved onto their verified target: a directory of the
// staging root, which no other process can reach (it exists only in this mount namespace).
constexpr const char kScratch[] = "/scratch";

// A mount destination in the view and how to populate it, before ordering and prefixing.
struct Entry {
  enum class What {
    kBindDir,
    kBindFile,
    kSymlink,
    kTmpfs,
    kProc,
    kDevpts,
    kHideDir,
    kHideFile,
    kBindOver,  // LaunchSpec::file_binds: a host file over an existing file of the view
    kOverlay,   // DirBind::scratch: the host directory read-only under a private writable layer
    kHomeFile,  // LaunchSpec::home_files: a file written into the private HOME (source: content)
  };
  What what;
  std::string dest;    // absolute path in the view
  std::string source;  // host path (binds), link text (symlinks), options (tmpfs)
  std::uint64_t attr_set = 0;
  unsigned mode = 0755;
  std::string description;
  bool optional = false;
  FileIdentity id{};  // what prepare saw at `dest` on the host (binds: the source; hides: the path)
  FileIdentity dest_id{};       // kBindOver: what prepare saw at `dest`
  std::string layer_options{};  // kOverlay: the upper layer's tmpfs options
};

// A path in overlayfs's mount options: ',' ends an option and ':' separates lower layers unless
// escaped with '\\' (as is '\\' itself).
std::string OverlayPath(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == ',' || c == ':' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

FileIdentity IdentityOf(const struct stat& st) {
  return {st.st_dev, st.st_ino, st.st_mode & S_IFMT};
}

FileIdentity LstatIdentity(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  return IdentityOf(st);
}

size_t Depth(const std::string& p) {
  return static_cast<size_t>(std::count(p.begin(), p.end(), '/'));
}

bool IsUnder(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
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
    entries.push_back({Entry::What::kSymlink, *dest,
                       std::string(buf.data(), static_cast<size_t>(n)), 0, 0, "symlink " + *dest});
    return Ok{};
  }
  const std::uint64_t attrs =
      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (writable ? 0 : MOUNT_ATTR_RDONLY);
  const auto what = S_ISDIR(st.st_mode) ? Entry::What::kBindDir : Entry::What::kBindFile;
  // The identity the child compares with what it reaches (see mountns.h, the race).
  entries.push_back({what, *dest, *dest, attrs, 0, "bind " + *dest + how, false, IdentityOf(st)});
  return Ok{};
}

void AddDev(std::vector<Entry>& entries) {
  entries.push_back({Entry::What::kTmpfs, "/dev", "mode=0755,size=64k", 0, 0, "tmpfs /dev"});
  // Device nodes cannot be created in a user namespace; bind the host's. nodev must not be set on
  // these mounts, nosuid and noexec are.
  for (const char* node : {"null", "zero", "full", "random", "urandom", "tty"}) {
    const std::string host = std::string("/dev/") + node;
    entries.push_back({Entry::What::kBindFile, host, host, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, 0,
                       "bind " + host, false, LstatIdentity(host)});
  }
  entries.push_back({Entry::What::kDevpts, "/dev/pts", "newinstance,ptmxmode=0666,mode=620", 0, 0,
                     "devpts /dev/pts"});
  entries.push_back({Entry::What::kSymlink, "/dev/ptmx", "pts/ptmx", 0, 0, "symlink /dev/ptmx"});
  entries.push_back(
      {Entry::What::kTmpfs, "/dev/shm", "mode=1777,size=64m", 0, 0, "tmpfs /dev/shm"});
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
    entries.push_back({Entry::What::kBindDir, sub, "",
                       MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                       0, std::string("read-only ") + sub, /*optional=*/true});
  }
}

// Turns entries (already ordered parents-first) into ops with every path prefixed for the child.
// `dev_null` is the host's /dev/null as prepare saw it (the source of file hides).
// The lowering of one plan: the state the entries share (which view directories exist, which
// paths are host binds, which mounts show host files) and one method per kind of entry.
class Lowering {
 public:
  Lowering(bool fresh_root, const FileIdentity& dev_null)
      : dst_prefix_(fresh_root ? kNewRoot : ""),
        src_prefix_(fresh_root ? kOldRoot : ""),
        dev_null_(dev_null) {
    plan_.fresh_root = fresh_root;
    if (fresh_root) plan_.scratch = kScratch;
    // Without a fresh root every path is the host's.
    if (!fresh_root) regions_.emplace_back("/", true);
  }

  void Add(const Entry& e) {
    // An entry inside a host bind that is the same host path needs nothing: it is already there.
    const bool inside_same_bind = std::any_of(
        bound_.begin(), bound_.end(), [&](const std::string& b) { return IsUnder(e.dest, b); });
    if (inside_same_bind && e.what == Entry::What::kSymlink) return;
    EnsureDirs(e.dest, e.description);
    const std::string target = dst_prefix_ + e.dest;
    switch (e.what) {
      case Entry::What::kBindDir:
      case Entry::What::kBindFile:
        Bind(e, target);
        break;
      case Entry::What::kSymlink:
        plan_.ops.push_back(
            {MountOp::Kind::kSymlink, target, e.source, "", 0, 0, 0, e.description});
        break;
      case Entry::What::kOverlay:
        Overlay(e, target);
        break;
      case Entry::What::kTmpfs:
        NewFilesystem(e, target, 0755,
                      {MountOp::Kind::kTmpfs, target, "", e.source, MS_NOSUID | MS_NODEV, 0, 0,
                       e.description});
        break;
      case Entry::What::kProc:
        NewFilesystem(e, target, 0555,
                      {MountOp::Kind::kProc, target, "", "", MS_NOSUID | MS_NODEV | MS_NOEXEC, 0, 0,
                       e.description});
        break;
      case Entry::What::kDevpts:
        NewFilesystem(e, target, 0755,
                      {MountOp::Kind::kDevpts, target, "", e.source, MS_NOSUID | MS_NOEXEC, 0, 0,
                       e.description});
        break;
      case Entry::What::kHideDir:
        HideDir(e, target);
        break;
      case Entry::What::kBindOver:
        BindOver(e, target);
        break;
      case Entry::What::kHideFile:
        HideFile(e, target);
        break;
      case Entry::What::kHomeFile:
        plan_.ops.push_back(
            {MountOp::Kind::kWriteFile, target, e.source, "", 0, 0, e.mode, e.description});
        break;
    }
  }

  MountPlan Finish() && {
    if (plan_.fresh_root) {
      // Finally the root itself becomes read-only: writes outside the workspace, /tmp and HOME
      // fail with EROFS instead of landing silently in a tmpfs.
      plan_.ops.push_back({MountOp::Kind::kSetAttr, kNewRoot, "", "", 0,
                           MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0,
                           "make the root read-only"});
    }
    for (auto& op : plan_.ops) {
      const size_t slash = op.target.rfind('/');
      op.parent = slash == 0 ? "/" : op.target.substr(0, slash);
      op.name = op.target.substr(slash + 1);
    }
    return std::move(plan_);
  }

 private:
  // Whether what `dest` shows comes from the host: its innermost covering mount is a host bind,
  // so prepare's identity of it is what the child must find there.
  bool HostBacked(const std::string& dest) const {
    size_t best = 0;
    bool host = false;
    for (const auto& [d, h] : regions_) {
      const bool covers = d == "/" || d == dest || IsUnder(dest, d);
      if (covers && d.size() >= best) {
        best = d.size();
        host = h;
      }
    }
    return host;
  }

  // Creates each missing ancestor of `view_path` (and nothing inside a bind: those exist on the
  // host already).
  void EnsureDirs(const std::string& view_path, const std::string& why) {
    std::string cur;
    size_t pos = 1;
    while ((pos = view_path.find('/', pos)) != std::string::npos) {
      cur = view_path.substr(0, pos);
      ++pos;
      if (made_.count(cur)) continue;
      made_.insert(cur);
      plan_.ops.push_back({MountOp::Kind::kMkdir, dst_prefix_ + cur, "", "", 0, 0, 0755,
                           "create directory " + cur + " for " + why});
    }
  }

  // The mount point of a new filesystem or an overlay, unless made already.
  void MountPointDir(const Entry& e, const std::string& target, unsigned mode) {
    if (made_.count(e.dest)) return;
    plan_.ops.push_back({MountOp::Kind::kMkdir, target, "", "", 0, 0, mode, e.description});
    made_.insert(e.dest);
  }

  void Bind(const Entry& e, const std::string& target) {
    const bool dir = e.what == Entry::What::kBindDir;
    // A path bound onto itself exists already; every other bind needs a mount point.
    if (!made_.count(e.dest) && !e.source.empty()) {
      plan_.ops.push_back({dir ? MountOp::Kind::kMkdir : MountOp::Kind::kTouch, target, "", "", 0,
                           0, dir ? 0755U : 0444U, e.description, e.optional});
      if (dir) made_.insert(e.dest);
    }
    // An empty source means "this view path, bound onto itself" (to change its flags).
    const std::string source = e.source.empty() ? target : src_prefix_ + e.source;
    MountOp op{MountOp::Kind::kBind, target, source,        "",        0,
               e.attr_set,           0,      e.description, e.optional};
    if (!e.source.empty()) {
      op.source_id = e.id;
      // Sources are bound at their own path: inside a host-bound tree the target is the same
      // host file (the git guard's self-binds, a read-only path inside the workspace).
      if (HostBacked(e.dest)) op.target_id = e.dest_id.Known() ? e.dest_id : e.id;
      bound_.push_back(e.dest);
    }
    plan_.ops.push_back(std::move(op));
    regions_.emplace_back(e.dest, !e.source.empty() || HostBacked(e.dest));
  }

  void Overlay(const Entry& e, const std::string& target) {
    MountPointDir(e, target, 0755);
    // The layer's tmpfs is mounted on a directory of the staging root, which only this mount
    // namespace has and which goes with it; the overlay keeps its own reference to it.
    const std::string layer = "/cagent-layer-" + std::to_string(++layers_);
    MountOp op{MountOp::Kind::kOverlay,
               target,
               src_prefix_ + e.source,
               "lowerdir=" + OverlayPath(src_prefix_ + e.source) + ",upperdir=" + layer +
                   "/upper,workdir=" + layer + "/work",
               MS_NOSUID | MS_NODEV,
               0,
               0,
               e.description};
    op.source_id = e.id;
    op.layer = layer;
    op.layer_options = e.layer_options;
    plan_.ops.push_back(std::move(op));
    // Not the host's files any more (overlayfs reports its own device): hides below it are
    // made without an identity check, like those below a tmpfs.
    regions_.emplace_back(e.dest, false);
  }

  // A tmpfs, procfs or devpts instance on a directory of its own.
  void NewFilesystem(const Entry& e, const std::string& target, unsigned mode, MountOp op) {
    MountPointDir(e, target, mode);
    plan_.ops.push_back(std::move(op));
    regions_.emplace_back(e.dest, false);
  }

  void HideDir(const Entry& e, const std::string& target) {
    // An empty, read-only, mode-000 tmpfs over the directory, which must still be the one
    // prepare looked at (a renamed directory with a new one in its place is not).
    MountOp op{MountOp::Kind::kTmpfs,
               target,
               "",
               "mode=000,size=4k",
               MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
               0,
               0,
               e.description};
    if (HostBacked(e.dest)) op.target_id = e.id;
    plan_.ops.push_back(std::move(op));
    regions_.emplace_back(e.dest, false);
  }

  void BindOver(const Entry& e, const std::string& target) {
    MountOp op{MountOp::Kind::kBind,
               target,
               src_prefix_ + e.source,
               "",
               0,
               MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
               0,
               e.description};
    op.source_id = e.id;
    if (HostBacked(e.dest)) op.target_id = e.dest_id;
    plan_.ops.push_back(std::move(op));
    regions_.emplace_back(e.dest, false);
  }

  void HideFile(const Entry& e, const std::string& target) {
    MountOp op{MountOp::Kind::kBind,
               target,
               src_prefix_ + "/dev/null",
               "",
               0,
               MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
               0,
               e.description};
    op.source_id = dev_null_;
    if (HostBacked(e.dest)) op.target_id = e.id;
    plan_.ops.push_back(std::move(op));
    regions_.emplace_back(e.dest, false);
  }

  const std::string dst_prefix_;
  const std::string src_prefix_;
  const FileIdentity& dev_null_;
  MountPlan plan_;
  std::set<std::string> made_;      // view paths known to exist as directories
  std::vector<std::string> bound_;  // bind destinations: their contents come from the host
  std::size_t layers_ = 0;          // kOverlay ops so far, naming their layer directories
  // Every mount so far, in order, with whether what it shows comes from the host (HostBacked).
  std::vector<std::pair<std::string, bool>> regions_;
};

MountPlan Lower(const std::vector<Entry>& entries, bool fresh_root, const FileIdentity& dev_null) {
  Lowering lowering(fresh_root, dev_null);
  for (const Entry& e : entries) lowering.Add(e);
  return std::move(lowering).Finish();
}

// ---- child side: syscalls only ----

int PivotRoot(const char* new_root, const char* put_old) {
  return static_cast<int>(::syscall(SYS_pivot_root, new_root, put_old));
}

// What one op came to: done (err 0), or failed at `step` with `err`.
struct OpStatus {
  int err = 0;
  ChildStep step = ChildStep::kMountOp;
  bool skipped = false;  // an optional op whose path does not exist
};

OpStatus Done() { return {}; }
OpStatus Failed(int err) { return {err, ChildStep::kMountOp}; }
OpStatus Changed(int err) { return {err, ChildStep::kMountChanged}; }
OpStatus Skipped() { return {0, ChildStep::kMountOp, true}; }

// Closes an fd opened by the child on every return path; no allocation.
class ChildFd {
 public:
  ChildFd() = default;
  explicit ChildFd(int fd) : fd_(fd) {}
  ChildFd(const ChildFd&) = delete;
  ChildFd& operator=(const ChildFd&) = delete;
  ~ChildFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// Opens `path` as an O_PATH fd. With `verify`, no symlink may be met on the way, the trailing
// component included: the plan's paths are canonical, so a symlink is a swap (or a host layout
// prepare could not canonicalise) and the op fails at kMountChanged with ELOOP; a path prepare saw
// (`id` known) that is gone fails there with ENOENT, one that is another file with ESTALE.
// Without `verify` (twin tests) the path resolves as mount(2) resolves it.
OpStatus OpenChecked(const char* path, const FileIdentity& id, bool verify, bool optional,
                     int& fd_out) {
  struct open_how how {};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = verify ? RESOLVE_NO_SYMLINKS : 0;
  const int fd = static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how)));
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT && optional) return Skipped();
    if (verify && (e == ELOOP || (e == ENOENT && id.Known()))) return Changed(e);
    return Failed(e);
  }
  fd_out = fd;
  if (verify && id.Known()) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return Failed(errno);
    if (st.st_dev != id.dev || st.st_ino != id.ino || (st.st_mode & S_IFMT) != id.type) {
      return Changed(ESTALE);
    }
  }
  return Done();
}

int MoveMount(int from_dfd, const char* from, int to_fd, unsigned flags) {
  return static_cast<int>(
      ::syscall(SYS_move_mount, from_dfd, from, to_fd, "", flags | MOVE_MOUNT_T_EMPTY_PATH));
}

// Creates op.target (a directory, an empty file or a symlink) beneath its parent's fd, so a
// swapped parent cannot redirect the creation elsewhere on the host.
OpStatus CreateOp(const MountOp& op, bool verify) {
  int raw = -1;
  const OpStatus opened = OpenChecked(op.parent.c_str(), FileIdentity{}, verify, op.optional, raw);
  ChildFd parent(raw);
  if (opened.err != 0 || opened.skipped) return opened;
  const char* name = op.name.c_str();
  switch (op.kind) {
    case MountOp::Kind::kMkdir:
      if (::mkdirat(parent.get(), name, op.mode) != 0 && errno != EEXIST) {
        return errno == ENOENT && op.optional ? Done() : Failed(errno);
      }
      return Done();
    case MountOp::Kind::kTouch: {
      // An existing file is the mountpoint already. Opening it for writing would fail with EROFS
      // when an earlier op made its directory read-only (a file below a write-protected tree).
      struct stat st {};
      if (::fstatat(parent.get(), name, &st, AT_SYMLINK_NOFOLLOW) == 0) return Done();
      const int fd = ::openat(parent.get(), name,
                              O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, op.mode);
      if (fd < 0) return errno == EEXIST ? Done() : Failed(errno);
      ::close(fd);
      return Done();
    }
    case MountOp::Kind::kSymlink:
      if (::symlinkat(op.source.c_str(), parent.get(), name) != 0 && errno != EEXIST) {
        return Failed(errno);
      }
      return Done();
    case MountOp::Kind::kWriteFile: {
      // A new file (never one that exists, never through a link), its mode set exactly (the
      // umask would take bits away), then its content.
      ChildFd fd(::openat(parent.get(), name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                          op.mode));
      if (fd.get() < 0) return Failed(errno);
      if (::fchmod(fd.get(), op.mode) != 0) return Failed(errno);
      const char* data = op.source.data();
      size_t left = op.source.size();
      while (left > 0) {
        const ssize_t n = ::write(fd.get(), data, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return Failed(n < 0 ? errno : EIO);
        data += n;
        left -= static_cast<size_t>(n);
      }
      return Done();
    }
    default:
      return Failed(EINVAL);
  }
}

// A bind: the source opened and checked, cloned (recursively) from that fd, given its attributes
// while still detached, and moved onto the target's checked fd.
OpStatus BindOp(const MountOp& op, bool verify) {
  int raw = -1;
  const OpStatus src_opened =
      OpenChecked(op.source.c_str(), op.source_id, verify, op.optional, raw);
  ChildFd src(raw);
  if (src_opened.err != 0 || src_opened.skipped) return src_opened;
  ChildFd tree(static_cast<int>(
      ::syscall(SYS_open_tree, src.get(), "",
                OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE)));
  if (tree.get() < 0) return Failed(errno);
  if (verify && op.source_id.Known()) {
    // What will be mounted is the clone's root: it must be the file prepare saw.
    struct stat st {};
    if (::fstat(tree.get(), &st) != 0) return Failed(errno);
    if (st.st_dev != op.source_id.dev || st.st_ino != op.source_id.ino) return Changed(ESTALE);
  }
  // mount_setattr (Linux 5.12) applies the flags to every mount in the tree; the old
  // MS_REMOUNT|MS_BIND only touched the top one, leaving submounts writable. Set before the tree
  // is attached, so it is never visible with weaker flags.
  if (op.attr_set != 0) {
    struct mount_attr attr {};
    attr.attr_set = op.attr_set;
    if (::syscall(SYS_mount_setattr, tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
                  sizeof(attr)) != 0) {
      return Failed(errno);
    }
  }
  raw = -1;
  const OpStatus dst_opened =
      OpenChecked(op.target.c_str(), op.target_id, verify, op.optional, raw);
  ChildFd dst(raw);
  if (dst_opened.err != 0 || dst_opened.skipped) return dst_opened;
  if (MoveMount(tree.get(), "", dst.get(), MOVE_MOUNT_F_EMPTY_PATH) != 0) return Failed(errno);
  return Done();
}

// A new filesystem instance (tmpfs, proc, devpts). With a scratch point it is mounted there and
// moved onto the target's checked fd; without one (no fresh root: /proc on the host's tree) by
// path.
OpStatus FilesystemOp(const MountOp& op, const char* scratch, bool verify) {
  const char* source = "tmpfs";
  const char* type = "tmpfs";
  const void* data = op.data.c_str();
  if (op.kind == MountOp::Kind::kProc) {
    source = type = "proc";
    data = nullptr;
  } else if (op.kind == MountOp::Kind::kDevpts) {
    source = type = "devpts";
  }
  if (scratch == nullptr) {
    if (::mount(source, op.target.c_str(), type, op.flags, data) != 0) return Failed(errno);
    return Done();
  }
  int raw = -1;
  const OpStatus opened = OpenChecked(op.target.c_str(), op.target_id, verify, op.optional, raw);
  ChildFd dst(raw);
  if (opened.err != 0 || opened.skipped) return opened;
  if (::mount(source, scratch, type, op.flags, data) != 0) return Failed(errno);
  if (MoveMount(AT_FDCWD, scratch, dst.get(), 0) != 0) return Failed(errno);
  return Done();
}

// DirBind::scratch (issue 32): a tmpfs of its own on op.layer (a directory of the staging root,
// created here) holds overlayfs's upper and work directories; overlayfs over the host directory
// (checked to be the one prepare saw) is mounted on the scratch point and moved onto the target's
// checked fd. overlayfs takes its layers by path: the lower one is a cache directory cagent made
// (0700, the caller's, never a link: launcher/profile/caches.h) that no sandbox sees the parent of,
// so nothing inside a sandbox can swap it between the check and the mount.
OpStatus OverlayOp(const MountOp& op, const char* scratch, bool verify) {
  if (scratch == nullptr) return Failed(EINVAL);
  int raw = -1;
  const OpStatus lower_opened = OpenChecked(op.source.c_str(), op.source_id, verify, false, raw);
  ChildFd lower(raw);
  if (lower_opened.err != 0) return lower_opened;
  if (::mkdir(op.layer.c_str(), 0700) != 0) return Failed(errno);
  if (::mount("tmpfs", op.layer.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, op.layer_options.c_str()) !=
      0) {
    return Failed(errno);
  }
  ChildFd layer(::open(op.layer.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (layer.get() < 0) return Failed(errno);
  if (::mkdirat(layer.get(), "upper", 0755) != 0 || ::mkdirat(layer.get(), "work", 0700) != 0) {
    return Failed(errno);
  }
  raw = -1;
  const OpStatus dst_opened =
      OpenChecked(op.target.c_str(), op.target_id, verify, op.optional, raw);
  ChildFd dst(raw);
  if (dst_opened.err != 0 || dst_opened.skipped) return dst_opened;
  if (::mount("overlay", scratch, "overlay", op.flags, op.data.c_str()) != 0) return Failed(errno);
  if (MoveMount(AT_FDCWD, scratch, dst.get(), 0) != 0) return Failed(errno);
  return Done();
}

OpStatus SetAttrOp(const MountOp& op, bool verify) {
  int raw = -1;
  const OpStatus opened = OpenChecked(op.target.c_str(), op.target_id, verify, op.optional, raw);
  ChildFd dst(raw);
  if (opened.err != 0 || opened.skipped) return opened;
  struct mount_attr attr {};
  attr.attr_set = op.attr_set;
  if (::syscall(SYS_mount_setattr, dst.get(), "", AT_EMPTY_PATH, &attr, sizeof(attr)) != 0) {
    return Failed(errno);
  }
  return Done();
}

OpStatus RunOp(const MountOp& op, const MountPlan& plan) {
  const bool verify = plan.verify_paths;
  switch (op.kind) {
    case MountOp::Kind::kMkdir:
    case MountOp::Kind::kTouch:
    case MountOp::Kind::kSymlink:
    case MountOp::Kind::kWriteFile:
      return CreateOp(op, verify);
    case MountOp::Kind::kBind:
      return BindOp(op, verify);
    case MountOp::Kind::kTmpfs:
    case MountOp::Kind::kProc:
    case MountOp::Kind::kDevpts:
      return FilesystemOp(op, plan.scratch.empty() ? nullptr : plan.scratch.c_str(), verify);
    case MountOp::Kind::kSetAttr:
      return SetAttrOp(op, verify);
    case MountOp::Kind::kOverlay:
      return OverlayOp(op, plan.scratch.empty() ? nullptr : plan.scratch.c_str(), verify);
  }
  return Failed(EINVAL);
}

ChildResult RunOps(const MountPlan& plan) {
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    const OpStatus st = RunOp(plan.ops[i], plan);
    if (st.err != 0) return ChildResult::Failure(st.step, st.err, static_cast<int>(i));
  }
  return ChildResult::Success();
}

}  // namespace

// The directory bind whose target holds `path` strictly below it (the deepest one), or null.
static const DirBind* DirBindHolding(const LaunchSpec& spec, const std::string& path) {
  const DirBind* best = nullptr;
  for (const DirBind& b : spec.dir_binds) {
    if (IsUnder(path, b.target) && (best == nullptr || b.target.size() > best->target.size())) {
      best = &b;
    }
  }
  return best;
}

namespace {

// The spec's directory binds (carried trees, caches): bound, or under a private writable layer
// (overlay), each source a directory; a mount point in the workspace must still be the directory
// cagent made.
Status AddDirBinds(const LaunchSpec& spec, std::vector<Entry>& entries) {
  for (const DirBind& b : spec.dir_binds) {
    struct stat src {};
    if (::lstat(b.source.c_str(), &src) != 0 || !S_ISDIR(src.st_mode)) {
      return PlainError("cannot show " + b.source + " at " + b.target,
                        "it is not a directory (or is a symlink)");
    }
    const bool overlay = b.scratch && !b.writable;
    Entry e{overlay ? Entry::What::kOverlay : Entry::What::kBindDir,
            b.target,
            b.source,
            static_cast<std::uint64_t>(MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                       (b.writable ? 0 : MOUNT_ATTR_RDONLY)),
            0,
            "show " + b.source + " at " + b.target +
                (b.writable ? " read-write"
                 : overlay  ? " read-only under a private writable layer"
                            : " read-only")};
    e.id = IdentityOf(src);
    // The layer may hold as much as HOME may.
    if (overlay) e.layer_options = "mode=0755,size=" + std::to_string(spec.home_size_bytes);
    if (IsUnder(b.target, spec.workspace)) {
      // A mount point cagent made in the workspace: it must still be that directory when the
      // child binds over it (never a link the workspace put in its place).
      struct stat dst {};
      if (::lstat(b.target.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode)) {
        return PlainError("cannot show " + b.source + " at " + b.target,
                          "the mount point is not a directory in the workspace");
      }
      e.dest_id = IdentityOf(dst);
    }
    entries.push_back(std::move(e));
  }
  return Ok{};
}

// The spec's file binds (e.g. resolv.conf), each over a regular file the view already shows.
Status AddFileBinds(const LaunchSpec& spec, std::vector<Entry>& entries) {
  for (const FileBind& b : spec.file_binds) {
    // A required bind the view cannot show fails the launch; any other is skipped.
    auto not_shown = [&b](const std::string& why) -> Status {
      if (!b.required) return Ok{};
      return PlainError("cannot show " + b.source + " at " + b.target,
                        why + "; add the path (or its directory) to the profile's view")
          .WithCode(Error::Code::kInvalidInput);
    };
    auto canonical = CanonicalParent(b.target);
    if (!canonical) {  // its directory does not exist: nothing to show it in
      if (auto s = not_shown("its directory does not exist on this machine"); !s) return s;
      continue;
    }
    std::string dest = *canonical;
    struct stat st {};
    if (::lstat(dest.c_str(), &st) != 0) {  // a bound tree cannot gain a mount point
      if (auto s = not_shown("there is no file there on this machine"); !s) return s;
      continue;
    }
    if (S_ISLNK(st.st_mode)) {
      // /etc/resolv.conf -> ../run/...: cover the file the link leads to, if the view has it.
      std::array<char, PATH_MAX> resolved{};
      if (::realpath(dest.c_str(), resolved.data()) == nullptr ||
          ::lstat(resolved.data(), &st) != 0) {
        if (auto s = not_shown("it is a symlink to nothing"); !s) return s;
        continue;
      }
      dest = resolved.data();
    }
    if (!S_ISREG(st.st_mode)) {
      if (auto s = not_shown("it is not a regular file"); !s) return s;
      continue;
    }
    const bool visible = std::any_of(entries.begin(), entries.end(), [&](const Entry& e) {
      return (e.what == Entry::What::kBindDir || e.what == Entry::What::kBindFile) &&
             (e.dest == dest || IsUnder(dest, e.dest));
    });
    if (!visible) {
      if (auto s = not_shown("the sandbox's view does not show " + dest); !s) return s;
      continue;
    }
    struct stat src {};
    if (::lstat(b.source.c_str(), &src) != 0 || !S_ISREG(src.st_mode)) {
      return PlainError("cannot show " + b.source + " at " + b.target, "it is not a regular file");
    }
    Entry e{Entry::What::kBindOver, dest, b.source, 0, 0, "show " + b.source + " at " + dest};
    e.id = IdentityOf(src);
    e.dest_id = IdentityOf(st);
    entries.push_back(std::move(e));
  }
  return Ok{};
}

// The spec's hidden paths that the view shows, covered by an empty file or directory.
void AddHiddenPaths(const LaunchSpec& spec, std::vector<Entry>& entries) {
  for (const auto& requested : spec.hidden_paths) {
    // Below a directory bind (a carried tree, a cache): the host path there is the bind's
    // mount point, not what the view shows. What to hide is looked up beneath the bind's
    // source, links refused, and checked in the child like any host-backed hide.
    if (const DirBind* b = DirBindHolding(spec, requested); b != nullptr) {
      UniqueFd src(::open(b->source.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!src.valid()) continue;  // refused with the bind above
      UniqueFd at(Openat2(src.get(), requested.substr(b->target.size() + 1), O_PATH | O_NOFOLLOW));
      struct stat st {};
      if (!at.valid() || ::fstat(at.get(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
      entries.push_back({S_ISDIR(st.st_mode) ? Entry::What::kHideDir : Entry::What::kHideFile,
                         requested, "", 0, 0, "hide " + requested, false, IdentityOf(st)});
      continue;
    }
    // Canonical through the parent, like the bound paths: the view's paths are canonical, and
    // the child refuses to resolve a symlink on the way to a mount (see mountns.h). The last
    // component is not followed: a hidden symlink is skipped below.
    auto canonical = CanonicalParent(requested);
    if (!canonical) continue;  // its directory does not exist: nothing to hide
    const std::string& p = *canonical;
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
                       0, 0, "hide " + p, false, IdentityOf(st)});
  }
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
                       "mode=1777,size=" + std::to_string(spec.tmp_size_bytes), 0, 0,
                       "tmpfs /tmp"});
    entries.push_back({Entry::What::kTmpfs, spec.home,
                       "mode=0755,size=" + std::to_string(spec.home_size_bytes), 0, 0,
                       "tmpfs " + spec.home + " (HOME)"});
    for (const auto& p : spec.read_write_paths) {
      if (auto s = AddHostPath(p, true, false, entries); !s) return s.error();
    }
    if (auto s = AddHostPath(spec.workspace, spec.workspace_writable, true, entries); !s) {
      return std::move(s.error()).Context("workspace");
    }
    if (auto s = AddDirBinds(spec, entries); !s) return s.error();
    AddDev(entries);
    if (auto s = AddFileBinds(spec, entries); !s) return s.error();
    AddHiddenPaths(spec, entries);
    // Written into the HOME tmpfs, which is empty and the sandbox's own: nothing there to check
    // against the host (mountns.h). Parents first like every entry (sorted below); the
    // directories on the way are made by the lowering.
    for (const HomeFile& f : spec.home_files) {
      Entry e{Entry::What::kHomeFile, f.path, f.content, 0, f.mode, "write " + f.path};
      entries.push_back(std::move(e));
    }
  } else if (!spec.home_files.empty()) {
    return PlainError("cannot write " + spec.home_files.front().path,
                      "files in the sandbox's HOME need the mount view (the fs layer): without it "
                      "HOME is the caller's own")
        .WithCode(Error::Code::kInvalidInput);
  }
  AddProc(spec, entries);

  // Parents before children; among equals, the order above (which puts the tmpfs mounts before
  // what is bound inside them and hidden paths after what they cover).
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return Depth(a.dest) < Depth(b.dest); });
  if (fresh_root) {
    // Hidden paths must land after every bind that could cover them.
    std::stable_partition(entries.begin(), entries.end(), [](const Entry& e) {
      return e.what != Entry::What::kHideDir && e.what != Entry::What::kHideFile &&
             e.what != Entry::What::kBindOver;
    });
  }
  return Lower(entries, fresh_root, LstatIdentity("/dev/null"));
}

ChildResult ApplyMountView(const MountPlan& plan) {
  // Nothing we mount may propagate back to the host.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return ChildResult::Failure(ChildStep::kMountPrivate, errno);
  }
  if (!plan.fresh_root) return RunOps(plan);
  // Stage: a tmpfs on a host directory (visible only in this namespace) becomes the root, with the
  // host's root at /oldroot, so that binds of host paths under the staging directory (e.g. a
  // workspace in /tmp) still reach the host's files.
  if (::mount("tmpfs", plan.staging.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") !=
      0) {
    return ChildResult::Failure(ChildStep::kMountStaging, errno);
  }
  if (::chdir(plan.staging.c_str()) != 0 || ::mkdir("newroot", 0755) != 0 ||
      ::mkdir("oldroot", 0755) != 0 || ::mkdir(kScratch + 1, 0700) != 0) {
    return ChildResult::Failure(ChildStep::kMountStaging, errno);
  }
  if (PivotRoot(".", "oldroot") != 0 || ::chdir("/") != 0) {
    return ChildResult::Failure(ChildStep::kPivotToStaging, errno);
  }
  if (::mount("tmpfs", kNewRoot, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0) {
    return ChildResult::Failure(ChildStep::kMountNewRoot, errno);
  }
  if (const ChildResult r = RunOps(plan); !r.ok) return r;
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
