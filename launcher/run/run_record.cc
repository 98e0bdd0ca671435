#include "launcher/run/run_record.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <limits>
#include <sstream>
#include <string>
#include <utility>

#include "common/json_text.h"
#include "common/money.h"
#include "common/small_file.h"
#include "common/terminal_text.h"
#include "launcher/run/run_state.h"

namespace cagent::launcher::run {

using nlohmann::json;

std::string_view VerifyStatusName(VerifyEntry::Status status) {
  switch (status) {
    case VerifyEntry::Status::kPassed:
      return "passed";
    case VerifyEntry::Status::kFailed:
      return "failed";
    case VerifyEntry::Status::kTimedOut:
      return "timed-out";
    case VerifyEntry::Status::kInfrastructure:
      return "infrastructure-error";
    case VerifyEntry::Status::kNotRun:
      return "not-run";
  }
  return "unknown";
}

std::optional<VerifyEntry::Status> ParseVerifyStatus(std::string_view name) {
  for (const auto s :
       {VerifyEntry::Status::kPassed, VerifyEntry::Status::kFailed, VerifyEntry::Status::kTimedOut,
        VerifyEntry::Status::kInfrastructure, VerifyEntry::Status::kNotRun}) {
    if (VerifyStatusName(s) == name) return s;
  }
  return std::nullopt;
}

// ---- Writing ----

namespace {

json MoneyJson(std::uint64_t micros, const std::string& currency) {
  return json{{"micros", micros}, {"currency", currency}, {"text", FormatMoney(micros, currency)}};
}

json UsageJson(const broker::BudgetUsage& u) {
  json by_kind = json::object();
  for (const auto& [k, v] : u.tool_calls_by_kind) by_kind[k] = v;
  return json{{"model_turns", u.model_turns},
              {"input_tokens", u.input_tokens},
              {"output_tokens", u.output_tokens},
              {"cache_read_tokens", u.cache_read_tokens},
              {"cache_write_tokens", u.cache_write_tokens},
              {"reasoning_tokens", u.reasoning_tokens},
              {"cost", u.currency.empty() ? json(nullptr) : MoneyJson(u.cost_micros, u.currency)},
              {"tool_calls", u.tool_calls},
              {"tool_calls_by_kind", by_kind},
              {"output_bytes", u.output_bytes},
              {"elapsed_ms", u.elapsed.count()}};
}

json BudgetsJson(const broker::Budgets& b) {
  auto opt = [](const std::optional<std::uint64_t>& v) { return v ? json(*v) : json(nullptr); };
  return json{{"model_turns", opt(b.model_turns)},
              {"model_tokens", opt(b.model_tokens)},
              {"tool_calls", opt(b.tool_calls)},
              {"output_bytes", opt(b.output_bytes)},
              {"wall_time_ms", b.wall_time ? json(b.wall_time->count()) : json(nullptr)},
              {"model_cost", b.model_cost ? MoneyJson(b.model_cost->micros, b.model_cost->currency)
                                          : json(nullptr)}};
}

// What `outputs` kept out of the patch (issue 32).
json LeftOutJson(const LeftOut& l) {
  json roots = json::array();
  for (const auto& r : l.roots) roots.push_back({{"path", r.path}, {"files", r.files}});
  return json{{"files", l.files},
              {"paths", roots},
              {"source_files", l.sources},
              {"source_files_total", l.sources_total}};
}

json EntriesJson(const std::vector<VerifyEntry>& list) {
  json out = json::array();
  for (const auto& v : list) {
    out.push_back({{"command", v.command},
                   {"status", VerifyStatusName(v.status)},
                   {"exit_code", v.exit_code},
                   {"duration_ms", v.duration.count()},
                   {"log", v.log_path},
                   {"detail", v.detail},
                   {"tree", v.tree}});
  }
  return out;
}

}  // namespace

std::string RunRecord::status() const {
  return unknown_status ? *unknown_status : std::string(RunStateName(state));
}

bool RunRecord::verification_failed() const {
  for (const auto& v : verification) {
    if (v.status == VerifyEntry::Status::kFailed || v.status == VerifyEntry::Status::kTimedOut) {
      return true;
    }
  }
  return false;
}

bool RunRecord::verified() const {
  if (recorded_verified) return *recorded_verified;
  return !unknown_status && state == RunState::kCompleted && !verification.empty();
}

std::uint64_t RunRecord::patch_size() const {
  return patch_bytes ? *patch_bytes : patch.patch.size();
}

std::string RunRecord::verified_tree() const {
  std::string tree;
  for (const auto& v : verification) {
    if (!v.tree.empty()) tree = v.tree;
  }
  return tree;
}

std::string RunRecord::event_log() const { return run_dir + "/events.jsonl"; }

std::vector<CredentialSummary> SummarizeCredentials(
    const policy::Policy& policy, const std::vector<std::string>& loaded,
    const std::vector<egress::ExchangeRecord>& exchanges) {
  std::vector<CredentialSummary> out;
  for (const policy::CredentialRule& rule : policy.credentials) {
    if (std::find(loaded.begin(), loaded.end(), rule.name) == loaded.end()) continue;
    CredentialSummary c;
    c.name = rule.name;
    c.source = rule.source == policy::CredentialSource::kEnv ? "env" : "file";
    for (const policy::HostPattern& h : rule.hosts) c.hosts.push_back(h.Text());
    for (const egress::ExchangeRecord& r : exchanges) {
      const bool used =
          std::find(r.credentials.begin(), r.credentials.end(), rule.name) != r.credentials.end();
      if (r.misdirected == rule.name) {
        ++c.misdirected;
      } else if (r.allowed && used) {
        ++c.requests;
      } else if (!r.allowed && r.misdirected.empty()) {
        const bool bound =
            std::any_of(rule.hosts.begin(), rule.hosts.end(), [&](const policy::HostPattern& h) {
              return h.MatchesHost(r.request.dest.host) && h.MatchesPort(r.request.dest.port);
            });
        if (used || bound) ++c.refused;
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

json RunRecord::ToJson() const {
  json loaded = json::array();
  for (const CredentialSummary& c : credentials) {
    loaded.push_back({{"name", c.name},
                      {"source", c.source},
                      {"hosts", c.hosts},
                      {"requests", c.requests},
                      {"refused", c.refused},
                      {"misdirected", c.misdirected}});
  }
  json config_rewrites = json::array();
  for (const GitConfigRewrite& r : git_config_rewrites) {
    config_rewrites.push_back(
        {{"path", r.path}, {"dropped_keys", r.dropped}, {"reason", r.reason}});
  }
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
  const std::string tree = verified_tree();
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
  const ExitCode exit_code =
      unknown_status ? ExitCode::kRunFailed : ExitCodeFor(state, verification_failed());
  return json{
      {"run_id", run_id},
      {"sequence", sequence},
      {"status", status()},
      {"reason", reason},
      {"exit_code", ToInt(exit_code)},
      {"verified", verified()},
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
        {"bytes", patch_size()},
        {"file", run_dir + "/patch.diff"},
        {"diff_check_clean", patch.check_clean},
        {"diff_check", patch.check_output},
        {"tree", patch.tree}}},
      {"changed_files", files},
      {"left_out", LeftOutJson(patch.left_out)},
      {"outputs", outputs},
      {"violations", broken},
      {"setup", {{"workspace", EntriesJson(setup)}, {"verify_tree", EntriesJson(verify_setup)}}},
      {"verification", EntriesJson(verification)},
      {"verified_tree", tree},
      {"verify_tree", tree.empty() ? std::string() : run_dir + "/verify-tree"},
      {"usage", UsageJson(used)},
      {"budgets", BudgetsJson(budgets)},
      {"denials", denials},
      {"approvals_asked", approvals_asked},
      {"egress", egress},
      {"credentials", {{"loaded", loaded}, {"skipped", credentials_skipped}}},
      {"needs_approval", pending},
      {"sandbox",
       {{"layers", layers},
        {"downgrades", downgrades},
        {"git_guard", git_guard},
        {"host_findings", host_findings},
        {"planted_repositories", planted_repositories},
        {"cleared_files", cleared_files},
        {"git_config_rewrites", config_rewrites}}},
      {"event_log", event_log()},
      {"event_log_entries", event_log_entries.value_or(0)},
      {"event_log_head", event_log_head},
      {"event_log_lost", event_log_lost},
      {"agent_log", run_dir + "/agent.log"},
      {"workspace", run_dir + "/workspace"},
      {"created_at", created_at},
      {"finished_at", finished_at},
  };
}

// ---- Reading ----

namespace {

// Every accessor below takes any JSON value: a member of a non-object is absent (json::find on a
// non-object is end(), never a throw), and nothing is read without its type checked first.

const json& Member(const json& j, const char* key) {
  static const json kAbsent;
  if (!j.is_object()) return kAbsent;
  const auto it = j.find(key);
  return it != j.end() ? *it : kAbsent;
}

const json& Object(const json& j, const char* key) {
  static const json kEmpty = json::object();
  const json& m = Member(j, key);
  return m.is_object() ? m : kEmpty;
}

const json& Array(const json& j, const char* key) {
  static const json kEmpty = json::array();
  const json& m = Member(j, key);
  return m.is_array() ? m : kEmpty;
}

std::string Str(const json& j, const char* key) {
  const json& m = Member(j, key);
  return m.is_string() ? m.get<std::string>() : std::string();
}

bool Bool(const json& j, const char* key, bool otherwise) {
  const json& m = Member(j, key);
  return m.is_boolean() ? m.get<bool>() : otherwise;
}

// A count: a non-negative integer. Parsed, nlohmann keeps those unsigned (a negative one signed;
// a fraction or a number beyond 2^64 is a float, no count); made in memory (ToJson's durations,
// a literal) a non-negative one may be signed.
std::optional<std::uint64_t> CountOf(const json& m) {
  if (m.is_number_unsigned()) return m.get<std::uint64_t>();
  if (m.is_number_integer()) {
    const auto v = m.get<std::int64_t>();
    if (v >= 0) return static_cast<std::uint64_t>(v);
  }
  return std::nullopt;
}

std::optional<std::uint64_t> Count(const json& j, const char* key) {
  return CountOf(Member(j, key));
}

std::uint64_t CountOr0(const json& j, const char* key) { return Count(j, key).value_or(0); }

// Milliseconds: a count that fits std::chrono::milliseconds.
std::optional<std::chrono::milliseconds> Millis(const json& j, const char* key) {
  const auto n = Count(j, key);
  if (!n || *n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return std::nullopt;
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(*n));
}

// An exit code: an integer within int (-1: none).
int ExitCodeMember(const json& j, const char* key) {
  const json& m = Member(j, key);
  if (m.is_number_unsigned()) {
    const auto v = m.get<std::uint64_t>();
    return v <= static_cast<std::uint64_t>(INT_MAX) ? static_cast<int>(v) : -1;
  }
  if (m.is_number_integer()) {
    const auto v = m.get<std::int64_t>();
    return v >= INT_MIN && v <= INT_MAX ? static_cast<int>(v) : -1;
  }
  return -1;
}

// The strings of an array member (other elements are left out).
std::vector<std::string> Strings(const json& j, const char* key) {
  std::vector<std::string> out;
  for (const auto& e : Array(j, key)) {
    if (e.is_string()) out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<VerifyEntry> EntriesFrom(const json& list) {
  std::vector<VerifyEntry> out;
  if (!list.is_array()) return out;
  for (const auto& e : list) {
    VerifyEntry v;
    v.command = Str(e, "command");
    v.status = ParseVerifyStatus(Str(e, "status")).value_or(VerifyEntry::Status::kNotRun);
    v.exit_code = ExitCodeMember(e, "exit_code");
    v.duration = Millis(e, "duration_ms").value_or(std::chrono::milliseconds(0));
    v.log_path = Str(e, "log");
    v.detail = Str(e, "detail");
    v.tree = Str(e, "tree");
    out.push_back(std::move(v));
  }
  return out;
}

CapturedPatch PatchFrom(const json& j) {
  CapturedPatch p;
  const json& patch = Object(j, "patch");
  p.sha256 = Str(patch, "sha256");
  p.tree = Str(patch, "tree");
  p.check_clean = Bool(patch, "diff_check_clean", true);
  p.check_output = Str(patch, "diff_check");
  for (const auto& f : Array(j, "changed_files")) {
    ChangedFile c;
    c.path = Str(f, "path");
    const std::string status = Str(f, "status");
    c.status = status.size() == 1 ? status[0] : '?';
    c.old_mode = Str(f, "old_mode");
    c.new_mode = Str(f, "new_mode");
    c.binary = Bool(f, "binary", false);
    c.submodule = Bool(f, "submodule", false);
    p.files.push_back(std::move(c));
  }
  const json& left = Object(j, "left_out");
  p.left_out.files = CountOr0(left, "files");
  for (const auto& r : Array(left, "paths")) {
    p.left_out.roots.push_back({.path = Str(r, "path"), .files = CountOr0(r, "files")});
  }
  p.left_out.sources = Strings(left, "source_files");
  p.left_out.sources_total = CountOr0(left, "source_files_total");
  return p;
}

// {"micros", "currency"} under `key`; nullopt when absent, null or not of that shape.
std::optional<Money> MoneyFrom(const json& parent, const char* key) {
  const json& m = Object(parent, key);
  const auto micros = Count(m, "micros");
  const std::string currency = Str(m, "currency");
  if (!micros || !IsCurrencyCode(currency)) return std::nullopt;
  return Money{*micros, currency};
}

broker::BudgetUsage UsageFrom(const json& u) {
  broker::BudgetUsage used;
  used.model_turns = CountOr0(u, "model_turns");
  used.input_tokens = CountOr0(u, "input_tokens");
  used.output_tokens = CountOr0(u, "output_tokens");
  used.cache_read_tokens = CountOr0(u, "cache_read_tokens");
  used.cache_write_tokens = CountOr0(u, "cache_write_tokens");
  used.reasoning_tokens = CountOr0(u, "reasoning_tokens");
  if (auto cost = MoneyFrom(u, "cost")) {
    used.cost_micros = cost->micros;
    used.currency = cost->currency;
  }
  used.tool_calls = CountOr0(u, "tool_calls");
  for (const auto& [kind, n] : Object(u, "tool_calls_by_kind").items()) {
    if (auto count = CountOf(n)) used.tool_calls_by_kind[kind] = *count;
  }
  used.output_bytes = CountOr0(u, "output_bytes");
  used.elapsed = Millis(u, "elapsed_ms").value_or(std::chrono::milliseconds(0));
  return used;
}

broker::Budgets BudgetsFrom(const json& b) {
  broker::Budgets budgets;
  budgets.model_turns = Count(b, "model_turns");
  budgets.model_tokens = Count(b, "model_tokens");
  budgets.tool_calls = Count(b, "tool_calls");
  budgets.output_bytes = Count(b, "output_bytes");
  budgets.wall_time = Millis(b, "wall_time_ms");
  budgets.model_cost = MoneyFrom(b, "model_cost");
  return budgets;
}

}  // namespace

Result<RunRecord> RunRecord::FromJson(const json& j) {
  if (!j.is_object()) return PlainError("result.json", "is not a JSON object (not a run record)");
  RunRecord r;
  r.run_id = Str(j, "run_id");
  r.sequence = CountOr0(j, "sequence");
  const json& status = Member(j, "status");
  const std::optional<RunState> state =
      status.is_string() ? ParseRunState(status.get<std::string>()) : std::nullopt;
  if (state) {
    r.state = *state;
  } else {
    r.state = RunState::kFailed;
    r.unknown_status = Str(j, "status");
  }
  r.reason = Str(j, "reason");
  r.run_dir = Str(j, "run_dir");
  r.profile = Str(j, "profile");
  r.profile_file = Str(j, "profile_file");
  r.profile_sha256 = Str(j, "profile_sha256");
  r.outputs = Strings(j, "outputs");
  r.profile_from_repository = Bool(j, "profile_from_repository", false);
  r.policy_digest = Str(j, "policy_digest");
  r.repo = Str(j, "repo");
  r.base_commit = Str(j, "base_commit");
  r.carried_dirty = Bool(j, "carried_dirty", false);
  r.carried_paths = Strings(j, "carried_paths");
  r.task_file = Str(j, "task");
  r.model = Str(j, "model");
  r.agent_summary = Str(j, "agent_summary");
  r.patch = PatchFrom(j);
  r.patch_bytes = Count(Object(j, "patch"), "bytes");
  if (const json& v = Member(j, "verified"); v.is_boolean()) r.recorded_verified = v.get<bool>();
  for (const auto& v : Array(j, "violations")) {
    r.violations.push_back(
        {.rule = Str(v, "rule"), .path = Str(v, "path"), .message = Str(v, "message")});
  }
  r.verification = EntriesFrom(Array(j, "verification"));
  const json& setup = Object(j, "setup");
  r.setup = EntriesFrom(Array(setup, "workspace"));
  r.verify_setup = EntriesFrom(Array(setup, "verify_tree"));
  r.used = UsageFrom(Object(j, "usage"));
  r.budgets = BudgetsFrom(Object(j, "budgets"));
  const json& sandbox = Object(j, "sandbox");
  r.layers = Strings(sandbox, "layers");
  r.downgrades = Strings(sandbox, "downgrades");
  r.git_guard = Str(sandbox, "git_guard");
  r.host_findings = Strings(sandbox, "host_findings");
  r.planted_repositories = Strings(sandbox, "planted_repositories");
  r.cleared_files = Strings(sandbox, "cleared_files");
  for (const auto& w : Array(sandbox, "git_config_rewrites")) {
    r.git_config_rewrites.push_back({.path = Str(w, "path"),
                                     .dropped = Strings(w, "dropped_keys"),
                                     .reason = Str(w, "reason")});
  }
  r.denials = CountOr0(j, "denials");
  r.approvals_asked = CountOr0(j, "approvals_asked");
  if (const json& egress = Member(j, "egress"); egress.is_object()) r.egress = egress;
  const json& creds = Object(j, "credentials");
  for (const auto& c : Array(creds, "loaded")) {
    r.credentials.push_back({.name = Str(c, "name"),
                             .source = Str(c, "source"),
                             .hosts = Strings(c, "hosts"),
                             .requests = CountOr0(c, "requests"),
                             .refused = CountOr0(c, "refused"),
                             .misdirected = CountOr0(c, "misdirected")});
  }
  r.credentials_skipped = Strings(creds, "skipped");
  if (const json& pending = Member(j, "needs_approval"); pending.is_object()) {
    r.needs_approval = PendingApproval{.tool = Str(pending, "tool"),
                                       .action = Str(pending, "action"),
                                       .resolved_paths = Strings(pending, "resolved_paths"),
                                       .digest = Str(pending, "digest"),
                                       .rule = Str(pending, "rule"),
                                       .location = Str(pending, "location")};
  }
  r.created_at = Str(j, "created_at");
  r.finished_at = Str(j, "finished_at");
  r.event_log_entries = Count(j, "event_log_entries");
  r.event_log_head = Str(j, "event_log_head");
  r.event_log_lost = CountOr0(j, "event_log_lost");
  return r;
}

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

Result<json> ReadRunResultJson(const std::string& run_dir) {
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

Result<RunRecord> ReadRunResult(const std::string& run_dir) {
  auto j = ReadRunResultJson(run_dir);
  if (!j) return j.error();
  return RunRecord::FromJson(*j);
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

json RunRow(const std::string& id, const RunRecord* record) {
  json row = {{"run_id", id}, {"kind", "run"}};
  if (record == nullptr) {
    row["status"] = "unknown";
    row["reason"] = "no result.json (running, or interrupted)";
    return row;
  }
  row["status"] = record->status();
  row["profile"] = record->profile;
  row["repo"] = record->repo;
  row["base_commit"] = record->base_commit;
  row["created_at"] = record->created_at;
  row["reason"] = record->reason;
  row["files"] = record->patch.files.size();
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

std::string RunShowText(const RunRecord& r) {
  // result.json quotes the agent (reason, paths, details): every string is printed escaped.
  auto t = [](std::string_view s) { return TerminalSafe(s); };
  std::ostringstream o;
  o << "run " << t(r.run_id) << ": " << t(r.status());
  if (!r.reason.empty()) o << " — " << t(r.reason);
  o << "\n  profile      " << t(r.profile);
  if (!r.profile_file.empty()) {
    o << " (" << t(r.profile_file) << ", sha256 " << t(r.profile_sha256.substr(0, 16)) << ")";
  }
  // A record read back that does not say how big its patch is shows "?".
  const std::string bytes =
      r.patch_bytes || !r.patch.patch.empty() ? std::to_string(r.patch_size()) : std::string("?");
  o << "\n  base         " << t(r.base_commit) << "\n  repo         " << t(r.repo)
    << "\n  patch        " << bytes << " bytes, sha256 " << t(r.patch.sha256) << "\n";
  for (const auto& f : r.patch.files) {
    o << "               " << t(std::string(1, f.status)) << " " << t(f.path) << "\n";
  }
  // issue 32: what the profile's outputs kept out of the patch.
  const LeftOut& left = r.patch.left_out;
  if (!left.empty()) {
    o << "  left out     " << left.files << " untracked files under outputs:";
    for (const auto& root : left.roots) o << " " << t(root.path) << "/ (" << root.files << ")";
    o << "\n";
    for (const auto& f : left.sources) {
      o << "  warning      left out a source-looking file: " << t(f) << "\n";
    }
  }
  for (const auto& v : r.verification) {
    o << "  verify       " << VerifyStatusName(v.status) << ": " << t(v.command) << " ("
      << t(v.detail) << ")\n";
  }
  if (const std::string tree = r.verified_tree(); !tree.empty()) {
    o << "  verified on  tree " << t(tree) << " (a fresh checkout of base + patch)\n";
  }
  o << "  events       " << (r.run_dir.empty() ? std::string() : t(r.event_log())) << "\n";
  // What cagent found and undid on the host after the agent's sandbox (planted repositories,
  // cleared setuid bits).
  for (const auto& f : r.host_findings) o << "  found        " << t(f) << "\n";
  return o.str();
}

ExitCode RunShowExitCode(const RunRecord& r) {
  return r.unknown_status ? ExitCode::kRunFailed : ExitCodeFor(r.state, r.verification_failed());
}

}  // namespace cagent::launcher::run
