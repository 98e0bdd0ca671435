#include "agent/command_tool.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/tool_internal.h"
#include "common/unique_fd.h"

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace cagent::agent {
namespace {

using Clock = std::chrono::steady_clock;

// Head and tail of the output; the middle is counted and dropped.
class OutputCapture {
 public:
  explicit OutputCapture(std::uint64_t cap)
      : head_cap_(static_cast<std::size_t>(cap / 2)),
        tail_cap_(static_cast<std::size_t>(cap - cap / 2)) {}

  void Append(const char* p, std::size_t n) {
    total_ += n;
    if (head_.size() < head_cap_) {
      std::size_t take = std::min(n, head_cap_ - head_.size());
      head_.append(p, take);
      p += take;
      n -= take;
    }
    if (n == 0) return;
    tail_.append(p, n);
    if (tail_.size() > 2 * tail_cap_ + 65536) tail_.erase(0, tail_.size() - tail_cap_);
  }

  void Finish(CommandRun* run) {
    if (tail_.size() > tail_cap_) tail_.erase(0, tail_.size() - tail_cap_);
    run->output_bytes = total_;
    run->cut_bytes = total_ - head_.size() - tail_.size();
    run->output = head_;
    if (run->cut_bytes > 0) {
      run->output += "\n[... " + std::to_string(run->cut_bytes) + " bytes cut ...]\n";
    }
    run->output += tail_;
  }

 private:
  std::size_t head_cap_;
  std::size_t tail_cap_;
  std::string head_;
  std::string tail_;
  std::uint64_t total_ = 0;
};

struct ProcEntry {
  pid_t pid;
  pid_t ppid;
  pid_t pgrp;
  char state;
};

// Every process visible in /proc (thread-group leaders). `ok` false when /proc is unreadable.
std::vector<ProcEntry> ScanProc(bool* ok) {
  std::vector<ProcEntry> out;
  DIR* dir = ::opendir("/proc");
  *ok = dir != nullptr;
  if (dir == nullptr) return out;
  while (struct dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const std::int64_t pid = std::strtoll(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
    const std::string path = "/proc/" + std::to_string(pid) + "/stat";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[1024];
    ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    // "pid (comm) S ppid pgrp ...": comm may contain anything, so parse after the last ')'.
    char* paren = std::strrchr(buf, ')');
    if (paren == nullptr) continue;
    char state = 0;
    int ppid = 0;
    int pgrp = 0;
    if (std::sscanf(paren + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) continue;
    out.push_back({static_cast<pid_t>(pid), ppid, pgrp, state});
  }
  ::closedir(dir);
  return out;
}

std::set<pid_t> ChildrenOfSelf(bool* ok) {
  std::set<pid_t> out;
  const pid_t self = ::getpid();
  for (const auto& p : ScanProc(ok)) {
    if (p.ppid == self) out.insert(p.pid);
  }
  return out;
}

// Kills and reaps every child of this process that is not in `keep`, round after round (killing a
// process re-parents its children to us, the subreaper), until none is left. Each pid is our child
// until we reap it, so it cannot be recycled between the scan and the kill.
// `killed` collects the pids that were still alive (not zombies) when found.
void KillOrphans(const std::set<pid_t>& keep, std::set<pid_t>* killed, bool* proc_ok) {
  const pid_t self = ::getpid();
  for (int round = 0; round < 10000; ++round) {
    bool ok = false;
    auto procs = ScanProc(&ok);
    if (!ok) {
      *proc_ok = false;
      return;
    }
    std::vector<ProcEntry> mine;
    for (const auto& p : procs) {
      if (p.ppid == self && keep.count(p.pid) == 0) mine.push_back(p);
    }
    if (mine.empty()) return;
    for (const auto& p : mine) {
      if (p.state != 'Z') killed->insert(p.pid);
      // A process that leads its own group (a setsid()ed daemon) takes its group with it.
      if (p.pgrp == p.pid) ::kill(-p.pid, SIGKILL);
      ::kill(p.pid, SIGKILL);
    }
    for (const auto& p : mine) {
      while (::waitpid(p.pid, nullptr, __WALL) < 0 && errno == EINTR) {
      }
    }
  }
}

// Moves `fd` to a number >= 3 (so dup2 onto 0..2 in the child never hits itself).
int AboveStdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

[[noreturn]] void ChildFail(int errpipe) {
  int err = errno;
  ssize_t ignored = ::write(errpipe, &err, sizeof(err));
  (void)ignored;
  ::_exit(127);
}

// After fork(): async-signal-safe calls only (the parent may have other threads).
[[noreturn]] void Child(const char* const* argv, char* const* envp, int stdin_fd, int out_fd,
                        int cwd_fd, int errpipe, int max_fd) {
  ::setpgid(0, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  // An ignored signal stays ignored across exec (the agent ignores SIGPIPE): restore defaults so
  // `yes | head` ends the way it does in a terminal.
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (::dup2(stdin_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(out_fd, 2) < 0) {
    ChildFail(errpipe);
  }
  if (::fchdir(cwd_fd) != 0) ChildFail(errpipe);
  // No descriptor of the agent (the broker socket above all) reaches the command.
  if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = 3; fd < max_fd; ++fd) {
      if (fd != errpipe) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
  }
  ::execve(argv[0], const_cast<char* const*>(argv), envp);
  ChildFail(errpipe);
}

void ReadAvailable(int fd, OutputCapture* capture, bool* eof) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      capture->Append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) *eof = true;
    if (n < 0 && errno == EINTR) continue;
    return;  // EAGAIN: nothing more for now
  }
}

// The command's descriptors, all above 2 (so no dup2 in the child overwrites a later one's
// source): its output pipe, the pipe its exec failure (or stderr) comes back on, and stdin.
struct CommandFds {
  UniqueFd out_r, out_w, err_r, err_w, stdin_fd;
};

bool OpenCommandFds(CommandFds& f, std::string& start_error) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    start_error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  f.out_r.Reset(AboveStdio(out_pipe[0]));
  f.out_w.Reset(AboveStdio(out_pipe[1]));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    start_error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  f.err_r.Reset(AboveStdio(err_pipe[0]));
  f.err_w.Reset(AboveStdio(err_pipe[1]));
  f.stdin_fd.Reset(AboveStdio(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
  if (!f.stdin_fd.valid()) {
    // No /dev/null in this view: an empty pipe whose write end is closed reads as EOF just the
    // same.
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      start_error = std::string("stdin pipe: ") + std::strerror(errno);
      return false;
    }
    f.stdin_fd.Reset(AboveStdio(p[0]));
    ::close(p[1]);
  }
  if (!f.out_r.valid() || !f.out_w.valid() || !f.err_r.valid() || !f.err_w.valid() ||
      !f.stdin_fd.valid()) {
    start_error = "cannot set up the command's descriptors";
    return false;
  }
  return true;
}

// Watches the shell until it exits: its output into `capture` (until EOF), the timeout and an
// interruption answered with SIGTERM to its group, then SIGKILL after the grace.
void WatchCommand(const CommandSpec& spec, pid_t pid, int pidfd_raw, int out_fd,
                  OutputCapture& capture, bool& pipe_eof, CommandRun& run) {
  const pid_t pgid = pid;
  bool shell_exited = false;
  enum class Phase { kRunning, kTerminating, kKilled } phase = Phase::kRunning;
  const auto deadline = Clock::now() + spec.timeout;
  auto grace_deadline = Clock::time_point::max();

  while (!shell_exited) {
    const auto now = Clock::now();
    if (phase == Phase::kRunning && (now >= deadline || run.cancelled)) {
      run.timed_out = !run.cancelled;
      ::kill(-pgid, SIGTERM);
      ::kill(pid, SIGTERM);  // in case the shell moved itself to another group
      phase = Phase::kTerminating;
      grace_deadline = now + spec.kill_grace;
    } else if (phase == Phase::kTerminating && now >= grace_deadline) {
      run.escalated = true;
      ::kill(-pgid, SIGKILL);
      ::kill(pid, SIGKILL);
      phase = Phase::kKilled;
    }
    auto next = phase == Phase::kRunning       ? deadline
                : phase == Phase::kTerminating ? grace_deadline
                                               : Clock::now() + std::chrono::milliseconds(100);
    auto wait_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count() + 1;
    if (pidfd_raw < 0) wait_ms = std::min<decltype(wait_ms)>(wait_ms, 50);  // poll waitid instead
    wait_ms = std::clamp<decltype(wait_ms)>(wait_ms, 0, 1000);
    struct pollfd fds[3];
    nfds_t nfds = 0;
    int pipe_index = -1;
    int pid_index = -1;
    int interrupt_index = -1;
    if (phase == Phase::kRunning && spec.interrupt_fd >= 0 && spec.interrupted) {
      interrupt_index = static_cast<int>(nfds);
      fds[nfds++] = {spec.interrupt_fd, POLLIN, 0};
    }
    if (!pipe_eof) {
      pipe_index = static_cast<int>(nfds);
      fds[nfds++] = {out_fd, POLLIN, 0};
    }
    if (pidfd_raw >= 0) {
      pid_index = static_cast<int>(nfds);
      fds[nfds++] = {pidfd_raw, POLLIN, 0};
    }
    int rc = ::poll(fds, nfds, static_cast<int>(wait_ms));
    if (rc < 0 && errno != EINTR) break;
    if (rc > 0 && interrupt_index >= 0 &&
        (fds[interrupt_index].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && spec.interrupted()) {
      run.cancelled = true;
      continue;  // the top of the loop sends SIGTERM at once
    }
    if (rc > 0 && pipe_index >= 0 && (fds[pipe_index].revents & (POLLIN | POLLHUP)) != 0) {
      ReadAvailable(out_fd, &capture, &pipe_eof);
    }
    if (pid_index >= 0) {
      if (rc > 0 && (fds[pid_index].revents & POLLIN) != 0) shell_exited = true;
    } else {
      // Without a pidfd: look without reaping, so the zombie keeps the group id reserved.
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == pid) {
        shell_exited = true;
      }
    }
  }
}

}  // namespace

std::string SignalDescription(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  std::string name = abbrev != nullptr ? std::string("SIG") + abbrev : "an unknown signal";
  return name + " (signal " + std::to_string(sig) + ")";
}

CommandRun RunShellCommand(const CommandSpec& spec) {
  CommandRun run;
  bool proc_ok = true;
  // Children that existed before this call are not ours to kill.
  const std::set<pid_t> keep = ChildrenOfSelf(&proc_ok);
  run.proc_scan = proc_ok;

  CommandFds f;
  if (!OpenCommandFds(f, run.start_error)) return run;
  UniqueFd& out_r = f.out_r;
  UniqueFd& out_w = f.out_w;
  UniqueFd& err_r = f.err_r;
  UniqueFd& err_w = f.err_w;
  UniqueFd& stdin_fd = f.stdin_fd;
  struct rlimit nofile {};
  int max_fd = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    max_fd = static_cast<int>(std::min<rlim_t>(nofile.rlim_cur, 65536));
  }
  const char* argv[] = {"/bin/sh", "-c", spec.command.c_str(), nullptr};
  char* const* envp = environ;

  const pid_t pid = ::fork();
  if (pid < 0) {
    run.start_error = std::string("fork: ") + std::strerror(errno);
    return run;
  }
  if (pid == 0) {
    Child(argv, envp, stdin_fd.get(), out_w.get(), spec.cwd_fd, err_w.get(), max_fd);
  }
  // Also from the parent, so the group exists before any kill(-pid) below (no race with the
  // child's own setpgid). EACCES after the child exec'd is harmless: it did it itself.
  ::setpgid(pid, pid);
  const pid_t pgid = pid;
  out_w.Reset();
  err_w.Reset();
  stdin_fd.Reset();

  int exec_errno = 0;
  ssize_t got = 0;
  do {
    got = ::read(err_r.get(), &exec_errno, sizeof(exec_errno));
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof(exec_errno))) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    run.start_error = std::string("cannot start /bin/sh: ") + std::strerror(exec_errno);
    return run;
  }

  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  ::fcntl(out_r.get(), F_SETFL, ::fcntl(out_r.get(), F_GETFL) | O_NONBLOCK);
  OutputCapture capture(spec.output_cap);
  bool pipe_eof = false;
  WatchCommand(spec, pid, pidfd.get(), out_r.get(), capture, pipe_eof, run);

  // The shell is a zombie now (not reaped yet, so its pid and group id cannot be reused): kill
  // whatever is left of its group, reap it, then hunt down the orphans.
  bool proc_ok2 = true;
  std::set<pid_t> before_kill;
  for (const auto& p : ScanProc(&proc_ok2)) {
    if (p.pgrp == pgid && p.pid != pid && p.state != 'Z') before_kill.insert(p.pid);
  }
  ::kill(-pgid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // Group members are usually re-parented to us too: the union counts each process once.
  KillOrphans(keep, &before_kill, &proc_ok2);
  run.proc_scan = run.proc_scan && proc_ok2;
  run.leftovers_killed = static_cast<int>(before_kill.size());

  // Everything that could hold the pipe's write end is dead: drain what is buffered.
  if (!pipe_eof) ReadAvailable(out_r.get(), &capture, &pipe_eof);
  capture.Finish(&run);

  if (WIFEXITED(status)) {
    run.exited = true;
    run.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    run.term_signal = WTERMSIG(status);
  }
  return run;
}

// ---------------------------------------------------------------------------------------------
// The run_command tool

namespace internal {
namespace {

std::string DurationWords(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000) + " s";
  return std::to_string(ms.count()) + " ms";
}

class RunCommandCall : public PreparedCall {
 public:
  RunCommandCall(EnvPtr env, std::string command, std::chrono::milliseconds timeout)
      : env_(std::move(env)), timeout_(timeout) {
    command_ = std::move(command);
  }

  ToolOutcome Execute() override {
    CommandSpec spec;
    spec.command = command_;
    spec.cwd_fd = env_->fs.root();
    spec.timeout = timeout_;
    spec.kill_grace = env_->limits.kill_grace;
    spec.output_cap = env_->limits.command_output_bytes;
    spec.interrupt_fd = env_->interrupt_fd;
    spec.interrupted = env_->interrupted;
    CommandRun run = RunShellCommand(spec);
    // Whatever ran may have changed any file: reads are re-checked by digest before an edit.
    env_->ledger.MarkAllStale();
    if (!run.start_error.empty()) {
      ToolOutcome fail = ToolOutcome::Fail("io_error", "run_command: " + run.start_error,
                                           "the command did not run; this is a sandbox problem, "
                                           "not a problem with the command");
      return fail;
    }
    ToolOutcome o;
    o.workspace_may_have_changed = true;
    std::string status;
    if (run.exited) {
      status = "exit code " + std::to_string(run.exit_code);
    } else if (run.term_signal != 0) {
      status = "killed by " + SignalDescription(run.term_signal);
    } else {
      status = "ended in an unknown way";
    }
    std::vector<std::string> notes;
    if (run.cut_bytes > 0) {
      notes.push_back("the output was " + std::to_string(run.output_bytes) + " bytes; the middle " +
                      std::to_string(run.cut_bytes) + " bytes were cut (first and last " +
                      HumanBytes(env_->limits.command_output_bytes / 2) +
                      " kept); redirect to a file and grep it to see more");
    }
    if (run.leftovers_killed > 0) {
      notes.push_back(std::to_string(run.leftovers_killed) +
                      " background process(es) still running when the shell exited were "
                      "killed (nothing outlives a run_command call)");
    }
    if (!env_->subreaper || !run.proc_scan) {
      notes.push_back("processes that left the command's process group could not be tracked");
    }
    o.output = run.output.empty() ? "(no output)" : SanitizeUtf8(run.output);
    if (run.cancelled) {
      o.ok = false;
      o.code = "cancelled";
      o.message =
          std::string("run_command was cancelled; the process group was terminated (SIGTERM") +
          (run.escalated ? ", then SIGKILL after " + DurationWords(env_->limits.kill_grace) + ")"
                         : ")") +
          "; " + status;
    } else if (run.timed_out) {
      o.ok = false;
      o.code = "timeout";
      o.message =
          "run_command timed out after " + DurationWords(timeout_) +
          "; the process group was terminated (SIGTERM" +
          (run.escalated ? ", then SIGKILL after " + DurationWords(env_->limits.kill_grace) + ")"
                         : ")") +
          "; " + status;
      o.hint =
          "run long jobs in the background of a single call with their own timeout, or "
          "make the command faster (a narrower test selection)";
    } else {
      o.message = status;
    }
    for (const auto& n : notes) o.message += "\nnote: " + n;
    return o;
  }

 private:
  EnvPtr env_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

Prepared PrepareRunCommand(const EnvPtr& env, const nlohmann::json& args) {
  const auto& command = args["command"].get_ref<const std::string&>();
  if (command.find_first_not_of(" \t\r\n") == std::string::npos) {
    return ToolOutcome::Fail("bad_arguments", "run_command: the command is empty",
                             "give a shell command line, e.g. \"make test\"");
  }
  if (command.find('\0') != std::string::npos) {
    return ToolOutcome::Fail("bad_arguments", "run_command refused: the command has a NUL byte",
                             "a shell command line cannot contain NUL bytes");
  }
  auto timeout = env->limits.command_timeout;
  if (args.contains("timeout_ms")) {
    const auto requested = args["timeout_ms"].get<std::uint64_t>();
    if (requested > static_cast<std::uint64_t>(env->limits.command_timeout.count())) {
      return ToolOutcome::Fail("bad_arguments",
                               "run_command: timeout_ms " + std::to_string(requested) +
                                   " is above this run's limit of " +
                                   std::to_string(env->limits.command_timeout.count()) + " ms",
                               "omit timeout_ms to get the limit, or ask for less");
    }
    timeout = std::chrono::milliseconds(requested);
  }
  return std::unique_ptr<PreparedCall>(std::make_unique<RunCommandCall>(env, command, timeout));
}

}  // namespace internal
}  // namespace cagent::agent
