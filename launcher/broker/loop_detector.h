// Loop detection: refuses a tool call the agent has already made to no effect, before it burns
// the run's turn budget. Runs in cagent (trusted), on the broker's thread; pure (the workspace
// state it is given is computed by the broker, see workspace_state.h).
//
// Calls are compared by their digest (CanonicalDigest of {"tool", "args"}: not the resolved paths,
// which the agent could vary at will), so key order and whitespace do not make two identical
// calls look different. Two patterns are refused:
//   repeat  the same call for the LoopLimits::max_repeats-th time while the workspace state digest
//           stayed what it was at the call's previous occurrence (its answer cannot have changed
//           either). Whether an earlier call succeeded, failed, or claimed to change files plays no
//           part: only the state cagent itself observed on the host does (issue #13: a successful
//           `run_command true` used to reset the count, so the same command could repeat forever).
//   cycle   the last calls form a block of period 2 or 3 (A-B-A-B-A-B, A-B-C-A-B-C...) repeated
//           LoopLimits::max_cycle_repeats times in a row. A cycle is judged on the calls alone,
//           across workspace changes: a loop of "run the tests, read the same file" repeats even
//           though each test run may change the workspace.
// A refused call stays in the history, so the same loop keeps being refused until the agent does
// something else. Memory is bounded: at most kMaxDistinct calls are remembered.
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

  // Whether a call with `digest` made now, with the workspace in `state`, would count as a repeat
  // of an earlier one (the same call was last seen in this same state). The broker uses it to
  // decide when a fresh state digest is worth computing before Check().
  [[nodiscard]] bool SuspectsRepeat(const std::string& digest, const std::string& state) const;
  // Records a call with `digest` made while the workspace state digest is `state`, and says
  // whether it is refused as a loop.
  std::optional<LoopFinding> Check(const std::string& digest, const std::string& state);

 private:
  struct Seen {
    std::string state;        // the workspace state at the call's last occurrence
    std::uint32_t count = 0;  // occurrences in that state
  };
  [[nodiscard]] std::optional<LoopFinding> FindCycle() const;

  LoopLimits limits_;
  std::unordered_map<std::string, Seen> seen_;  // call digest -> its last state and count
  std::deque<std::string> recent_;              // the last calls, oldest first, for cycles
};

// The message for the model when a call is refused as a loop: what repeated and what to do.
std::string LoopMessage(const LoopFinding& finding, const std::string& action);

}  // namespace cagent::launcher::broker
