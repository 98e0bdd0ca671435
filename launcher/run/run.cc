#include "launcher/run/run.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "common/json_text.h"
#include "common/small_file.h"
#include "common/terminal_text.h"
#include "launcher/broker/audit_log.h"
#include "launcher/model/model_provider.h"
#include "launcher/profile/caches.h"
#include "launcher/profile/choice.h"
#include "launcher/profile/repo_profiles.h"
#include "launcher/profile/spec.h"
#include "launcher/run/last_resort.h"
#include "launcher/session/agent.h"
#include "launcher/session/git_identity.h"
#include "launcher/session/session.h"
#include "launcher/session/state_dir.h"
#include "policy/language/diagnostics.h"
#include "policy/language/dump.h"
#include "policy/language/loader.h"
#include "policy/match/hosts.h"

namespace cagent::launcher::run {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string NowRfc3339() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// What a run starts from, read and checked before anything is created (the pre-flight checks):
// nothing is left behind for a run that cannot start — a task, profile or budget that is wrong,
// a directory that is no repository, a dirty tree without --allow-dirty, a model that cannot be
// set up (a missing API key, an unreadable replay file). Issue #20: the last three used to make
// a run directory and end there as a "failed" run.
struct RunInputs {
  std::string task;
  ProfileChoice choice;
  std::shared_ptr<const policy::Policy> policy;
  broker::Budgets budgets;
  RepoInfo repo;
};

// The provider is built once here and dropped: building it reads what it needs (the credential
// variable, the replay file) and sends nothing.
Status CheckModel(const model::ModelSpec& spec) {
  model::Environment env;
  for (const auto& entry : CallerEnviron()) {
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  boost::asio::io_context io;
  auto made = model::MakeModelProvider(io, spec, env);
  if (!made) {
    Error e = std::move(made).Context("set up the model provider").error();
    e.code = Error::Code::kInvalidInput;
    return e;
  }
  return Ok{};
}

Result<RunInputs> LoadInputs(const RunRequest& req) {
  RunInputs in;
  std::ifstream task_in(req.task_file, std::ios::binary);
  if (!task_in) {
    return PlainError("read " + req.task_file, "cannot open the task file")
        .WithCode(Error::Code::kInvalidInput);
  }
  std::ostringstream task_text;
  task_text << task_in.rdbuf();
  in.task = task_text.str();
  if (in.task.find_first_not_of(" \t\r\n") == std::string::npos) {
    return PlainError(req.task_file, "the task file is empty").WithCode(Error::Code::kInvalidInput);
  }
  const std::string home = CallerHome();
  // The repository's own profiles (CONFIG/repos/KEY/, issue 32) are those of the repository run on.
  const auto search =
      ProfileSearchPath(home, CAGENT_PROFILE_DIR, req.repo.empty() ? std::string(".") : req.repo);
  auto choice = ChooseProfile(req.profile, search, req.trust_repo_profile);
  if (!choice) return choice.error();
  in.choice = *choice;
  auto compiled = policy::LoadProfile(choice->path, search);
  if (!compiled.policy) {
    return PlainError("profile " + req.profile,
                      policy::RenderAll(*compiled.sources, compiled.diags))
        .WithCode(Error::Code::kInvalidInput);
  }
  in.policy = compiled.policy;
  in.budgets = broker::BudgetsFromPolicy(*in.policy);
  if (auto s = broker::LowerBudgets(in.budgets, req.budget_overrides); !s) return s.error();
  if (auto s = broker::CheckCostBudget(in.budgets, req.model.prices,
                                       req.model.provider + ":" + req.model.model);
      !s) {
    return s.error();
  }
  if (in.policy->verify.empty() && !req.allow_unverified) {
    // Fail closed: "completed" must mean verified unless the caller said otherwise.
    return PlainError("profile " + in.policy->name,
                      "has no verify commands, so nothing would check the agent's change; use a "
                      "profile that extends it with a verify block (as "
                      "examples/fix-add/repo/.cagent/fix-add.cagent does), or pass "
                      "--allow-unverified to run without verification");
  }
  std::error_code ec;
  const std::string repo_dir = req.repo.empty() ? fs::current_path(ec).string() : req.repo;
  auto repo = InspectRepo(repo_dir, req.commit);
  if (!repo) {
    Error e = repo.error();
    e.code = Error::Code::kInvalidInput;
    return e;
  }
  LeaveOutUntrackedOutputs(*repo, in.policy->outputs);
  if (auto s = CheckDirty(*repo, req.allow_dirty); !s) return s.error();
  in.repo = std::move(*repo);
  if (auto s = CheckModel(req.model); !s) return s.error();
  return in;
}

// The run directory (0700) with the task copied in: <state_dir>/runs/<id>/{task.md,logs/}.
Status CreateRunDirectory(const std::string& state_dir, RunRecord& rec, const std::string& task) {
  rec.run_dir = state_dir + "/runs/" + rec.run_id;
  std::error_code ec;
  fs::create_directories(rec.run_dir, ec);
  if (ec) return PlainError("create " + rec.run_dir, ec.message());
  ::chmod((state_dir + "/runs").c_str(), 0700);
  ::chmod(rec.run_dir.c_str(), 0700);
  // The run's place in the order of runs (state_dir.h), in the run directory from the start so a
  // run still going sorts right too.
  auto seq = session::NextRunSequence(state_dir + "/runs");
  if (!seq) return std::move(seq).Context("number the run").error();
  rec.sequence = *seq;
  if (auto s = session::WriteFileAtomic(rec.run_dir + "/sequence", std::to_string(*seq) + "\n");
      !s) {
    return s;
  }
  fs::create_directories(rec.run_dir + "/logs", ec);
  rec.task_file = rec.run_dir + "/task.md";
  return session::WriteFileAtomic(rec.task_file, task);
}

// What ends one step of the run: the event (run_state.h) and, for a final state, the reason the
// run records.
struct StepEnd {
  RunEvent event;
  std::string reason;
};

// Moves one run along run_state.h's edges. Each non-final state has one step (Prepare, RunAgent,
// Verify) that does that state's work and returns the event that ended it; Drive() takes the edge
// and, on a final state, Finish() writes result.json. The run's threads (the broker's events,
// verification's progress) reach it only through Report().
class RunDriver {
 public:
  RunDriver(const RunRequest& req, RunInputs inputs, RunRecord rec, broker::AuditLog log,
            const std::function<void(const RunProgress&)>& on_progress, Clock::time_point started)
      : req_(req),
        in_(std::move(inputs)),
        policy_(*in_.policy),
        rec_(std::move(rec)),
        log_(std::move(log)),
        on_progress_(on_progress),
        started_(started),
        layout_(LayoutFor(rec_.run_dir)),
        // The run's one binding (policy/language/binding.h): the agent's view, the broker's engine,
        // the patch check and verification all judge the profile's paths with it.
        binding_(RunBinding(layout_.workspace)) {}
  RunDriver(const RunDriver&) = delete;
  RunDriver& operator=(const RunDriver&) = delete;

  Result<RunRecord> Drive() {
    Transition(RunState::kCreated, "", /*created=*/true);
    RunState state = RunState::kCreated;
    StepEnd end{RunEvent::kStart, ""};
    for (;;) {
      std::optional<RunState> next = Next(state, end.event);
      if (!next) {
        // A step returned an event its state cannot have: a bug here, recorded rather than hidden.
        end.reason = "internal error: event " + std::string(RunEventName(end.event)) +
                     " while the run was " + std::string(RunStateName(state));
        next = RunState::kFailed;
      }
      if (IsFinal(*next)) return Finish(state, *next, end.reason);
      state = *next;
      Transition(state, "");
      switch (state) {
        case RunState::kPreparing:
          end = Prepare();
          break;
        case RunState::kRunning:
          end = RunAgent();
          break;
        case RunState::kVerifying:
          end = Verify();
          break;
        default:
          end = {RunEvent::kFailed,
                 "internal error: no step for state " + std::string(RunStateName(state))};
          break;
      }
    }
  }

 private:
  // preparing: pin the base commit, materialise the disposable workspace.
  StepEnd Prepare() {
    const RepoInfo& repo = in_.repo;  // inspected in the pre-flight checks (LoadInputs)
    rec_.repo = repo.root;
    auto made = MaterializeWorkspace(repo, layout_, req_.allow_dirty);
    if (!made) return {RunEvent::kFailed, made.error().Message()};
    rec_.base_commit = made->base_commit;
    rec_.carried_dirty = made->carried_dirty;
    rec_.carried_paths = made->carried_paths;
    log_.Append(broker::audit::Workspace({.repo = rec_.repo,
                                          .base_commit = rec_.base_commit,
                                          .carried_dirty = rec_.carried_dirty,
                                          .carried_paths = rec_.carried_paths}));
    if (!policy_.setup.commands.empty()) {
      // What git sees before setup (the base, plus the caller's carried changes), so that what
      // setup writes to tracked or not-ignored paths cannot ride into the agent's patch.
      auto before = CaptureTree(layout_, rec_.base_commit, policy_.outputs);
      if (!before) return {RunEvent::kFailed, "before setup: " + before.error().Message()};
      rec_.setup = Setup(layout_.workspace, "setup", "workspace", "");
      if (auto why = SetupFailure(rec_.setup); !why.empty()) return {RunEvent::kFailed, why};
      auto after = CaptureTree(layout_, rec_.base_commit, policy_.outputs);
      if (!after) return {RunEvent::kFailed, "after setup: " + after.error().Message()};
      if (*after != *before) return {RunEvent::kFailed, SetupWroteTracked(*before, *after)};
    }
    return {RunEvent::kPrepared, ""};
  }

  // The reason a run fails when setup changed what git sees in the workspace.
  std::string SetupWroteTracked(const std::string& before, const std::string& after) const {
    std::string list;
    if (auto paths = PathsChangedBetween(layout_, before, after); paths && !paths->empty()) {
      constexpr std::size_t kShown = 5;
      for (std::size_t i = 0; i < paths->size() && i < kShown; ++i) {
        list += (i == 0 ? "" : ", ") + TerminalSafe((*paths)[i]);
      }
      if (paths->size() > kShown) {
        list += " and " + std::to_string(paths->size() - kShown) + " more";
      }
      list = " (" + list + ")";
    }
    return "setup changed files that git tracks or does not ignore" + list +
           "; they would become part of the agent's patch. Setup may write only ignored paths: "
           "ignore what it makes (e.g. node_modules/ in .gitignore), or change the command";
  }

  // The sandboxes' context: the run's binding, the caller's environment, the profile's caches and
  // the caller's checkout for `carry`.
  ProfileContext Context() const {
    ProfileContext ctx{binding_, CallerEnviron()};
    ctx.cache_root = CacheRoot();
    ctx.cache_scope = CacheScope(rec_.repo);  // the caller's repository, not this copy of it
    ctx.carry_from = rec_.repo;
    ctx.git_identity = git_identity_;
    return ctx;
  }

  // The profile's setup commands over `dir`, each an audit event.
  std::vector<VerifyEntry> Setup(const std::string& dir, const char* log_kind, const char* where,
                                 const std::string& tree) {
    VerifyEgress egress{in_.policy, req_.resolve,
                        [this](const broker::AuditEvent& e) { log_.Append(e); }, rec_.profile};
    std::vector<VerifyEntry> out = RunSetup(
        setup_policy_, dir, rec_.run_dir + "/logs", log_kind, Context(),
        [&](const std::string& command) {
          Report([&](RunProgress& p) { p.last_action = "setup: " + command; });
        },
        &egress, /*caches_writable=*/tree.empty());
    for (auto& v : out) {
      v.tree = tree;
      std::string log = v.log_path;
      if (log.starts_with(rec_.run_dir + "/")) log.erase(0, rec_.run_dir.size() + 1);
      log_.Append(broker::audit::Setup({.command = v.command,
                                        .status = std::string(VerifyStatusName(v.status)),
                                        .exit_code = v.exit_code,
                                        .duration_ms = v.duration.count(),
                                        .where = where,
                                        .log = log,
                                        .refused = v.network_refused,
                                        .network_hints = v.network_hints}));
    }
    return out;
  }

  // Why setup failed, in words ("" = every command passed).
  static std::string SetupFailure(const std::vector<VerifyEntry>& entries) {
    for (const auto& v : entries) {
      if (v.status != VerifyEntry::Status::kPassed) {
        return "setup: '" + v.command + "' " + std::string(VerifyStatusName(v.status)) + " (" +
               v.detail + "); its output is in " + v.log_path;
      }
    }
    return "";
  }

  // running: the agent under the broker in a sandbox, then the capture (git, not the agent, says
  // what changed) and the profile's rules on the patch.
  StepEnd RunAgent() {
    session::AgentSessionOptions s;
    s.run_id = rec_.run_id;
    s.policy = in_.policy;
    s.binding = binding_;
    s.cache_root = CacheRoot();
    s.cache_scope = CacheScope(rec_.repo);
    s.carry_from = rec_.repo;
    s.task = in_.task;
    s.model = req_.model;
    s.approval = req_.approval;
    s.pre_approvals = req_.pre_approvals;
    s.resolve = req_.resolve;
    s.pre_approval_file = req_.pre_approval_file;
    s.budget_overrides = req_.budget_overrides;
    s.audit = &log_;
    s.agent_log_path = rec_.run_dir + "/agent.log";
    s.tty_fd = req_.tty_fd;
    if (rec_.budgets.model_turns) {
      const std::lock_guard<std::mutex> lock(mu_);
      progress_.max_turns = *rec_.budgets.model_turns;
    }
    s.on_event = [this](const broker::BrokerEvent& e) {
      Report([&](RunProgress& p) {
        // The broker's own counts (what the budgets are checked against), not a tally of events.
        p.turn = e.used.model_turns;
        p.tool_calls = e.used.tool_calls;
        if (e.kind != "model_result") p.last_action = e.text;
      });
    };
    auto session = session::RunAgentSession(s);
    if (!session) return {RunEvent::kFailed, session.error().Message()};
    const broker::BrokerOutcome& b = session->broker;
    RecordSession(*session);

    auto captured = CapturePatch(layout_, rec_.base_commit, policy_.outputs);
    if (captured) {
      rec_.patch = std::move(*captured);
      if (auto w = session::WriteFileAtomic(rec_.run_dir + "/patch.diff", rec_.patch.patch); !w) {
        return {RunEvent::kFailed, w.error().Message()};
      }
      rec_.violations = CheckPatch(rec_.patch, policy_, binding_);
      std::vector<std::string> dropped;
      for (const GitConfigRewrite& r : rec_.git_config_rewrites) {
        if (!r.reason.empty()) dropped.push_back(r.path + ": (whole file)");
        for (const std::string& k : r.dropped) dropped.push_back(r.path + ": " + k);
      }
      log_.Append(broker::audit::Patch({.patch_digest = rec_.patch.sha256,
                                        .files = rec_.patch.files.size(),
                                        .bytes = rec_.patch.patch.size(),
                                        .violations = rec_.violations.size(),
                                        .git_config_dropped = std::move(dropped)}));
    }

    if (b.status == broker::BrokerOutcome::Status::kCancelled) {
      return {RunEvent::kCancelled, b.reason.empty() ? "cancelled" : b.reason};
    }
    if (b.status == broker::BrokerOutcome::Status::kNeedsApproval) {
      // The work so far is captured (cagent diff shows it) but not verified: the run stopped.
      if (b.needs_approval) {
        const broker::ApprovalRequest& a = *b.needs_approval;
        rec_.needs_approval = PendingApproval{.tool = a.tool,
                                              .action = a.action,
                                              .resolved_paths = a.resolved_paths,
                                              .digest = a.digest,
                                              .rule = a.rule,
                                              .location = a.location};
      }
      std::string why = b.reason;
      if (b.needs_approval) {
        why += "; to allow exactly this action, run again with --pre-approve 'sha256:" +
               b.needs_approval->digest + "', or on a terminal with --approve policy to be asked";
      }
      return {RunEvent::kNeedsApproval, why};
    }
    if (!captured) {
      return {RunEvent::kFailed, "patch capture failed: " + captured.error().Message()};
    }
    if (b.status != broker::BrokerOutcome::Status::kFinished) {
      return {RunEvent::kFailed, b.reason.empty() ? "the agent did not finish" : b.reason};
    }
    if (!rec_.violations.empty()) {
      std::string why = "the patch breaks the profile's rules: " + rec_.violations.front().message;
      if (rec_.violations.size() > 1) {
        why += " (and " + std::to_string(rec_.violations.size() - 1) + " more)";
      }
      return {RunEvent::kFailed, why};
    }
    if (rec_.patch.files.empty()) {
      // Nothing to verify or apply: said as such, not as a verified run with an empty patch.
      std::string why = "the agent finished without changing any file";
      if (b.denials > 0) {
        why += "; " + std::to_string(b.denials) + " of its requests " +
               (b.denials == 1 ? "was" : "were") +
               " refused by the profile (`cagent log` shows which, and the rule that decided)";
      }
      return {RunEvent::kNoChange, why};
    }
    return {RunEvent::kAgentDone, ""};
  }

  // What the session's broker counted and its sandbox reported, into the record.
  void RecordSession(const session::AgentSessionResult& session) {
    const broker::BrokerOutcome& b = session.broker;
    rec_.used = b.used;
    rec_.denials = b.denials;
    rec_.approvals_asked = b.approvals_asked;
    if (session.egress) {
      std::uint64_t relayed = 0, refused = 0, up = 0, down = 0;
      std::set<std::string> reached, denied;
      for (const egress::ConnectionRecord& c : session.egress_connections) {
        const std::string target = policy::HostPortText(c.dest.host, c.dest.port);
        if (c.allowed) {
          ++relayed;
          reached.insert(target);
        } else {
          ++refused;
          denied.insert(target);
        }
        up += c.bytes_up;
        down += c.bytes_down;
      }
      rec_.egress = {{"relayed", relayed},
                     {"refused", refused},
                     {"bytes_up", up},
                     {"bytes_down", down},
                     {"hosts_reached", reached},
                     {"hosts_refused", denied},
                     {"budget_exhausted", session.egress_budget_exhausted}};
    }
    rec_.credentials =
        SummarizeCredentials(*in_.policy, session.credentials_loaded, session.egress_exchanges);
    rec_.credentials_skipped = session.credentials_skipped;
    if (b.finish) rec_.agent_summary = b.finish->summary;
    for (std::size_t i = 0; i < static_cast<std::size_t>(Layer::kCount); ++i) {
      const std::string name(LayerName(static_cast<Layer>(i)));
      bool off = false;
      for (const auto& d : session.sandbox.disabled_layers) off = off || d == name;
      if (!off) rec_.layers.push_back(name);
    }
    AddDowngrades(session.sandbox.downgrades);
    rec_.git_guard = session.sandbox.git_guard;
    rec_.host_findings = session.sandbox.host_findings;
    rec_.planted_repositories = session.sandbox.planted_repositories;
    rec_.cleared_files = session.sandbox.cleared_files;
    rec_.git_config_rewrites = session.sandbox.git_config_rewrites;
  }

  // verifying: the profile's commands on a fresh checkout of base + patch, never the agent's
  // workspace.
  StepEnd Verify() {
    auto tree =
        MakeVerifyTree(layout_, rec_.base_commit, rec_.run_dir + "/patch.diff", rec_.patch.tree);
    if (!tree) {
      rec_.verification = PlannedVerification(policy_);
      for (auto& v : rec_.verification) {
        v.status = VerifyEntry::Status::kInfrastructure;
        v.detail = "no verification tree: " + tree.error().Message();
      }
      return {RunEvent::kFailed, "verification: could not make a fresh checkout of base + patch: " +
                                     tree.error().Message()};
    }
    log_.Append(broker::audit::VerifyTree(
        {.tree = tree->tree, .base_commit = tree->base_commit, .path = tree->dir}));
    // The same setup as the agent's workspace had, run again on the fresh checkout: verification
    // never sees the agent's copy of the dependencies.
    if (!policy_.setup.commands.empty()) {
      rec_.verify_setup = Setup(tree->dir, "verify-setup", "verify-tree", tree->tree);
      if (auto why = SetupFailure(rec_.verify_setup); !why.empty()) {
        rec_.verification = PlannedVerification(policy_);
        for (auto& v : rec_.verification) {
          v.detail = "not run: setup failed on the verification tree";
        }
        return {RunEvent::kFailed, "verification: " + why};
      }
    }
    ProfileContext ctx = Context();
    VerifyEgress egress{in_.policy, req_.resolve,
                        [this](const broker::AuditEvent& e) { log_.Append(e); }, rec_.profile};
    rec_.verification = RunVerification(
        policy_, *tree, rec_.run_dir + "/logs", ctx,
        [&](const std::string& command) {
          Report([&](RunProgress& p) { p.last_action = "verify: " + command; });
        },
        &egress);
    for (const auto& v : rec_.verification) {
      log_.Append(broker::audit::Verify({.command = v.command,
                                         .status = std::string(VerifyStatusName(v.status)),
                                         .exit_code = v.exit_code,
                                         .duration_ms = v.duration.count(),
                                         .tree = v.tree,
                                         .refused = v.network_refused,
                                         .network_hints = v.network_hints}));
    }
    for (const auto& v : rec_.verification) {
      if (v.status != VerifyEntry::Status::kPassed) {
        return {RunEvent::kFailed, "verification: '" + v.command + "' " +
                                       std::string(VerifyStatusName(v.status)) + " (" + v.detail +
                                       ")"};
      }
    }
    return {RunEvent::kVerified,
            policy_.verify.empty()
                ? "not verified: the profile has no verify commands (--allow-unverified)"
                : ""};
  }

  void Report(const std::function<void(RunProgress&)>& change) {
    const std::lock_guard<std::mutex> lock(mu_);
    change(progress_);
    progress_.elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_);
    if (on_progress_) on_progress_(progress_);
  }

  // Should cagent die before Finish() (an uncaught exception, std::terminate), main's last-resort
  // handler writes this record: the run failed, in the state it had reached.
  void ArmLastResort() {
    RunRecord fallback = rec_;
    fallback.reason = "cagent stopped unexpectedly (internal error) while the run was " +
                      std::string(RunStateName(rec_.state)) +
                      "; events.jsonl has what happened until then";
    fallback.state = RunState::kFailed;
    fallback.finished_at = NowRfc3339();
    ArmLastResortRecord(rec_.run_dir, JsonText(fallback.ToJson(), 2) + "\n");
  }

  // Enters `state`: the record, the last-resort record, the event log, the display. `created` also
  // records the profile and model the run starts with.
  void Transition(RunState state, const std::string& why, bool created = false) {
    rec_.state = state;
    ArmLastResort();
    log_.Append(broker::audit::State(
        {.state = std::string(RunStateName(state)),
         .reason = why,
         .profile = created ? std::optional<std::string>(rec_.profile) : std::nullopt,
         .model = created ? std::optional<std::string>(rec_.model) : std::nullopt}));
    Report([&](RunProgress& p) {
      p.state = state;
      if (!why.empty()) p.last_action = why;
    });
  }

  // Ends the run in the final `state`, reached from `from`, and writes result.json.
  // Issue #20: the run's downgrades, each once, whichever of its sandboxes (setup, the agent's,
  // verification) it came from; the agent's alone were recorded, the others' nowhere.
  void AddDowngrades(const std::vector<std::string>& found) {
    for (const auto& d : found) {
      if (std::find(rec_.downgrades.begin(), rec_.downgrades.end(), d) == rec_.downgrades.end()) {
        rec_.downgrades.push_back(d);
      }
    }
  }

  Result<RunRecord> Finish(RunState from, RunState state, const std::string& why) {
    for (const auto* entries : {&rec_.setup, &rec_.verify_setup, &rec_.verification}) {
      for (const auto& e : *entries) AddDowngrades(e.downgrades);
    }
    // A run that ends before verifying records the verification it would have run, all not-run,
    // so the result always lists what "verified" would have meant.
    if (from != RunState::kVerifying) rec_.verification = PlannedVerification(policy_);
    rec_.reason = why;
    rec_.finished_at = NowRfc3339();
    Transition(state, why);
    rec_.event_log_entries = log_.entries();
    rec_.event_log_head = log_.head();
    rec_.event_log_lost = log_.lost();
    if (auto s = session::WriteFileAtomic(rec_.run_dir + "/result.json",
                                          JsonText(rec_.ToJson(), 2) + "\n");
        !s) {
      return std::move(s).Context("write result.json").error();
    }
    DisarmLastResortRecord();
    return rec_;
  }

  const RunRequest& req_;
  const RunInputs in_;
  const policy::Policy& policy_;
  RunRecord rec_;
  broker::AuditLog log_;
  const std::function<void(const RunProgress&)>& on_progress_;
  const Clock::time_point started_;
  const WorkspaceLayout layout_;
  const policy::Binding binding_;
  const std::shared_ptr<const policy::Policy> setup_policy_ = SetupPolicy(policy_);
  // Read once per run (launcher/session/git_identity.h); set inside unless `git-identity none`.
  const std::vector<EnvVar> git_identity_ = session::CallerGitIdentity().Env();
  std::mutex mu_;
  RunProgress progress_;
};

}  // namespace

Result<RunRecord> ExecuteRun(const RunRequest& req,
                             const std::function<void(const RunProgress&)>& on_progress) {
  const auto started = Clock::now();
  RunRecord rec;
  rec.run_id = req.run_id.empty() ? session::NewRunId() : req.run_id;
  rec.created_at = NowRfc3339();
  rec.model = req.model_label;

  auto inputs = LoadInputs(req);
  if (!inputs) return inputs.error();
  const policy::Policy& policy = *inputs->policy;
  rec.profile = policy.name;
  rec.profile_file = inputs->choice.file;
  rec.profile_sha256 = inputs->choice.sha256;
  for (const auto& o : policy.outputs) rec.outputs.push_back(o.pattern);
  rec.profile_from_repository = inputs->choice.from_repository;
  rec.policy_digest = session::PolicyDigest(policy);
  rec.budgets = inputs->budgets;

  const std::string state_dir = req.state_dir.empty() ? session::StateDirectory() : req.state_dir;
  if (auto s = CreateRunDirectory(state_dir, rec, inputs->task); !s) return s.error();
  auto opened =
      broker::AuditLog::Open(rec.run_dir + "/events.jsonl", rec.run_id, rec.policy_digest);
  if (!opened) return std::move(opened).Context("create the run's event log").error();
  opened->StreamTo(req.events_fd);
  opened->SetObserver(req.on_entry);

  RunDriver driver(req, std::move(*inputs), std::move(rec), std::move(*opened), on_progress,
                   started);
  return driver.Drive();
}

}  // namespace cagent::launcher::run
