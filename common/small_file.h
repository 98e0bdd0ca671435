// Reading back a small file cagent wrote (a run's result.json, a session record, a batch task's
// result) from a directory someone else may also write to: the state directory is the user's,
// but a batch's results directory can be shared, and a run directory holds what a run left. So
// the read never follows a link, never blocks on a FIFO, and stops at a size limit.
#pragma once

#include <cstddef>
#include <string>

#include "common/result.h"

namespace cagent {

// The whole text of the regular file `path`. Errors: a symlink (ELOOP), anything that is not a
// regular file (a FIFO, a device, a directory: "is not a regular file", without blocking), a file
// over `limit` bytes ("is larger than N bytes", also when it grows while being read).
[[nodiscard]] Result<std::string> ReadSmallFile(const std::string& path, std::size_t limit);

}  // namespace cagent
