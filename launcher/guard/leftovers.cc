#include "launcher/guard/leftovers.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <string_view>
#include <utility>

#include "common/unique_fd.h"

namespace cagent::launcher {
namespace {

constexpr const char kCapabilityXattr[] = "security.capability";
constexpr mode_t kPrivilegeBits = S_ISUID | S_ISGID;
// Deeper trees are not walked further (and the walk says it stopped): each level holds one fd.
constexpr int kMaxDepth = 128;

std::string Join(const std::string& dir, std::string_view name) {
  std::string out = dir;
  if (out != "/") out += '/';
  out += name;
  return out;
}

std::string ProcFd(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

EntryId IdOf(const struct stat& st) {
  EntryId id;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.mode = st.st_mode;
  id.size = st.st_size;
  id.mtime_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL +  // NOLINT
                st.st_mtim.tv_nsec;
  return id;
}

// What the visitor is told about one entry. `fd` is an O_PATH handle of a regular file that may
// be privileged (-1 otherwise): the only handle through which the sweep may change it.
struct Visit {
  const std::string& path;
  std::string_view name;
  const EntryId& id;
  bool inside_git;  // below a directory named .git
  int fd;
};

// The names that make a directory a git dir for git's discovery (setup.c, is_git_directory):
// HEAD with objects/ and refs/, or HEAD with a commondir file naming where those are.
bool LooksLikeGitDir(const std::vector<std::pair<std::string, unsigned char>>& names) {
  bool head = false, objects = false, refs = false, commondir = false;
  for (const auto& [name, type] : names) {
    head = head || name == "HEAD";
    objects = objects || name == "objects";
    refs = refs || name == "refs";
    commondir = commondir || name == "commondir";
  }
  return head && ((objects && refs) || commondir);
}

class Walker {
 public:
  // `modes`: stat every entry (the privilege sweep needs each file's mode). Without it only the
  // names matter: directory entry types come from readdir, only `.git` entries (and entries whose
  // type readdir does not give) are stat'ed, and nothing inside a `.git` directory is visited —
  // the planted-repository check needs nothing more, and it is a few times cheaper on a large
  // workspace (the walk runs before and after every launch).
  Walker(std::size_t max_entries, bool modes, std::function<void(const Visit&)> visit)
      : max_entries_(max_entries), modes_(modes), visit_(std::move(visit)) {}

  // Calls `f` with each directory outside any .git whose entries make it a git dir
  // (LooksLikeGitDir), and that directory's own identity.
  void OnGitLayout(std::function<void(const std::string&, const EntryId&)> f) {
    git_layout_ = std::move(f);
  }

  // Walks one root; ENOENT is not an error (the root went away or never existed).
  Status Root(const std::string& root) {
    UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == ENOENT) return Ok{};
      return ErrnoError("open '" + root + "' to check what the sandbox left behind");
    }
    Dir(fd.get(), root, false, 0);
    return Ok{};
  }

  std::size_t entries() const { return entries_; }
  bool truncated() const { return truncated_; }

 private:
  void Dir(int dirfd, const std::string& path, bool inside_git, int depth) {
    if (depth > kMaxDepth) {
      truncated_ = true;
      return;
    }
    // fdopendir takes over a duplicate; the original stays valid for the *at calls below.
    const int dup = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) return;
    DIR* d = ::fdopendir(dup);
    if (d == nullptr) {
      ::close(dup);
      return;
    }
    std::vector<std::pair<std::string, unsigned char>> names;
    while (const dirent* e = ::readdir(d)) {
      const std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      names.emplace_back(name, e->d_type);
    }
    ::closedir(d);
    if (git_layout_ && !inside_git && LooksLikeGitDir(names)) {
      struct stat st {};
      if (::fstat(dirfd, &st) == 0) git_layout_(path, IdOf(st));
    }
    for (const auto& [name, type] : names) {
      if (++entries_ > max_entries_) {
        truncated_ = true;
        return;
      }
      if (!modes_ && name != ".git" && type != DT_UNKNOWN) {
        if (type != DT_DIR) continue;
        UniqueFd sub(::openat(dirfd, name.c_str(),
                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
        if (!sub.valid()) continue;
        Dir(sub.get(), Join(path, name), inside_git, depth + 1);
        if (truncated_) return;
        continue;
      }
      struct stat st {};
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // vanished
      const std::string child = Join(path, name);
      EntryId id = IdOf(st);
      UniqueFd file;
      // A capability matters only on something executable; a privilege bit always.
      if (S_ISREG(st.st_mode) && (st.st_mode & (kPrivilegeBits | 0111)) != 0) {
        file.Reset(::openat(dirfd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
        struct stat again {};
        if (file.valid() && (::fstat(file.get(), &again) != 0 || again.st_ino != st.st_ino ||
                             again.st_dev != st.st_dev || !S_ISREG(again.st_mode))) {
          file.Reset();  // swapped under us: not the entry that was inspected
        }
        if (file.valid()) {
          id.has_capability =
              ::getxattr(ProcFd(file.get()).c_str(), kCapabilityXattr, nullptr, 0) >= 0;
        }
      }
      visit_(Visit{child, name, id, inside_git, file.get()});
      if (S_ISDIR(st.st_mode) && (modes_ || name != ".git")) {
        UniqueFd sub(::openat(dirfd, name.c_str(),
                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
        if (!sub.valid()) continue;
        Dir(sub.get(), child, inside_git || name == ".git", depth + 1);
        if (truncated_) return;
      }
    }
  }

  std::size_t max_entries_;
  const bool modes_;
  std::size_t entries_ = 0;
  bool truncated_ = false;
  std::function<void(const Visit&)> visit_;
  std::function<void(const std::string&, const EntryId&)> git_layout_;
};

bool IsPrivileged(const EntryId& id) {
  return S_ISREG(id.mode) && ((id.mode & kPrivilegeBits) != 0 || id.has_capability);
}

std::string Octal(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// A .git entry that differs from its earlier self in what matters to a later git: another inode
// or type, or (for a gitdir: file or a symlink) other content. A directory's own mtime changes
// with every lock file git creates in it and is not compared.
bool Replaced(const EntryId& before, const EntryId& after) {
  if (before.dev != after.dev || before.ino != after.ino) return true;
  if ((before.mode & S_IFMT) != (after.mode & S_IFMT)) return true;
  if (S_ISDIR(after.mode)) return false;
  return before.size != after.size || before.mtime_ns != after.mtime_ns;
}

}  // namespace

Result<TreeSnapshot> SnapshotTrees(const std::vector<std::string>& roots, bool privileged_files,
                                   std::size_t max_entries) {
  TreeSnapshot snap;
  snap.roots = roots;
  Walker walker(max_entries, privileged_files, [&snap](const Visit& v) {
    if (v.name == ".git" && !v.inside_git) snap.git_entries.emplace(v.path, v.id);
    if (IsPrivileged(v.id)) snap.privileged.emplace(v.path, v.id);
  });
  walker.OnGitLayout([&snap](const std::string& path, const EntryId& id) {
    snap.bare_git_dirs.emplace(path, id);
  });
  for (const std::string& root : roots) {
    // The root's own .git is visited as an entry of the root; nothing else about the root is.
    if (auto s = walker.Root(root); !s) return s.error();
  }
  snap.entries = walker.entries();
  snap.truncated = walker.truncated();
  return snap;
}

LeftoverReport SweepLeftovers(const TreeSnapshot& before, bool report_repositories,
                              bool clear_privileges, std::size_t max_entries) {
  LeftoverReport report;
  // Privileged inodes of the caller's, by identity: a hard link the sandbox made to one of them is
  // still the caller's file, and its bits stay.
  std::set<std::pair<dev_t, ino_t>> callers;
  for (const auto& [path, id] : before.privileged) callers.emplace(id.dev, id.ino);

  Walker walker(max_entries, clear_privileges, [&](const Visit& v) {
    if (report_repositories && v.name == ".git" && !v.inside_git) {
      if (S_ISDIR(v.id.mode)) report.git_dirs.push_back(v.path);
      if (S_ISREG(v.id.mode)) report.gitdir_links.push_back(v.path);
      if (S_ISLNK(v.id.mode)) report.gitdir_symlinks.push_back(v.path);
      const auto it = before.git_entries.find(v.path);
      if (it == before.git_entries.end() || Replaced(it->second, v.id)) {
        report.planted_repositories.push_back(v.path);
        report.findings.push_back(
            "the sandboxed command " +
            std::string(it == before.git_entries.end() ? "created" : "replaced") + " '" + v.path +
            "': a git run on the host in that directory would obey the repository it names "
            "(its configuration and hooks can run code). Inspect it without git (ls -la, cat), "
            "then remove it with: rm -rf -- '" +
            v.path + "'");
      }
    }
    if (!clear_privileges || v.fd < 0 || !IsPrivileged(v.id)) return;
    const auto caller_file = callers.find({v.id.dev, v.id.ino});
    if (caller_file != callers.end()) {
      const auto it = before.privileged.find(v.path);
      // The caller's own file, unchanged: leave it. Changed bits on a caller's inode are cleared
      // like any other (the sandbox added them).
      if (it != before.privileged.end() && it->second.mode == v.id.mode &&
          it->second.has_capability == v.id.has_capability) {
        return;
      }
      if (it == before.privileged.end()) return;  // a new hard link to a caller's file
    }
    const std::string handle = ProcFd(v.fd);
    std::string what;
    bool ok = true;
    if ((v.id.mode & kPrivilegeBits) != 0) {
      const mode_t cleared = v.id.mode & 07777 & ~kPrivilegeBits;
      if (::chmod(handle.c_str(), cleared) == 0) {
        what = "cleared the set-user/group-ID bits of '" + v.path + "' (mode " + Octal(v.id.mode) +
               " -> " + Octal(cleared) + ")";
      } else {
        ok = false;
        what = "could not clear the set-user/group-ID bits of '" + v.path + "' (mode " +
               Octal(v.id.mode) + "): " + std::strerror(errno) + "; remove it before running it";
      }
    }
    if (v.id.has_capability) {
      if (!what.empty()) what += "; ";
      if (::removexattr(handle.c_str(), kCapabilityXattr) == 0 || errno == ENODATA) {
        what += "removed the file capabilities (security.capability) of '" + v.path + "'";
      } else {
        ok = false;
        what += "could not remove the file capabilities of '" + v.path +
                "': " + std::strerror(errno) + "; remove the file before running it";
      }
    }
    if (ok) report.cleared_files.push_back(v.path);
    report.findings.push_back(what + ", which the sandboxed command set");
  });
  if (report_repositories) {
    walker.OnGitLayout(
        [&report](const std::string& path, const EntryId&) { report.git_dirs.push_back(path); });
  }
  for (const std::string& root : before.roots) {
    if (auto s = walker.Root(root); !s) {
      report.findings.push_back("could not check what the sandbox left behind: " +
                                s.error().Message());
    }
  }
  if (walker.truncated() || before.truncated) {
    report.findings.push_back(
        "stopped checking the writable trees for planted repositories and setuid files after " +
        std::to_string(walker.entries()) +
        " entries; inspect them before running anything from them on the host");
  }
  return report;
}

}  // namespace cagent::launcher
