#include "launcher/cli/log_command.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "launcher/broker/audit_log.h"

namespace cagent::launcher {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitBroken = 1;
constexpr int kExitUsage = 2;

}  // namespace

CLI::App* AddLogCommand(CLI::App& app, LogOptions& o) {
  CLI::App* log_cmd = app.add_subcommand(
      "log",
      "Check the hash-chained audit logs that cagent writes for each run (one JSON object per "
      "line; each line carries the SHA-256 of the line before it). Reads files only.");
  log_cmd->require_subcommand(1);
  log_cmd->footer(
      "EXIT STATUS\n"
      "  0 the log verifies, 1 it does not, 2 usage error or unreadable file.\n");

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
    spdlog::error("cagent log needs a subcommand: verify");
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
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  } else if (r.ok) {
    std::cout << "ok: " << r.entries << " entries, run " << (r.run_id.empty() ? "-" : r.run_id)
              << ", head " << r.head << "\n";
  } else {
    // file:line: what, in the form editors and CI annotations understand.
    std::cout << path << ":" << r.first_bad_line << ": " << r.message << "\n";
    spdlog::error(
        "{} does not verify: the log was damaged or altered; do not trust entries from "
        "line {} on (from the line before, when a prev does not match)",
        path, r.first_bad_line);
  }
  return r.ok ? kExitOk : kExitBroken;
}

}  // namespace cagent::launcher
