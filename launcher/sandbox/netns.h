// Network namespace: a new, empty network stack whose only interface is lo, brought up so that
// servers and clients inside can talk over 127.0.0.1 / ::1 while nothing reaches the host's
// network (including the host's own 127.0.0.1, which belongs to another namespace).
//
// Listeners (LaunchSpec::net_listeners): sockets the child makes inside the namespace before the
// command starts and sends to cagent over a Unix socket (SCM_RIGHTS). cagent accepts on them from
// outside: the accepted connections are the sandbox's, the connections cagent opens are its own
// (the host's namespace). That is how the egress proxy is served without a process inside.
//   prepare (parent):    PrepareListeners() builds the socket addresses
//   apply-in-child:      MakeAndSendListeners() makes, binds, listens and sends them
//   setup-from-parent:   ReceiveListeners() takes them, in the spec's order
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "launcher/sandbox/child_report.h"
#include "launcher/sandbox/launch_spec.h"

namespace cagent::launcher {

// Apply-in-child: sets IFF_UP on lo. Needs CAP_NET_ADMIN over the new namespace (held by the
// child as root of its user namespace, before capabilities are dropped). Async-signal-safe.
ChildResult BringUpLoopback();

struct PreparedListener {
  int type = SOCK_STREAM;  // SOCK_STREAM or SOCK_DGRAM
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
};
inline constexpr std::size_t kMaxListeners = 32;  // ValidateLaunchSpec holds specs to it
struct PreparedListeners {
  std::vector<PreparedListener> sockets;  // at most kMaxListeners
};

// Prepare: the addresses of `listeners`; fails (kInvalidInput) on an address that is not an IP
// literal.
Result<PreparedListeners> PrepareListeners(const std::vector<NetListener>& listeners);

// Apply-in-child: makes every socket (CLOEXEC), binds it, listens (TCP, backlog 512), sends all of
// them in one message over `channel` and closes its copies. Async-signal-safe (no allocation).
// Fails at ChildStep::kNetListeners, `detail` = the listener's index (the number of listeners for
// the send).
ChildResult MakeAndSendListeners(const PreparedListeners& p, int channel);

// Setup-from-parent: waits (up to `timeout`) for the child's message on `channel` and returns the
// descriptors in the spec's order. Fails when the child ended first (EOF: the child's report says
// why) or sent something else.
Result<std::vector<UniqueFd>> ReceiveListeners(int channel, std::size_t count,
                                               std::chrono::milliseconds timeout);

}  // namespace cagent::launcher
