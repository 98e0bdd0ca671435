// `cagent run` and the commands that look at runs afterwards: runs, show, diff, log, apply, rm.
// Runs in cagent (trusted).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace CLI {
class App;
}

namespace cagent::launcher {

struct RunCommandOptions {
  std::string profile;
  std::string task_file;
  std::string repo;
  std::string commit;
  bool allow_dirty = false;
  std::string approve = "policy";
  std::vector<std::string> pre_approve;
  std::string pre_approve_file;
  std::string model;
  std::string model_url;
  std::optional<std::uint64_t> max_turns, max_tool_calls, max_tokens, max_output;
  std::string wall_time;
  bool json = false;
};

struct RunsCommandOptions {
  std::string verb;   // runs | show | diff | apply | rm
  std::string run;    // run id (or unique prefix)
  std::string branch; // apply --branch
  std::string repo;   // apply --repo (default: the run's recorded repository)
  bool json = false;
  bool force = false;   // rm of a run that is not finished
};

// Adds `run`; returns it.
CLI::App* AddRunCommand(CLI::App& app, RunCommandOptions& options);
int RunRunCommand(const RunCommandOptions& options);

// The directory of a run given as an exact id, a unique prefix of one, or "last".
Result<std::string> ResolveRunDirectory(const std::string& id);

// Adds runs, show, diff, apply, rm (`log RUN` is registered with `log verify`); each parsed subcommand sets options.verb.
std::vector<CLI::App*> AddRunsCommands(CLI::App& app, RunsCommandOptions& options);
int RunRunsCommand(const RunsCommandOptions& options);

}  // namespace cagent::launcher
