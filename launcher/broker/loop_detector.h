// Loop detection: refuses a tool call the agent has already made to no effect, before it burns
// the run's turn budget. Runs in cagent (trusted), on the broker's thread; pure.
//
// Calls are compared by their digest (CanonicalDigest of {"tool", "args"}), so key order and
// whitespace do not make two identical calls look different. Two patterns are refused:
//   repeat  the same call for the LoopLimits::max_repeats-th time since the workspace last
//           changed (its answer cannot have changed either);
//   cycle   the last calls form a block of period 2 or 3 (A-B-A-B-A-B, A-B-C-A-B-C...) repeated
//           LoopLimits::max_cycle_repeats times in a row. A cycle is judged on the calls alone,
//           across workspace changes: a loop of "run the tests, read the same file" repeats even
//           though each test run counts as a change.
// A refused call stays in the history, so the same loop keeps being refused until the agent does
// something else. Memory is bounded: at most kMaxDistinct calls are remembered between changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>

#include "launcher/broker/broker.h"

namespace cagent::launcher::broker {

struct LoopFinding {
  enum class Kind { kRepeat, kCycle };
  Kind kind = Kind::kRepeat;
  std::uint32_t count = 0;   // occurrences (repeat) or repetitions of the block (cycle)
  std::uint32_t period = 1;  // 1 for a repeat, 2 or 3 for a cycle
};

class LoopDetector {
 public:
  static constexpr std::size_t kMaxDistinct = 4096;

  explicit LoopDetector(LoopLimits limits) : limits_(limits) {}

  // Records a call with `digest` and says whether it is refused as a loop.
  std::optional<LoopFinding> Check(const std::string& digest);
  // The workspace changed (a file was written, a command ran): repeats start counting afresh.
  void WorkspaceChanged();

 private:
  [[nodiscard]] std::optional<LoopFinding> FindCycle() const;

  LoopLimits limits_;
  std::unordered_map<std::string, std::uint32_t> since_change_;  // digest -> occurrences
  std::deque<std::string> recent_;  // the last calls, oldest first, for cycles
};

// The message for the model when a call is refused as a loop: what repeated and what to do.
std::string LoopMessage(const LoopFinding& finding, const std::string& action);

}  // namespace cagent::launcher::broker
