#include "launcher/sandbox/child_report.h"

namespace cagent::launcher {

std::string_view ChildStepName(ChildStep step) {
  switch (step) {
    case ChildStep::kDeathSignal:
      return "set die-with-parent signal";
    case ChildStep::kWaitForParent:
      return "wait for user namespace id maps";
    case ChildStep::kParentGone:
      return "check that cagent is alive";
    case ChildStep::kSetHostname:
      return "set hostname";
    case ChildStep::kLoopbackUp:
      return "bring up loopback interface";
    case ChildStep::kMountPrivate:
      return "make mounts private";
    case ChildStep::kMountStaging:
      return "mount staging tmpfs";
    case ChildStep::kPivotToStaging:
      return "pivot_root to staging";
    case ChildStep::kMountNewRoot:
      return "mount new root tmpfs";
    case ChildStep::kMountOp:
      return "build mount view";
    case ChildStep::kMountProc:
      return "mount /proc";
    case ChildStep::kDetachOldRoot:
      return "detach old root";
    case ChildStep::kPivotToNewRoot:
      return "pivot_root to new root";
    case ChildStep::kDropCapabilities:
      return "drop capabilities";
    case ChildStep::kNoNewPrivs:
      return "set no_new_privs";
    case ChildStep::kSetsid:
      return "start new session";
    case ChildStep::kSignalSetup:
      return "set up init signal handling";
    case ChildStep::kForkCommand:
      return "fork command";
    case ChildStep::kChdir:
      return "change to working directory";
    case ChildStep::kCloseFds:
      return "close inherited file descriptors";
    case ChildStep::kExec:
      return "execute command";
    case ChildStep::kSubreaper:
      return "become child subreaper";
    case ChildStep::kRlimits:
      return "set resource limits";
    case ChildStep::kCgroupNamespace:
      return "create cgroup namespace";
    case ChildStep::kLandlock:
      return "apply Landlock rules";
    case ChildStep::kSeccomp:
      return "load seccomp filter";
    case ChildStep::kMountChanged:
      return "build mount view: a path changed while the sandbox was being built (is another "
             "process writing the workspace? retry once it is quiet)";
    case ChildStep::kNetListeners:
      return "make the egress proxy's sockets in the sandbox's network namespace";
    case ChildStep::kTerminal:
      return "open the sandbox's terminal (a new pty in its /dev/pts)";
    case ChildStep::kControllingTerminal:
      return "make the sandbox's terminal the command's controlling terminal";
  }
  return "unknown step";
}

}  // namespace cagent::launcher
