#include "launcher/cli/run_command.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

#include "common/duration.h"
#include "common/exit_codes.h"
#include "common/json_text.h"
#include "common/money.h"
#include "common/sha256.h"
#include "common/terminal_text.h"
#include "common/text.h"
#include "common/unique_fd.h"
#include "launcher/cli/downgrade_notes.h"
#include "launcher/cli/transcript.h"
#include "launcher/guard/git.h"
#include "launcher/profile/choice.h"
#include "launcher/profile/spec.h"
#include "launcher/run/apply.h"
#include "launcher/run/run.h"
#include "launcher/run/session_record.h"
#include "launcher/run/workspace.h"
#include "launcher/session/state_dir.h"

namespace cagent::launcher::cli {
bool ProgressRedraws(bool stderr_is_terminal, const char* term, const char* no_color) {
  if (!stderr_is_terminal) return false;
  if (term == nullptr || term[0] == '\0' || std::string_view(term) == "dumb") return false;
  return no_color == nullptr || no_color[0] == '\0';  // no-color.org: set and not empty
}

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
int Usage(const std::string& message) {
  spdlog::error("{}", message);
  return ToInt(ExitCode::kUsage);
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

// The live status: one line redrawn in place on a terminal (ProgressRedraws), and redrawn every
// second between events so the elapsed time moves while a long command or model call runs; plain
// lines (state changes and actions) otherwise, so logs stay readable.
class ProgressDisplay {
 public:
  explicit ProgressDisplay(bool quiet)
      : enabled_(!quiet),
        tty_(ProgressRedraws(::isatty(STDERR_FILENO) == 1, std::getenv("TERM"),
                             std::getenv("NO_COLOR"))) {
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
      // The action quotes the agent (commands, paths): escaped, then cut at a character boundary
      // (TerminalSafe's output is ASCII apart from printable UTF-8, cut before a lead byte).
      const std::string action = TerminalSafe(p.last_action);
      std::string shown = line + (action.empty() ? "" : "  " + action);
      if (shown.size() > 118) {
        std::size_t cut = 115;
        while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) --cut;
        shown = shown.substr(0, cut) + "...";
      }
      std::cerr << "\r\033[K" << shown << std::flush;
      drawn_ = true;
      return;
    }
    if (p.state != last_state_) {
      std::cerr << "cagent: " << line << "\n";
      last_state_ = p.state;
    }
    if (!p.last_action.empty() && p.last_action != last_action_) {
      std::cerr << "cagent:   " << TerminalSafe(p.last_action) << "\n";
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

// How the commands that take a run id name the run in `run_dir`: its id, after --state-dir DIR
// when the run is not in the state directory they look in (cagent run --state-dir DIR; a batch
// task's run). Printed through TerminalSafe by the callers.
std::string RunArgument(const std::string& run_id, const std::string& run_dir) {
  const fs::path state = fs::path(run_dir).parent_path().parent_path();
  if (run_dir.empty() || state == fs::path(session::StateDirectory())) return run_id;
  return "--state-dir " + ShellWord(state.string()) + " " + run_id;
}

// Everything here that the workspace, the agent or the model could have written (reason, paths,
// violations, verify details, the agent's summary) goes through TerminalSafe: an escape sequence
// in a file name must not rewrite the lines above it.
void PrintSummary(const run::RunRecord& r) {
  std::ostream& o = std::cerr;
  auto t = [](std::string_view s) { return TerminalSafe(s); };
  o << "run " << r.run_id << ": " << run::RunStateName(r.state);
  if (!r.reason.empty()) o << " — " << t(r.reason);
  o << "\n";
  o << "  profile      " << t(r.profile) << " (policy " << r.policy_digest.substr(0, 12) << ", "
    << t(r.profile_file) << ")\n";
  o << "  base         " << r.base_commit << (r.carried_dirty ? " + uncommitted changes" : "")
    << "\n";
  o << "  model        " << t(r.model) << ": " << r.used.model_turns << " turns, "
    << r.used.input_tokens << " tokens in";
  if (r.used.cache_read_tokens != 0) o << " (" << r.used.cache_read_tokens << " from cache)";
  o << ", " << r.used.output_tokens << " out";
  if (r.used.reasoning_tokens != 0) o << " (" << r.used.reasoning_tokens << " reasoning)";
  if (!r.used.currency.empty()) {
    o << ", " << FormatMoney(r.used.cost_micros, r.used.currency);
    if (r.budgets.model_cost) o << " of " << FormatMoney(*r.budgets.model_cost);
  }
  o << "\n";
  o << "  tool calls   " << r.used.tool_calls << " (" << r.denials << " refused)\n";
  o << "  patch        " << r.patch.files.size() << " files, " << r.patch.patch.size()
    << " bytes, sha256 " << r.patch.sha256.substr(0, 16) << "\n";
  for (const auto& f : r.patch.files) {
    o << "                 " << f.status << " " << t(f.path) << "\n";
  }
  // issue 32: what the profile's `outputs` kept out of the patch, never silently.
  if (!r.patch.left_out.empty()) {
    const run::LeftOut& l = r.patch.left_out;
    o << "  left out     " << l.files << " untracked file" << (l.files == 1 ? "" : "s")
      << " under the profile's outputs:";
    for (std::size_t i = 0; i < l.roots.size() && i < 10; ++i) {
      o << (i ? ", " : " ") << t(l.roots[i].path) << "/ (" << l.roots[i].files << ")";
    }
    if (l.roots.size() > 10) o << ", ... " << l.roots.size() - 10 << " more";
    o << "\n";
    for (const auto& src : l.sources) {
      o << "  warning      left out a source-looking file: " << t(src)
        << " (below an outputs glob; if it is the agent's work, take it from the workspace)\n";
    }
    if (l.sources_total > l.sources.size()) {
      o << "  warning      ... and " << l.sources_total - l.sources.size()
        << " more source-looking files left out (result.json: left_out)\n";
    }
  }
  if (!r.patch.check_clean) {
    o << "  diff --check reports problems (see cagent diff " << t(RunArgument(r.run_id, r.run_dir))
      << ")\n";
  }
  for (const auto& v : r.violations) o << "  violation    " << t(v.message) << "\n";
  for (const auto& v : r.verification) {
    o << "  verify       " << run::VerifyStatusName(v.status) << ": " << t(v.command) << " ("
      << t(v.detail) << ", " << v.duration.count() << " ms)\n";
  }
  if (!r.agent_summary.empty()) o << "  agent says   " << t(r.agent_summary) << "\n";
  o << "  run dir      " << t(r.run_dir) << "\n";
  const std::string ref = t(RunArgument(r.run_id, r.run_dir));
  o << "  workspace    written by the agent: inspect it as cagent show " << ref
    << " says, never with git or make on the host\n";
  if (r.state == run::RunState::kCompleted && !r.patch.files.empty()) {
    o << "next: cagent diff " << ref << "   then   cagent apply " << ref << "\n";
  }
}

std::string RunsDirectory() { return session::StateDirectory() + "/runs"; }

// The run ids under `dir`, oldest first: by the run's sequence number (state_dir.h), runs made
// before the counter first and by id (their UTC creation time, to the second). Only directories:
// a symlink in runs/ is not a run, so nothing below follows one.
std::vector<std::string> RunIds(const std::string& dir) {
  std::error_code ec;
  std::vector<std::pair<std::uint64_t, std::string>> keyed;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code type_ec;
    if (e.is_symlink(type_ec) || !e.is_directory(type_ec)) continue;
    const std::string id = e.path().filename().string();
    keyed.emplace_back(session::RunSequence(dir + "/" + id).value_or(0), id);
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::string> ids;
  ids.reserve(keyed.size());
  for (auto& k : keyed) ids.push_back(std::move(k.second));
  return ids;
}

// A `cagent agent` session's row (issue #20): kind "agent", from its record.
json SessionRow(const run::SessionEntry& s) {
  json row = {{"run_id", s.id}, {"kind", "agent"}, {"status", s.Status()}};
  if (s.sequence) row["sequence"] = *s.sequence;
  if (s.record.is_object()) {
    for (const char* key : {"profile", "workspace", "created_at", "reason"}) {
      if (s.record.contains(key)) row[key] = s.record[key];
    }
  }
  if (s.Status() == "unfinished" && run::RecordString(row, "reason").empty()) {
    row["reason"] = s.record_path.empty()
                        ? "no session record (from a cagent before records, or interrupted)"
                        : "no end recorded (running, or interrupted)";
  }
  row["audit_log"] = s.audit_log;
  return row;
}

// The rows of `cagent runs` (and what `rm` selects from): one per run, from its result.json, and
// one per `cagent agent` session, ordered together by their numbers (state_dir.h's counter;
// entries from before it first, by id).
json RunRows(const std::string& dir) {
  std::vector<std::pair<std::pair<std::uint64_t, std::string>, json>> keyed;
  for (const auto& s : run::ListSessions(run::SessionsDirectory(session::StateDirectory()))) {
    keyed.push_back({{s.sequence.value_or(0), s.id}, SessionRow(s)});
  }
  for (const auto& id : RunIds(dir)) {
    auto r = run::ReadRunResult(dir + "/" + id);
    json row = run::RunRow(id, r ? &*r : nullptr);
    if (auto seq = session::RunSequence(dir + "/" + id)) row["sequence"] = *seq;
    keyed.emplace_back(std::make_pair(session::RunSequence(dir + "/" + id).value_or(0), id),
                       std::move(row));
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  json all = json::array();
  for (auto& k : keyed) all.push_back(std::move(k.second));
  return all;
}

// A session's workspace is inside the --repo filter's directory (or is it).
bool WithinRepo(const std::string& workspace, const std::string& repo) {
  return !workspace.empty() &&
         (workspace == repo || workspace.rfind(repo.ends_with('/') ? repo : repo + "/", 0) == 0);
}

// --status S: a state name of run_state.h, or "unknown" (no result.json).
Status CheckStatusFilter(const std::string& status) {
  if (status.empty() || status == "unknown" || status == "unfinished" ||
      run::ParseRunState(status)) {
    return Ok{};
  }
  return PlainError("--status " + TerminalSafe(status, TerminalLines::kOne),
                    "is not a run status (completed, failed, cancelled, needs-approval, "
                    "no-change, preparing, running, verifying, unknown; unfinished for agent "
                    "sessions)")
      .WithCode(Error::Code::kInvalidInput);
}

// --repo DIR: the repository's top level as runs record it (resolved like `cagent run --repo`);
// a directory that is no repository (any more) is matched as its absolute path.
std::string RepoFilter(const std::string& repo) {
  if (repo.empty()) return {};
  if (auto info = run::InspectRepo(repo, "")) return info->root;
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(repo, ec), ec);
  return p.string();
}

int DoRuns(const RunsCommandOptions& o) {
  const std::string dir = RunsDirectory();
  if (auto s = CheckStatusFilter(o.status); !s) return Usage(s.error().Message());
  const std::string repo = RepoFilter(o.repo);
  json all = json::array();
  for (auto& row : RunRows(dir)) {
    if (!o.status.empty() && run::RecordString(row, "status") != o.status) continue;
    if (!repo.empty() && run::RecordString(row, "kind") == "agent") {
      if (!WithinRepo(run::RecordString(row, "workspace"), repo)) continue;
    } else if (!repo.empty() && run::RecordString(row, "repo") != repo) {
      continue;
    }
    all.push_back(std::move(row));
  }
  if (o.json) {
    std::cout << JsonText(all, 2) << "\n";
    return 0;
  }
  if (all.empty()) {
    if (o.status.empty() && o.repo.empty()) {
      std::cout << "no runs yet (in " << dir << ")\n";
    } else {
      std::cout << "no runs match (in " << dir << ")\n";
    }
    return 0;
  }
  // One run a line. Every field comes from a result.json under the state directory and may
  // quote the agent (the reason) or be damaged: run_record.h reads each with a type check and
  // escapes it.
  const std::string home = CallerHome();
  for (const auto& row : all) std::cout << run::RunListLine(row, home);
  return 0;
}

// How to look at a kept workspace without handing it the host: the agent wrote everything in it
// (its .git/config, hooks, .gitattributes, Makefiles), so nothing of its own runs outside a
// sandbox.
void PrintSafeInspection(std::ostream& o, const std::string& run_id, const std::string& run_dir) {
  const std::string ws = TerminalSafe(run_dir + "/workspace");
  o << "  workspace    " << ws << " (kept; written by the agent: treat it as hostile)\n"
    << "    the change:   cagent diff " << TerminalSafe(RunArgument(run_id, run_dir)) << "\n"
    << "    look inside:  cagent exec --profile readonly --workspace "
    << TerminalSafe(ShellWord(run_dir + "/workspace")) << " -- sh\n"
    << "    do not run git, make, npm or the tests in it on the host: its .git (config, hooks,\n"
    << "    commondir), .gitattributes and build files are the agent's and can run code\n";
}

int DoShow(const RunsCommandOptions& o, const std::string& run_dir) {
  // --json prints the file as it is; the summary and the exit code come from the record read back.
  auto raw = run::ReadRunResultJson(run_dir);
  if (!raw) return Usage(raw.error().Message());
  auto r = run::RunRecord::FromJson(*raw);
  if (!r) return Usage(r.error().Message());
  if (o.json) {
    std::cout << JsonText(*raw, 2) << "\n";
  } else {
    std::cout << run::RunShowText(*r);
    std::error_code ec;
    if (fs::is_directory(run_dir + "/workspace", ec)) {
      PrintSafeInspection(std::cout, r->run_id, run_dir);
    }
  }
  return ToInt(run::RunShowExitCode(*r));
}

int DoDiff(const RunsCommandOptions& o, const std::string& run_dir) {
  bool ok = false;
  const std::string patch = ReadAll(run_dir + "/patch.diff", &ok);
  if (!ok) {
    return Usage(run_dir + " has no patch.diff (the run ended before its change set was captured)");
  }
  if (o.json) {
    // JSON strings hold text: bytes of the patch that are not UTF-8 are replaced (JsonText), and
    // the digest is of the exact bytes, which plain `cagent diff` prints.
    auto rec = run::ReadRunResult(run_dir);
    json changed = json::array();
    if (rec) changed = rec->ToJson()["changed_files"];
    std::cout << JsonText(json{{"run", fs::path(run_dir).filename().string()},
                               {"sha256", Sha256Hex(patch)},
                               {"bytes", patch.size()},
                               {"files", changed},
                               {"patch", patch}},
                          2)
              << "\n";
    return 0;
  }
  // The patch is the agent's text. Piped (to git apply, a pager that escapes, a file) it goes out
  // byte for byte; on a terminal its control and invisible characters are shown escaped.
  if (::isatty(STDOUT_FILENO) == 1) {
    std::cout << TerminalSafe(patch, TerminalLines::kMultiple);
  } else {
    std::cout << patch;
  }
  return 0;
}

int DoApply(const RunsCommandOptions& o, const std::string& run_dir) {
  // All of it (checks, openat2-resolved writes, staging) is in launcher/run/apply.h.
  run::ApplyRequest req;
  req.run_dir = run_dir;
  req.repo = o.repo;
  req.branch = o.branch;
  auto r = run::ApplyRun(req);
  if (o.json) {
    json out = {{"run", fs::path(run_dir).filename().string()}, {"applied", false}};
    if (!r) {
      out["error"] = r.error().Message();
    } else {
      out["applied"] = !r->nothing_to_apply;
      out["repo"] = r->repo_root;
      out["branch"] = r->branch.empty() ? json(nullptr) : json(r->branch);
      out["paths"] = r->paths;
      out["unverified"] = r->unverified;
    }
    std::cout << JsonText(out, 2) << "\n";
  }
  if (!r) {
    spdlog::error("{}", TerminalSafe(r.error().Message(), TerminalLines::kMultiple));
    return ToInt(ExitCode::kRunFailed);
  }
  if (o.json) return 0;
  if (r->nothing_to_apply) {
    std::cout << "the run changed nothing; nothing to apply\n";
    return 0;
  }
  if (r->unverified) {
    spdlog::warn(
        "run {} was not verified (its profile has no verify commands; it ran with "
        "--allow-unverified): review the patch before you commit it",
        TerminalSafe(r->run_id));
  }
  std::cout << "applied run " << TerminalSafe(r->run_id) << " (" << r->paths.size() << " files) to "
            << TerminalSafe(r->repo_root)
            << (r->branch.empty() ? "" : " on the new branch " + TerminalSafe(r->branch))
            << "; the changes are staged: review with git diff --cached\n";
  return 0;
}

// Deletes one run directory. remove_all does not follow symlinks: a link inside the run (the
// agent's workspace may hold any) is removed as a link, never what it points at.
Result<std::uintmax_t> RemoveRun(const std::string& run_dir) {
  std::error_code ec;
  const auto n = fs::remove_all(run_dir, ec);
  if (ec) return PlainError("remove " + run_dir, ec.message());
  return n;
}

// Deletes a `cagent agent` session's files in the sessions directory: its record, agent log and
// audit log. An audit log that --audit-log put elsewhere is the caller's file and stays; the
// returned note says so. Links are removed, never followed.
Result<std::pair<std::uintmax_t, std::string>> RemoveSession(const run::SessionEntry& s) {
  const std::string dir = run::SessionsDirectory(session::StateDirectory());
  std::uintmax_t n = 0;
  std::string note;
  std::vector<std::string> files = {s.record_path, s.agent_log};
  if (fs::path(s.audit_log).parent_path() == fs::path(dir)) {
    files.push_back(s.audit_log);
  } else {
    note = "; its audit log " + s.audit_log + " (--audit-log) is kept";
  }
  for (const auto& f : files) {
    if (f.empty()) continue;
    std::error_code ec;
    if (fs::remove(f, ec)) ++n;
    if (ec) return PlainError("remove " + f, ec.message());
  }
  return std::make_pair(n, note);
}

int DoRmSession(const RunsCommandOptions& o, const run::SessionEntry& s) {
  if (s.Status() == "unfinished" && !o.force) {
    return Usage("agent session " + s.id +
                 " has no end recorded (running, or interrupted); pass --force to remove it "
                 "anyway");
  }
  auto n = RemoveSession(s);
  if (!n) return Usage(n.error().Message());
  std::cout << "removed agent session " << TerminalSafe(s.id) << " (" << n->first << " files)"
            << TerminalSafe(n->second) << "\n";
  return 0;
}

int DoRm(const RunsCommandOptions& o, const std::string& run_dir) {
  auto r = run::ReadRunResult(run_dir);
  if (!r && !o.force) {
    return Usage(r.error().Message() + "; pass --force to remove it anyway");
  }
  auto n = RemoveRun(run_dir);
  if (!n) return Usage(n.error().Message());
  std::cout << "removed " << run_dir << " (" << *n << " files)\n";
  return 0;
}

// "7d", "12h", "30m", "90s": how old a run must be for `rm --older-than`.
Result<std::chrono::seconds> ParseAge(const std::string& text) {
  if (text.size() > 1 && text.back() == 'd' &&
      text.find_first_not_of("0123456789") == text.size() - 1 && text.size() <= 6) {
    return std::chrono::seconds(std::stoll(text.substr(0, text.size() - 1)) * 86400);
  }
  auto d = ParseDuration(text);
  if (!d) {
    return PlainError("--older-than " + TerminalSafe(text, TerminalLines::kOne),
                      "is not an age (7d, 12h, 30m, 90s)")
        .WithCode(Error::Code::kInvalidInput);
  }
  return std::chrono::duration_cast<std::chrono::seconds>(*d);
}

// A result.json created_at ("2026-12-03T10:15:00Z") as seconds since the epoch, or nullopt.
std::optional<std::time_t> ParseCreatedAt(const std::string& text) {
  std::tm tm{};
  const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return ::timegm(&tm);
}

// `cagent rm --all | --failed | --older-than AGE`: the runs selected (finished ones only — a run
// without result.json may be going on — unless --force), removed one by one as `rm RUN` removes
// one, or only listed with --dry-run.
int DoRmMany(const RunsCommandOptions& o) {
  std::optional<std::chrono::seconds> age;
  if (!o.older_than.empty()) {
    auto a = ParseAge(o.older_than);
    if (!a) return Usage(a.error().Message());
    age = *a;
  }
  const std::string dir = RunsDirectory();
  const std::time_t now = std::time(nullptr);
  json removed = json::array();
  json kept_unfinished = json::array();
  int status = 0;
  for (const auto& row : RunRows(dir)) {
    const std::string id = run::RecordString(row, "run_id");
    const std::string state = run::RecordString(row, "status");
    const bool session = run::RecordString(row, "kind") == "agent";
    if ((state == "unknown" || state == "unfinished") && !o.force) {
      kept_unfinished.push_back(id);
      continue;
    }
    if (o.failed && state != "failed") continue;
    if (age) {
      const auto created = ParseCreatedAt(run::RecordString(row, "created_at"));
      if (!created || now - *created < age->count()) continue;
    }
    json entry = {{"run_id", id}, {"kind", session ? "agent" : "run"}, {"status", state}};
    if (!o.dry_run && session) {
      for (const auto& s : run::ListSessions(run::SessionsDirectory(session::StateDirectory()))) {
        if (s.id != id) continue;
        auto n = RemoveSession(s);
        if (!n) {
          spdlog::error("{}", TerminalSafe(n.error().Message()));
          status = ToInt(ExitCode::kFailed);
        } else {
          entry["files"] = n->first;
        }
      }
      if (!entry.contains("files")) continue;
    } else if (!o.dry_run) {
      auto n = RemoveRun(dir + "/" + id);
      if (!n) {
        spdlog::error("{}", TerminalSafe(n.error().Message()));
        status = ToInt(ExitCode::kFailed);
        continue;
      }
      entry["files"] = *n;
    }
    removed.push_back(entry);
  }
  if (o.json) {
    std::cout << JsonText(json{{"dry_run", o.dry_run},
                               {"removed", removed},
                               {"count", removed.size()},
                               {"skipped_unfinished", kept_unfinished}},
                          2)
              << "\n";
    return status;
  }
  for (const auto& e : removed) {
    std::cout << (o.dry_run ? "would remove " : "removed ")
              << TerminalSafe(e["run_id"].get<std::string>()) << "  "
              << TerminalSafe(e["status"].get<std::string>()) << "\n";
  }
  std::cout << (o.dry_run ? "would remove " : "removed ") << removed.size()
            << (removed.size() == 1 ? " run" : " runs");
  if (!kept_unfinished.empty()) {
    std::cout << "; kept " << kept_unfinished.size()
              << " without result.json (running or interrupted; --force removes them)";
  }
  std::cout << "\n";
  return status;
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
  cmd->add_flag("--trust-repo-profile", o.trust_repo_profile, kTrustRepoProfileHelp);
  cmd->add_option("task", o.task_file,
                  "The task in Markdown. Untrusted: nothing in it changes the profile, paths, "
                  "limits or verification.")
      ->required();
  cmd->add_option("--repo", o.repo, "The repository (default: the current directory's).");
  cmd->add_option("--commit", o.commit, "Base revision (default HEAD), pinned to its full id.");
  cmd->add_option("--state-dir", o.state_dir,
                  "Keep the run under DIR/runs/RUN/ instead of $XDG_STATE_HOME/cagent/runs/ "
                  "('cagent batch' gives each task its own). 'cagent runs' and the commands that "
                  "take a run id do not look there; 'cagent log verify DIR/runs/RUN' does.");
  cmd->add_flag("--allow-dirty", o.allow_dirty,
                "Carry uncommitted changes (tracked and untracked, not ignored) into the "
                "workspace instead of refusing; the run records that it did.");
  cmd->add_flag("--allow-unverified", o.allow_unverified,
                "Accept a profile without verify commands: the run then ends 'completed' with "
                "nothing verified, and its result says so (\"verified\": false). Without it such "
                "a profile is refused before anything starts.");
  AddSessionFlags(cmd, o.session);
  cmd->add_flag("--json", o.json, "Print result.json on stdout instead of the summary.");
  cmd->add_flag("-q,--quiet", o.quiet,
                "Do not print the run's downgrades (restrictions the profile accepts as "
                "best-effort, such as a memory limit without a delegated cgroup) on stderr; "
                "result.json still records them.");
  cmd->add_option("--events-jsonl", o.events_jsonl,
                  "Also write each event of the run's log to FILE as it happens, one JSON object "
                  "per line (the lines of events.jsonl, hash chain included): a FIFO, /dev/stderr "
                  "or /dev/fd/N for a program following the run. A reader that stops reading "
                  "holds the run up once its pipe is full; one that closes it ends the stream, "
                  "with a warning, and the run goes on.");
  cmd->add_flag("-v,--verbose", o.verbose,
                "Instead of the progress line, a scrolling transcript on stderr: the run's state "
                "changes, each model turn's text, each tool call (name and arguments, "
                "abbreviated), the broker's decision and rule, and the result (status and the "
                "first lines of output). Every text the model, the agent or the repository wrote "
                "is shown escaped; secrets are redacted as in the event log.");
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
  if (!o.state_dir.empty()) {
    std::error_code ec;
    req.state_dir = fs::absolute(o.state_dir, ec).lexically_normal().string();
  }
  req.allow_dirty = o.allow_dirty;
  req.allow_unverified = o.allow_unverified;
  req.trust_repo_profile = o.trust_repo_profile;
  auto settings = ResolveSessionFlags(o.session);
  if (!settings) return Usage(settings.error().Message());
  req.model = settings->model;
  req.model_label = settings->model_label;
  req.approval = settings->approval;
  req.pre_approvals = settings->pre_approvals;
  req.resolve = settings->resolve;
  req.pre_approval_file = settings->pre_approval_file;
  req.budget_overrides = settings->budget_overrides;
  const UniqueFd tty = OpenApprovalTerminal(req.approval);
  req.tty_fd = tty.get();
  // The caller's own file (a FIFO, /dev/stderr, /dev/fd/N): its links are the caller's to choose.
  UniqueFd events;
  if (!o.events_jsonl.empty()) {
    events.Reset(::open(o.events_jsonl.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!events.valid()) {
      return Usage("--events-jsonl: cannot open '" + o.events_jsonl + "': " + std::strerror(errno));
    }
    req.events_fd = events.get();
  }

  TranscriptPrinter transcript(std::cerr);
  if (o.verbose) {
    req.on_entry = [&transcript](std::string_view line, const nlohmann::json& t) {
      transcript.Print(line, t);
    };
  }
  ProgressDisplay display(o.json || o.verbose);
  auto rec = run::ExecuteRun(req, [&](const run::RunProgress& p) { display.Update(p); });
  display.Done();
  if (!rec) {
    // May quote the repository (the dirty paths git reported): escaped.
    spdlog::error("{}", TerminalSafe(rec.error().Message(), TerminalLines::kMultiple));
    return ToInt(ExitCodeFor(rec.error(), ExitCode::kSetupFailed));
  }
  // Once per run, however many sandboxes it launched (result.json: sandbox.downgrades).
  // Unless the caller acknowledged them (cli/downgrade_notes.h); result.json has them all.
  if (!o.quiet) (void)WarnDowngrades(rec->downgrades, CallerHome());
  if (o.json) {
    std::cout << JsonText(rec->ToJson(), 2) << "\n";
  } else {
    PrintSummary(*rec);
  }
  return ToInt(run::ExitCodeFor(rec->state, rec->verification_failed()));
}

Result<RunOrSession> ResolveRunOrSession(const std::string& id, bool last_may_be_session) {
  const std::string dir = RunsDirectory();
  std::vector<std::pair<std::pair<std::uint64_t, std::string>, RunOrSession>> all;
  for (const auto& r : RunIds(dir)) {
    all.push_back(
        {{session::RunSequence(dir + "/" + r).value_or(0), r},
         RunOrSession{.session = false, .id = r, .run_dir = dir + "/" + r, .session_entry = {}}});
  }
  for (auto& s : run::ListSessions(run::SessionsDirectory(session::StateDirectory()))) {
    const std::string sid = s.id;
    const std::uint64_t seq = s.sequence.value_or(0);
    all.emplace_back(
        std::make_pair(seq, sid),
        RunOrSession{.session = true, .id = sid, .run_dir = "", .session_entry = std::move(s)});
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (all.empty()) return PlainError("find run " + id, "there are no runs in " + dir);
  if (id == "last" || id == "latest") {
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      if (last_may_be_session || !it->second.session) return it->second;
    }
    return PlainError("find run " + id, "there are no runs in " + dir +
                                            ", only `cagent agent` sessions (see cagent runs)");
  }
  std::vector<const RunOrSession*> matches;
  for (const auto& [key, r] : all) {
    if (r.id == id) return r;
    if (!id.empty() && r.id.rfind(id, 0) == 0) matches.push_back(&r);
  }
  if (matches.size() == 1) return *matches.front();
  if (matches.empty()) {
    return PlainError("find run " + id, "no such run or agent session in " +
                                            session::StateDirectory() + " (see cagent runs)");
  }
  return PlainError("find run " + id, "the prefix matches " + std::to_string(matches.size()) +
                                          " runs; give more of the id");
}

Result<std::string> ResolveRunDirectory(const std::string& id) {
  auto found = ResolveRunOrSession(id, /*last_may_be_session=*/false);
  if (!found) return found.error();
  if (found->session) {
    return PlainError(found->id + " is a `cagent agent` session",
                      "it has no patch; see cagent log " + found->id);
  }
  return found->run_dir;
}

namespace {
// --state-dir on each command that looks at runs (one option per subcommand: CLI11 keeps options
// apart, and `cagent show --state-dir DIR last` reads as a user writes it).
void AddStateDirOption(CLI::App& cmd, RunsCommandOptions& o) {
  cmd.add_option(
      "--state-dir", o.state_dir,
      "Look at the runs under DIR/runs/ instead of the caller's state directory: where "
      "cagent run --state-dir DIR put them (a cagent batch task's: RESULTS/<id>/state).");
}

}  // namespace

std::vector<CLI::App*> AddRunsCommands(CLI::App& app, RunsCommandOptions& o) {
  std::vector<CLI::App*> out;
  auto* runs = app.add_subcommand(
      "runs",
      "List the runs and the cagent agent sessions (marked '(agent session)'), newest last, with "
      "their status.");
  runs->add_flag("--json", o.json,
                 "JSON array on stdout; each row has kind \"run\" or \"agent\" (a session: its "
                 "workspace and audit_log instead of repo and files).");
  runs->add_option("--repo", o.repo,
                   "Only the runs made from this repository (any directory inside it), and the "
                   "agent sessions whose workspace is in it.");
  runs->add_option(
      "--status", o.status,
      "Only the runs in this state: completed, failed, cancelled, needs-approval, "
      "no-change, or unknown (no result.json: running or interrupted); an agent session that "
      "did not record its end is unfinished.");
  AddStateDirOption(*runs, o);
  runs->callback([&o] { o.verb = "runs"; });
  out.push_back(runs);

  auto* show =
      app.add_subcommand("show", "Show a run's result (status, base, patch, verification).");
  show->add_option("run", o.run, "Run id, a unique prefix of one, or 'last'.")->required();
  show->add_flag("--json", o.json, "Print result.json.");
  AddStateDirOption(*show, o);
  show->callback([&o] { o.verb = "show"; });
  out.push_back(show);

  auto* diff =
      app.add_subcommand("diff", "Print a run's captured patch (binary-safe, git format).");
  diff->add_option("run", o.run, "Run id, a unique prefix of one, or 'last'.")->required();
  diff->add_flag("--json", o.json,
                 "One JSON object: run, sha256 and bytes of the patch, files (path, status) and "
                 "patch (as text: bytes that are not UTF-8 are replaced; plain output is exact).");
  AddStateDirOption(*diff, o);
  diff->callback([&o] { o.verb = "diff"; });
  out.push_back(diff);

  auto* apply = app.add_subcommand(
      "apply",
      "Apply a completed run's verified patch to the repository it was made from (staged, not "
      "committed). Refused when the patch no longer matches the verified digest, when the "
      "repository has uncommitted changes, or when HEAD moved away from the run's base commit "
      "(use --branch to apply on a new branch created at the base). cagent writes the files "
      "itself and stages them: never through a symlink, a file or another repository on the "
      "path, never below .git, and no hook, filter driver or textconv of the repository runs; "
      "an ignored or untracked file at a path the patch adds refuses the apply, and a refusal "
      "writes nothing.");
  apply->add_option("run", o.run, "Run id, a unique prefix of one, or 'last'.")->required();
  apply->add_option("--branch", o.branch,
                    "Create this branch at the run's base commit and switch to it first; when "
                    "HEAD is elsewhere the base is checked out with every filter driver of the "
                    "repository's config switched off and no hooks.");
  apply->add_option("--repo", o.repo, "Apply to this repository instead of the recorded one.");
  apply->add_flag("--json", o.json,
                  "One JSON object on stdout: run, applied, repo, branch, paths, unverified; or "
                  "applied false and the error (the exit status is the same).");
  AddStateDirOption(*apply, o);
  apply->callback([&o] { o.verb = "apply"; });
  out.push_back(apply);

  auto* rm = app.add_subcommand(
      "rm",
      "Delete a run's directory (workspace, logs, patch), or every run --all, --failed or "
      "--older-than selects. Links inside a run are removed, never followed.");
  rm->add_option("run", o.run,
                 "Run id or a unique prefix of one; or a cagent agent session's (its record, "
                 "agent log and audit log in the sessions directory are removed).");
  rm->add_flag("--force", o.force, "Also remove a run without result.json.");
  rm->add_flag("--all", o.all, "Remove every finished run.");
  rm->add_flag("--failed", o.failed, "Remove the runs that ended 'failed'.");
  rm->add_option("--older-than", o.older_than,
                 "Remove the runs created longer ago than AGE (7d, 12h, 30m); with --failed, "
                 "both must hold.");
  rm->add_flag("-n,--dry-run", o.dry_run, "List what would be removed; remove nothing.");
  rm->add_flag("--json", o.json, "Say what was (or would be) removed as JSON on stdout.");
  AddStateDirOption(*rm, o);
  rm->callback([&o] { o.verb = "rm"; });
  out.push_back(rm);
  return out;
}

int RunRunsCommand(const RunsCommandOptions& o) {
  if (!o.state_dir.empty()) {
    // Checked here, so that a mistyped directory is named as such and not reported as "there
    // are no runs".
    std::error_code ec;
    const std::string dir = fs::absolute(o.state_dir, ec).lexically_normal().string();
    struct stat st {};
    if (ec || ::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Usage("--state-dir " + TerminalSafe(o.state_dir) + ": not a directory");
    }
    struct stat sub {};
    if (::stat((dir + "/runs").c_str(), &sub) != 0 || !S_ISDIR(sub.st_mode)) {
      return Usage("--state-dir " + TerminalSafe(o.state_dir) +
                   ": it holds no runs/ directory (give the directory cagent run --state-dir "
                   "was given; for a batch task, RESULTS/<id>/state)");
    }
    session::UseStateDirectory(dir);
  }
  if (o.verb == "runs") return DoRuns(o);
  if (o.verb == "rm") {
    const bool many = o.all || o.failed || !o.older_than.empty();
    if (many == !o.run.empty()) {
      return Usage(many ? "rm: give a run id or --all/--failed/--older-than, not both"
                        : "rm: which runs? give a run id, --all, --failed or --older-than AGE");
    }
    if (o.all && (o.failed || !o.older_than.empty())) {
      return Usage("rm: --all takes every finished run; drop --failed/--older-than, or --all");
    }
    if (many) return DoRmMany(o);
    if (o.dry_run || o.json) {
      return Usage("rm RUN: --dry-run and --json go with --all/--failed/--older-than");
    }
  }
  if (o.verb == "rm") {
    // A `cagent agent` session can be removed too (its record and logs).
    auto found = ResolveRunOrSession(o.run, /*last_may_be_session=*/true);
    if (!found) return Usage(found.error().Message());
    if (found->session) return DoRmSession(o, found->session_entry);
  }
  auto dir = ResolveRunDirectory(o.run);
  if (!dir) return Usage(dir.error().Message());
  if (o.verb == "show") return DoShow(o, *dir);
  if (o.verb == "diff") return DoDiff(o, *dir);
  if (o.verb == "apply") return DoApply(o, *dir);
  if (o.verb == "rm") return DoRm(o, *dir);
  return Usage("unknown command " + o.verb);
}

}  // namespace cagent::launcher::cli
