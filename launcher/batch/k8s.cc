#include "launcher/batch/k8s.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace cagent::launcher::batch {
namespace {

using nlohmann::json;

constexpr std::string_view kTasksMount = "/tasks";
constexpr std::string_view kResultsMount = "/results";
constexpr std::string_view kHome = "/home/cagent";
// A ConfigMap holds at most 1 MiB (etcd's object limit); the task file is most of it.
constexpr std::size_t kConfigMapLimit = 1000 * 1000;

Error Invalid(const std::string& what, const std::string& detail) {
  return PlainError(what, detail).WithCode(Error::Code::kInvalidInput);
}

bool HasControl(std::string_view text) {
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

bool LowerOrDigit(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// RFC 1123 label (Kubernetes' DNS-1123 label): [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most `max`.
bool IsDnsLabel(std::string_view name, std::size_t max) {
  if (name.empty() || name.size() > max) return false;
  if (!LowerOrDigit(name.front()) || !LowerOrDigit(name.back())) return false;
  for (const char c : name) {
    if (!LowerOrDigit(c) && c != '-') return false;
  }
  return true;
}

// DNS-1123 subdomain: labels joined by '.', at most 253 in all (a PersistentVolumeClaim's name).
bool IsDnsSubdomain(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = name.find('.', start);
    const std::string_view label =
        name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (!IsDnsLabel(label, 63)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// An image reference (registry/name:tag@digest) from the characters the grammar uses; anything
// else (spaces, quotes, newlines, '$') is refused rather than passed to the runtime.
bool IsImageReference(std::string_view image) {
  if (image.empty() || image.size() > 512) return false;
  for (const char c : image) {
    const bool ok = (c >= 'A' && c <= 'Z') || LowerOrDigit(c) || c == '.' || c == '_' || c == '-' ||
                    c == '/' || c == ':' || c == '@';
    if (!ok) return false;
  }
  return LowerOrDigit(image.front());
}

bool Under(std::string_view path, std::string_view dir) {
  if (dir == "/") return true;
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

Result<bool> CheckVolumePath(const std::string& path) {
  if (path.empty() || path.front() != '/' || HasControl(path) || path.size() > 4096) {
    return Invalid("--volume", "'" + path + "' is not an absolute path without control characters");
  }
  if (path.back() == '/' && path != "/") {
    return Invalid("--volume", "write '" + path + "' without the trailing '/'");
  }
  // The pod's own mounts and the image's system directories: neither the path nor below it.
  for (const std::string_view reserved :
       {kTasksMount, kResultsMount, std::string_view("/proc"), std::string_view("/dev"),
        std::string_view("/sys"), std::string_view("/usr"), std::string_view("/etc")}) {
    if (path == reserved || Under(path, reserved)) {
      return Invalid("--volume", "'" + path +
                                     "' is a directory the pod needs for itself; mount "
                                     "the claim at the path it has where the task file "
                                     "was written");
    }
  }
  // Mount points of the pod's own (emptyDir) volumes: a claim may go below them, not on them.
  for (const std::string_view reserved : {std::string_view("/"), std::string_view("/tmp"), kHome}) {
    if (path == reserved) {
      return Invalid("--volume", "'" + path +
                                     "' is a directory the pod needs for itself; mount "
                                     "the claim at the path it has where the task file "
                                     "was written");
    }
  }
  return true;
}

// The local paths a task names: each must be on a mounted volume, or the pod cannot read it.
std::vector<std::pair<std::string, std::string>> LocalPaths(const BatchTask& t) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!t.repo_is_url) {
    out.emplace_back("repo", t.repo);
  } else if (t.repo.rfind("file://", 0) == 0) {
    // A file:// URL is a local path too: the pod reads it from a volume or not at all.
    out.emplace_back("repo", t.repo.substr(7));
  }
  if (!t.task_file.empty()) out.emplace_back("task_file", t.task_file);
  // LoadTasks made a profile file's path absolute; a name ("backend", "<built-in>/x") is not one.
  if (!t.profile.empty() && t.profile.front() == '/') out.emplace_back("profile", t.profile);
  if (t.model.rfind("replay:", 0) == 0) out.emplace_back("model", t.model.substr(7));
  return out;
}

json TaskJson(const BatchTask& t) {
  json j = json::object();
  j["id"] = t.id;
  j["repo"] = t.repo;
  if (!t.commit.empty()) j["commit"] = t.commit;
  if (!t.task_file.empty()) {
    j["task_file"] = t.task_file;
  } else {
    j["task"] = t.task_text;
  }
  if (!t.profile.empty()) j["profile"] = t.profile;
  if (!t.model.empty()) j["model"] = t.model;
  json budgets = json::object();
  if (t.budgets.max_turns) budgets["max_turns"] = *t.budgets.max_turns;
  if (t.budgets.max_tool_calls) budgets["max_tool_calls"] = *t.budgets.max_tool_calls;
  if (t.budgets.max_tokens) budgets["max_tokens"] = *t.budgets.max_tokens;
  if (t.budgets.wall_time) budgets["wall_time"] = *t.budgets.wall_time;
  if (!budgets.empty()) j["budgets"] = budgets;
  return j;
}

}  // namespace

std::string TasksJsonl(const std::vector<BatchTask>& tasks) {
  std::string out;
  for (const BatchTask& t : tasks) {
    // Escaped to ASCII: the ConfigMap's text is then the same bytes whatever the task file held.
    out += TaskJson(t).dump(-1, ' ', true, json::error_handler_t::replace);
    out += '\n';
  }
  return out;
}

Result<std::string> K8sManifest(const std::vector<BatchTask>& tasks, const std::string& tasks_path,
                                const K8sOptions& options) {
  if (tasks.empty()) {
    return Invalid("tasks", "the task file holds no tasks; an Indexed Job needs at least one");
  }
  // 63: the Job controller copies the name into the pods' job-name label.
  if (!IsDnsLabel(options.name, 63)) {
    return Invalid("--name", "'" + options.name +
                                 "' is not a Kubernetes name (lower-case letters, digits and '-', "
                                 "starting and ending with a letter or digit, at most 63)");
  }
  if (!options.name_space.empty() && !IsDnsLabel(options.name_space, 63)) {
    return Invalid("--namespace", "'" + options.name_space + "' is not a namespace name");
  }
  if (!IsImageReference(options.image)) {
    return Invalid("--image", "'" + options.image +
                                  "' is not an image reference (registry/name:tag or @sha256:..., "
                                  "from letters, digits and . _ - / : @)");
  }
  if (!IsDnsSubdomain(options.results_pvc)) {
    return Invalid("--results-pvc", "'" + options.results_pvc +
                                        "' is not a PersistentVolumeClaim name (lower-case "
                                        "letters, digits, '-' and '.')");
  }
  if (options.cagent.empty() || HasControl(options.cagent) ||
      (options.cagent.front() != '/' && options.cagent.find('/') != std::string::npos)) {
    return Invalid("--cagent", "'" + options.cagent +
                                   "' is neither an absolute path nor a program name on the "
                                   "image's PATH");
  }
  if (options.run_as_user <= 0) {
    return Invalid("--run-as-user", "the pod runs as a non-root uid: give one above 0");
  }
  for (const K8sVolume& v : options.volumes) {
    if (!IsDnsSubdomain(v.claim)) {
      return Invalid("--volume", "'" + v.claim + "' is not a PersistentVolumeClaim name");
    }
    if (auto r = CheckVolumePath(v.path); !r) return r.error();
  }
  for (const std::string& secret : options.secrets) {
    if (!IsDnsSubdomain(secret)) {
      return Invalid("--secret", "'" + secret +
                                     "' is not a Secret name (lower-case letters, "
                                     "digits, '-' and '.')");
    }
  }
  std::string unreachable;
  for (const BatchTask& t : tasks) {
    for (const auto& [field, path] : LocalPaths(t)) {
      bool seen = false;
      for (const K8sVolume& v : options.volumes) seen = seen || Under(path, v.path);
      if (!seen) {
        unreachable += "\n" + tasks_path + ":" + std::to_string(t.line) + ": " + field + " " +
                       path + " is on no volume the pod mounts";
      }
    }
  }
  if (!unreachable.empty()) {
    return Invalid("tasks", "the pods could not read these paths:" + unreachable +
                                "\nmount the claim holding them with --volume CLAIM:PATH (at "
                                "the same path), or use git URLs for the repositories");
  }
  const std::string tasks_text = TasksJsonl(tasks);
  if (tasks_text.size() > kConfigMapLimit) {
    return Invalid("tasks", "the task file is " + std::to_string(tasks_text.size()) +
                                " bytes; a ConfigMap holds at most about 1 MB: split it");
  }

  json meta = {
      {"name", options.name},
      {"labels",
       {{"app.kubernetes.io/name", "cagent-batch"}, {"app.kubernetes.io/instance", options.name}}}};
  if (!options.name_space.empty()) meta["namespace"] = options.name_space;

  json config_map = {{"apiVersion", "v1"},
                     {"kind", "ConfigMap"},
                     {"metadata", meta},
                     {"data", {{"tasks.jsonl", tasks_text}}}};

  json mounts = json::array({
      {{"name", "tasks"}, {"mountPath", kTasksMount}, {"readOnly", true}},
      {{"name", "results"}, {"mountPath", kResultsMount}},
      {{"name", "home"}, {"mountPath", kHome}},
      {{"name", "tmp"}, {"mountPath", "/tmp"}},
  });
  json volumes = json::array({
      {{"name", "tasks"}, {"configMap", {{"name", options.name}}}},
      {{"name", "results"}, {"persistentVolumeClaim", {{"claimName", options.results_pvc}}}},
      {{"name", "home"}, {"emptyDir", json::object()}},
      {{"name", "tmp"}, {"emptyDir", json::object()}},
  });
  for (std::size_t i = 0; i < options.volumes.size(); ++i) {
    const std::string name = "data-" + std::to_string(i);
    mounts.push_back({{"name", name}, {"mountPath", options.volumes[i].path}, {"readOnly", true}});
    volumes.push_back(
        {{"name", name},
         {"persistentVolumeClaim", {{"claimName", options.volumes[i].claim}, {"readOnly", true}}}});
  }

  // The command, with the index from the pod's own annotation: the Job controller sets it on
  // every pod of an Indexed Job, and Kubernetes expands $(JOB_COMPLETION_INDEX) in the command
  // from the container's env (no shell: nothing here is parsed by one).
  const json command = {options.cagent, "batch", "run", std::string(kTasksMount) + "/tasks.jsonl",
                        "--results", kResultsMount, "--index", "$(JOB_COMPLETION_INDEX)", "--jobs",
                        "1",
                        // A pod started again for the same index (eviction, a lost node) keeps a
                        // finished, verified result and reruns an interrupted one.
                        "--resume",
                        // The ConfigMap's file is cagent's own rewrite of a task file checked
                        // above: absolute, link-free paths, confined beneath the task root unless
                        // the operator passed --trust-task-paths here. In the pod they lie on the
                        // read-only volumes, never beneath /tasks, so the pod takes them as given.
                        "--trust-task-paths"};
  const json env = json::array({
      {{"name", "JOB_COMPLETION_INDEX"},
       {"valueFrom",
        {{"fieldRef",
          {{"fieldPath", "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}}}},
      {{"name", "HOME"}, {"value", kHome}},
  });

  // Why each field is what it is (docs/batch.md, "Kubernetes"):
  //  - hostUsers false: the pod gets its own user namespace, so its uids (root included) are not
  //    the node's; it is also what procMount Unmasked requires.
  //  - procMount Unmasked: the runtime masks paths of the container's /proc (/proc/kcore, ...)
  //    with overmounts; the kernel then refuses a fresh proc mount in any namespace below
  //    (fs/namespace.c, mount_too_revealing), and cagent's sandbox mounts its own /proc.
  //  - seccompProfile Unconfined: RuntimeDefault refuses unshare/clone with namespace flags,
  //    mount and pivot_root to a process without CAP_SYS_ADMIN in the node's namespace, which is
  //    what building the sandbox takes; cagent installs its own seccomp filter inside.
  //  - appArmorProfile Unconfined: the runtime's default AppArmor profile denies mount.
  //  - runAsNonRoot/runAsUser, allowPrivilegeEscalation false, capabilities drop ALL: cagent
  //    needs no capability and no setuid program; user namespaces give it what it needs.
  const json container_security = {
      {"allowPrivilegeEscalation", false},   {"privileged", false},
      {"capabilities", {{"drop", {"ALL"}}}}, {"procMount", "Unmasked"},
      {"readOnlyRootFilesystem", true},      {"runAsNonRoot", true},
      {"runAsUser", options.run_as_user},    {"runAsGroup", options.run_as_user},
  };
  const json pod_security = {
      {"runAsNonRoot", true},
      {"runAsUser", options.run_as_user},
      {"runAsGroup", options.run_as_user},
      {"fsGroup", options.run_as_user},
      {"seccompProfile", {{"type", "Unconfined"}}},
      {"appArmorProfile", {{"type", "Unconfined"}}},
  };
  json container = {{"name", "cagent"},       {"image", options.image},
                    {"command", command},     {"env", env},
                    {"volumeMounts", mounts}, {"securityContext", container_security}};
  if (!options.secrets.empty()) {
    json from = json::array();
    for (const std::string& secret : options.secrets) {
      from.push_back({{"secretRef", {{"name", secret}}}});
    }
    container["envFrom"] = from;
  }
  const json pod_spec = {{"restartPolicy", "Never"},
                         {"hostUsers", false},
                         {"automountServiceAccountToken", false},
                         {"enableServiceLinks", false},
                         {"securityContext", pod_security},
                         {"containers", json::array({container})},
                         {"volumes", volumes}};
  const std::size_t parallelism =
      options.parallelism == 0 ? tasks.size() : std::min(options.parallelism, tasks.size());
  json job_meta = meta;
  const json job = {
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata", job_meta},
      {"spec",
       {{"completionMode", "Indexed"},
        {"completions", tasks.size()},
        {"parallelism", parallelism},
        // A task whose run failed (exit 1 = verification failed, 3 = run failed) is an answer,
        // not a flaky pod: no retry of that index, and the other indexes go on.
        {"backoffLimitPerIndex", 0},
        {"template", {{"metadata", {{"labels", meta["labels"]}}}, {"spec", pod_spec}}}}}};
  const json list = {
      {"apiVersion", "v1"}, {"kind", "List"}, {"items", json::array({config_map, job})}};
  return list.dump(2) + "\n";
}

}  // namespace cagent::launcher::batch
