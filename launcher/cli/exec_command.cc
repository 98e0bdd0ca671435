#include "launcher/cli/exec_command.h"

#include <fcntl.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/exit_codes.h"
#include "common/json_text.h"
#include "common/terminal_text.h"
#include "common/unique_fd.h"
#include "launcher/broker/approver.h"
#include "launcher/cli/downgrade_notes.h"
#include "launcher/cli/entry.h"
#include "launcher/egress/proxy.h"
#include "launcher/egress/tls.h"
#include "launcher/profile/caches.h"
#include "launcher/profile/choice.h"
#include "launcher/profile/narrow.h"
#include "launcher/profile/repo_profiles.h"
#include "launcher/profile/spec.h"
#include "launcher/profile/workspace_guard.h"
#include "launcher/sandbox/child_report.h"
#include "launcher/sandbox/launch_spec.h"
#include "launcher/sandbox/sandbox.h"
#include "launcher/sandbox/seccomp.h"
#include "launcher/sandbox/tty.h"
#include "launcher/session/egress.h"
#include "launcher/session/git_identity.h"
#include "launcher/session/session.h"
#include "policy/language/dump.h"
#include "policy/language/loader.h"

namespace cagent::launcher::cli {
namespace {

// What each layer keeps from the command, for the warning printed when it is switched off.
const char* LayerConsequence(Layer l) {
  switch (l) {
    case Layer::kMountView:
      return "the command sees and can write the host's whole filesystem";
    case Layer::kPidNamespace:
      return "the command can see and signal the caller's processes";
    case Layer::kNetNamespace:
      return "the command shares the host's network";
    case Layer::kIpcNamespace:
      return "the command shares the host's System V IPC";
    case Layer::kUtsNamespace:
      return "the command shares the host's hostname";
    case Layer::kCgroupNamespace:
      return "the command sees the host's cgroup paths";
    case Layer::kNewSession:
      return "the command keeps cagent's controlling terminal";
    case Layer::kDieWithParent:
      return "the sandbox may outlive cagent";
    case Layer::kEnvScrub:
      return "the command inherits cagent's whole environment, secrets included";
    case Layer::kCloseFds:
      return "the command inherits cagent's open file descriptors";
    case Layer::kCapabilities:
      return "the command keeps its capabilities inside the namespaces";
    case Layer::kRlimits:
      return "no CPU, file size, open file or process ceilings";
    case Layer::kCgroupLimits:
      return "no memory, pids or cpu limits through cgroup v2";
    case Layer::kLandlock:
      return "no Landlock rules: only the mount view confines files";
    case Layer::kSeccomp:
      return "the whole syscall surface of the kernel is reachable";
    case Layer::kGitGuard:
      return "the command can change the workspace's git configuration, hooks and discovery "
             "files, so a later git on the host may run code it planted";
    case Layer::kGitConfig:
      return "git configuration the command writes (core.fsmonitor, aliases, filters, hooksPath) "
             "stays in the workspace's repositories, so a later git on the host may run it";
    case Layer::kSetuidGuard:
      return "setuid/setgid files and file capabilities the command makes stay behind, for a "
             "host step to run";
    case Layer::kCount:
      break;
  }
  return "";
}

std::string StatusName(SandboxOutcome::Kind k) {
  switch (k) {
    case SandboxOutcome::Kind::kExited:
      return "exited";
    case SandboxOutcome::Kind::kSignaled:
      return "signaled";
    case SandboxOutcome::Kind::kTimedOut:
      return "timed_out";
    case SandboxOutcome::Kind::kSetupFailed:
      return "setup_failed";
    case SandboxOutcome::Kind::kExecFailed:
      return "exec_failed";
  }
  return "unknown";
}

// What the git config guard rewrote: the file, the keys it dropped, why it replaced the file whole.
nlohmann::json GitConfigRewritesJson(const std::vector<GitConfigRewrite>& rewrites) {
  nlohmann::json out = nlohmann::json::array();
  for (const GitConfigRewrite& r : rewrites) {
    out.push_back({{"path", r.path}, {"dropped_keys", r.dropped}, {"reason", r.reason}});
  }
  return out;
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
  return ToInt(ExitCode::kUsage);
}

// The descriptor the --json record is written to, opened before the launch so a bad FILE or N is
// a usage error before the command runs; invalid (no record) without --json, --json-file or
// --json-fd. `--json` alone is refused: stdout is the command's, and a record appended to it
// cannot be told apart from the command's own output (`printf hi` gave `hi{"cagent_version"...`).
// Close-on-exec either way, so the sandbox never inherits it, --disable-layer fds included.
Result<UniqueFd> JsonChannel(const ExecOptions& o) {
  if (!o.json_file.empty() && o.json_fd >= 0) {
    return PlainError("--json-file and --json-fd are exclusive: pick one")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (!o.json_file.empty()) {
    UniqueFd fd(::open(o.json_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid()) {
      return PlainError("cannot open --json-file " +
                        TerminalSafe(o.json_file, TerminalLines::kOne) + ": " +
                        std::strerror(errno))
          .WithCode(Error::Code::kInvalidInput);
    }
    return fd;
  }
  if (o.json_fd >= 0) {
    if (o.json_fd <= STDERR_FILENO) {
      return PlainError("--json-fd " + std::to_string(o.json_fd) +
                        " is one of the command's own streams; use a descriptor of 3 or above "
                        "(e.g. --json-fd 3 3>run.json) or --json-file FILE");
    }
    const int flags = ::fcntl(o.json_fd, F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) {
      return PlainError("--json-fd " + std::to_string(o.json_fd) +
                        " is not a descriptor open for writing (open it in the shell: 3>run.json)")
          .WithCode(Error::Code::kInvalidInput);
    }
    // Ours from here on: the record is written to it and it is closed at exit.
    if (::fcntl(o.json_fd, F_SETFD, FD_CLOEXEC) != 0) {
      return PlainError("--json-fd " + std::to_string(o.json_fd) + ": " + std::strerror(errno))
          .WithCode(Error::Code::kInvalidInput);
    }
    return UniqueFd(o.json_fd);
  }
  if (o.json) {
    return PlainError(
        "--json needs a channel of its own: stdout is the command's, and the record "
        "would be mixed into its output; use --json-file FILE or --json-fd N");
  }
  return UniqueFd();
}

// Writes `text` whole to `fd` (retrying short writes and EINTR).
Status WriteJsonRecord(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return PlainError("write the --json record", std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return Ok{};
}

// --ro, --rw and --hide as typed, with the optional marker removed: a PATH must exist (a typo
// would otherwise leave out a bind the command needs, or leave visible what --hide was meant to
// cover, without a word), unless it is written "?PATH", which keeps the skip-if-absent rule the
// profiles and the launcher's own system paths use. Exists means lstat succeeds: a symlink is
// bound as a symlink, dangling or not. Fails with kInvalidInput naming the flag and the path.
Result<ExecOverrides> StrictPaths(ExecOverrides o) {
  auto check = [](const char* flag, std::vector<std::string>& paths) -> Status {
    for (std::string& path : paths) {
      if (path.starts_with('?')) {
        path.erase(0, 1);
        if (path.empty()) {
          return PlainError(std::string(flag) +
                            " ?: the '?' (skip if absent) needs a path after "
                            "it, as in " +
                            flag + " ?/opt/maybe")
              .WithCode(Error::Code::kInvalidInput);
        }
        continue;
      }
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0) {
        const int e = errno;
        return PlainError(std::string(flag) + " " + TerminalSafe(path, TerminalLines::kOne) + ": " +
                          std::strerror(e) +
                          (e == ENOENT ? std::string("; check the path, or write ") + flag + " ?" +
                                             TerminalSafe(path, TerminalLines::kOne) +
                                             " to skip it when it is absent"
                                       : std::string()))
            .WithCode(Error::Code::kInvalidInput);
      }
    }
    return Ok{};
  };
  if (auto s = check("--ro", o.ro_paths); !s) return std::move(s.error());
  if (auto s = check("--rw", o.rw_paths); !s) return std::move(s.error());
  if (auto s = check("--hide", o.hide_paths); !s) return std::move(s.error());
  return o;
}

// The workspace: --workspace, or the current directory; canonical, and accepted by the workspace
// guard (launcher/profile/workspace_guard.h: never a system directory, the home only when named
// with
// --allow-home). The error is the user's to fix (kInvalidInput).
Result<std::string> ExecWorkspace(const std::string& given, bool allow_home) {
  std::string workspace = given;
  if (workspace.empty()) {
    char buf[4096];
    if (::getcwd(buf, sizeof(buf)) == nullptr) {
      return PlainError(std::string("cannot determine the current directory: ") +
                        std::strerror(errno) + "; pass --workspace DIR")
          .WithCode(Error::Code::kInvalidInput);
    }
    workspace = buf;
  }
  auto canonical = CanonicalDirectory(workspace);
  if (!canonical) {
    return PlainError("workspace: " + canonical.error().Message() + "; pass an existing directory")
        .WithCode(Error::Code::kInvalidInput);
  }
  WorkspaceChoice choice;
  choice.named = !given.empty();
  choice.allow_home = allow_home;
  if (auto s = CheckWorkspace(*canonical, choice); !s) return s.error();
  return *canonical;
}

// The profile and the spec it makes, before any override.
struct ExecProfile {
  std::shared_ptr<const policy::Policy> policy;  // null for "default"
  ProfileChoice chosen;
  LaunchSpec spec;
  std::vector<std::string> notes;
};

// "default" is the launcher's built-in view; anything else is compiled from the policy language
// (a name on the search path, or a file). A profile that does not compile has its diagnostics
// printed on stderr here; every error is the user's (kInvalidInput).
Result<ExecProfile> LoadExecProfile(const ExecOptions& o, const std::string& workspace) {
  ExecProfile out;
  if (o.profile == "default") {
    out.spec = DefaultLaunchSpec(workspace, o.command);
    // The caller's git identity (launcher/session/git_identity.h); after the launcher's defaults,
    // so an --env of the same name (put in front by Narrow) wins.
    if (!o.no_git_identity) {
      for (EnvVar& v : session::CallerGitIdentity().Env()) out.spec.env_set.push_back(std::move(v));
    }
    return out;
  }
  const std::string home = CallerHome();
  const auto search = ProfileSearchPath(home, CAGENT_PROFILE_DIR, workspace);
  auto choice = ChooseProfile(o.profile, search, o.trust_repo_profile);
  if (!choice) return PlainError(choice.error().Message()).WithCode(Error::Code::kInvalidInput);
  out.chosen = *choice;
  policy::Compiled compiled = policy::LoadProfile(out.chosen.path, search);
  if (!compiled.ok()) {
    std::cerr << policy::RenderAll(*compiled.sources, compiled.diags);
    return PlainError("profile '" + o.profile + "' has " +
                      std::to_string(compiled.diags.ErrorCount()) +
                      " error(s); `cagent policy check` shows them too")
        .WithCode(Error::Code::kInvalidInput);
  }
  out.policy = compiled.policy;
  ProfileContext ctx;
  ctx.binding = RunBinding(workspace);
  ctx.environ = CallerEnviron();
  if (!o.no_git_identity) ctx.git_identity = session::CallerGitIdentity().Env();
  // The profile's caches: the command is the caller's own choice, like a run's setup commands, so
  // it may fill them (launcher/profile/caches.h).
  ctx.cache_root = CacheRoot();
  ctx.caches_writable = true;
  auto built = SpecFromPolicy(*out.policy, o.command, ctx);
  if (!built) {
    return PlainError("profile '" + o.profile + "': " + built.error().Message())
        .WithCode(Error::Code::kInvalidInput);
  }
  out.spec = std::move(built->spec);
  out.notes = std::move(built->notes);
  return out;
}

// The outcome line on stderr (nothing for a command that simply exited).
void ReportOutcome(const ExecOptions& o, const SandboxOutcome& out) {
  if (!o.quiet) {
    switch (out.kind) {
      case SandboxOutcome::Kind::kExited:
        break;  // a command's own status needs no comment
      case SandboxOutcome::Kind::kSignaled:
        if (out.limit_hit.empty()) {
          spdlog::info("{}", DescribeOutcome(out));
        } else {
          spdlog::info("{}: {}", DescribeOutcome(out), out.limit_hit);
        }
        break;
      case SandboxOutcome::Kind::kTimedOut:
        spdlog::info("command timed out after {}; the sandbox was stopped", o.overrides.timeout);
        break;
      case SandboxOutcome::Kind::kSetupFailed:
      case SandboxOutcome::Kind::kExecFailed:
        spdlog::error("{}", DescribeOutcome(out));
        break;
    }
  }
}

// The --json record of one exec.
nlohmann::json OutcomeJson(const ExecOptions& o, const ExecProfile& profile, const LaunchSpec& spec,
                           const SandboxOutcome& out) {
  const policy::Policy* prof = profile.policy.get();
  const ProfileChoice& chosen = profile.chosen;
  const std::vector<std::string>& profile_notes = profile.notes;
  nlohmann::json j;
  j["cagent_version"] = CAGENT_VERSION;
  j["profile"] = o.profile;
  j["profile_files"] = prof != nullptr ? nlohmann::json(prof->files) : nlohmann::json::array();
  j["profile_file"] = prof != nullptr ? nlohmann::json(chosen.file) : nlohmann::json();
  j["profile_sha256"] = prof != nullptr ? nlohmann::json(chosen.sha256) : nlohmann::json();
  j["profile_notes"] = profile_notes;
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
  j["downgrades"] = out.downgrades;
  j["host_findings"] = out.host_findings;
  j["planted_repositories"] = out.planted_repositories;
  j["cleared_files"] = out.cleared_files;
  j["git_config_rewrites"] = GitConfigRewritesJson(out.git_config_rewrites);
  j["network"] = std::string(NetworkModeName(spec.network));
  j["details"] = {{"landlock", out.landlock},
                  {"seccomp", out.seccomp},
                  {"rlimits", out.rlimits},
                  {"cgroup", out.cgroup},
                  {"git_guard", out.git_guard}};
  j["limit_hit"] = out.limit_hit.empty() ? nlohmann::json() : nlohmann::json(out.limit_hit);
  j["memory_peak_bytes"] =
      out.memory_peak_bytes ? nlohmann::json(*out.memory_peak_bytes) : nlohmann::json();
  return j;
}

// The policy the egress proxy decides by: the profile's, when it has a hosts section; one made of
// --allow-host without a profile (refused with one: it would widen what was reviewed); none.
Result<std::shared_ptr<const policy::Policy>> ExecEgressPolicy(
    const ExecOptions& o, const std::shared_ptr<const policy::Policy>& profile) {
  if (profile != nullptr) {
    if (!o.allow_hosts.empty()) {
      return PlainError("--allow-host would widen profile '" + o.profile +
                        "'; add the host to its hosts section (docs/policy-language.md, "
                        "\"hosts\")")
          .WithCode(Error::Code::kInvalidInput);
    }
    if (profile->egress.value) return profile;
    return std::shared_ptr<const policy::Policy>();
  }
  if (o.allow_hosts.empty()) return std::shared_ptr<const policy::Policy>();
  return session::PolicyAllowingHosts(o.allow_hosts);
}

// The hint lines' context for exec: the profile as named ("" for the default view); --allow-host
// applies without a profile, --resolve always.
session::NetworkHintContext ExecHintContext(const ExecOptions& o) {
  session::NetworkHintContext ctx;
  ctx.profile = o.profile == "default" ? "" : o.profile;
  ctx.allow_host_flag = o.profile == "default" && !o.allow_hosts.empty();
  ctx.exec = true;
  ctx.resolve_flag = true;
  return ctx;
}

// Prints each hint line at once on stderr, even with -q (it is why the command failed); with the
// command on its own terminal nothing is printed now (it would land in the command's screen): the
// lines are printed after the terminal is given back.
std::function<void(const std::string&)> ExecHintPrinter(bool command_has_terminal) {
  if (command_has_terminal) return nullptr;
  return
      [](const std::string& hint) { spdlog::warn("{}", TerminalSafe(hint, TerminalLines::kOne)); };
}

// What the sandbox's network refused: the hint lines, the refused names and hosts, the count of
// refused lookups.
nlohmann::json RefusalsJson(const session::RefusalTally& tally) {
  return {{"hints", tally.hints()},
          {"refused", tally.refused()},
          {"lookups_refused", tally.lookups_refused()}};
}

nlohmann::json EgressJson(const session::EgressSession& egress) {
  nlohmann::json conns = nlohmann::json::array();
  for (const egress::ConnectionRecord& r : egress.records()) {
    conns.push_back({{"host", r.dest.host},
                     {"port", r.dest.port},
                     {"via", std::string(egress::ViaName(r.dest.via))},
                     {"address", r.address},
                     {"verdict", r.allowed ? "allow" : "deny"},
                     {"rule", r.rule},
                     {"reason", r.reason},
                     {"error", r.error},
                     {"bytes_up", r.bytes_up},
                     {"bytes_down", r.bytes_down},
                     {"duration_ms", r.duration.count()}});
  }
  const egress::Proxy::Totals t = egress.totals();
  return {{"connections", conns},       {"relayed", t.connections},
          {"refused", t.refused},       {"bytes_up", t.bytes_up},
          {"bytes_down", t.bytes_down}, {"budget_exhausted", egress.budget_exhausted()}};
}

// exec's session: the spec as narrowed; filtered egress by `egress_policy` (asked on `tty_fd`,
// -1 = headless), else the no-network view; hints and connection lines printed as they come
// unless the command owns the terminal.
Result<session::SessionOptions> ExecSession(const ExecOptions& o, const LaunchSpec& spec,
                                            std::shared_ptr<const policy::Policy> egress_policy,
                                            std::shared_ptr<const policy::Policy> profile,
                                            bool command_has_terminal, int tty_fd) {
  auto overrides = session::ParseResolveOverrides(o.resolve);
  if (!overrides) return overrides.error();
  session::SessionOptions so;
  so.spec = spec;
  so.profile.binding = RunBinding(spec.workspace);
  so.egress_required = true;
  so.resolve = std::move(*overrides);
  so.pre_approvals = o.pre_approve;
  so.approval = o.approve == "never" ? broker::ApprovalMode::kNever : broker::ApprovalMode::kPolicy;
  so.tty_fd = tty_fd;
  so.phase = "exec";
  so.hint = ExecHintContext(o);
  so.on_hint = ExecHintPrinter(command_has_terminal);
  if (egress_policy && !o.quiet && !command_has_terminal) {
    // (With the command on the terminal a line per connection would land in its screen.)
    so.on_record = [](const egress::ConnectionRecord& r) {
      spdlog::info("egress: {}", TerminalSafe(session::DescribeConnection(r), TerminalLines::kOne));
    };
    so.on_exchange = [](const egress::ExchangeRecord& x) {
      spdlog::info("http: {}", TerminalSafe(session::DescribeExchange(x), TerminalLines::kOne));
    };
  }
  so.egress_policy = std::move(egress_policy);
  // The profile's credentials (issue 36): placeholders inside, the values put in by the proxy.
  so.credentials_policy = std::move(profile);
  return so;
}

// What exec says after the command: downgrades, the hint lines held back while the command had
// the terminal, the outcome, an egress budget that ran out; the --json record to `json_fd` (-1 =
// none).
void ReportExec(const ExecOptions& o, const ExecProfile& profile, const LaunchSpec& launch,
                const session::EgressSession* egress, bool command_had_terminal,
                const SandboxOutcome& outcome, int json_fd) {
  // Each once, unless the caller acknowledged it (cli/downgrade_notes.h); --json has them all.
  (void)WarnDowngrades(outcome.downgrades, CallerHome());
  // With --tty the hint waited for the terminal to be the caller's again; -q keeps it (it is why
  // the command failed).
  if (egress != nullptr && command_had_terminal) {
    for (const std::string& h : egress->refusals().hints()) {
      spdlog::warn("{}", TerminalSafe(h, TerminalLines::kOne));
    }
  }
  ReportOutcome(o, outcome);
  if (egress != nullptr && !o.quiet && !egress->budget_exhausted().empty()) {
    spdlog::warn("warning: egress stopped: {}", egress->budget_exhausted());
  }
  if (json_fd >= 0) {
    nlohmann::json j = OutcomeJson(o, profile, launch, outcome);
    j["egress"] = egress != nullptr && egress->filtered() ? EgressJson(*egress) : nlohmann::json();
    j["network_refusals"] = egress != nullptr ? RefusalsJson(egress->refusals()) : nlohmann::json();
    if (auto s = WriteJsonRecord(json_fd, JsonText(j) + "\n"); !s) {
      spdlog::error("{}", s.error().Message());
    }
  }
}
}  // namespace

CLI::App* AddExecCommand(CLI::App& app, ExecOptions& o) {
  CLI::App* exec = app.add_subcommand(
      "exec",
      "Run COMMAND inside a sandbox: new user, mount, pid, network, IPC, UTS and cgroup "
      "namespaces; "
      "a fresh root with the system directories read-only, the workspace read-write, private /tmp "
      "and HOME, its own /proc and a minimal /dev; only loopback networking; no capabilities; a "
      "scrubbed environment; a new session. cagent exits with the command's status (128+N when it "
      "is killed by signal N).");
  exec->add_option("--profile", o.profile,
                   "Profile the sandbox is built from: a name (looked up in the repository's "
                   ".cagent/, ~/.config/cagent/profiles/ or $XDG_CONFIG_HOME/cagent/profiles/, "
                   "the installed profiles, then the built-in ones: "
                   "base, readonly, docs, frontend, backend) or a .cagent file. Its mounts, deny "
                   "globs, network mode, environment and limits make the sandbox; command-line "
                   "limits may only lower them. 'default' (the default) is the launcher's own "
                   "view without a profile.")
      ->default_str("default");
  exec->add_flag("--trust-repo-profile", o.trust_repo_profile, kTrustRepoProfileHelp);
  exec->add_option("-w,--workspace", o.workspace,
                   "Directory bound read-write at its own path and used as the working directory "
                   "(default: the current directory). Refused: a system directory (/usr, /etc, "
                   "/tmp, ...), and your home directory or one that contains it (/home) unless "
                   "named here with --allow-home.");
  exec->add_flag("--allow-home", o.allow_home, kAllowHomeHelp);
  exec->add_flag("--no-git-identity", o.no_git_identity,
                 "Do not set the caller's git user.name and user.email inside (by default they "
                 "are read from the caller's global and system git configuration and set as "
                 "GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME, GIT_COMMITTER_EMAIL). A "
                 "profile's `git-identity none` does the same.");
  exec->add_flag("--json", o.json,
                 "Write one JSON object describing the run (status, exit code, signal, duration, "
                 "layers applied) after the command ends; needs --json-file or --json-fd, since "
                 "stdout is the command's.");
  exec->add_option("--json-file", o.json_file,
                   "Write the --json record to FILE (created or truncated before the command "
                   "starts; implies --json).");
  exec->add_option("--json-fd", o.json_fd,
                   "Write the --json record to descriptor N (3 or above, open when cagent starts, "
                   "e.g. `--json-fd 3 3>run.json`; implies --json). The command does not inherit "
                   "it.")
      ->check(CLI::NonNegativeNumber);
  exec->add_flag("-q,--quiet", o.quiet, "Do not print the outcome line on stderr.");
  CLI::Option* tty_flag = exec->add_flag(
      "-t,--tty", o.tty,
      "Give the command a terminal of its own: a new pseudo-terminal (in the sandbox's /dev/pts) "
      "that is its stdin, stdout and stderr and its controlling terminal, so job control, Ctrl-C "
      "and Ctrl-Z work inside; cagent relays it to the caller's terminal (in raw mode until "
      "cagent exits) and forwards the window size. The caller's own terminal never enters the "
      "sandbox. The default when stdin and stdout are both terminals (and the session layer is "
      "on). Without a terminal --tty still makes one: stdin is relayed into it (its end is sent "
      "as Ctrl-D, once) and everything the command writes, stderr included, goes to stdout. "
      "With it, egress hosts that ask are denied unless pre-approved (the terminal is the "
      "command's) and egress connections are not printed (--json lists them).");
  exec->add_flag("--no-tty", o.no_tty,
                 "No terminal of its own: the command gets cagent's stdin, stdout and stderr as "
                 "they are, and no controlling terminal, even from an interactive terminal.")
      ->excludes(tty_flag);
  exec->add_option("--ro", o.overrides.ro_paths,
                   "Also bind this host path read-only (repeatable). The path must exist; "
                   "?PATH (e.g. --ro ?/opt/maybe) skips it when it is absent.")
      ->allow_extra_args(false);
  exec->add_option("--rw", o.overrides.rw_paths,
                   "Also bind this host path read-write (repeatable). The path must exist; "
                   "?PATH skips it when it is absent.")
      ->allow_extra_args(false);
  exec->add_option("--hide", o.overrides.hide_paths,
                   "Cover this path with an empty read-only file or directory (repeatable). The "
                   "path must exist; ?PATH skips it when it is absent.")
      ->allow_extra_args(false);
  exec->add_option("-e,--env", o.overrides.env_set,
                   "Set NAME=VALUE inside the sandbox (repeatable).")
      ->allow_extra_args(false);
  exec->add_option("--pass-env", o.overrides.env_pass,
                   "Pass the caller's variable NAME into the sandbox if set (repeatable). By "
                   "default only TERM, LANG, LC_*, TZ, COLORTERM and NO_COLOR pass.")
      ->allow_extra_args(false);
  exec->add_option("--timeout", o.overrides.timeout,
                   "Stop the command after DURATION (e.g. 90s, 10m): SIGTERM, then SIGKILL of the "
                   "whole sandbox 2s later. cagent then exits 124.");
  exec->add_option("--hostname", o.overrides.hostname,
                   "Hostname inside the sandbox (default: cagent).");
  exec->add_option("--network", o.overrides.network,
                   "loopback: only lo, local servers and clients work; none: no IP sockets at all "
                   "(seccomp refuses them, Landlock denies every TCP bind/connect). Default: the "
                   "profile's, loopback without one; with a profile only narrowing is accepted.");
  exec->add_option("--cpu-time", o.overrides.cpu_time,
                   "CPU time ceiling (e.g. 30s): SIGXCPU at the limit, SIGKILL one second later.")
      ->group("Limits");
  exec->add_option("--file-size", o.overrides.file_size,
                   "Largest file the command may write (e.g. 1G).")
      ->group("Limits");
  exec->add_option("--open-files", o.overrides.open_files,
                   "Most open descriptors per process (default 8192).")
      ->group("Limits");
  exec->add_option("--processes", o.overrides.processes,
                   "Most processes in the sandbox (default 4096; RLIMIT_NPROC, counted per user "
                   "namespace, so it bounds this sandbox only).")
      ->group("Limits");
  exec->add_option("--memory", o.overrides.memory,
                   "Memory limit through a delegated cgroup v2 (memory.max, e.g. 2G). Without one "
                   "cagent refuses to run unless --best-effort cgroup.")
      ->group("Limits");
  exec->add_option("--pids", o.overrides.pids, "pids.max through a delegated cgroup v2.")
      ->group("Limits");
  exec->add_option("--cpus", o.overrides.cpus,
                   "CPU bandwidth through cgroup v2 cpu.max, e.g. 1.5 (cores).")
      ->group("Limits");
  exec->add_option("--best-effort", o.overrides.best_effort,
                   "Accept the absence of a layer instead of refusing to run, reporting the "
                   "downgrade: landlock (kernel without Landlock or its newer rules), cgroup (no "
                   "delegated cgroup v2 for --memory/--pids/--cpus). Repeatable.")
      ->allow_extra_args(false);
  exec->add_option("--allow-host", o.allow_hosts,
                   "Let the command reach HOST[:PORT] through cagent's egress proxy (no port: 443 "
                   "and 80; *.example.org: its subdomains). Repeatable. Turns filtered egress on: "
                   "proxy variables, a DNS stub and transparent capture inside, every connection "
                   "decided and reported. Refused with --profile (write a hosts section instead).")
      ->group("Network")
      ->allow_extra_args(false);
  exec->add_option("--resolve", o.resolve,
                   "HOST:PORT:ADDR: connect to ADDR when the command asks for HOST:PORT through "
                   "the proxy, as curl's --resolve (the operator's own override: ADDR may be "
                   "loopback or private). Repeatable; needs filtered egress.")
      ->group("Network")
      ->allow_extra_args(false);
  exec->add_option("--approve", o.approve,
                   "How hosts rules that `ask` are answered: terminal (the default when cagent "
                   "has a terminal: a prompt on /dev/tty) or never (denied unless pre-approved).")
      ->group("Network")
      ->check(CLI::IsMember({"terminal", "never"}));
  exec->add_option("--pre-approve", o.pre_approve,
                   "Approve an asking host beforehand: 'host: pypi.org:443', 'host: "
                   "*.example.org' or 'sha256:DIGEST'. Repeatable.")
      ->group("Network")
      ->allow_extra_args(false);
  exec->add_flag("--print-seccomp", o.print_seccomp,
                 "Print the seccomp filter as libseccomp's pseudo filter code (PFC) and exit.")
      ->group("Debugging");
  exec->add_option(
          "--disable-layer", o.overrides.disable_layers,
          "Switch off one layer of confinement, for debugging only (repeatable): fs, pid, "
          "net, ipc, uts, cgroupns, session, die-with-parent, env, fds, caps, rlimits, cgroup, "
          "landlock, seccomp, git-guard (the workspace's git metadata read-only), "
          "setuid-guard (no setuid/setgid modes, and the sweep after exit), git-config (the "
          "check of git configuration after exit). Each is "
          "reported on stderr and in --json.")
      ->group("Debugging")
      ->allow_extra_args(false);
  // Everything from the first positional argument on is the command, options included, so both
  // `cagent exec -- ls -l` and `cagent exec ls -l` work.
  exec->positionals_at_end(true);
  // Not ->required(): --print-seccomp needs no command; RunExecCommand asks for one otherwise.
  exec->add_option("command", o.command, "The command and its arguments (after --).");
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
      "  cagent exec --json-file run.json -- sh -c 'id; ls /'\n"
      "  cagent exec --allow-host pypi.org --allow-host files.pythonhosted.org -- pip download "
      "flask\n"
      "  cagent exec --profile backend-registries -- cargo fetch\n"
      "  cagent exec --profile agent-cli -- claude");
  return exec;
}

int RunExecCommand(const ExecOptions& o) {
  if (o.command.empty() && !o.print_seccomp) {
    return Usage(
        "exec needs a command: cagent exec [OPTIONS] -- COMMAND [ARGS...] (see cagent exec "
        "--help)");
  }
  auto json_out = JsonChannel(o);
  if (!json_out) return Usage(json_out.error().Message());
  auto workspace = ExecWorkspace(o.workspace, o.allow_home);
  if (!workspace) return Usage(workspace.error().Message());
  auto profile = LoadExecProfile(o, *workspace);
  if (!profile) return Usage(profile.error().Message());
  // Credentials are put in by the egress proxy's interception, which needs TLS: the launcher has
  // none (cli/entry.h), so it hands the whole command line to cagent-full, before anything ran.
  if (profile->policy && !profile->policy->credentials.empty() &&
      egress::InstalledTls() == nullptr) {
    return RunInFullProgram("a profile with credentials");
  }
  // With a profile the command line may narrow the sandbox, never widen it (narrow.h).
  auto strict = StrictPaths(o.overrides);
  if (!strict) return Usage(strict.error().Message());
  auto narrowed = Narrow(profile->spec, *strict, profile->policy.get());
  if (!narrowed) {
    spdlog::error("{}", narrowed.error().Message());
    return ToInt(ExitCodeFor(narrowed.error(), ExitCode::kUsage));
  }
  if (!profile->policy) {
    // The launcher's default view and what --ro/--rw added: the host secret set hidden in it, as
    // SpecFromPolicy hides it in a profile's.
    if (auto s = HideHostSecrets(*narrowed, CallerHome(), profile->notes); !s) {
      spdlog::error("{}", s.error().Message());
      return ToInt(ExitCode::kSetupFailed);
    }
  }
  const LaunchSpec& spec = *narrowed;
  for (const auto& name : o.overrides.disable_layers) {
    if (auto l = ParseLayer(name)) {
      spdlog::warn("warning: layer '{}' is switched off (--disable-layer): {}", name,
                   LayerConsequence(*l));
    }
  }
  // --print-seccomp alone runs nothing: the spec is checked as if it ran a command (the filter
  // does not depend on which), so its other mistakes are still reported.
  LaunchSpec checked = spec;
  if (o.print_seccomp && checked.argv.empty()) checked.argv = {"true"};
  if (auto s = ValidateLaunchSpec(checked); !s) return Usage(s.error().Message());
  if (o.print_seccomp) {
    auto filter =
        SeccompFilter::Prepare(DefaultSeccompPolicy(spec.network == NetworkMode::kLoopback));
    if (!filter) return Usage(filter.error().Message());
    auto pfc = filter->Pfc();
    if (!pfc) return Usage(pfc.error().Message());
    std::cout << *pfc;
    return ToInt(ExitCode::kOk);
  }

  // The sandbox's own terminal: asked for, or by default when cagent is interactive. A spec
  // without the session layer keeps cagent's session, which cannot own a new terminal.
  const bool session_on = !spec.disabled.Has(Layer::kNewSession);
  if (o.tty && !session_on) {
    return Usage(
        "--tty needs the session layer (the command's own session owns its terminal); drop "
        "--disable-layer session, or use --no-tty");
  }
  const bool use_tty =
      !o.no_tty && session_on && (o.tty || IsInteractive(STDIN_FILENO, STDOUT_FILENO));
  // Before any thread exists (the egress proxy's, the approver's): Capture blocks the signals the
  // session handles, and every thread made later inherits that.
  std::unique_ptr<CallerTerminal> terminal;
  if (use_tty) terminal = CallerTerminal::Capture(STDIN_FILENO, STDOUT_FILENO);

  // The session: filtered egress by the profile's hosts section or --allow-host (asked on the
  // caller's terminal), else the no-network view.
  auto egress_policy = ExecEgressPolicy(o, profile->policy);
  if (!egress_policy) return Usage(egress_policy.error().Message());
  if (!*egress_policy && (!o.resolve.empty() || !o.pre_approve.empty())) {
    return Usage(
        "--resolve and --pre-approve need filtered egress: --allow-host, or a profile "
        "with a hosts section");
  }
  // With --tty the caller's terminal is the command's: no prompt can share it.
  UniqueFd tty;
  if (*egress_policy && o.approve != "never" && !terminal) {
    tty.Reset(::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY));
  }
  auto so = ExecSession(o, spec, *egress_policy, profile->policy, terminal != nullptr, tty.get());
  if (!so) return Usage(so.error().Message());
  auto plan = session::Prepare(std::move(*so));
  if (!plan) return Usage(plan.error().Message());
  // The session's own notes (an optional credential without a value), with the profile's.
  for (const std::string& note : (*plan)->notes()) {
    if (!o.quiet) spdlog::info("note: {}", TerminalSafe(note, TerminalLines::kOne));
    profile->notes.push_back(note);
  }
  const LaunchSpec& launch = (*plan)->spec();
  const session::EgressSession* egress = (*plan)->egress();

  // The payload: the command's own terminal, relayed to the caller's.
  session::Payload payload;
  std::unique_ptr<TerminalRelay> relay;
  if (terminal) {
    payload.control = [&terminal, &relay](SandboxControl& control) {
      control.terminal = &terminal->plan();
      control.on_terminal = [&terminal, &relay](UniqueFd master) -> Status {
        auto started = TerminalRelay::Start(*terminal, std::move(master));
        if (!started) return started.error();
        relay = std::move(*started);
        return Ok{};
      };
    };
    if (auto s = terminal->EnterRaw(); !s) {
      spdlog::error("{}", s.error().Message());
      return ToInt(ExitCode::kSetupFailed);
    }
  }
  // The command's last output, then the caller's modes back, before anything else is printed.
  payload.exited = [&relay, &terminal](const Result<SandboxOutcome>&) {
    if (relay) relay->Finish();
    if (terminal) terminal->Restore();
  };
  auto outcome = session::Run(**plan, payload);
  if (!outcome) {
    spdlog::error("{}", outcome.error().Message());
    return ToInt(ExitCodeFor(outcome.error(), ExitCode::kSetupFailed));
  }
  ReportExec(o, *profile, launch, egress, terminal != nullptr, *outcome, json_out->get());
  return outcome->exit_code;
}
}  // namespace cagent::launcher::cli
