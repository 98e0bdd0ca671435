#include "common/fd_passing.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace cagent {

Result<std::vector<UniqueFd>> ReceiveDescriptors(int channel, std::size_t max,
                                                 std::chrono::milliseconds timeout,
                                                 const std::string& what) {
  struct pollfd pfd {
    channel, POLLIN, 0
  };
  int r = 0;
  do {
    r = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
  } while (r < 0 && errno == EINTR);
  if (r < 0) return ErrnoError("poll for " + what);
  if (r == 0) return PlainError("the sandbox did not send " + what + " in time");
  // cmsghdr alignment: the buffer is made of cmsghdr-sized units.
  std::vector<cmsghdr> control(CMSG_SPACE(sizeof(int) * max) / sizeof(cmsghdr) + 1);
  char byte = 0;
  struct iovec iov {
    &byte, 1
  };
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * max);
  ssize_t n = 0;
  do {
    n = ::recvmsg(channel, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoError("receive " + what);
  std::vector<UniqueFd> fds;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < k; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.emplace_back(fd);
    }
  }
  if (n == 0 && fds.empty()) return PlainError("the sandbox ended before it sent " + what);
  if ((msg.msg_flags & MSG_CTRUNC) != 0) {
    return PlainError("the sandbox sent more than " + std::to_string(max) + " descriptors for " +
                      what);
  }
  return fds;
}

}  // namespace cagent
