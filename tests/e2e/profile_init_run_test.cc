// Issue 32 end to end: `cagent profile init` → `cagent run` → `cagent apply` on a repository whose
// profile is never committed. For one small project per ecosystem (tests/e2e/samples/init-*: a
// Python src/ layout tested with unittest, a Node project without a lockfile or dependencies, a Go
// module, a CMake project the agent builds in the tree), the test commits the project, lets `init`
// write its profile (outside the repository: CONFIG/repos/KEY/NAME.cagent), runs a replayed agent
// that makes a small edit, expects verification to pass, applies the patch to the caller's
// repository and finds nothing of cagent's in it. The CMake run also shows `outputs`: the build/
// tree the agent leaves is left out of the patch and reported (its twin in the same test: the
// profile without outputs fails the run on the changed-files limit, here some 40 files, 222 in the
// issue's project).
//
// Everything the run writes is under the test's directory (HOME, XDG_CONFIG_HOME,
// XDG_STATE_HOME, XDG_CACHE_HOME), so the tests also run as `nobody`.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

bool HostHas(const std::string& tool) {
  return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
}

std::string Finish() { return ToolTurn("finish", {{"summary", "done"}}); }

// The agent reads `file` and replaces `from` with `to`.
std::string Edit(const std::string& file, const std::string& from, const std::string& to) {
  return ToolTurn("read_file", {{"path", file}}) +
         ToolTurn("edit_file", {{"path", file}, {"old_string", from}, {"new_string", to}});
}

class ProfileInitRun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    if (!HostHas("git")) GTEST_SKIP() << "git is not installed";
    dir_ = h_.MakeDir("init-run");
  }

  // tests/e2e/samples/NAME as a committed repository at dir_/NAME (the profile's name comes from
  // the directory's), owned by the user cagent runs as.
  void Repository(const std::string& name) {
    repo_ = dir_ + "/" + name;
    fs::copy(std::string(CAGENT_SOURCE_DIR) + "/tests/e2e/samples/" + name, repo_,
             fs::copy_options::recursive);
    h_.MakeDemoRepo(repo_, /*copy=*/false);
    fs::create_directories(dir_ + "/home");  // HOME of every cagent command here
    h_.GiveToRunUser(dir_);
  }

  RunOptions Env() const {
    RunOptions o;
    o.extra_env = {"HOME=" + dir_ + "/home", "XDG_CONFIG_HOME=" + dir_ + "/config",
                   "XDG_STATE_HOME=" + dir_ + "/state", "XDG_CACHE_HOME=" + dir_ + "/cache"};
    o.cwd = repo_;
    o.timeout = std::chrono::seconds(240);
    return o;
  }

  // `git status --porcelain` of the caller's repository, run as the user cagent runs as.
  std::string Status() const {
    const std::string out = dir_ + "/status.out";
    const int rc = h_.ShAsUser(
        repo_, "HOME='" + dir_ + "/home' git status --porcelain --untracked-files=all > '" + out +
                   "' 2>&1");
    EXPECT_EQ(rc, 0) << ReadFile(out);
    return ReadFile(out);
  }

  // `cagent profile init` with --json: the profile is written outside the repository, which
  // stays clean.
  json Init() {
    const RunResult r = h_.Run({"profile", "init", repo_, "--json"}, Env());
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    json j = json::parse(r.out, nullptr, false);
    if (!j.is_object()) {
      ADD_FAILURE() << "no JSON from profile init:\n" << r.out << r.err;
      return json::object();
    }
    EXPECT_EQ(j["written"], true);
    EXPECT_EQ(j["in_repository"], false);
    EXPECT_THAT(j["path"].get<std::string>(), StartsWith(dir_ + "/config/cagent/repos/"));
    EXPECT_TRUE(fs::exists(j["path"].get<std::string>()));
    EXPECT_FALSE(fs::exists(repo_ + "/.cagent"));
    EXPECT_EQ(Status(), "") << "profile init left the repository dirty";
    return j;
  }

  // `cagent run --profile NAME` from the repository with the replayed `session`.
  json Run(const std::string& profile, const std::string& session, RunResult* raw = nullptr) {
    const std::string file = dir_ + "/session-" + std::to_string(++sessions_) + ".jsonl";
    WriteFile(file, session);
    WriteFile(dir_ + "/task.md", "Make the small change the test asks for.\n");
    const RunResult r = h_.Run({"run", "--profile", profile, "--model", "replay:" + file,
                                "--approve", "never", "--json", dir_ + "/task.md"},
                               Env());
    if (raw != nullptr) *raw = r;
    const auto brace = r.out.find('{');
    json res =
        brace == std::string::npos ? json() : json::parse(r.out.substr(brace), nullptr, false);
    if (!res.is_object()) {
      ADD_FAILURE() << "no result on stdout (exit " << r.exit_code << ")\n" << r.out << r.err;
      return json::object();
    }
    return res;
  }

  // The whole walk for one sample: init, run, verification passed, apply; `file` is what the
  // agent changed (from `from` to `to`), and all the patch holds.
  //
  // `stale`: an untracked file under the profile's outputs that an earlier build left in the
  // caller's tree; it does not make the tree dirty, never rides into the run, and stays.
  json InitRunApply(const std::string& file, const std::string& from, const std::string& to,
                    const std::string& before_edit = "", const std::string& stale = "") {
    const json init = Init();
    if (!stale.empty()) {
      fs::create_directories(fs::path(repo_ + "/" + stale).parent_path());
      WriteFile(repo_ + "/" + stale, "left by an earlier build\n");
      h_.GiveToRunUser(repo_);
    }
    const std::string name = init.value("name", "");
    EXPECT_EQ(name, fs::path(repo_).filename().string());
    const json res = Run(name, before_edit + Edit(file, from, to) + Finish());
    EXPECT_EQ(res.value("status", ""), "completed") << res.dump(2) << "\n" << VerifyLog(res);
    EXPECT_EQ(res["verified"], true);
    EXPECT_EQ(res["profile"], name);
    EXPECT_EQ(res["profile_file"], init["path"]);
    EXPECT_EQ(res["profile_from_repository"], false);
    EXPECT_EQ(res["repo"], init["repository"]);
    if (res.contains("verification")) {
      for (const json& v : res["verification"]) EXPECT_EQ(v["status"], "passed") << v.dump();
    }
    EXPECT_EQ(res["changed_files"].size(), 1U) << res.dump(2);
    if (res["changed_files"].size() == 1U) {
      EXPECT_EQ(res["changed_files"][0]["path"], file);
    }

    // `cagent runs` says which repository each run was made from.
    const RunResult runs = h_.Run({"runs"}, Env());
    EXPECT_THAT(runs.out, HasSubstr(res.value("run_id", "?")));
    EXPECT_THAT(runs.out, HasSubstr(fs::path(repo_).filename().string()));
    const RunResult runs_json = h_.Run({"runs", "--json"}, Env());
    EXPECT_THAT(runs_json.out, HasSubstr("\"repo\": \"" + init.value("repository", "?") + "\""));

    const RunResult apply = h_.Run({"apply", res.value("run_id", "?")}, Env());
    EXPECT_EQ(apply.exit_code, 0) << apply.out << apply.err;
    EXPECT_THAT(ReadFile(repo_ + "/" + file), HasSubstr(to));
    // Only the agent's file, staged; no .cagent and nothing the build left.
    EXPECT_EQ(Status(), "M  " + file + "\n" + (stale.empty() ? "" : "?? " + stale + "\n"));
    EXPECT_FALSE(fs::exists(repo_ + "/.cagent"));
    return res;
  }

  static std::string VerifyLog(const json& res) {
    std::string out;
    if (!res.contains("verification")) return out;
    for (const json& v : res["verification"]) {
      if (v.contains("log") && v["log"].is_string()) out += ReadFile(v["log"].get<std::string>());
    }
    return out;
  }

  Harness& h_ = Harness::Get();
  std::string dir_, repo_;
  int sessions_ = 0;
};

TEST_F(ProfileInitRun, PythonSrcLayoutWithUnittest) {
  if (!HostHas("python3")) GTEST_SKIP() << "python3 is not installed";
  Repository("init-python-src");
  const json res = InitRunApply("src/calc/__init__.py", "    \"\"\"The sum of a and b.\"\"\"",
                                "    \"\"\"The sum of a and b (any numbers).\"\"\"");
  ASSERT_FALSE(HasFailure());
  EXPECT_THAT(res["verification"][0]["command"].get<std::string>(),
              HasSubstr("PYTHONPATH=src python3 -m unittest discover -s tests -t ."));
}

TEST_F(ProfileInitRun, NodeWithoutALockfileOrDependencies) {
  if (!HostHas("node") || !HostHas("npm")) GTEST_SKIP() << "node and npm are not installed";
  Repository("init-node-nolock");
  const json res = InitRunApply("sum.js", "// The sum of two numbers.", "// The sum of a and b.");
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(res["verification"][0]["command"], "npm test");
  EXPECT_TRUE(res["setup"]["workspace"].empty()) << "no dependencies: init writes no setup";
}

// The EROFS: `npm install` in the verification tree's setup, with `cache ~/.npm`, which is
// read-only there (the agent's patch reaches that setup). npm writes into its cache on every
// command and failed with "EROFS ... _cacache/tmp"; the cache now has a private writable layer in
// every sandbox that may not write it, and the host's cache is still never written from there.
TEST_F(ProfileInitRun, NpmWritesItsCacheInVerificationWithoutReachingTheHostsCache) {
  if (!HostHas("node") || !HostHas("npm")) GTEST_SKIP() << "node and npm are not installed";
  Repository("init-node-nolock");
  const std::string profile = dir_ + "/npm.cagent";
  WriteFile(profile,
            "extends frontend\n"
            "setup {\n  run \"npm install --no-audit --no-fund --no-package-lock --offline\" "
            "timeout 5m\n}\n"
            "cache ~/.npm\noutputs node_modules\n"
            "verify {\n  run \"npm test\" timeout 5m\n}\n");
  h_.GiveToRunUser(dir_);
  const json res = Run(profile, Edit("sum.js", "// The sum of two numbers.", "// A sum.") +
                                    ToolTurn("run_command", {{"command", "npm test"}}) + Finish());
  ASSERT_EQ(res.value("status", ""), "completed") << res.dump(2) << "\n" << VerifyLog(res);
  ASSERT_EQ(res["setup"]["verify_tree"].size(), 1U);
  EXPECT_EQ(res["setup"]["verify_tree"][0]["status"], "passed");
  EXPECT_EQ(res["verification"][0]["status"], "passed");
  // What npm wrote in the agent's sandbox and in verification went with them: the host's cache
  // holds only what the workspace's setup (writable) left, no log of a later npm command.
  std::size_t logs = 0;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(dir_ + "/cache/cagent/caches", ec)) {
    for (const auto& f : fs::directory_iterator(d.path().string() + "/.npm/_logs", ec)) {
      (void)f;
      ++logs;
    }
  }
  EXPECT_LE(logs, 1U) << "a sandbox that may not write the cache wrote npm logs into it";
}

TEST_F(ProfileInitRun, GoModuleWithItsBuildCache) {
  if (!HostHas("go")) GTEST_SKIP() << "go is not installed (Debian: golang-go)";
  Repository("init-go-module");
  const json res =
      InitRunApply("calc.go", "// Add returns the sum of a and b.", "// Add returns a plus b.");
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(res["verification"][0]["command"], "go test ./...");
  // The build cache was made for this repository's runs of this profile.
  const json ls = json::parse(h_.Run({"cache", "ls", "--json"}, Env()).out, nullptr, false);
  ASSERT_TRUE(ls.is_array()) << ls.dump();
  bool go_build = false;
  for (const json& e : ls) go_build = go_build || e["path"] == "~/.cache/go-build";
  EXPECT_TRUE(go_build) << ls.dump(2);
}

TEST_F(ProfileInitRun, CMakeBuiltInTheTreeByTheAgentLeavesItsBuildOutOfThePatch) {
  if (!HostHas("cmake") || !HostHas("cc")) GTEST_SKIP() << "cmake or a C compiler is missing";
  Repository("init-cmake");
  const std::string build = "cmake -S . -B build && cmake --build build && ctest --test-dir build";
  // A build/ from an earlier in-tree build is in the caller's tree: no --allow-dirty needed.
  const json res =
      InitRunApply("calc.c", "/* The sum of a and b. */", "/* a + b */",
                   ToolTurn("run_command", {{"command", build}}), "build/CMakeCache.txt");
  ASSERT_FALSE(HasFailure());
  const json& left = res["left_out"];
  EXPECT_GT(left["files"].get<int>(), 5) << left.dump(2);
  ASSERT_EQ(left["paths"].size(), 1U) << left.dump(2);
  EXPECT_EQ(left["paths"][0]["path"], "build");
  EXPECT_EQ(left["paths"][0]["files"], left["files"]);
  // CMake's compiler probes are C sources under build/: named, with a warning.
  for (const json& f : left["source_files"]) {
    EXPECT_THAT(f.get<std::string>(), StartsWith("build/"));
  }
  EXPECT_EQ(res["patch"]["bytes"].get<int>() < 2000, true) << "the patch holds the build tree";

  // Twin: the same run under the profile without its outputs line captures build/ as the
  // agent's change and ends failed on the changed-files limit, before verification.
  const std::string profile_file = res["profile_file"];
  std::string text = ReadFile(profile_file);
  const auto at = text.find("\noutputs ");
  ASSERT_NE(at, std::string::npos) << text;
  text.erase(at + 1, text.find('\n', at + 1) - at);
  const std::string twin = dir_ + "/no-outputs.cagent";
  WriteFile(twin, text + "limits {\n  changed-files 20\n}\n");
  h_.GiveToRunUser(dir_);
  ASSERT_EQ(h_.ShAsUser(repo_, "HOME='" + dir_ + "/home' git reset -q --hard && git clean -fdq"),
            0);
  const json failed =
      Run(twin, ToolTurn("run_command", {{"command", build}}) +
                    Edit("calc.c", "/* The sum of a and b. */", "/* a + b */") + Finish());
  EXPECT_EQ(failed.value("status", ""), "failed") << failed.dump(2);
  EXPECT_THAT(failed.value("reason", ""),
              HasSubstr("files changed; the profile allows at most 20"));
  EXPECT_GT(failed["changed_files"].size(), 20U);
  EXPECT_EQ(failed["left_out"]["files"], 0);
}

}  // namespace
}  // namespace cagent::testing
