#include "launcher/run/git.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>

#include "common/unique_fd.h"

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace cagent::launcher::run {
namespace {

using Clock = std::chrono::steady_clock;

std::string JoinArgs(const std::vector<std::string>& args) {
  std::string out = "git";
  for (const auto& a : args) out += " " + a;
  return out;
}

}  // namespace

std::vector<std::string> HardeningOptions() {
  return {"-c", "core.hooksPath=/dev/null",
          "-c", "core.fsmonitor=false",
          "-c", "core.pager=cat",
          "-c", "core.editor=false",
          "-c", "core.sshCommand=false",
          "-c", "core.askPass=false",
          "-c", "core.attributesFile=/dev/null",
          "-c", "core.excludesFile=/dev/null",
          "-c", "core.quotePath=false",
          "-c", "core.symlinks=true",
          "-c", "diff.external=",
          "-c", "diff.noprefix=false",
          "-c", "diff.mnemonicPrefix=false",
          "-c", "diff.relative=false",
          "-c", "credential.helper=",
          "-c", "protocol.allow=never",
          "-c", "protocol.file.allow=always",
          "-c", "submodule.recurse=false",
          "-c", "gc.auto=0",
          "-c", "maintenance.auto=false",
          "-c", "advice.detachedHead=false",
          "-c", "init.defaultBranch=main",
          "-c", "user.name=cagent",
          "-c", "user.email=cagent@localhost",
          "-c", "commit.gpgSign=false"};
}

Result<GitResult> RunGit(const GitInvocation& inv) {
  std::vector<std::string> argv = {"git"};
  for (auto& opt : HardeningOptions()) argv.push_back(std::move(opt));
  if (!inv.git_dir.empty()) argv.push_back("--git-dir=" + inv.git_dir);
  if (!inv.work_tree.empty()) argv.push_back("--work-tree=" + inv.work_tree);
  argv.insert(argv.end(), inv.args.begin(), inv.args.end());

  // A fixed environment: nothing of the caller's git configuration or hooks, nothing of a
  // workspace's. PATH comes from the caller so the caller's git is found.
  std::vector<std::string> env = {
      "GIT_CONFIG_NOSYSTEM=1",  "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
      "GIT_OPTIONAL_LOCKS=0",   "GIT_PAGER=cat",               "PAGER=cat",
      "GIT_ATTR_NOSYSTEM=1",    "GIT_NO_REPLACE_OBJECTS=1",    "GIT_ASKPASS=/bin/false",
      "SSH_ASKPASS=/bin/false", "LC_ALL=C",                     "TZ=UTC",
      "HOME=" + (inv.home.empty() ? std::string("/nonexistent") : inv.home)};
  const char* path = std::getenv("PATH");
  env.push_back(std::string("PATH=") + (path != nullptr ? path : "/usr/bin:/bin"));

  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  UniqueFd err_r(err_pipe[0]), err_w(err_pipe[1]);

  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, out_w.get(), 1);
  ::posix_spawn_file_actions_adddup2(&actions, err_w.get(), 2);
  const std::string cwd = inv.cwd.empty() ? "/" : inv.cwd;
  ::posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  ::posix_spawnattr_setpgroup(&attr, 0);
  // git starts with default signal dispositions and nothing blocked (cagent ignores SIGPIPE).
  sigset_t all;
  ::sigfillset(&all);
  ::posix_spawnattr_setsigdefault(&attr, &all);
  sigset_t none;
  ::sigemptyset(&none);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                        POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, "git", &actions, &attr, cargv.data(), cenv.data());
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    Error e = ErrnoError("run git", rc);
    if (rc == ENOENT) e.detail = "git is not installed or not on PATH";
    return e;
  }
  out_w.Reset();
  err_w.Reset();

  GitResult result;
  const auto deadline = Clock::now() + inv.timeout;
  bool flooded = false, timed_out = false;
  std::array<char, 65536> buf{};
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd fds[2] = {{out_open ? out_r.get() : -1, POLLIN, 0},
                            {err_open ? err_r.get() : -1, POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf.data(), buf.size());
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      std::string& sink = i == 0 ? result.out : result.err;
      if (i == 1 && sink.size() > (1U << 20)) continue;  // keep reading, stop keeping
      sink.append(buf.data(), static_cast<size_t>(n));
      if (i == 0 && sink.size() > inv.max_output) {
        flooded = true;
        out_open = err_open = false;
      }
    }
  }
  if (timed_out || flooded) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return PlainError(JoinArgs(inv.args),
                      "timed out after " + std::to_string(inv.timeout.count() / 1000) + " s");
  }
  if (flooded) {
    return PlainError(JoinArgs(inv.args),
                      "produced more than " + std::to_string(inv.max_output) + " bytes of output");
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

Result<std::string> GitOutput(const GitInvocation& inv) {
  auto r = RunGit(inv);
  if (!r) return r.error();
  if (r->exit_code != 0) {
    std::string err = r->err;
    while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
    if (err.size() > 600) err = err.substr(0, 600) + "...";
    return PlainError(JoinArgs(inv.args), "exit " + std::to_string(r->exit_code) +
                                              (err.empty() ? "" : ": " + err));
  }
  return std::move(r->out);
}

}  // namespace cagent::launcher::run
