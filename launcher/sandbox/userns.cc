#include "launcher/sandbox/userns.h"

#include <fcntl.h>
#include <unistd.h>

#include "common/unique_fd.h"

namespace cagent::launcher {
namespace {

Status WriteProcFile(pid_t pid, const char* name, const std::string& content) {
  const std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("open " + path);
  const ssize_t n = ::write(fd.get(), content.data(), content.size());
  if (n < 0) return ErrnoError("write " + path);
  if (static_cast<size_t>(n) != content.size()) return ErrnoError("write " + path, EIO);
  return Ok{};
}

}  // namespace

IdMaps PrepareIdMaps() {
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  return IdMaps{std::to_string(uid) + " " + std::to_string(uid) + " 1\n",
                std::to_string(gid) + " " + std::to_string(gid) + " 1\n"};
}

Status WriteIdMaps(pid_t child, const IdMaps& maps) {
  if (auto s = WriteProcFile(child, "setgroups", "deny"); !s) return s;
  if (auto s = WriteProcFile(child, "uid_map", maps.uid_map); !s) return s;
  if (auto s = WriteProcFile(child, "gid_map", maps.gid_map); !s) return s;
  return Ok{};
}

}  // namespace cagent::launcher
