// `cagent exec`: run one command in a sandbox built from a profile (or the launcher's defaults).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/profile/narrow.h"

namespace CLI {
class App;
}

namespace cagent::launcher::cli {

struct ExecOptions {
  std::string profile = "default";
  bool trust_repo_profile = false;  // accept ./.cagent/NAME shadowing a user/built-in NAME
  std::string workspace;            // default: the current directory
  bool allow_home =
      false;  // --allow-home: accept a named home (launcher/profile/workspace_guard.h)
  bool no_git_identity = false;  // --no-git-identity (launcher/session/git_identity.h)
  bool json = false;
  // Where the --json record goes (issue #20): never stdout, which is the command's. A file
  // (created or truncated before the launch) or a descriptor cagent inherited (3 or above).
  std::string json_file;  // --json-file FILE
  int json_fd = -1;       // --json-fd N
  bool quiet = false;
  ExecOverrides overrides;  // --ro, --rw, --env, --timeout, limits, ... (launcher/profile/narrow.h)
  bool print_seccomp = false;
  // Filtered egress (issue #16): hosts allowed without a profile, curl-style name overrides, and
  // how `ask` hosts are answered.
  std::vector<std::string> allow_hosts;  // --allow-host HOST[:PORT]
  std::vector<std::string> resolve;      // --resolve HOST:PORT:ADDR
  std::string approve;                   // --approve: "" (terminal when there is one) | never
  std::vector<std::string> pre_approve;  // --pre-approve 'host: PATTERN'
  // The sandbox's own terminal (launcher/sandbox/tty.h): --tty forces it, --no-tty refuses it;
  // neither: on when cagent's stdin and stdout are both terminals.
  bool tty = false;
  bool no_tty = false;
  std::vector<std::string> command;
};

// Adds the `exec` subcommand to `app`; the options are written into `options`.
CLI::App* AddExecCommand(CLI::App& app, ExecOptions& options);

// Runs `cagent exec`: resolves the workspace, loads the profile, narrows its spec with the
// overrides (Narrow), launches, reports. Returns the command's exit status, or one of
// common/exit_codes.h's reserved ones (kUsage for a bad command line, a profile that does not
// compile or an override that would widen it; kSetupFailed when the sandbox cannot be built).
int RunExecCommand(const ExecOptions& options);

}  // namespace cagent::launcher::cli
