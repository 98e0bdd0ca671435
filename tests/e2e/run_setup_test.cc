// `cagent run` end to end for issue 19: real projects complete from a clean clone with a short
// profile. A Node project whose dependencies a setup command installs from a local npm registry, a
// Python project whose setup makes a virtualenv from a local pip index, a C project built by make;
// `cache` kept per profile (read-only to the agent), `carry` of the caller's ignored directories
// (read-only, never through a link), setup failures, setup running again on the verification tree,
// and setup's own network next to the agent's.
//
// The registry and the index are tests/egress_fixtures/serve.py on the host's 127.0.0.2, serving
// what make_fixtures.py builds (tinypkg, for npm and pip), reached under the name pkgs.test through
// `cagent run --resolve`; the marker it carries is unique to this process. Every guard has its
// twin in this file (named in the test's comment).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

extern char** environ;

namespace cagent::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kPython = "/usr/bin/python3";

std::string FixturePath(const std::string& name) {
  return std::string(CAGENT_SOURCE_DIR) + "/tests/egress_fixtures/" + name;
}

bool HostOk(const std::string& command) {
  const std::string line = "(" + command + ") >/dev/null 2>&1";
  return std::system(line.c_str()) == 0;
}

struct Shared {
  std::string skip;   // a tool every test needs is missing
  std::string error;  // the fixtures could not be made or served
  std::string marker;
  std::string site;
  std::string integrity;  // the npm tarball's sha512, for the lockfile
  std::unique_ptr<FixtureServer> registry;
};

Shared& Fixtures() {
  static Shared s;
  return s;
}

json Call(const std::string& name, json args) {
  static int n = 0;
  return json{
      {"id", "call_s" + std::to_string(++n)}, {"name", name}, {"arguments", std::move(args)}};
}

std::string Turn(const json& call) {
  return json{{"tool_calls", json::array({call})},
              {"usage", {{"input_tokens", 100}, {"output_tokens", 10}}}}
             .dump() +
         "\n";
}

std::string Finish() { return Turn(Call("finish", {{"summary", "fixed"}})); }

// The agent reads `file` and turns `from` into `to` (edit_file needs the file read first).
std::string Fix(const std::string& file, const std::string& from, const std::string& to) {
  return Turn(Call("read_file", {{"path", file}})) +
         Turn(Call("edit_file", {{"path", file}, {"old_string", from}, {"new_string", to}}));
}

std::string Shell(const std::string& command) {
  return Turn(Call("run_command", {{"command", command}}));
}

class RunSetup : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Shared& f = Fixtures();
    if (::access(kPython, X_OK) != 0) {
      f.skip = "/usr/bin/python3 is missing: it serves the local registry";
      return;
    }
    if (!HostOk("git --version")) {
      f.skip = "git is not installed";
      return;
    }
    f.marker = "setup-marker-" + std::to_string(::getpid());
    f.site = Harness::Get().base() + "/setup-site";
    if (!HostOk(std::string(kPython) + " '" + FixturePath("make_fixtures.py") + "' '" + f.site +
                "' --marker " + f.marker)) {
      f.error = "make_fixtures.py failed";
      return;
    }
    const json packument = json::parse(ReadFile(f.site + "/npm/tinypkg.json.in"), nullptr, false);
    if (!packument.is_object()) {
      f.error = "make_fixtures.py wrote no npm packument";
      return;
    }
    f.integrity = packument["versions"]["1.0.0"]["dist"]["integrity"].get<std::string>();
    f.registry = FixtureServer::Spawn({"--addr", "127.0.0.2", "--root", f.site}, &f.error);
    if (f.registry && !f.registry->WaitForPort(&f.error)) f.registry.reset();
  }
  static void TearDownTestSuite() { Fixtures().registry.reset(); }

  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    if (!f_.skip.empty()) GTEST_SKIP() << f_.skip;
    ASSERT_EQ(f_.error, "");
    ASSERT_NE(f_.registry, nullptr);
    dir_ = h_.MakeDir("setup");
    repo_ = dir_ + "/repo";
    fs::create_directories(repo_);
  }

  [[nodiscard]] std::string Port() const { return f_.registry->port(); }
  [[nodiscard]] std::string Host() const { return "pkgs.test:" + Port(); }

  // A Node project depending on tinypkg 1.0.0 from the local registry: package.json, a lockfile,
  // an .npmrc naming the registry, node_modules ignored, and a bug for the agent (add subtracts).
  // Its tests check the sum and the dependency's marker.
  void WriteNodeProject() {
    WriteFile(repo_ + "/package.json", R"({"name":"app","version":"1.0.0","private":true,)"
                                       R"("dependencies":{"tinypkg":"1.0.0"}})"
                                       "\n");
    const json lock = {
        {"name", "app"},
        {"version", "1.0.0"},
        {"lockfileVersion", 3},
        {"requires", true},
        {"packages",
         {{"", {{"name", "app"}, {"version", "1.0.0"}, {"dependencies", {{"tinypkg", "1.0.0"}}}}},
          {"node_modules/tinypkg",
           {{"version", "1.0.0"},
            {"resolved", "http://" + Host() + "/npm/tinypkg/-/tinypkg-1.0.0.tgz"},
            {"integrity", f_.integrity},
            {"license", "MIT"}}}}}};
    WriteFile(repo_ + "/package-lock.json", lock.dump(2) + "\n");
    WriteFile(repo_ + "/.npmrc", "registry=http://" + Host() + "/npm/\nupdate-notifier=false\n");
    // Without a trailing slash: a node_modules that is a link is ignored too.
    WriteFile(repo_ + "/.gitignore", "node_modules\n*.out\n");
    WriteFile(repo_ + "/app.js",
              "exports.add = (a, b) => a - b;\n"
              "exports.marker = () => require(\"tinypkg\").marker;\n");
    WriteFile(repo_ + "/app.test.js",
              "const test = require(\"node:test\");\n"
              "const assert = require(\"node:assert\");\n"
              "const app = require(\"./app\");\n"
              "test(\"add\", () => assert.strictEqual(app.add(2, 3), 5));\n"
              "test(\"dependency\", () => assert.strictEqual(app.marker(), \"" +
                  f_.marker + "\"));\n");
  }

  // The fix of WriteNodeProject's bug.
  static std::string NodeFix() { return Fix("app.js", "a - b", "a + b"); }

  // node_modules/tinypkg as npm would have installed it, at `root`.
  void WriteInstalledTinypkg(const std::string& root) {
    WriteFile(root + "/tinypkg/package.json",
              R"({"name":"tinypkg","version":"1.0.0","main":"index.js"})"
              "\n");
    WriteFile(root + "/tinypkg/index.js", "module.exports = { marker: \"" + f_.marker + "\" };\n");
  }

  static std::string NpmCi() {
    return "npm ci --no-audit --no-fund --fetch-retries=0 --fetch-timeout=10000";
  }

  // frontend + `extra` + verify { node --test }, as dir_/NAME.cagent (the profile's name is NAME).
  std::string NodeProfile(const std::string& name, const std::string& extra) {
    const std::string path = dir_ + "/" + name + ".cagent";
    WriteFile(path, "description \"issue 19 e2e: a Node project\"\nextends frontend\n" + extra +
                        "\nverify {\n  run \"node --test\" timeout 60s\n}\n");
    return path;
  }
  std::string NodeSetup() const {
    return "setup {\n  run \"" + NpmCi() + "\" timeout 60s\n  hosts {\n    allow " + Host() +
           "\n  }\n}\n";
  }

  // The repository committed on main and everything handed to the user cagent runs as.
  void Commit() {
    h_.MakeDemoRepo(repo_, /*copy=*/false);
    h_.GiveToRunUser(dir_);
    ASSERT_FALSE(HasFailure()) << "setting up the repository";
  }

  RunOptions Env() const {
    RunOptions o;
    o.extra_env = {"XDG_STATE_HOME=" + dir_ + "/state", "XDG_CACHE_HOME=" + dir_ + "/cache"};
    o.timeout = std::chrono::seconds(100);
    return o;
  }

  // `cagent run --profile PROFILE --json` on repo_ with the replayed `session`, pkgs.test resolved
  // to the registry.
  json Run(const std::string& profile, const std::string& session, RunResult* raw = nullptr) {
    const std::string file = dir_ + "/session-" + std::to_string(++sessions_) + ".jsonl";
    WriteFile(file, session);
    WriteFile(dir_ + "/task.md", "Fix the bug the tests show.\n");
    const RunResult r = h_.Run(
        {"run", "--profile", profile, "--repo", repo_, "--model", "replay:" + file, "--approve",
         "never", "--json", "--resolve", Host() + ":127.0.0.2", dir_ + "/task.md"},
        Env());
    if (raw != nullptr) *raw = r;
    const auto brace = r.out.find('{');
    json res =
        brace == std::string::npos ? json() : json::parse(r.out.substr(brace), nullptr, false);
    if (!res.is_object()) {
      ADD_FAILURE() << "no result.json on stdout (exit " << r.exit_code << ")\n"
                    << r.out << "\n"
                    << r.err;
      return json::object();
    }
    return res;
  }

  // The events of the run's log named `event`.
  static std::vector<json> Events(const json& res, const std::string& event) {
    std::vector<json> out;
    const std::string text = ReadFile(res.value("event_log", ""));
    std::size_t start = 0;
    while (start < text.size()) {
      const std::size_t end = std::min(text.find('\n', start), text.size());
      const json e = json::parse(text.substr(start, end - start), nullptr, false);
      if (e.is_object() && e.value("event", "") == event) out.push_back(e);
      start = end + 1;
    }
    return out;
  }

  // `cagent cache ARGS... --json`.
  json Cache(std::vector<std::string> args) {
    args.insert(args.begin(), "cache");
    args.emplace_back("--json");
    const RunResult r = h_.Run(args, Env());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out, nullptr, false);
  }

  static std::string Dump(const json& res) { return res.dump(2); }

  // The host directory of `profile`'s cache ~/.npm for this test's repository: caches are keyed
  // by profile and repository (PROFILE@REPO-HASH, issue 32); "" when there is none.
  std::string NpmCacheDir(const std::string& profile) const {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ + "/cache/cagent/caches", ec)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with(profile + "@repo-")) return e.path().string() + "/.npm";
    }
    return "";
  }

  Harness& h_ = Harness::Get();
  Shared& f_ = Fixtures();
  std::string dir_, repo_;
  int sessions_ = 0;
};

#define NEED_TOOL(tool)                                                  \
  do {                                                                   \
    if (!HostOk("command -v " tool)) {                                   \
      GTEST_SKIP() << tool " is not installed, so this test cannot run"; \
    }                                                                    \
  } while (false)

// ---- 1. a Node project with dependencies ----

TEST_F(RunSetup, ANodeProjectWithDependenciesCompletesVerified) {
  NEED_TOOL("node");
  NEED_TOOL("npm");
  WriteNodeProject();
  Commit();
  const json res = Run(NodeProfile("node", NodeSetup() + "cache ~/.npm\n"), NodeFix() + Finish());
  ASSERT_EQ(res.value("status", ""), "completed") << Dump(res);
  EXPECT_EQ(res["exit_code"], 0);
  EXPECT_EQ(res["verified"], true);
  ASSERT_EQ(res["verification"].size(), 1U);
  EXPECT_EQ(res["verification"][0]["status"], "passed");
  ASSERT_EQ(res["changed_files"].size(), 1U) << Dump(res);
  EXPECT_EQ(res["changed_files"][0]["path"], "app.js");
  // Setup ran on the workspace, then again on the verification tree (the tree verified).
  ASSERT_EQ(res["setup"]["workspace"].size(), 1U) << Dump(res);
  ASSERT_EQ(res["setup"]["verify_tree"].size(), 1U) << Dump(res);
  for (const json& s : {res["setup"]["workspace"][0], res["setup"]["verify_tree"][0]}) {
    EXPECT_EQ(s["command"], NpmCi());
    EXPECT_EQ(s["status"], "passed");
    EXPECT_EQ(s["exit_code"], 0);
  }
  EXPECT_EQ(res["setup"]["verify_tree"][0]["tree"], res["verification"][0]["tree"]);
  EXPECT_THAT(res["setup"]["workspace"][0]["log"].get<std::string>(),
              ::testing::EndsWith("/logs/01-setup.log"));
  EXPECT_THAT(res["setup"]["verify_tree"][0]["log"].get<std::string>(),
              ::testing::EndsWith("/logs/01-verify-setup.log"));
  // The dependency came from the local registry, through setup's proxy, and is in the workspace.
  EXPECT_THAT(ReadFile(res["workspace"].get<std::string>() + "/node_modules/tinypkg/index.js"),
              HasSubstr(f_.marker));
  // Each setup command is an audit event, where it ran included.
  const std::vector<json> setups = Events(res, "setup");
  ASSERT_EQ(setups.size(), 2U);
  EXPECT_EQ(setups[0]["detail"]["where"], "workspace");
  EXPECT_EQ(setups[0]["detail"]["log"], "logs/01-setup.log");
  EXPECT_EQ(setups[1]["detail"]["where"], "verify-tree");
  EXPECT_EQ(setups[1]["detail"]["status"], "passed");
  bool fetched = false;
  for (const json& e : Events(res, "egress")) {
    if (e["verdict"] == "allow" && e["detail"]["host"] == "pkgs.test") {
      fetched = true;
      EXPECT_EQ(e["detail"]["phase"], "setup");
    }
  }
  EXPECT_TRUE(fetched) << "no allowed connection to the registry in the event log";
  EXPECT_EQ(h_.Run({"log", "verify", res["event_log"].get<std::string>()}).exit_code, 0);
}

TEST_F(RunSetup, TheSameNodeProjectWithoutSetupFailsVerificationForItsMissingModule) {
  // Twin of the test above: the same project, profile and agent, no setup block.
  NEED_TOOL("node");
  WriteNodeProject();
  Commit();
  const json res = Run(NodeProfile("node", "cache ~/.npm\n"), NodeFix() + Finish());
  EXPECT_EQ(res.value("status", ""), "failed") << Dump(res);
  EXPECT_EQ(res["exit_code"], 1);
  ASSERT_EQ(res["verification"].size(), 1U);
  EXPECT_EQ(res["verification"][0]["status"], "failed");
  EXPECT_THAT(ReadFile(res["verification"][0]["log"].get<std::string>()),
              HasSubstr("Cannot find module 'tinypkg'"));
  EXPECT_TRUE(res["setup"]["workspace"].empty()) << Dump(res);
  EXPECT_TRUE(res["setup"]["verify_tree"].empty()) << Dump(res);
}

TEST_F(RunSetup, TheCacheIsKeptBetweenRunsReadOnlyToTheAgentAndClearedOnRequest) {
  NEED_TOOL("node");
  NEED_TOOL("npm");
  WriteNodeProject();
  Commit();
  const std::string profile = NodeProfile("node", NodeSetup() + "cache ~/.npm\n");
  const json first = Run(profile, NodeFix() + Finish());
  ASSERT_EQ(first.value("status", ""), "completed") << Dump(first);
  const std::string cache_dir = NpmCacheDir("node");
  ASSERT_NE(cache_dir, "") << "no cache directory for node@repo-...";
  json ls = Cache({"ls"});
  ASSERT_TRUE(ls.is_array() && ls.size() == 1U) << ls.dump(2);
  EXPECT_EQ(ls[0]["profile"], "node");
  EXPECT_EQ(ls[0]["path"], "~/.npm");
  EXPECT_THAT(ls[0]["repository"].get<std::string>(), ::testing::StartsWith("repo-"));
  EXPECT_EQ(ls[0]["dir"], cache_dir);
  EXPECT_GT(ls[0]["files"].get<int>(), 0);

  // The second run's agent finds ~/.npm as setup left it, and cannot write it: its writes land
  // in a private layer over the cache (issue 32: npm writes into its cache on every command) that
  // goes with the sandbox, or, without overlayfs, fail.
  const std::string session =
      NodeFix() +
      Shell(
          "ls ~/.npm/_cacache > cache-seen.out; touch ~/.npm/agent-was-here; echo $? > touch.out") +
      Finish();
  const json second = Run(profile, session);
  ASSERT_EQ(second.value("status", ""), "completed") << Dump(second);
  const std::string ws = second["workspace"];
  EXPECT_THAT(ReadFile(ws + "/cache-seen.out"), HasSubstr("index-v5"));
  EXPECT_FALSE(fs::exists(cache_dir + "/agent-was-here"));

  // Twin: `cache read-write` gives the agent the same directory writable.
  const json writable =
      Run(NodeProfile("node", NodeSetup() + "cache read-write ~/.npm\n"), session);
  ASSERT_EQ(writable.value("status", ""), "completed") << Dump(writable);
  EXPECT_EQ(ReadFile(writable["workspace"].get<std::string>() + "/touch.out"), "0\n");
  EXPECT_TRUE(fs::exists(cache_dir + "/agent-was-here"));

  // `cagent cache clear node` removes it.
  const json cleared = Cache({"clear", "node"});
  EXPECT_EQ(cleared["removed"], 1) << cleared.dump(2);
  EXPECT_EQ(cleared["profile"], "node");
  EXPECT_FALSE(fs::exists(cache_dir));
  ls = Cache({"ls"});
  EXPECT_TRUE(ls.is_array() && ls.empty()) << ls.dump(2);
}

// ---- 2. a Python project with a virtualenv ----

TEST_F(RunSetup, APythonProjectWithAVirtualenvCompletesVerified) {
  // The virtualenv borrows the system's pip (--system-site-packages --without-pip): no ensurepip,
  // which Debian ships apart (python3-venv) and which takes seconds per tree.
  if (!HostOk(std::string(kPython) + " -c 'import venv, pip'")) {
    GTEST_SKIP() << kPython << " has no venv or pip module (Debian: python3-pip)";
  }
  WriteFile(repo_ + "/.gitignore", ".venv/\n__pycache__/\n");
  WriteFile(repo_ + "/calc.py", "def add(a, b):\n    return a - b\n");
  WriteFile(repo_ + "/test_calc.py",
            "import unittest\n\nimport tinypkg\n\nfrom calc import add\n\n\n"
            "class T(unittest.TestCase):\n"
            "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
            "    def test_dependency(self):\n        self.assertEqual(tinypkg.MARKER, \"" +
                f_.marker + "\")\n");
  const std::string profile = dir_ + "/py.cagent";
  WriteFile(profile,
            "description \"issue 19 e2e: a Python project\"\nextends backend\nsetup {\n"
            "  run \"" +
                std::string(kPython) +
                " -m venv --without-pip --system-site-packages .venv && .venv/bin/python -m pip "
                "install -q --disable-pip-version-check "
                "--no-input --retries 0 --timeout 10 --trusted-host pkgs.test "
                "--index-url http://" +
                Host() + "/simple tinypkg\" timeout 90s\n  hosts {\n    allow " + Host() +
                "\n  }\n}\ncache ~/.cache/pip\n"
                "verify {\n  run \".venv/bin/python -m unittest -q\" timeout 60s\n}\n");
  Commit();
  const json res = Run(profile, Fix("calc.py", "a - b", "a + b") + Finish());
  ASSERT_EQ(res.value("status", ""), "completed")
      << Dump(res) << "\n"
      << ReadFile(res["setup"]["workspace"].empty()
                      ? ""
                      : res["setup"]["workspace"][0]["log"].get<std::string>());
  EXPECT_EQ(res["verification"][0]["status"], "passed");
  EXPECT_EQ(res["setup"]["verify_tree"][0]["status"], "passed");
  ASSERT_EQ(res["changed_files"].size(), 1U) << Dump(res);
  EXPECT_EQ(res["changed_files"][0]["path"], "calc.py");
}

// ---- 3. a C project ----

TEST_F(RunSetup, ACProjectCompletesVerified) {
  NEED_TOOL("make");
  NEED_TOOL("cc");
  WriteFile(repo_ + "/.gitignore", "/t\n*.o\n");
  WriteFile(repo_ + "/calc.c", "int add(int a, int b) { return a - b; }\n");
  WriteFile(repo_ + "/t.c",
            "#include <stdio.h>\nint add(int, int);\n"
            "int main(void) { if (add(2, 3) != 5) { puts(\"add is wrong\"); return 1; }\n"
            "  puts(\"ok\"); return 0; }\n");
  WriteFile(repo_ + "/Makefile", "t: t.c calc.c\n\tcc -o t t.c calc.c\n\ntest: t\n\t./t\n");
  const std::string profile = dir_ + "/c.cagent";
  WriteFile(profile,
            "description \"issue 19 e2e: a C project\"\nextends backend\n"
            "verify {\n  run \"make test\" timeout 60s\n}\n");
  Commit();
  const json res = Run(profile, Fix("calc.c", "a - b", "a + b") + Finish());
  ASSERT_EQ(res.value("status", ""), "completed") << Dump(res);
  EXPECT_EQ(res["verification"][0]["status"], "passed");
  EXPECT_THAT(ReadFile(res["verification"][0]["log"].get<std::string>()), HasSubstr("ok\n"));
  ASSERT_EQ(res["changed_files"].size(), 1U) << Dump(res);
  EXPECT_EQ(res["changed_files"][0]["path"], "calc.c");
}

// ---- 4. carry ----

TEST_F(RunSetup, ACarriedNodeModulesIsUsedReadOnlyAndTheCheckoutStaysAsItWas) {
  // Twin of the link test below: the same profile over a real directory.
  NEED_TOOL("node");
  WriteNodeProject();
  WriteInstalledTinypkg(repo_ + "/node_modules");
  Commit();
  const std::string session =
      NodeFix() +
      Shell(
          "touch node_modules/x; echo $? > carry-touch.out; touch y.out; echo $? > ws-touch.out") +
      Finish();
  const json res = Run(NodeProfile("carry", "carry node_modules\n"), session);
  ASSERT_EQ(res.value("status", ""), "completed") << Dump(res);
  EXPECT_EQ(res["verification"][0]["status"], "passed");
  const std::string ws = res["workspace"];
  EXPECT_NE(ReadFile(ws + "/carry-touch.out"), "0\n") << "node_modules was writable";
  EXPECT_EQ(ReadFile(ws + "/ws-touch.out"), "0\n") << "the workspace itself was not writable";
  EXPECT_FALSE(fs::exists(repo_ + "/node_modules/x"));
  EXPECT_THAT(ReadFile(repo_ + "/node_modules/tinypkg/index.js"), HasSubstr(f_.marker));
  ASSERT_EQ(res["changed_files"].size(), 1U) << Dump(res);
}

TEST_F(RunSetup, ACarryPathThatIsAbsentFailsTheRunBeforeTheAgent) {
  NEED_TOOL("node");
  WriteNodeProject();
  Commit();
  const json res = Run(NodeProfile("carry", "carry node_modules\n"), NodeFix() + Finish());
  EXPECT_EQ(res.value("status", ""), "failed") << Dump(res);
  EXPECT_THAT(res.value("reason", ""), HasSubstr("carry node_modules"));
  EXPECT_THAT(res.value("reason", ""), HasSubstr("there is no node_modules"));
  EXPECT_EQ(res["usage"]["model_turns"], 0) << Dump(res);
}

TEST_F(RunSetup, ACarryPathTheRepositoryTracksFailsTheRun) {
  NEED_TOOL("node");
  WriteNodeProject();
  WriteFile(repo_ + "/.gitignore", "*.out\n");
  WriteInstalledTinypkg(repo_ + "/node_modules");  // committed
  Commit();
  const json res = Run(NodeProfile("carry", "carry node_modules\n"), NodeFix() + Finish());
  EXPECT_EQ(res.value("status", ""), "failed") << Dump(res);
  EXPECT_THAT(res.value("reason", ""), HasSubstr("carry node_modules"));
  EXPECT_THAT(res.value("reason", ""), HasSubstr("carry only paths the repository ignores"));
  EXPECT_EQ(res["usage"]["model_turns"], 0) << Dump(res);
}

TEST_F(RunSetup, ACarryPathThatIsALinkInTheCheckoutIsRefused) {
  // Twin: ACarriedNodeModulesIsUsedReadOnlyAndTheCheckoutStaysAsItWas (a real directory).
  NEED_TOOL("node");
  WriteNodeProject();
  const std::string secret = dir_ + "/secret";
  WriteInstalledTinypkg(secret);
  WriteFile(secret + "/credentials", "secret-" + f_.marker + "\n");
  Commit();
  for (const std::string& target : {secret, std::string("/etc")}) {
    SCOPED_TRACE(target);
    fs::remove(repo_ + "/node_modules");
    fs::create_directory_symlink(target, repo_ + "/node_modules");
    const std::string session =
        NodeFix() + Shell("cat node_modules/credentials > seen.out; ls node_modules > ls.out") +
        Finish();
    const json res = Run(NodeProfile("carry", "carry node_modules\n"), session);
    EXPECT_EQ(res.value("status", ""), "failed") << Dump(res);
    EXPECT_THAT(res.value("reason", ""), HasSubstr("not a directory reached without links"));
    EXPECT_EQ(res["usage"]["model_turns"], 0) << Dump(res);
    const std::string ws = res.value("workspace", "");
    EXPECT_FALSE(fs::exists(ws + "/seen.out"));
    EXPECT_FALSE(fs::exists(ws + "/node_modules/credentials"));
  }
}

// The base profile's `deny **/.env` hides a project's .env from the agent's commands; a .env in a
// carried directory is hidden the same way (the deny rules are walked beneath the carried
// checkout directory, and the hides land inside the carry bind).
TEST_F(RunSetup, ADeniedFileInACarriedDirectoryIsHiddenLikeOneInTheWorkspace) {
  NEED_TOOL("node");
  WriteNodeProject();
  WriteInstalledTinypkg(repo_ + "/node_modules");
  WriteFile(repo_ + "/config/.env", "tracked-" + f_.marker + "\n");
  WriteFile(repo_ + "/node_modules/tinypkg/.env", "carried-" + f_.marker + "\n");
  Commit();
  const std::string session =
      NodeFix() +
      Shell(
          "cat config/.env > tracked.out; cat node_modules/tinypkg/.env > carried.out; "
          "cat node_modules/tinypkg/index.js > visible.out; true") +
      Finish();
  const json res = Run(NodeProfile("carry", "carry node_modules\n"), session);
  ASSERT_EQ(res.value("status", ""), "completed") << Dump(res);
  const std::string ws = res["workspace"];
  // Twin: a file of the carried tree that no rule denies is read through the same bind.
  EXPECT_THAT(ReadFile(ws + "/visible.out"), HasSubstr(f_.marker));
  // The workspace's own .env is hidden, and so is the carried one.
  EXPECT_THAT(ReadFile(ws + "/tracked.out"), Not(HasSubstr(f_.marker)));
  EXPECT_THAT(ReadFile(ws + "/carried.out"), Not(HasSubstr(f_.marker)))
      << "a .env below a carried directory was readable inside the sandbox";
  // The checkout's file is untouched.
  EXPECT_THAT(ReadFile(repo_ + "/node_modules/tinypkg/.env"), HasSubstr(f_.marker));
}

// ---- 5. a failing setup ----

TEST_F(RunSetup, AFailingSetupCommandEndsTheRunBeforeTheAgentAndTheRestAreNotRun) {
  NEED_TOOL("node");
  WriteNodeProject();
  Commit();
  const std::string profile = NodeProfile(
      "failing", "setup {\n  run \"echo about to fail; exit 3\"\n  run \"touch second.out\"\n}\n");
  RunResult raw;
  const json res = Run(profile, NodeFix() + Finish(), &raw);
  EXPECT_EQ(raw.exit_code, 3);
  EXPECT_EQ(res.value("status", ""), "failed") << Dump(res);
  const std::string reason = res.value("reason", "");
  EXPECT_THAT(reason, HasSubstr("setup: 'echo about to fail; exit 3' failed (exit status 3)"));
  EXPECT_THAT(reason, HasSubstr("its output is in "));
  EXPECT_THAT(reason, HasSubstr("/logs/01-setup.log"));
  EXPECT_EQ(res["usage"]["model_turns"], 0) << Dump(res);
  EXPECT_EQ(res["usage"]["input_tokens"], 0);
  ASSERT_EQ(res["setup"]["workspace"].size(), 2U) << Dump(res);
  const json& first = res["setup"]["workspace"][0];
  EXPECT_EQ(first["status"], "failed");
  EXPECT_EQ(first["exit_code"], 3);
  EXPECT_THAT(ReadFile(first["log"].get<std::string>()), HasSubstr("about to fail"));
  EXPECT_EQ(res["setup"]["workspace"][1]["status"], "not-run");
  EXPECT_TRUE(res["setup"]["verify_tree"].empty());
  EXPECT_FALSE(fs::exists(res["workspace"].get<std::string>() + "/second.out"));
  EXPECT_EQ(res["verification"][0]["status"], "not-run");
  const std::vector<json> setups = Events(res, "setup");
  ASSERT_GE(setups.size(), 1U);
  EXPECT_EQ(setups[0]["detail"]["status"], "failed");
  EXPECT_EQ(setups[0]["detail"]["exit_code"], 3);
  EXPECT_TRUE(Events(res, "hello").empty()) << "the agent started";
}

TEST_F(RunSetup, SetupThatChangesWhatGitSeesFailsTheRunBeforeTheAgent) {
  // What setup writes to a tracked or a not-ignored path would be captured as the agent's work.
  NEED_TOOL("node");
  WriteNodeProject();
  Commit();
  // Twin: the same kind of write to an ignored path (*.out) is setup's to make: the agent runs
  // (verification then fails for want of the dependencies no setup installed here).
  const json ok = Run(NodeProfile("ignored", "setup {\n  run \"echo made > made.out\"\n}\n"),
                      NodeFix() + Finish());
  EXPECT_THAT(ok.value("reason", ""), Not(HasSubstr("setup"))) << Dump(ok);
  EXPECT_GT(ok["usage"]["model_turns"].get<int>(), 0) << Dump(ok);
  EXPECT_EQ(ReadFile(ok["workspace"].get<std::string>() + "/made.out"), "made\n");

  const json res = Run(NodeProfile("tracked",
                                   "setup {\n  run \"echo '{}' > package.json; echo new > "
                                   "generated.js\"\n}\n"),
                       NodeFix() + Finish());
  EXPECT_EQ(res.value("status", ""), "failed") << Dump(res);
  EXPECT_THAT(res.value("reason", ""),
              HasSubstr("setup changed files that git tracks or does not ignore (generated.js, "
                        "package.json)"));
  EXPECT_EQ(res["usage"]["model_turns"], 0) << Dump(res);
  EXPECT_TRUE(Events(res, "hello").empty()) << "the agent started";
}

// ---- 6. verification never sees the agent's copy of the dependencies ----

TEST_F(RunSetup, VerificationRunsSetupAgainAndNeverSeesTheAgentsDependencies) {
  NEED_TOOL("node");
  NEED_TOOL("npm");
  WriteNodeProject();
  Commit();
  const std::string tampered = "module.exports = { marker: \"tampered\" };\n";
  const std::string session =
      NodeFix() + Turn(Call("read_file", {{"path", "node_modules/tinypkg/index.js"}})) +
      Turn(Call("write_file", {{"path", "node_modules/tinypkg/index.js"}, {"content", tampered}})) +
      Finish();
  const json res = Run(NodeProfile("node", NodeSetup() + "cache ~/.npm\n"), session);
  ASSERT_EQ(res.value("status", ""), "completed") << Dump(res);
  EXPECT_EQ(res["verification"][0]["status"], "passed");
  // The agent did tamper with its workspace's copy (which would fail the dependency test) ...
  EXPECT_EQ(ReadFile(res["workspace"].get<std::string>() + "/node_modules/tinypkg/index.js"),
            tampered);
  // ... but the file is ignored (not in the patch), and the verification tree has its own.
  ASSERT_EQ(res["changed_files"].size(), 1U) << Dump(res);
  EXPECT_EQ(res["changed_files"][0]["path"], "app.js");
  EXPECT_THAT(
      ReadFile(res["run_dir"].get<std::string>() + "/verify-tree/node_modules/tinypkg/index.js"),
      HasSubstr(f_.marker));
}

// The agent's patch reaches the verification tree's setup: `npm ci` there runs the patched
// package.json's install scripts (with setup's hosts). A cache that is read-only to the agent must
// stay so through them: the verification tree's setup gets the caches read-only. Before that fix
// this test failed (the script wrote the profile's ~/.npm on the host).
TEST_F(RunSetup, TheAgentCannotWriteTheCacheThroughTheVerificationTreesSetup) {
  // Twin: TheCacheIsKeptBetweenRunsReadOnlyToTheAgentAndClearedOnRequest (its direct touch fails).
  NEED_TOOL("node");
  NEED_TOOL("npm");
  WriteNodeProject();
  Commit();
  const std::string poisoned =
      R"({"name":"app","version":"1.0.0","private":true,"dependencies":{"tinypkg":"1.0.0"},)"
      R"("scripts":{"preinstall":"touch $HOME/.npm/written-by-the-agents-patch"}})"
      "\n";
  const std::string session =
      NodeFix() + Turn(Call("read_file", {{"path", "package.json"}})) +
      Turn(Call("write_file", {{"path", "package.json"}, {"content", poisoned}})) + Finish();
  const json res = Run(NodeProfile("node", NodeSetup() + "cache ~/.npm\n"), session);
  EXPECT_THAT(Dump(res["changed_files"]), HasSubstr("package.json"));
  EXPECT_FALSE(fs::exists(NpmCacheDir("node") + "/written-by-the-agents-patch"))
      << "the agent's package.json wrote the read-only cache through the verification tree's "
         "setup";
}

// ---- 7. setup's network and the agent's ----

TEST_F(RunSetup, SetupCannotFetchFromAHostItsHostsDoNotAllow) {
  // Twin: ANodeProjectWithDependenciesCompletesVerified (the same npm ci, pkgs.test allowed).
  NEED_TOOL("node");
  NEED_TOOL("npm");
  WriteNodeProject();
  Commit();
  const std::string profile = NodeProfile(
      "node", "setup {\n  run \"" + NpmCi() +
                  "\" timeout 60s\n  hosts {\n    allow other.test:" + Port() + "\n  }\n}\n");
  const json res = Run(profile, NodeFix() + Finish());
  EXPECT_EQ(res.value("status", ""), "failed") << Dump(res);
  EXPECT_THAT(res.value("reason", ""), HasSubstr("setup: '" + NpmCi() + "' failed"));
  // The summary says what was refused and how to allow it (npm's own error does not; issue #32).
  // (npm asks registry.npmjs.org first, refused by the proxy like pkgs.test; the hint names the
  // first refused.)
  EXPECT_THAT(res.value("reason", ""), HasSubstr("; refused: "));
  EXPECT_THAT(res.value("reason", ""), HasSubstr("pkgs.test:" + Port() + ";"));
  EXPECT_THAT(res.value("reason", ""),
              HasSubstr("network: profile 'node' reaches only the hosts its hosts section "
                        "allows"));
  EXPECT_THAT(res.value("reason", ""),
              HasSubstr("to allow it: a rule in the profile's hosts section: allow "));
  EXPECT_EQ(res["usage"]["model_turns"], 0);
  bool denied = false;
  for (const json& e : Events(res, "egress")) {
    if (e["detail"]["host"] == "pkgs.test") {
      EXPECT_EQ(e["verdict"], "deny") << e.dump();
      EXPECT_EQ(e["detail"]["phase"], "setup");
      denied = true;
    }
  }
  EXPECT_TRUE(denied) << "no refused connection to pkgs.test in the event log";
  const std::vector<json> setups = Events(res, "setup");
  ASSERT_FALSE(setups.empty());
  EXPECT_THAT(setups[0]["detail"]["refused"].dump(), HasSubstr("pkgs.test:" + Port()));
  EXPECT_EQ(setups[0]["detail"]["network_hints"].size(), 1U) << setups[0].dump();
  EXPECT_FALSE(fs::exists(res["workspace"].get<std::string>() + "/node_modules/tinypkg/index.js"));
}

TEST_F(RunSetup, AFailedVerifyCommandSaysTheProfileHasNoNetwork) {
  // frontend has no hosts section: a verify command's lookup is "no such name" at once, and the
  // summary of its failure says why and how to allow a host (issue #32). Its twin is
  // ANodeProjectWithDependenciesCompletesVerified, whose verify command needs no network and
  // passes without any such line.
  NEED_TOOL("node");
  WriteNodeProject();
  Commit();
  const std::string path = dir_ + "/lookup.cagent";
  WriteFile(path,
            "description \"issue 32 e2e\"\nextends frontend\nverify {\n  run \"getent hosts "
            "example.com\" timeout 60s\n}\n");
  h_.GiveToRunUser(dir_);
  const json res = Run(path, NodeFix() + Finish());
  EXPECT_EQ(res.value("status", ""), "failed") << Dump(res);
  const std::string reason = res.value("reason", "");
  EXPECT_THAT(reason, HasSubstr("verification: 'getent hosts example.com' failed (exit status 2; "
                                "refused: example.com (lookup); network: profile 'lookup' has no "
                                "network beyond loopback (network loopback)"));
  EXPECT_THAT(reason, HasSubstr("a -registries profile"));
  EXPECT_THAT(reason, Not(HasSubstr("--allow-host"))) << "cagent run has no --allow-host";
  const std::vector<json> verifies = Events(res, "verify");
  ASSERT_FALSE(verifies.empty());
  EXPECT_EQ(verifies[0]["detail"]["refused"], json::array({"example.com (lookup)"}));
}

TEST_F(RunSetup, TheAgentCannotReachTheRegistrySetupReached) {
  // One run, its own twin: setup fetches the registry's file with node's fetch (and installs the
  // dependency); the agent runs the same fetch under the profile's network (frontend: loopback,
  // no hosts) and fails, by name and by address.
  NEED_TOOL("node");
  NEED_TOOL("npm");
  WriteNodeProject();
  // fetch.js URL OUT: OUT gets the body, or OUT.error the reason.
  WriteFile(repo_ + "/fetch.js",
            "const [url, out] = process.argv.slice(2);\n"
            "const fs = require(\"fs\");\n"
            "fetch(url).then((r) => r.text()).then((t) => fs.writeFileSync(out, t),\n"
            "  (e) => { fs.writeFileSync(out + \".error\", String(e.cause || e)); "
            "process.exitCode = 1; });\n");
  auto fetch = [](const std::string& url, const std::string& out) {
    return "node fetch.js " + url + " " + out;
  };
  const std::string by_name = "http://" + Host() + "/f";
  const std::string by_addr = "http://127.0.0.2:" + Port() + "/f";
  const std::string profile =
      NodeProfile("node", "setup {\n  run \"" + NpmCi() + "\" timeout 60s\n  run \"" +
                              fetch(by_name, "setup-fetch.out") +
                              "\" timeout 30s\n  hosts {\n    allow " + Host() + "\n  }\n}\n");
  Commit();
  const std::string session =
      NodeFix() +
      Shell(fetch(by_name, "agent-name.out") + "; " + fetch(by_addr, "agent-addr.out") + "; true") +
      Finish();
  const json res = Run(profile, session);
  ASSERT_EQ(res.value("status", ""), "completed") << Dump(res);
  const std::string ws = res["workspace"];
  EXPECT_EQ(ReadFile(ws + "/setup-fetch.out"), "cagent-egress-fixture " + f_.marker + "\n");
  EXPECT_FALSE(fs::exists(ws + "/agent-name.out"));
  EXPECT_FALSE(fs::exists(ws + "/agent-addr.out"));
  EXPECT_TRUE(fs::exists(ws + "/agent-name.out.error"));
  EXPECT_TRUE(fs::exists(ws + "/agent-addr.out.error"));
  EXPECT_THAT(ReadFile(ws + "/agent-addr.out.error"), Not(HasSubstr(f_.marker)));
  for (const json& e : Events(res, "egress")) {
    EXPECT_EQ(e["detail"]["phase"], "setup") << "an egress event outside setup: " << e.dump();
  }
}

}  // namespace
}  // namespace cagent::testing
