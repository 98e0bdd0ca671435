#include "launcher/run/run_record.h"

#include <cerrno>
#include <cstddef>
#include <sstream>
#include <string>

#include "common/json_text.h"
#include "common/small_file.h"
#include "common/terminal_text.h"
#include "launcher/run/run_state.h"

namespace cagent::launcher::run {

using nlohmann::json;

Result<json> ParseRunResult(std::string_view text, const std::string& origin) {
  bool too_deep = false;
  json j = ParseJsonWithin(text, kMaxRunResultDepth, &too_deep);
  if (too_deep) {
    return PlainError(origin, "is nested more than " + std::to_string(kMaxRunResultDepth) +
                                  " levels deep (not a run record)");
  }
  if (j.is_discarded()) {
    return PlainError(origin, "is not valid JSON");
  }
  if (!j.is_object()) {
    return PlainError(origin, "is not a JSON object (not a run record)");
  }
  return j;
}

Result<json> ReadRunResult(const std::string& run_dir) {
  const std::string path = run_dir + "/result.json";
  auto text = ReadSmallFile(path, kMaxRunResultBytes);
  if (!text) {
    if (text.error().err == ENOENT) {
      return PlainError(run_dir,
                        "has no result.json (the run may still be going, or it "
                        "was interrupted before it could record one)");
    }
    return text.error();
  }
  return ParseRunResult(*text, path);
}

std::string RecordString(const json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string OneLineReason(std::string_view reason) {
  const std::size_t nl = reason.find_first_of("\r\n");
  const std::string first = TerminalSafe(reason.substr(0, nl), TerminalLines::kOne);
  std::size_t cut = std::min<std::size_t>(first.size(), 80);
  while (cut > 0 && cut < first.size() && (static_cast<unsigned char>(first[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  const bool more = cut < first.size() || (nl != std::string_view::npos && nl + 1 < reason.size());
  return first.substr(0, cut) + (more ? "\u2026" : "");
}

json RunRow(const std::string& id, const json* record) {
  json row = {{"run_id", id}, {"kind", "run"}};
  if (record == nullptr || !record->is_object()) {
    row["status"] = "unknown";
    row["reason"] = "no result.json (running, or interrupted)";
    return row;
  }
  // Copied as they are (JSON output shows them so); the text listing reads each with a type check.
  for (const char* key : {"status", "profile", "repo", "base_commit", "created_at", "reason"}) {
    auto it = record->find(key);
    row[key] = it != record->end() ? *it : json();
  }
  auto files = record->find("changed_files");
  row["files"] = files != record->end() && files->is_array() ? files->size() : 0;
  return row;
}

namespace {

// `path` with `home` written as "~".
std::string ShortHome(const std::string& path, const std::string& home) {
  if (home.size() > 1 && path.starts_with(home) &&
      (path.size() == home.size() || path[home.size()] == '/')) {
    return "~" + path.substr(home.size());
  }
  return path;
}

// `j[key]` as JSON text when it is a number, else "?".
std::string NumberText(const json& j, const char* key) {
  if (!j.is_object()) return "?";
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? JsonText(*it) : std::string("?");
}

}  // namespace

std::string RunListLine(const json& row, const std::string& home) {
  std::string out =
      TerminalSafe(RecordString(row, "run_id")) + "  " + TerminalSafe(RecordString(row, "status"));
  if (row.is_object() && row.contains("profile")) {
    out += "  " + TerminalSafe(RecordString(row, "profile"));
  }
  // Which repository (issue 32: runs of several repositories with same-named profiles), with the
  // caller's home written ~.
  if (const std::string from = RecordString(row, "repo"); !from.empty()) {
    out += "  " + TerminalSafe(ShortHome(from, home));
  }
  if (row.is_object() && row.contains("files") && row["files"].is_number_unsigned()) {
    out += "  " + JsonText(row["files"]) + " files";
  }
  if (RecordString(row, "kind") == "agent") out += "  (agent session)";
  const std::string reason = OneLineReason(RecordString(row, "reason"));
  if (!reason.empty()) out += "  " + reason;
  return out + "\n";
}

std::string RunShowText(const json& j) {
  // result.json quotes the agent (reason, paths, details): every field is read with a type check
  // and printed escaped.
  auto t = [](const json& obj, const char* key) { return TerminalSafe(RecordString(obj, key)); };
  auto member = [&j](const char* key, bool array) {
    auto it = j.find(key);
    if (it != j.end() && (array ? it->is_array() : it->is_object())) return *it;
    return array ? json::array() : json::object();
  };
  std::ostringstream o;
  o << "run " << t(j, "run_id") << ": " << t(j, "status");
  if (!RecordString(j, "reason").empty()) o << " — " << t(j, "reason");
  o << "\n  profile      " << t(j, "profile");
  if (!RecordString(j, "profile_file").empty()) {
    o << " (" << t(j, "profile_file") << ", sha256 "
      << TerminalSafe(RecordString(j, "profile_sha256").substr(0, 16)) << ")";
  }
  const json patch = member("patch", false);
  o << "\n  base         " << t(j, "base_commit") << "\n  repo         " << t(j, "repo")
    << "\n  patch        " << NumberText(patch, "bytes") << " bytes, sha256 " << t(patch, "sha256")
    << "\n";
  for (const auto& f : member("changed_files", true)) {
    o << "               " << t(f, "status") << " " << t(f, "path") << "\n";
  }
  // issue 32: what the profile's outputs kept out of the patch.
  const json left = member("left_out", false);
  if (left.contains("files") && left["files"].is_number_unsigned() &&
      left["files"].get<std::size_t>() != 0) {
    o << "  left out     " << JsonText(left["files"]) << " untracked files under outputs:";
    if (left.contains("paths") && left["paths"].is_array()) {
      for (const auto& root : left["paths"]) {
        if (!root.is_object()) continue;
        o << " " << t(root, "path") << "/ (" << NumberText(root, "files") << ")";
      }
    }
    o << "\n";
    if (left.contains("source_files") && left["source_files"].is_array()) {
      for (const auto& f : left["source_files"]) {
        if (f.is_string()) {
          o << "  warning      left out a source-looking file: "
            << TerminalSafe(f.get<std::string>()) << "\n";
        }
      }
    }
  }
  for (const auto& v : member("verification", true)) {
    o << "  verify       " << t(v, "status") << ": " << t(v, "command") << " (" << t(v, "detail")
      << ")\n";
  }
  if (!RecordString(j, "verified_tree").empty()) {
    o << "  verified on  tree " << t(j, "verified_tree") << " (a fresh checkout of base + patch)\n";
  }
  o << "  events       " << t(j, "event_log") << "\n";
  // What cagent found and undid on the host after the agent's sandbox (planted repositories,
  // cleared setuid bits).
  const json sandbox = member("sandbox", false);
  if (auto it = sandbox.find("host_findings"); it != sandbox.end() && it->is_array()) {
    for (const auto& f : *it) {
      if (f.is_string()) o << "  found        " << TerminalSafe(f.get<std::string>()) << "\n";
    }
  }
  return o.str();
}

ExitCode RunShowExitCode(const json& j) {
  auto state = ParseRunState(RecordString(j, "status"));
  bool verification_failed = false;
  auto it = j.is_object() ? j.find("verification") : j.end();
  if (it != j.end() && it->is_array()) {
    for (const auto& v : *it) {
      const std::string s = RecordString(v, "status");
      verification_failed = verification_failed || s == "failed" || s == "timed-out";
    }
  }
  return state ? ExitCodeFor(*state, verification_failed) : ExitCode::kRunFailed;
}

}  // namespace cagent::launcher::run
