#include "launcher/cli/run_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <mutex>
#include <sstream>
#include <spdlog/spdlog.h>
#include <thread>

#include "common/duration.h"
#include "common/sha256.h"
#include "common/terminal_text.h"
#include "common/unique_fd.h"
#include "launcher/cli/agent_command.h"
#include "launcher/run/apply.h"
#include "launcher/run/git.h"
#include "launcher/run/run.h"
#include "launcher/run/workspace.h"

namespace cagent::launcher {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
constexpr int kExitUsage = 2;

int Usage(const std::string& message) {
  spdlog::error("{}", message);
  return kExitUsage;
}

std::string ReadAll(const std::string& path, bool* ok = nullptr) {
  std::ifstream in(path, std::ios::binary);
  if (ok != nullptr) *ok = static_cast<bool>(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string FormatElapsed(std::chrono::milliseconds ms) {
  const auto s = ms.count() / 1000;
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>((s / 60) % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  }
  return buf;
}

// The live status: one line redrawn in place on a terminal, and redrawn every second between
// events so the elapsed time moves while a long command or model call runs; plain lines (state
// changes and actions) otherwise, so logs stay readable.
class ProgressDisplay {
 public:
  explicit ProgressDisplay(bool quiet) : enabled_(!quiet), tty_(::isatty(STDERR_FILENO) == 1) {
    if (enabled_ && tty_) ticker_ = std::thread([this] { Tick(); });
  }
  ~ProgressDisplay() { Done(); }
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;

  void Update(const run::RunProgress& p) {
    if (!enabled_) return;
    const std::lock_guard<std::mutex> lock(mu_);
    last_ = p;
    last_at_ = std::chrono::steady_clock::now();
    have_ = true;
    Draw(p);
  }
  void Done() {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (ticker_.joinable()) ticker_.join();
    const std::lock_guard<std::mutex> lock(mu_);
    if (drawn_) std::cerr << "\r\033[K" << std::flush;
    drawn_ = false;
  }

 private:
  // Redraws the last state with the elapsed time advanced, once a second, except while a person
  // is being asked for an approval on this terminal (the prompt must not be overwritten).
  void Tick() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
      if (!have_ || last_.last_action.starts_with("waiting for approval")) continue;
      run::RunProgress p = last_;
      p.elapsed += std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - last_at_);
      Draw(p);
    }
  }

  // With mu_ held.
  void Draw(const run::RunProgress& p) {
    std::string line = "[" + std::string(run::RunStateName(p.state)) + "]";
    if (p.turn > 0 || p.state == run::RunState::kRunning) {
      line += " turn " + std::to_string(p.turn);
      if (p.max_turns > 0) line += "/" + std::to_string(p.max_turns);
      line += ", " + std::to_string(p.tool_calls) + " tool calls";
    }
    line += ", " + FormatElapsed(p.elapsed);
    if (tty_) {
      std::string action = p.last_action;
      for (char& c : action) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
      }
      std::string shown = line + (action.empty() ? "" : "  " + action);
      if (shown.size() > 118) shown = shown.substr(0, 115) + "...";
      std::cerr << "\r\033[K" << shown << std::flush;
      drawn_ = true;
      return;
    }
    if (p.state != last_state_) {
      std::cerr << "cagent: " << line << "\n";
      last_state_ = p.state;
    }
    if (!p.last_action.empty() && p.last_action != last_action_) {
      std::cerr << "cagent:   " << p.last_action << "\n";
      last_action_ = p.last_action;
    }
  }

  const bool enabled_;
  const bool tty_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::thread ticker_;
  bool stop_ = false;
  bool have_ = false;
  run::RunProgress last_;
  std::chrono::steady_clock::time_point last_at_;
  bool drawn_ = false;
  run::RunState last_state_ = run::RunState::kCreated;
  std::string last_action_;
};

void PrintSummary(const run::RunRecord& r) {
  std::ostream& o = std::cerr;
  o << "run " << r.run_id << ": " << run::RunStateName(r.state);
  if (!r.reason.empty()) o << " — " << r.reason;
  o << "\n";
  o << "  profile      " << r.profile << " (policy " << r.policy_digest.substr(0, 12) << ")\n";
  o << "  base         " << r.base_commit << (r.carried_dirty ? " + uncommitted changes" : "")
    << "\n";
  o << "  model        " << r.model << ": " << r.used.model_turns << " turns, "
    << r.used.input_tokens << " tokens in, " << r.used.output_tokens << " out\n";
  o << "  tool calls   " << r.used.tool_calls << " (" << r.denials << " refused)\n";
  o << "  patch        " << r.patch.files.size() << " files, " << r.patch.patch.size()
    << " bytes, sha256 " << r.patch.sha256.substr(0, 16) << "\n";
  for (const auto& f : r.patch.files) o << "                 " << f.status << " " << f.path << "\n";
  if (!r.patch.check_clean) o << "  diff --check reports problems (see cagent diff " << r.run_id << ")\n";
  for (const auto& v : r.violations) o << "  violation    " << v.message << "\n";
  for (const auto& v : r.verification) {
    o << "  verify       " << run::VerifyStatusName(v.status) << ": " << v.command << " ("
      << v.detail << ", " << v.duration.count() << " ms)\n";
  }
  if (!r.agent_summary.empty()) o << "  agent says   " << r.agent_summary << "\n";
  o << "  run dir      " << r.run_dir << "\n";
  if (r.state == run::RunState::kCompleted && !r.patch.files.empty()) {
    o << "next: cagent diff " << r.run_id << "   then   cagent apply " << r.run_id << "\n";
  }
}

std::string RunsDirectory() { return StateDirectory() + "/runs"; }

// The run ids under `dir`, oldest first (ids start with their UTC creation time).
std::vector<std::string> RunIds(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> ids;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory()) ids.push_back(e.path().filename().string());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

int DoRuns(const RunsCommandOptions& o) {
  const std::string dir = RunsDirectory();
  const std::vector<std::string> ids = RunIds(dir);
  json all = json::array();
  for (const auto& id : ids) {
    auto r = run::ReadRunResult(dir + "/" + id);
    json row = {{"run_id", id}};
    if (r) {
      row["status"] = (*r)["status"];
      row["profile"] = (*r)["profile"];
      row["base_commit"] = (*r)["base_commit"];
      row["created_at"] = (*r)["created_at"];
      row["files"] = (*r)["changed_files"].size();
      row["reason"] = (*r)["reason"];
    } else {
      row["status"] = "unknown";
      row["reason"] = "no result.json (running, or interrupted)";
    }
    all.push_back(row);
  }
  if (o.json) {
    std::cout << all.dump(2) << "\n";
    return 0;
  }
  if (all.empty()) {
    std::cout << "no runs yet (in " << dir << ")\n";
    return 0;
  }
  for (const auto& row : all) {
    std::cout << row["run_id"].get<std::string>() << "  "
              << row["status"].get<std::string>();
    if (row.contains("profile")) std::cout << "  " << row["profile"].get<std::string>();
    if (row.contains("files")) std::cout << "  " << row["files"].get<std::size_t>() << " files";
    const std::string reason = row.value("reason", "");
    if (!reason.empty()) std::cout << "  " << reason.substr(0, 80);
    std::cout << "\n";
  }
  return 0;
}

int DoShow(const RunsCommandOptions& o, const std::string& run_dir) {
  auto r = run::ReadRunResult(run_dir);
  if (!r) return Usage(r.error().Message());
  if (o.json) {
    std::cout << r->dump(2) << "\n";
  } else {
    const json& j = *r;
    std::cout << "run " << j.value("run_id", "") << ": " << j.value("status", "");
    if (!j.value("reason", "").empty()) std::cout << " — " << j.value("reason", "");
    std::cout << "\n  profile  " << j.value("profile", "") << "\n  base     "
              << j.value("base_commit", "") << "\n  repo     " << j.value("repo", "")
              << "\n  patch    " << j["patch"].value("bytes", 0) << " bytes, sha256 "
              << j["patch"].value("sha256", "") << "\n";
    for (const auto& f : j["changed_files"]) {
      std::cout << "           " << f.value("status", "") << " " << f.value("path", "") << "\n";
    }
    for (const auto& v : j["verification"]) {
      std::cout << "  verify   " << v.value("status", "") << ": " << v.value("command", "") << " ("
                << v.value("detail", "") << ")\n";
    }
    std::cout << "  events   " << j.value("event_log", "") << "\n";
  }
  auto state = run::ParseRunState((*r).value("status", ""));
  bool verification_failed = false;
  for (const auto& v : (*r)["verification"]) {
    const std::string s = v.value("status", "");
    verification_failed = verification_failed || s == "failed" || s == "timed-out";
  }
  return state ? run::ExitCodeFor(*state, verification_failed) : run::kExitRunFailed;
}

int DoDiff(const std::string& run_dir) {
  bool ok = false;
  const std::string patch = ReadAll(run_dir + "/patch.diff", &ok);
  if (!ok) return Usage(run_dir + " has no patch.diff (the run ended before its change set was captured)");
  std::cout << patch;
  return 0;
}

int DoApply(const RunsCommandOptions& o, const std::string& run_dir) {
  // All of it (checks, openat2-resolved writes, staging) is in launcher/run/apply.h.
  run::ApplyRequest req;
  req.run_dir = run_dir;
  req.repo = o.repo;
  req.branch = o.branch;
  auto r = run::ApplyRun(req);
  if (!r) {
    spdlog::error("{}", TerminalSafe(r.error().Message(), TerminalLines::kMultiple));
    return run::kExitRunFailed;
  }
  if (r->nothing_to_apply) {
    std::cout << "the run changed nothing; nothing to apply\n";
    return 0;
  }
  if (r->unverified) {
    spdlog::warn("run {} was not verified (its profile has no verify commands; it ran with "
                 "--allow-unverified): review the patch before you commit it",
                 TerminalSafe(r->run_id));
  }
  std::cout << "applied run " << TerminalSafe(r->run_id) << " (" << r->paths.size()
            << " files) to " << TerminalSafe(r->repo_root)
            << (r->branch.empty() ? "" : " on the new branch " + TerminalSafe(r->branch))
            << "; the changes are staged: review with git diff --cached\n";
  return 0;
}

int DoRm(const RunsCommandOptions& o, const std::string& run_dir) {
  auto r = run::ReadRunResult(run_dir);
  if (!r && !o.force) {
    return Usage(r.error().Message() + "; pass --force to remove it anyway");
  }
  std::error_code ec;
  const auto n = fs::remove_all(run_dir, ec);
  if (ec) return Usage("remove " + run_dir + ": " + ec.message());
  std::cout << "removed " << run_dir << " (" << n << " files)\n";
  return 0;
}

}  // namespace

CLI::App* AddRunCommand(CLI::App& app, RunCommandOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Hand TASK (a Markdown file) to the coding agent: cagent pins the repository's base commit, "
      "makes a disposable workspace of it under $XDG_STATE_HOME/cagent/runs/RUN/, runs the agent "
      "in a sandbox built from the profile with every model and tool call going through the "
      "policy broker, then captures the change set with git itself, checks it against the "
      "profile and runs the profile's verification commands in a fresh sandbox. The caller's "
      "repository is never written; 'cagent apply RUN' brings a verified patch in.");
  cmd->add_option("--profile", o.profile, "Profile (name or .cagent file).")->required();
  cmd->add_option("task", o.task_file,
                  "The task in Markdown. Untrusted: nothing in it changes the profile, paths, "
                  "limits or verification.")
      ->required();
  cmd->add_option("--repo", o.repo, "The repository (default: the current directory's).");
  cmd->add_option("--commit", o.commit, "Base revision (default HEAD), pinned to its full id.");
  cmd->add_flag("--allow-dirty", o.allow_dirty,
                "Carry uncommitted changes (tracked and untracked, not ignored) into the "
                "workspace instead of refusing; the run records that it did.");
  cmd->add_flag("--allow-unverified", o.allow_unverified,
                "Accept a profile without verify commands: the run then ends 'completed' with "
                "nothing verified, and its result says so (\"verified\": false). Without it such "
                "a profile is refused before anything starts.");
  AddSessionFlags(cmd, o.session);
  cmd->add_flag("--json", o.json, "Print result.json on stdout instead of the summary.");
  cmd->footer(
      "Exit status: 0 completed and verified; 1 verification failed; 3 the run failed (budget, "
      "policy violation in the patch, provider error, agent crash); 4 needs approval; 130 "
      "cancelled; 125 could not start; 2 usage.");
  return cmd;
}

int RunRunCommand(const RunCommandOptions& o) {
  run::RunRequest req;
  req.profile = o.profile;
  req.task_file = o.task_file;
  req.repo = o.repo;
  req.commit = o.commit;
  req.allow_dirty = o.allow_dirty;
  req.allow_unverified = o.allow_unverified;
  auto settings = ResolveSessionFlags(o.session);
  if (!settings) return Usage(settings.error().Message());
  req.model = settings->model;
  req.model_label = settings->model_label;
  req.approval = settings->approval;
  req.pre_approvals = settings->pre_approvals;
  req.pre_approval_file = settings->pre_approval_file;
  req.budget_overrides = settings->budget_overrides;
  const UniqueFd tty = OpenApprovalTerminal(req.approval);
  req.tty_fd = tty.get();

  ProgressDisplay display(o.json);
  auto rec = run::ExecuteRun(req, [&](const run::RunProgress& p) { display.Update(p); });
  display.Done();
  if (!rec) {
    spdlog::error("{}", rec.error().Message());
    return run::kExitRunSetup;
  }
  if (o.json) {
    std::cout << rec->ToJson().dump(2) << "\n";
  } else {
    PrintSummary(*rec);
  }
  return run::ExitCodeFor(rec->state, rec->verification_failed());
}

Result<std::string> ResolveRunDirectory(const std::string& id) {
  const std::string dir = RunsDirectory();
  const std::vector<std::string> ids = RunIds(dir);
  if (ids.empty()) return PlainError("find run " + id, "there are no runs in " + dir);
  if (id == "last" || id == "latest") return dir + "/" + ids.back();
  std::vector<std::string> matches;
  for (const auto& r : ids) {
    if (r == id) return dir + "/" + r;
    if (r.rfind(id, 0) == 0) matches.push_back(r);
  }
  if (matches.size() == 1) return dir + "/" + matches.front();
  if (matches.empty()) return PlainError("find run " + id, "no such run in " + dir + " (see cagent runs)");
  return PlainError("find run " + id, "the prefix matches " + std::to_string(matches.size()) +
                                           " runs; give more of the id");
}

std::vector<CLI::App*> AddRunsCommands(CLI::App& app, RunsCommandOptions& o) {
  std::vector<CLI::App*> out;
  auto* runs = app.add_subcommand("runs", "List the runs (newest last) with their status.");
  runs->add_flag("--json", o.json, "JSON array on stdout.");
  runs->callback([&o] { o.verb = "runs"; });
  out.push_back(runs);

  auto* show = app.add_subcommand("show", "Show a run's result (status, base, patch, verification).");
  show->add_option("run", o.run, "Run id, a unique prefix of one, or 'last'.")->required();
  show->add_flag("--json", o.json, "Print result.json.");
  show->callback([&o] { o.verb = "show"; });
  out.push_back(show);

  auto* diff = app.add_subcommand("diff", "Print a run's captured patch (binary-safe, git format).");
  diff->add_option("run", o.run, "Run id, a unique prefix of one, or 'last'.")->required();
  diff->callback([&o] { o.verb = "diff"; });
  out.push_back(diff);

  auto* apply = app.add_subcommand(
      "apply",
      "Apply a completed run's verified patch to the repository it was made from (staged, not "
      "committed). Refused when the patch no longer matches the verified digest, when the "
      "repository has uncommitted changes, or when HEAD moved away from the run's base commit "
      "(use --branch to apply on a new branch created at the base).");
  apply->add_option("run", o.run, "Run id, a unique prefix of one, or 'last'.")->required();
  apply->add_option("--branch", o.branch, "Create this branch at the run's base commit first.");
  apply->add_option("--repo", o.repo, "Apply to this repository instead of the recorded one.");
  apply->callback([&o] { o.verb = "apply"; });
  out.push_back(apply);

  auto* rm = app.add_subcommand("rm", "Delete a run's directory (workspace, logs, patch).");
  rm->add_option("run", o.run, "Run id or a unique prefix of one.")->required();
  rm->add_flag("--force", o.force, "Also remove a run without result.json.");
  rm->callback([&o] { o.verb = "rm"; });
  out.push_back(rm);
  return out;
}

int RunRunsCommand(const RunsCommandOptions& o) {
  if (o.verb == "runs") return DoRuns(o);
  auto dir = ResolveRunDirectory(o.run);
  if (!dir) return Usage(dir.error().Message());
  if (o.verb == "show") return DoShow(o, *dir);
  if (o.verb == "diff") return DoDiff(*dir);
  if (o.verb == "apply") return DoApply(o, *dir);
  if (o.verb == "rm") return DoRm(o, *dir);
  return Usage("unknown command " + o.verb);
}

}  // namespace cagent::launcher
