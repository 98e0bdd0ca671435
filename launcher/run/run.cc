#include "launcher/run/run.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "common/json_text.h"
#include "launcher/broker/audit_log.h"
#include "launcher/cli/agent_command.h"
#include "launcher/profile_choice.h"
#include "launcher/profile_spec.h"
#include "launcher/run/agent_session.h"
#include "launcher/run/last_resort.h"
#include "policy/diagnostics.h"
#include "policy/dump.h"
#include "policy/loader.h"

namespace cagent::launcher::run {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::array<std::string_view, 8> kStateNames = {
    "created", "preparing", "running", "verifying", "completed", "failed", "cancelled",
    "needs-approval"};

std::string NowRfc3339() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Status WriteFileAtomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return ErrnoError("open " + tmp);
    std::size_t off = 0;
    while (off < text.size()) {
      const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const Error e = ErrnoError("write " + tmp);
        ::close(fd);
        return e;
      }
      off += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) return ErrnoError("write " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError("rename " + tmp);
  return Ok{};
}

json UsageJson(const broker::BudgetUsage& u) {
  json by_kind = json::object();
  for (const auto& [k, v] : u.tool_calls_by_kind) by_kind[k] = v;
  return json{{"model_turns", u.model_turns},     {"input_tokens", u.input_tokens},
              {"output_tokens", u.output_tokens}, {"tool_calls", u.tool_calls},
              {"tool_calls_by_kind", by_kind},    {"output_bytes", u.output_bytes},
              {"elapsed_ms", u.elapsed.count()}};
}

json BudgetsJson(const broker::Budgets& b) {
  auto opt = [](const std::optional<std::uint64_t>& v) { return v ? json(*v) : json(nullptr); };
  return json{{"model_turns", opt(b.model_turns)},
              {"model_tokens", opt(b.model_tokens)},
              {"tool_calls", opt(b.tool_calls)},
              {"output_bytes", opt(b.output_bytes)},
              {"wall_time_ms", b.wall_time ? json(b.wall_time->count()) : json(nullptr)}};
}

}  // namespace

std::string_view RunStateName(RunState state) {
  return kStateNames[static_cast<std::size_t>(state)];
}

std::optional<RunState> ParseRunState(std::string_view name) {
  for (std::size_t i = 0; i < kStateNames.size(); ++i) {
    if (kStateNames[i] == name) return static_cast<RunState>(i);
  }
  return std::nullopt;
}

int ExitCodeFor(RunState state, bool verification_failed) {
  switch (state) {
    case RunState::kCompleted: return kExitRunCompleted;
    case RunState::kCancelled: return kExitRunCancelled;
    case RunState::kNeedsApproval: return kExitNeedsApproval;
    case RunState::kFailed: return verification_failed ? kExitVerificationFailed : kExitRunFailed;
    default: return kExitRunFailed;
  }
}

bool RunRecord::verification_failed() const {
  for (const auto& v : verification) {
    if (v.status == VerifyEntry::Status::kFailed || v.status == VerifyEntry::Status::kTimedOut) {
      return true;
    }
  }
  return false;
}

json RunRecord::ToJson() const {
  json files = json::array();
  for (const auto& f : patch.files) {
    files.push_back({{"path", f.path},
                     {"status", std::string(1, f.status)},
                     {"old_mode", f.old_mode},
                     {"new_mode", f.new_mode},
                     {"binary", f.binary},
                     {"submodule", f.submodule}});
  }
  json broken = json::array();
  for (const auto& v : violations) {
    broken.push_back({{"rule", v.rule}, {"path", v.path}, {"message", v.message}});
  }
  json verify = json::array();
  for (const auto& v : verification) {
    verify.push_back({{"command", v.command},
                      {"status", VerifyStatusName(v.status)},
                      {"exit_code", v.exit_code},
                      {"duration_ms", v.duration.count()},
                      {"log", v.log_path},
                      {"detail", v.detail},
                      {"tree", v.tree}});
  }
  // The tree verification ran on (a fresh checkout of base + patch), "" when nothing ran.
  std::string verified_tree;
  for (const auto& v : verification) {
    if (!v.tree.empty()) verified_tree = v.tree;
  }
  json pending = nullptr;
  if (needs_approval) {
    pending = {{"tool", needs_approval->tool},
               {"action", needs_approval->action},
               {"resolved_paths", needs_approval->resolved_paths},
               {"digest", needs_approval->digest},
               {"rule", needs_approval->rule},
               {"location", needs_approval->location},
               {"pre_approve", "sha256:" + needs_approval->digest}};
  }
  return json{
      {"run_id", run_id},
      {"status", RunStateName(state)},
      {"reason", reason},
      {"exit_code", ExitCodeFor(state, verification_failed())},
      {"verified", state == RunState::kCompleted && !verification.empty()},
      {"run_dir", run_dir},
      {"profile", profile},
      {"profile_file", profile_file},
      {"profile_sha256", profile_sha256},
      {"profile_from_repository", profile_from_repository},
      {"policy_digest", policy_digest},
      {"repo", repo},
      {"base_commit", base_commit},
      {"carried_dirty", carried_dirty},
      {"carried_paths", carried_paths},
      {"task", task_file},
      {"model", model},
      {"agent_summary", agent_summary},
      {"patch",
       {{"sha256", patch.sha256},
        {"bytes", patch.patch.size()},
        {"file", run_dir + "/patch.diff"},
        {"diff_check_clean", patch.check_clean},
        {"diff_check", patch.check_output},
        {"tree", patch.tree}}},
      {"changed_files", files},
      {"violations", broken},
      {"verification", verify},
      {"verified_tree", verified_tree},
      {"verify_tree", verified_tree.empty() ? std::string() : run_dir + "/verify-tree"},
      {"usage", UsageJson(used)},
      {"budgets", BudgetsJson(budgets)},
      {"denials", denials},
      {"approvals_asked", approvals_asked},
      {"needs_approval", pending},
      {"sandbox",
       {{"layers", layers},
        {"downgrades", downgrades},
        {"git_guard", git_guard},
        {"host_findings", host_findings},
        {"planted_repositories", planted_repositories},
        {"cleared_files", cleared_files}}},
      {"event_log", run_dir + "/events.jsonl"},
      {"event_log_entries", event_log_entries},
      {"event_log_head", event_log_head},
      {"event_log_lost", event_log_lost},
      {"agent_log", run_dir + "/agent.log"},
      {"workspace", run_dir + "/workspace"},
      {"created_at", created_at},
      {"finished_at", finished_at},
  };
}

Result<json> ReadRunResult(const std::string& run_dir) {
  std::ifstream in(run_dir + "/result.json", std::ios::binary);
  if (!in) return PlainError(run_dir, "has no result.json (the run may still be going, or it "
                                      "was interrupted before it could record one)");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return PlainError(run_dir + "/result.json", "is not valid JSON");
  return j;
}

Result<RunRecord> ExecuteRun(const RunRequest& req,
                             const std::function<void(const RunProgress&)>& on_progress) {
  const auto started = Clock::now();
  RunRecord rec;
  rec.run_id = req.run_id.empty() ? NewRunId() : req.run_id;
  rec.created_at = NowRfc3339();
  rec.model = req.model_label;

  // Inputs first: nothing is created for a run whose profile or task cannot be read.
  std::ifstream task_in(req.task_file, std::ios::binary);
  if (!task_in) return PlainError("read " + req.task_file, "cannot open the task file");
  std::ostringstream task_text;
  task_text << task_in.rdbuf();
  if (task_text.str().find_first_not_of(" \t\r\n") == std::string::npos) {
    return PlainError(req.task_file, "the task file is empty");
  }
  const std::string home = CallerHome();
  const auto search = policy::SearchPath::Default(home, CAGENT_PROFILE_DIR);
  auto choice = ChooseProfile(req.profile, search, req.trust_repo_profile);
  if (!choice) return choice.error();
  auto compiled = policy::LoadProfile(choice->path, search);
  if (!compiled.policy) {
    return PlainError("profile " + req.profile, policy::RenderAll(*compiled.sources, compiled.diags));
  }
  const auto policy = compiled.policy;
  rec.profile = policy->name;
  rec.profile_file = choice->file;
  rec.profile_sha256 = choice->sha256;
  rec.profile_from_repository = choice->from_repository;
  rec.policy_digest = PolicyDigest(*policy);
  rec.budgets = broker::BudgetsFromPolicy(*policy);
  if (auto s = broker::LowerBudgets(rec.budgets, req.budget_overrides); !s) return s.error();
  if (policy->verify.empty() && !req.allow_unverified) {
    // Fail closed: "completed" must mean verified unless the caller said otherwise.
    return PlainError("profile " + policy->name,
                      "has no verify commands, so nothing would check the agent's change; use a "
                      "profile that extends it with a verify block (as "
                      "examples/fix-add/repo/.cagent/fix-add.cagent does), or pass "
                      "--allow-unverified to run without verification");
  }

  const std::string state_dir = req.state_dir.empty() ? StateDirectory() : req.state_dir;
  rec.run_dir = state_dir + "/runs/" + rec.run_id;
  std::error_code ec;
  fs::create_directories(rec.run_dir, ec);
  if (ec) return PlainError("create " + rec.run_dir, ec.message());
  ::chmod((state_dir + "/runs").c_str(), 0700);
  ::chmod(rec.run_dir.c_str(), 0700);
  fs::create_directories(rec.run_dir + "/logs", ec);
  rec.task_file = rec.run_dir + "/task.md";
  if (auto s = WriteFileAtomic(rec.task_file, task_text.str()); !s) return s.error();

  auto opened = broker::AuditLog::Open(rec.run_dir + "/events.jsonl", rec.run_id, rec.policy_digest);
  if (!opened) return std::move(opened).Context("create the run's event log").error();
  broker::AuditLog log = std::move(*opened);

  std::mutex mu;
  RunProgress progress;
  auto report = [&](const std::function<void(RunProgress&)>& change) {
    std::lock_guard<std::mutex> lock(mu);
    change(progress);
    progress.elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
    if (on_progress) on_progress(progress);
  };
  // Should cagent die before finish() (an uncaught exception, std::terminate), main's last-resort
  // handler writes this record: the run failed, in the state it had reached.
  auto arm_last_resort = [&] {
    RunRecord fallback = rec;
    fallback.reason = "cagent stopped unexpectedly (internal error) while the run was " +
                      std::string(RunStateName(rec.state)) +
                      "; events.jsonl has what happened until then";
    fallback.state = RunState::kFailed;
    fallback.finished_at = NowRfc3339();
    ArmLastResortRecord(rec.run_dir, JsonText(fallback.ToJson(), 2) + "\n");
  };
  // `created` also records the profile and model the run starts with.
  auto transition = [&](RunState state, const std::string& why, bool created = false) {
    rec.state = state;
    arm_last_resort();
    log.Append(broker::audit::State(
        {.state = std::string(RunStateName(state)),
         .reason = why,
         .profile = created ? std::optional<std::string>(rec.profile) : std::nullopt,
         .model = created ? std::optional<std::string>(rec.model) : std::nullopt}));
    report([&](RunProgress& p) {
      p.state = state;
      if (!why.empty()) p.last_action = why;
    });
  };
  auto finish = [&](RunState state, std::string why) -> Result<RunRecord> {
    rec.reason = why;
    rec.finished_at = NowRfc3339();
    transition(state, why);
    rec.event_log_entries = log.entries();
    rec.event_log_head = log.head();
    rec.event_log_lost = log.lost();
    if (auto s = WriteFileAtomic(rec.run_dir + "/result.json", JsonText(rec.ToJson(), 2) + "\n"); !s) {
      return std::move(s).Context("write result.json").error();
    }
    DisarmLastResortRecord();
    return rec;
  };

  transition(RunState::kCreated, "", /*created=*/true);

  // ---- preparing ----
  transition(RunState::kPreparing, "");
  const std::string repo_dir = req.repo.empty() ? fs::current_path(ec).string() : req.repo;
  auto repo = InspectRepo(repo_dir, req.commit);
  if (!repo) {
    rec.verification = PlannedVerification(*policy);
    return finish(RunState::kFailed, repo.error().Message());
  }
  rec.repo = repo->root;
  const WorkspaceLayout layout = LayoutFor(rec.run_dir);
  auto made = MaterializeWorkspace(*repo, layout, req.allow_dirty);
  if (!made) {
    rec.verification = PlannedVerification(*policy);
    return finish(RunState::kFailed, made.error().Message());
  }
  rec.base_commit = made->base_commit;
  rec.carried_dirty = made->carried_dirty;
  rec.carried_paths = made->carried_paths;
  log.Append(broker::audit::Workspace({.repo = rec.repo,
                                       .base_commit = rec.base_commit,
                                       .carried_dirty = rec.carried_dirty,
                                       .carried_paths = rec.carried_paths}));

  // ---- running ----
  transition(RunState::kRunning, "");
  AgentSessionOptions s;
  s.run_id = rec.run_id;
  s.policy = policy;
  s.workspace = layout.workspace;
  s.task = task_text.str();
  s.model = req.model;
  s.approval = req.approval;
  s.pre_approvals = req.pre_approvals;
  s.pre_approval_file = req.pre_approval_file;
  s.budget_overrides = req.budget_overrides;
  s.audit = &log;
  s.agent_log_path = rec.run_dir + "/agent.log";
  s.tty_fd = req.tty_fd;
  if (rec.budgets.model_turns) progress.max_turns = *rec.budgets.model_turns;
  s.on_event = [&](const broker::BrokerEvent& e) {
    report([&](RunProgress& p) {
      // The broker's own counts (what the budgets are checked against), not a tally of events.
      p.turn = e.used.model_turns;
      p.tool_calls = e.used.tool_calls;
      if (e.kind != "model_result") p.last_action = e.text;
    });
  };
  auto session = RunAgentSession(s);
  if (!session) {
    rec.verification = PlannedVerification(*policy);
    return finish(RunState::kFailed, session.error().Message());
  }
  const auto& b = session->broker;
  rec.used = b.used;
  rec.denials = b.denials;
  rec.approvals_asked = b.approvals_asked;
  if (b.finish) rec.agent_summary = b.finish->summary;
  for (std::size_t i = 0; i < static_cast<std::size_t>(Layer::kCount); ++i) {
    const std::string name(LayerName(static_cast<Layer>(i)));
    bool off = false;
    for (const auto& d : session->sandbox.disabled_layers) off = off || d == name;
    if (!off) rec.layers.push_back(name);
  }
  rec.downgrades = session->sandbox.downgrades;
  rec.git_guard = session->sandbox.git_guard;
  rec.host_findings = session->sandbox.host_findings;
  rec.planted_repositories = session->sandbox.planted_repositories;
  rec.cleared_files = session->sandbox.cleared_files;

  // ---- capture: git, not the agent, says what changed ----
  auto captured = CapturePatch(layout, rec.base_commit);
  if (captured) {
    rec.patch = std::move(*captured);
    if (auto w = WriteFileAtomic(rec.run_dir + "/patch.diff", rec.patch.patch); !w) {
      rec.verification = PlannedVerification(*policy);
      return finish(RunState::kFailed, w.error().Message());
    }
    rec.violations = CheckPatch(rec.patch, *policy,
                                policy::Engine::Bindings{layout.workspace, "/home/cagent"});
    log.Append(broker::audit::Patch({.patch_digest = rec.patch.sha256,
                                     .files = rec.patch.files.size(),
                                     .bytes = rec.patch.patch.size(),
                                     .violations = rec.violations.size()}));
  }

  if (b.status == broker::BrokerOutcome::Status::kCancelled) {
    rec.verification = PlannedVerification(*policy);
    return finish(RunState::kCancelled, b.reason.empty() ? "cancelled" : b.reason);
  }
  if (b.status == broker::BrokerOutcome::Status::kNeedsApproval) {
    // The work so far is captured (cagent diff shows it) but not verified: the run stopped.
    rec.verification = PlannedVerification(*policy);
    rec.needs_approval = b.needs_approval;
    std::string why = b.reason;
    if (b.needs_approval) {
      why += "; to allow exactly this action, run again with --pre-approve 'sha256:" +
             b.needs_approval->digest + "', or on a terminal with --approve policy to be asked";
    }
    return finish(RunState::kNeedsApproval, why);
  }
  if (!captured) {
    rec.verification = PlannedVerification(*policy);
    return finish(RunState::kFailed, "patch capture failed: " + captured.error().Message());
  }
  if (b.status != broker::BrokerOutcome::Status::kFinished) {
    rec.verification = PlannedVerification(*policy);
    return finish(RunState::kFailed, b.reason.empty() ? "the agent did not finish" : b.reason);
  }
  if (!rec.violations.empty()) {
    rec.verification = PlannedVerification(*policy);
    std::string why = "the patch breaks the profile's rules: " + rec.violations.front().message;
    if (rec.violations.size() > 1) {
      why += " (and " + std::to_string(rec.violations.size() - 1) + " more)";
    }
    return finish(RunState::kFailed, why);
  }

  // ---- verifying: a fresh checkout of base + patch, never the agent's workspace ----
  transition(RunState::kVerifying, "");
  auto tree = MakeVerifyTree(layout, rec.base_commit, rec.run_dir + "/patch.diff", rec.patch.tree);
  if (!tree) {
    rec.verification = PlannedVerification(*policy);
    for (auto& v : rec.verification) {
      v.status = VerifyEntry::Status::kInfrastructure;
      v.detail = "no verification tree: " + tree.error().Message();
    }
    return finish(RunState::kFailed, "verification: could not make a fresh checkout of base + "
                                     "patch: " + tree.error().Message());
  }
  log.Append(broker::audit::VerifyTree(
      {.tree = tree->tree, .base_commit = tree->base_commit, .path = tree->dir}));
  ProfileContext ctx{CallerHome(), CallerEnviron()};
  rec.verification = RunVerification(*policy, *tree, rec.run_dir + "/logs", ctx,
                                     [&](const std::string& command) {
                                       report([&](RunProgress& p) {
                                         p.last_action = "verify: " + command;
                                       });
                                     });
  for (const auto& v : rec.verification) {
    log.Append(broker::audit::Verify({.command = v.command,
                                      .status = std::string(VerifyStatusName(v.status)),
                                      .exit_code = v.exit_code,
                                      .duration_ms = v.duration.count(),
                                      .tree = v.tree}));
  }
  for (const auto& v : rec.verification) {
    if (v.status != VerifyEntry::Status::kPassed) {
      return finish(RunState::kFailed, "verification: '" + v.command + "' " +
                                           std::string(VerifyStatusName(v.status)) + " (" +
                                           v.detail + ")");
    }
  }
  return finish(RunState::kCompleted,
                policy->verify.empty()
                    ? "not verified: the profile has no verify commands (--allow-unverified)"
                    : "");
}

}  // namespace cagent::launcher::run
