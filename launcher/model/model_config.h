// models.toml: what cagent knows about a model that its name does not say — the request shape it
// takes (its family), its limits, its reasoning settings and its prices. Read by cagent (trusted)
// from the user's own configuration, never from the workspace or the profile (prices are the
// user's contract with a provider, not a repository's).
//
// The file is a small subset of TOML: `#` comments, tables `[model."PROVIDER:MODEL"]`, and
// `key = value` lines whose value is a string ("..."), a whole number, a decimal number or
// true/false. Anything else, an unknown key, a key given twice or a value of the wrong type is an
// error naming the file, line and column: a mistyped price must not pass silently.
//
//   [model."anthropic:claude-sonnet-4-5"]
//   family = "anthropic"          # openai-chat | openai-reasoning | anthropic
//   context_window = 200000
//   max_output_tokens = 16000
//   thinking_budget = 8000        # Anthropic extended thinking, tokens (0 = off)
//   prompt_caching = true         # Anthropic cache_control breakpoints (default true)
//   reasoning_effort = "medium"   # minimal | low | medium | high
//   currency = "USD"
//   input_per_mtok = 3.00         # prices per million tokens
//   cached_input_per_mtok = 0.30
//   cache_write_per_mtok = 3.75
//   output_per_mtok = 15.00
//
// A table applies to --model PROVIDER:MODEL when its name is that text, or a pattern with `*`
// matching it (the longest such pattern wins; an exact name beats every pattern). There are no
// built-in prices: a price that could go stale silently would make a money budget a guess.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/money.h"
#include "common/result.h"
#include "launcher/model/model_provider.h"

namespace cagent::launcher::model {

// One [model."..."] table; unset keys are nullopt.
struct ModelEntry {
  std::string name;   // the table's name: "anthropic:claude-sonnet-4-5" or a pattern
  std::string where;  // "models.toml:12"
  std::optional<ModelFamily> family;
  std::optional<std::uint64_t> context_window;
  std::optional<std::uint64_t> max_output_tokens;
  std::optional<std::uint64_t> thinking_budget;
  std::optional<bool> prompt_caching;
  std::optional<std::string> reasoning_effort;
  std::optional<std::string> currency;
  std::optional<double> input_per_mtok, cached_input_per_mtok, cache_write_per_mtok,
      output_per_mtok;
};

struct ModelConfig {
  std::string path;  // where it was read from ("" when there was no file)
  std::vector<ModelEntry> entries;

  // The entry for `label` (PROVIDER:MODEL): the exact name, else the longest matching pattern.
  [[nodiscard]] const ModelEntry* Find(std::string_view label) const;
};

// Parses the text of a models.toml; `path` names it in errors ("PATH:LINE:COL: ...").
Result<ModelConfig> ParseModelConfig(std::string_view text, const std::string& path);

// Reads the configuration: `explicit_path` when given (missing is an error), else
// $CAGENT_MODELS_CONFIG, else $XDG_CONFIG_HOME/cagent/models.toml, else
// $HOME/.config/cagent/models.toml (a missing default file is an empty configuration).
Result<ModelConfig> LoadModelConfig(const std::string& explicit_path, const Environment& env);

// The family a model has when no configuration names one: openai models whose name starts with
// o1, o3, o4 or gpt-5 are openai-reasoning, other openai models openai-chat; anthropic models
// anthropic; replay replay.
ModelFamily DefaultFamily(const std::string& provider, const std::string& model);
std::string_view FamilyName(ModelFamily family);
std::optional<ModelFamily> ParseFamily(std::string_view name);

// Whether `effort` is minimal, low, medium or high.
bool IsReasoningEffort(std::string_view effort);
// Anthropic's thinking budget for an effort: minimal 1024, low 2048, medium 8192, high 24576.
std::uint64_t ThinkingBudgetFor(std::string_view effort);

// Applies the entry for spec (if any) and `reasoning_effort` (the command line's, which beats the
// entry's) to `spec`: family (default by DefaultFamily), limits, thinking budget, caching, prices.
// Fails for a combination the provider would refuse: a reasoning effort for a family that takes
// none, a temperature with a reasoning family or with thinking, a price table without input and
// output prices or with a currency that is not a code.
Status ApplyModelConfig(ModelSpec& spec, const std::string& label, const ModelConfig& config,
                        const std::string& reasoning_effort);

}  // namespace cagent::launcher::model
