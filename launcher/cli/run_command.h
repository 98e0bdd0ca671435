// `cagent run` and the commands that look at runs afterwards: runs, show, diff, log, apply, rm.
// Runs in cagent (trusted).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/cli/session_flags.h"
#include "launcher/run/session_record.h"

namespace CLI {
class App;
}

namespace cagent::launcher::cli {

struct RunCommandOptions {
  std::string profile;
  std::string task_file;
  std::string repo;
  std::string commit;
  std::string state_dir;  // --state-dir DIR: runs under DIR/runs/ (cagent batch: DIR/<task>/state)
  bool allow_dirty = false;
  bool allow_unverified = false;
  bool trust_repo_profile = false;
  SessionFlags session;  // --model, --approve, --pre-approve, budgets
  bool json = false;
  bool quiet = false;        // -q: no downgrade lines on stderr (still in result.json)
  std::string events_jsonl;  // --events-jsonl FILE
  bool verbose = false;      // --verbose: the transcript (launcher/cli/transcript.h) on stderr
};

struct RunsCommandOptions {
  std::string verb;    // runs | show | diff | apply | rm
  std::string run;     // run id (or unique prefix)
  std::string branch;  // apply --branch
  std::string repo;    // apply --repo (default: the run's recorded repository); runs --repo
  std::string status;  // runs --status
  // --state-dir DIR: the runs under DIR/runs/ (where `cagent run --state-dir DIR` put them; a
  // batch task's: RESULTS/<id>/state), not the caller's state directory.
  std::string state_dir;
  bool json = false;
  bool force = false;  // rm of a run that is not finished
  // rm of many runs (issue #20): --all, --failed, --older-than AGE; --dry-run lists them.
  bool all = false;
  bool failed = false;
  std::string older_than;
  bool dry_run = false;
};

// Whether `cagent run`'s progress is one line redrawn in place ("\r\033[K") rather than plain
// lines: only when stderr is a terminal, TERM is set and not "dumb", and NO_COLOR is unset or
// empty (issue #20: a dumb terminal or a log capturing a pty got the escape sequences).
[[nodiscard]] bool ProgressRedraws(bool stderr_is_terminal, const char* term, const char* no_color);

// Adds `run`; returns it.
CLI::App* AddRunCommand(CLI::App& app, RunCommandOptions& options);
int RunRunCommand(const RunCommandOptions& options);

// A run or a `cagent agent` session (issue #20), as `cagent runs` lists them.
struct RunOrSession {
  bool session = false;
  std::string id;
  std::string run_dir;                // a run's directory
  run::SessionEntry session_entry{};  // a session's files and record
};
// The run or session given as an exact id, a unique prefix of one, or "last" (the newest run, or
// with `last_may_be_session` the newest of both).
Result<RunOrSession> ResolveRunOrSession(const std::string& id, bool last_may_be_session);

// The directory of a run given as an exact id, a unique prefix of one, or "last" (the newest
// run); a session's id is an error that says to use `cagent log`.
Result<std::string> ResolveRunDirectory(const std::string& id);

// Adds runs, show, diff, apply, rm (`log RUN` is registered with `log verify`); each parsed
// subcommand sets options.verb.
std::vector<CLI::App*> AddRunsCommands(CLI::App& app, RunsCommandOptions& options);
int RunRunsCommand(const RunsCommandOptions& options);

}  // namespace cagent::launcher::cli
