#include "launcher/batch/report.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <tuple>
#include <vector>

#include "common/money.h"
#include "common/terminal_text.h"
#include "launcher/batch/results.h"

namespace cagent::launcher::batch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A directory name that can be a task id (tasks.h): the rest of DIR (summary.jsonl, .previous/,
// a scheduler's _slurm-*.out files) is not a task.
bool LooksLikeTaskId(const std::string& name) {
  return !name.empty() && name.size() <= 64 &&
         std::isalnum(static_cast<unsigned char>(name[0])) != 0;
}

json Row(const std::string& id, const TaskResult& r) {
  const BatchFields& f = r.batch.fields;
  const broker::BudgetUsage used = r.run ? r.run->used : broker::BudgetUsage{};
  return json{{"index", r.batch.index},
              {"id", id},
              {"line", r.batch.line},
              {"status", r.Status()},
              {"verified", r.Verified()},
              {"turns", used.model_turns},
              {"input_tokens", used.input_tokens},
              {"output_tokens", used.output_tokens},
              {"tokens", used.input_tokens + used.output_tokens},
              {"cache_read_tokens", used.cache_read_tokens},
              // At the prices of the model's models.toml entry; null when it had none.
              {"cost", used.currency.empty() ? json(nullptr)
                                             : json(FormatMoney(used.cost_micros, used.currency))},
              {"cost_micros", used.cost_micros},
              {"currency", used.currency},
              {"tool_calls", used.tool_calls},
              {"wall_time_ms", f.wall_time_ms},
              {"exit_status", f.exit_status ? json(*f.exit_status) : json(nullptr)},
              {"reason", r.Reason()},
              {"rerun_reason", f.rerun_reason.empty() ? json(nullptr) : json(f.rerun_reason)},
              {"run_id", r.run ? r.run->run_id : std::string()},
              {"run_dir", f.run_dir},
              {"host", f.host},
              {"finished_at", f.finished_at}};
}

std::string OneLine(const std::string& text, std::size_t max) {
  const std::size_t nl = text.find_first_of("\r\n");
  std::string first = TerminalSafe(text.substr(0, nl));
  const bool more = nl != std::string::npos && nl + 1 < text.size();
  if (first.size() > max) {
    std::size_t cut = max - 3;
    while (cut > 0 && (static_cast<unsigned char>(first[cut]) & 0xC0) == 0x80) --cut;
    return first.substr(0, cut) + "...";
  }
  return more ? first + "..." : first;
}

std::string Wall(std::uint64_t ms) {
  const std::uint64_t s = ms / 1000;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%llu:%02llu:%02llu", static_cast<unsigned long long>(s / 3600),
                static_cast<unsigned long long>((s / 60) % 60),
                static_cast<unsigned long long>(s % 60));
  return buf;
}

std::string Pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string CsvField(const std::string& raw) {
  std::string s = raw;
  if (!s.empty() &&
      (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r')) {
    s = "'" + s;
  }
  const bool quote = s.find_first_of(",\"\r\n'") != std::string::npos;
  if (!quote) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string JsonScalar(const json& v) {
  if (v.is_null()) return {};
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_unsigned()) return std::to_string(v.get<std::uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

}  // namespace

Result<json> BuildReport(const std::string& results_dir) {
  std::error_code ec;
  if (!fs::is_directory(results_dir, ec)) {
    return PlainError(results_dir, "is not a directory (give the --results DIR of a batch run)")
        .WithCode(Error::Code::kInvalidInput);
  }
  std::vector<json> rows;
  for (const auto& e : fs::directory_iterator(results_dir, ec)) {
    std::error_code type_ec;
    // Only real directories: a symlink in DIR is not a task, and nothing below follows one.
    if (e.is_symlink(type_ec) || !e.is_directory(type_ec)) continue;
    const std::string id = e.path().filename().string();
    if (!LooksLikeTaskId(id)) continue;
    auto r = ReadResult(e.path().string() + "/result.json");
    if (r) {
      json row = Row(id, *r);
      // The directory's name is the id; a result naming another task is reported as damaged.
      if (r->batch.task_id != id) {
        row["status"] = "unknown";
        row["reason"] = "result.json names another task";
      }
      rows.push_back(std::move(row));
    } else {
      json row = Row(id, TaskResult{});
      row["index"] = nullptr;
      row["status"] = "unknown";
      row["reason"] =
          "no usable result.json (still running, or its batch was stopped): " + r.error().Message();
      rows.push_back(std::move(row));
    }
  }
  if (rows.empty()) {
    return PlainError(results_dir, "holds no task results (DIR/<task-id>/result.json)")
        .WithCode(Error::Code::kInvalidInput);
  }
  std::sort(rows.begin(), rows.end(), [](const json& a, const json& b) {
    const auto ai = a["index"].is_number() ? a["index"].get<std::uint64_t>() : UINT64_MAX;
    const auto bi = b["index"].is_number() ? b["index"].get<std::uint64_t>() : UINT64_MAX;
    return std::tie(ai, a["id"].get_ref<const std::string&>()) <
           std::tie(bi, b["id"].get_ref<const std::string&>());
  });
  std::map<std::string, std::uint64_t> counts;
  std::map<std::string, std::uint64_t> spent;  // currency -> micros
  std::uint64_t verified = 0, turns = 0, input = 0, output = 0, wall = 0;
  json list = json::array();
  for (auto& row : rows) {
    ++counts[row["status"].get<std::string>()];
    if (row["verified"].get<bool>()) ++verified;
    turns += row["turns"].get<std::uint64_t>();
    input += row["input_tokens"].get<std::uint64_t>();
    output += row["output_tokens"].get<std::uint64_t>();
    wall += row["wall_time_ms"].get<std::uint64_t>();
    if (const std::string& currency = row["currency"].get_ref<const std::string&>();
        !currency.empty()) {
      spent[currency] += row["cost_micros"].get<std::uint64_t>();
    }
    list.push_back(std::move(row));
  }
  json cost = json::object();
  for (const auto& [currency, micros] : spent) {
    cost[currency] = {{"micros", micros}, {"text", FormatMoney(micros, currency)}};
  }
  const double rate =
      std::round(static_cast<double>(verified) / static_cast<double>(list.size()) * 10000.0) /
      10000.0;
  return json{{"results_dir", results_dir},
              {"tasks", list.size()},
              {"counts", counts},
              {"verified", verified},
              {"verified_rate", rate},
              {"turns", turns},
              {"tokens", {{"input", input}, {"output", output}, {"total", input + output}}},
              {"wall_time_ms", wall},
              {"cost", std::move(cost)},
              {"rows", list}};
}

std::string ReportText(const json& report) {
  std::ostringstream o;
  const std::uint64_t tasks = report["tasks"].get<std::uint64_t>();
  o << "batch " << TerminalSafe(report["results_dir"].get<std::string>()) << ": " << tasks
    << " task(s)";
  const char* sep = " — ";
  for (const auto& [status, n] : report["counts"].items()) {
    o << sep << TerminalSafe(status) << " " << n.get<std::uint64_t>();
    sep = ", ";
  }
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%.1f%%", report["verified_rate"].get<double>() * 100.0);
  o << "\nverified " << report["verified"].get<std::uint64_t>() << "/" << tasks << " (" << rate
    << ")\ntokens   " << report["tokens"]["total"].get<std::uint64_t>() << " ("
    << report["tokens"]["input"].get<std::uint64_t>() << " in, "
    << report["tokens"]["output"].get<std::uint64_t>() << " out), "
    << report["turns"].get<std::uint64_t>() << " model turns\n";
  std::string spent;
  for (const auto& [currency, c] : report["cost"].items()) {
    spent += (spent.empty() ? "" : ", ") + c["text"].get<std::string>();
  }
  if (!spent.empty()) o << "cost     " << TerminalSafe(spent) << " (at the models.toml prices)\n";
  o << "wall     " << Wall(report["wall_time_ms"].get<std::uint64_t>())
    << " (summed over the tasks)\n\n";
  std::size_t id_width = 2;
  for (const auto& row : report["rows"]) {
    id_width = std::max(id_width, TerminalSafe(row["id"].get<std::string>()).size());
  }
  o << Pad("ID", id_width) << "  " << Pad("STATUS", 14) << "  " << Pad("VERIFIED", 8) << "  "
    << Pad("TURNS", 5) << "  " << Pad("TOKENS", 8) << "  " << Pad("WALL", 8) << "  REASON\n";
  for (const auto& row : report["rows"]) {
    o << Pad(TerminalSafe(row["id"].get<std::string>()), id_width) << "  "
      << Pad(TerminalSafe(row["status"].get<std::string>()), 14) << "  "
      << Pad(row["verified"].get<bool>() ? "yes" : "no", 8) << "  "
      << Pad(std::to_string(row["turns"].get<std::uint64_t>()), 5) << "  "
      << Pad(std::to_string(row["tokens"].get<std::uint64_t>()), 8) << "  "
      << Pad(Wall(row["wall_time_ms"].get<std::uint64_t>()), 8) << "  "
      << OneLine(row["reason"].get<std::string>(), 100);
    if (row["rerun_reason"].is_string()) {
      o << " [rerun: " << OneLine(row["rerun_reason"].get<std::string>(), 100) << "]";
    }
    o << "\n";
  }
  return o.str();
}

std::string ReportCsv(const json& report) {
  static const char* const kColumns[] = {
      "index",  "id",           "line",          "status",     "verified",     "turns",
      "tokens", "input_tokens", "output_tokens", "tool_calls", "wall_time_ms", "exit_status",
      "run_id", "reason",       "rerun_reason",  "cost"};
  std::string out;
  for (const char* c : kColumns) {
    if (!out.empty()) out += ",";
    out += c;
  }
  out += "\r\n";
  for (const auto& row : report["rows"]) {
    std::string line;
    bool first = true;
    for (const char* c : kColumns) {
      if (!first) line += ",";
      first = false;
      // Every string on one line and escaped: a result's strings are hostile, and a CSV is
      // looked at (less, a spreadsheet) as often as it is parsed.
      line += CsvField(OneLine(JsonScalar(row[c]), 1000));
    }
    out += line + "\r\n";
  }
  return out;
}

bool AllSucceeded(const json& report) {
  for (const auto& row : report["rows"]) {
    if (row["status"] != "completed" || row["verified"] != true) return false;
  }
  return true;
}

}  // namespace cagent::launcher::batch
