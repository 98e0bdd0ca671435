// cagent-full: every command (cli/entry.h). Parses the command line and hands off to one
// subcommand. The launcher, `cagent`, runs this program in its place for every command but
// `exec`, `policy` and `--version` (cli/main.cc).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/exit_codes.h"
#include "launcher/cli/agent_command.h"
#include "launcher/cli/batch_command.h"
#include "launcher/cli/cache_command.h"
#include "launcher/cli/completion_command.h"
#include "launcher/cli/doctor_command.h"
#include "launcher/cli/entry.h"
#include "launcher/cli/exec_command.h"
#include "launcher/cli/log_command.h"
#include "launcher/cli/mcp_command.h"
#include "launcher/cli/policy_command.h"
#include "launcher/cli/profile_command.h"
#include "launcher/cli/run_command.h"
#include "launcher/egress/tls.h"
#include "launcher/egress/tls/openssl_tls.h"
#include "policy/language/checker.h"

int main(int argc, char** argv) {
  // `cagent --version` alone: what CLI11 prints for it, without building a parser or the
  // exception CLI11 reports it with (unwinding pages in the unwind tables: a fifth of the
  // instructions `--version` ran).
  if (argc == 2 && std::string_view(argv[1]) == "--version") {
    return std::fputs("cagent " CAGENT_VERSION "\n", stdout) < 0 ? 1 : 0;
  }
  cagent::launcher::cli::RememberCommandLine(argc, argv);
  std::vector<char*> help_argv;
  if (auto code = cagent::launcher::cli::RewriteHelp(argc, argv, help_argv)) return *code;
  cagent::launcher::cli::SetUpProcess(argc, argv);
  // The OpenSSL half of the egress proxy (interception, for credentials); the model providers'
  // TLS is linked in directly.
  cagent::launcher::egress::InstallTls(&cagent::launcher::egress::OpenSslTls());

  const std::unique_ptr<CLI::App> app_owner = cagent::launcher::cli::MakeApp();
  CLI::App& app = *app_owner;

  // Only the subcommand the command line names is built: CLI11 constructs every option of every
  // subcommand added, and building the whole tree was about a third of what `cagent exec -- true`
  // computes before its clone (callgrind; docs/performance.md, "Launch latency"). The name is
  // the first argument, as there are no global options but --help and --version; no argument or
  // --help gets the whole tree, so help lists every subcommand, and a misspelt name is refused
  // below without building anything.
  const std::string_view named = argc > 1 ? std::string_view(argv[1]) : std::string_view();
  bool known = false;
  std::vector<std::string_view> subcommands = {"help"};  // every name wants() is asked about
  auto wants = [&](std::initializer_list<std::string_view> names) {
    subcommands.insert(subcommands.end(), names.begin(), names.end());
    const bool hit = std::find(names.begin(), names.end(), named) != names.end();
    known = known || hit;
    return hit;
  };
  const bool want_exec = wants({"exec"}), want_doctor = wants({"doctor"}),
             want_policy = wants({"policy"}), want_log = wants({"log"}), want_run = wants({"run"}),
             want_runs = wants({"runs", "show", "diff", "apply", "rm"}),
             want_agent = wants({"agent"}), want_profile = wants({"profile"}),
             want_mcp = wants({"mcp"}), want_cache = wants({"cache"}),
             want_batch = wants({"batch"}), want_completion = wants({"completion"});
  // A first argument that is neither a subcommand nor a global option is an error here, with the
  // nearest name as a hint, before the whole tree is built for CLI11 to say less ("A subcommand
  // is required").
  if (!known && !named.empty() && named != "--version" && named != "--help" && named != "-h") {
    const bool option = named.front() == '-';
    const std::string guess = option ? cagent::policy::DidYouMean(named, {"--help", "--version"})
                                     : cagent::policy::DidYouMean(named, subcommands);
    std::fprintf(stderr, "cagent: unknown %s '%.*s'; %s\n", option ? "option" : "subcommand",
                 static_cast<int>(named.size()), named.data(),
                 guess.empty() ? (option ? "run 'cagent --help' for usage"
                                         : "run 'cagent --help' for the list of subcommands")
                               : ("did you mean '" + guess + "'?").c_str());
    return cagent::ToInt(cagent::ExitCode::kUsage);
  }
  // --version with something after it still needs no subcommand.
  // `completion` describes the whole tree.
  const bool all = (!known && named != "--version") || want_completion;

  cagent::launcher::cli::ExecOptions exec_options;
  cagent::launcher::cli::DoctorOptions doctor_options;
  cagent::launcher::cli::PolicyOptions policy_options;
  cagent::launcher::cli::LogOptions log_options;
  cagent::launcher::cli::RunCommandOptions run_options;
  cagent::launcher::cli::RunsCommandOptions runs_options;
  cagent::launcher::cli::AgentOptions agent_options;
  cagent::launcher::cli::ProfileOptions profile_options;
  cagent::launcher::cli::McpOptions mcp_options;
  cagent::launcher::cli::CacheOptions cache_options;
  cagent::launcher::cli::BatchOptions batch_options;
  cagent::launcher::cli::CompletionOptions completion_options;
  CLI::App *exec = nullptr, *doctor = nullptr, *policy = nullptr, *log_cmd = nullptr,
           *run = nullptr, *agent = nullptr, *profile = nullptr, *mcp = nullptr, *cache = nullptr;
  std::vector<CLI::App*> runs_commands;
  // In the order `cagent --help` lists them.
  if (all || want_exec) exec = cagent::launcher::cli::AddExecCommand(app, exec_options);
  if (all || want_doctor) doctor = cagent::launcher::cli::AddDoctorCommand(app, doctor_options);
  if (all || want_policy) policy = cagent::launcher::cli::AddPolicyCommand(app, policy_options);
  if (all || want_log) log_cmd = cagent::launcher::cli::AddLogCommand(app, log_options);
  if (all || want_run) run = cagent::launcher::cli::AddRunCommand(app, run_options);
  if (all || want_runs) runs_commands = cagent::launcher::cli::AddRunsCommands(app, runs_options);
  if (all || want_agent) agent = cagent::launcher::cli::AddAgentCommand(app, agent_options);
  if (all || want_profile) {
    profile = cagent::launcher::cli::AddProfileCommand(app, profile_options);
  }
  if (all || want_mcp) mcp = cagent::launcher::cli::AddMcpCommand(app, mcp_options);
  if (all || want_cache) cache = cagent::launcher::cli::AddCacheCommand(app, cache_options);
  CLI::App* batch =
      all || want_batch ? cagent::launcher::cli::AddBatchCommand(app, batch_options) : nullptr;
  CLI::App* completion =
      all ? cagent::launcher::cli::AddCompletionCommand(app, completion_options) : nullptr;
  auto parsed = [](const CLI::App* c) { return c != nullptr && c->parsed(); };

  if (auto code = cagent::launcher::cli::Parse(app, argc, argv)) return *code;
  return cagent::launcher::cli::RunGuarded([&]() -> int {
    if (parsed(exec)) return cagent::launcher::cli::RunExecCommand(exec_options);
    if (parsed(doctor)) return cagent::launcher::cli::RunDoctorCommand(doctor_options);
    if (parsed(policy)) return cagent::launcher::cli::RunPolicyCommand(policy_options);
    if (parsed(log_cmd)) return cagent::launcher::cli::RunLogCommand(log_options);
    if (parsed(profile)) return cagent::launcher::cli::RunProfileCommand(profile_options);
    if (parsed(agent)) return cagent::launcher::cli::RunAgentCommand(agent_options);
    if (parsed(run)) return cagent::launcher::cli::RunRunCommand(run_options);
    if (parsed(mcp)) return cagent::launcher::cli::RunMcpCommand(mcp_options);
    if (parsed(cache)) return cagent::launcher::cli::RunCacheCommand(cache_options);
    if (parsed(batch)) return cagent::launcher::cli::RunBatchCommand(batch_options);
    if (parsed(completion)) {
      return cagent::launcher::cli::RunCompletionCommand(app, completion_options);
    }
    for (CLI::App* c : runs_commands) {
      if (c->parsed()) return cagent::launcher::cli::RunRunsCommand(runs_options);
    }
    return cagent::ToInt(cagent::ExitCode::kUsage);
  });
}
