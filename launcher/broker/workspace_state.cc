#include "launcher/broker/workspace_state.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "common/sha256.h"
#include "common/unique_fd.h"

namespace cagent::launcher::broker {
namespace {

class Walker {
 public:
  Walker(const WorkspaceStateLimits& limits, WorkspaceState& out) : limits_(limits), out_(out) {}

  void Root(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      Record(".", nullptr, errno, {});
      return;
    }
    ++out_.entries;
    Record(".", &st, 0, {});
    Directory(fd, "", 1, st.st_dev);
  }

  void Finish() {
    // The bounds are part of the state: a walk cut short is never confused with a complete one.
    std::string tail = std::string("end") + '\0' + std::to_string(out_.entries) + '\0' +
                       (out_.truncated ? "truncated" : "complete") + '\0' +
                       std::to_string(out_.not_walked);
    hash_.Update(tail);
    out_.digest = hash_.FinishHex();
  }

 private:
  // The names in the directory `fd`, sorted; at most `room` of them (in readdir order, which is
  // stable for a directory that does not change) so a huge directory cannot exhaust memory.
  std::vector<std::string> Names(int fd, std::size_t room, int& err) {
    std::vector<std::string> names;
    // One buffer for the whole walk (the names are copied out before descending), not 32 KiB of
    // stack per level.
    if (buf_.empty()) buf_.resize(32 * 1024);
    char* buf = buf_.data();
    err = 0;
    for (;;) {
      const ssize_t n = ::getdents64(fd, buf, buf_.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        err = errno;
        break;
      }
      if (n == 0) break;
      for (ssize_t off = 0; off < n;) {
        const auto* d = reinterpret_cast<const struct dirent64*>(buf + off);
        off += d->d_reclen;
        const std::string_view name(d->d_name);
        if (name == "." || name == "..") continue;
        if (names.size() >= room) {
          out_.truncated = true;
          std::sort(names.begin(), names.end());
          return names;
        }
        names.emplace_back(name);
      }
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  void Directory(int fd, const std::string& rel, std::size_t depth, dev_t root_dev) {
    const std::size_t room =
        out_.entries >= limits_.max_entries ? 0 : limits_.max_entries - out_.entries;
    int err = 0;
    std::vector<std::string> names = Names(fd, room, err);
    if (err != 0) Record(rel + '\0' + "readdir", nullptr, err, {});
    for (const std::string& name : names) {
      if (out_.entries >= limits_.max_entries) {
        out_.truncated = true;
        return;
      }
      const std::string path = rel.empty() ? name : rel + "/" + name;
      struct stat st {};
      ++out_.entries;
      if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT) != 0) {
        Record(path, nullptr, errno, {});
        continue;
      }
      std::string link;
      if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        const ssize_t n = ::readlinkat(fd, name.c_str(), target, sizeof target);
        link = n >= 0 ? std::string(target, static_cast<std::size_t>(n))
                      : std::string(1, '\0') + "readlink:" + std::to_string(errno);
      }
      Record(path, &st, 0, link);
      if (!S_ISDIR(st.st_mode)) continue;
      if (st.st_dev != root_dev || depth >= limits_.max_depth) {
        ++out_.not_walked;
        continue;
      }
      // O_NOFOLLOW: if the directory was swapped for a symlink since the stat, this fails (ELOOP)
      // instead of walking wherever the link points.
      UniqueFd sub(
          ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      if (!sub.valid()) {
        ++out_.not_walked;
        Record(path + '\0' + "open", nullptr, errno, {});
        continue;
      }
      Directory(sub.get(), path, depth + 1, root_dev);
    }
  }

  // One entry into the hash: NUL-separated fields (a name cannot contain NUL).
  void Record(const std::string& path, const struct stat* st, int err, const std::string& link) {
    std::string line = path;
    line += '\0';
    if (st == nullptr) {
      line += "E" + std::to_string(err);
    } else {
      const std::uint64_t fields[] = {
          static_cast<std::uint64_t>(st->st_mode),
          static_cast<std::uint64_t>(st->st_size),
          static_cast<std::uint64_t>(st->st_mtim.tv_sec),
          static_cast<std::uint64_t>(st->st_mtim.tv_nsec),
          static_cast<std::uint64_t>(st->st_ctim.tv_sec),
          static_cast<std::uint64_t>(st->st_ctim.tv_nsec),
          static_cast<std::uint64_t>(st->st_ino),
          static_cast<std::uint64_t>(st->st_nlink),
          static_cast<std::uint64_t>(st->st_dev),
      };
      line.append(reinterpret_cast<const char*>(fields), sizeof fields);
      line += link;
    }
    line += '\0';
    hash_.Update(line);
  }

  const WorkspaceStateLimits& limits_;
  WorkspaceState& out_;
  Sha256 hash_;
  std::vector<char> buf_;  // new[]'d: aligned for the 8-byte fields of a dirent
};

}  // namespace

WorkspaceState DigestWorkspaceState(const std::string& root, const WorkspaceStateLimits& limits) {
  WorkspaceState out;
  Walker walker(limits, out);
  UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    out.error = "open " + root + ": " +
                std::string(strerrorname_np(err) ? strerrorname_np(err) : std::strerror(err));
    Sha256 h;
    h.Update(std::string("unavailable") + '\0' + out.error);
    out.digest = h.FinishHex();
    return out;
  }
  walker.Root(fd.get());
  walker.Finish();
  return out;
}

}  // namespace cagent::launcher::broker
