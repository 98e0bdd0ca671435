#include "launcher/batch/slurm.h"

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/text.h"

namespace cagent::launcher::batch {
namespace {

Error Invalid(const std::string& what, const std::string& detail) {
  return PlainError(what, detail).WithCode(Error::Code::kInvalidInput);
}

bool HasControl(const std::string& text) {
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

// A partition or job name: what Slurm's own names use, nothing a shell or sbatch's line parser
// would read specially.
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool IsPlainName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<bool> CheckPath(const std::string& flag, const std::string& path) {
  if (path.empty() || path.front() != '/') {
    return Invalid(flag, "'" + path + "' is not an absolute path");
  }
  if (HasControl(path)) {
    return Invalid(flag,
                   "the path holds a newline or another control character, which the batch "
                   "script cannot carry; use a path without one");
  }
  return true;
}

// DIR inside an #SBATCH line: sbatch reads the double-quoted value literally except for its
// filename pattern, where "%" starts a replacement ("%%" is a literal %) and a backslash anywhere
// turns the replacements off (the per-task file names would then collide).
Result<std::string> OutputPattern(const std::string& dir) {
  std::string out;
  for (const char c : dir) {
    if (c == '"' || c == '\\') {
      return Invalid("--results", std::string("the path holds '") + c +
                                      "', which an #SBATCH line cannot carry; use a directory "
                                      "without quotes or backslashes");
    }
    if (c == '%') out += '%';
    out += c;
  }
  if (out.back() != '/') out += '/';
  return out + kSlurmOutputPattern;
}

}  // namespace

bool IsSlurmTimeLimit(const std::string& text) {
  std::string_view rest = text;
  if (const std::size_t dash = rest.find('-'); dash != std::string_view::npos) {
    const std::string_view days = rest.substr(0, dash);
    if (days.empty() || days.size() > 6 || !std::all_of(days.begin(), days.end(), IsDigit)) {
      return false;
    }
    rest.remove_prefix(dash + 1);
  }
  std::size_t groups = 0;
  while (true) {
    const std::size_t colon = rest.find(':');
    const std::string_view group = rest.substr(0, colon);
    if (group.empty() || group.size() > 6 || !std::all_of(group.begin(), group.end(), IsDigit)) {
      return false;
    }
    if (++groups > 3) return false;
    if (colon == std::string_view::npos) return true;
    rest.remove_prefix(colon + 1);
  }
}

Result<std::string> SlurmScript(const std::vector<BatchTask>& tasks, const SlurmOptions& options) {
  if (tasks.empty()) {
    return Invalid("tasks", "the task file holds no tasks; a Slurm array needs at least one");
  }
  if (auto r = CheckPath("--cagent", options.cagent); !r) return r.error();
  if (auto r = CheckPath("tasks file", options.tasks_file); !r) return r.error();
  if (auto r = CheckPath("--results", options.results_dir); !r) return r.error();
  if (!options.task_root.empty()) {
    if (auto r = CheckPath("--task-root", options.task_root); !r) return r.error();
  }
  // (flag, value, what it names, whether it may be left out)
  const std::array<std::tuple<const char*, const std::string*, const char*, bool>, 4> names = {{
      {"--partition", &options.partition, "a partition name", true},
      {"--job-name", &options.job_name, "a job name", false},
      {"--account", &options.account, "an account name", true},
      {"--qos", &options.qos, "a QOS name", true},
  }};
  for (const auto& [flag, value, what, optional] : names) {
    if ((optional && value->empty()) || IsPlainName(*value)) continue;
    return Invalid(flag, "'" + *value + "' is not " + what +
                             " (letters, digits, '.', '_' and '-', at most 64)");
  }
  if (!options.time_limit.empty() && !IsSlurmTimeLimit(options.time_limit)) {
    return Invalid("--time", "'" + options.time_limit +
                                 "' is not a time limit (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
                                 "D-HH:MM:SS)");
  }
  auto output = OutputPattern(options.results_dir);
  if (!output) return output.error();

  std::string array = "0-" + std::to_string(tasks.size() - 1);
  if (options.array_limit > 0) array += "%" + std::to_string(options.array_limit);

  std::string s;
  s += "#!/bin/sh\n";
  s += "# Written by `cagent batch slurm`: one Slurm array task per task of the file; array task\n";
  s += "# i runs task i (0-based, blank lines not counted) with `cagent batch run --index i`.\n";
  s += "# Results: DIR/<task-id>/result.json; `cagent batch report DIR` summarises them.\n";
  s += "#SBATCH --job-name=" + options.job_name + "\n";
  s += "#SBATCH --array=" + array + "\n";
  s += "#SBATCH --ntasks=1\n";
  s += "#SBATCH --output=\"" + *output + "\"\n";
  if (!options.partition.empty()) s += "#SBATCH --partition=" + options.partition + "\n";
  if (!options.account.empty()) s += "#SBATCH --account=" + options.account + "\n";
  if (!options.qos.empty()) s += "#SBATCH --qos=" + options.qos + "\n";
  if (!options.time_limit.empty()) s += "#SBATCH --time=" + options.time_limit + "\n";
  s += "set -eu\n";
  s += ": \"${SLURM_ARRAY_TASK_ID:?is not set: submit this script with sbatch}\"\n";
  s += "# exec: cagent replaces the shell, so Slurm's SIGTERM (scancel, the time limit) reaches "
       "it\n";
  s += "# and it cancels the task's run, which ends 'cancelled' with its result.json written.\n";
  s += "# --resume: a requeued array task keeps a finished, verified result and reruns the rest.\n";
  s += "exec " + ShellQuote(options.cagent) + " batch run " + ShellQuote(options.tasks_file) +
       " --results " + ShellQuote(options.results_dir) +
       (options.task_root.empty() ? std::string()
                                  : " --task-root " + ShellQuote(options.task_root)) +
       (options.trust_task_paths ? " --trust-task-paths" : "") +
       " --index \"$SLURM_ARRAY_TASK_ID\" --jobs 1 --resume\n";
  return s;
}

}  // namespace cagent::launcher::batch
