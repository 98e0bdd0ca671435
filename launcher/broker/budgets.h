// Budget counting for one run: what the broker has let through so far, checked against the
// run's Budgets (broker.h; BudgetsFromPolicy and LowerBudgets are implemented in budgets.cc).
// Runs in cagent (trusted), on the broker's thread; pure (no I/O, no clock: elapsed time is given).
//
// Each Check* answers "may one more of these happen?" and, when not, the reason the run ends,
// naming the budget and its value ("model-turn budget (40) reached"). Count* records what
// happened. Tokens and output bytes are known only after the fact, so Add* counts them and says
// whether the budget is now exceeded.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "common/protocol.h"
#include "common/result.h"
#include "launcher/broker/broker.h"

namespace cagent::launcher::broker {

class BudgetCounter {
 public:
  explicit BudgetCounter(Budgets budgets) : budgets_(std::move(budgets)) {}

  // Before a model call: the turn and token budgets.
  [[nodiscard]] Refusal CheckModelCall() const;
  // Counts one model turn; returns its 1-based number.
  std::uint64_t CountModelTurn();
  // Tokens (input + output) the model-token budget still allows; nullopt when it is unlimited.
  [[nodiscard]] std::optional<std::uint64_t> TokensLeft() const;
  // The output cap for the next model call: `max_output` (the model's per-response limit), lowered
  // so that the call's estimated input plus its output stays within the tokens left. nullopt, with
  // the reason in `why`, when the estimated input alone would use up the tokens left: the call
  // would spend money the budget does not have, so it is not made.
  [[nodiscard]] std::optional<std::uint64_t> OutputCap(std::uint64_t max_output,
                                                       std::uint64_t estimated_input,
                                                       std::string* why) const;
  // Adds a response's usage; the reason when the token budget is now exceeded.
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
  Budgets budgets_;
  BudgetUsage used_;
};

}  // namespace cagent::launcher::broker
