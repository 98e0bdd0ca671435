#include "common/unique_fd.h"

#include <unistd.h>

namespace cagent {

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

}  // namespace cagent
