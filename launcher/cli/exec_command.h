// `cagent exec`: run one command in a sandbox built from a profile (or the launcher's defaults).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace cagent::launcher {

struct ExecOptions {
  std::string profile = "default";
  bool trust_repo_profile = false;  // accept ./.cagent/NAME shadowing a user/built-in NAME
  std::string workspace;  // default: the current directory
  bool json = false;
  bool quiet = false;
  std::vector<std::string> ro_paths;
  std::vector<std::string> rw_paths;
  std::vector<std::string> hide_paths;
  std::vector<std::string> env_set;   // NAME=VALUE
  std::vector<std::string> env_pass;  // NAME
  std::string timeout;                // duration literal, empty = none
  std::string hostname;               // empty = the default
  std::vector<std::string> disable_layers;
  std::vector<std::string> best_effort;
  std::string network;  // empty = the profile's (loopback without a profile)
  std::string cpu_time, file_size, memory, cpus;  // literals, empty = default
  std::optional<std::uint64_t> open_files, processes, pids;
  bool print_seccomp = false;
  std::vector<std::string> command;
};

// Adds the `exec` subcommand to `app`; the options are written into `options`.
CLI::App* AddExecCommand(CLI::App& app, ExecOptions& options);

// Runs `cagent exec`; returns cagent's exit status (the command's, or a reserved code).
int RunExecCommand(const ExecOptions& options);

}  // namespace cagent::launcher
