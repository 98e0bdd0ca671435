// `cagent log RUN` shows a run's event log (state changes, model turns, tool requests, the
// broker's decisions, capture and verification) as one readable line per entry, after checking
// the hash chain; `cagent log verify FILE` only checks a log's chain (launcher/broker/audit_log.h)
// and says whether it is intact, or which line breaks the chain and how; `cagent log check
// TARGET` checks the chain and every line against the schema (launcher/broker/audit_schema.h);
// `cagent log schema` prints that schema (the text docs/audit-log.md embeds). Runs in cagent,
// reads files only; every text taken from a log is made terminal-safe before it is printed.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace CLI {
class App;
}

namespace cagent::launcher::cli {

struct LogOptions {
  CLI::App* verify_cmd = nullptr;
  CLI::App* check_cmd = nullptr;
  CLI::App* schema_cmd = nullptr;
  std::string run;   // `log RUN`: a run id, unique prefix, or "last"
  std::string file;  // `log verify FILE`, `log check TARGET`: a log, a run directory (or a run)
  bool json = false;
};

// Registers `log` and its subcommands on `app`; `options` is filled when the command line is
// parsed and must outlive the parse.
CLI::App* AddLogCommand(CLI::App& app, LogOptions& options);

// Runs the parsed command; prints the result on stdout (problems on stderr) and returns the exit
// status: 0 the chain verifies (and, for a run, matches the entry count and head digest recorded
// in its result.json; for `check`, every line conforms to the schema too), 1 it does not, 2 usage
// error or unreadable file. `schema` always returns 0.
int RunLogCommand(const LogOptions& options);

// One entry (a parsed line) in words, for `cagent log RUN`: what the schema's fields for its event
// say, made terminal-safe and cut to one line. `calls` carries the model's tool calls from earlier
// model_result entries (by call id) so a decision (or a tool_request) can show the arguments the
// model gave when the log has them. Never fails; an unknown event shows its detail as JSON.
std::string DescribeAuditEntry(const nlohmann::json& entry,
                               std::map<std::string, nlohmann::json>& calls);

}  // namespace cagent::launcher::cli
