#include "common/small_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>

#include "common/unique_fd.h"

namespace cagent {

Result<std::string> ReadSmallFile(const std::string& path, std::size_t limit) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) {
    return ErrnoError("open " + path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return ErrnoError("stat " + path);
  }
  if (!S_ISREG(st.st_mode)) {
    return PlainError(path, "is not a regular file");
  }
  const std::string too_large = "is larger than " + std::to_string(limit) + " bytes";
  if (static_cast<std::uint64_t>(st.st_size) > limit) {
    return PlainError(path, too_large);
  }
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  std::array<char, 65536> buf{};
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return ErrnoError("read " + path);
    }
    if (n == 0) {
      break;
    }
    text.append(buf.data(), static_cast<std::size_t>(n));
    if (text.size() > limit) {
      return PlainError(path, too_large);
    }
  }
  return text;
}

}  // namespace cagent
