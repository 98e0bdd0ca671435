#include "launcher/run/session_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/json_text.h"
#include "common/small_file.h"
#include "launcher/session/state_dir.h"

namespace cagent::launcher::run {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kRecordSuffix = ".session.json";
constexpr std::string_view kAuditSuffix = ".audit.jsonl";

// A record is small: a larger file is not one.
constexpr std::size_t kMaxRecordBytes = 1U << 20U;
constexpr std::size_t kMaxRecordDepth = 32;  // its own is 3; refused before the recursive parser

}  // namespace

std::string SessionsDirectory(const std::string& state_dir) { return state_dir + "/sessions"; }

std::string SessionRecordPath(const std::string& sessions_dir, const std::string& id) {
  return sessions_dir + "/" + id + std::string(kRecordSuffix);
}

Status WriteSessionRecord(const std::string& path, const json& record) {
  return session::WriteFileAtomic(path, JsonText(record, 2) + "\n");
}

std::string SessionStatus(std::string_view broker_status) {
  if (broker_status == "finished") return "completed";
  return std::string(broker_status);
}

std::string SessionEntry::Status() const {
  if (record.is_object()) {
    const auto it = record.find("status");
    if (it != record.end() && it->is_string() && !it->get<std::string>().empty()) {
      return it->get<std::string>();
    }
  }
  return "unfinished";
}

std::vector<SessionEntry> ListSessions(const std::string& sessions_dir) {
  std::map<std::string, SessionEntry> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(sessions_dir, ec)) {
    std::error_code type_ec;
    if (e.is_symlink(type_ec) || !e.is_regular_file(type_ec)) continue;
    const std::string name = e.path().filename().string();
    for (const std::string_view suffix : {kRecordSuffix, kAuditSuffix}) {
      if (name.size() <= suffix.size() || !name.ends_with(suffix)) continue;
      const std::string id = name.substr(0, name.size() - suffix.size());
      SessionEntry& s = found[id];
      s.id = id;
      if (suffix == kRecordSuffix) s.record_path = sessions_dir + "/" + name;
    }
  }
  std::vector<SessionEntry> out;
  out.reserve(found.size());
  for (auto& [id, s] : found) {
    s.audit_log = sessions_dir + "/" + id + std::string(kAuditSuffix);
    s.agent_log = sessions_dir + "/" + id + ".agent.log";
    if (!s.record_path.empty()) {
      if (auto text = ReadSmallFile(s.record_path, kMaxRecordBytes)) {
        json j = ParseJsonWithin(*text, kMaxRecordDepth);
        if (j.is_object()) s.record = std::move(j);
      }
    }
    if (s.record.is_object()) {
      const auto seq = s.record.find("sequence");
      if (seq != s.record.end() && seq->is_number_unsigned() && seq->get<std::uint64_t>() > 0) {
        s.sequence = seq->get<std::uint64_t>();
      }
      const auto log = s.record.find("audit_log");
      if (log != s.record.end() && log->is_string() && !log->get<std::string>().empty()) {
        s.audit_log = log->get<std::string>();
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace cagent::launcher::run
