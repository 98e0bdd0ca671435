#include "launcher/broker/budgets.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "policy/language/dump.h"
#include "policy/language/lowering.h"

namespace cagent::launcher::broker {
namespace {

std::optional<std::uint64_t> Bounded(const policy::Policy& policy, policy::Limit limit) {
  const policy::LimitValue& v = policy.limit(limit);
  if (!v.bounded()) return std::nullopt;
  return v.value;
}

std::string Count(std::uint64_t n) { return std::to_string(n); }
std::string Size(std::uint64_t n) { return policy::FormatSize(n); }
std::string Duration(std::chrono::milliseconds d) {
  return policy::FormatDuration(static_cast<std::uint64_t>(d.count()));
}

// One budget the command line asks for, against the profile's ceiling.
struct Lowering {
  std::string flag;  // as the user typed it
  policy::Ceiling ceiling;
  std::optional<std::uint64_t> requested;
};

std::optional<std::uint64_t> Ms(const std::optional<std::chrono::milliseconds>& d) {
  if (!d) return std::nullopt;
  return static_cast<std::uint64_t>(d->count());
}

}  // namespace

Budgets BudgetsFromPolicy(const policy::Policy& policy) {
  Budgets b;
  b.model_turns = Bounded(policy, policy::Limit::kModelTurns);
  b.model_tokens = Bounded(policy, policy::Limit::kModelTokens);
  b.tool_calls = Bounded(policy, policy::Limit::kToolCalls);
  b.output_bytes = Bounded(policy, policy::Limit::kTotalOutput);
  if (auto wall = Bounded(policy, policy::Limit::kWallTime)) {
    b.wall_time = std::chrono::milliseconds(*wall);
  }
  return b;
}

Status LowerBudgets(Budgets& budgets, const Budgets& requested) {
  using policy::LimitKind;
  // The flags are session_flags.h's; a per-kind budget has no flag of its own, so it is named as
  // the profile writes it.
  std::vector<Lowering> all = {
      {"--max-turns",
       {"model-turns", budgets.model_turns, LimitKind::kCount, ""},
       requested.model_turns},
      {"--max-tokens",
       {"model-tokens", budgets.model_tokens, LimitKind::kCount, ""},
       requested.model_tokens},
      {"--max-tool-calls",
       {"tool-calls", budgets.tool_calls, LimitKind::kCount, ""},
       requested.tool_calls},
      {"--wall-time",
       {"wall-time", Ms(budgets.wall_time), LimitKind::kDuration, ""},
       Ms(requested.wall_time)},
      {"--max-output",
       {"total-output", budgets.output_bytes, LimitKind::kSize, ""},
       requested.output_bytes},
  };
  for (const auto& [kind, value] : requested.tool_calls_by_kind) {
    std::optional<std::uint64_t> profile;
    if (auto it = budgets.tool_calls_by_kind.find(kind); it != budgets.tool_calls_by_kind.end()) {
      profile = it->second;
    }
    const std::string name = "tool-calls[" + kind + "]";
    all.push_back({"budget " + name, {name, profile, LimitKind::kCount, ""}, value});
  }
  // Check everything before changing anything: a refused request leaves the budgets as they were.
  for (const Lowering& l : all) {
    if (!l.requested) continue;
    if (auto s = policy::CheckLowers(l.flag, l.ceiling, *l.requested); !s) return s;
  }
  if (requested.model_turns) budgets.model_turns = requested.model_turns;
  if (requested.model_tokens) budgets.model_tokens = requested.model_tokens;
  if (requested.tool_calls) budgets.tool_calls = requested.tool_calls;
  if (requested.wall_time) budgets.wall_time = requested.wall_time;
  if (requested.output_bytes) budgets.output_bytes = requested.output_bytes;
  for (const auto& [kind, value] : requested.tool_calls_by_kind) {
    budgets.tool_calls_by_kind[kind] = value;
  }
  return Ok{};
}

Refusal BudgetCounter::CheckModelCall() const {
  if (budgets_.model_turns && used_.model_turns >= *budgets_.model_turns) {
    return "model-turn budget (" + Count(*budgets_.model_turns) + ") reached";
  }
  if (budgets_.model_tokens && used_.input_tokens + used_.output_tokens >= *budgets_.model_tokens) {
    return "model-token budget (" + Count(*budgets_.model_tokens) + ") reached";
  }
  return std::nullopt;
}

std::optional<std::uint64_t> BudgetCounter::TokensLeft() const {
  if (!budgets_.model_tokens) return std::nullopt;
  const std::uint64_t used = used_.input_tokens + used_.output_tokens;
  return used >= *budgets_.model_tokens ? 0 : *budgets_.model_tokens - used;
}

std::optional<std::uint64_t> BudgetCounter::OutputCap(std::uint64_t max_output,
                                                      std::uint64_t estimated_input,
                                                      std::string* why) const {
  const std::uint64_t wanted = std::max<std::uint64_t>(max_output, 1);
  const std::optional<std::uint64_t> left = TokensLeft();
  if (!left) return wanted;
  if (*left <= estimated_input) {
    if (why != nullptr) {
      *why = "model-token budget (" + Count(*budgets_.model_tokens) + ") reached: " + Count(*left) +
             " tokens left, and the next call's input alone is about " + Count(estimated_input) +
             " tokens";
    }
    return std::nullopt;
  }
  return std::min(wanted, *left - estimated_input);
}

std::uint64_t BudgetCounter::CountModelTurn() { return ++used_.model_turns; }

std::optional<std::string> BudgetCounter::AddTokens(const protocol::Usage& usage) {
  used_.input_tokens += usage.input_tokens;
  used_.output_tokens += usage.output_tokens;
  const std::uint64_t total = used_.input_tokens + used_.output_tokens;
  if (budgets_.model_tokens && total > *budgets_.model_tokens) {
    return "model-token budget (" + Count(*budgets_.model_tokens) + ") exceeded (" + Count(total) +
           " tokens used)";
  }
  return std::nullopt;
}

Refusal BudgetCounter::CheckToolCall(const std::string& tool) const {
  if (budgets_.tool_calls && used_.tool_calls >= *budgets_.tool_calls) {
    return "tool-call budget (" + Count(*budgets_.tool_calls) + ") reached";
  }
  if (auto it = budgets_.tool_calls_by_kind.find(tool); it != budgets_.tool_calls_by_kind.end()) {
    auto used = used_.tool_calls_by_kind.find(tool);
    const std::uint64_t n = used == used_.tool_calls_by_kind.end() ? 0 : used->second;
    if (n >= it->second) return tool + " call budget (" + Count(it->second) + ") reached";
  }
  return std::nullopt;
}

void BudgetCounter::CountToolCall(const std::string& tool) {
  ++used_.tool_calls;
  // Only the closed set of tool names is counted by kind, so a hostile agent inventing names
  // cannot grow this map.
  if (policy::ParseTool(tool)) ++used_.tool_calls_by_kind[tool];
}

std::optional<std::string> BudgetCounter::AddOutput(std::uint64_t bytes) {
  used_.output_bytes += bytes;
  if (budgets_.output_bytes && used_.output_bytes > *budgets_.output_bytes) {
    return "output budget (" + Size(*budgets_.output_bytes) + ") exceeded (" +
           Size(used_.output_bytes) + " of tool output)";
  }
  return std::nullopt;
}

std::string BudgetCounter::WallTimeReason() const {
  if (!budgets_.wall_time) return "wall-time budget reached";
  return "wall-time budget (" + Duration(*budgets_.wall_time) + ") reached";
}

}  // namespace cagent::launcher::broker
