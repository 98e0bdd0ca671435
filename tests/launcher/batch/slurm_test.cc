// SlurmScript: the sbatch script `cagent batch slurm` submits. It is run by /bin/sh on a cluster
// node and its #SBATCH lines are parsed by sbatch, so every value from the command line is either
// refused or quoted; these tests run the generated script with sh (a stub in place of cagent) to
// see the arguments cagent would get, and feed it hostile partitions, names and paths.
#include "launcher/batch/slurm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace cagent::launcher::batch {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<BatchTask> Tasks(std::size_t n) {
  std::vector<BatchTask> tasks(n);
  for (std::size_t i = 0; i < n; ++i) {
    tasks[i].index = i;
    tasks[i].line = i + 1;
    tasks[i].id = "t" + std::to_string(i);
  }
  return tasks;
}

SlurmOptions Options() {
  SlurmOptions o;
  o.cagent = "/opt/cagent/bin/cagent";
  o.tasks_file = "/shared/batch/tasks.jsonl";
  o.results_dir = "/shared/batch/results";
  return o;
}

std::vector<std::string> SbatchLines(const std::string& script) {
  std::vector<std::string> out;
  std::istringstream in(script);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#SBATCH", 0) == 0) out.push_back(line);
  }
  return out;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class SlurmScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-slurm-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }

  // A stand-in for cagent at `path` that writes each argument it gets on its own line (NUL-free
  // arguments only) to root_/args.
  void WriteStub(const std::string& path) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '" << root_
                        << "/args'\n";
    ::chmod(path.c_str(), 0755);
  }

  // Runs `script` with sh as Slurm would, with SLURM_ARRAY_TASK_ID=`index` (unset if empty), in
  // root_; returns sh's exit status.
  int RunScript(const std::string& script, const std::string& index) {
    const std::string path = root_ + "/job.sh";
    std::ofstream(path) << script;
    const std::string env =
        index.empty() ? "env -u SLURM_ARRAY_TASK_ID" : "env SLURM_ARRAY_TASK_ID=" + index;
    const int status =
        std::system(("cd '" + root_ + "' && " + env + " sh ./job.sh 2>/dev/null").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::vector<std::string> Args() {
    std::vector<std::string> out;
    std::istringstream in(Read(root_ + "/args"));
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

  std::string root_;
};

TEST_F(SlurmScriptTest, OneArrayTaskPerTaskWithTheLimitOutputAndPartition) {
  SlurmOptions o = Options();
  o.partition = "gpu-short";
  o.array_limit = 2;
  auto script = SlurmScript(Tasks(5), o);
  ASSERT_TRUE(script.ok()) << script.error().Message();
  EXPECT_EQ(script->rfind("#!/bin/sh\n", 0), 0U);
  EXPECT_THAT(SbatchLines(*script),
              ::testing::ElementsAre("#SBATCH --job-name=cagent-batch", "#SBATCH --array=0-4%2",
                                     "#SBATCH --ntasks=1",
                                     "#SBATCH --output=\"/shared/batch/results/_slurm-%A_%a.out\"",
                                     "#SBATCH --partition=gpu-short"));
  EXPECT_THAT(*script, HasSubstr("\nexec '/opt/cagent/bin/cagent' batch run "
                                 "'/shared/batch/tasks.jsonl' --results '/shared/batch/results' "
                                 "--index \"$SLURM_ARRAY_TASK_ID\" --jobs 1 --resume\n"));
}

TEST_F(SlurmScriptTest, NoLimitNoPartitionAndOneTask) {
  auto script = SlurmScript(Tasks(1), Options());
  ASSERT_TRUE(script.ok()) << script.error().Message();
  EXPECT_THAT(*script, HasSubstr("#SBATCH --array=0-0\n"));
  EXPECT_THAT(*script, Not(HasSubstr("--partition")));
  EXPECT_THAT(*script, Not(HasSubstr("%2")));
  EXPECT_THAT(*script, Not(HasSubstr("--time")));
  EXPECT_THAT(*script, Not(HasSubstr("--account")));
  EXPECT_THAT(*script, Not(HasSubstr("--qos")));
}

TEST_F(SlurmScriptTest, NoTasksIsRefused) {
  auto script = SlurmScript({}, Options());
  ASSERT_FALSE(script.ok());
  EXPECT_EQ(script.error().code, Error::Code::kInvalidInput);
}

// The script as sh runs it: cagent gets exactly the per-task command, with the array index.
TEST_F(SlurmScriptTest, TheScriptExecsTheTaskCommandWithTheArrayIndex) {
  SlurmOptions o = Options();
  o.cagent = root_ + "/bin/cagent";
  WriteStub(o.cagent);
  auto script = SlurmScript(Tasks(3), o);
  ASSERT_TRUE(script.ok()) << script.error().Message();
  ASSERT_EQ(RunScript(*script, "2"), 0);
  EXPECT_THAT(Args(), ::testing::ElementsAre("batch", "run", "/shared/batch/tasks.jsonl",
                                             "--results", "/shared/batch/results", "--index", "2",
                                             "--jobs", "1", "--resume"));
}

// The node checks the task file's paths as the submitting command did: --task-root (quoted) and
// --trust-task-paths reach every array task's cagent.
TEST_F(SlurmScriptTest, TheTaskPathOptionsReachEveryArrayTask) {
  SlurmOptions o = Options();
  o.cagent = root_ + "/bin/cagent";
  WriteStub(o.cagent);
  o.task_root = "/shared/it's data";
  auto script = SlurmScript(Tasks(1), o);
  ASSERT_TRUE(script.ok()) << script.error().Message();
  ASSERT_EQ(RunScript(*script, "0"), 0);
  EXPECT_THAT(Args(),
              ::testing::ElementsAre("batch", "run", "/shared/batch/tasks.jsonl", "--results",
                                     "/shared/batch/results", "--task-root", "/shared/it's data",
                                     "--index", "0", "--jobs", "1", "--resume"));
  o.task_root.clear();
  o.trust_task_paths = true;
  script = SlurmScript(Tasks(1), o);
  ASSERT_TRUE(script.ok()) << script.error().Message();
  ASSERT_EQ(RunScript(*script, "0"), 0);
  EXPECT_THAT(Args(),
              ::testing::ElementsAre("batch", "run", "/shared/batch/tasks.jsonl", "--results",
                                     "/shared/batch/results", "--trust-task-paths", "--index", "0",
                                     "--jobs", "1", "--resume"));
  o.trust_task_paths = false;
  o.task_root = "relative";
  EXPECT_FALSE(SlurmScript(Tasks(1), o).ok());
}

TEST_F(SlurmScriptTest, OutsideAnArrayTheScriptStopsBeforeCagent) {
  SlurmOptions o = Options();
  o.cagent = root_ + "/bin/cagent";
  WriteStub(o.cagent);
  auto script = SlurmScript(Tasks(3), o);
  ASSERT_TRUE(script.ok());
  EXPECT_NE(RunScript(*script, ""), 0);
  EXPECT_FALSE(fs::exists(root_ + "/args"));
}

// Paths with spaces, quotes and shell syntax reach cagent as they are, and nothing in them runs.
// Twin: the same path pasted into a double-quoted command line (the naive script) runs the
// command substitution it holds.
TEST_F(SlurmScriptTest, HostilePathsAreQuotedForTheShell) {
  const std::string hostile = root_ + "/my dir/it's \"$(touch " + root_ + "/pwned)\" `x` ;&|*";
  SlurmOptions o = Options();
  o.cagent = hostile + "/cagent";
  o.tasks_file = hostile + "/tasks.jsonl";
  o.results_dir = root_ + "/results with space/$(touch " + root_ + "/pwned2) it's";
  WriteStub(o.cagent);

  // Twin: the naive script.
  const std::string naive =
      "#!/bin/sh\nexec \"" + o.cagent + "\" batch run \"" + o.tasks_file + "\"\n";
  RunScript(naive, "0");
  EXPECT_TRUE(fs::exists(root_ + "/pwned")) << "the naive script should have run the $(...)";
  fs::remove(root_ + "/pwned");
  fs::remove(root_ + "/args");

  auto script = SlurmScript(Tasks(1), o);
  ASSERT_TRUE(script.ok()) << script.error().Message();
  ASSERT_EQ(RunScript(*script, "0"), 0);
  EXPECT_FALSE(fs::exists(root_ + "/pwned"));
  EXPECT_FALSE(fs::exists(root_ + "/pwned2"));
  EXPECT_THAT(Args(),
              ::testing::ElementsAre("batch", "run", o.tasks_file, "--results", o.results_dir,
                                     "--index", "0", "--jobs", "1", "--resume"));
  // In the #SBATCH line DIR is one double-quoted value ('$' and '`' are literal to sbatch).
  EXPECT_THAT(*script, HasSubstr("#SBATCH --output=\"" + o.results_dir + "/_slurm-%A_%a.out\"\n"));
}

TEST_F(SlurmScriptTest, APercentInDirIsDoubledForSlurmsFilenamePattern) {
  SlurmOptions o = Options();
  o.results_dir = "/shared/100%/res";
  auto script = SlurmScript(Tasks(2), o);
  ASSERT_TRUE(script.ok()) << script.error().Message();
  EXPECT_THAT(*script, HasSubstr("#SBATCH --output=\"/shared/100%%/res/_slurm-%A_%a.out\"\n"));
  EXPECT_THAT(*script, HasSubstr("--results '/shared/100%/res'"));
}

TEST_F(SlurmScriptTest, WhatAnSbatchLineCannotCarryIsRefused) {
  for (const std::string dir :
       {"/shared/a\"b", "/shared/a\\b", "/shared/a\nb", "relative/dir", "", "/shared/a\rb"}) {
    SlurmOptions o = Options();
    o.results_dir = dir;
    auto script = SlurmScript(Tasks(2), o);
    ASSERT_FALSE(script.ok()) << dir;
    EXPECT_EQ(script.error().code, Error::Code::kInvalidInput) << dir;
    EXPECT_THAT(script.error().Message(), HasSubstr("--results"));
  }
}

TEST_F(SlurmScriptTest, ControlCharactersInTheOtherPathsAreRefused) {
  SlurmOptions o = Options();
  o.tasks_file = "/shared/tasks\n#SBATCH --uid=0\n.jsonl";
  EXPECT_FALSE(SlurmScript(Tasks(1), o).ok());
  o = Options();
  o.cagent = "/opt/cagent\n/bin/cagent";
  EXPECT_FALSE(SlurmScript(Tasks(1), o).ok());
  o = Options();
  o.cagent = "cagent";  // not absolute: the nodes' PATH is not this one
  auto r = SlurmScript(Tasks(1), o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().Message(), HasSubstr("--cagent"));
}

// A partition, job name, account or QOS goes into an #SBATCH line unquoted: anything but a plain
// name is refused, so none can add a line or an option. Twin: the one plain name is accepted.
TEST_F(SlurmScriptTest, HostilePartitionsJobNamesAccountsAndQosAreRefused) {
  const std::vector<std::string> hostile = {"debug\n#SBATCH --uid=0",
                                            "a b",
                                            "x;rm -rf /",
                                            "$(id)",
                                            "'q'",
                                            "\"q\"",
                                            "p\\",
                                            "`id`",
                                            "debug --uid=0",
                                            std::string(65, 'a'),
                                            "p%j"};
  for (const std::string& name : hostile) {
    SlurmOptions o = Options();
    o.partition = name;
    auto r = SlurmScript(Tasks(2), o);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.error().code, Error::Code::kInvalidInput);
    EXPECT_THAT(r.error().Message(), HasSubstr("--partition"));
    o = Options();
    o.job_name = name;
    r = SlurmScript(Tasks(2), o);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_THAT(r.error().Message(), HasSubstr("--job-name"));
  }
  for (const std::string& name : hostile) {
    SlurmOptions o = Options();
    o.account = name;
    auto r = SlurmScript(Tasks(2), o);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_THAT(r.error().Message(), HasSubstr("--account"));
    o = Options();
    o.qos = name;
    r = SlurmScript(Tasks(2), o);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_THAT(r.error().Message(), HasSubstr("--qos"));
  }
  SlurmOptions o = Options();
  o.partition = "debug_2.x-y";
  o.job_name = "swe.bench-1";
  o.account = "lab-1";
  o.qos = "high.prio";
  auto r = SlurmScript(Tasks(2), o);
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_THAT(SbatchLines(*r), ::testing::Contains("#SBATCH --partition=debug_2.x-y"));
  EXPECT_THAT(SbatchLines(*r), ::testing::Contains("#SBATCH --job-name=swe.bench-1"));
  EXPECT_THAT(SbatchLines(*r), ::testing::Contains("#SBATCH --account=lab-1"));
  EXPECT_THAT(SbatchLines(*r), ::testing::Contains("#SBATCH --qos=high.prio"));
}

// Every form of Slurm's time limit is written as given; anything else is refused before an
// #SBATCH line carries it (a newline would add a line, a space another option).
TEST_F(SlurmScriptTest, TimeLimitsInSlurmsFormsOnly) {
  for (const std::string t :
       {"30", "30:00", "2:30:00", "1-0", "1-12", "1-12:30", "7-12:30:15", "0", "999999"}) {
    EXPECT_TRUE(IsSlurmTimeLimit(t)) << t;
    SlurmOptions o = Options();
    o.time_limit = t;
    auto r = SlurmScript(Tasks(2), o);
    ASSERT_TRUE(r.ok()) << t << ": " << r.error().Message();
    EXPECT_THAT(SbatchLines(*r), ::testing::Contains("#SBATCH --time=" + t));
  }
  for (const std::string t :
       {"", "-", "1-", "-1", ":", "1:", ":1", "1::2", "1:2:3:4", "1-2:3:4:5", "1-2-3", "1 h",
        "10\n#SBATCH --uid=0", "+5", "1h", "UNLIMITED", "1234567", "１２", "1.5"}) {
    EXPECT_FALSE(IsSlurmTimeLimit(t)) << t;
    if (t.empty()) continue;  // "" is no limit given, not a bad one
    SlurmOptions o = Options();
    o.time_limit = t;
    auto r = SlurmScript(Tasks(2), o);
    ASSERT_FALSE(r.ok()) << t;
    EXPECT_EQ(r.error().code, Error::Code::kInvalidInput);
    EXPECT_THAT(r.error().Message(), HasSubstr("--time"));
  }
}

}  // namespace
}  // namespace cagent::launcher::batch
