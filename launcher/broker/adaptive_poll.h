// AdaptivePoll: how long the broker's io thread keeps polling the agent's socket after it has
// answered, before it blocks in epoll (broker.cc, Broker::Impl::PollSocket). Runs in cagent
// (trusted), on the broker's thread; pure (the caller measures the times and counts).
//
// Why poll at all: an agent usually sends its next message (the tool_result after a decision, the
// next tool_request after an ack) within tens of microseconds. A thread blocked in epoll_wait is
// woken by the kernel when it arrives, and on an idle virtual machine that wake-up also has to wake
// a halted vCPU: tens of microseconds (docs/performance.md, "Broker"). Polling with non-blocking
// reads for a short window catches the message on a running CPU instead.
//
// The window follows the rule of KVM's halt polling: it grows when a block turned out shorter
// than the longest window (polling a little longer would have caught the message) and shrinks when
// the wait was longer (polling is wasted on this peer: it runs commands, or waits for its model).
// Polling stops altogether, for a while, when it does not pay:
//   - the io thread was preempted (an involuntary context switch) since the last block: the CPU is
//     wanted by something else, and a poller would take it from the agent or from other work;
//   - kMaxMisses polls in a row found nothing: the agent may be unable to run while the broker
//     polls (one CPU, or both on one CPU), which the wait after a miss cannot tell apart.
// So a busy machine or a slow agent costs at most a few failed windows, never a spinning thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace cagent::launcher::broker {

class AdaptivePoll {
 public:
  using Duration = std::chrono::nanoseconds;
  // The first window after a short block.
  static constexpr Duration kStart = std::chrono::microseconds(10);
  // Misses in a row after which polling stops for kHoldoff blocks.
  static constexpr std::uint32_t kMaxMisses = 8;
  static constexpr std::uint32_t kHoldoff = 64;

  // `max`: the longest window; zero turns polling off.
  explicit AdaptivePoll(Duration max) : max_(max) {}

  // How long to poll now (zero: do not poll, block at once).
  [[nodiscard]] Duration window() const { return window_; }

  // A poll found the agent's bytes within the window.
  void Hit() { misses_ = 0; }
  // The thread blocked (a poll of window() found nothing, or there was no poll), and the bytes
  // came `waited` after the poll began; `preempted`: the thread was switched out involuntarily
  // since the previous block.
  void Blocked(Duration waited, bool preempted);
  // Whether the next Blocked() uses `preempted` (it does not while polling is held off, except on
  // the last block of the hold-off, which gives the count its new starting point): the caller may
  // skip counting context switches otherwise.
  [[nodiscard]] bool UsesPreemption() const { return max_ > Duration{0} && holdoff_ <= 1; }

 private:
  void Stop();

  Duration max_;
  Duration window_{0};
  std::uint32_t misses_ = 0;   // polls in a row that found nothing
  std::uint32_t holdoff_ = 0;  // blocks left before polling may start again
};

}  // namespace cagent::launcher::broker
