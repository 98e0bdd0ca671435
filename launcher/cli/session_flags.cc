#include "launcher/cli/session_flags.h"

#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "common/duration.h"
#include "common/money.h"
#include "launcher/model/model_config.h"

namespace cagent::launcher::cli {

void AddSessionFlags(CLI::App* cmd, SessionFlags& f) {
  cmd->add_option("--model", f.model,
                  "PROVIDER:MODEL: openai:MODEL (any OpenAI-compatible chat-completions server; "
                  "OPENAI_API_KEY, OPENAI_BASE_URL), anthropic:MODEL (ANTHROPIC_API_KEY, "
                  "ANTHROPIC_BASE_URL) or replay:FILE (a recorded session, JSON lines). Default: "
                  "$CAGENT_MODEL.");
  cmd->add_option("--model-url", f.model_url,
                  "Base URL of the provider (overrides the environment); plain http:// is for "
                  "local servers and needs no key.");
  cmd->add_option("--models-config", f.models_config,
                  "The models.toml that describes models: family (request shape), limits, "
                  "reasoning settings and prices per million tokens (docs/model-providers.md). "
                  "Default: $CAGENT_MODELS_CONFIG, else $XDG_CONFIG_HOME/cagent/models.toml, else "
                  "~/.config/cagent/models.toml (read when it exists).");
  cmd->add_option("--reasoning-effort", f.reasoning_effort,
                  "How hard a reasoning model thinks: minimal, low, medium or high. OpenAI "
                  "reasoning models get it as reasoning_effort; Anthropic models get extended "
                  "thinking with a budget of 1024, 2048, 8192 or 24576 tokens (within each "
                  "call's output cap). Refused for models that take none. Default: the model's "
                  "models.toml entry, else not sent.")
      ->check(CLI::IsMember({"minimal", "low", "medium", "high"}));
  cmd->add_option("--temperature", f.temperature,
                  "Sampling temperature sent with every model request, from 0 (most "
                  "deterministic) to 2 (most varied). Default: not sent, so the provider's own "
                  "default applies. Ignored by replay:.");
  cmd->add_option("--max-output-tokens", f.max_output_tokens,
                  "Most tokens the model may write in one response (default 4096). Each request "
                  "asks for this many, or fewer when the remaining --max-tokens budget is "
                  "smaller; a response cut off at the limit is reported to the agent as such.");
  cmd->add_option("--approve", f.approve,
                  "What happens when the profile says 'ask'. policy: the profile's approval "
                  "setting decides, asking on this terminal (headless without one); never: every "
                  "ask is denied unless pre-approved, and the agent is told so; stop: the first "
                  "ask that was not pre-approved ends the run with status needs-approval, "
                  "recording the exact action and the --pre-approve value that allows it.")
      ->check(CLI::IsMember({"policy", "never", "stop"}));
  cmd->add_option("--pre-approve", f.pre_approve,
                  "Approve in advance: 'TOOL: PATTERN' (e.g. 'run_command: npm install *', "
                  "matched word for word) or 'sha256:DIGEST' of one exact action (repeatable).");
  cmd->add_option("--pre-approve-file", f.pre_approve_file,
                  "File of pre-approvals, one per line ('#' comments).");
  cmd->add_option("--resolve", f.resolve,
                  "HOST:PORT:ADDR: when the sandbox asks the egress proxy for HOST:PORT (a "
                  "profile with a hosts section), connect to ADDR, as curl's --resolve. The "
                  "operator's own override: ADDR may be loopback or private. Repeatable.")
      ->group("Network")
      ->allow_extra_args(false);
  cmd->add_option("--allow-host", f.allow_host,
                  "Refused: a run always has a profile, and a host on the command line would "
                  "widen it; write a hosts section (pre-approve an asking host with "
                  "--pre-approve 'host: HOST:PORT').")
      ->group("Network")
      ->allow_extra_args(false);
  cmd->add_option("--max-turns", f.max_turns, "Lower the model-turn budget.")->group("Budgets");
  cmd->add_option("--max-tool-calls", f.max_tool_calls, "Lower the tool-call budget.")
      ->group("Budgets");
  cmd->add_option("--max-tokens", f.max_tokens, "Lower the model-token budget (in + out).")
      ->group("Budgets");
  cmd->add_option("--max-cost", f.max_cost,
                  "Lower (or set, when the profile has none) the model-cost budget: AMOUNT or "
                  "AMOUNT+CURRENCY, e.g. 0.50 or 0.50USD, at the prices of the model's "
                  "models.toml entry. A call whose worst case would overrun it is not made.")
      ->group("Budgets");
  cmd->add_option("--max-output", f.max_output,
                  "Lower the budget of tool output returned to the model (bytes).")
      ->group("Budgets");
  cmd->add_option("--wall-time", f.wall_time, "Lower the wall-time budget (e.g. 20m).")
      ->group("Budgets");
}

Result<SessionSettings> ResolveSessionFlags(const SessionFlags& f) {
  SessionSettings s;
  s.model_label = f.model;
  if (s.model_label.empty()) {
    if (const char* env = std::getenv("CAGENT_MODEL"); env != nullptr) s.model_label = env;
  }
  if (s.model_label.empty()) {
    return PlainError("no model", "pass --model PROVIDER:MODEL or set CAGENT_MODEL")
        .WithCode(Error::Code::kInvalidInput);
  }
  auto spec = model::ParseModelSpec(s.model_label);
  if (!spec) return std::move(spec.error()).WithCode(Error::Code::kInvalidInput);
  s.model = *spec;
  if (!f.model_url.empty()) s.model.base_url = f.model_url;
  if (f.temperature) {
    // Written so that NaN fails too.
    if (!(*f.temperature >= 0.0 && *f.temperature <= 2.0)) {
      return PlainError("--temperature " + std::to_string(*f.temperature),
                        "must be a number from 0 to 2 (e.g. --temperature 0.2)")
          .WithCode(Error::Code::kInvalidInput);
    }
    s.model.temperature = *f.temperature;
  }
  if (f.max_output_tokens) {
    if (*f.max_output_tokens == 0) {
      return PlainError("--max-output-tokens 0",
                        "must be at least 1 (leave it out for the default, 4096)")
          .WithCode(Error::Code::kInvalidInput);
    }
    s.model.max_output_tokens = *f.max_output_tokens;
  }
  model::Environment env;
  for (const char* name : {"CAGENT_MODELS_CONFIG", "XDG_CONFIG_HOME", "HOME"}) {
    if (const char* v = std::getenv(name); v != nullptr) env[name] = v;
  }
  auto config = model::LoadModelConfig(f.models_config, env);
  if (!config) return std::move(config.error()).WithCode(Error::Code::kInvalidInput);
  if (auto st = model::ApplyModelConfig(s.model, s.model_label, *config, f.reasoning_effort); !st) {
    return std::move(st.error()).WithCode(Error::Code::kInvalidInput);
  }
  if (!f.max_cost.empty()) {
    auto cost = ParseMoneyWord(f.max_cost, "");
    if (!cost) {
      return PlainError("--max-cost " + f.max_cost, cost.error().detail)
          .WithCode(Error::Code::kInvalidInput);
    }
    s.budget_overrides.model_cost = *cost;
  }

  s.approval = f.approve == "never"  ? broker::ApprovalMode::kNever
               : f.approve == "stop" ? broker::ApprovalMode::kStop
                                     : broker::ApprovalMode::kPolicy;
  if (!f.allow_host.empty()) {
    return PlainError("--allow-host " + f.allow_host.front(),
                      "it would widen the profile; add the host to the profile's hosts section "
                      "(docs/policy-language.md, \"hosts\")")
        .WithCode(Error::Code::kInvalidInput);
  }
  for (const std::string& v : f.resolve) {
    auto o = egress::ParseResolveOverride(v);
    if (!o) {
      return PlainError("--resolve " + v, o.error().Message()).WithCode(Error::Code::kInvalidInput);
    }
    s.resolve.push_back(std::move(*o));
  }
  s.pre_approvals = f.pre_approve;
  s.pre_approval_file = f.pre_approve_file;
  s.budget_overrides.model_turns = f.max_turns;
  s.budget_overrides.tool_calls = f.max_tool_calls;
  s.budget_overrides.model_tokens = f.max_tokens;
  s.budget_overrides.output_bytes = f.max_output;
  if (!f.wall_time.empty()) {
    auto d = ParseDuration(f.wall_time);
    if (!d) {
      return PlainError("--wall-time " + f.wall_time, d.error().Message())
          .WithCode(Error::Code::kInvalidInput);
    }
    s.budget_overrides.wall_time = *d;
  }
  return s;
}

UniqueFd OpenApprovalTerminal(broker::ApprovalMode mode) {
  UniqueFd tty;
  if (mode == broker::ApprovalMode::kPolicy && ::isatty(STDIN_FILENO) == 1) {
    tty.Reset(::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY));
  }
  return tty;
}

}  // namespace cagent::launcher::cli
