#include "launcher/sandbox/netns.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "common/fd_passing.h"

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

Result<PreparedListeners> PrepareListeners(const std::vector<NetListener>& listeners) {
  PreparedListeners p;
  for (const NetListener& l : listeners) {
    PreparedListener s;
    s.type = l.kind == NetListener::Kind::kTcp ? SOCK_STREAM : SOCK_DGRAM;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&s.addr);   // NOLINT(*-reinterpret-cast)
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&s.addr);  // NOLINT(*-reinterpret-cast)
    if (::inet_pton(AF_INET, l.address.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(l.port);
      s.addr_len = sizeof(sockaddr_in);
    } else if (::inet_pton(AF_INET6, l.address.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(l.port);
      s.addr_len = sizeof(sockaddr_in6);
    } else {
      return PlainError("listener address '" + l.address + "' is not an IP address")
          .WithCode(Error::Code::kInvalidInput);
    }
    p.sockets.push_back(s);
  }
  if (p.sockets.size() > kMaxListeners) {
    return PlainError("at most " + std::to_string(kMaxListeners) + " listeners can be made")
        .WithCode(Error::Code::kInvalidInput);
  }
  return p;
}

ChildResult MakeAndSendListeners(const PreparedListeners& p, int channel) {
  std::array<int, kMaxListeners> fds{};
  std::size_t made = 0;
  auto close_all = [&] {
    for (std::size_t i = 0; i < made; ++i) ::close(fds[i]);
    made = 0;
  };
  const std::size_t count = p.sockets.size();
  for (std::size_t i = 0; i < p.sockets.size(); ++i) {
    const PreparedListener& s = p.sockets[i];
    const int fd = ::socket(s.addr.ss_family, s.type | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      const int e = errno;
      close_all();
      return ChildResult::Failure(ChildStep::kNetListeners, e, static_cast<int>(i));
    }
    fds[i] = fd;
    made = i + 1;
    const int one = 1;
    if (s.type == SOCK_STREAM) {
      (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    }
    if (s.addr.ss_family == AF_INET6) {
      (void)::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    // NOLINTNEXTLINE(*-reinterpret-cast): the sockets API
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&s.addr), s.addr_len) != 0 ||
        (s.type == SOCK_STREAM && ::listen(fd, 512) != 0)) {
      const int e = errno;
      close_all();
      return ChildResult::Failure(ChildStep::kNetListeners, e, static_cast<int>(i));
    }
  }
  if (count == 0) return ChildResult::Success();
  // The control buffer, aligned for cmsghdr, big enough for kMaxListeners descriptors.
  union {
    cmsghdr align;
    std::array<char, CMSG_SPACE(sizeof(int) * kMaxListeners)> buf;
  } control{};
  char byte = 'L';
  struct iovec iov {
    &byte, 1
  };
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf.data();
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * count);
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * count);
  ssize_t n;
  do {
    n = ::sendmsg(channel, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  const int e = errno;
  close_all();
  if (n != 1) {
    return ChildResult::Failure(ChildStep::kNetListeners, n < 0 ? e : EIO, static_cast<int>(count));
  }
  return ChildResult::Success();
}

Result<std::vector<UniqueFd>> ReceiveListeners(int channel, std::size_t count,
                                               std::chrono::milliseconds timeout) {
  auto fds = ReceiveDescriptors(channel, count, timeout, "its listeners");
  if (!fds) return fds.error();
  if (fds->size() != count) {
    return PlainError("the sandbox sent " + std::to_string(fds->size()) + " listeners, not " +
                      std::to_string(count));
  }
  return fds;
}

}  // namespace cagent::launcher
