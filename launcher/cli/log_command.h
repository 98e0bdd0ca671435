// `cagent log verify FILE`: checks a run's hash-chained audit log (launcher/broker/audit_log.h)
// and says whether it is intact, or which line breaks the chain and how.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace cagent::launcher {

struct LogOptions {
  CLI::App* verify_cmd = nullptr;
  std::string file;  // the log, or a run directory holding events.jsonl
  bool json = false;
};

// Registers `log` and its subcommands on `app`; `options` is filled when the command line is
// parsed and must outlive the parse.
CLI::App* AddLogCommand(CLI::App& app, LogOptions& options);

// Runs the parsed subcommand; prints the result on stdout (problems on stderr) and returns the
// exit status: 0 the chain verifies, 1 it does not, 2 usage error or unreadable file.
int RunLogCommand(const LogOptions& options);

}  // namespace cagent::launcher
