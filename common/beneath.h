// Opening a path beneath a directory descriptor without following any symlink: the kernel, not a
// string prefix, keeps the lookup inside the directory and link-free (openat2, Linux 5.6).
#pragma once

#include <linux/openat2.h>

#include <cstdint>
#include <string>

namespace cagent {

inline constexpr std::uint64_t kResolveBeneathNoLinks =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

// openat2(dirfd, path, flags | O_CLOEXEC) with `resolve`; retried on EAGAIN/EINTR (a rename or a
// mount raced with the lookup; openat2(2) asks callers to retry). Returns the descriptor or -1 with
// errno set (ELOOP or EXDEV: a link or an escape on the way).
int Openat2(int dirfd, const std::string& path, int flags,
            std::uint64_t resolve = kResolveBeneathNoLinks);

}  // namespace cagent
