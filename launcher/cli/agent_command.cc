#include "launcher/cli/agent_command.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/duration.h"
#include "common/exit_codes.h"
#include "common/json_text.h"
#include "common/money.h"
#include "common/terminal_text.h"
#include "common/unique_fd.h"
#include "launcher/cli/downgrade_notes.h"
#include "launcher/cli/transcript.h"
#include "launcher/profile/choice.h"
#include "launcher/profile/repo_profiles.h"
#include "launcher/profile/spec.h"
#include "launcher/profile/workspace_guard.h"
#include "launcher/run/session_record.h"
#include "launcher/session/agent.h"
#include "launcher/session/state_dir.h"
#include "policy/language/diagnostics.h"
#include "policy/language/loader.h"

namespace cagent::launcher::cli {
namespace {

namespace fs = std::filesystem;
int Usage(const std::string& message) {
  spdlog::error("{}", message);
  return ToInt(ExitCode::kUsage);
}

// Now as RFC 3339 UTC to the second ("2026-12-03T10:15:00Z"), as result.json's created_at.
std::string NowUtc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return PlainError("create " + path, ec.message());
  ::chmod(path.c_str(), 0700);
  return Ok{};
}

// `cagent agent --json`: the session's end as one object.
nlohmann::json AgentSessionJson(const session::AgentSessionOptions& s, std::uint64_t sequence,
                                const session::AgentSessionResult& result,
                                const std::vector<std::string>& downgrades) {
  const auto& b = result.broker;
  nlohmann::json j;
  j["run_id"] = s.run_id;
  j["kind"] = "agent";
  j["sequence"] = sequence;
  j["status"] = broker::BrokerStatusName(b.status);
  j["reason"] = b.reason;
  j["summary"] = b.finish ? b.finish->summary : "";
  j["profile"] = s.policy->name;
  j["policy_digest"] = result.policy_digest;
  j["audit_log"] = s.audit_log_path;
  j["agent_log"] = s.agent_log_path;
  j["audit_entries"] = result.audit_entries;
  j["audit_lost"] = result.audit_lost;
  j["usage"] = {
      {"model_turns", b.used.model_turns},
      {"input_tokens", b.used.input_tokens},
      {"output_tokens", b.used.output_tokens},
      {"cache_read_tokens", b.used.cache_read_tokens},
      {"cache_write_tokens", b.used.cache_write_tokens},
      {"reasoning_tokens", b.used.reasoning_tokens},
      {"cost", b.used.currency.empty()
                   ? nlohmann::json(nullptr)
                   : nlohmann::json{{"micros", b.used.cost_micros},
                                    {"currency", b.used.currency},
                                    {"text", FormatMoney(b.used.cost_micros, b.used.currency)}}},
      {"tool_calls", b.used.tool_calls},
      {"output_bytes", b.used.output_bytes}};
  j["sandbox"] = DescribeOutcome(result.sandbox);
  j["downgrades"] = downgrades;
  if (b.needs_approval) {
    j["needs_approval"] = {{"tool", b.needs_approval->tool},
                           {"action", b.needs_approval->action},
                           {"rule", b.needs_approval->rule},
                           {"pre_approve", "sha256:" + b.needs_approval->digest}};
  }
  return j;
}

// The session's end for people: its status, the pre-approval that allows a stopped action, the
// agent's summary (escaped: the agent wrote it).
void PrintSessionEnd(const broker::BrokerOutcome& b) {
  std::string line = std::string("session ") + std::string(broker::BrokerStatusName(b.status));
  if (!b.reason.empty()) line += ": " + TerminalSafe(b.reason);
  spdlog::info("{}", line);
  if (b.needs_approval) {
    spdlog::info("to allow exactly this action: --pre-approve 'sha256:{}'",
                 b.needs_approval->digest);
  }
  if (b.finish && !b.finish->summary.empty()) {
    std::cerr << TerminalSafe(b.finish->summary, TerminalLines::kMultiple) << "\n";
  }
}

// The session's record once it ended (`cagent runs` lists it, `cagent log` finds its log).
void RecordSessionEnd(const std::string& record_path, nlohmann::json& record,
                      const session::AgentSessionResult& result,
                      const std::vector<std::string>& downgrades) {
  const auto& b = result.broker;
  record["status"] = run::SessionStatus(broker::BrokerStatusName(b.status));
  record["reason"] = b.reason;
  record["summary"] = b.finish ? b.finish->summary : "";
  record["downgrades"] = downgrades;
  record["event_log_entries"] = result.audit_entries;
  record["event_log_head"] = result.audit_head;
  record["event_log_lost"] = result.audit_lost;
  if (auto st = run::WriteSessionRecord(record_path, record); !st) {
    spdlog::warn("warning: {}: the session will be listed as unfinished", st.error().Message());
  }
}

// The task file's text; refused when it cannot be read or holds only blanks.
Result<std::string> ReadTask(const std::string& path) {
  std::ifstream task(path, std::ios::binary);
  if (!task) return PlainError("cannot read the task file " + path);
  std::ostringstream text;
  text << task.rdbuf();
  if (text.str().find_first_not_of(" \t\r\n") == std::string::npos) {
    return PlainError("the task file " + path + " is empty");
  }
  return text.str();
}

}  // namespace

CLI::App* AddAgentCommand(CLI::App& app, AgentOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "agent",
      "Run the coding agent on TASK, in place, in DIR: the agent runs inside a sandbox built from "
      "the profile, and every model call and tool call it makes goes through the policy broker "
      "(decisions, approvals, budgets, the hash-chained audit log). Unlike 'cagent run', there is "
      "no disposable git workspace, no patch capture and no verification: what the agent writes "
      "stays in DIR. Use it on scratch directories.");
  cmd->add_option("--profile", o.profile,
                  "Profile (name or .cagent file); see 'cagent policy list'.")
      ->required();
  cmd->add_flag("--trust-repo-profile", o.trust_repo_profile, kTrustRepoProfileHelp);
  cmd->add_option("-w,--workspace", o.workspace,
                  "The directory the agent works in (read-write). Refused: a system directory "
                  "(/usr, /etc, /tmp, ...), and your home directory or one that contains it "
                  "unless --allow-home.")
      ->required();
  cmd->add_flag("--allow-home", o.allow_home, kAllowHomeHelp);
  cmd->add_option("task", o.task_file, "Markdown file with the task (untrusted text).")->required();
  AddSessionFlags(cmd, o.session);
  cmd->add_option("--audit-log", o.audit_log,
                  "Where the audit log goes (must not exist; default "
                  "$XDG_STATE_HOME/cagent/sessions/RUN.audit.jsonl).");
  cmd->add_flag("--json", o.json, "Print the session's outcome as one JSON object on stdout.");
  cmd->add_flag("-q,--quiet", o.quiet,
                "Do not print the broker's events, nor the session's downgrades (restrictions "
                "the profile accepts as best-effort), on stderr.");
  cmd->add_flag("-v,--verbose", o.verbose,
                "Instead of one line per broker event, a scrolling transcript on stderr: each "
                "model turn's text, each tool call (name and arguments, abbreviated), the "
                "broker's decision and rule, and the result (status and the first lines of "
                "output), every text the model, the agent or the workspace wrote escaped.");
  cmd->footer(
      "Exit status: 0 the agent finished; 3 the session failed (budget, provider error, the agent "
      "crashed or violated the protocol); 4 stopped for an approval (--approve stop); 130 "
      "cancelled (Ctrl-C); 2 usage; 125 could not start.");
  return cmd;
}

int RunAgentCommand(const AgentOptions& o) {
  session::AgentSessionOptions s;
  s.run_id = session::NewRunId();

  auto workspace = CanonicalDirectory(o.workspace);
  if (!workspace) return Usage("--workspace " + o.workspace + ": " + workspace.error().Message());
  WorkspaceChoice named;
  named.named = true;  // --workspace is required
  named.allow_home = o.allow_home;
  if (auto st = CheckWorkspace(*workspace, named); !st) return Usage(st.error().Message());
  s.binding = RunBinding(*workspace);

  auto task = ReadTask(o.task_file);
  if (!task) return Usage(task.error().Message());
  s.task = std::move(*task);

  auto settings = ResolveSessionFlags(o.session);
  if (!settings) return Usage(settings.error().Message());
  s.model = settings->model;

  const std::string home = CallerHome();
  const auto search = ProfileSearchPath(home, CAGENT_PROFILE_DIR, *workspace);
  auto choice = ChooseProfile(o.profile, search, o.trust_repo_profile);
  if (!choice) return Usage(choice.error().Message());
  auto compiled = policy::LoadProfile(choice->path, search);
  if (!compiled.policy) {
    std::cerr << policy::RenderAll(*compiled.sources, compiled.diags);
    return ToInt(ExitCode::kUsage);
  }
  s.policy = compiled.policy;

  s.approval = settings->approval;
  s.pre_approvals = settings->pre_approvals;
  s.resolve = settings->resolve;
  s.pre_approval_file = settings->pre_approval_file;
  s.budget_overrides = settings->budget_overrides;

  const std::string state = session::StateDirectory();
  const std::string sessions = run::SessionsDirectory(state);
  if (auto st = MakeDirs(sessions); !st) return Usage(st.error().Message());
  std::error_code exists_ec;
  if (!o.audit_log.empty() &&
      fs::symlink_status(o.audit_log, exists_ec).type() != fs::file_type::not_found) {
    return Usage("--audit-log " + o.audit_log +
                 ": the file exists; give a new path (a log is never appended to)");
  }
  s.audit_log_path = o.audit_log.empty() ? sessions + "/" + s.run_id + ".audit.jsonl" : o.audit_log;
  s.agent_log_path = sessions + "/" + s.run_id + ".agent.log";

  // Issue #20: the session is listed by `cagent runs` and found by `cagent log` through its
  // record (launcher/run/session_record.h), numbered by the counter runs use, so the two sort
  // together. "unfinished" until it ends; a crash leaves it so.
  if (auto st = MakeDirs(state + "/runs"); !st) return Usage(st.error().Message());
  auto sequence = session::NextRunSequence(state + "/runs");
  if (!sequence) return Usage(sequence.error().Message());
  const std::string record_path = run::SessionRecordPath(sessions, s.run_id);
  nlohmann::json record = {{"kind", "agent"},
                           {"run_id", s.run_id},
                           {"sequence", *sequence},
                           {"status", "unfinished"},
                           {"reason", ""},
                           {"profile", s.policy->name},
                           {"model", settings->model_label},
                           {"workspace", s.binding.workspace},
                           {"created_at", NowUtc()},
                           {"audit_log", s.audit_log_path},
                           {"agent_log", s.agent_log_path}};
  if (auto st = run::WriteSessionRecord(record_path, record); !st) {
    return Usage(st.error().Message());
  }

  const UniqueFd tty = OpenApprovalTerminal(s.approval);
  s.tty_fd = tty.get();
  TranscriptPrinter transcript(std::cerr);
  if (o.verbose) {
    s.on_entry = [&transcript](std::string_view line, const nlohmann::json& t) {
      transcript.Print(line, t);
    };
  } else if (!o.quiet) {
    // Event texts quote the agent (commands, paths): escaped for the terminal.
    s.on_event = [](const broker::BrokerEvent& e) {
      spdlog::info("{}: {}", TerminalSafe(e.kind), TerminalSafe(e.text));
    };
  }

  if (!o.quiet) {
    spdlog::info("session {}: profile {}, model {}, audit log {}, agent log {}", s.run_id,
                 s.policy->name, settings->model_label, s.audit_log_path, s.agent_log_path);
  }
  auto result = session::RunAgentSession(s);
  record["finished_at"] = NowUtc();
  if (!result) {
    record["status"] = "failed";
    record["reason"] = "the session could not start: " + result.error().Message();
    (void)run::WriteSessionRecord(record_path, record);
    spdlog::error("{}", result.error().Message());
    return ToInt(ExitCodeFor(result.error(), ExitCode::kSetupFailed));
  }
  // Once per session (its sandbox's accepted downgrades, each once), as `cagent run` reports its
  // own; -q keeps them off the terminal, --json has them.
  std::vector<std::string> downgrades;
  for (const auto& d : result->sandbox.downgrades) {
    if (std::find(downgrades.begin(), downgrades.end(), d) == downgrades.end()) {
      downgrades.push_back(d);
    }
  }
  if (!o.quiet) (void)WarnDowngrades(downgrades, CallerHome());
  const auto& b = result->broker;
  RecordSessionEnd(record_path, record, *result, downgrades);
  if (o.json) {
    std::cout << JsonText(AgentSessionJson(s, *sequence, *result, downgrades), 2) << "\n";
  } else {
    PrintSessionEnd(b);
  }
  return ToInt(broker::BrokerExitCode(b.status));
}

}  // namespace cagent::launcher::cli
