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

#include "common/json_text.h"
#include "common/terminal_text.h"
#include "launcher/broker/audit_log.h"
#include "launcher/cli/run_command.h"
#include "launcher/run/run.h"

namespace cagent::launcher {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitBroken = 1;
constexpr int kExitUsage = 2;

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
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string Compact(const json& j, std::size_t max = 160) {
  return OneLine(JsonText(j), max);
}

// What one event says, in words. `calls` remembers the tool calls of each model turn by call id,
// so a tool request can show the arguments the model gave (the entry itself carries only their
// digest).
std::string Describe(const json& e, std::map<std::string, json>& calls) {
  const std::string event = Str(e, "event");
  const json detail = e.contains("detail") ? e["detail"] : json::object();
  std::string text;
  if (event == "state") {
    text = Str(detail, "state");
    if (detail.contains("profile")) {
      text += " (profile " + Str(detail, "profile") + ", model " + Str(detail, "model") + ")";
    }
    if (detail.contains("reason")) text += ": " + Str(detail, "reason");
  } else if (event == "workspace") {
    text = "base " + Str(detail, "base_commit").substr(0, 12) + " of " + Str(detail, "repo");
    if (detail.value("carried_dirty", false)) {
      text += ", uncommitted changes carried in (" +
              std::to_string(detail.value("carried_paths", json::array()).size()) + " paths)";
    }
  } else if (event == "model_call") {
    text = "turn " + Str(detail, "turn");
    if (detail.value("redactions", 0) > 0) text += ", " + Str(detail, "redactions") + " redactions";
  } else if (event == "model_result" && detail.contains("body")) {
    const json& body = detail["body"];
    text = Str(body, "text");
    std::string names;
    if (body.is_object() && body.contains("tool_calls") && body["tool_calls"].is_array()) {
      for (const json& call : body["tool_calls"]) {
        calls[Str(call, "id")] = call;
        names += (names.empty() ? "" : ", ") + Str(call, "name");
      }
    }
    if (!names.empty()) text += (text.empty() ? "" : " ") + std::string("-> ") + names;
  } else if (event == "tool_request") {
    text = Str(e, "tool");
    const auto it = calls.find(Str(detail, "call_id"));
    if (it != calls.end() && it->second.contains("arguments")) {
      text += " " + Compact(it->second["arguments"], 200);
    }
  } else if (event == "decision") {
    text = Str(e, "verdict") + " " + Str(e, "tool") + " by " + Str(e, "rule");
    if (detail.contains("location")) text += " (" + Str(detail, "location") + ")";
    if (detail.contains("reason")) text += ": " + Str(detail, "reason");
  } else if (event == "tool_result") {
    text = Str(e, "tool") + (detail.value("ok", false) ? " ok" : " error " + Str(detail, "error_code"));
    text += ", " + Str(detail, "bytes") + " bytes";
    if (detail.contains("changed_paths") && !detail["changed_paths"].empty()) {
      text += ", changed " + Compact(detail["changed_paths"], 120);
    }
  } else if (event == "finish") {
    text = Str(detail, "outcome") + ": " + Str(detail, "summary");
  } else if (event == "shutdown") {
    text = Str(detail, "status");
    if (!Str(detail, "reason").empty()) text += ": " + Str(detail, "reason");
  } else if (event == "patch") {
    text = Str(detail, "files") + " files, " + Str(detail, "bytes") + " bytes, " +
           Str(detail, "violations") + " rule violations";
  } else if (event == "verify_tree") {
    text = "fresh checkout of base " + Str(detail, "base_commit").substr(0, 12) + " + patch: tree " +
           Str(detail, "tree").substr(0, 12) + " at " + Str(detail, "path");
  } else if (event == "loop_state") {
    text = "loop detection sees part of the workspace: " + Str(detail, "entries") + " entries (cap " +
           Str(detail, "max_entries") + ")";
    if (detail.value("truncated", false)) text += ", walk cut at the cap";
    if (!Str(detail, "not_walked").empty() && Str(detail, "not_walked") != "0") {
      text += ", " + Str(detail, "not_walked") + " directories not walked";
    }
    if (!Str(detail, "error").empty()) text += ", " + Str(detail, "error");
  } else if (event == "verify") {
    text = Str(detail, "status") + ": " + Str(detail, "command") + " (exit " +
           Str(detail, "exit_code") + ", " + Str(detail, "duration_ms") + " ms)";
  } else {
    if (!Str(e, "tool").empty()) text = Str(e, "tool") + " ";
    if (!Str(e, "verdict").empty()) text += Str(e, "verdict") + " ";
    text += Compact(detail);
  }
  return OneLine(text, 300);
}

// `cagent log RUN`: the run's events, one line each, then whether the chain holds and matches the
// count and head digest recorded in result.json (the chain alone cannot show lines cut from the
// end).
int ShowRunLog(const LogOptions& o) {
  auto dir = ResolveRunDirectory(o.run);
  if (!dir) {
    spdlog::error("{}", dir.error().Message());
    return kExitUsage;
  }
  const std::string path = *dir + "/events.jsonl";
  std::ifstream in(path);
  if (!in) {
    spdlog::error("cannot read {}: the run has no event log", path);
    return kExitUsage;
  }
  Result<broker::AuditVerifyReport> verified = broker::VerifyAuditLog(path);
  if (!verified.ok()) {
    spdlog::error("cannot verify {}: {}", path, verified.error().Message());
    return kExitUsage;
  }
  const broker::AuditVerifyReport& r = *verified;

  // What the run recorded when it ended (absent while it runs, or if it was killed).
  std::optional<std::uint64_t> recorded_entries;
  std::string recorded_head;
  if (auto result = run::ReadRunResult(*dir); result.ok() && result->is_object()) {
    if (result->contains("event_log_entries") && (*result)["event_log_entries"].is_number()) {
      recorded_entries = (*result)["event_log_entries"].get<std::uint64_t>();
      recorded_head = Str(*result, "event_log_head");
    }
  }
  std::string problem;
  if (!r.ok) {
    problem = "line " + std::to_string(r.first_bad_line) + ": " + r.message;
  } else if (recorded_entries && (*recorded_entries != r.entries || recorded_head != r.head)) {
    problem = "result.json records " + std::to_string(*recorded_entries) + " entries with head " +
              recorded_head + ", the log has " + std::to_string(r.entries) + " with head " + r.head;
  }

  json entries = json::array();
  std::map<std::string, json> calls;
  std::string line;
  std::ostringstream text;
  while (std::getline(in, line)) {
    json e = json::parse(line, nullptr, false);
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
    text << head << OneLine(Describe(e, calls), 4096) << "\n";
  }

  if (o.json) {
    json out = {{"run", *dir},
                {"file", path},
                {"ok", problem.empty()},
                {"entries", r.entries},
                {"head", r.ok ? json(r.head) : json(nullptr)},
                {"recorded_entries", recorded_entries ? json(*recorded_entries) : json(nullptr)},
                {"recorded_head", recorded_entries ? json(recorded_head) : json(nullptr)},
                {"problem", problem.empty() ? json(nullptr) : json(problem)},
                {"events", std::move(entries)}};
    std::cout << JsonText(out, 2) << std::endl;
  } else {
    std::cout << text.str();
    if (problem.empty()) {
      std::cout << "chain ok: " << r.entries << " entries, head " << r.head
                << (recorded_entries ? ", as recorded in result.json" : " (the run has no result.json yet)")
                << "\n";
    }
  }
  if (!problem.empty()) {
    spdlog::error("{} does not verify ({}): the log was damaged or altered; do not trust it", path,
                  problem);
    return kExitBroken;
  }
  return kExitOk;
}

}  // namespace

CLI::App* AddLogCommand(CLI::App& app, LogOptions& o) {
  CLI::App* log_cmd = app.add_subcommand(
      "log",
      "Show or check the hash-chained event logs that cagent writes for each run (one JSON "
      "object per line; each line carries the SHA-256 of the line before it). Reads files only.");
  log_cmd->require_subcommand(0, 1);
  log_cmd->add_option("run", o.run,
                      "Show this run's event log (a run id, a unique prefix of one, or 'last'): "
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
      "  cagent log verify RUN_DIR/events.jsonl\n");

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
                   "The log file (a run's events.jsonl or a session's .audit.jsonl), or a run "
                   "directory that holds events.jsonl.")
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
  return log_cmd;
}

int RunLogCommand(const LogOptions& o) {
  if (o.verify_cmd == nullptr || !o.verify_cmd->parsed()) {
    if (!o.run.empty()) return ShowRunLog(o);
    spdlog::error("cagent log needs a run (cagent log RUN) or a file to verify (cagent log verify FILE)");
    return kExitUsage;
  }
  std::string path = o.file;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    const std::string inside = path + (path.ends_with('/') ? "" : "/") + "events.jsonl";
    if (stat(inside.c_str(), &st) != 0) {
      spdlog::error("{} is a directory without an events.jsonl; give the log file itself", path);
      return kExitUsage;
    }
    path = inside;
  }
  Result<broker::AuditVerifyReport> verified = broker::VerifyAuditLog(path);
  if (!verified.ok()) {
    spdlog::error("cannot verify the audit log: {}; check the path and that you may read it",
                  verified.error().Message());
    return kExitUsage;
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
    std::cout << TerminalSafe(path) << ":" << r.first_bad_line << ": " << TerminalSafe(r.message) << "\n";
    spdlog::error(
        "{} does not verify: the log was damaged or altered; do not trust entries from "
        "line {} on (from the line before, when a prev does not match)",
        path, r.first_bad_line);
  }
  return r.ok ? kExitOk : kExitBroken;
}

}  // namespace cagent::launcher
