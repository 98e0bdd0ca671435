#include "agent/workspace_fs.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace cagent::agent {
namespace {

// RESOLVE_NO_XDEV is deliberately NOT used: the launcher adds mounts inside the workspace
// (read-only binds of workspace subtrees, and empty over-mounts hiding denied paths). They are all
// beneath the workspace path, so crossing into them is not an escape, and NO_XDEV would make every
// file under a read-only bind unreadable with a misleading "outside the workspace" refusal. The
// agent cannot add mounts itself (no capabilities, seccomp denies mount), so NO_XDEV would guard
// nothing.
constexpr std::uint64_t kResolveFlags = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;

int RawOpenat2(int dirfd, const char* path, std::uint64_t flags, std::uint64_t resolve) {
  struct open_how how {};
  how.flags = flags;
  how.mode = 0;
  how.resolve = resolve;
  return static_cast<int>(::syscall(SYS_openat2, dirfd, path, &how, sizeof(how)));
}

std::string Quote(std::string_view s) { return "`" + std::string(s) + "`"; }

FsFailure MapOpenError(int err, std::string_view shown, int flags) {
  FsFailure f;
  f.err = err;
  const std::string p = Quote(shown);
  switch (err) {
    case EXDEV:
      f.code = "outside_workspace";
      f.message = p + " resolves outside the workspace (a \"..\" or a symlink leads out of it)";
      f.hint = "only paths inside the workspace can be used; list_dir or glob show what is there";
      break;
    case ELOOP:
      f.code = "outside_workspace";
      f.message = p +
                  " cannot be resolved beneath the workspace: it goes through a /proc magic link, "
                  "a symlink loop or too many symlinks";
      f.hint = "use a plain workspace-relative path; list_dir shows what is there";
      break;
    case ENOENT:
      f.code = "not_found";
      f.message = p + " does not exist";
      f.hint = "check the path with list_dir or glob";
      break;
    case ENOTDIR:
      f.code = "not_a_directory";
      f.message = (flags & O_DIRECTORY) != 0 ? p + " is not a directory"
                                             : "a component of " + p + " is not a directory";
      f.hint = "use read_file for files and list_dir for directories";
      break;
    case EISDIR:
      f.code = "is_directory";
      f.message = p + " is a directory";
      f.hint = "use list_dir to see its entries";
      break;
    case EACCES:
    case EPERM:
      f.code = "permission_denied";
      f.message = "permission denied on " + p + " (the sandbox does not allow this access)";
      f.hint = "this path cannot be used from inside the sandbox; work on other files";
      break;
    case EROFS:
      f.code = "read_only";
      f.message = p + " is on a read-only mount";
      f.hint = "this part of the workspace is read-only in this run";
      break;
    case ENAMETOOLONG:
      f.code = "bad_arguments";
      f.message = p + " is too long";
      break;
    case ENOSYS:
      f.code = "io_error";
      f.message =
          "openat2(2) is not available (Linux 5.6 or newer is required); refusing to "
          "resolve " +
          p + " without it";
      break;
    default:
      f.code = "io_error";
      f.message = "cannot open " + p + ": " + std::strerror(err);
      break;
  }
  return f;
}

bool StartsWithComponents(const std::vector<std::string>& path,
                          const std::vector<std::string>& prefix) {
  if (prefix.size() > path.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (path[i] != prefix[i]) return false;
  }
  return true;
}

std::vector<std::string> AbsoluteComponents(std::string_view path) {
  std::vector<std::string> out;
  for (auto& c : SplitComponents(path)) {
    if (c != ".") out.push_back(std::move(c));
  }
  return out;
}

std::string JoinComponents(const std::vector<std::string>& comps, std::size_t begin,
                           std::size_t end) {
  std::string out;
  for (std::size_t i = begin; i < end; ++i) {
    if (!out.empty()) out += '/';
    out += comps[i];
  }
  return out.empty() ? std::string(".") : out;
}

std::optional<std::string> ReadLink(const std::string& link) {
  std::string buf(PATH_MAX + 1, '\0');
  ssize_t n = ::readlink(link.c_str(), buf.data(), buf.size());
  if (n < 0 || static_cast<std::size_t>(n) >= buf.size()) return std::nullopt;
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

}  // namespace

std::vector<std::string> SplitComponents(std::string_view relative) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= relative.size()) {
    std::size_t slash = relative.find('/', start);
    if (slash == std::string_view::npos) slash = relative.size();
    if (slash > start) out.emplace_back(relative.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

std::string NormalizeLexically(std::string_view relative) {
  std::vector<std::string> stack;
  for (auto& c : SplitComponents(relative)) {
    if (c == ".") continue;
    if (c == ".." && !stack.empty() && stack.back() != "..") {
      stack.pop_back();
      continue;
    }
    stack.push_back(std::move(c));
  }
  return JoinComponents(stack, 0, stack.size());
}

std::string JoinRelative(std::string_view dir, std::string_view name) {
  if (dir.empty() || dir == ".") return std::string(name);
  std::string out(dir);
  if (out.back() != '/') out += '/';
  out += name;
  return out;
}

FsResult<WorkspaceFs> WorkspaceFs::Open(const std::string& workspace) {
  if (workspace.empty() || workspace[0] != '/' || workspace.find('\0') != std::string::npos) {
    return FsFailure{"bad_arguments", "the workspace path must be absolute: " + workspace, "", 0};
  }
  int fd = ::open(workspace.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return FsFailure{"io_error",
                     "cannot open the workspace " + workspace + ": " + std::strerror(err), "", err};
  }
  WorkspaceFs fs;
  fs.root_.Reset(fd);
  auto comps = AbsoluteComponents(workspace);
  fs.path_ = "/" + (comps.empty() ? std::string() : JoinComponents(comps, 0, comps.size()));
  if (auto link = ReadLink("/proc/self/fd/" + std::to_string(fd)); link && (*link)[0] == '/') {
    fs.canonical_ = *link;
  } else {
    // No /proc (or an unreachable root): realpath resolves the components itself.
    char* real = ::realpath(workspace.c_str(), nullptr);
    fs.canonical_ = real != nullptr ? std::string(real) : fs.path_;
    std::free(real);  // NOLINT(cppcoreguidelines-no-malloc)
  }
  return fs;
}

FsResult<std::string> WorkspaceFs::Relativize(std::string_view path, std::string_view what) const {
  const std::string field(what);
  if (path.empty()) {
    return FsFailure{"bad_arguments", field + " is empty",
                     "give a workspace-relative path; \".\" is the workspace root", 0};
  }
  if (path.find('\0') != std::string_view::npos) {
    return FsFailure{"bad_arguments", field + " contains a NUL byte (refused before any lookup)",
                     "give a plain workspace-relative path", 0};
  }
  if (path[0] != '/') return std::string(path);
  auto comps = AbsoluteComponents(path);
  for (const std::string* root : {&path_, &canonical_}) {
    auto root_comps = AbsoluteComponents(*root);
    if (StartsWithComponents(comps, root_comps)) {
      // Inside the workspace path: made relative; ".." in the rest is judged by the kernel.
      return JoinComponents(comps, root_comps.size(), comps.size());
    }
  }
  return FsFailure{"outside_workspace",
                   "absolute path " + Quote(path) + " is outside the workspace " + path_ +
                       " (absolute paths are accepted only inside the workspace)",
                   "use a path relative to the workspace root " + path_, 0};
}

std::optional<std::string> WorkspaceFs::RelativeOf(int fd) const {
  auto link = ReadLink("/proc/self/fd/" + std::to_string(fd));
  if (!link || link->empty() || (*link)[0] != '/') return std::nullopt;
  constexpr std::string_view kDeleted = " (deleted)";
  if (link->size() > kDeleted.size() &&
      link->compare(link->size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0) {
    return std::nullopt;
  }
  if (*link == canonical_) return std::string(".");
  std::string prefix = canonical_ == "/" ? "/" : canonical_ + "/";
  if (link->compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  return link->substr(prefix.size());
}

FsResult<OpenedPath> WorkspaceFs::Open(const std::string& relative, int flags) const {
  const std::string shown = NormalizeLexically(relative);
  int fd = -1;
  int err = 0;
  // EAGAIN: RESOLVE_BENEATH lookups are restarted by the kernel up to a point and then fail with
  // EAGAIN when a rename or mount raced with them; retrying a few times is what the man page asks.
  for (int attempt = 0; attempt < 16; ++attempt) {
    fd = RawOpenat2(root_.get(), relative.c_str(), static_cast<std::uint64_t>(flags) | O_CLOEXEC,
                    kResolveFlags);
    if (fd >= 0) break;
    err = errno;
    if (err != EAGAIN && err != EINTR) break;
  }
  if (fd < 0) return MapOpenError(err, shown, flags);
  OpenedPath out;
  out.fd.Reset(fd);
  if (::fstat(fd, &out.st) != 0) {
    int e = errno;
    return FsFailure{"io_error", "cannot stat " + Quote(shown) + ": " + std::strerror(e), "", e};
  }
  // The resolved path (symlinks followed) is what the broker and the ledger see. Without /proc the
  // lexical path is the best available name; the kernel check above still held.
  out.relative = RelativeOf(fd).value_or(shown);
  return out;
}

FsResult<OpenedParent> WorkspaceFs::OpenParent(const std::string& relative,
                                               bool create_dirs) const {
  if (relative.back() == '/') {
    return FsFailure{"bad_arguments",
                     Quote(relative) + " ends in '/': it names a directory, not a file",
                     "give the file's path", 0};
  }
  auto comps = SplitComponents(relative);
  if (comps.empty() || comps.back() == "." || comps.back() == "..") {
    return FsFailure{"bad_arguments", Quote(relative) + " does not name a file",
                     "give the file's path, e.g. src/main.c", 0};
  }
  OpenedParent out;
  out.name = comps.back();
  comps.pop_back();
  const int dir_flags = O_PATH | O_DIRECTORY;
  auto opened = Open(JoinComponents(comps, 0, comps.size()), dir_flags);
  if (std::holds_alternative<FsFailure>(opened) && create_dirs &&
      std::get<FsFailure>(opened).err == ENOENT) {
    // Create the missing directories one component at a time. Each mkdirat() happens in a
    // directory that was itself opened beneath the root, and each new directory is reopened
    // beneath the root (a symlink planted in between is judged by the kernel like any other).
    UniqueFd parent;  // invalid = the root
    for (std::size_t i = 0; i < comps.size(); ++i) {
      const std::string prefix = JoinComponents(comps, 0, i + 1);
      auto step = Open(prefix, dir_flags);
      if (std::holds_alternative<FsFailure>(step) && std::get<FsFailure>(step).err == ENOENT) {
        if (comps[i] == "." || comps[i] == "..") return std::get<FsFailure>(std::move(step));
        int at = parent.valid() ? parent.get() : root_.get();
        if (::mkdirat(at, comps[i].c_str(), 0777) != 0 && errno != EEXIST) {
          return MapOpenError(errno, NormalizeLexically(prefix), dir_flags);
        }
        step = Open(prefix, dir_flags);
      }
      if (std::holds_alternative<FsFailure>(step)) return std::get<FsFailure>(std::move(step));
      parent = std::move(std::get<OpenedPath>(step).fd);
    }
    OpenedPath last;
    last.fd = std::move(parent);
    last.relative = RelativeOf(last.fd.get())
                        .value_or(NormalizeLexically(JoinComponents(comps, 0, comps.size())));
    opened = std::move(last);
  }
  if (std::holds_alternative<FsFailure>(opened)) return std::get<FsFailure>(std::move(opened));
  auto& dir = std::get<OpenedPath>(opened);
  out.dir = std::move(dir.fd);
  out.relative = JoinRelative(dir.relative, out.name);
  return out;
}

FsResult<std::string> ReadWholeFile(int fd, const std::string& relative) {
  std::string out;
  char buf[64 * 1024];
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof(buf), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      return FsFailure{"io_error", "cannot read " + Quote(relative) + ": " + std::strerror(err), "",
                       err};
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    offset += n;
  }
  return out;
}

}  // namespace cagent::agent
