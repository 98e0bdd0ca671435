// What the two programs' main() share (issue 37). cagent is two executables:
//   cagent       the launcher: `exec`, `policy` and `--version`, linked without OpenSSL and the
//                model providers, so a launch maps and relocates none of them (cli/main.cc);
//   cagent-full  every command (cli/full_main.cc), installed in cagent's libexec directory; the
//                launcher runs it in its own place (execve, the same arguments) for any other
//                command, and `exec` does for a profile with credentials (interception needs TLS).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cagent::launcher::cli {

// The command line as main() got it, before any rewriting: what cagent-full is given.
void RememberCommandLine(int argc, char** argv);

// Replaces this process with cagent-full and the remembered command line. Returns only on
// failure, with the exit status to end with (the reason printed). `why` names what needs it, for
// the message.
int RunInFullProgram(std::string_view why);

// The program people run, for a command line cagent writes down for later (a Slurm script): the
// launcher beside this program (the build tree) or in ../../bin/ (cagent-full installed in
// PREFIX/libexec/cagent/), else this program itself (the launcher, or a lone cagent-full, which
// answers every command too). "" when /proc/self/exe cannot be read.
std::string LauncherPath();

// `cagent help [SUBCOMMAND]` is `cagent [SUBCOMMAND] --help`: rewrites argc/argv (pointing into
// `storage`) before anything looks at them. An exit status when the form is wrong.
std::optional<int> RewriteHelp(int& argc, char**& argv, std::vector<char*>& storage);

// SIGPIPE ignored, the "cagent: " logger on stderr, argv's area remembered for the process title.
void SetUpProcess(int argc, char** argv);

// The top-level parser: description, --version, one subcommand required, the footer.
std::unique_ptr<CLI::App> MakeApp();

// Parses; an exit status when the program ends here (help, version, a usage error with its hint).
std::optional<int> Parse(CLI::App& app, int argc, char** argv);

// Runs the chosen subcommand with the last-resort handlers on (run/last_resort.h): an exception
// it does not catch is reported, recorded in a run's result.json if one is armed, and ends the
// program with setup-failed.
int RunGuarded(const std::function<int()>& run);

}  // namespace cagent::launcher::cli
