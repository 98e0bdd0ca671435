#include "launcher/cli/exec_command.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/duration.h"
#include "launcher/child_report.h"
#include "launcher/launch_spec.h"
#include "launcher/sandbox.h"

namespace cagent::launcher {
namespace {

constexpr int kExitUsage = 2;

// What each layer keeps from the command, for the warning printed when it is switched off.
const char* LayerConsequence(Layer l) {
  switch (l) {
    case Layer::kMountView: return "the command sees and can write the host's whole filesystem";
    case Layer::kPidNamespace: return "the command can see and signal the caller's processes";
    case Layer::kNetNamespace: return "the command shares the host's network";
    case Layer::kIpcNamespace: return "the command shares the host's System V IPC";
    case Layer::kUtsNamespace: return "the command shares the host's hostname";
    case Layer::kCgroupNamespace: return "the command sees the host's cgroup paths";
    case Layer::kNewSession: return "the command keeps cagent's controlling terminal";
    case Layer::kDieWithParent: return "the sandbox may outlive cagent";
    case Layer::kEnvScrub: return "the command inherits cagent's whole environment, secrets included";
    case Layer::kCloseFds: return "the command inherits cagent's open file descriptors";
    case Layer::kCapabilities: return "the command keeps its capabilities inside the namespaces";
    case Layer::kCount: break;
  }
  return "";
}

std::string StatusName(SandboxOutcome::Kind k) {
  switch (k) {
    case SandboxOutcome::Kind::kExited: return "exited";
    case SandboxOutcome::Kind::kSignaled: return "signaled";
    case SandboxOutcome::Kind::kTimedOut: return "timed_out";
    case SandboxOutcome::Kind::kSetupFailed: return "setup_failed";
    case SandboxOutcome::Kind::kExecFailed: return "exec_failed";
  }
  return "unknown";
}

nlohmann::json LayersJson(const LaunchSpec& spec) {
  nlohmann::json layers = nlohmann::json::object();
  layers["user_namespace"] = true;
  for (size_t i = 0; i < static_cast<size_t>(Layer::kCount); ++i) {
    const auto l = static_cast<Layer>(i);
    layers[std::string(LayerName(l))] = !spec.disabled.Has(l);
  }
  return layers;
}

int Usage(const std::string& message) {
  spdlog::error("{}", message);
  return kExitUsage;
}

}  // namespace

CLI::App* AddExecCommand(CLI::App& app, ExecOptions& o) {
  CLI::App* exec = app.add_subcommand(
      "exec",
      "Run COMMAND inside a sandbox: new user, mount, pid, network, IPC, UTS and cgroup namespaces; "
      "a fresh root with the system directories read-only, the workspace read-write, private /tmp "
      "and HOME, its own /proc and a minimal /dev; only loopback networking; no capabilities; a "
      "scrubbed environment; a new session. cagent exits with the command's status (128+N when it "
      "is killed by signal N).");
  exec->add_option("--profile", o.profile,
                   "Sandbox profile. Until the policy language lands, only the built-in 'default' "
                   "exists.")
      ->default_str("default");
  exec->add_option("-w,--workspace", o.workspace,
                   "Directory bound read-write at its own path and used as the working directory "
                   "(default: the current directory).");
  exec->add_flag("--json", o.json,
                 "After the command ends, print one JSON object describing the run (status, exit "
                 "code, signal, duration, layers applied) on stdout, after the command's own "
                 "output.");
  exec->add_flag("-q,--quiet", o.quiet, "Do not print the outcome line on stderr.");
  exec->add_option("--ro", o.ro_paths, "Also bind this host path read-only (repeatable).")
      ->allow_extra_args(false);
  exec->add_option("--rw", o.rw_paths, "Also bind this host path read-write (repeatable).")
      ->allow_extra_args(false);
  exec->add_option("--hide", o.hide_paths,
                   "Cover this path with an empty read-only file or directory (repeatable).")
      ->allow_extra_args(false);
  exec->add_option("-e,--env", o.env_set, "Set NAME=VALUE inside the sandbox (repeatable).")
      ->allow_extra_args(false);
  exec->add_option("--pass-env", o.env_pass,
                   "Pass the caller's variable NAME into the sandbox if set (repeatable). By "
                   "default only TERM, LANG, LC_*, TZ, COLORTERM and NO_COLOR pass.")
      ->allow_extra_args(false);
  exec->add_option("--timeout", o.timeout,
                   "Stop the command after DURATION (e.g. 90s, 10m): SIGTERM, then SIGKILL of the "
                   "whole sandbox 2s later. cagent then exits 124.");
  exec->add_option("--hostname", o.hostname, "Hostname inside the sandbox (default: cagent).");
  exec->add_option("--disable-layer", o.disable_layers,
                   "Switch off one layer of confinement, for debugging only (repeatable): fs, pid, "
                   "net, ipc, uts, cgroup, session, die-with-parent, env, fds, caps. Each is "
                   "reported on stderr and in --json.")
      ->group("Debugging")
      ->allow_extra_args(false);
  // Everything from the first positional argument on is the command, options included, so both
  // `cagent exec -- ls -l` and `cagent exec ls -l` work.
  exec->positionals_at_end(true);
  exec->add_option("command", o.command, "The command and its arguments (after --).")
      ->required();
  exec->footer(
      "EXIT STATUS\n"
      "  The command's own exit status; 128+N if it was killed by signal N.\n"
      "  124  the --timeout expired and the sandbox was stopped\n"
      "  125  the sandbox could not be built (the step and error are printed)\n"
      "  126  the command was found but could not be executed\n"
      "  127  the command was not found inside the sandbox\n"
      "  2    invalid command line\n"
      "  With --json, \"status\" tells these apart from a command that exits 124-127 itself.\n\n"
      "EXAMPLES\n"
      "  cagent exec -- make test\n"
      "  cagent exec --workspace ~/src/app --timeout 10m -- npm test\n"
      "  cagent exec --json -- sh -c 'id; ls /'");
  return exec;
}

int RunExecCommand(const ExecOptions& o) {
  if (o.profile != "default") {
    return Usage("unknown profile '" + o.profile +
                 "': only the built-in 'default' profile exists until the policy language lands");
  }
  std::string workspace = o.workspace;
  if (workspace.empty()) {
    char buf[4096];
    if (::getcwd(buf, sizeof(buf)) == nullptr) {
      return Usage(std::string("cannot determine the current directory: ") + std::strerror(errno) +
                   "; pass --workspace DIR");
    }
    workspace = buf;
  }
  auto canonical = CanonicalDirectory(workspace);
  if (!canonical) {
    return Usage("workspace: " + canonical.error().Message() + "; pass an existing directory");
  }
  if (*canonical == "/") return Usage("the workspace cannot be / (it would expose the whole host)");

  LaunchSpec spec = DefaultLaunchSpec(*canonical, o.command);
  for (const auto& p : o.ro_paths) spec.read_only_paths.push_back(p);
  for (const auto& p : o.rw_paths) spec.read_write_paths.push_back(p);
  for (const auto& p : o.hide_paths) spec.hidden_paths.push_back(p);
  for (const auto& kv : o.env_set) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Usage("--env expects NAME=VALUE, got '" + kv + "'");
    }
    spec.env_set.insert(spec.env_set.begin(), EnvVar{kv.substr(0, eq), kv.substr(eq + 1)});
  }
  for (const auto& name : o.env_pass) spec.env_pass.push_back(name);
  if (!o.hostname.empty()) spec.hostname = o.hostname;
  if (!o.timeout.empty()) {
    auto t = ParseDuration(o.timeout);
    if (!t) return Usage("--timeout: " + t.error().Message());
    spec.timeout = *t;
  }
  for (const auto& name : o.disable_layers) {
    auto l = ParseLayer(name);
    if (!l) return Usage("--disable-layer: " + l.error().Message());
    spec.disabled.Add(*l);
    spdlog::warn("warning: layer '{}' is switched off (--disable-layer): {}", name,
                 LayerConsequence(*l));
  }
  if (auto s = ValidateLaunchSpec(spec); !s) return Usage(s.error().Message());

  auto outcome = RunSandbox(spec);
  if (!outcome) {
    spdlog::error("{}", outcome.error().Message());
    return kExitSetupFailed;
  }
  const SandboxOutcome& out = *outcome;
  if (!o.quiet) {
    switch (out.kind) {
      case SandboxOutcome::Kind::kExited:
        break;  // a command's own status needs no comment
      case SandboxOutcome::Kind::kSignaled:
        spdlog::info("{}", DescribeOutcome(out));
        break;
      case SandboxOutcome::Kind::kTimedOut:
        spdlog::info("command timed out after {}; the sandbox was stopped", o.timeout);
        break;
      case SandboxOutcome::Kind::kSetupFailed:
      case SandboxOutcome::Kind::kExecFailed:
        spdlog::error("{}", DescribeOutcome(out));
        break;
    }
  }
  if (o.json) {
    nlohmann::json j;
    j["cagent_version"] = CAGENT_VERSION;
    j["profile"] = o.profile;
    j["command"] = spec.argv;
    j["workspace"] = spec.workspace;
    j["status"] = StatusName(out.kind);
    j["exit_code"] = out.exit_code;
    j["signal"] = out.signal > 0 ? nlohmann::json(SignalName(out.signal)) : nlohmann::json();
    j["duration_ms"] = out.duration.count();
    if (out.kind == SandboxOutcome::Kind::kSetupFailed ||
        out.kind == SandboxOutcome::Kind::kExecFailed) {
      const char* errname = out.err > 0 ? strerrorname_np(out.err) : nullptr;
      j["error"] = {{"step", out.failed_step},
                    {"errno", out.err},
                    {"errno_name", errname != nullptr ? errname : ""},
                    {"message", out.error}};
    } else {
      j["error"] = nullptr;
    }
    j["timeout_ms"] = spec.timeout.count();
    j["layers"] = LayersJson(spec);
    j["disabled_layers"] = out.disabled_layers;
    std::cout << j.dump() << std::endl;
  }
  return out.exit_code;
}

}  // namespace cagent::launcher
