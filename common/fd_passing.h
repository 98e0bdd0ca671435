// Receiving descriptors over a Unix socket (SCM_RIGHTS), for the descriptors a sandbox's child
// makes and hands to cagent: its listening sockets (launcher/sandbox/netns.h) and its terminal
// (launcher/sandbox/tty.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace cagent {

// Waits up to `timeout` for one message on `channel` and returns the descriptors it carries
// (close-on-exec, owned), at most `max`. A message with more than `max` (the kernel truncated the
// control data), a closed channel and a timeout are errors; `what` names the descriptors in them
// ("the sandbox's terminal"). The caller checks the count and kind it expects.
Result<std::vector<UniqueFd>> ReceiveDescriptors(int channel, std::size_t max,
                                                 std::chrono::milliseconds timeout,
                                                 const std::string& what);

}  // namespace cagent
