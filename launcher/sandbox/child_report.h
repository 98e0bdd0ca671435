// The fixed-size records the sandbox's init (and the command child before exec) send to cagent
// over the report pipe. Written from the child after clone, where nothing may allocate, throw or
// log: a record is a plain struct written with one write(2) (atomic for a pipe below PIPE_BUF).
#pragma once

#include <cstdint>
#include <string_view>

#include "common/exit_codes.h"

namespace cagent::launcher {

// The statuses the sandbox's init and the command child exit with when they, not the command,
// end the sandbox: the reserved numbers of common/exit_codes.h, named here for the code that runs
// after clone. `cagent exec` returns them as they are; its JSON result says which side a status
// came from (a command may itself exit 125).
inline constexpr int kExitSetupFailed = ToInt(ExitCode::kSetupFailed);  // the sandbox was not built
inline constexpr int kExitCannotExecute = ToInt(ExitCode::kCannotExecute);
inline constexpr int kExitNotFound = ToInt(ExitCode::kNotFound);

// Each step of building the sandbox in the child. The names are what users see in
// "cagent: sandbox setup failed at <step>: <error>".
enum class ChildStep : std::uint32_t {
  kDeathSignal,
  kWaitForParent,
  kParentGone,
  kSetHostname,
  kLoopbackUp,
  kMountPrivate,
  kMountStaging,
  kPivotToStaging,
  kMountNewRoot,
  kMountOp,  // `detail` holds the index of the MountOp that failed
  kMountProc,
  kDetachOldRoot,
  kPivotToNewRoot,
  kDropCapabilities,
  kNoNewPrivs,
  kSetsid,
  kSignalSetup,
  kForkCommand,
  kChdir,
  kCloseFds,
  kExec,
  kSubreaper,
  kRlimits,  // `detail` holds the resource number
  kCgroupNamespace,
  kLandlock,
  kSeccomp,
  // A mount path is not what PrepareMountPlan saw (a symlink on the way: ELOOP; gone: ENOENT;
  // another file: ESTALE); `detail` holds the MountOp index (launcher/sandbox/mountns.h, the race).
  kMountChanged,
  // A listener socket for cagent (netns.h) could not be made or sent; `detail` holds its index.
  kNetListeners,
  // The sandbox's own terminal (`exec --tty`, launcher/sandbox/tty.h) could not be opened or sent.
  kTerminal,
  // The terminal could not be made the command's controlling terminal (TIOCSCTTY).
  kControllingTerminal,
};

std::string_view ChildStepName(ChildStep step);

enum class ReportKind : std::uint32_t {
  kSetupFailed = 1,    // step/err/detail valid; the sandbox was not built
  kExecFailed = 2,     // err valid; the sandbox was built but the command could not be executed
  kCommandExited = 3,  // wait_status valid: the command's raw wait status, sent by init
};

struct ChildReport {
  ReportKind kind;
  ChildStep step;
  std::int32_t err;
  std::int32_t detail;
  std::int32_t wait_status;
};

}  // namespace cagent::launcher

namespace cagent::launcher {

// What a child-side step returns: `ok`, or the failing step with its errno and a step-specific
// detail (e.g. the MountOp index). Plain data, so it can be produced without allocating.
struct ChildResult {
  bool ok = true;
  ChildStep step = ChildStep::kDeathSignal;
  int err = 0;
  int detail = -1;

  static ChildResult Success() { return {}; }
  static ChildResult Failure(ChildStep s, int e, int d = -1) { return {false, s, e, d}; }
};

}  // namespace cagent::launcher
