// cagent: the launcher (cli/entry.h). `cagent exec`, `cagent policy …` and `cagent --version` run
// here, in a program that links neither OpenSSL nor the model providers, MCP or batch: a launch
// maps and relocates only what it uses. Every other command line (`run`, `mcp`, `batch`, `--help`
// without a subcommand, a misspelt name…) is handed to cagent-full unchanged, which answers it.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string_view>
#include <vector>

#include "common/exit_codes.h"
#include "launcher/cli/entry.h"
#include "launcher/cli/exec_command.h"
#include "launcher/cli/policy_command.h"

int main(int argc, char** argv) {
  // `cagent --version` alone: what CLI11 prints for it, without building a parser or the
  // exception CLI11 reports it with (unwinding pages in the unwind tables: a fifth of the
  // instructions `--version` ran).
  if (argc == 2 && std::string_view(argv[1]) == "--version") {
    return std::fputs("cagent " CAGENT_VERSION "\n", stdout) < 0 ? 1 : 0;
  }
  namespace cli = cagent::launcher::cli;
  cli::RememberCommandLine(argc, argv);
  std::vector<char*> help_argv;
  if (auto code = cli::RewriteHelp(argc, argv, help_argv)) return *code;
  const std::string_view named = argc > 1 ? std::string_view(argv[1]) : std::string_view();
  const bool exec = named == "exec", policy = named == "policy";
  if (!exec && !policy) return cli::RunInFullProgram(named.empty() ? "this command" : named);
  cli::SetUpProcess(argc, argv);

  const std::unique_ptr<CLI::App> app = cli::MakeApp();
  cli::ExecOptions exec_options;
  cli::PolicyOptions policy_options;
  // Only the named subcommand is built (CLI11 constructs every option of every subcommand given).
  CLI::App* sub =
      exec ? cli::AddExecCommand(*app, exec_options) : cli::AddPolicyCommand(*app, policy_options);
  if (auto code = cli::Parse(*app, argc, argv)) return *code;
  return cli::RunGuarded([&]() -> int {
    if (!sub->parsed()) return cagent::ToInt(cagent::ExitCode::kUsage);
    return exec ? cli::RunExecCommand(exec_options) : cli::RunPolicyCommand(policy_options);
  });
}
