// The exit statuses of cagent and cagent-agent: one table, one meaning per number in every
// command. docs/cagent.1 (EXIT STATUS) lists them per command; keep the two in step.
//
// `cagent exec` passes the sandboxed command's own status through, so 0-123 and 128+N (killed by
// signal N) are the command's there; cagent itself uses only 2 and 124-127 in exec, and `--json`
// says which side a status came from. The other commands use the table as is.
#pragma once

#include <string_view>

#include "common/result.h"

namespace cagent {

enum class ExitCode : int {
  kOk = 0,
  // The command worked and the answer is "no": verification failed (run), a check found errors,
  // a test case failed, a diff widens, an audit has findings, a log does not verify.
  kFailed = 1,
  // The command line or an input it names is wrong: an unknown flag, an unreadable or malformed
  // file, a profile that does not compile, a narrowing that would widen.
  kUsage = 2,
  // A run or an agent session did not complete: the agent failed, the broker ended it, the
  // patch could not be captured.
  kRunFailed = 3,
  // A run or an agent session stopped at a request that needs a human's approval and nobody
  // could be asked (--approval never-ask or no terminal).
  kNeedsApproval = 4,
  // `policy explain`: the request would be denied.
  kDenied = 5,
  // `policy explain`: the request would be asked.
  kAsk = 6,
  // A run or an agent session ended normally and changed nothing: no patch to verify or apply
  // (the agent found nothing to do, gave up, or every change it tried was refused).
  kNoChange = 7,
  // `exec --timeout` (and a run's wall-clock budget for its commands) expired.
  kTimedOut = 124,
  // The sandbox could not be built, or a restriction the profile requires is missing on this
  // machine (fail closed); cagent names the step.
  kSetupFailed = 125,
  // exec: the command was found but could not be executed.
  kCannotExecute = 126,
  // exec: the command was not found inside the sandbox.
  kNotFound = 127,
  // Interrupted (SIGINT/SIGTERM) and cleaned up: 128 + SIGINT.
  kCancelled = 130,
};

// The status to return from main().
[[nodiscard]] constexpr int ToInt(ExitCode c) { return static_cast<int>(c); }

// The table's name for a status ("usage", "setup-failed", ...), for --json output and the man
// page generator; "" for a number the table does not reserve.
[[nodiscard]] std::string_view ExitCodeName(int status);

// The status a command returns for an Error it cannot recover from, by the error's code: kUsage
// for ErrorCode::kInvalidInput, kSetupFailed for kUnsupported and kSetup, kCancelled for
// kCancelled, `otherwise` for the rest.
[[nodiscard]] ExitCode ExitCodeFor(const Error& error, ExitCode otherwise);

}  // namespace cagent
