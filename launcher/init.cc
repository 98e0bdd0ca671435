#include "launcher/init.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/child_report.h"

namespace cagent::launcher {
namespace {

constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

[[noreturn]] void Fail(int report_fd, ChildStep step, int err) {
  const ChildReport r{ReportKind::kSetupFailed, step, err, -1, 0};
  [[maybe_unused]] const ssize_t n = ::write(report_fd, &r, sizeof(r));
  ::_exit(kExitSetupFailed);
}

}  // namespace

void RunInit(const ExecPlan& exec, const InitOptions& options, int report_fd) {
  // Signals from cagent arrive with ssi_pid == the parent's pid as seen from here: 0 when cagent
  // is outside our pid namespace. Anything else comes from inside the sandbox.
  const pid_t parent = ::getppid();
  if (options.new_session && ::setsid() < 0) Fail(report_fd, ChildStep::kSetsid, errno);
  if (!options.pid_namespace && ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    Fail(report_fd, ChildStep::kSubreaper, errno);
  }
  // Not dumpable: a process inside cannot ptrace init or read its memory even with the same uid.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

  sigset_t set;
  ::sigemptyset(&set);
  ::sigaddset(&set, SIGCHLD);
  for (int sig : kForwarded) ::sigaddset(&set, sig);
  // Blocked signals are queued for the signalfd. SIGKILL/SIGSTOP from inside the namespace are
  // dropped by the kernel for a pid namespace's init.
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) Fail(report_fd, ChildStep::kSignalSetup, errno);
  const int sfd = ::signalfd(-1, &set, SFD_CLOEXEC);
  if (sfd < 0) Fail(report_fd, ChildStep::kSignalSetup, errno);

  // Raw clone rather than fork(): no atfork handlers run in this allocation-free child.
  const pid_t command =
      static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr));
  if (command < 0) Fail(report_fd, ChildStep::kForkCommand, errno);
  if (command == 0) {
    ::close(sfd);
    ExecCommand(exec, report_fd);
  }

  for (;;) {
    struct signalfd_siginfo si {};
    const ssize_t n = ::read(sfd, &si, sizeof(si));
    if (n != static_cast<ssize_t>(sizeof(si))) {
      if (n < 0 && errno == EINTR) continue;
      // The signalfd cannot fail short of a kernel bug; stop everything rather than spin.
      ::kill(command, SIGKILL);
    }
    if (si.ssi_signo != SIGCHLD) {
      if (static_cast<pid_t>(si.ssi_pid) == parent) ::kill(command, static_cast<int>(si.ssi_signo));
      continue;
    }
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      if (pid != command) continue;
      const ChildReport r{ReportKind::kCommandExited, ChildStep::kExec, 0, -1, status};
      [[maybe_unused]] const ssize_t w = ::write(report_fd, &r, sizeof(r));
      ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
  }
}

}  // namespace cagent::launcher
