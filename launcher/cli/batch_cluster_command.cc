#include "launcher/cli/batch_cluster_command.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "common/exit_codes.h"
#include "common/terminal_text.h"
#include "common/text.h"
#include "launcher/batch/k8s.h"
#include "launcher/batch/slurm.h"
#include "launcher/batch/tasks.h"
#include "launcher/cli/entry.h"

namespace cagent::launcher::cli {
namespace {

namespace fs = std::filesystem;

int Fail(const char* command, const std::string& message, ExitCode code) {
  std::fprintf(stderr, "cagent batch %s: %s\n", command,
               TerminalSafe(message, TerminalLines::kMultiple).c_str());
  return ToInt(code);
}

// An absolute, lexically normal path without a trailing '/': what the nodes are given.
std::string Absolute(const std::string& path) {
  std::error_code ec;
  std::string out = fs::absolute(path, ec).lexically_normal().string();
  if (ec) out = path;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// The tasks, or the exit status after printing why not (LoadTasks lists every bad line).
bool LoadOrReport(const char* command, const std::string& path, const batch::TaskPaths& paths,
                  std::vector<batch::BatchTask>& tasks, int& status) {
  auto loaded = batch::LoadTasks(path, paths);
  if (!loaded) {
    status = Fail(command, loaded.error().Message(), ExitCodeFor(loaded.error(), ExitCode::kUsage));
    return false;
  }
  tasks = std::move(*loaded);
  return true;
}

// Runs `sbatch --parsable SCRIPT` with its stdout captured (stderr is the user's). The job id,
// or an error saying what happened.
Result<std::string> Submit(const std::string& script) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(out[0]);
    ::close(out[1]);
    return ErrnoError("fork", err);
  }
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    const char* argv[] = {"sbatch", "--parsable", script.c_str(), nullptr};
    ::execvp("sbatch", const_cast<char* const*>(argv));
    ::_exit(errno == ENOENT ? 127 : 126);
  }
  ::close(out[1]);
  std::string text;
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(out[0], buf, sizeof(buf));
    if (n > 0) {
      text.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(out[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 127) {
    return PlainError("sbatch",
                      "not found on PATH: run this on a machine that can submit Slurm "
                      "jobs (a login node), or pass --dry-run to print the script");
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return PlainError("sbatch", "refused the job (its message is above); the script is " + script);
  }
  // --parsable: "JOBID" or "JOBID;CLUSTER".
  std::string id = text.substr(0, text.find_first_of(";\n"));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
    return PlainError("sbatch", "printed no job id ('" + text + "')");
  }
  return id;
}

int RunSlurm(const BatchClusterOptions& o) {
  std::vector<batch::BatchTask> tasks;
  int status = 0;
  if (!LoadOrReport("slurm", o.tasks, {o.task_root, o.trust_task_paths}, tasks, status)) {
    return status;
  }
  batch::SlurmOptions so;
  so.tasks_file = Absolute(o.tasks);
  so.results_dir = Absolute(o.results);
  so.cagent = o.cagent.empty() ? LauncherPath() : o.cagent;
  so.partition = o.partition;
  so.job_name = o.job_name;
  so.array_limit = o.array_limit;
  so.time_limit = o.time_limit;
  so.account = o.account;
  so.qos = o.qos;
  so.task_root = o.task_root.empty() ? std::string() : Absolute(o.task_root);
  so.trust_task_paths = o.trust_task_paths;
  auto script = batch::SlurmScript(tasks, so);
  if (!script) return Fail("slurm", script.error().Message(), ExitCode::kUsage);
  if (o.dry_run) {
    std::fputs(script->c_str(), stdout);
    return std::fflush(stdout) == 0 ? ToInt(ExitCode::kOk) : ToInt(ExitCode::kFailed);
  }
  std::error_code ec;
  fs::create_directories(so.results_dir, ec);
  if (ec) {
    return Fail("slurm", "cannot create " + so.results_dir + ": " + ec.message(),
                ExitCode::kFailed);
  }
  // The script is kept beside the results, under a name no task id can take.
  const std::string path = so.results_dir + "/_slurm-batch.sh";
  FILE* f = std::fopen(path.c_str(), "we");
  if (f == nullptr) {
    return Fail("slurm", "cannot write " + path + ": " + std::strerror(errno), ExitCode::kFailed);
  }
  const bool written = std::fputs(script->c_str(), f) >= 0;
  if (std::fclose(f) != 0 || !written) {
    return Fail("slurm", "cannot write " + path, ExitCode::kFailed);
  }
  auto id = Submit(path);
  if (!id) return Fail("slurm", id.error().Message(), ExitCode::kFailed);
  // stdout: the job id alone (`job=$(cagent batch slurm ...)`); the rest is for the reader.
  // A stdout that cannot take it (closed, full) does not undo the submission; stderr names the
  // job too.
  std::printf("%s\n", id->c_str());
  (void)std::fflush(stdout);
  std::fprintf(stderr,
               "cagent batch slurm: submitted job %s: %zu array task%s, results in %s\n"
               "  watch:  squeue -j %s\n"
               "  cancel: scancel %s (one task: scancel %s_INDEX)\n"
               "  report: cagent batch report %s\n",
               id->c_str(), tasks.size(), tasks.size() == 1 ? "" : "s",
               TerminalSafe(so.results_dir, TerminalLines::kOne).c_str(), id->c_str(), id->c_str(),
               id->c_str(), TerminalSafe(ShellQuote(so.results_dir), TerminalLines::kOne).c_str());
  return ToInt(ExitCode::kOk);
}

int RunK8s(const BatchClusterOptions& o) {
  std::vector<batch::BatchTask> tasks;
  int status = 0;
  if (!LoadOrReport("k8s", o.tasks, {o.task_root, o.trust_task_paths}, tasks, status)) {
    return status;
  }
  batch::K8sOptions ko;
  ko.name = o.name;
  ko.name_space = o.name_space;
  ko.image = o.image;
  ko.cagent = o.cagent.empty() ? "cagent" : o.cagent;
  ko.results_pvc = o.results_pvc;
  ko.parallelism = o.parallelism;
  ko.run_as_user = o.run_as_user;
  ko.secrets = o.secrets;
  for (const std::string& v : o.volumes) {
    const std::size_t colon = v.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == v.size()) {
      return Fail("k8s",
                  "--volume '" + v +
                      "': write CLAIM:PATH (a PersistentVolumeClaim and "
                      "where the pod mounts it)",
                  ExitCode::kUsage);
    }
    ko.volumes.push_back({v.substr(0, colon), v.substr(colon + 1)});
  }
  auto manifest = batch::K8sManifest(tasks, o.tasks, ko);
  if (!manifest) return Fail("k8s", manifest.error().Message(), ExitCode::kUsage);
  if (o.output.empty() || o.output == "-") {
    std::fputs(manifest->c_str(), stdout);
    return std::fflush(stdout) == 0 ? ToInt(ExitCode::kOk) : ToInt(ExitCode::kFailed);
  }
  FILE* f = std::fopen(o.output.c_str(), "we");
  if (f == nullptr) {
    return Fail("k8s", "cannot write " + o.output + ": " + std::strerror(errno), ExitCode::kFailed);
  }
  const bool written = std::fputs(manifest->c_str(), f) >= 0;
  if (std::fclose(f) != 0 || !written) {
    return Fail("k8s", "cannot write " + o.output, ExitCode::kFailed);
  }
  std::fprintf(stderr,
               "cagent batch k8s: wrote %s (%zu task%s); apply it with: kubectl apply -f %s\n",
               TerminalSafe(o.output, TerminalLines::kOne).c_str(), tasks.size(),
               tasks.size() == 1 ? "" : "s",
               TerminalSafe(ShellQuote(o.output), TerminalLines::kOne).c_str());
  return ToInt(ExitCode::kOk);
}

}  // namespace

void AddTaskPathOptions(CLI::App* cmd, std::string& task_root, bool& trust_task_paths) {
  CLI::Option* root = cmd->add_option(
      "--task-root", task_root,
      "The directory the task file's local paths (repo, task_file, replay: sessions, profile "
      "files) must stay beneath; default: the task file's own directory. Each is opened beneath "
      "it by the kernel (openat2 RESOLVE_BENEATH): '..', an absolute path elsewhere or a symlink "
      "leading out is refused, naming the task and the path.");
  CLI::Option* trust = cmd->add_flag(
      "--trust-task-paths", trust_task_paths,
      "Let the task file's paths lead anywhere, symlinks followed. Only for a task file you "
      "wrote or checked: its task_file is sent to the model provider, and it may name any file "
      "you can read (docs/threat-model.md, \"Batch task files\").");
  root->excludes(trust);
}

void AddBatchClusterCommands(CLI::App* batch, BatchClusterOptions& o) {
  CLI::App* slurm = batch->add_subcommand(
      "slurm",
      "Run a task file on a Slurm cluster: writes one sbatch job array whose array task i runs "
      "task i (0-based) with `cagent batch run TASKS --results DIR --index i --jobs 1 --resume` on "
      "whatever node Slurm picks, and submits it with `sbatch --parsable`. The task file is "
      "checked first (every bad line listed, exit 2) and DIR is created; the job id goes to "
      "stdout, how to watch it (squeue -j, cagent batch report DIR) to stderr. The task file, "
      "DIR and cagent must be at the same absolute paths on every node (a shared filesystem), "
      "and the nodes must allow unprivileged user namespaces (docs/batch.md, \"Slurm\").");
  slurm->add_option("tasks", o.tasks, "The task file (JSON Lines, one task per line).")->required();
  slurm
      ->add_option("--results", o.results,
                   "DIR: each task's result goes to DIR/TASK-ID/result.json, each array task's "
                   "output to DIR/_slurm-JOBID_INDEX.out. On a filesystem every node shares.")
      ->required();
  slurm->add_option("--partition", o.partition,
                    "The Slurm partition to submit to (default: the cluster's default).");
  slurm
      ->add_option("--array-limit", o.array_limit,
                   "At most K array tasks run at once (sbatch --array=0-N%K; default: no limit).")
      ->check(CLI::PositiveNumber);
  slurm->add_option("--job-name", o.job_name,
                    "The Slurm job name (letters, digits, '.', '_', '-'; default cagent-batch).");
  slurm->add_option("--time", o.time_limit,
                    "Each array task's time limit (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, "
                    "D-HH:MM:SS; default: the partition's). At the limit Slurm's SIGTERM cancels "
                    "the task's run, recorded cancelled.");
  slurm->add_option("--account", o.account,
                    "The account to charge (letters, digits, '.', '_', '-'; default: yours).");
  slurm->add_option("--qos", o.qos,
                    "The quality of service (letters, digits, '.', '_', '-'; default: the "
                    "account's).");
  slurm->add_option("--cagent", o.cagent,
                    "cagent's absolute path on the nodes (default: this cagent's own path).");
  AddTaskPathOptions(slurm, o.task_root, o.trust_task_paths);
  slurm->add_flag("--dry-run", o.dry_run,
                  "Print the batch script and submit nothing (DIR is not created).");
  slurm->callback([&o] { o.action = "slurm"; });

  CLI::App* k8s = batch->add_subcommand(
      "k8s",
      "Write a Kubernetes manifest for a task file: a List of a ConfigMap holding the tasks and "
      "an Indexed Job whose completion index i runs task i with `cagent batch run "
      "/tasks/tasks.jsonl --results /results --index $(JOB_COMPLETION_INDEX) --jobs 1 --resume "
      "--trust-task-paths` "
      "(the paths were checked here), "
      "the results on a PersistentVolumeClaim at /results; apply it with `kubectl apply -f`. The "
      "pod runs as a non-root user in its own user namespace with no capabilities; the cluster "
      "must allow user namespaces (hostUsers: false), procMount Unmasked and seccomp and "
      "AppArmor Unconfined (docs/batch.md, \"Kubernetes\"). Repositories must be git URLs or "
      "on a --volume.");
  k8s->add_option("tasks", o.tasks, "The task file (JSON Lines, one task per line).")->required();
  k8s->add_option("--image", o.image,
                  "The container image: holds cagent, git and what the tasks' checks run.")
      ->required();
  k8s->add_option("--results-pvc", o.results_pvc,
                  "The PersistentVolumeClaim mounted read-write at /results (ReadWriteMany when "
                  "pods share nodes unevenly); read it with cagent batch report.")
      ->required();
  k8s->add_option("--volume", o.volumes,
                  "CLAIM:PATH: mount a PersistentVolumeClaim read-only at PATH, the path it has "
                  "here, so the task file's absolute paths (repositories, task files, replay "
                  "sessions, profile files) mean the same in the pod. Repeatable.");
  k8s->add_option("--secret", o.secrets,
                  "A Secret whose keys become the container's environment (envFrom): the "
                  "model's credentials, such as OPENAI_API_KEY. Repeatable.");
  k8s->add_option("--name", o.name,
                  "The Job's and ConfigMap's name (a DNS-1123 label; default cagent-batch).");
  k8s->add_option("--namespace", o.name_space,
                  "metadata.namespace of both (default: kubectl's current namespace).");
  k8s->add_option("--parallelism", o.parallelism, "Pods at once (default: every task).")
      ->check(CLI::PositiveNumber);
  k8s->add_option("--run-as-user", o.run_as_user,
                  "The uid (and gid) the pod runs as; not 0 (default 1000).");
  k8s->add_option("--cagent", o.cagent,
                  "cagent in the image: a name on its PATH or an absolute path (default cagent).");
  k8s->add_option("-o,--output", o.output, "Write the manifest to FILE (default: stdout).");
  AddTaskPathOptions(k8s, o.task_root, o.trust_task_paths);
  k8s->callback([&o] { o.action = "k8s"; });
}

int RunBatchClusterCommand(const BatchClusterOptions& o) {
  if (o.action == "slurm") return RunSlurm(o);
  if (o.action == "k8s") return RunK8s(o);
  return ToInt(ExitCode::kUsage);
}

}  // namespace cagent::launcher::cli
