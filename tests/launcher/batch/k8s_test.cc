// K8sManifest: the List (ConfigMap + Indexed Job) `cagent batch k8s` writes. Its shape, the pod's
// securityContext field by field, the task file it carries (read back with LoadTasks), and hostile
// names, images, claims and volume paths refused. The manifest against the real Kubernetes schema
// is tests/batch/k8s_schema_test.mjs.
#include "launcher/batch/k8s.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cagent::launcher::batch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

class K8sManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-k8s-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ + "/data/repos/calc");
    std::ofstream(root_ + "/data/task.md") << "Fix add.\n";
    std::ofstream(root_ + "/data/session.jsonl") << "{}\n";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::vector<BatchTask> Load(const std::string& text) {
    const std::string path = root_ + "/data/tasks.jsonl";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    auto tasks = LoadTasks(path);
    EXPECT_TRUE(tasks.ok()) << tasks.error().Message();
    return tasks.ok() ? *tasks : std::vector<BatchTask>{};
  }

  // Three tasks: two on the data volume (one with a hostile task text), one from a git URL.
  std::vector<BatchTask> Three() {
    return Load(
        R"({"id": "a", "repo": "repos/calc", "task_file": "task.md", "profile": "fix-add", "model": "replay:session.jsonl"})"
        "\n\n"
        R"({"id": "b", "repo": "repos/calc", "task": "line1\nit's \"$(id)\" `x` \u00e9", "profile": "fix-add", "budgets": {"max_turns": 3, "wall_time": "5m"}})"
        "\n"
        R"({"id": "c", "repo": "https://example.invalid/calc.git", "commit": "v1", "task": "t", "profile": "backend"})"
        "\n");
  }

  K8sOptions Options() {
    K8sOptions o;
    o.image = "registry.example/cagent:1.0";
    o.results_pvc = "batch-results";
    o.volumes.push_back({"batch-data", root_ + "/data"});
    return o;
  }

  json Manifest(const std::vector<BatchTask>& tasks, const K8sOptions& o) {
    auto text = K8sManifest(tasks, "tasks.jsonl", o);
    EXPECT_TRUE(text.ok()) << text.error().Message();
    if (!text.ok()) return json::object();
    return json::parse(*text);
  }

  std::string ErrorOf(const std::vector<BatchTask>& tasks, const K8sOptions& o) {
    auto text = K8sManifest(tasks, "tasks.jsonl", o);
    EXPECT_FALSE(text.ok());
    if (text.ok()) return {};
    EXPECT_EQ(text.error().code, Error::Code::kInvalidInput);
    return text.error().Message();
  }

  std::string root_;
};

TEST_F(K8sManifestTest, AListOfAConfigMapAndAnIndexedJob) {
  const json m = Manifest(Three(), Options());
  ASSERT_EQ(m["kind"], "List");
  ASSERT_EQ(m["items"].size(), 2U);
  const json& cm = m["items"][0];
  const json& job = m["items"][1];
  EXPECT_EQ(cm["kind"], "ConfigMap");
  EXPECT_EQ(cm["metadata"]["name"], "cagent-batch");
  EXPECT_EQ(job["apiVersion"], "batch/v1");
  EXPECT_EQ(job["kind"], "Job");
  EXPECT_EQ(job["spec"]["completionMode"], "Indexed");
  EXPECT_EQ(job["spec"]["completions"], 3);
  EXPECT_EQ(job["spec"]["parallelism"], 3);
  EXPECT_EQ(job["spec"]["backoffLimitPerIndex"], 0);
  const json& pod = job["spec"]["template"]["spec"];
  EXPECT_EQ(pod["restartPolicy"], "Never");
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["image"], "registry.example/cagent:1.0");
  EXPECT_EQ(c["command"], json({"cagent", "batch", "run", "/tasks/tasks.jsonl", "--results",
                                "/results", "--index", "$(JOB_COMPLETION_INDEX)", "--jobs", "1",
                                "--resume", "--trust-task-paths"}));
  EXPECT_EQ(c["env"][0]["name"], "JOB_COMPLETION_INDEX");
  EXPECT_EQ(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['batch.kubernetes.io/job-completion-index']");
  // The mounts: the tasks, the results claim, the data claim read-only at its own path.
  bool results = false, tasks = false, data = false;
  for (const json& v : pod["volumes"]) {
    if (v.contains("persistentVolumeClaim") &&
        v["persistentVolumeClaim"]["claimName"] == "batch-results") {
      results = true;
    }
    if (v.contains("configMap") && v["configMap"]["name"] == "cagent-batch") tasks = true;
    if (v.contains("persistentVolumeClaim") &&
        v["persistentVolumeClaim"]["claimName"] == "batch-data") {
      data = v["persistentVolumeClaim"]["readOnly"] == true;
    }
  }
  EXPECT_TRUE(results && tasks && data) << pod["volumes"].dump();
  bool data_mount = false;
  for (const json& mnt : c["volumeMounts"]) {
    if (mnt["mountPath"] == root_ + "/data") data_mount = mnt["readOnly"] == true;
  }
  EXPECT_TRUE(data_mount) << c["volumeMounts"].dump();
}

// Each field the docs explain (docs/batch.md, "Kubernetes"); a change to one is a change to them.
TEST_F(K8sManifestTest, TheSecurityContextAsksForNoPrivilege) {
  K8sOptions o = Options();
  o.run_as_user = 4242;
  const json m = Manifest(Three(), o);
  const json& pod = m["items"][1]["spec"]["template"]["spec"];
  EXPECT_EQ(pod["hostUsers"], false);
  EXPECT_EQ(pod["automountServiceAccountToken"], false);
  EXPECT_EQ(pod["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(pod["securityContext"]["runAsUser"], 4242);
  EXPECT_EQ(pod["securityContext"]["seccompProfile"]["type"], "Unconfined");
  EXPECT_EQ(pod["securityContext"]["appArmorProfile"]["type"], "Unconfined");
  const json& sc = pod["containers"][0]["securityContext"];
  EXPECT_EQ(sc["allowPrivilegeEscalation"], false);
  EXPECT_EQ(sc["privileged"], false);
  EXPECT_EQ(sc["capabilities"]["drop"], json({"ALL"}));
  EXPECT_FALSE(sc["capabilities"].contains("add"));
  EXPECT_EQ(sc["procMount"], "Unmasked");
  EXPECT_EQ(sc["runAsNonRoot"], true);
  EXPECT_EQ(sc["runAsUser"], 4242);
  o.run_as_user = 0;
  EXPECT_THAT(ErrorOf(Three(), o), HasSubstr("--run-as-user"));
}

// The ConfigMap's file, loaded as the pod loads it, is the same tasks: absolute paths (relative
// ones would resolve against /tasks in the pod), the hostile task text byte for byte, budgets.
TEST_F(K8sManifestTest, TheConfigMapCarriesTheSameTasksWithAbsolutePaths) {
  const std::vector<BatchTask> tasks = Three();
  ASSERT_EQ(tasks.size(), 3U);
  const json m = Manifest(tasks, Options());
  const std::string text = m["items"][0]["data"]["tasks.jsonl"];
  const std::string copy = root_ + "/copy/tasks.jsonl";  // another directory: nothing relative
  fs::create_directories(root_ + "/copy");
  std::ofstream(copy, std::ios::binary) << text;
  // As the pod loads it: its paths were confined when the manifest was made (the pod's command
  // says --trust-task-paths, checked above).
  auto again = LoadTasks(copy, TaskPaths{.root = "", .trust = true});
  ASSERT_TRUE(again.ok()) << again.error().Message() << "\n" << text;
  ASSERT_EQ(again->size(), 3U);
  for (std::size_t i = 0; i < 3; ++i) {
    const BatchTask& a = tasks[i];
    const BatchTask& b = (*again)[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.index, b.index);
    EXPECT_EQ(a.repo, b.repo);
    EXPECT_EQ(a.repo_is_url, b.repo_is_url);
    EXPECT_EQ(a.commit, b.commit);
    EXPECT_EQ(a.task_text, b.task_text);
    EXPECT_EQ(a.task_file, b.task_file);
    EXPECT_EQ(a.profile, b.profile);
    EXPECT_EQ(a.model, b.model);
    EXPECT_EQ(a.budgets.max_turns, b.budgets.max_turns);
    EXPECT_EQ(a.budgets.wall_time, b.budgets.wall_time);
  }
  EXPECT_EQ((*again)[1].task_text, "line1\nit's \"$(id)\" `x` \xc3\xa9");
}

// A local path the pod cannot see is named with its line; twin: with the volume that holds it,
// the same tasks are accepted (and a git URL needs no volume).
TEST_F(K8sManifestTest, LocalPathsMustBeOnAMountedVolume) {
  const std::vector<BatchTask> tasks = Three();
  K8sOptions o = Options();
  o.volumes.clear();
  const std::string error = ErrorOf(tasks, o);
  EXPECT_THAT(error, HasSubstr("tasks.jsonl:1: repo " + root_ + "/data/repos/calc"));
  EXPECT_THAT(error, HasSubstr("tasks.jsonl:1: task_file " + root_ + "/data/task.md"));
  EXPECT_THAT(error, HasSubstr("tasks.jsonl:1: model " + root_ + "/data/session.jsonl"));
  EXPECT_THAT(error, HasSubstr("tasks.jsonl:3: repo"));  // line 3: the blank line counts
  EXPECT_THAT(error, ::testing::Not(HasSubstr("example.invalid")));
  EXPECT_THAT(error, HasSubstr("--volume"));
  // A volume that is a sibling with a common prefix does not count.
  o.volumes.push_back({"other", root_ + "/dat"});
  EXPECT_THAT(ErrorOf(tasks, o), HasSubstr("is on no volume"));
  EXPECT_TRUE(K8sManifest(tasks, "tasks.jsonl", Options()).ok());
  EXPECT_TRUE(K8sManifest({tasks[2]}, "tasks.jsonl", o).ok());
}

TEST_F(K8sManifestTest, HostileNamesImagesAndClaimsAreRefused) {
  const std::vector<BatchTask> tasks = Three();
  for (const std::string image :
       {"", "img\nkind: Pod", "img name", "img;rm -rf /", "$(id)", "img\"", "-img", "img'x"}) {
    K8sOptions o = Options();
    o.image = image;
    EXPECT_THAT(ErrorOf(tasks, o), HasSubstr("--image")) << image;
  }
  for (const std::string claim : {"", "Results", "res_ults", "res\nults", "-res", "res.", "a b"}) {
    K8sOptions o = Options();
    o.results_pvc = claim;
    EXPECT_THAT(ErrorOf(tasks, o), HasSubstr("--results-pvc")) << claim;
    o = Options();
    o.volumes[0].claim = claim;
    EXPECT_THAT(ErrorOf(tasks, o), HasSubstr("--volume")) << claim;
  }
  for (const std::string& name :
       std::vector<std::string>{"", "Batch", "batch_1", "batch\n", std::string(64, 'a'), "b.c"}) {
    K8sOptions o = Options();
    o.name = name;
    EXPECT_THAT(ErrorOf(tasks, o), HasSubstr("--name")) << name;
  }
  K8sOptions o = Options();
  o.name_space = "Team A";
  EXPECT_THAT(ErrorOf(tasks, o), HasSubstr("--namespace"));
  o = Options();
  o.cagent = "bin/cagent";
  EXPECT_THAT(ErrorOf(tasks, o), HasSubstr("--cagent"));
  // Twin: plain values of each kind are accepted.
  o = Options();
  o.image = "ghcr.io/org/cagent@sha256:0123abcd";
  o.results_pvc = "results.v2";
  o.name = "swe-bench-1";
  o.name_space = "agents";
  o.cagent = "/usr/local/bin/cagent";
  const json m = Manifest(tasks, o);
  EXPECT_EQ(m["items"][1]["metadata"]["namespace"], "agents");
  EXPECT_EQ(m["items"][1]["spec"]["template"]["spec"]["containers"][0]["command"][0],
            "/usr/local/bin/cagent");
}

TEST_F(K8sManifestTest, SecretsBecomeTheContainersEnvironment) {
  K8sOptions o = Options();
  EXPECT_FALSE(
      Manifest(Three(), o)["items"][1]["spec"]["template"]["spec"]["containers"][0].contains(
          "envFrom"));
  o.secrets = {"openai-key", "anthropic.key"};
  const json c = Manifest(Three(), o)["items"][1]["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["envFrom"], json::parse(R"([{"secretRef": {"name": "openai-key"}},
                                          {"secretRef": {"name": "anthropic.key"}}])"));
  for (const std::string secret : {"", "Key", "key\nx", "key name", "$(id)"}) {
    o.secrets = {secret};
    EXPECT_THAT(ErrorOf(Three(), o), HasSubstr("--secret")) << secret;
  }
}

TEST_F(K8sManifestTest, VolumePathsThePodNeedsOrThatAreNotPathsAreRefused) {
  const std::vector<BatchTask> tasks = Three();
  for (const std::string path : {"relative", "/", "/results", "/results/x", "/tasks", "/proc/x",
                                 "/tmp", "/home/cagent", "/usr/lib", "/data\n/x", "/data/"}) {
    K8sOptions o = Options();
    o.volumes.push_back({"extra", path});
    EXPECT_THAT(ErrorOf(tasks, o), HasSubstr("--volume")) << path;
  }
}

TEST_F(K8sManifestTest, ParallelismIsAtMostTheTasks) {
  K8sOptions o = Options();
  o.parallelism = 2;
  EXPECT_EQ(Manifest(Three(), o)["items"][1]["spec"]["parallelism"], 2);
  o.parallelism = 50;
  EXPECT_EQ(Manifest(Three(), o)["items"][1]["spec"]["parallelism"], 3);
  EXPECT_THAT(ErrorOf({}, o), HasSubstr("no tasks"));
}

}  // namespace
}  // namespace cagent::launcher::batch
