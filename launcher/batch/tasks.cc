#include "launcher/batch/tasks.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include "common/beneath.h"
#include "common/duration.h"
#include "common/json_text.h"
#include "common/terminal_text.h"
#include "common/text.h"
#include "common/unique_fd.h"

namespace cagent::launcher::batch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Limits on the file itself: a task file is generated, and a generator gone wrong should get an
// error, not an hour of parsing or a directory of millions of runs.
constexpr std::uintmax_t kMaxFileBytes = 64U << 20U;
constexpr std::size_t kMaxLineBytes = 1U << 20U;
constexpr std::size_t kMaxTasks = 100000;
constexpr std::size_t kMaxListedProblems = 50;
constexpr std::size_t kMaxIdLength = 64;
constexpr std::size_t kMaxRefLength = 256;

// The names in a results directory that are batch's own, not a task's.
constexpr std::string_view kReservedIds[] = {"summary.jsonl"};

// Constant tables, not std::sets: this file is linked into every cagent, and a namespace-scope
// set is built at start-up of every command, `cagent exec` included.
constexpr std::string_view kTopFields[] = {"id",        "repo",    "commit", "task",
                                           "task_file", "profile", "model",  "budgets"};
constexpr std::string_view kBudgetFields[] = {"max_turns", "max_tool_calls", "max_tokens",
                                              "wall_time"};

template <std::size_t N>
bool OneOf(const std::string_view (&names)[N], std::string_view key) {
  return std::find(std::begin(names), std::end(names), key) != std::end(names);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// A task id names DIR/<id>/ on the results filesystem (perhaps shared by a cluster): one path
// component, never "." or "..", never hidden, never an option to a program it is passed to.
Refusal CheckId(const std::string& id) {
  if (id.empty()) return "\"id\" is empty";
  if (id.size() > kMaxIdLength) {
    return "\"id\" is longer than " + std::to_string(kMaxIdLength) + " characters";
  }
  if (std::isalnum(static_cast<unsigned char>(id[0])) == 0) {
    return "\"id\" must start with a letter or digit (it names a directory; no leading '.' or "
           "'-'): \"" +
           TerminalSafe(id) + "\"";
  }
  for (char c : id) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
    if (!ok) {
      return "\"id\" may hold only letters, digits, '.', '_' and '-' (it names a directory): \"" +
             TerminalSafe(id) + "\"";
    }
  }
  if (id.find("..") != std::string::npos) return "\"id\" must not contain \"..\"";
  for (std::string_view reserved : kReservedIds) {
    if (Lower(id) == reserved) {
      return "\"id\" \"" + id + "\" is the name of a file batch writes in the results directory";
    }
  }
  return {};
}

// A revision as git takes it on the command line: no option (leading '-'), no whitespace or
// control characters, bounded.
Refusal CheckCommit(const std::string& commit) {
  if (commit.empty()) return "\"commit\" is empty (leave it out for the repository's HEAD)";
  if (commit.size() > kMaxRefLength) return "\"commit\" is too long";
  if (commit[0] == '-') return "\"commit\" must not start with '-'";
  for (char c : commit) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f || c == '\\' || c == ':' || c == '?' || c == '*' || c == '[') {
      return "\"commit\" holds a character a revision cannot: \"" + TerminalSafe(commit) + "\"";
    }
  }
  return {};
}

// Whether `repo` is a git URL, and if it is one a batch may clone. Only the network transports
// and file://: git's remote-helper syntax ("ext::sh -c ...", "fd::3") runs programs or reads
// descriptors, and any other "scheme://" would be handed to a git-remote-<scheme> helper.
struct RepoKind {
  bool is_url = false;
  std::string problem;
};
RepoKind ClassifyRepo(const std::string& repo) {
  RepoKind kind;
  const std::size_t scheme_end = repo.find("://");
  if (scheme_end != std::string::npos) {
    const std::string scheme = Lower(repo.substr(0, scheme_end));
    const bool scheme_chars =
        !scheme.empty() && std::all_of(scheme.begin(), scheme.end(), [](unsigned char c) {
          return std::isalnum(c) != 0 || c == '+' || c == '.' || c == '-';
        });
    if (scheme_chars) {
      kind.is_url = true;
      if (scheme != "https" && scheme != "http" && scheme != "ssh" && scheme != "git" &&
          scheme != "file") {
        kind.problem = "\"repo\" URL scheme \"" + TerminalSafe(scheme) +
                       "\" is not one batch clones (https, http, ssh, git, file)";
      }
      return kind;
    }
  }
  const std::size_t helper = repo.find("::");
  if (helper != std::string::npos && repo.find('/') > helper) {
    kind.is_url = true;
    kind.problem = "\"repo\" uses git's remote-helper syntax (\"" +
                   TerminalSafe(repo.substr(0, helper)) +
                   "::\"), which batch refuses: give a path or an https/ssh/git/file URL";
    return kind;
  }
  // scp-like "user@host:path" (git's own rule: a ':' before any '/').
  const std::size_t at = repo.find('@');
  const std::size_t colon = repo.find(':');
  if (at != std::string::npos && colon != std::string::npos && at < colon &&
      repo.find('/') > colon && at > 0) {
    kind.is_url = true;
  }
  return kind;
}

// `p` made absolute against `base` (the task file's directory) and normalised.
std::string Resolve(const fs::path& base, const std::string& p) {
  fs::path path(p);
  if (path.is_relative()) path = base / path;
  return path.lexically_normal().string();
}

bool IsDirectory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsRegularFile(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The link-free absolute path of what `fd` refers to ("" when /proc cannot say).
std::string FdPath(int fd) {
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  std::string buf(4096, '\0');
  const ssize_t n = ::readlink(link.c_str(), buf.data(), buf.size());
  if (n <= 0 || static_cast<std::size_t>(n) >= buf.size()) return {};
  buf.resize(static_cast<std::size_t>(n));
  // A file unlinked since it was opened reads back as "PATH (deleted)": no longer a path.
  if (buf.empty() || buf[0] != '/' || buf.ends_with(" (deleted)")) return {};
  return buf;
}

// How one task file's local paths are found: the rule at the top of tasks.h.
struct PathRule {
  bool trust = false;
  fs::path base;               // the task file's directory, absolute
  UniqueFd root;               // the task root (O_PATH | O_DIRECTORY); unused when trusting
  std::string root_abs;        // the root as given, made absolute and normalised (for messages)
  std::string root_real;       // the root's link-free path
  std::string base_from_root;  // the task file's directory relative to the root ("." beneath)
};

enum class PathKind { kFile, kDirectory };

// Finds `raw`, the value of task field `field`, under `rule`: its link-free absolute path in
// *out, or what is wrong with it, naming the task and the path.
Refusal Locate(const PathRule& rule, const std::string& id, const std::string& field,
               const std::string& raw, PathKind kind, std::string* out) {
  const std::string what = kind == PathKind::kFile ? "a readable file" : "a directory";
  if (rule.trust) {
    *out = Resolve(rule.base, raw);
    const bool ok = kind == PathKind::kFile ? IsRegularFile(*out) : IsDirectory(*out);
    if (!ok) return field + " " + TerminalSafe(*out) + " is not " + what;
    return {};
  }
  const std::string shown = "task \"" + id + "\": " + field + " \"" + TerminalSafe(raw) + "\"";
  std::string outside =
      shown + " leads outside the task root " + TerminalSafe(rule.root_abs) +
      " (by \"..\", an absolute path or a symlink): a task file's paths stay beneath its own "
      "directory; keep the task's files there, name the directory that holds them with "
      "--task-root DIR, or pass --trust-task-paths if you wrote or checked this task file";
  // The path as the kernel resolves it from the root: relative ones from the task file's
  // directory (which may itself be below the root), absolute ones only when they name a place
  // under the root. The string is never trusted to stay inside: openat2 below is the check.
  fs::path rel;
  const fs::path path(raw);
  if (path.is_absolute()) {
    for (const std::string& root : {rule.root_abs, rule.root_real}) {
      const fs::path r = path.lexically_normal().lexically_relative(root);
      if (!r.empty() && *r.begin() != "..") {
        rel = r;
        break;
      }
    }
    if (rel.empty()) return outside;
  } else {
    rel = rule.base_from_root == "." ? path : fs::path(rule.base_from_root) / path;
  }
  const int flags = O_PATH | (kind == PathKind::kDirectory ? O_DIRECTORY : 0);
  UniqueFd fd(
      Openat2(rule.root.get(), rel.string(), flags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS));
  if (!fd.valid()) {
    const int err = errno;
    if (err == EXDEV) return outside;
    if (err == ENOENT) {
      return shown + " does not exist (beneath " + TerminalSafe(rule.root_abs) + ")";
    }
    if (err == ENOTDIR) return shown + " is not " + what;
    if (err == ELOOP) {
      return shown +
             " goes through a /proc magic link or too many symlinks; give the file's "
             "own path";
    }
    return shown + " cannot be opened: " + std::strerror(err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return shown + " cannot be examined: " + std::strerror(errno);
  const bool ok = kind == PathKind::kFile ? S_ISREG(st.st_mode) : S_ISDIR(st.st_mode);
  if (!ok) return shown + " is not " + what;
  *out = FdPath(fd.get());
  if (out->empty()) return shown + ": cannot tell its path from /proc/self/fd (is /proc mounted?)";
  return {};
}

// Parses one line, refusing an object that names a key twice (nlohmann keeps the last one
// silently: {"profile": "strict", "profile": "wide"} must not mean whichever a reader picks).
struct Parsed {
  json value;
  std::string problem;
};
// A task is a flat object of a few fields; anything nested deeper is no task, and is refused
// before the parser builds it (common/json_text.h, ParseJsonWithin).
constexpr std::size_t kMaxTaskDepth = 16;

Parsed ParseLine(const std::string& line) {
  if (JsonDepth(line, kMaxTaskDepth) > kMaxTaskDepth) {
    return {json(json::value_t::discarded),
            "nested deeper than " + std::to_string(kMaxTaskDepth) + " levels"};
  }
  if (line.find('\0') != std::string::npos) {
    return {json(json::value_t::discarded), "not valid JSON (a NUL byte)"};
  }
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  json::parser_callback_t cb = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == json::parse_event_t::key && !keys.empty() && parsed.is_string()) {
      if (!keys.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  Parsed out;
  out.value = json::parse(line, cb, /*allow_exceptions=*/false);
  if (out.value.is_discarded()) {
    out.problem = "not valid JSON";
  } else if (!duplicate.empty()) {
    out.problem = "field \"" + TerminalSafe(duplicate) + "\" is given twice";
  } else if (!out.value.is_object()) {
    out.problem = "a task is a JSON object, one per line";
  }
  return out;
}

std::optional<std::string> StringField(const json& obj, const char* name, std::string* problem) {
  auto it = obj.find(name);
  if (it == obj.end()) return std::nullopt;
  if (!it->is_string()) {
    *problem = std::string("\"") + name + "\" must be a string";
    return std::nullopt;
  }
  return it->get<std::string>();
}

// The task's "repo": a git URL a batch may clone, or a directory under the rule.
Refusal CheckRepo(const std::string& repo, const PathRule& rule, BatchTask& task) {
  if (repo.empty()) return "missing field \"repo\" (a path or a git URL)";
  if (repo[0] == '-') return "\"repo\" must not start with '-'";
  const RepoKind kind = ClassifyRepo(repo);
  if (!kind.problem.empty()) return kind.problem;
  task.repo_is_url = kind.is_url;
  task.paths_confined = !rule.trust;
  if (kind.is_url && Lower(repo.substr(0, 7)) == "file://" && !rule.trust) {
    // A file:// URL is a local path too: git would clone whatever it names.
    std::string local;
    if (Refusal p =
            Locate(rule, task.id, "\"repo\"", repo.substr(7), PathKind::kDirectory, &local)) {
      return p;
    }
    task.repo = "file://" + local;
    return std::nullopt;
  }
  if (kind.is_url) {
    task.repo = repo;
    return std::nullopt;
  }
  return Locate(rule, task.id, "\"repo\"", repo, PathKind::kDirectory, &task.repo);
}

// The task itself: "task" (the text) or "task_file" (a file under the rule), exactly one.
Refusal CheckTaskText(const std::optional<std::string>& text,
                      const std::optional<std::string>& file, const PathRule& rule,
                      BatchTask& task) {
  if (text && file) return "give \"task\" or \"task_file\", not both";
  if (!text && !file) return "missing the task: give \"task\" (the text) or \"task_file\"";
  if (text) {
    if (TrimSpace(*text).empty()) return "\"task\" is empty";
    task.task_text = *text;
    return std::nullopt;
  }
  if (file->empty()) return "\"task_file\" is empty";
  return Locate(rule, task.id, "\"task_file\"", *file, PathKind::kFile, &task.task_file);
}

// "profile": a built-in name, or a profile file under the rule.
Refusal CheckProfile(const std::string& profile, const PathRule& rule, BatchTask& task) {
  if (profile.empty()) return "missing field \"profile\"";
  if (profile[0] == '-') return "\"profile\" must not start with '-'";
  const bool profile_is_file = profile.find('/') != std::string::npos ||
                               (profile.size() > 7 && profile.ends_with(".cagent"));
  if (profile_is_file && !profile.starts_with("<built-in>/")) {
    return Locate(rule, task.id, "\"profile\"", profile, PathKind::kFile, &task.profile);
  }
  task.profile = profile;
  return std::nullopt;
}

// "model": a model spec; a replay file is located under the rule.
Refusal CheckModel(const std::string& model, const PathRule& rule, BatchTask& task) {
  if (model.empty()) return "\"model\" is empty (leave it out for cagent run's default)";
  if (model[0] == '-') return "\"model\" must not start with '-'";
  if (!model.starts_with("replay:")) {
    task.model = model;
    return std::nullopt;
  }
  std::string file_path;
  if (Refusal p = Locate(rule, task.id, "\"model\" replay file", model.substr(7), PathKind::kFile,
                         &file_path)) {
    return p;
  }
  task.model = "replay:" + file_path;
  return std::nullopt;
}

// "budgets": an object of known budgets, each a positive count or (wall_time) a duration.
Refusal CheckBudgets(const json& budgets, BatchTask& task) {
  if (!budgets.is_object()) return "\"budgets\" must be an object";
  for (const auto& [key, value] : budgets.items()) {
    if (!OneOf(kBudgetFields, key)) {
      return "unknown budget \"" + TerminalSafe(key) +
             "\" (budgets are max_turns, max_tool_calls, max_tokens, wall_time)";
    }
    if (key == "wall_time") {
      if (!value.is_string()) return "budget \"wall_time\" must be a string such as \"20m\"";
      const auto text_value = value.get<std::string>();
      if (!ParseDuration(text_value)) {
        return "budget \"wall_time\" is not a duration (e.g. \"90s\", \"20m\"): \"" +
               TerminalSafe(text_value) + "\"";
      }
      task.budgets.wall_time = text_value;
      continue;
    }
    if (!value.is_number_unsigned() || value.get<std::uint64_t>() == 0) {
      return "budget \"" + key + "\" must be a positive integer";
    }
    const auto n = value.get<std::uint64_t>();
    if (key == "max_turns") {
      task.budgets.max_turns = n;
    } else if (key == "max_tool_calls") {
      task.budgets.max_tool_calls = n;
    } else {
      task.budgets.max_tokens = n;
    }
  }
  return std::nullopt;
}

// One line's task, or the first thing wrong with it.
Refusal CheckTask(const json& obj, const PathRule& rule, BatchTask& task) {
  for (const auto& [key, value] : obj.items()) {
    if (!OneOf(kTopFields, key)) {
      return "unknown field \"" + TerminalSafe(key) +
             "\" (a task has id, repo, commit, task or task_file, profile, model, budgets)";
    }
  }
  std::string problem;
  const auto id = StringField(obj, "id", &problem);
  if (!problem.empty()) return problem;
  if (!id) return "missing field \"id\"";
  if (Refusal p = CheckId(*id)) return p;
  task.id = *id;

  const auto repo = StringField(obj, "repo", &problem);
  if (!problem.empty()) return problem;
  if (Refusal p = CheckRepo(repo.value_or(""), rule, task)) return p;

  const auto commit = StringField(obj, "commit", &problem);
  if (!problem.empty()) return problem;
  if (commit) {
    if (Refusal p = CheckCommit(*commit)) return p;
    task.commit = *commit;
  }

  const auto text = StringField(obj, "task", &problem);
  if (!problem.empty()) return problem;
  const auto file = StringField(obj, "task_file", &problem);
  if (!problem.empty()) return problem;
  if (Refusal p = CheckTaskText(text, file, rule, task)) return p;

  const auto profile = StringField(obj, "profile", &problem);
  if (!problem.empty()) return problem;
  if (Refusal p = CheckProfile(profile.value_or(""), rule, task)) return p;

  const auto model = StringField(obj, "model", &problem);
  if (!problem.empty()) return problem;
  if (model) {
    if (Refusal p = CheckModel(*model, rule, task)) return p;
  }

  if (auto it = obj.find("budgets"); it != obj.end()) return CheckBudgets(*it, task);
  return std::nullopt;
}

}  // namespace

Result<std::vector<BatchTask>> LoadTasks(const std::string& path, const TaskPaths& paths) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  if (ec) return ErrnoError("task file " + path, ec.value()).WithCode(Error::Code::kInvalidInput);
  struct stat st {};
  if (::stat(abs.c_str(), &st) != 0) {
    return ErrnoError("task file " + path).WithCode(Error::Code::kInvalidInput);
  }
  if (!S_ISREG(st.st_mode)) {
    return PlainError("task file " + path, "not a regular file")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (static_cast<std::uintmax_t>(st.st_size) > kMaxFileBytes) {
    return PlainError("task file " + path, "larger than 64 MiB").WithCode(Error::Code::kTooLarge);
  }
  std::ifstream in(abs, std::ios::binary);
  if (!in) return ErrnoError("task file " + path).WithCode(Error::Code::kInvalidInput);
  PathRule rule;
  rule.trust = paths.trust;
  rule.base = abs.parent_path();
  if (!paths.trust) {
    const std::string root_arg = paths.root.empty() ? rule.base.string() : paths.root;
    rule.root_abs = fs::absolute(root_arg, ec).lexically_normal().string();
    if (rule.root_abs.size() > 1 && rule.root_abs.back() == '/') rule.root_abs.pop_back();
    rule.root.Reset(::open(root_arg.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!rule.root.valid()) {
      return ErrnoError("task root " + root_arg).WithCode(Error::Code::kInvalidInput);
    }
    rule.root_real = FdPath(rule.root.get());
    const std::string base_real = fs::canonical(rule.base, ec).string();
    if (rule.root_real.empty() || ec) {
      return PlainError("task root " + root_arg, "cannot tell its path from /proc/self/fd")
          .WithCode(Error::Code::kInvalidInput);
    }
    rule.base_from_root = fs::path(base_real).lexically_relative(rule.root_real).string();
    if (rule.base_from_root.empty()) rule.base_from_root = "..";  // no relation: nothing beneath
  }

  std::vector<BatchTask> tasks;
  std::vector<std::string> problems;
  std::size_t problem_count = 0;
  auto bad = [&](std::size_t line, const std::string& what) {
    ++problem_count;
    if (problems.size() < kMaxListedProblems) {
      problems.push_back(path + ":" + std::to_string(line) + ": " + what);
    }
  };
  // Lower-cased id -> the line that used it: two ids that differ only in case would share a
  // directory on a case-insensitive results filesystem.
  std::map<std::string, std::size_t> seen;
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (TrimSpace(line).empty()) continue;
    if (line.size() > kMaxLineBytes) {
      bad(number, "line longer than 1 MiB");
      continue;
    }
    if (tasks.size() + problem_count >= kMaxTasks) {
      bad(number, "more than " + std::to_string(kMaxTasks) + " tasks in one file");
      break;
    }
    Parsed parsed = ParseLine(line);
    if (!parsed.problem.empty()) {
      bad(number, parsed.problem);
      continue;
    }
    BatchTask task;
    task.line = number;
    if (Refusal p = CheckTask(parsed.value, rule, task)) {
      bad(number, *p);
      continue;
    }
    auto [it, fresh] = seen.emplace(Lower(task.id), number);
    if (!fresh) {
      bad(number, "duplicate id \"" + task.id + "\" (first on line " + std::to_string(it->second) +
                      "; ids are compared ignoring case)");
      continue;
    }
    task.index = tasks.size();
    tasks.push_back(std::move(task));
  }
  if (problem_count > 0) {
    std::string detail;
    for (const auto& p : problems) {
      if (!detail.empty()) detail += "\n";
      detail += p;
    }
    if (problem_count > problems.size()) {
      detail += "\n... and " + std::to_string(problem_count - problems.size()) + " more";
    }
    return PlainError("invalid task file", detail).WithCode(Error::Code::kInvalidInput);
  }
  if (tasks.empty()) {
    return PlainError("invalid task file", path + ": no tasks (one JSON object a line)")
        .WithCode(Error::Code::kInvalidInput);
  }
  return tasks;
}

}  // namespace cagent::launcher::batch
