#include "launcher/broker/loop_detector.h"

#include <algorithm>

namespace cagent::launcher::broker {

bool LoopDetector::SuspectsRepeat(const std::string& digest, const std::string& state) const {
  auto it = seen_.find(digest);
  return it != seen_.end() && it->second.state == state;
}

std::optional<LoopFinding> LoopDetector::Check(const std::string& digest,
                                               const std::string& state) {
  // Cycles: keep only as many calls as the longest pattern needs.
  const std::size_t keep =
      3 * static_cast<std::size_t>(std::max<std::uint32_t>(limits_.max_cycle_repeats, 1));
  recent_.push_back(digest);
  while (recent_.size() > keep) recent_.pop_front();

  // Repeats in an unchanged workspace. A hostile agent sending endless distinct calls only resets
  // the table (it loses memory, not the broker).
  if (seen_.size() >= kMaxDistinct && !seen_.contains(digest)) seen_.clear();
  Seen& seen = seen_[digest];
  if (seen.count == 0 || seen.state != state) {
    seen.state = state;
    seen.count = 0;
  }
  const std::uint32_t n = ++seen.count;
  if (limits_.max_repeats > 0 && n >= limits_.max_repeats) {
    return LoopFinding{LoopFinding::Kind::kRepeat, n, 1};
  }
  return FindCycle();
}

std::optional<LoopFinding> LoopDetector::FindCycle() const {
  const std::uint32_t repeats = limits_.max_cycle_repeats;
  if (repeats < 2) return std::nullopt;  // one occurrence of a block is not a cycle
  const std::size_t n = recent_.size();
  for (std::uint32_t period : {2U, 3U}) {
    const std::size_t span = static_cast<std::size_t>(period) * repeats;
    if (n < span) continue;
    const std::size_t first = n - span;
    bool cycle = true;
    for (std::size_t i = first + period; i < n && cycle; ++i) {
      cycle = recent_[i] == recent_[i - period];
    }
    if (!cycle) continue;
    // A block of identical calls is a repeat, not a cycle; repeats have their own limit.
    bool uniform = true;
    for (std::size_t i = first + 1; i < first + period; ++i) {
      uniform = uniform && recent_[i] == recent_[first];
    }
    if (uniform) continue;
    return LoopFinding{LoopFinding::Kind::kCycle, repeats, period};
  }
  return std::nullopt;
}

std::string LoopMessage(const LoopFinding& finding, const std::string& action) {
  if (finding.kind == LoopFinding::Kind::kRepeat) {
    return "Refused by loop detection: you have made this exact call (" + action + ") " +
           std::to_string(finding.count) +
           " times and the workspace did not change in between (cagent compares its files, not "
           "whether the call succeeded), so the result would be the same as before. Use the "
           "result you already have, or try a different approach: change a file, run a different "
           "command, or look somewhere else. If you are stuck, call finish and explain what "
           "blocks you.";
  }
  return "Refused by loop detection: your last " + std::to_string(finding.period * finding.count) +
         " tool calls repeat the same " + std::to_string(finding.period) + " calls " +
         std::to_string(finding.count) + " times in a row (this call, " + action +
         ", would continue the cycle). Repeating them will not give a different result. Step "
         "back and try a different approach, or call finish and explain what blocks you.";
}

}  // namespace cagent::launcher::broker
