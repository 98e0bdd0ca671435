#include "launcher/netns.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cagent::launcher {

ChildResult BringUpLoopback() {
  const int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return ChildResult::Failure(ChildStep::kLoopbackUp, errno);
  struct ifreq req {};
  std::memcpy(req.ifr_name, "lo", 3);
  if (::ioctl(sock, SIOCGIFFLAGS, &req) != 0) {
    const int e = errno;
    ::close(sock);
    return ChildResult::Failure(ChildStep::kLoopbackUp, e);
  }
  req.ifr_flags =
      static_cast<short>(req.ifr_flags | IFF_UP | IFF_RUNNING);  // NOLINT(google-runtime-int)
  if (::ioctl(sock, SIOCSIFFLAGS, &req) != 0) {
    const int e = errno;
    ::close(sock);
    return ChildResult::Failure(ChildStep::kLoopbackUp, e);
  }
  ::close(sock);
  return ChildResult::Success();
}

}  // namespace cagent::launcher
