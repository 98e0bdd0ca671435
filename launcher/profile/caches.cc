#include "launcher/profile/caches.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "common/unique_fd.h"
#include "launcher/profile/spec.h"

namespace cagent::launcher {
namespace {

// A walk that counts or removes stops here rather than run without bound on a hostile tree.
constexpr std::size_t kMaxDepth = 256;

// Opens `name` beneath `dirfd` as a directory, refusing a symlink in its place.
int OpenDirNoFollow(int dirfd, const char* name) {
  return ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// The directory `name` beneath `dirfd`, made (0700) when absent; must be the caller's.
Result<UniqueFd> EnsureDirAt(int dirfd, const std::string& name, const std::string& shown) {
  if (::mkdirat(dirfd, name.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoError("create the cache directory " + shown);
  }
  UniqueFd fd(OpenDirNoFollow(dirfd, name.c_str()));
  if (!fd.valid()) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return PlainError("open the cache directory " + shown, "it is not a directory (a symlink?)");
    }
    return ErrnoError("open the cache directory " + shown);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("stat " + shown);
  if (st.st_uid != ::geteuid()) {
    return PlainError("refusing the cache directory " + shown,
                      "it belongs to uid " + std::to_string(st.st_uid) + ", not to you");
  }
  return fd;
}

void CountTree(int dirfd, std::size_t depth, CacheEntry& e) {
  if (depth > kMaxDepth) {
    e.complete = false;
    return;
  }
  const int dup = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) {
    e.complete = false;
    return;
  }
  DIR* d = ::fdopendir(dup);
  if (d == nullptr) {
    ::close(dup);
    e.complete = false;
    return;
  }
  // The duplicate shares the original's offset, which an earlier listing may have moved.
  ::rewinddir(d);
  while (dirent* ent = ::readdir(d)) {
    const std::string name = ent->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      e.complete = false;
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(OpenDirNoFollow(dirfd, name.c_str()));
      if (!sub.valid()) {
        e.complete = false;
        continue;
      }
      CountTree(sub.get(), depth + 1, e);
    } else {
      ++e.files;
      e.bytes += static_cast<std::uint64_t>(st.st_blocks) * 512U;
    }
  }
  ::closedir(d);
}

// Removes everything beneath `dirfd` (links as links, never followed).
Status RemoveContents(int dirfd, std::size_t depth) {
  if (depth > kMaxDepth) return PlainError("remove a cache", "nested deeper than 256 levels");
  const int dup = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return ErrnoError("read a cache directory");
  DIR* d = ::fdopendir(dup);
  if (d == nullptr) {
    ::close(dup);
    return ErrnoError("read a cache directory");
  }
  // The duplicate shares the original's offset, which an earlier listing may have moved.
  ::rewinddir(d);
  std::vector<std::string> names;
  while (dirent* ent = ::readdir(d)) {
    const std::string name = ent->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  for (const std::string& name : names) {
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return ErrnoError("stat " + name);
    }
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(OpenDirNoFollow(dirfd, name.c_str()));
      if (!sub.valid()) return ErrnoError("open " + name);
      // A tool may have left a directory without write permission for its owner.
      ::fchmod(sub.get(), 0700);
      if (auto s = RemoveContents(sub.get(), depth + 1); !s) return s;
      if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return ErrnoError("remove " + name);
      }
    } else if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return ErrnoError("remove " + name);
    }
  }
  return Ok{};
}

std::vector<std::string> DirNames(int dirfd) {
  std::vector<std::string> out;
  const int dup = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return out;
  DIR* d = ::fdopendir(dup);
  if (d == nullptr) {
    ::close(dup);
    return out;
  }
  // The duplicate shares the original's offset, which an earlier listing may have moved.
  ::rewinddir(d);
  while (dirent* ent = ::readdir(d)) {
    const std::string name = ent->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
      out.push_back(name);
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string CacheRoot() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return std::string(xdg) + "/cagent";
  }
  const std::string home = CallerHome();
  if (home.empty()) return "/tmp/cagent-cache-" + std::to_string(::geteuid());
  return home + "/.cache/cagent";
}

std::string CacheProfileDirName(const std::string& profile) {
  std::string out;
  for (char c : profile) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    out += keep ? c : '_';
  }
  if (out == "." || out == "..") out = "_" + out;
  return out;
}

std::string EscapeCachePath(const std::string& rel) {
  std::string out;
  for (char c : rel) {
    if (c == '%') {
      out += "%25";
    } else if (c == '/') {
      out += "%2F";
    } else {
      out += c;
    }
  }
  return out;
}

std::string UnescapeCachePath(const std::string& name) {
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name.compare(i, 3, "%2F") == 0) {
      out += '/';
      i += 2;
    } else if (name.compare(i, 3, "%25") == 0) {
      out += '%';
      i += 2;
    } else {
      out += name[i];
    }
  }
  return out;
}

std::string CacheDirName(const std::string& profile, const std::string& scope) {
  std::string name = CacheProfileDirName(profile);
  if (name.empty() || scope.empty()) return name;
  return name + "@" + CacheProfileDirName(scope);
}

Result<std::string> EnsureCacheDir(const std::string& root, const std::string& profile,
                                   const std::string& scope, const std::string& rel) {
  const std::string profile_dir = CacheDirName(profile, scope);
  if (profile_dir.empty() || rel.empty()) {
    return PlainError("no cache directory", "a cache needs a profile name and a path");
  }
  // Every level from the root down: made when absent, never followed when a link.
  std::vector<std::string> parts;
  std::size_t start = 1;
  while (start <= root.size()) {
    const std::size_t slash = root.find('/', start);
    const std::string part =
        root.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  UniqueFd at(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!at.valid()) return ErrnoError("open /");
  std::string shown;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    shown += "/" + parts[i];
    // Levels above the cache root (/home, /home/u, ~/.cache) are the caller's own layout: only
    // the ones cagent creates must be its own.
    if (i + 1 < parts.size()) {
      UniqueFd next(::openat(at.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!next.valid() && errno == ENOENT) {
        if (::mkdirat(at.get(), parts[i].c_str(), 0700) != 0 && errno != EEXIST) {
          return ErrnoError("create " + shown);
        }
        next = UniqueFd(::openat(at.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      }
      if (!next.valid()) return ErrnoError("open " + shown);
      at = std::move(next);
      continue;
    }
    auto fd = EnsureDirAt(at.get(), parts[i], shown);
    if (!fd) return fd.error();
    at = std::move(*fd);
  }
  for (const std::string& name : {std::string("caches"), profile_dir, EscapeCachePath(rel)}) {
    shown += "/" + name;
    auto fd = EnsureDirAt(at.get(), name, shown);
    if (!fd) return fd.error();
    at = std::move(*fd);
  }
  return shown;
}

Result<std::vector<CacheEntry>> ListCaches(const std::string& root) {
  std::vector<CacheEntry> out;
  const std::string caches = root + "/caches";
  UniqueFd top(::open(caches.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!top.valid()) {
    if (errno == ENOENT) return out;
    return ErrnoError("open " + caches);
  }
  for (const std::string& profile : DirNames(top.get())) {
    UniqueFd pdir(OpenDirNoFollow(top.get(), profile.c_str()));
    if (!pdir.valid()) continue;
    for (const std::string& name : DirNames(pdir.get())) {
      UniqueFd cdir(OpenDirNoFollow(pdir.get(), name.c_str()));
      if (!cdir.valid()) continue;
      CacheEntry e;
      // PROFILE@REPO: profile names have no '@' (CacheProfileDirName keeps none).
      const auto at = profile.find('@');
      e.profile = profile.substr(0, at);
      e.repository = at == std::string::npos ? std::string() : profile.substr(at + 1);
      e.path = "~/" + UnescapeCachePath(name);
      e.dir = caches + "/" + profile + "/" + name;
      CountTree(cdir.get(), 0, e);
      out.push_back(std::move(e));
    }
  }
  return out;
}

Result<std::size_t> ClearCaches(const std::string& root, const std::string& profile) {
  const std::string caches = root + "/caches";
  UniqueFd top(::open(caches.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!top.valid()) {
    if (errno == ENOENT) return std::size_t{0};
    return ErrnoError("open " + caches);
  }
  std::vector<std::string> profiles;
  if (profile.empty()) {
    profiles = DirNames(top.get());
  } else {
    // The profile's directories for every repository (PROFILE@REPO), and one made without a key.
    const std::string name = CacheProfileDirName(profile);
    for (const std::string& d : DirNames(top.get())) {
      if (d == name || d.starts_with(name + "@")) profiles.push_back(d);
    }
  }
  std::size_t removed = 0;
  for (const std::string& p : profiles) {
    UniqueFd pdir(OpenDirNoFollow(top.get(), p.c_str()));
    if (!pdir.valid()) {
      if (errno == ENOENT) continue;
      return ErrnoError("open " + caches + "/" + p);
    }
    removed += DirNames(pdir.get()).size();
    if (auto s = RemoveContents(pdir.get(), 0); !s) {
      return std::move(s.error()).Context("clear the caches of " + p);
    }
    if (::unlinkat(top.get(), p.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
      return ErrnoError("remove " + caches + "/" + p);
    }
  }
  return removed;
}

}  // namespace cagent::launcher
