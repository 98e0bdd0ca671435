#include "launcher/sandbox/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <set>

#include "launcher/sandbox/child_report.h"

namespace cagent::launcher {
namespace {

std::string_view EnvName(std::string_view entry) { return entry.substr(0, entry.find('=')); }

[[noreturn]] void Fail(int report_fd, ReportKind kind, ChildStep step, int err, int exit_code) {
  const ChildReport r{kind, step, err, -1, 0};
  // One write of a small struct to a pipe is atomic; nothing else can be done if it fails.
  [[maybe_unused]] const ssize_t n = ::write(report_fd, &r, sizeof(r));
  ::_exit(exit_code);
}

char* g_argv_start = nullptr;
size_t g_argv_len = 0;

}  // namespace

void RememberArgvArea(int argc, char** argv) {
  if (argc <= 0 || argv == nullptr || argv[0] == nullptr) return;
  g_argv_start = argv[0];
  const char* last = argv[argc - 1];
  g_argv_len = static_cast<size_t>(last + std::strlen(last) - argv[0]);
}

void SetInitProcessTitle() {
  if (g_argv_start == nullptr) return;
  constexpr char kTitle[] = "cagent-init";
  std::memset(g_argv_start, 0, g_argv_len);
  std::memcpy(g_argv_start, kTitle, std::min(sizeof(kTitle) - 1, g_argv_len));
}

std::vector<std::string> BuildEnvironment(const LaunchSpec& spec, char** caller_env) {
  std::vector<std::string> out;
  std::set<std::string, std::less<>> seen;
  auto add = [&](std::string entry) {
    const std::string name(EnvName(entry));
    if (seen.insert(name).second) out.push_back(std::move(entry));
  };
  // The overrides first: the first entry of a name wins.
  for (const auto& v : spec.env_override) add(v.name + "=" + v.value);
  if (spec.disabled.Has(Layer::kEnvScrub)) {
    for (char** e = caller_env; e != nullptr && *e != nullptr; ++e) add(*e);
    return out;
  }
  for (const auto& v : spec.env_set) add(v.name + "=" + v.value);
  for (const auto& name : spec.env_pass) {
    for (char** e = caller_env; e != nullptr && *e != nullptr; ++e) {
      std::string_view entry(*e);
      if (EnvName(entry) == name && entry.size() > name.size()) add(std::string(entry));
    }
  }
  return out;
}

Result<ExecPlan> PrepareExec(const LaunchSpec& spec, char** caller_env) {
  ExecPlan plan;
  plan.argv_storage = spec.argv;
  plan.env_storage = BuildEnvironment(spec, caller_env);
  for (auto& a : plan.argv_storage) plan.argv.push_back(a.data());
  plan.argv.push_back(nullptr);
  for (auto& e : plan.env_storage) plan.envp.push_back(e.data());
  plan.envp.push_back(nullptr);

  const std::string& prog = spec.argv.at(0);
  if (prog.find('/') != std::string::npos) {
    plan.candidates.push_back(prog);
  } else {
    // Search the PATH the command will see, as execvp would inside the sandbox.
    std::string path = "/usr/local/bin:/usr/bin:/bin";
    for (const auto& e : plan.env_storage) {
      if (EnvName(e) == "PATH") path = e.substr(5);
    }
    size_t start = 0;
    while (start <= path.size()) {
      size_t end = path.find(':', start);
      if (end == std::string::npos) end = path.size();
      std::string candidate = end > start ? path.substr(start, end - start) : std::string(".");
      candidate.append(1, '/').append(prog);
      plan.candidates.push_back(std::move(candidate));
      start = end + 1;
    }
  }
  plan.cwd = spec.cwd;
  plan.keep_fds = spec.keep_fds;
  std::sort(plan.keep_fds.begin(), plan.keep_fds.end());
  plan.new_session = !spec.disabled.Has(Layer::kNewSession);
  plan.close_fds = !spec.disabled.Has(Layer::kCloseFds);
  return plan;
}

int CloseFdsExcept(const int* keep, size_t n_keep) {
  unsigned lo = 3;
  for (size_t i = 0; i < n_keep; ++i) {
    const unsigned k = static_cast<unsigned>(keep[i]);
    if (k < lo) continue;
    if (k > lo && ::syscall(SYS_close_range, lo, k - 1, 0) != 0) return errno;
    lo = k + 1;
  }
  if (::syscall(SYS_close_range, lo, UINT_MAX, 0) != 0) return errno;
  return 0;
}

void ExecCommand(const ExecPlan& plan, int report_fd) {
  // Signal state: nothing blocked, nothing ignored (cagent's caller may have ignored SIGPIPE or
  // SIGHUP; the command should start clean, as under a login shell).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  // A new session has no controlling terminal, so TIOCSTI cannot push keystrokes into the
  // caller's terminal (CVE-2017-5226 against bubblewrap) and terminal signals stay outside.
  if (plan.new_session && ::setsid() < 0) {
    Fail(report_fd, ReportKind::kSetupFailed, ChildStep::kSetsid, errno, kExitSetupFailed);
  }
  // The sandbox's own terminal, never the caller's: the slave cagent's child opened in the view's
  // devpts (OpenSandboxTerminal). Job control and Ctrl-C then work inside through its line
  // discipline, and TIOCSTI (when seccomp is off) can only reach this terminal.
  if (plan.controlling_terminal && ::ioctl(0, TIOCSCTTY, 0) != 0) {
    Fail(report_fd, ReportKind::kSetupFailed, ChildStep::kControllingTerminal, errno,
         kExitSetupFailed);
  }
  if (::chdir(plan.cwd.c_str()) != 0) {
    Fail(report_fd, ReportKind::kSetupFailed, ChildStep::kChdir, errno, kExitSetupFailed);
  }
  if (plan.close_fds) {
    // Keep the report pipe until execve closes it (it is O_CLOEXEC).
    int keep[64];
    size_t n = 0;
    bool report_added = false;
    for (int fd : plan.keep_fds) {
      if (n >= 63) break;
      if (!report_added && report_fd < fd) {
        keep[n++] = report_fd;
        report_added = true;
      }
      keep[n++] = fd;
    }
    if (!report_added) keep[n++] = report_fd;
    if (const int e = CloseFdsExcept(keep, n); e != 0) {
      Fail(report_fd, ReportKind::kSetupFailed, ChildStep::kCloseFds, e, kExitSetupFailed);
    }
  }
  // Like execvp: ENOENT/ENOTDIR move on to the next PATH entry; EACCES is remembered.
  int err = ENOENT;
  for (const auto& candidate : plan.candidates) {
    ::execve(candidate.c_str(), plan.argv.data(), plan.envp.data());
    if (errno == EACCES) {
      err = EACCES;
    } else if (errno != ENOENT && errno != ENOTDIR) {
      err = errno;
      break;
    }
  }
  Fail(report_fd, ReportKind::kExecFailed, ChildStep::kExec, err,
       err == ENOENT ? kExitNotFound : kExitCannotExecute);
}

}  // namespace cagent::launcher
