// The launch, in order. This file alone knows the order of the steps; each mechanism lives in its
// own module (userns, mountns, netns, caps, process, init) with prepare / setup-from-parent /
// apply-in-child entry points.
//
// Parent (cagent)                          Child (becomes the sandbox's pid 1)
// ---------------------------------------  --------------------------------------------------
// prepare: validate spec; snapshot the
//   writable trees (leftovers) and guard
//   their git metadata (git_guard: host
//   placeholders, extra binds) — before the
//   mount plan, which carries those binds;
//   id maps, mount plan, capability state,
//   exec plan
// clone(NEWUSER|NEWNS|NEWPID|NEWNET|NEWIPC|
//       NEWUTS)  ─────────────────────────▶  1. PR_SET_PDEATHSIG(SIGKILL): dies with cagent
//                                          2. close every inherited fd but the two pipes;
//                                             blank cagent's argv (visible in /proc/1/cmdline)
// setup-from-parent: uid/gid maps           3. wait for the id maps; exit if cagent is gone;
//   (setgroups=deny first), cgroup attach      then unshare the cgroup namespace, rooted at
//   ─────────────── go byte ──────────────▶     the sandbox's own cgroup
//                                          4. hostname (uts)
//                                          5. lo up (net) — needs CAP_NET_ADMIN, so before 7
//                                          6. mount view, pivot_root, old root detached —
//                                             needs CAP_SYS_ADMIN, so before 7
//                                          6b. exec --tty: a new pty in the view's devpts
//   receive the pty master ◀──────────────     (which 6 made), its slave as stdio, the master
//   (relay on its own thread)                  sent out and closed here (tty.h)
//                                          7. rlimits — lowering needs no privilege
//                                          8. drop all capabilities, lock securebits,
//                                             no_new_privs — after everything privileged
//                                          9. Landlock — after pivot_root, because its rules
//                                             name paths of the view (tmpfs mounts that exist
//                                             only there); needs no_new_privs
//                                         10. seccomp last: it forbids mount, ptrace and the
//                                             namespace calls the steps above use
//                                         11. init: setsid, signalfd, fork the command
// supervise: forward signals, enforce the      └─ command: setsid, (--tty: TIOCSCTTY on the
//   wall-clock limit, read reports, reap           new pty), chdir, close fds, execve
//                                          init reaps, forwards, exits with the command's status
// after exit: remove the git guard's placeholders (the sandbox is gone, so nothing inside can
//   rely on them), then sweep the writable trees: planted .git entries reported, setuid bits and
//   file capabilities cleared — after the placeholders, so the sweep sees the final tree
//
// Failures in the child are reported as a fixed {step, errno} record on the report pipe and the
// child exits with kExitSetupFailed; nothing after clone allocates, throws or logs.
#include "launcher/sandbox/sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#include "common/terminal_text.h"
#include "common/unique_fd.h"
#include "launcher/guard/git_config_guard.h"
#include "launcher/guard/git_guard.h"
#include "launcher/guard/leftovers.h"
#include "launcher/sandbox/caps.h"
#include "launcher/sandbox/cgroup.h"
#include "launcher/sandbox/init.h"
#include "launcher/sandbox/landlock.h"
#include "launcher/sandbox/mountns.h"
#include "launcher/sandbox/netns.h"
#include "launcher/sandbox/process.h"
#include "launcher/sandbox/rlimits.h"
#include "launcher/sandbox/seccomp.h"
#include "launcher/sandbox/userns.h"

namespace cagent::launcher {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kParentSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

struct Prepared {
  IdMaps maps;
  MountPlan mounts;
  CapabilityDrop caps;
  ExecPlan exec;
  PreparedRlimits rlimits;
  std::optional<LandlockRuleset> landlock;
  std::optional<SeccompFilter> seccomp;
  std::optional<SandboxCgroup> cgroup;
  PreparedListeners listeners;      // LaunchSpec::net_listeners
  int listener_channel = -1;        // the child's end of the socket the listeners go out on
  std::vector<int> child_keep_fds;  // sorted: what the child keeps while it builds the sandbox
  unsigned long clone_flags = 0;    // NOLINT(google-runtime-int)
  int stdio[3] = {-1, -1, -1};      // SandboxControl's stdin/stdout/stderr replacements
  TerminalPlan terminal{};          // SandboxControl::terminal, when terminal_channel >= 0
  int terminal_channel = -1;        // the child's end of the socket the pty master goes out on
};

// Restores the caller's signal mask when RunSandbox returns.
class SignalMaskGuard {
 public:
  explicit SignalMaskGuard(const sigset_t& block) { ::sigprocmask(SIG_BLOCK, &block, &old_); }
  ~SignalMaskGuard() {
    // Discard forwarded signals that are still pending so they do not hit cagent afterwards.
    sigset_t pending;
    ::sigpending(&pending);
    for (int sig : kParentSignals) {
      if (::sigismember(&pending, sig) == 1) {
        const struct timespec zero {};
        sigset_t one;
        ::sigemptyset(&one);
        ::sigaddset(&one, sig);
        ::sigtimedwait(&one, nullptr, &zero);
      }
    }
    ::sigprocmask(SIG_SETMASK, &old_, nullptr);
  }
  SignalMaskGuard(const SignalMaskGuard&) = delete;
  SignalMaskGuard& operator=(const SignalMaskGuard&) = delete;

 private:
  sigset_t old_{};
};

[[noreturn]] void ChildFail(int report_fd, const ChildResult& r) {
  const ChildReport rep{ReportKind::kSetupFailed, r.step, r.err, r.detail, 0};
  [[maybe_unused]] const ssize_t n = ::write(report_fd, &rep, sizeof(rep));
  ::_exit(kExitSetupFailed);
}

// The child after clone: steps 1–8 above. Never returns.
[[noreturn]] void ChildMain(const LaunchSpec& spec, const Prepared& p, int sync_fd, int report_fd) {
  // 1. Die with cagent. Set before anything else so no step can outlive it.
  if (!spec.disabled.Has(Layer::kDieWithParent) &&
      ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
    ChildFail(report_fd, ChildResult::Failure(ChildStep::kDeathSignal, errno));
  }
  SetInitProcessTitle();
  // The caller's stdio replacements, before the close below drops their original numbers.
  for (int i = 0; i < 3; ++i) {
    if (p.stdio[i] >= 0 && p.stdio[i] != i && ::dup2(p.stdio[i], i) < 0) {
      ChildFail(report_fd, ChildResult::Failure(ChildStep::kCloseFds, errno));
    }
  }
  // 2. Nothing of cagent's (terminal fds aside) may leak into the sandbox. The sync pipe's write
  // end is closed here too, so EOF on it below means cagent is gone.
  if (!spec.disabled.Has(Layer::kCloseFds)) {
    if (const int e = CloseFdsExcept(p.child_keep_fds.data(), p.child_keep_fds.size()); e != 0) {
      ChildFail(report_fd, ChildResult::Failure(ChildStep::kCloseFds, e));
    }
  }
  // 3. Wait until cagent has written our id maps. If it died before PDEATHSIG was armed, the
  // pipe reads EOF (or reports POLLHUP after the byte) and we stop here.
  char go = 0;
  ssize_t n;
  do {
    n = ::read(sync_fd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) ::_exit(kExitSetupFailed);
  struct pollfd alive {
    sync_fd, 0, 0
  };
  if (::poll(&alive, 1, 0) == 1 && (alive.revents & POLLHUP) != 0) ::_exit(kExitSetupFailed);
  ::close(sync_fd);
  // Now in the sandbox's cgroup (if any): root the cgroup namespace there.
  if (!spec.disabled.Has(Layer::kCgroupNamespace) && ::unshare(CLONE_NEWCGROUP) != 0) {
    ChildFail(report_fd, ChildResult::Failure(ChildStep::kCgroupNamespace, errno));
  }

  // 4. Hostname.
  if (!spec.disabled.Has(Layer::kUtsNamespace) &&
      ::sethostname(spec.hostname.data(), spec.hostname.size()) != 0) {
    ChildFail(report_fd, ChildResult::Failure(ChildStep::kSetHostname, errno));
  }
  // 5. Loopback.
  if (!spec.disabled.Has(Layer::kNetNamespace)) {
    if (const ChildResult r = BringUpLoopback(); !r.ok) ChildFail(report_fd, r);
  }
  // 5b. cagent's listeners in this namespace (the egress proxy), while capabilities allow low
  // ports.
  if (p.listener_channel >= 0) {
    if (const ChildResult r = MakeAndSendListeners(p.listeners, p.listener_channel); !r.ok) {
      ChildFail(report_fd, r);
    }
    ::close(p.listener_channel);
  }
  // 6. The filesystem view.
  if (const ChildResult r = ApplyMountView(p.mounts); !r.ok) ChildFail(report_fd, r);
  // 6b. The sandbox's own terminal: after the view, whose devpts instance it is made in.
  if (p.terminal_channel >= 0) {
    if (const ChildResult r = OpenSandboxTerminal(p.terminal, p.terminal_channel); !r.ok) {
      ChildFail(report_fd, r);
    }
    ::close(p.terminal_channel);
  }
  // 7. Resource ceilings.
  if (!spec.disabled.Has(Layer::kRlimits)) {
    if (const ChildResult r = ApplyRlimits(p.rlimits); !r.ok) ChildFail(report_fd, r);
  }
  // 8. Privileges: every step above needed them.
  if (!spec.disabled.Has(Layer::kCapabilities)) {
    if (const ChildResult r = p.caps.Apply(); !r.ok) ChildFail(report_fd, r);
  } else if ((p.landlock || p.seccomp) && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    // Landlock and seccomp still want no_new_privs when capabilities are kept for debugging.
    ChildFail(report_fd, ChildResult::Failure(ChildStep::kNoNewPrivs, errno));
  }
  // 9. Landlock, on the finished view.
  if (p.landlock) {
    if (const ChildResult r = p.landlock->Apply(); !r.ok) ChildFail(report_fd, r);
  }
  // 10. seccomp, the last restriction before init starts the command.
  if (p.seccomp) {
    if (const ChildResult r = p.seccomp->Apply(); !r.ok) ChildFail(report_fd, r);
  }
  // 11. Become init.
  RunInit(
      p.exec,
      InitOptions{!spec.disabled.Has(Layer::kPidNamespace), !spec.disabled.Has(Layer::kNewSession)},
      report_fd);
}

// "processes 4096, open files 8192, file size 16.0 GiB, core dumps off".
std::string DescribeLimits(const ResourceLimits& l) {
  std::string out;
  auto add = [&out](const std::string& item) { out += (out.empty() ? "" : ", ") + item; };
  if (l.cpu_seconds) add("CPU time " + std::to_string(*l.cpu_seconds) + "s");
  if (l.processes) add("processes " + std::to_string(*l.processes));
  if (l.open_files) add("open files " + std::to_string(*l.open_files));
  if (l.file_size_bytes) add("file size " + HumanReadableSize(*l.file_size_bytes));
  if (l.data_bytes) add("data " + HumanReadableSize(*l.data_bytes));
  if (l.address_space_bytes) add("address space " + HumanReadableSize(*l.address_space_bytes));
  add(l.core_dumps ? "core dumps inherited" : "core dumps off");
  return out;
}

// The Landlock rules that match the mount view: what is bound read-only is read-only, what is
// writable is writable, /dev is devices only. Rules attach to inodes, so files created later under
// these trees are covered too.
LandlockRules LandlockRulesFor(const LaunchSpec& spec) {
  LandlockRules rules;
  rules.read_only = spec.read_only_paths;
  rules.read_only.emplace_back("/proc");
  // The view's root holds only mount points; listing it is harmless. Without the view it would be
  // the host's root, which Landlock must keep covering.
  if (!spec.disabled.Has(Layer::kMountView)) rules.read_only.emplace_back("/");
  rules.read_write = spec.read_write_paths;
  (spec.workspace_writable ? rules.read_write : rules.read_only).push_back(spec.workspace);
  rules.read_write.emplace_back("/tmp");
  rules.read_write.push_back(spec.home);
  rules.read_write.emplace_back("/dev/shm");
  rules.device_paths = {"/dev"};
  // In `none` no TCP port may be bound or connected; in `loopback` the network namespace is the
  // guard (ports of local servers are not known in advance).
  rules.restrict_tcp = spec.network == NetworkMode::kNone;
  rules.scope_abstract_unix = true;
  rules.scope_signals = true;
  const bool best_effort = spec.best_effort.Has(Layer::kLandlock);
  rules.require_fs = !best_effort;
  rules.require_net = !best_effort;
  // Scopes (Linux 6.12) back up the pid and network namespaces; on older kernels they are a
  // reported downgrade rather than a refusal.
  rules.require_scopes = false;
  return rules;
}

// Finds a delegated cgroup for the limits the spec sets. Missing controllers fail closed unless
// the cgroup layer is best effort, then they are reported and the rlimits stay the only ceiling.
Result<std::optional<SandboxCgroup>> PrepareCgroup(const LaunchSpec& spec,
                                                   std::vector<std::string>& downgrades,
                                                   std::string& summary) {
  const ControllerSet wanted = spec.cgroup_limits.Controllers();
  const CgroupDiscovery discovery = DiscoverCgroup(CgroupEnv::FromProcess());
  const bool best_effort = spec.best_effort.Has(Layer::kCgroupLimits);
  auto report = DecideCgroup(discovery, wanted, best_effort ? ControllerSet() : wanted);
  if (!report) return report.error();
  if (!report->degraded.empty()) {
    downgrades.push_back("cgroup: " + report->reason);
  }
  summary = report->enforced.empty() ? "no controller enforced"
                                     : report->enforced.ToProse() + " enforced in " + report->path;
  if (report->enforced.empty()) return std::optional<SandboxCgroup>();
  auto cg = SandboxCgroup::Create(discovery, "cagent-" + std::to_string(::getpid()),
                                  spec.cgroup_limits.RestrictedTo(report->enforced));
  if (!cg) return cg.error();
  return std::optional<SandboxCgroup>(std::move(*cg));
}

SandboxOutcome SetupFailure(std::string step, const Error& error) {
  SandboxOutcome o;
  o.kind = SandboxOutcome::Kind::kSetupFailed;
  o.exit_code = kExitSetupFailed;
  o.error = step + ": " + error.Message();
  o.failed_step = std::move(step);
  o.err = error.err;
  return o;
}

// The host trees the sandbox can write and that outlive it (/tmp and HOME are its own tmpfs).
std::vector<std::string> WritableRoots(const LaunchSpec& spec) {
  std::vector<std::string> roots;
  if (spec.workspace_writable) roots.push_back(spec.workspace);
  for (const std::string& p : spec.read_write_paths) {
    const bool covered = std::any_of(roots.begin(), roots.end(), [&](const std::string& r) {
      return p == r ||
             (p.size() > r.size() && p.compare(0, r.size(), r) == 0 && p[r.size()] == '/');
    });
    if (!covered) roots.push_back(p);
  }
  return roots;
}

// The git dirs of a snapshot of the writable trees, for the git config guard: `.git` directories,
// directories laid out like a git dir, and what `.git` files inside the trees point at.
std::vector<std::string> GitDirsOf(const TreeSnapshot& snap,
                                   const std::vector<std::string>& roots) {
  std::vector<std::string> dirs;
  for (const auto& [path, id] : snap.git_entries) {
    if (S_ISDIR(id.mode)) dirs.push_back(path);
    if (S_ISREG(id.mode)) {
      if (auto target = GitConfigGuard::GitdirTarget(path, roots)) dirs.push_back(*target);
    }
    if (S_ISLNK(id.mode)) {
      if (auto target = GitConfigGuard::SymlinkTarget(path, roots)) dirs.push_back(*target);
    }
  }
  for (const auto& [path, id] : snap.bare_git_dirs) dirs.push_back(path);
  return dirs;
}

// One line for host_findings about a file the git config guard rewrote.
std::string DescribeRewrite(const GitConfigRewrite& r) {
  if (!r.reason.empty()) {
    return "cagent replaced '" + r.path + "', which the sandboxed command changed: it " + r.reason +
           ". It now holds what it held before the launch (or a minimal configuration)";
  }
  std::string keys;
  for (const std::string& k : r.dropped) keys += (keys.empty() ? "" : ", ") + k;
  return "cagent rewrote '" + r.path + "', which the sandboxed command changed, without " + keys +
         ": keys a repository's own git configuration may not set after a sandbox (they can run "
         "programs or reach other machines; docs/threat-model.md, git metadata)";
}

// `spec` with the git guard's binds added: protected names read-only onto themselves, git dirs
// and objects/ read-write onto themselves.
LaunchSpec WithGitGuard(const LaunchSpec& spec, const GitGuard& guard) {
  LaunchSpec out = spec;
  auto add = [](std::vector<std::string>& list, const std::vector<std::string>& extra) {
    for (const std::string& p : extra) {
      if (std::find(list.begin(), list.end(), p) == list.end()) list.push_back(p);
    }
  };
  add(out.read_only_paths, guard.ReadOnlyPaths());
  add(out.read_write_paths, guard.SelfBinds());
  return out;
}

int WaitStatusToExitCode(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs until init has exited; fills the outcome from the reports and init's status.
void Supervise(const LaunchSpec& spec, const Prepared& p, pid_t child, int pidfd, int sigfd,
               int stop_fd, int report_fd, SandboxOutcome& out) {
  const auto start = Clock::now();
  std::optional<Clock::time_point> deadline;
  if (spec.timeout.count() > 0) deadline = start + spec.timeout;
  std::optional<Clock::time_point> kill_at;
  bool timed_out = false;
  int stop_requests = 0;
  std::optional<ChildReport> setup_failure, exec_failure, exited;

  auto read_reports = [&](bool drain) {
    for (;;) {
      ChildReport r{};
      const ssize_t n = ::read(report_fd, &r, sizeof(r));
      if (n < 0 && errno == EINTR) continue;
      if (n != static_cast<ssize_t>(sizeof(r))) return;  // EOF, EAGAIN, or a torn record
      if (r.kind == ReportKind::kSetupFailed) setup_failure = r;
      if (r.kind == ReportKind::kExecFailed) exec_failure = r;
      if (r.kind == ReportKind::kCommandExited) exited = r;
      if (!drain) return;
    }
  };

  int init_status = 0;
  for (;;) {
    int wait_ms = -1;
    const auto now = Clock::now();
    auto until = [&](Clock::time_point t) {
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - now).count();
      const int v = static_cast<int>(std::clamp<std::int64_t>(ms, 0, 1 << 30));
      wait_ms = wait_ms < 0 ? v : std::min(wait_ms, v);
    };
    if (deadline && !timed_out) until(*deadline);
    if (kill_at) until(*kill_at);

    // A negative fd is ignored by poll(): no signalfd when the caller handles signals, no stop fd
    // when nobody can ask, and the stop fd only until it has fired once.
    struct pollfd fds[3] = {{pidfd, POLLIN, 0}, {sigfd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    const int ready = ::poll(fds, 3, wait_ms);
    if (ready < 0 && errno != EINTR) break;
    if (fds[2].revents != 0) {
      stop_fd = -1;
      ::kill(child, SIGTERM);  // init forwards it to the command
      const auto at = Clock::now() + spec.kill_grace;
      if (!kill_at || at < *kill_at) kill_at = at;
    }

    if (fds[1].revents & POLLIN) {
      struct signalfd_siginfo si {};
      if (::read(sigfd, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
        const int sig = static_cast<int>(si.ssi_signo);
        ++stop_requests;
        if (stop_requests >= 2 && (sig == SIGINT || sig == SIGTERM)) {
          ::kill(child, SIGKILL);
        } else {
          ::kill(child, sig);  // init forwards it to the command
        }
      }
    }
    const auto after = Clock::now();
    if (deadline && !timed_out && after >= *deadline) {
      timed_out = true;
      ::kill(child, SIGTERM);
      kill_at = after + spec.kill_grace;
    }
    if (kill_at && after >= *kill_at) {
      ::kill(child, SIGKILL);
      kill_at.reset();
    }
    if (fds[0].revents & POLLIN) {
      siginfo_t info{};
      if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED) == 0) {
        init_status = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
        break;
      }
    }
  }
  // init is gone; whatever it wrote is in the pipe. Commands that escaped a disabled pid namespace
  // may still hold a copy before their execve, so read without blocking.
  ::fcntl(report_fd, F_SETFL, O_NONBLOCK);
  read_reports(/*drain=*/true);
  out.duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);

  if (setup_failure) {
    out.kind = SandboxOutcome::Kind::kSetupFailed;
    out.exit_code = kExitSetupFailed;
    out.failed_step = std::string(ChildStepName(setup_failure->step));
    out.err = setup_failure->err;
    out.error = out.failed_step + ": " + std::strerror(out.err);
    if ((setup_failure->step == ChildStep::kMountOp ||
         setup_failure->step == ChildStep::kMountChanged) &&
        setup_failure->detail >= 0 &&
        static_cast<size_t>(setup_failure->detail) < p.mounts.ops.size()) {
      out.error +=
          " (" + p.mounts.ops[static_cast<size_t>(setup_failure->detail)].description + ")";
    }
    if (setup_failure->step == ChildStep::kLandlock && p.landlock) {
      out.error += " (" + p.landlock->DescribeFailure(setup_failure->detail) + ")";
    }
    return;
  }
  if (exec_failure) {
    out.kind = SandboxOutcome::Kind::kExecFailed;
    out.err = exec_failure->err;
    out.exit_code = out.err == ENOENT ? kExitNotFound : kExitCannotExecute;
    out.failed_step = std::string(ChildStepName(ChildStep::kExec));
    out.error = "cannot execute '" + spec.argv[0] + "': " + std::strerror(out.err);
    return;
  }
  if (timed_out) {
    out.kind = SandboxOutcome::Kind::kTimedOut;
    out.exit_code = kExitTimedOut;
    if (exited && WIFSIGNALED(exited->wait_status)) out.signal = WTERMSIG(exited->wait_status);
    return;
  }
  if (exited) {
    const int status = exited->wait_status;
    out.kind =
        WIFSIGNALED(status) ? SandboxOutcome::Kind::kSignaled : SandboxOutcome::Kind::kExited;
    out.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    out.exit_code = WaitStatusToExitCode(status);
    return;
  }
  // init ended without a report: killed (by cagent on a second Ctrl-C, or from outside).
  out.kind = SandboxOutcome::Kind::kSignaled;
  out.exit_code = init_status;
  out.signal = init_status > 128 ? init_status - 128 : 0;
}

}  // namespace

Result<SandboxOutcome> RunSandbox(const LaunchSpec& spec) {
  return RunSandbox(spec, SandboxControl{});
}

namespace {

// The host-side guards around one sandbox: before it, what the writable trees hold (their git
// entries, set-user-ID files), each git dir's configuration, and the git guard's placeholders;
// after it, the sweep over what it left.
struct HostGuards {
  bool git = false;         // the workspace's git metadata (and its sweep)
  bool privileged = false;  // the set-user-ID sweep
  std::optional<TreeSnapshot> before;
  std::optional<GitConfigGuard> config_guard;
  GitGuard git_guard;    // removes its placeholders when RunSandbox returns
  bool in_view = false;  // the git guard's binds are part of the mount plan
  std::string git_summary = "off";
};

Result<HostGuards> PrepareHostGuards(const LaunchSpec& spec, std::string& step) {
  HostGuards g;
  g.git = spec.guard_git_metadata && !spec.disabled.Has(Layer::kGitGuard);
  // The config check needs no mount: it runs with the fs layer off too.
  const bool git_config = g.git && !spec.disabled.Has(Layer::kGitConfig);
  // The sweep is for root callers: the sandbox is uid 0 over the files it makes, so a set-user-ID
  // bit there is a setuid-root program for the host. Any other caller's sandbox runs as that
  // caller, and a set-user-ID file it leaves runs as the same caller — no privilege gained — so
  // the walk that stats every entry (before and after each launch) is not paid for it; the
  // seccomp mode rules still apply to everyone.
  g.privileged =
      spec.guard_privileged_files && !spec.disabled.Has(Layer::kSetuidGuard) && ::geteuid() == 0;
  if (g.git || g.privileged) {
    auto snap = SnapshotTrees(WritableRoots(spec), g.privileged);
    if (!snap) {
      step = "inspect the writable trees";
      return snap.error();
    }
    g.before.emplace(std::move(*snap));
  }
  // Before the git guard makes its placeholders: what each git dir's config says now.
  if (git_config) {
    g.config_guard.emplace(
        GitConfigGuard::Snapshot(GitDirsOf(*g.before, g.before->roots), g.before->roots));
  }
  g.in_view = g.git && !spec.disabled.Has(Layer::kMountView);
  if (g.git && !g.in_view) g.git_summary = "off: the mount view (fs layer) is switched off";
  if (g.in_view) {
    std::vector<std::string> entries;
    for (const auto& [path, id] : g.before->git_entries) entries.push_back(path);
    auto guard = GitGuard::Prepare(entries);
    if (!guard) {
      step = "guard the workspace's git metadata";
      return guard.error();
    }
    g.git_guard = std::move(*guard);
    g.git_summary = g.git_guard.Summary();
  }
  return g;
}

// After the sandbox: the git guard's notes, then the sweep, and the git configurations neutralised
// before anything on the host runs git there (git dirs found now, planted ones included). Each
// finding is also a warning.
void FinishHostGuards(HostGuards& g, SandboxOutcome& out) {
  out.git_guard = std::move(g.git_summary);
  for (const std::string& note : g.git_guard.Finish()) out.git_guard += "; " + note;
  if (g.before) {
    LeftoverReport leftovers = SweepLeftovers(*g.before, g.git, g.privileged);
    out.planted_repositories = std::move(leftovers.planted_repositories);
    out.cleared_files = std::move(leftovers.cleared_files);
    out.host_findings = std::move(leftovers.findings);
    if (g.config_guard) {
      std::vector<std::string> dirs = std::move(leftovers.git_dirs);
      for (const std::string& link : leftovers.gitdir_links) {
        if (auto target = GitConfigGuard::GitdirTarget(link, g.before->roots)) {
          dirs.push_back(*target);
        }
      }
      for (const std::string& link : leftovers.gitdir_symlinks) {
        if (auto target = GitConfigGuard::SymlinkTarget(link, g.before->roots)) {
          dirs.push_back(*target);
        }
      }
      std::vector<std::string> notes;
      out.git_config_rewrites = g.config_guard->Neutralise(std::move(dirs), g.before->roots, notes);
      for (const GitConfigRewrite& r : out.git_config_rewrites) {
        out.host_findings.push_back(DescribeRewrite(r));
      }
      for (std::string& n : notes) out.host_findings.push_back(std::move(n));
    }
  }
  for (const std::string& finding : out.host_findings) {
    spdlog::warn("warning: {}", TerminalSafe(finding, TerminalLines::kOne));
  }
}

// What the outcome says of each layer, as prepared.
struct LayerSummaries {
  std::vector<std::string> downgrades;
  std::string landlock = "off";
  std::string seccomp = "off";
  std::string cgroup = "not used";
};

// Every mechanism's preparation, in the parent before clone (`view`: the spec with the git
// guard's binds). Sets `step` on failure.
Result<Prepared> PrepareLayers(const LaunchSpec& spec, const LaunchSpec& view, LayerSummaries& sum,
                               std::string& step) {
  auto failed = [&step](const char* at, Error e) {
    step = at;
    return e;
  };
  auto mounts = PrepareMountPlan(view);
  if (!mounts) return failed("prepare mount view", mounts.error());
  auto caps = CapabilityDrop::Prepare();
  if (!caps) return failed("prepare capability drop", caps.error());
  auto exec = PrepareExec(spec, environ);
  if (!exec) return failed("prepare command", exec.error());
  Prepared p{PrepareIdMaps(),
             std::move(*mounts),
             std::move(*caps),
             std::move(*exec),
             PrepareRlimits(spec.limits),
             std::nullopt,
             std::nullopt,
             std::nullopt,
             {},
             -1,
             {},
             0};
  if (!spec.disabled.Has(Layer::kLandlock)) {
    auto ruleset = LandlockRuleset::Prepare(LandlockRulesFor(view), LandlockAbi());
    if (!ruleset) return failed("prepare Landlock rules", ruleset.error());
    for (const auto& d : ruleset->Downgrades()) sum.downgrades.push_back(d);
    sum.landlock = ruleset->Summary().ToString();
    p.landlock.emplace(std::move(*ruleset));
  }
  if (!spec.disabled.Has(Layer::kSeccomp)) {
    SeccompPolicy seccomp_policy = DefaultSeccompPolicy(spec.network == NetworkMode::kLoopback);
    // The mode rules belong to the setuid guard (the layer switches both off); the spec's
    // guard_privileged_files is the sweep alone.
    seccomp_policy.deny_privileged_modes = !spec.disabled.Has(Layer::kSetuidGuard);
    auto filter = SeccompFilter::Prepare(seccomp_policy);
    if (!filter) return failed("prepare seccomp filter", filter.error());
    sum.seccomp = std::to_string(filter->DeniedSyscallNames().size()) +
                  " system calls denied, plus socket, ioctl, clone and personality rules";
    p.seccomp.emplace(std::move(*filter));
  }
  if (!spec.disabled.Has(Layer::kCgroupLimits) && !spec.cgroup_limits.Controllers().empty()) {
    auto cg = PrepareCgroup(spec, sum.downgrades, sum.cgroup);
    if (!cg) return failed("prepare cgroup", cg.error());
    if (cg->has_value()) p.cgroup.emplace(std::move(**cg));
  }
  p.clone_flags = CLONE_NEWUSER | CLONE_NEWNS;  // the mount namespace always: /proc is ours
  if (!spec.disabled.Has(Layer::kPidNamespace)) p.clone_flags |= CLONE_NEWPID;
  if (!spec.disabled.Has(Layer::kNetNamespace)) p.clone_flags |= CLONE_NEWNET;
  if (!spec.disabled.Has(Layer::kIpcNamespace)) p.clone_flags |= CLONE_NEWIPC;
  if (!spec.disabled.Has(Layer::kUtsNamespace)) p.clone_flags |= CLONE_NEWUTS;
  // The cgroup namespace is not created by clone but by the child after cagent has moved it into
  // its own cgroup (step 3): created here it would be rooted at cagent's cgroup, whose limits
  // the sandbox's uid owns.
  return p;
}

// The channels between cagent and the child: the sync pipe (its EOF tells the child cagent is
// gone), the report pipe, and the sockets the listeners and the terminal's master come back on.
struct Channels {
  UniqueFd sync_r, sync_w, report_r, report_w;
  UniqueFd listeners_parent, listeners_child;
  UniqueFd terminal_parent, terminal_child;
};

Result<Channels> OpenChannels(const LaunchSpec& spec, const SandboxControl& control, Prepared& p,
                              std::string& step) {
  Channels c;
  int sync_pipe[2];
  int report_pipe[2];
  step = "create pipe";
  if (::pipe2(sync_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  c.sync_r.Reset(sync_pipe[0]);
  c.sync_w.Reset(sync_pipe[1]);
  if (::pipe2(report_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  c.report_r.Reset(report_pipe[0]);
  c.report_w.Reset(report_pipe[1]);
  if (!spec.net_listeners.empty()) {
    auto prepared = PrepareListeners(spec.net_listeners);
    step = "prepare listeners";
    if (!prepared) return prepared.error();
    p.listeners = std::move(*prepared);
    int pair[2];
    step = "create listener channel";
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
      return ErrnoError("socketpair");
    }
    c.listeners_parent.Reset(pair[0]);
    c.listeners_child.Reset(pair[1]);
    p.listener_channel = c.listeners_child.get();
  }
  if (control.terminal != nullptr) {
    int pair[2];
    step = "create terminal channel";
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
      return ErrnoError("socketpair");
    }
    c.terminal_parent.Reset(pair[0]);
    c.terminal_child.Reset(pair[1]);
    p.terminal = *control.terminal;
    p.terminal_channel = c.terminal_child.get();
    p.exec.controlling_terminal = true;
  }
  p.child_keep_fds = spec.keep_fds;
  if (c.listeners_child.valid()) p.child_keep_fds.push_back(c.listeners_child.get());
  if (c.terminal_child.valid()) p.child_keep_fds.push_back(c.terminal_child.get());
  p.stdio[0] = control.stdin_fd;
  p.stdio[1] = control.stdout_fd;
  p.stdio[2] = control.stderr_fd;
  p.child_keep_fds.push_back(c.sync_r.get());
  p.child_keep_fds.push_back(c.report_w.get());
  std::sort(p.child_keep_fds.begin(), p.child_keep_fds.end());
  return c;
}

// A failure after the child was released that the child's own report may explain better: the
// listeners or the terminal did not come (the child was killed; Supervise reads why).
struct LateFailure {
  std::optional<Error> error;
  std::string step = "receive listeners";
};

// Setup from the parent, once the child exists: its id maps, its cgroup, its release, then what it
// sends back (the listeners, started by on_listeners; the terminal's master, by on_terminal). An
// error (with `step`) means the child must be killed; a late failure is reported by the outcome.
Result<LateFailure> SetUpFromParent(const LaunchSpec& spec, const SandboxControl& control,
                                    const Prepared& p, Channels& c, pid_t child,
                                    std::string& step) {
  if (auto s = WriteIdMaps(child, p.maps); !s) {
    step = "write user namespace id maps";
    return s.error();
  }
  // Into the cgroup before the child runs anything, so every process it starts is counted.
  if (p.cgroup) {
    if (auto s = p.cgroup->Attach(child); !s) {
      step = "attach to cgroup";
      return s.error();
    }
  }
  const char go = 1;
  if (::write(c.sync_w.get(), &go, 1) != 1) {
    step = "release sandbox";
    return ErrnoError("write sync pipe");
  }
  // sync_w stays open until RunSandbox returns: its EOF tells the child that cagent is gone.
  // The listeners: when they do not come, the child failed (its report says where) or hangs.
  LateFailure late;
  if (c.listeners_parent.valid()) {
    auto fds = ReceiveListeners(c.listeners_parent.get(), spec.net_listeners.size(),
                                std::chrono::seconds(30));
    if (!fds) {
      late.error = fds.error();
      ::kill(child, SIGKILL);
    } else if (control.on_listeners) {
      if (auto s = control.on_listeners(std::move(*fds)); !s) {
        step = "start the egress proxy";
        return s.error();
      }
    }
    c.listeners_parent.Reset();
  }
  // The terminal's master, sent once the view exists (step 6b); the relay starts on it.
  if (c.terminal_parent.valid() && !late.error) {
    auto master = ReceiveSandboxTerminal(c.terminal_parent.get(), std::chrono::seconds(30));
    if (!master) {
      late.error = master.error();
      late.step = "receive the sandbox's terminal";
      ::kill(child, SIGKILL);
    } else if (control.on_terminal) {
      if (auto s = control.on_terminal(std::move(*master)); !s) {
        step = "start the terminal relay";
        return s.error();
      }
    }
    c.terminal_parent.Reset();
  }
  return late;
}

// The outcome once the sandbox is gone: a late setup failure, the cgroup's kill and figures, and
// which limit a signal most likely came from.
void FinishOutcome(const LaunchSpec& spec, Prepared& p, const LateFailure& late,
                   SandboxOutcome& out) {
  if (late.error && out.kind != SandboxOutcome::Kind::kSetupFailed) {
    out.kind = SandboxOutcome::Kind::kSetupFailed;
    out.exit_code = kExitSetupFailed;
    out.failed_step = late.step;
    out.error = late.step + ": " + late.error->Message();
  }
  if (p.cgroup) {
    // Whatever is left (a daemon of a disabled pid namespace) goes with the sandbox.
    (void)p.cgroup->Kill();
    const CgroupStats stats = p.cgroup->ReadStats();
    out.memory_peak_bytes = stats.memory_peak;
    out.oom_kills = stats.oom_kill.value_or(0);
    if (out.oom_kills > 0 && out.kind == SandboxOutcome::Kind::kSignaled) {
      out.limit_hit = "memory limit of " + HumanReadableSize(*spec.cgroup_limits.memory_max) +
                      " reached (killed by the kernel's OOM killer)";
    }
  }
  if (out.kind == SandboxOutcome::Kind::kSignaled && out.limit_hit.empty() &&
      !spec.disabled.Has(Layer::kRlimits)) {
    out.limit_hit = ExplainLimitSignal(out.signal, spec.limits);
  }
}

}  // namespace

Result<SandboxOutcome> RunSandbox(const LaunchSpec& spec, const SandboxControl& control) {
  std::vector<std::string> disabled;
  for (size_t i = 0; i < static_cast<size_t>(Layer::kCount); ++i) {
    if (spec.disabled.Has(static_cast<Layer>(i))) {
      disabled.emplace_back(LayerName(static_cast<Layer>(i)));
    }
  }
  std::string step;  // where a setup failure happened
  auto fail = [&](const Error& e) {
    SandboxOutcome o = SetupFailure(step, e);
    o.disabled_layers = disabled;
    return o;
  };

  // ---- prepare (parent, before clone) ----
  step = "validate launch spec";
  if (auto s = ValidateLaunchSpec(spec); !s) return fail(s.error());
  // Host-side guards first: the git guard's binds are part of the mount plan.
  auto guards = PrepareHostGuards(spec, step);
  if (!guards) return fail(guards.error());
  const LaunchSpec view = guards->in_view ? WithGitGuard(spec, guards->git_guard) : spec;
  LayerSummaries summaries;
  auto prepared = PrepareLayers(spec, view, summaries, step);
  if (!prepared) return fail(prepared.error());
  Prepared& p = *prepared;
  auto channels = OpenChannels(spec, control, p, step);
  if (!channels) return fail(channels.error());
  Channels& c = *channels;
  sigset_t forwarded;
  ::sigemptyset(&forwarded);
  for (int sig : kParentSignals) ::sigaddset(&forwarded, sig);
  std::optional<SignalMaskGuard> mask_guard;
  UniqueFd sigfd;
  if (control.forward_signals) {
    mask_guard.emplace(forwarded);
    sigfd.Reset(::signalfd(-1, &forwarded, SFD_CLOEXEC));
    step = "create signalfd";
    if (!sigfd.valid()) return fail(ErrnoError("signalfd"));
  }

  // ---- clone ----
  const pid_t child = static_cast<pid_t>(
      ::syscall(SYS_clone, p.clone_flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
  if (child < 0) {
    Error e = ErrnoError("clone").WithCode(Error::Code::kSetup);
    if (e.err == EPERM || e.err == ENOSPC || e.err == EINVAL) {
      e.code = Error::Code::kUnsupported;
      e.detail =
          "this kernel refuses unprivileged user namespaces; check "
          "/proc/sys/user/max_user_namespaces, /proc/sys/kernel/unprivileged_userns_clone and "
          "AppArmor's kernel.apparmor_restrict_unprivileged_userns";
    }
    step = "create namespaces";
    return fail(e);
  }
  if (child == 0) ChildMain(spec, p, c.sync_r.get(), c.report_w.get());

  c.sync_r.Reset();
  c.report_w.Reset();
  c.listeners_child.Reset();
  c.terminal_child.Reset();
  if (control.after_clone) control.after_clone();
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, child, 0)));
  auto abort_child = [&](const Error& e) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    return fail(e);
  };
  if (!pidfd.valid()) {
    step = "watch sandbox init";
    return abort_child(ErrnoError("pidfd_open"));
  }

  // ---- setup-from-parent ----
  auto late = SetUpFromParent(spec, control, p, c, child, step);
  if (!late) return abort_child(late.error());

  // ---- supervise ----
  SandboxOutcome out;
  out.disabled_layers = std::move(disabled);
  out.downgrades = std::move(summaries.downgrades);
  out.landlock = std::move(summaries.landlock);
  out.seccomp = std::move(summaries.seccomp);
  out.cgroup = std::move(summaries.cgroup);
  out.rlimits = spec.disabled.Has(Layer::kRlimits) ? "off" : DescribeLimits(spec.limits);
  Supervise(spec, p, child, pidfd.get(), sigfd.get(), control.stop_fd, c.report_r.get(), out);
  FinishOutcome(spec, p, *late, out);

  // ---- after exit: the host-side guards ----
  FinishHostGuards(*guards, out);
  return out;
}

std::string SignalName(int sig) {
  const char* abbrev = sig > 0 ? sigabbrev_np(sig) : nullptr;
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string DescribeSignal(int sig) {
  const char* descr = sig > 0 ? sigdescr_np(sig) : nullptr;
  return SignalName(sig) + (descr != nullptr ? std::string(" (") + descr + ")" : "");
}

std::string DescribeOutcome(const SandboxOutcome& o) {
  switch (o.kind) {
    case SandboxOutcome::Kind::kExited:
      return "command exited with status " + std::to_string(o.exit_code);
    case SandboxOutcome::Kind::kSignaled:
      return "command killed by " + DescribeSignal(o.signal);
    case SandboxOutcome::Kind::kTimedOut:
      return "command timed out and was stopped";
    case SandboxOutcome::Kind::kSetupFailed:
      return "sandbox setup failed at " + o.error;
    case SandboxOutcome::Kind::kExecFailed:
      return o.error;
  }
  return "unknown outcome";
}

}  // namespace cagent::launcher
