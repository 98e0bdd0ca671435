// `cagent log RUN` shows a run's event log (state changes, model turns, tool requests, the
// broker's decisions, capture and verification) as one readable line per entry, after checking
// the hash chain; `cagent log verify FILE` only checks a log (launcher/broker/audit_log.h) and
// says whether it is intact, or which line breaks the chain and how.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace cagent::launcher {

struct LogOptions {
  CLI::App* verify_cmd = nullptr;
  std::string run;   // `log RUN`: a run id, unique prefix, or "last"
  std::string file;  // `log verify FILE`: the log, or a run directory holding events.jsonl
  bool json = false;
};

// Registers `log` and its subcommands on `app`; `options` is filled when the command line is
// parsed and must outlive the parse.
CLI::App* AddLogCommand(CLI::App& app, LogOptions& options);

// Runs the parsed command; prints the result on stdout (problems on stderr) and returns the exit
// status: 0 the chain verifies (and, for a run, matches the entry count and head digest recorded
// in its result.json), 1 it does not, 2 usage error or unreadable file.
int RunLogCommand(const LogOptions& options);

}  // namespace cagent::launcher
