// Budgets: what a run may spend (Budgets), what it spent (BudgetUsage), and the counting of one
// run: what the broker has let through so far, checked against the run's Budgets. The two structs
// are here, not in broker.h, so that a run's record (launcher/run/run_record.h) can hold them
// without the broker.
// Runs in cagent (trusted), on the broker's thread; pure (no I/O, no clock: elapsed time is given).
//
// Each Check* answers "may one more of these happen?" and, when not, the reason the run ends,
// naming the budget and its value ("model-turn budget (40) reached"). Count* records what
// happened. Tokens and output bytes are known only after the fact, so Add* counts them and says
// whether the budget is now exceeded.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "common/money.h"
#include "common/protocol.h"
#include "common/result.h"

namespace cagent::policy {
struct Policy;
}  // namespace cagent::policy

namespace cagent::launcher::broker {

// Budgets counted by the broker (not by the agent). nullopt = unlimited.
struct Budgets {
  std::optional<std::uint64_t> model_turns;
  std::optional<std::uint64_t> model_tokens;  // input + output, summed over the run
  std::optional<std::uint64_t> tool_calls;
  std::map<std::string, std::uint64_t> tool_calls_by_kind;  // "run_command" -> 50
  std::optional<std::chrono::milliseconds> wall_time;
  std::optional<std::uint64_t> output_bytes;  // tool output returned to the model
  // What the model calls may cost, at the prices of the model's models.toml entry.
  std::optional<Money> model_cost;
};
// From the policy's limits (model-turns, model-tokens, tool-calls, wall-time, total-output,
// model-cost).
Budgets BudgetsFromPolicy(const policy::Policy& policy);
// Applies command-line values, which may only lower: a higher value is an error naming the budget
// and the profile's value. A requested cost without a currency takes the profile's; a currency
// other than the profile's is an error.
Status LowerBudgets(Budgets& budgets, const Budgets& requested);
// Before a run: a cost budget needs the model's prices, in the budget's currency (a budget without
// a currency takes the prices'). The error says which models.toml entry to write.
Status CheckCostBudget(Budgets& budgets, const std::optional<TokenPrices>& prices,
                       const std::string& model_label);

struct BudgetUsage {
  std::uint64_t model_turns = 0;
  std::uint64_t input_tokens = 0;        // all input, cached or not
  std::uint64_t output_tokens = 0;       // all output, reasoning included
  std::uint64_t cache_read_tokens = 0;   // part of input_tokens
  std::uint64_t cache_write_tokens = 0;  // part of input_tokens
  std::uint64_t reasoning_tokens = 0;    // part of output_tokens
  // What the calls cost at the model's prices, in millionths of `currency`; currency "" when the
  // model has no prices (then cost_micros is 0 and means nothing).
  std::uint64_t cost_micros = 0;
  std::string currency;
  std::uint64_t tool_calls = 0;
  std::map<std::string, std::uint64_t> tool_calls_by_kind;
  std::uint64_t output_bytes = 0;
  std::chrono::milliseconds elapsed{0};
};

class BudgetCounter {
 public:
  explicit BudgetCounter(Budgets budgets, std::optional<TokenPrices> prices = std::nullopt);

  // Before a model call: the turn, token and cost budgets.
  [[nodiscard]] Refusal CheckModelCall() const;
  // Counts one model turn; returns its 1-based number.
  std::uint64_t CountModelTurn();
  // Tokens (input + output) the model-token budget still allows; nullopt when it is unlimited.
  [[nodiscard]] std::optional<std::uint64_t> TokensLeft() const;
  // The output cap for the next model call: `max_output` (the model's per-response limit), lowered
  // so that the call's estimated input plus its output stays within the tokens left, and so that
  // its worst-case cost (the estimated input at the dearest input price, the cap at the output
  // price) stays within the money left. nullopt, with the reason in `why`, when the estimated
  // input alone would use up what is left: the call would spend what the budget does not have, so
  // it is not made.
  [[nodiscard]] std::optional<std::uint64_t> OutputCap(std::uint64_t max_output,
                                                       std::uint64_t estimated_input,
                                                       std::string* why) const;
  // Adds a response's usage and its cost; the reason when the token or cost budget is now
  // exceeded.
  std::optional<std::string> AddTokens(const protocol::Usage& usage);

  // Before a tool call of `tool` ("run_command"): the total and the per-kind budgets.
  [[nodiscard]] Refusal CheckToolCall(const std::string& tool) const;
  void CountToolCall(const std::string& tool);

  // Adds a tool result's output size; the reason when the output budget is now exceeded.
  std::optional<std::string> AddOutput(std::uint64_t bytes);

  // The reason the wall-time budget ends the run ("wall-time budget (30m) reached"), for the timer.
  [[nodiscard]] std::string WallTimeReason() const;
  void SetElapsed(std::chrono::milliseconds elapsed) { used_.elapsed = elapsed; }

  [[nodiscard]] const Budgets& budgets() const { return budgets_; }
  [[nodiscard]] const BudgetUsage& used() const { return used_; }

 private:
  [[nodiscard]] std::optional<std::uint64_t> MicrosLeft() const;

  Budgets budgets_;
  std::optional<TokenPrices> prices_;
  BudgetUsage used_;
};

}  // namespace cagent::launcher::broker
