#include "launcher/guard/git_guard.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <utility>

namespace cagent::launcher {
namespace {

// Files git reads to find the repository and its configuration, with the placeholder content that
// means the same as their absence (see git_guard.h).
struct ProtectedFile {
  const char* name;
  std::string_view placeholder;
};
// Not `config`: git rewrites it (lock file renamed over it) for `git config`, `git branch -D`,
// `git remote add` ..., which a mount point refuses with EBUSY. It stays writable and the git
// config guard (git_config_guard.h) checks it after the sandbox has exited.
constexpr ProtectedFile kProtectedFiles[] = {
    {"config.worktree", ""},
    {"commondir", ".\n"},
};
// Directories git reads configuration, hooks, attributes or other repositories from.
constexpr const char* kProtectedDirs[] = {"hooks", "info", "worktrees", "modules"};
// Below objects/info: other object stores git would read from.
constexpr ProtectedFile kAlternates[] = {{"alternates", ""}, {"http-alternates", ""}};

// The caller cannot create the name: neither can the sandbox (same uid, no capabilities).
bool Unwritable(int err) { return err == EACCES || err == EROFS || err == EPERM; }

Error Unguardable(const std::string& path, const std::string& what) {
  return PlainError(
      "cannot guard the git metadata at '" + path + "'",
      what +
          "; a later git on the host would follow it to whatever the sandbox puts there. "
          "Replace it with a plain file or directory, or run on a copy of the repository");
}

std::string KindOf(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISREG(mode)) return "a regular file";
  return "a special file";
}

}  // namespace

GitGuard& GitGuard::operator=(GitGuard&& other) noexcept {
  if (this != &other) {
    (void)Finish();
    git_dirs_ = std::move(other.git_dirs_);
    dirs_ = std::move(other.dirs_);
    dir_owner_ = std::move(other.dir_owner_);
    placeholders_ = std::move(other.placeholders_);
    read_only_ = std::move(other.read_only_);
    self_binds_ = std::move(other.self_binds_);
    guarded_ = std::move(other.guarded_);
    finished_ = std::exchange(other.finished_, true);
  }
  return *this;
}

GitGuard::~GitGuard() { (void)Finish(); }

Result<bool> GitGuard::Ensure(int dir, const std::string& dir_path, const std::string& name,
                              bool directory, std::string_view content) {
  const int dfd = dirs_[static_cast<std::size_t>(dir)].get();
  const std::string path = dir_path + "/" + name;
  for (int attempt = 0; attempt < 2; ++attempt) {
    struct stat st {};
    if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) return true;
      return Unguardable(path, "it is " + KindOf(st.st_mode) + ", not " +
                                   (directory ? "a directory" : "a regular file"));
    }
    if (errno != ENOENT) return ErrnoError("inspect '" + path + "'");
    Placeholder p{dir, name, path, directory, 0, 0};
    if (directory) {
      if (::mkdirat(dfd, name.c_str(), 0755) != 0) {
        if (errno == EEXIST) continue;
        if (Unwritable(errno)) return false;
        return ErrnoError("create the placeholder directory '" + path + "'");
      }
      if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return ErrnoError("inspect '" + path + "'");
      }
    } else {
      UniqueFd fd(
          ::openat(dfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
      if (!fd.valid()) {
        if (errno == EEXIST) continue;
        if (Unwritable(errno)) return false;
        return ErrnoError("create the placeholder '" + path + "'");
      }
      if (!content.empty() && ::write(fd.get(), content.data(), content.size()) !=
                                  static_cast<ssize_t>(content.size())) {
        const Error e = ErrnoError("write the placeholder '" + path + "'");
        ::unlinkat(dfd, name.c_str(), 0);
        return e;
      }
      if (::fstat(fd.get(), &st) != 0) return ErrnoError("inspect '" + path + "'");
    }
    p.dev = st.st_dev;
    p.ino = st.st_ino;
    placeholders_.push_back(std::move(p));
    return true;
  }
  return Unguardable(path, "it changes while cagent looks at it");
}

Result<int> GitGuard::OpenDir(int parent, const std::string& name, const std::string& path,
                              int owner) {
  UniqueFd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ELOOP || errno == ENOTDIR) return Unguardable(path, "it is not a directory");
    return ErrnoError("open '" + path + "'");
  }
  dirs_.push_back(std::move(fd));
  dir_owner_.push_back(owner);
  return static_cast<int>(dirs_.size() - 1);
}

Status GitGuard::GuardGitDir(const std::string& entry) {
  UniqueFd gfd(::open(entry.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!gfd.valid()) return ErrnoError("open '" + entry + "'");
  // Shared while the sandbox runs: Finish removes placeholders only when it can upgrade this to
  // exclusive, i.e. no other cagent's sandbox relies on them right now.
  (void)::flock(gfd.get(), LOCK_SH | LOCK_NB);
  const int owner = static_cast<int>(git_dirs_.size());
  const int dup = ::fcntl(gfd.get(), F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return ErrnoError("duplicate a descriptor of '" + entry + "'");
  git_dirs_.push_back({entry, std::move(gfd)});
  dirs_.emplace_back(dup);
  dir_owner_.push_back(owner);
  const int git = static_cast<int>(dirs_.size() - 1);
  const std::size_t before = placeholders_.size();

  self_binds_.push_back(entry);
  for (const ProtectedFile& f : kProtectedFiles) {
    auto made = Ensure(git, entry, f.name, false, f.placeholder);
    if (!made) return made.error();
    if (*made) read_only_.push_back(entry + "/" + f.name);
  }
  for (const char* d : kProtectedDirs) {
    auto made = Ensure(git, entry, d, true, {});
    if (!made) return made.error();
    if (*made) read_only_.push_back(entry + "/" + d);
  }
  // objects/info/alternates: only where git would look, below an existing objects/ (without
  // one the directory is no repository git accepts, whatever else it holds).
  struct stat ost {};
  const std::string objects = entry + "/objects";
  if (::fstatat(dirs_[static_cast<std::size_t>(git)].get(), "objects", &ost, AT_SYMLINK_NOFOLLOW) ==
      0) {
    if (!S_ISDIR(ost.st_mode)) return Unguardable(objects, "it is " + KindOf(ost.st_mode));
    auto obj = OpenDir(dirs_[static_cast<std::size_t>(git)].get(), "objects", objects, owner);
    if (!obj) return obj.error();
    self_binds_.push_back(objects);
    auto made = Ensure(*obj, objects, "info", true, {});
    if (!made) return made.error();
    if (*made) {
      const std::string info = objects + "/info";
      auto infod = OpenDir(dirs_[static_cast<std::size_t>(*obj)].get(), "info", info, owner);
      if (!infod) return infod.error();
      self_binds_.push_back(info);
      for (const ProtectedFile& f : kAlternates) {
        auto alt = Ensure(*infod, info, f.name, false, f.placeholder);
        if (!alt) return alt.error();
        if (*alt) read_only_.push_back(info + "/" + f.name);
      }
    }
  }
  std::string names;
  for (std::size_t i = before; i < placeholders_.size(); ++i) {
    names += (names.empty() ? "" : ", ") + placeholders_[i].path.substr(entry.size() + 1);
  }
  guarded_.push_back(entry + (names.empty() ? "" : " (placeholders: " + names + ")"));
  return Ok{};
}

Result<GitGuard> GitGuard::Prepare(const std::vector<std::string>& git_entries) {
  GitGuard g;
  g.finished_ = false;
  std::size_t repositories = 0;
  for (const std::string& entry : git_entries) {
    struct stat st {};
    if (::lstat(entry.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      return ErrnoError("inspect '" + entry + "'");
    }
    if (S_ISLNK(st.st_mode)) return Unguardable(entry, "it is a symbolic link");
    if (++repositories > kMaxGuardedRepositories) {
      return PlainError("the sandbox's writable trees hold more than " +
                            std::to_string(kMaxGuardedRepositories) + " git repositories",
                        "cagent guards the metadata of each one with mounts; run on a directory "
                        "with fewer nested repositories");
    }
    if (S_ISREG(st.st_mode)) {
      // A gitdir: link. Read-only: rewriting it would point a later git anywhere.
      g.read_only_.push_back(entry);
      g.guarded_.push_back(entry + " (gitdir link, read-only)");
      continue;
    }
    if (!S_ISDIR(st.st_mode)) return Unguardable(entry, "it is " + KindOf(st.st_mode));

    if (auto s = g.GuardGitDir(entry); !s) return s.error();
  }
  return g;
}

std::string GitGuard::Summary() const {
  if (guarded_.empty()) return "no git repository in the writable trees";
  std::string out = "guarded " + std::to_string(guarded_.size()) +
                    (guarded_.size() == 1 ? " repository: " : " repositories: ");
  for (std::size_t i = 0; i < guarded_.size(); ++i) out += (i ? "; " : "") + guarded_[i];
  return out;
}

std::vector<std::string> GitGuard::Finish() {
  std::vector<std::string> left;
  if (finished_) return left;
  finished_ = true;
  std::vector<bool> exclusive(git_dirs_.size(), false);
  for (std::size_t i = 0; i < git_dirs_.size(); ++i) {
    exclusive[i] = ::flock(git_dirs_[i].fd.get(), LOCK_EX | LOCK_NB) == 0;
    if (!exclusive[i]) {
      left.push_back("placeholders left in " + git_dirs_[i].path +
                     " (another cagent is using it; they change nothing for git)");
    }
  }
  // Newest first: objects/info's files before objects/info itself.
  for (auto it = placeholders_.rbegin(); it != placeholders_.rend(); ++it) {
    const auto d = static_cast<std::size_t>(it->dir);
    if (!exclusive[static_cast<std::size_t>(dir_owner_[d])]) continue;
    const int dfd = dirs_[d].get();
    struct stat st {};
    if (::fstatat(dfd, it->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (st.st_dev != it->dev || st.st_ino != it->ino) continue;  // not ours any more
    if (::unlinkat(dfd, it->name.c_str(), it->directory ? AT_REMOVEDIR : 0) != 0 &&
        errno != ENOTEMPTY && errno != EEXIST) {
      left.push_back("could not remove the placeholder " + it->path + ": " +
                     ErrnoError("unlink").Message());
    }
  }
  for (GitDir& g : git_dirs_) g.fd.Reset();  // releases the flock
  dirs_.clear();
  return left;
}

}  // namespace cagent::launcher
