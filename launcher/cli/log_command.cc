#include "launcher/cli/log_command.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/exit_codes.h"
#include "common/json_text.h"
#include "common/small_file.h"
#include "common/terminal_text.h"
#include "launcher/broker/audit_log.h"
#include "launcher/broker/audit_schema.h"
#include "launcher/cli/run_command.h"
#include "launcher/run/run_record.h"
#include "launcher/session/state_dir.h"

namespace cagent::launcher::cli {
namespace {

using nlohmann::json;

// Text from the log (written from what the agent and the model sent: untrusted) made safe for a
// terminal (TerminalSafe: controls, ESC, C1, bidi and invisible code points, bad UTF-8 escaped),
// newlines and tabs as spaces, cut to about `max` bytes at a character boundary.
std::string OneLine(std::string_view text, std::size_t max = 160) {
  std::string flat(text);
  for (char& c : flat) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  std::string out = TerminalSafe(flat);
  if (out.size() > max) {
    std::size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    out = out.substr(0, cut) + "...";
  }
  return out;
}

std::string Str(const json& j, const char* key) {
  if (!j.is_object()) return "";
  const auto it = j.find(key);
  if (it == j.end()) return "";
  return it->is_string() ? it->get<std::string>() : JsonText(*it);
}

std::string Compact(const json& j, std::size_t max = 160) { return OneLine(JsonText(j), max); }

// A detail field of `e` as text. `name` must be a field the schema declares for `kind`: a name it
// does not declare renders as "<undeclared NAME>", so a misspelling here shows in the rendering
// test instead of silently printing nothing.
std::string Field(broker::AuditKind kind, const json& detail, std::string_view name) {
  bool declared = false;
  for (const broker::AuditField& f : broker::AuditSpec(kind).detail) {
    declared = declared || f.name == name;
  }
  if (!declared) return "<undeclared " + std::string(name) + ">";
  return Str(detail, std::string(name).c_str());
}

// A detail member as it is (null when absent).
const json& Raw(const json& detail, std::string_view name) {
  static const json kNull;
  if (!detail.is_object()) return kNull;
  const auto it = detail.find(name);
  return it == detail.end() ? kNull : *it;
}

bool IsPositive(const json& v) { return v.is_number_unsigned() && v.get<std::uint64_t>() > 0; }

}  // namespace

std::string DescribeAuditEntry(const json& e, std::map<std::string, json>& calls) {
  const std::optional<broker::AuditKind> kind = broker::ParseAuditKind(Str(e, "event"));
  const json detail = e.contains("detail") ? e["detail"] : json::object();
  const auto d = [&](std::string_view name) { return Field(*kind, detail, name); };
  const auto flag = [&](std::string_view name) {
    return d(name) == "true";  // Str renders a boolean as its JSON text
  };
  // The arguments the model gave call `call_id` (from an earlier model_result), or "(call ID)".
  const auto called = [&calls](const std::string& call_id) {
    const auto it = calls.find(call_id);
    if (it != calls.end() && it->second.contains("arguments")) {
      return Compact(it->second["arguments"], 200);
    }
    return "(call " + call_id + ")";
  };
  std::string text;
  if (!kind) {
    if (!Str(e, "tool").empty()) text = Str(e, "tool") + " ";
    if (!Str(e, "verdict").empty()) text += Str(e, "verdict") + " ";
    return OneLine(text + Compact(detail), 300);
  }
  using K = broker::AuditKind;
  switch (*kind) {
    case K::kState: {
      using N = broker::audit::names::State;
      text = d(N::state);
      if (detail.contains(N::profile)) {
        text += " (profile " + d(N::profile) + ", model " + d(N::model) + ")";
      }
      if (detail.contains(N::reason)) text += ": " + d(N::reason);
      break;
    }
    case K::kWorkspace: {
      using N = broker::audit::names::Workspace;
      text = "base " + d(N::base_commit).substr(0, 12) + " of " + d(N::repo);
      if (flag(N::carried_dirty)) {
        text += ", uncommitted changes carried in (" +
                std::to_string(Raw(detail, N::carried_paths).size()) + " paths)";
      }
      break;
    }
    case K::kHello: {
      using N = broker::audit::names::Hello;
      text = d(N::agent) + ", protocols " + d(N::protocols);
      break;
    }
    case K::kWelcome: {
      using N = broker::audit::names::Welcome;
      text = "tools " + d(N::tools) + ", max turns " + d(N::max_turns);
      break;
    }
    case K::kModelCall: {
      using N = broker::audit::names::ModelCall;
      text = "turn " + d(N::turn) + ": " + d(N::messages) + " messages, max_tokens " +
             d(N::max_tokens);
      if (IsPositive(Raw(detail, N::redactions))) text += ", " + d(N::redactions) + " redactions";
      break;
    }
    case K::kModelResult: {
      using N = broker::audit::names::ModelResult;
      // The body of a replayed turn is the neutral turn itself ({text, tool_calls: [{id, name,
      // arguments}]}): its arguments let a later tool_request show what the model asked for.
      // Other providers' bodies are their own wire format, which is not parsed here.
      const json& body = Raw(detail, N::body);
      if (body.is_object() && body.contains("tool_calls") && body["tool_calls"].is_array()) {
        for (const json& call : body["tool_calls"]) {
          if (call.is_object() && call.contains("arguments")) calls[Str(call, "id")] = call;
        }
      }
      text = "turn " + d(N::turn) + " " + d(N::stop_reason);
      if (body.is_object() && body.contains("text") && body["text"].is_string()) {
        text += " " + Str(body, "text");
      }
      std::string names;
      if (const json& made = Raw(detail, N::tool_calls); made.is_array()) {
        for (const json& call : made) {
          names += (names.empty() ? "" : ", ") + Str(call, "name");
        }
      }
      if (!names.empty()) text += " -> " + names;
      // What it used: the tokens, the part read from the cache, the cost at the user's prices.
      if (const json& usage = Raw(detail, N::usage); usage.is_object()) {
        std::string used = Str(usage, "input_tokens") + " in";
        if (!Str(usage, "cache_read_tokens").empty()) {
          used += " (" + Str(usage, "cache_read_tokens") + " cached)";
        }
        used += ", " + Str(usage, "output_tokens") + " out";
        if (const std::string cost = d(N::cost); !cost.empty()) used += ", " + cost;
        text += " [" + used + "]";
      }
      break;
    }
    case K::kModelError: {
      using N = broker::audit::names::ModelError;
      text = "turn " + d(N::turn) + ": " + d(N::code) + ": " + d(N::message);
      break;
    }
    case K::kToolRequest: {
      using N = broker::audit::names::ToolRequest;
      text = Str(e, "tool") + " " + called(d(N::call_id));
      break;
    }
    case K::kDecision: {
      using N = broker::audit::names::Decision;
      // Since issue 18 the decision is also the request's entry: it shows what was asked.
      text = Str(e, "verdict") + " " + Str(e, "tool") + " " + called(d(N::call_id)) + " by " +
             Str(e, "rule");
      if (detail.contains(N::location) && !d(N::location).empty()) {
        text += " (" + d(N::location) + ")";
      }
      if (detail.contains(N::reason)) text += ": " + d(N::reason);
      break;
    }
    case K::kLoop: {
      using N = broker::audit::names::Loop;
      text = Str(e, "tool") + ": " + d(N::reason);
      break;
    }
    case K::kLoopState: {
      using N = broker::audit::names::LoopState;
      text = "loop detection sees part of the workspace: " + d(N::entries) + " entries (cap " +
             d(N::max_entries) + ")";
      if (flag(N::truncated)) text += ", walk cut at the cap";
      if (!d(N::not_walked).empty() && d(N::not_walked) != "0") {
        text += ", " + d(N::not_walked) + " directories not walked";
      }
      if (!d(N::error).empty()) text += ", " + d(N::error);
      break;
    }
    case K::kApproval: {
      using N = broker::audit::names::Approval;
      text =
          Str(e, "verdict") + " " + Str(e, "tool") + " (" + d(N::scope) + ", by " + d(N::by) + ")";
      break;
    }
    case K::kToolResult: {
      using N = broker::audit::names::ToolResult;
      if (flag(N::unmatched)) {
        text = "for request " + d(N::request) + ", which awaits no result";
        break;
      }
      text = Str(e, "tool") + (flag(N::ok) ? " ok" : " error " + d(N::error_code));
      text += ", " + d(N::bytes) + " bytes";
      if (const json& changed = Raw(detail, N::changed_paths); !changed.empty()) {
        text += ", changed " + Compact(changed, 120);
      }
      break;
    }
    case K::kProgress: {
      using N = broker::audit::names::Progress;
      text = d(N::state) + (d(N::text).empty() ? "" : ": " + d(N::text));
      break;
    }
    case K::kFinish: {
      using N = broker::audit::names::Finish;
      text = d(N::outcome) + ": " + d(N::summary);
      break;
    }
    case K::kProtocolError: {
      using N = broker::audit::names::ProtocolError;
      text = d(N::code) + ": " + d(N::message);
      break;
    }
    case K::kBudget: {
      using N = broker::audit::names::Budget;
      text = d(N::reason);
      break;
    }
    case K::kShutdown: {
      using N = broker::audit::names::Shutdown;
      text = d(N::status);
      if (!d(N::reason).empty()) text += ": " + d(N::reason);
      break;
    }
    case K::kPatch: {
      using N = broker::audit::names::Patch;
      text = d(N::files) + " files, " + d(N::bytes) + " bytes, " + d(N::violations) +
             " rule violations";
      break;
    }
    case K::kVerifyTree: {
      using N = broker::audit::names::VerifyTree;
      text = "fresh checkout of base " + d(N::base_commit).substr(0, 12) + " + patch: tree " +
             d(N::tree).substr(0, 12) + " at " + d(N::path);
      break;
    }
    case K::kVerify: {
      using N = broker::audit::names::Verify;
      text = d(N::status) + ": " + d(N::command) + " (exit " + d(N::exit_code) + ", " +
             d(N::duration_ms) + " ms)";
      break;
    }
    case K::kSetup: {
      using N = broker::audit::names::Setup;
      text = "setup on the " +
             std::string(d(N::where) == "verify-tree" ? "verification tree" : "workspace") + ": " +
             d(N::status) + ": " + d(N::command) + " (exit " + d(N::exit_code) + ", " +
             d(N::duration_ms) + " ms; output in " + d(N::log) + ")";
      break;
    }
    case K::kEgress: {
      using N = broker::audit::names::Egress;
      const std::string host = d(N::host);
      const std::string target =
          (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + d(N::port);
      text = Str(e, "verdict") + " " + target + " via " + d(N::via);
      if (!d(N::address).empty()) text += " to " + d(N::address);
      if (!Str(e, "rule").empty()) text += " (rule " + Str(e, "rule") + ")";
      if (Str(e, "verdict") == "allow") {
        text += ": " + d(N::bytes_up) + " bytes up, " + d(N::bytes_down) + " down, " +
                d(N::duration_ms) + " ms";
      } else {
        text += ": " + d(N::reason);
      }
      if (detail.contains(N::error)) text += "; " + d(N::error);
      text += " [" + d(N::phase) + "]";
      break;
    }
    case K::kHttpRequest: {
      using N = broker::audit::names::HttpRequest;
      const std::string host = d(N::host);
      text = Str(e, "verdict") + " " + d(N::method) + " " +
             (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + d(N::port) +
             d(N::path);
      if (const json& names = Raw(detail, N::credentials); names.is_array() && !names.empty()) {
        std::string joined;
        for (const json& n : names) {
          if (n.is_string()) joined += (joined.empty() ? "" : ", ") + n.get<std::string>();
        }
        text += " with " + OneLine(joined, 200);
      }
      if (!Str(e, "rule").empty()) text += " (rule " + Str(e, "rule") + ")";
      if (detail.contains(N::misdirected)) {
        text += ": MISDIRECTED placeholder of credential " + d(N::misdirected);
      }
      if (Str(e, "verdict") == "allow") {
        text += ": status " + d(N::status) + ", " + d(N::bytes_up) + " bytes up, " +
                d(N::bytes_down) + " down, " + d(N::duration_ms) + " ms";
      } else {
        text += ": " + d(N::reason);
      }
      if (detail.contains(N::error)) text += "; " + d(N::error);
      text += " [" + d(N::phase) + "]";
      break;
    }
    case K::kMcpCall: {
      using N = broker::audit::names::McpCall;
      text = Str(e, "verdict") + " " + Str(e, "tool") + " (" + d(N::mode) + ", request " +
             d(N::request) + ")";
      if (!Str(e, "rule").empty()) text += " by " + Str(e, "rule");
      text += ": " + d(N::reason);
      break;
    }
    case K::kMcpResult: {
      using N = broker::audit::names::McpResult;
      text = Str(e, "tool") + " (" + d(N::mode) + ", request " + d(N::request) + ") " +
             (flag(N::ok) ? (flag(N::is_error) ? "isError" : "ok") : "failed") + ", " +
             d(N::bytes) + " bytes";
      if (detail.contains(N::error)) text += ": " + d(N::error);
      break;
    }
    case K::kMcpList: {
      using N = broker::audit::names::McpList;
      text =
          "tools offered " + d(N::offered) + ", hidden " + d(N::hidden) + " (" + d(N::mode) + ")";
      break;
    }
    case K::kCount:
      break;
  }
  return OneLine(text, 300);
}

namespace {

// What checking one log found: the chain (and, for a run, the count and head digest recorded in
// result.json, since the chain alone cannot show lines cut from the end) and the schema.
struct LogCheck {
  std::string path;
  broker::AuditVerifyReport chain;
  std::optional<std::uint64_t> recorded_entries;
  std::string recorded_head;
  std::string chain_problem;  // "" when the chain holds and matches result.json
  broker::AuditSchemaReport schema;
};

// A run (id, unique prefix, "last"), an MCP session of `cagent mcp serve|wrap` (its id, under
// <state>/mcp/), or a directory holding events.jsonl.
Result<std::string> ResolveLogDirectory(const std::string& arg) {
  struct stat st {};
  if (!arg.empty() && ::stat((arg + "/events.jsonl").c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    return arg;
  }
  if (arg.find('/') == std::string::npos && !arg.empty() && arg[0] != '.') {
    const std::string session = session::StateDirectory() + "/mcp/" + arg;
    if (::stat((session + "/events.jsonl").c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      return session;
    }
  }
  // A `cagent agent` session (issue #20): its record stands for the directory (LogFileOf).
  auto found = ResolveRunOrSession(arg, /*last_may_be_session=*/true);
  if (found && found->session) {
    if (found->session_entry.record_path.empty()) {
      // A session from before records: its log alone, with nothing to compare it with.
      return found->session_entry.audit_log;
    }
    return found->session_entry.record_path;
  }
  return ResolveRunDirectory(arg);
}

// A `cagent agent` session's record (ID.session.json) or its bare audit log, as
// ResolveLogDirectory gives them for a session.
bool IsAgentSession(const std::string& target) {
  return target.ends_with(".session.json") || target.ends_with(".audit.jsonl");
}

// A session record or summary read back: a regular file (not a link), bounded in size and
// nesting; otherwise a discarded value.
json ReadRecord(const std::string& path) {
  auto text = ReadSmallFile(path, run::kMaxRunResultBytes);
  if (!text) return json(json::value_t::discarded);
  return ParseJsonWithin(*text, run::kMaxRunResultDepth);
}

// The log of what ResolveLogDirectory found: a run's or MCP session's events.jsonl, or the
// audit log a `cagent agent` session's record names.
std::string LogFileOf(const std::string& target) {
  if (target.ends_with(".audit.jsonl")) return target;
  if (target.ends_with(".session.json")) {
    const json record = ReadRecord(target);
    if (record.is_object() && record.contains("audit_log") && record["audit_log"].is_string()) {
      return record["audit_log"].get<std::string>();
    }
    return target.substr(0, target.size() - std::string(".session.json").size()) + ".audit.jsonl";
  }
  return target + "/events.jsonl";
}

// A session directory of `cagent mcp serve|wrap` (no result.json; serve writes session.json).
bool IsMcpSessionDir(const std::string& dir) {
  const std::string mcp = session::StateDirectory() + "/mcp/";
  struct stat st {};
  return dir.rfind(mcp, 0) == 0 || ::stat((dir + "/session.json").c_str(), &st) == 0;
}

// Checks the log at `path`; `run_dir` (may be "") holds the run's result.json. Fails only when
// the file cannot be read.
Result<LogCheck> CheckLog(const std::string& path, const std::string& run_dir) {
  LogCheck c;
  c.path = path;
  Result<broker::AuditVerifyReport> verified = broker::VerifyAuditLog(path);
  if (!verified.ok()) return std::move(verified.error()).Context("verify " + path);
  c.chain = std::move(*verified);
  Result<broker::AuditSchemaReport> schema = broker::ValidateAuditLogFile(path);
  if (!schema.ok()) return std::move(schema.error()).Context("check the schema of " + path);
  c.schema = std::move(*schema);
  if (!run_dir.empty()) {
    // What the run recorded when it ended (absent while it runs, or if it was killed).
    if (auto result = run::ReadRunResult(run_dir); result.ok()) {
      c.recorded_entries = result->event_log_entries;
      c.recorded_head = result->event_log_head;
    } else {
      // A `cagent agent` session's record, or an MCP session's summary (cagent mcp serve):
      // records of their own that record the same two fields when the session ends.
      json record = run_dir.ends_with(".session.json") ? ReadRecord(run_dir) : json();
      if (!record.is_object()) record = ReadRecord(run_dir + "/session.json");
      if (record.is_object() && record.contains("event_log_entries") &&
          record["event_log_entries"].is_number_unsigned()) {
        c.recorded_entries = record["event_log_entries"].get<std::uint64_t>();
        c.recorded_head = Str(record, "event_log_head");
      }
    }
  }
  const broker::AuditVerifyReport& r = c.chain;
  if (!r.ok) {
    c.chain_problem = r.message;
  } else if (c.recorded_entries &&
             (*c.recorded_entries != r.entries || c.recorded_head != r.head)) {
    c.chain_problem = "result.json records " + std::to_string(*c.recorded_entries) +
                      " entries with head " + c.recorded_head + ", the log has " +
                      std::to_string(r.entries) + " with head " + r.head;
  }
  return c;
}

json SchemaProblemsJson(const broker::AuditSchemaReport& report) {
  json out = json::array();
  for (const broker::AuditSchemaProblem& p : report.problems) {
    out.push_back({{"line", p.line}, {"message", p.message}});
  }
  return out;
}

// `cagent log RUN`: the run's events, one line each (a line that does not conform to the schema
// is marked), then whether the chain holds and matches result.json.
int ShowRunLog(const LogOptions& o) {
  auto dir = ResolveLogDirectory(o.run);
  if (!dir) {
    spdlog::error("{}", dir.error().Message());
    return ToInt(ExitCode::kUsage);
  }
  const std::string path = LogFileOf(*dir);
  std::ifstream in(path);
  if (!in) {
    spdlog::error("cannot read {}: the run has no event log", path);
    return ToInt(ExitCode::kUsage);
  }
  Result<LogCheck> checked = CheckLog(path, *dir);
  if (!checked.ok()) {
    spdlog::error("cannot check {}: {}", path, checked.error().Message());
    return ToInt(ExitCode::kUsage);
  }
  const LogCheck& c = *checked;
  const broker::AuditVerifyReport& r = c.chain;
  std::map<std::uint64_t, std::size_t> bad_lines;  // line -> problems on it
  for (const broker::AuditSchemaProblem& p : c.schema.problems) ++bad_lines[p.line];

  json entries = json::array();
  std::map<std::string, json> calls;
  std::string line;
  std::ostringstream text;
  std::uint64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    json e = ParseJsonWithin(line, broker::kMaxAuditEntryDepth);
    if (o.json) {
      entries.push_back(e.is_discarded() ? json(line) : e);
      continue;
    }
    if (!e.is_object()) {
      text << "   ? (not a JSON object) " << OneLine(line, 120) << "\n";
      continue;
    }
    std::string time = Str(e, "time");
    if (const auto t = time.find('T'); t != std::string::npos) time = time.substr(t + 1, 12);
    char head[96];
    std::snprintf(head, sizeof head, "%4s %-12s %-6s %-12s ", Str(e, "seq").c_str(), time.c_str(),
                  OneLine(Str(e, "actor"), 6).c_str(), OneLine(Str(e, "event"), 12).c_str());
    text << head << OneLine(DescribeAuditEntry(e, calls), 4096);
    if (const auto bad = bad_lines.find(line_no); bad != bad_lines.end()) {
      text << "  [does not conform to the schema: " << bad->second << " problems]";
    }
    text << "\n";
  }

  if (o.json) {
    json out = {
        {"run", *dir},
        {"file", path},
        {"ok", c.chain_problem.empty()},
        {"entries", r.entries},
        {"head", r.ok ? json(r.head) : json(nullptr)},
        {"recorded_entries", c.recorded_entries ? json(*c.recorded_entries) : json(nullptr)},
        {"recorded_head", c.recorded_entries ? json(c.recorded_head) : json(nullptr)},
        {"problem", c.chain_problem.empty() ? json(nullptr) : json(c.chain_problem)},
        {"schema_problems", SchemaProblemsJson(c.schema)},
        {"events", std::move(entries)}};
    std::cout << JsonText(out, 2) << std::endl;
  } else {
    std::cout << text.str();
    if (c.chain_problem.empty()) {
      std::cout << "chain ok: " << r.entries << " entries, head " << r.head
                << (c.recorded_entries
                        ? (IsAgentSession(*dir)    ? ", as recorded in the session's record"
                           : IsMcpSessionDir(*dir) ? ", as recorded in session.json"
                                                   : ", as recorded in result.json")
                    : IsAgentSession(*dir)
                        ? " (an agent session whose end is not recorded: lines cut from the end "
                          "would not show)"
                    : IsMcpSessionDir(*dir)
                        ? " (an MCP session whose summary is not written yet, or wrap's, which "
                          "keeps none: lines cut from the end would not show)"
                        : " (the run has no result.json yet)")
                << "\n";
    }
  }
  if (!c.schema.ok()) {
    spdlog::warn(
        "{} lines of {} do not conform to the audit log schema (docs/audit-log.md); `cagent log "
        "check {}` says what is wrong on each",
        bad_lines.size(), path, TerminalSafe(o.run));
  }
  if (!c.chain_problem.empty()) {
    spdlog::error("{} does not verify ({}): the log was damaged or altered; do not trust it", path,
                  TerminalSafe(c.chain_problem));
    return ToInt(ExitCode::kFailed);
  }
  return ToInt(ExitCode::kOk);
}

// `cagent log check TARGET`: the chain, result.json's record of it, and the schema of every line.
int CheckCommand(const LogOptions& o) {
  std::string path = o.file;
  std::string run_dir;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    run_dir = path;
    path = path + (path.ends_with('/') ? "" : "/") + "events.jsonl";
  } else if (stat(path.c_str(), &st) != 0) {
    // Not a path: a run id, a prefix of one, or "last".
    auto dir = ResolveLogDirectory(o.file);
    if (!dir) {
      spdlog::error("{} is neither a log file, a run directory, nor a run: {}",
                    TerminalSafe(o.file), dir.error().Message());
      return ToInt(ExitCode::kUsage);
    }
    run_dir = *dir;
    path = LogFileOf(*dir);
  }
  Result<LogCheck> checked = CheckLog(path, run_dir);
  if (!checked.ok()) {
    spdlog::error("cannot check the audit log: {}; check the path and that you may read it",
                  checked.error().Message());
    return ToInt(ExitCode::kUsage);
  }
  const LogCheck& c = *checked;
  const bool ok = c.chain_problem.empty() && c.schema.ok();
  if (o.json) {
    json j = {{"ok", ok},
              {"file", path},
              {"entries", c.schema.entries},
              {"run", c.chain.run_id},
              {"head", c.chain.ok ? json(c.chain.head) : json(nullptr)},
              {"chain_ok", c.chain_problem.empty()},
              {"chain_problem", c.chain_problem.empty() ? json(nullptr) : json(c.chain_problem)},
              {"first_bad_line", c.chain.ok ? json(nullptr) : json(c.chain.first_bad_line)},
              {"schema_ok", c.schema.ok()},
              {"schema_problems", SchemaProblemsJson(c.schema)}};
    std::cout << JsonText(j, 2) << std::endl;
  } else {
    // file:line: what, in the form editors and CI annotations understand.
    const std::string file = TerminalSafe(path);
    if (!c.chain.ok) {
      std::cout << file << ":" << c.chain.first_bad_line
                << ": chain: " << TerminalSafe(c.chain.message) << "\n";
    } else if (!c.chain_problem.empty()) {
      std::cout << file << ": chain: " << TerminalSafe(c.chain_problem) << "\n";
    }
    for (const broker::AuditSchemaProblem& p : c.schema.problems) {
      std::cout << file << ":" << p.line << ": schema: " << TerminalSafe(p.message) << "\n";
    }
    if (ok) {
      std::cout << "ok: " << c.chain.entries << " entries, run "
                << (c.chain.run_id.empty() ? "-" : TerminalSafe(c.chain.run_id)) << ", head "
                << c.chain.head << "; every entry conforms to the schema\n";
    }
  }
  if (!ok) {
    spdlog::error("{} does not check: {}{}", TerminalSafe(path),
                  c.chain_problem.empty() ? "" : "the chain is broken (damaged or altered); ",
                  c.schema.ok() ? ""
                                : std::to_string(c.schema.problems.size()) +
                                      " schema problems (docs/audit-log.md lists every event "
                                      "and field)");
    return ToInt(ExitCode::kFailed);
  }
  return ToInt(ExitCode::kOk);
}

int SchemaCommand(const LogOptions& o) {
  if (o.json) {
    std::cout << JsonText(broker::AuditSchemaJson(), 2) << std::endl;
  } else {
    std::cout << broker::AuditSchemaMarkdown();
  }
  return ToInt(ExitCode::kOk);
}

}  // namespace

CLI::App* AddLogCommand(CLI::App& app, LogOptions& o) {
  CLI::App* log_cmd = app.add_subcommand(
      "log",
      "Show or check the hash-chained event logs that cagent writes for each run (one JSON "
      "object per line; each line carries the SHA-256 of the line before it). Reads files only.");
  log_cmd->require_subcommand(0, 1);
  log_cmd->add_option("run", o.run,
                      "Show this run's event log (a run id, a unique prefix of one, or 'last'; an "
                      "MCP session id of cagent mcp, a cagent agent session's id, or a "
                      "directory holding events.jsonl): "
                      "one line per entry with its sequence number, time, actor (cagent, broker, "
                      "agent), event and what it says; tool requests show the arguments the model "
                      "gave. The hash chain is checked first and compared with the entry count "
                      "and head digest in the run's result.json.");
  log_cmd->add_flag("--json", o.json,
                    "With RUN: one JSON object {run, file, ok, entries, head, recorded_entries, "
                    "recorded_head, problem, events} with the entries as written.");
  log_cmd->footer(
      "EXIT STATUS\n"
      "  0 the log verifies (and matches the run's result.json), 1 it does not, 2 usage error or "
      "unreadable file.\n\n"
      "EXAMPLES\n"
      "  cagent log last\n"
      "  cagent log verify RUN_DIR/events.jsonl\n"
      "  cagent log check last\n"
      "  cagent log schema\n");

  o.verify_cmd = log_cmd->add_subcommand(
      "verify",
      "Verify an audit log: every line is a JSON object, seq counts up from 0 without gaps, "
      "every line belongs to the same run, and each line's prev field is the SHA-256 of the "
      "line before it (64 zeros for the first). Prints 'ok: N entries, run RUN, head DIGEST' "
      "and exits 0 when the chain holds; otherwise prints the first bad line (1-based) and what "
      "is wrong there, and exits 1. An edited line shows at the line after it (whose prev no "
      "longer matches); a deleted, inserted or reordered line shows where the seq goes wrong; a "
      "file cut off mid-line is reported as a truncated final line. Removing or editing the "
      "last lines leaves a shorter chain that still verifies: compare N and the head digest "
      "with the ones in the run record. The chain shows accidental damage and tampering by "
      "anyone who cannot rewrite the whole file; someone who can rewrite it can also rebuild "
      "the chain, so keep the run record (or the head digest) somewhere they cannot write.");
  o.verify_cmd
      ->add_option("file", o.file,
                   "The log file (a run's events.jsonl or a session's .audit.jsonl), a run "
                   "directory that holds events.jsonl, or a run or cagent agent session (id, "
                   "unique prefix, or 'last').")
      ->required();
  o.verify_cmd->add_flag("--json", o.json,
                         "Print one JSON object {ok, file, entries, run, head, first_bad_line, "
                         "message} on stdout instead of text.");
  o.verify_cmd->footer(
      "EXIT STATUS\n"
      "  0 the chain verifies; 1 it does not (the first bad line and why are printed); 2 usage "
      "error or unreadable file.\n\n"
      "EXAMPLES\n"
      "  cagent log verify ~/.local/state/cagent/runs/RUN/events.jsonl\n"
      "  cagent log verify --json RUN_DIR | jq .first_bad_line\n");

  o.check_cmd = log_cmd->add_subcommand(
      "check",
      "Check an audit log completely: the hash chain as `verify` does (and, for a run, the entry "
      "count and head digest in its result.json), and every line against the audit log schema "
      "(docs/audit-log.md, `cagent log schema`): a known event, an actor allowed to record it, "
      "the envelope fields that event sets and no others, every required detail field with the "
      "right type and no undeclared one. Prints one 'FILE:LINE: what' per problem, or 'ok: N "
      "entries ...'.");
  o.check_cmd
      ->add_option("target", o.file,
                   "A log file, a run directory holding events.jsonl, or a run or cagent agent "
                   "session (id, unique prefix, or 'last').")
      ->required();
  o.check_cmd->add_flag("--json", o.json,
                        "Print one JSON object {ok, file, entries, run, head, chain_ok, "
                        "chain_problem, first_bad_line, schema_ok, schema_problems: [{line, "
                        "message}]} instead of text.");
  o.check_cmd->footer(
      "EXIT STATUS\n"
      "  0 the chain verifies and every line conforms; 1 it does not; 2 usage error or "
      "unreadable file.\n\n"
      "EXAMPLES\n"
      "  cagent log check last\n"
      "  cagent log check --json RUN_DIR | jq '.schema_problems[]'\n");

  o.schema_cmd = log_cmd->add_subcommand(
      "schema",
      "Print the audit log schema: the envelope, the actors, and every event with its detail "
      "fields (name, type, required, meaning), as Markdown (the text docs/audit-log.md embeds) "
      "or, with --json, as JSON for tools.");
  o.schema_cmd->add_flag("--json", o.json, "Print the schema as one JSON object.");
  o.schema_cmd->footer(
      "EXIT STATUS\n"
      "  0 printed; 2 usage error.\n\n"
      "EXAMPLES\n"
      "  cagent log schema --json | jq '.events[].event'\n");
  return log_cmd;
}

int RunLogCommand(const LogOptions& o) {
  if (o.check_cmd != nullptr && o.check_cmd->parsed()) return CheckCommand(o);
  if (o.schema_cmd != nullptr && o.schema_cmd->parsed()) return SchemaCommand(o);
  if (o.verify_cmd == nullptr || !o.verify_cmd->parsed()) {
    if (!o.run.empty()) return ShowRunLog(o);
    spdlog::error(
        "cagent log needs a run (cagent log RUN) or a file to verify (cagent log verify FILE)");
    return ToInt(ExitCode::kUsage);
  }
  std::string path = o.file;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    const std::string inside = path + (path.ends_with('/') ? "" : "/") + "events.jsonl";
    if (stat(inside.c_str(), &st) != 0) {
      spdlog::error("{} is a directory without an events.jsonl; give the log file itself", path);
      return ToInt(ExitCode::kUsage);
    }
    path = inside;
  } else if (stat(path.c_str(), &st) != 0 && path.find('/') == std::string::npos) {
    // Not a file: a run or `cagent agent` session id, a unique prefix of one, or "last".
    if (auto dir = ResolveLogDirectory(o.file)) path = LogFileOf(*dir);
  }
  Result<broker::AuditVerifyReport> verified = broker::VerifyAuditLog(path);
  if (!verified.ok()) {
    spdlog::error("cannot verify the audit log: {}; check the path and that you may read it",
                  verified.error().Message());
    return ToInt(ExitCode::kUsage);
  }
  const broker::AuditVerifyReport& r = *verified;
  if (o.json) {
    nlohmann::json j = {
        {"ok", r.ok},
        {"file", path},
        {"entries", r.entries},
        {"run", r.run_id},
        {"head", r.ok ? nlohmann::json(r.head) : nlohmann::json(nullptr)},
        {"first_bad_line", r.ok ? nlohmann::json(nullptr) : nlohmann::json(r.first_bad_line)},
        {"message", r.message}};
    std::cout << JsonText(j, 2) << std::endl;
  } else if (r.ok) {
    std::cout << "ok: " << r.entries << " entries, run " << (r.run_id.empty() ? "-" : r.run_id)
              << ", head " << r.head << "\n";
  } else {
    // file:line: what, in the form editors and CI annotations understand.
    std::cout << TerminalSafe(path) << ":" << r.first_bad_line << ": " << TerminalSafe(r.message)
              << "\n";
    spdlog::error(
        "{} does not verify: the log was damaged or altered; do not trust entries from "
        "line {} on (from the line before, when a prev does not match)",
        path, r.first_bad_line);
  }
  return r.ok ? ToInt(ExitCode::kOk) : ToInt(ExitCode::kFailed);
}

}  // namespace cagent::launcher::cli
