// The command-line options `cagent run` and `cagent agent` share: which model, how approvals are
// handled, and budget limits that can only lower the profile's. One definition, so the two
// commands cannot drift apart in spelling, help text or validation. Runs in cagent (trusted).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "launcher/broker/broker.h"
#include "launcher/egress/proxy.h"
#include "launcher/model/model_provider.h"

namespace CLI {
class App;
}

namespace cagent::launcher::cli {

struct SessionFlags {
  std::string model;                               // PROVIDER:MODEL; default $CAGENT_MODEL
  std::string model_url;                           // base URL override
  std::optional<double> temperature;               // 0..2; unset = the provider's default
  std::optional<std::uint64_t> max_output_tokens;  // per response; unset = 4096
  std::string reasoning_effort;                    // minimal | low | medium | high; "" = unset
  std::string models_config;                       // models.toml; "" = the default places
  std::string max_cost;                            // "2.50", "2.50USD"; "" = unset
  std::string approve = "policy";                  // policy | never | stop
  std::vector<std::string> pre_approve;
  std::string pre_approve_file;
  std::optional<std::uint64_t> max_turns, max_tool_calls, max_tokens, max_output;
  std::string wall_time;
  std::vector<std::string> allow_host;  // --allow-host: refused (a run always has a profile)
  std::vector<std::string> resolve;     // --resolve HOST:PORT:ADDR
};

// What the flags mean once checked.
struct SessionSettings {
  model::ModelSpec model;
  std::string model_label;  // as given ("replay:demo.jsonl")
  broker::ApprovalMode approval = broker::ApprovalMode::kPolicy;
  std::vector<std::string> pre_approvals;
  std::string pre_approval_file;
  broker::Budgets budget_overrides;
  std::vector<egress::ResolveOverride> resolve;  // for the egress proxy (hosts rules)
};

// Registers --model, --model-url, --models-config, --temperature, --reasoning-effort,
// --max-output-tokens, --approve, --pre-approve, --pre-approve-file and the Budgets group
// (--max-turns, --max-tool-calls, --max-tokens, --max-cost, --max-output, --wall-time) on `cmd`.
void AddSessionFlags(CLI::App* cmd, SessionFlags& flags);

// Checks the flags: a model is required (flag or $CAGENT_MODEL) and must parse; --temperature
// must be a number from 0 to 2, --max-output-tokens at least 1; --wall-time must be a duration,
// --max-cost an amount. Reads models.toml (model_config.h) and applies the model's entry and
// --reasoning-effort to the spec. The error (code kInvalidInput) names the flag or the file and is
// meant for the user as it is.
Result<SessionSettings> ResolveSessionFlags(const SessionFlags& flags);

// The terminal approvals are asked on: /dev/tty when approvals may be asked at all (--approve
// policy) and stdin is a terminal; otherwise an empty fd, and the session is headless.
UniqueFd OpenApprovalTerminal(broker::ApprovalMode mode);

}  // namespace cagent::launcher::cli
