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
  if (const policy::LimitValue& cost = policy.limit(policy::Limit::kModelCost); cost.bounded()) {
    b.model_cost = Money{cost.value, cost.currency};
  }
  return b;
}

Status LowerBudgets(Budgets& budgets, const Budgets& requested) {
  using policy::LimitKind;
  // The flags are session_flags.h's; a per-kind budget has no flag of its own, so it is named as
  // the profile writes it.
  std::vector<Lowering> all = {
      {"--max-turns",
       {"model-turns", budgets.model_turns, LimitKind::kCount, "", ""},
       requested.model_turns},
      {"--max-tokens",
       {"model-tokens", budgets.model_tokens, LimitKind::kCount, "", ""},
       requested.model_tokens},
      {"--max-tool-calls",
       {"tool-calls", budgets.tool_calls, LimitKind::kCount, "", ""},
       requested.tool_calls},
      {"--wall-time",
       {"wall-time", Ms(budgets.wall_time), LimitKind::kDuration, "", ""},
       Ms(requested.wall_time)},
      {"--max-output",
       {"total-output", budgets.output_bytes, LimitKind::kSize, "", ""},
       requested.output_bytes},
  };
  for (const auto& [kind, value] : requested.tool_calls_by_kind) {
    std::optional<std::uint64_t> profile;
    if (auto it = budgets.tool_calls_by_kind.find(kind); it != budgets.tool_calls_by_kind.end()) {
      profile = it->second;
    }
    const std::string name = "tool-calls[" + kind + "]";
    all.push_back({"budget " + name, {name, profile, LimitKind::kCount, "", ""}, value});
  }
  std::optional<Money> cost = requested.model_cost;
  if (cost) {
    if (cost->currency.empty() && budgets.model_cost) cost->currency = budgets.model_cost->currency;
    if (budgets.model_cost && cost->currency != budgets.model_cost->currency) {
      return PlainError("--max-cost " + FormatMoney(*cost),
                        "the profile's model-cost budget is in " + budgets.model_cost->currency +
                            "; pass the amount in " + budgets.model_cost->currency)
          .WithCode(Error::Code::kInvalidInput);
    }
    all.push_back({"--max-cost",
                   {"model-cost",
                    budgets.model_cost ? std::optional(budgets.model_cost->micros) : std::nullopt,
                    LimitKind::kMoney, "", cost->currency},
                   cost->micros});
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
  if (cost) budgets.model_cost = cost;
  for (const auto& [kind, value] : requested.tool_calls_by_kind) {
    budgets.tool_calls_by_kind[kind] = value;
  }
  return Ok{};
}

Status CheckCostBudget(Budgets& budgets, const std::optional<TokenPrices>& prices,
                       const std::string& model_label) {
  if (!budgets.model_cost) return Ok{};
  const std::string budget = "the model-cost budget (" + FormatMoney(*budgets.model_cost) + ")";
  if (!prices) {
    return PlainError(budget + " needs " + model_label + "'s prices",
                      "add them to its models.toml entry: [model.\"" + model_label +
                          "\"] with currency, input_per_mtok and output_per_mtok (cagent has no "
                          "built-in prices; docs/model-providers.md)")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (budgets.model_cost->currency.empty()) budgets.model_cost->currency = prices->currency;
  if (budgets.model_cost->currency != prices->currency) {
    return PlainError(budget + " is not in the currency of " + model_label + "'s prices",
                      "its models.toml entry prices it in " + prices->currency +
                          "; write the budget in " + prices->currency)
        .WithCode(Error::Code::kInvalidInput);
  }
  return Ok{};
}

BudgetCounter::BudgetCounter(Budgets budgets, std::optional<TokenPrices> prices)
    : budgets_(std::move(budgets)), prices_(std::move(prices)) {
  if (prices_) used_.currency = prices_->currency;
}

std::optional<std::uint64_t> BudgetCounter::MicrosLeft() const {
  if (!budgets_.model_cost || !prices_) return std::nullopt;
  const std::uint64_t limit = budgets_.model_cost->micros;
  return used_.cost_micros >= limit ? 0 : limit - used_.cost_micros;
}

Refusal BudgetCounter::CheckModelCall() const {
  if (budgets_.model_turns && used_.model_turns >= *budgets_.model_turns) {
    return "model-turn budget (" + Count(*budgets_.model_turns) + ") reached";
  }
  if (budgets_.model_tokens && used_.input_tokens + used_.output_tokens >= *budgets_.model_tokens) {
    return "model-token budget (" + Count(*budgets_.model_tokens) + ") reached";
  }
  if (budgets_.model_cost && MicrosLeft() == std::uint64_t{0}) {
    return "model-cost budget (" + FormatMoney(*budgets_.model_cost) + ") reached (" +
           FormatMoney(used_.cost_micros, used_.currency) + " spent)";
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
  std::uint64_t cap = std::max<std::uint64_t>(max_output, 1);
  if (const std::optional<std::uint64_t> left = TokensLeft()) {
    if (*left <= estimated_input) {
      if (why != nullptr) {
        *why = "model-token budget (" + Count(*budgets_.model_tokens) +
               ") reached: " + Count(*left) +
               " tokens left, and the next call's input alone is about " + Count(estimated_input) +
               " tokens";
      }
      return std::nullopt;
    }
    cap = std::min(cap, *left - estimated_input);
  }
  if (const std::optional<std::uint64_t> money = MicrosLeft()) {
    // The input is an estimate (the broker's, ~bytes/4), priced as if none of it were cached;
    // the output is priced at its cap, the most the provider may bill.
    const std::uint64_t input_cost = prices_->WorstInputMicros(estimated_input);
    const std::uint64_t after_input = *money > input_cost ? *money - input_cost : 0;
    const double per_token = prices_->output;
    const std::uint64_t affordable =
        per_token > 0 ? static_cast<std::uint64_t>(static_cast<double>(after_input) / per_token)
                      : cap;
    if (after_input == 0 || affordable == 0) {
      if (why != nullptr) {
        *why = "model-cost budget (" + FormatMoney(*budgets_.model_cost) +
               ") reached: " + FormatMoney(*money, used_.currency) +
               " left, and the next call may cost more: its input alone up to " +
               FormatMoney(input_cost, used_.currency);
      }
      return std::nullopt;
    }
    cap = std::min(cap, affordable);
  }
  return cap;
}

std::uint64_t BudgetCounter::CountModelTurn() { return ++used_.model_turns; }

std::optional<std::string> BudgetCounter::AddTokens(const protocol::Usage& usage) {
  used_.input_tokens += usage.input_tokens;
  used_.output_tokens += usage.output_tokens;
  used_.cache_read_tokens += usage.cache_read_tokens;
  used_.cache_write_tokens += usage.cache_write_tokens;
  used_.reasoning_tokens += usage.reasoning_tokens;
  if (prices_) {
    used_.cost_micros += prices_->CostMicros(usage.input_tokens, usage.cache_read_tokens,
                                             usage.cache_write_tokens, usage.output_tokens);
  }
  const std::uint64_t total = used_.input_tokens + used_.output_tokens;
  if (budgets_.model_tokens && total > *budgets_.model_tokens) {
    return "model-token budget (" + Count(*budgets_.model_tokens) + ") exceeded (" + Count(total) +
           " tokens used)";
  }
  if (budgets_.model_cost && prices_ && used_.cost_micros > budgets_.model_cost->micros) {
    return "model-cost budget (" + FormatMoney(*budgets_.model_cost) + ") exceeded (" +
           FormatMoney(used_.cost_micros, used_.currency) + " spent)";
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
