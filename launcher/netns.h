// Network namespace: a new, empty network stack whose only interface is lo, brought up so that
// servers and clients inside can talk over 127.0.0.1 / ::1 while nothing reaches the host's
// network (including the host's own 127.0.0.1, which belongs to another namespace).
#pragma once

#include "launcher/child_report.h"

namespace cagent::launcher {

// Apply-in-child: sets IFF_UP on lo. Needs CAP_NET_ADMIN over the new namespace (held by the
// child as root of its user namespace, before capabilities are dropped). Async-signal-safe.
ChildResult BringUpLoopback();

}  // namespace cagent::launcher
