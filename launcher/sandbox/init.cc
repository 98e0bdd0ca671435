#include "launcher/sandbox/init.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/sandbox/child_report.h"

namespace cagent::launcher {
namespace {

constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

[[noreturn]] void Fail(int report_fd, ChildStep step, int err) {
  const ChildReport r{ReportKind::kSetupFailed, step, err, -1, 0};
  [[maybe_unused]] const ssize_t n = ::write(report_fd, &r, sizeof(r));
  ::_exit(kExitSetupFailed);
}

// What the command's child needs (see RunInit); lives on init's stack, which init does not touch
// until the child has called execve.
struct CommandStart {
  const ExecPlan* exec;
  int report_fd;
  int signal_fd;
};

int StartCommand(void* arg) {
  const auto* start = static_cast<const CommandStart*>(arg);
  ::close(start->signal_fd);  // its own copy of the file table
  ExecCommand(*start->exec, start->report_fd);
}

// The command's child's stack until its execve. ExecCommand needs about 1 KiB (a sigaction, the
// list of descriptors to keep); the rest is margin for libc's wrappers.
alignas(64) char command_stack[64 * 1024];

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

  // The command starts the way posix_spawn starts a program: a child that shares init's memory
  // (CLONE_VM) on a stack of its own, while init waits (CLONE_VFORK) until it has called execve or
  // exited. Nothing of init's address space (a copy of cagent's) is duplicated for a process that
  // replaces it at once: a plain fork copied its page tables and took copy-on-write faults on
  // every page either side wrote before the execve (docs/performance.md, "Launch latency"). The
  // child has its own file table, signal dispositions and mask (no CLONE_FILES, CLONE_SIGHAND,
  // CLONE_THREAD); ExecCommand only makes system calls on its stack and writes nothing init reads.
  // glibc's clone() runs no atfork handlers.
  CommandStart start{&exec, report_fd, sfd};
  const pid_t command = ::clone(StartCommand, command_stack + sizeof(command_stack),
                                CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
  if (command < 0) Fail(report_fd, ChildStep::kForkCommand, errno);

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
