// `cagent completion bash|zsh|fish`: a shell completion script for cagent's subcommands and their
// options, generated from the command-line parser itself so it lists exactly what cagent accepts.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace cagent::launcher::cli {

struct CompletionOptions {
  std::string shell;  // "bash", "zsh" or "fish"
};

CLI::App* AddCompletionCommand(CLI::App& app, CompletionOptions& options);

// The script for `shell` describing every visible subcommand and option of `app` (the whole tree:
// the caller builds every subcommand before parsing). "" for an unknown shell.
std::string CompletionScript(const CLI::App& app, const std::string& shell);

// Prints CompletionScript(app, options.shell) on stdout; 0, or 1 when stdout cannot be written.
int RunCompletionCommand(const CLI::App& app, const CompletionOptions& options);

}  // namespace cagent::launcher::cli
