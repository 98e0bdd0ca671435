// `cagent batch k8s`: a Kubernetes manifest (a v1 List) holding a ConfigMap with the task file and
// an Indexed Job whose completion index i runs task i (`cagent batch run /tasks/tasks.jsonl
// --results /results --index $(JOB_COMPLETION_INDEX) --jobs 1 --resume --trust-task-paths`: its
// paths were confined when the manifest was written), the results on a PersistentVolumeClaim
// mounted at /results. A pure generator: tasks + options -> JSON, which `kubectl apply -f` takes;
// nothing here talks to a cluster.
//
// The pod asks for no privilege: it runs as a non-root uid in its own user namespace
// (hostUsers: false) with every capability dropped and no privilege escalation. What it needs is
// that the kernel lets an unprivileged process make namespaces and mount inside them, which the
// container runtime's defaults forbid; the securityContext turns exactly those defaults off (the
// comments in k8s.cc and docs/batch.md, "Kubernetes", say why each field is what it is).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/batch/tasks.h"

namespace cagent::launcher::batch {

// A PersistentVolumeClaim mounted read-only in the pod at `path`, the same path it has where the
// task file was written, so the task file's absolute paths (repositories, task files, replay
// sessions, profile files) mean the same thing in the pod.
struct K8sVolume {
  std::string claim;
  std::string path;
};

struct K8sOptions {
  std::string name = "cagent-batch";  // the Job's and ConfigMap's metadata.name
  std::string name_space;             // metadata.namespace; "" = kubectl's current namespace
  std::string image;                  // holds cagent (and git, and what the tasks' checks run)
  std::string cagent = "cagent";      // cagent in the image: a name on its PATH or absolute
  std::string results_pvc;            // mounted read-write at /results
  std::vector<K8sVolume> volumes;
  // Secrets whose keys become the container's environment (envFrom): the model's credentials
  // (OPENAI_API_KEY, ...), which cagent keeps out of the sandbox as it always does.
  std::vector<std::string> secrets;
  std::size_t parallelism = 0;  // pods at once; 0 = all tasks
  std::int64_t run_as_user = 1000;
};

// The manifest. kInvalidInput, naming the flag or "PATH:LINE", when there are no tasks; a name,
// image, claim or secret is not what Kubernetes accepts (DNS-1123 names; an image reference of
// [A-Za-z0-9._/:@-]); a volume path is not absolute, holds a control character, or is /results,
// /tasks or a system directory; or a task names a local path (repository, task file, replay
// session, profile file) under none of the volumes: the pod could not see it. `tasks_path` is
// the task file's name for those messages.
Result<std::string> K8sManifest(const std::vector<BatchTask>& tasks, const std::string& tasks_path,
                                const K8sOptions& options);

// The tasks as the JSON Lines the ConfigMap carries: one object per task, every path absolute (as
// LoadTasks resolved it), so the file means the same in the pod, where it is /tasks/tasks.jsonl.
std::string TasksJsonl(const std::vector<BatchTask>& tasks);

}  // namespace cagent::launcher::batch
