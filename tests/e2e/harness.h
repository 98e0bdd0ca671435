// Test harness for the e2e tests: runs the real `cagent` binary, optionally as `nobody` (through
// setpriv), and captures its output. The binaries are copied to a world-readable temporary
// directory first, because the build tree may live where `nobody` cannot reach (e.g. /root).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cagent::testing {

struct RunResult {
  int exit_code = -1;  // cagent's exit status, or 128+N if it died of signal N
  std::string out;
  std::string err;
  std::string json;  // the `exec --json` record, when run through Harness::RunJson
};

struct RunOptions {
  std::vector<std::string> extra_env;  // NAME=VALUE added to (or replacing in) cagent's environment
  bool leak_fd = false;   // give cagent an fd 9 without O_CLOEXEC (a "leaked" descriptor)
  bool with_pty = false;  // run cagent with a pty as its controlling terminal and stdin
  std::chrono::seconds timeout{60};  // the harness kills cagent after this and fails the test
  std::string cwd;                   // cagent's working directory (empty: the test's)
  std::string fd3_path;  // non-empty: cagent gets this file (created, truncated) open as fd 3
};

// A file's whole content ("" when it cannot be read).
std::string ReadFile(const std::string& path);
// Writes `text` to `path` (parents created, mode 0644 so `nobody` can read it); a failure fails
// the current test.
void WriteFile(const std::string& path, const std::string& text);
// One replayed model turn (a JSON Lines record of the replay provider) calling `tool` once with
// `args`; call ids are unique within the test binary.
std::string ToolTurn(const std::string& tool, const nlohmann::json& args);

class Harness {
 public:
  // Sets up the temporary directory once per test binary.
  static Harness& Get();

  // True when the tests run cagent as nobody (CAGENT_TEST_AS_USER=nobody).
  bool as_nobody() const { return as_nobody_; }
  // Why the nobody variant cannot run here, or empty.
  const std::string& skip_reason() const { return skip_reason_; }
  const std::string& base() const { return base_; }
  const std::string& bin_dir() const { return bin_dir_; }
  std::string probe() const { return bin_dir_ + "/cagent_probe"; }
  uid_t run_uid() const;
  gid_t run_gid() const;

  // A fresh directory under base(), owned by the user cagent runs as.
  std::string MakeDir(const std::string& prefix) const;
  // Everything under `path` handed to the user cagent runs as (chown -R); fails the test if not.
  void GiveToRunUser(const std::string& path) const;
  // examples/fix-add/repo copied to `repo`, unless `copy` is false (the caller made it), then made
  // a git repository on branch main with one commit of everything in it; fails the test if not.
  void MakeDemoRepo(const std::string& repo, bool copy = true) const;

  // The argv that runs `cagent ARGS...` as the configured user.
  std::vector<std::string> CagentArgv(const std::vector<std::string>& args) const;
  // The argv that runs an arbitrary host command as the configured user.
  std::vector<std::string> AsUser(const std::vector<std::string>& argv) const;

  // Runs `/bin/sh -c SCRIPT` on the host (not in a sandbox) as the configured user, in `dir`, with
  // stdio on /dev/null; its exit status, 128 when killed, -1 when it could not run or took longer
  // than a minute (then it is killed). For the twins that do directly what a guard prevents.
  int ShAsUser(const std::string& dir, const std::string& script) const;

  // Runs cagent to completion.
  RunResult Run(const std::vector<std::string>& args, const RunOptions& options = {}) const;
  // Run() for `cagent exec`: a "--json" before "--" becomes "--json-file F" (F in a fresh
  // directory) and F's content is returned in RunResult::json, so out stays the command's own.
  RunResult RunJson(const std::vector<std::string>& args, const RunOptions& options = {}) const;

  // Starts cagent in the background; Wait() collects it.
  struct Running {
    pid_t pid = -1;
    int out_fd = -1;
    int err_fd = -1;
  };
  Running Start(const std::vector<std::string>& args, const RunOptions& options = {}) const;
  RunResult Wait(Running& running, std::chrono::seconds timeout = std::chrono::seconds(60)) const;

 private:
  Harness();
  ~Harness();
  bool as_nobody_ = false;
  std::string skip_reason_;
  std::string base_;
  std::string bin_dir_;
};

// Host processes one of whose argv elements equals `token` (for "nothing left behind" checks).
std::vector<pid_t> FindProcesses(const std::string& token);
// Waits up to `timeout` for no process to match `token`; returns the survivors.
std::vector<pid_t> WaitForNoProcesses(const std::string& token, std::chrono::milliseconds timeout);
// SIGKILLs every process matching `token` (cleanup after a twin test shows an escape).
void KillProcesses(const std::string& token);

// waitpid with a timeout; false if `pid` has not exited by then.
bool WaitForExit(pid_t pid, int* status, std::chrono::milliseconds timeout);

// A TCP listener on the host's 127.0.0.1 (an ephemeral port), open for the object's lifetime: the
// target of the "can the sandbox reach the host's loopback" attacks.
class HostTcpListener {
 public:
  HostTcpListener();
  ~HostTcpListener();
  HostTcpListener(const HostTcpListener&) = delete;
  HostTcpListener& operator=(const HostTcpListener&) = delete;
  std::string port() const { return std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Spawns a host command (through Harness::AsUser) that lives until killed; returns its pid.
pid_t SpawnHost(const std::vector<std::string>& argv);

// One tests/egress_fixtures/serve.py process (python3 on the host), alive for the object's
// lifetime: the local servers of the filtered-egress and setup tests (an npm registry, a pip
// index, HTTP(S) fixtures on 127.0.0.2).
class FixtureServer {
 public:
  // Starts serve.py with `args` without waiting for it (WaitForPort does); empty when it could not
  // be started (`error` says why).
  static std::unique_ptr<FixtureServer> Spawn(const std::vector<std::string>& args,
                                              std::string* error);
  // Reads the port serve.py prints first; false (and `error`) when none came within 10 s.
  bool WaitForPort(std::string* error);
  ~FixtureServer();
  FixtureServer(const FixtureServer&) = delete;
  FixtureServer& operator=(const FixtureServer&) = delete;
  [[nodiscard]] const std::string& port() const { return port_; }

 private:
  FixtureServer(pid_t pid, int out_fd, std::string what)
      : pid_(pid), out_fd_(out_fd), what_(std::move(what)) {}
  pid_t pid_;
  int out_fd_;
  std::string what_;
  std::string port_;
};

}  // namespace cagent::testing
