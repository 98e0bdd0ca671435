#include "launcher/broker/adaptive_poll.h"

#include <algorithm>

namespace cagent::launcher::broker {

void AdaptivePoll::Stop() {
  window_ = Duration{0};
  misses_ = 0;
  holdoff_ = kHoldoff;
}

void AdaptivePoll::Blocked(Duration waited, bool preempted) {
  if (max_ <= Duration{0}) return;
  if (preempted) {
    Stop();
    return;
  }
  if (window_ > Duration{0} && ++misses_ >= kMaxMisses) {
    Stop();
    return;
  }
  if (holdoff_ > 0) {
    --holdoff_;
    return;
  }
  if (waited <= max_) {
    // A longer window would have caught it.
    window_ = window_ < kStart ? std::min(kStart, max_) : std::min(window_ * 2, max_);
    return;
  }
  // The agent took longer than any window: polling is wasted on this wait.
  window_ /= 2;
  if (window_ < kStart) window_ = Duration{0};
}

}  // namespace cagent::launcher::broker
