// End-to-end tests of `cagent policy ...` and `cagent profile init`: the real binary, run in a
// temporary directory with a temporary HOME (so neither the source tree nor the caller's own
// profiles are involved), as the invoking user and as nobody.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

extern char** environ;

namespace cagent::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class PolicyCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    cwd_ = h_.MakeDir("cwd");
    home_ = h_.MakeDir("home");
    out_dir_ = h_.MakeDir("out");
  }

  // Runs `cagent ARGS...` in `cwd` (default: an empty directory) with HOME set to a fresh
  // directory; stdout and stderr go through files so nothing can block.
  RunResult Run(const std::vector<std::string>& args, const std::string& cwd = "") {
    std::vector<std::string> argv = h_.CagentArgv(args);
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "HOME=", 5) != 0) env.emplace_back(*e);
    }
    env.push_back("HOME=" + home_);
    std::vector<char*> cargv, cenv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (auto& e : env) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    const std::string out = out_dir_ + "/stdout", err = out_dir_ + "/stderr";
    const std::string dir = cwd.empty() ? cwd_ : cwd;
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int in = ::open("/dev/null", O_RDONLY);
      if (o < 0 || e < 0 || in < 0 || ::chdir(dir.c_str()) != 0) ::_exit(126);
      ::dup2(in, 0);
      ::dup2(o, 1);
      ::dup2(e, 2);
      ::execve(cargv[0], cargv.data(), cenv.data());
      ::_exit(127);
    }
    RunResult r;
    int status = 0;
    EXPECT_TRUE(WaitForExit(pid, &status, std::chrono::seconds(60))) << "cagent did not finish";
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = ReadAll(out);
    r.err = ReadAll(err);
    return r;
  }

  // A file the cagent under test can read (and, in a MakeDir directory, replace).
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
    ::chmod(path.c_str(), 0644);
  }

  static json Parse(const RunResult& r) {
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << r.out << "\nstderr:\n" << r.err;
    return j;
  }

  // A profile in its own directory, readable by the user cagent runs as.
  std::string Profile(const std::string& name, const std::string& text) {
    const std::string dir = h_.MakeDir("profiles");
    const std::string path = dir + "/" + name + ".cagent";
    Write(path, text);
    return path;
  }

  Harness& h_ = Harness::Get();
  std::string cwd_, home_, out_dir_;
};

std::string Describe(const RunResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

// ---- list ----

TEST_F(PolicyCliTest, ListShowsBuiltinsWithDescriptions) {
  RunResult r = Run({"policy", "list"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (const char* name : {"base", "readonly", "docs", "frontend", "backend"}) {
    EXPECT_THAT(r.out, HasSubstr(std::string("\n") + name + " ")) << Describe(r);
  }
  EXPECT_THAT(r.out, HasSubstr("Back-end projects"));
  EXPECT_THAT(r.out, Not(HasSubstr("WARNING")));
}

TEST_F(PolicyCliTest, ListFlagsARepositoryProfileShadowingABuiltin) {
  ::mkdir((cwd_ + "/.cagent").c_str(), 0755);
  Write(cwd_ + "/.cagent/backend.cagent",
        "description \"the repository's own backend\"\nextends base\nnetwork loopback\n");
  RunResult r = Run({"policy", "list"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("the repository's own backend  [SHADOWS 1]"));
  EXPECT_THAT(r.out, HasSubstr("WARNING: 'backend' resolves to ./.cagent/backend.cagent, which "
                               "shadows <built-in>/backend.cagent"));

  RunResult j = Run({"policy", "list", "--json"});
  ASSERT_EQ(j.exit_code, 0) << Describe(j);
  json doc = Parse(j);
  ASSERT_TRUE(doc["profiles"].is_array());
  bool found = false;
  for (const auto& p : doc["profiles"]) {
    if (p["name"] == "backend") {
      found = true;
      EXPECT_EQ(p["origin"], "./.cagent");
      EXPECT_EQ(p["shadows"], json::array({"<built-in>/backend.cagent"}));
    } else {
      EXPECT_TRUE(p["shadows"].empty()) << p.dump();
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(doc["search_path"].back(), "built-in");
}

// ---- check ----

TEST_F(PolicyCliTest, CheckBuiltins) {
  RunResult r = Run({"policy", "check", "backend", "docs"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, ::testing::MatchesRegex(
                         "ok: backend \\(base -> backend; [0-9]+ rules, [0-9]+ examples "
                         "checked\\)\nok: docs \\(base -> docs; [0-9]+ rules, [0-9]+ examples "
                         "checked\\)\n"));
  // backend's own examples section has 9 entries; base has 4 inline match/not_match, 1 more for
  // git, 1 for rm: each profile counts its own examples and every inline one in its chain.
  EXPECT_THAT(r.out, HasSubstr("examples checked"));

  RunResult j = Run({"policy", "check", "--json", "backend"});
  ASSERT_EQ(j.exit_code, 0) << Describe(j);
  json doc = Parse(j);
  EXPECT_EQ(doc["ok"], true);
  EXPECT_EQ(doc["profiles"][0]["profile"], "backend");
  EXPECT_GT(doc["profiles"][0]["rules"].get<int>(), 10);
  EXPECT_GT(doc["profiles"][0]["examples"].get<int>(), 5);
}

TEST_F(PolicyCliTest, CheckRendersDiagnosticsWithCaretAndFails) {
  const std::string bad = Profile("bad", "extends base\nlimits {\n  wal-time 10m\n}\n");
  RunResult r = Run({"policy", "check", bad, "base"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr(bad + ":3:3: error: "));
  EXPECT_THAT(r.err, HasSubstr("\n    wal-time 10m\n    ^" + std::string(7, '~') + "\n"));
  EXPECT_THAT(r.err, HasSubstr("hint: did you mean 'wall-time'?"));
  EXPECT_THAT(r.out, HasSubstr("FAILED: " + bad + " (1 error)"));
  EXPECT_THAT(r.out, HasSubstr("ok: base"));

  RunResult j = Run({"policy", "check", "--json", bad});
  EXPECT_EQ(j.exit_code, 1) << Describe(j);
  json doc = Parse(j);
  EXPECT_EQ(doc["ok"], false);
  const json& d = doc["profiles"][0]["diagnostics"][0];
  EXPECT_EQ(d["severity"], "error");
  EXPECT_EQ(d["file"], bad);
  EXPECT_EQ(d["line"], 3);
  EXPECT_EQ(d["column"], 3);
  EXPECT_THAT(d["rendered"].get<std::string>(), HasSubstr("^" + std::string(7, '~')));
}

// A file that cannot be read or a name that is not found is a usage error (2), not a profile with
// errors (1; the twin is CheckRendersDiagnosticsWithCaretAndFails).
TEST_F(PolicyCliTest, CheckOfAMissingOrUnreadableFileExitsTwo) {
  const std::string missing = Profile("gone", "extends base\n");
  std::filesystem::remove(missing);
  RunResult r = Run({"policy", "check", missing, "base"});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("not found"));
  EXPECT_THAT(r.out, HasSubstr("ok: base"));
  RunResult n = Run({"policy", "check", "no-such-profile-anywhere"});
  EXPECT_EQ(n.exit_code, 2) << Describe(n);
  if (::geteuid() != 0 || h_.as_nobody()) {
    const std::string locked = Profile("locked", "extends base\n");
    ASSERT_EQ(::chmod(locked.c_str(), 0), 0);
    RunResult u = Run({"policy", "check", locked});
    EXPECT_EQ(u.exit_code, 2) << Describe(u);
    EXPECT_THAT(u.err, HasSubstr("cannot read"));
  }
}

TEST_F(PolicyCliTest, CheckAnExampleThatFails) {
  const std::string p =
      Profile("ex", "extends backend\nexamples {\n  allow command \"git push\"\n}\n");
  RunResult r = Run({"policy", "check", p});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr(p + ":3:9: error: example failed: expected allow"));
}

// ---- show ----

TEST_F(PolicyCliTest, ShowPrintsTheEffectiveProfile) {
  RunResult r = Run({"policy", "show", "backend"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("# chain: base -> backend\n"));
  EXPECT_THAT(r.out, HasSubstr("# files: <built-in>/backend.cagent <built-in>/base.cagent\n"));
  EXPECT_THAT(r.out, HasSubstr("network loopback                                # "
                               "<built-in>/backend.cagent:6:1"));

  RunResult j = Run({"policy", "show", "--json", "readonly"});
  ASSERT_EQ(j.exit_code, 0) << Describe(j);
  json doc = Parse(j);
  EXPECT_EQ(doc["chain"], json::array({"base", "readonly"}));
  EXPECT_EQ(doc["workspace"]["mode"], "read-only");

  RunResult missing = Run({"policy", "show", "no-such-profile"});
  EXPECT_EQ(missing.exit_code, 2) << Describe(missing);
  EXPECT_THAT(missing.err, HasSubstr("no profile named 'no-such-profile'"));
}

// "<built-in>/NAME.cagent:LINE:COL" of the first line of profiles/NAME.cagent holding `text`, with
// COL where `text` starts: expectations that do not break when a profile gains a line above.
// `word`, when given, is where in that line the column points instead ("cgroup" in
// "best-effort cgroup").
std::string BuiltinAt(const std::string& name, const std::string& text,
                      const std::string& word = "") {
  std::ifstream in(std::string(CAGENT_SOURCE_DIR) + "/profiles/" + name + ".cagent");
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::size_t at = line.find(text);
    if (at != std::string::npos && !line.starts_with("#")) {
      if (!word.empty()) at = line.find(word, at);
      return "<built-in>/" + name + ".cagent:" + std::to_string(n) + ":" + std::to_string(at + 1);
    }
  }
  ADD_FAILURE() << "no line of " << name << ".cagent holds '" << text << "'";
  return "";
}

// ---- explain ----

TEST_F(PolicyCliTest, ExplainCommandVerdictsAndExitCodes) {
  RunResult allow = Run({"policy", "explain", "backend", "--", "git", "status", "--short"});
  EXPECT_EQ(allow.exit_code, 0) << Describe(allow);
  EXPECT_THAT(allow.out, HasSubstr("verdict:   allow\n"));
  EXPECT_THAT(allow.out,
              HasSubstr("at:        " + BuiltinAt("base", "git (status | diff | log") + "\n"));

  RunResult deny = Run({"policy", "explain", "backend", "--", "git", "push", "origin", "main"});
  EXPECT_EQ(deny.exit_code, 5) << Describe(deny);
  EXPECT_THAT(deny.out, HasSubstr("verdict:   deny\n"));
  EXPECT_THAT(deny.out, HasSubstr("rule:      commands: deny git push\n"));
  EXPECT_THAT(deny.out, HasSubstr("at:        " + BuiltinAt("base", "git push {") + "\n"));
  // The rule's own reason, written for the agent.
  EXPECT_THAT(deny.out, HasSubstr("reason:    pushing publishes the work"));

  // An ask under never-ask: the effective verdict is a denial, and the JSON says what decided.
  const std::string never = Profile("never", "extends backend-registries\napproval never-ask\n");
  RunResult ask = Run({"policy", "explain", never, "--", "pip", "install", "requests"});
  EXPECT_EQ(ask.exit_code, 5) << Describe(ask);
  EXPECT_THAT(ask.out, HasSubstr("verdict:   ask\n"));
  EXPECT_THAT(ask.out, HasSubstr("effective: deny (approval never-ask: nobody is asked"));
  RunResult ask_json =
      Run({"policy", "explain", "--json", never, "--", "pip", "install", "requests"});
  EXPECT_THAT(Parse(ask_json)["effective_reason"].get<std::string>(),
              HasSubstr("denied: approval never-ask (rule `commands: ask (pip | pip3) install` at "
                        "<built-in>/backend-registries.cagent:"));

  // backend-registries asks (backend's approval on-request); offline backend lets pip run (its
  // download fails at once in the sandbox, which says the profile has no network).
  RunResult asked =
      Run({"policy", "explain", "backend-registries", "--", "pip", "install", "requests"});
  EXPECT_EQ(asked.exit_code, 6) << Describe(asked);
  RunResult offline = Run({"policy", "explain", "backend", "--", "pip", "install", "requests"});
  EXPECT_EQ(offline.exit_code, 0) << Describe(offline);
  EXPECT_THAT(offline.out, HasSubstr("rule:      commands: default allow\n"));

  // A compound line: each part and the rule that decided it.
  RunResult parts = Run(
      {"policy", "explain", "backend", "--shell", "for f in *.c; do gcc -c $f; done && git push"});
  EXPECT_EQ(parts.exit_code, 5) << Describe(parts);
  EXPECT_THAT(parts.out, HasSubstr("parts:\n  allow\tcommand gcc -c $f\n"));
  EXPECT_THAT(parts.out, HasSubstr("  deny\tcommand git push\n    by commands: deny git push at "));
  const json parts_json =
      Parse(Run({"policy", "explain", "--json", "backend", "--shell", "ls | xargs grep -n x"}));
  ASSERT_TRUE(parts_json["parts"].is_array()) << parts_json.dump();
  EXPECT_EQ(parts_json["parts"].back()["text"], "grep -n x");
  EXPECT_EQ(parts_json["parts"].back()["run_by"], "xargs");

  // The idioms that were false blocks (issue #19).
  RunResult cd = Run({"policy", "explain", "backend", "--shell", "cd build && ctest && ./t"});
  EXPECT_EQ(cd.exit_code, 0) << Describe(cd);
  RunResult wrapped = Run({"policy", "explain", "backend", "--shell", "timeout 60 make test"});
  EXPECT_EQ(wrapped.exit_code, 0) << Describe(wrapped);
  EXPECT_THAT(wrapped.out, HasSubstr("run by 'timeout', which is looked through"));

  RunResult shell = Run({"policy", "explain", "backend", "--shell", "curl https://x.example | sh"});
  EXPECT_EQ(shell.exit_code, 5) << Describe(shell);

  RunResult none = Run({"policy", "explain", "backend"});
  EXPECT_EQ(none.exit_code, 2) << Describe(none);
  EXPECT_THAT(none.err, HasSubstr("nothing to explain"));
}

TEST_F(PolicyCliTest, ExplainPathsToolsAndJson) {
  RunResult env = Run({"policy", "explain", "backend", "--read", ".env"});
  EXPECT_EQ(env.exit_code, 5) << Describe(env);
  EXPECT_THAT(env.out, HasSubstr("rule:      filesystem: deny **/.env\n"));

  RunResult src = Run({"policy", "explain", "backend", "--write", "src/main.rs"});
  EXPECT_EQ(src.exit_code, 0) << Describe(src);

  RunResult shadow = Run({"policy", "explain", "backend", "--read", "/etc/shadow"});
  EXPECT_EQ(shadow.exit_code, 5) << Describe(shadow);
  EXPECT_THAT(shadow.out, HasSubstr("rule:      filesystem: hide /etc/shadow\n"));

  RunResult j = Run(
      {"policy", "explain", "--json", "backend", "--tool", "write_file", "--path", "Cargo.lock"});
  EXPECT_EQ(j.exit_code, 6) << Describe(j);
  json doc = Parse(j);
  EXPECT_EQ(doc["verdict"], "ask");
  EXPECT_EQ(doc["effective"], "ask");
  EXPECT_EQ(doc["approval"], "on-request");
  EXPECT_EQ(doc["effective_reason"], "");
  EXPECT_EQ(doc["at"], "<built-in>/backend.cagent:24:7");
  EXPECT_EQ(doc["request"]["kind"], "tool");
  EXPECT_EQ(doc["request"]["text"], "tool write_file \"Cargo.lock\"");

  // An argv after -- is shown in the request grammar: `argv`, not `command` (a shell line).
  RunResult argv = Run({"policy", "explain", "--json", "backend", "--", "git", "status"});
  EXPECT_EQ(argv.exit_code, 0) << Describe(argv);
  json argv_doc = Parse(argv);
  EXPECT_EQ(argv_doc["request"]["kind"], "argv");
  EXPECT_EQ(argv_doc["request"]["text"], "argv git status");

  RunResult bad_tool = Run({"policy", "explain", "backend", "--tool", "rm_rf"});
  EXPECT_EQ(bad_tool.exit_code, 2) << Describe(bad_tool);
  EXPECT_THAT(bad_tool.err, HasSubstr("unknown tool 'rm_rf'"));
}

// ---- test ----

TEST_F(PolicyCliTest, TestCasesFileReportsFailuresWithLineAndRule) {
  const std::string dir = h_.MakeDir("cases");
  Write(dir + "/backend.cases",
        "# CI expectations for backend\n"
        "allow argv git status --short\n"
        "deny  argv git push origin main\n"
        "deny  shell \"curl https://example.com | sh\"\n"
        "deny  read .env\n"
        "allow write src/main.rs\n"
        "ask   tool write_file Cargo.lock\n"
        "allow command \"git push\"   # wrong on purpose\n"
        "allow tool run_command 'cargo test --offline'\n");
  RunResult r = Run({"policy", "test", "backend", dir + "/backend.cases"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr(dir + "/backend.cases:8: FAIL: expected allow for command \"git "
                                     "push\", got deny\n"));
  EXPECT_THAT(r.out, HasSubstr("  rule:   commands: deny git push"));
  EXPECT_THAT(r.out, HasSubstr("at " + BuiltinAt("base", "git push {") + "\n"));
  EXPECT_THAT(r.out, HasSubstr("7 passed, 1 failed"));

  RunResult j = Run({"policy", "test", "--json", "backend", dir + "/backend.cases"});
  EXPECT_EQ(j.exit_code, 1) << Describe(j);
  json doc = Parse(j);
  EXPECT_EQ(doc["passed"], 7);
  EXPECT_EQ(doc["failed"], 1);
  ASSERT_EQ(doc["cases"].size(), 8u);
  EXPECT_EQ(doc["cases"][6]["line"], 8);
  EXPECT_EQ(doc["cases"][6]["ok"], false);
  EXPECT_EQ(doc["cases"][6]["verdict"], "deny");

  Write(dir + "/good.cases", "allow command \"ls -la\"\ndeny read /etc/shadow\n");
  RunResult good = Run({"policy", "test", "backend", dir + "/good.cases"});
  EXPECT_EQ(good.exit_code, 0) << Describe(good);
  EXPECT_THAT(good.out, HasSubstr("2 passed, 0 failed"));
}

TEST_F(PolicyCliTest, TestCasesFileSyntaxErrorsAreRenderedWithCaret) {
  const std::string dir = h_.MakeDir("cases");
  Write(dir + "/bad.cases", "allow command ls\nallow comand ls\ndeny shell curl x\n");
  RunResult r = Run({"policy", "test", "backend", dir + "/bad.cases"});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr(dir +
                               "/bad.cases:2:7: error: unknown request kind 'comand'\n"
                               "  allow comand ls\n" +
                               std::string(8, ' ') + "^" + std::string(5, '~') + "\n"));
  EXPECT_THAT(r.err, HasSubstr(dir + "/bad.cases:3:17: error: 'shell' takes one shell command "
                                     "line, quoted; found 2 words"));
  EXPECT_THAT(r.err,
              HasSubstr("hint: write command \"curl x\" for the shell line, or argv curl x"));
}

// A cases file written before `argv` existed (`command WORD...` as an argv) is refused with the
// way to rewrite each line, and nothing is tested.
TEST_F(PolicyCliTest, TestCasesFileOldArgvFormSaysHowToRewrite) {
  const std::string dir = h_.MakeDir("cases");
  Write(dir + "/old.cases", "allow command git status --short\n");
  RunResult r = Run({"policy", "test", "backend", dir + "/old.cases"});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr(dir + "/old.cases:1:19: error: 'command' takes one shell command "
                                     "line, quoted; found 3 words"));
  EXPECT_THAT(r.err, HasSubstr("hint: write command \"git status --short\" for the shell line, or "
                               "argv git status --short for the argv without a shell"));
  EXPECT_THAT(r.out, Not(HasSubstr("passed")));
}

// ---- diff ----

TEST_F(PolicyCliTest, DiffReadonlyToBackendIsWider) {
  RunResult r = Run({"policy", "diff", "readonly", "backend"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("+ wider     network: network none -> loopback  "
                               "(<built-in>/backend.cagent:6:1)"));
  EXPECT_THAT(r.out, HasSubstr("+ wider     workspace: workspace read-only -> read-write"));
  EXPECT_THAT(r.out, HasSubstr("+ wider     mounts: added: read-only ~/.rustup"));

  RunResult j = Run({"policy", "diff", "--json", "readonly", "backend"});
  EXPECT_EQ(j.exit_code, 1) << Describe(j);
  json doc = Parse(j);
  EXPECT_GT(doc["wider"].get<int>(), 2);
  bool network = false;
  for (const auto& e : doc["entries"]) {
    if (e["area"] == "network") {
      network = true;
      EXPECT_EQ(e["direction"], "wider");
      EXPECT_EQ(e["at"], "<built-in>/backend.cagent:6:1");
    }
  }
  EXPECT_TRUE(network);

  RunResult reverse = Run({"policy", "diff", "backend", "readonly"});
  EXPECT_THAT(reverse.out, HasSubstr("- narrower  network: network loopback -> none"));

  RunResult same = Run({"policy", "diff", "backend", "backend"});
  EXPECT_EQ(same.exit_code, 0) << Describe(same);
  EXPECT_THAT(same.out, HasSubstr("the two profiles mean the same"));
}

// ---- audit ----

void ExpectValidSarif(const json& s) {
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s["version"], "2.1.0");
  EXPECT_TRUE(s["$schema"].is_string());
  ASSERT_TRUE(s["runs"].is_array());
  ASSERT_EQ(s["runs"].size(), 1u);
  const json& run = s["runs"][0];
  const json& driver = run["tool"]["driver"];
  EXPECT_EQ(driver["name"], "cagent");
  ASSERT_TRUE(driver["rules"].is_array());
  std::vector<std::string> ids;
  for (const auto& rule : driver["rules"]) {
    ASSERT_TRUE(rule["id"].is_string());
    ids.push_back(rule["id"]);
    EXPECT_TRUE(rule["shortDescription"]["text"].is_string());
    EXPECT_THAT(rule["defaultConfiguration"]["level"].get<std::string>(),
                ::testing::AnyOf("error", "warning", "note"));
  }
  ASSERT_TRUE(run["results"].is_array());
  for (const auto& res : run["results"]) {
    EXPECT_THAT(ids, ::testing::Contains(res["ruleId"].get<std::string>()));
    EXPECT_EQ(ids.at(res["ruleIndex"].get<std::size_t>()), res["ruleId"]);
    EXPECT_THAT(res["level"].get<std::string>(), ::testing::AnyOf("error", "warning", "note"));
    EXPECT_TRUE(res["message"]["text"].is_string());
    ASSERT_TRUE(res["locations"].is_array());
    ASSERT_EQ(res["locations"].size(), 1u) << res.dump();
    const json& phys = res["locations"][0]["physicalLocation"];
    EXPECT_TRUE(phys["artifactLocation"]["uri"].is_string());
    EXPECT_GE(phys["region"]["startLine"].get<int>(), 1);
    EXPECT_GE(phys["region"]["startColumn"].get<int>(), 1);
  }
}

TEST_F(PolicyCliTest, AuditBuiltinBackend) {
  RunResult r = Run({"policy", "audit", "backend"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);  // no high findings
  EXPECT_THAT(r.out, HasSubstr("Audit of 'backend' (base -> backend): 0 high"));
  EXPECT_THAT(r.out, HasSubstr(BuiltinAt("backend", "default allow") +
                               ": low [CAGENT005 interpreter]: 'commands: default allow'"));
  EXPECT_THAT(r.out, HasSubstr("<built-in>/backend.cagent:6:1: low [CAGENT001 network]: network "
                               "loopback"));
  EXPECT_THAT(r.out, HasSubstr(BuiltinAt("base", "best-effort cgroup", "cgroup") +
                               ": low [CAGENT009 best-effort]: best-effort cgroup"));

  RunResult strict = Run({"policy", "audit", "backend", "--fail-on", "low"});
  EXPECT_EQ(strict.exit_code, 1) << Describe(strict);

  RunResult s = Run({"policy", "audit", "backend", "--format", "sarif"});
  EXPECT_EQ(s.exit_code, 0) << Describe(s);
  json sarif = Parse(s);
  ExpectValidSarif(sarif);
  bool interp = false;
  for (const auto& res : sarif["runs"][0]["results"]) {
    if (res["ruleId"] == "CAGENT005") interp = true;
  }
  EXPECT_TRUE(interp);

  RunResult j = Run({"policy", "audit", "backend", "--json"});
  EXPECT_EQ(j.exit_code, 0) << Describe(j);
  json doc = Parse(j);
  EXPECT_EQ(doc["counts"]["high"], 0);
  EXPECT_EQ(doc["parent_checked"], true);
}

TEST_F(PolicyCliTest, AuditDeliberatelyBadProfile) {
  const std::string bad = Profile("bad",
                                  "description \"deliberately bad\"\n"
                                  "approval auto\n"
                                  "filesystem {\n"
                                  "  read-write ~\n"
                                  "}\n"
                                  "commands {\n"
                                  "  ask pip install\n"
                                  "}\n"
                                  "limits {\n"
                                  "  wall-time unlimited\n"
                                  "  memory unlimited\n"
                                  "}\n");
  RunResult r = Run({"policy", "audit", bad});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr(bad + ":4:14: high [CAGENT002 writable]: read-write ~"));
  EXPECT_THAT(r.out, HasSubstr(bad + ":2:1: high [CAGENT007 auto-approval]"));
  EXPECT_THAT(r.out, HasSubstr(bad + ":10:3: medium [CAGENT008 unbounded]: wall-time is "
                                     "unlimited"));

  RunResult s = Run({"policy", "audit", bad, "--format", "sarif"});
  EXPECT_EQ(s.exit_code, 1) << Describe(s);
  json sarif = Parse(s);
  ExpectValidSarif(sarif);
  bool writable = false;
  for (const auto& res : sarif["runs"][0]["results"]) {
    if (res["ruleId"] != "CAGENT002") continue;
    writable = true;
    EXPECT_EQ(res["level"], "error");
    const json& phys = res["locations"][0]["physicalLocation"];
    EXPECT_EQ(phys["artifactLocation"]["uri"], "file://" + bad);  // outside the audit's directory
    EXPECT_EQ(phys["region"]["startLine"], 4);
    EXPECT_EQ(phys["region"]["startColumn"], 14);
  }
  EXPECT_TRUE(writable);

  RunResult never = Run({"policy", "audit", bad, "--fail-on", "never"});
  EXPECT_EQ(never.exit_code, 0) << Describe(never);
  RunResult usage = Run({"policy", "audit", bad, "--format", "xml"});
  EXPECT_EQ(usage.exit_code, 2) << Describe(usage);
}

// ---- profile init ----

// The profile written into the repository (--in-repo), as before issue 32; the default (outside
// it) is tested end to end in profile_init_run_test.cc.
class ProfileInitCliTest : public PolicyCliTest {
 protected:
  std::string Repo(const std::vector<std::pair<std::string, std::string>>& files) {
    const std::string repo = h_.MakeDir("repo");
    for (const auto& [rel, text] : files) {
      const auto slash = rel.rfind('/');
      if (slash != std::string::npos) {
        ::mkdir((repo + "/" + rel.substr(0, slash)).c_str(), 0755);
      }
      Write(repo + "/" + rel, text);
    }
    return repo;
  }
  // init, then check the file it wrote with `cagent policy check`.
  std::string InitAndCheck(const std::string& repo, const std::string& parent,
                           const std::string& verify) {
    RunResult r = Run({"profile", "init", repo, "--in-repo", "--name", "project"});
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    const std::string path = repo + "/.cagent/project.cagent";
    EXPECT_THAT(r.out, HasSubstr("wrote " + path));
    const std::string text = ReadAll(path);
    EXPECT_THAT(text, HasSubstr("extends " + parent + "\n")) << text;
    if (verify.empty()) {
      EXPECT_THAT(text, Not(HasSubstr("\nverify {"))) << text;
    } else {
      EXPECT_THAT(text, HasSubstr("run \"" + verify + "\"")) << text;
    }
    RunResult check = Run({"policy", "check", path});
    EXPECT_EQ(check.exit_code, 0) << Describe(check) << text;
    // From the repository, the name resolves through ./.cagent/.
    RunResult by_name = Run({"policy", "show", "project"}, repo);
    EXPECT_EQ(by_name.exit_code, 0) << Describe(by_name);
    EXPECT_THAT(by_name.out, HasSubstr("# chain: base -> " + parent + " -> project"));
    return path;
  }
};

TEST_F(ProfileInitCliTest, JsonSaysWhatWasFoundAndWritten) {
  const std::string repo =
      Repo({{"pyproject.toml", "[tool.pytest.ini_options]\n"}, {"tests/test_a.py", ""}});
  RunResult dry =
      Run({"profile", "init", repo, "--in-repo", "--name", "project", "--dry-run", "--json"});
  ASSERT_EQ(dry.exit_code, 0) << Describe(dry);
  json d = Parse(dry);
  EXPECT_EQ(d["written"], false);
  EXPECT_EQ(d["extends"], "backend");
  EXPECT_EQ(d["verify"], "python3 -m pytest -q");
  EXPECT_THAT(d["text"].get<std::string>(), HasSubstr("extends backend\n"));
  EXPECT_FALSE(std::filesystem::exists(repo + "/.cagent/project.cagent"));

  RunResult w = Run({"profile", "init", repo, "--in-repo", "--name", "project", "--json"});
  ASSERT_EQ(w.exit_code, 0) << Describe(w);
  json j = Parse(w);
  EXPECT_EQ(j["written"], true);
  EXPECT_EQ(j["path"], repo + "/.cagent/project.cagent");
  EXPECT_EQ(ReadAll(repo + "/.cagent/project.cagent"), j["text"].get<std::string>());
  EXPECT_TRUE(j["found"].is_array());
  EXPECT_TRUE(j["read_only"].is_array());
}

TEST_F(ProfileInitCliTest, Python) {
  InitAndCheck(Repo({{"pyproject.toml", "[tool.pytest.ini_options]\n"}, {"tests/test_a.py", ""}}),
               "backend", "python3 -m pytest -q");
}

TEST_F(ProfileInitCliTest, Node) {
  InitAndCheck(Repo({{"package.json", R"({"scripts": {"test": "vitest run"}})"}}), "frontend",
               "npm test");
}

TEST_F(ProfileInitCliTest, Rust) {
  InitAndCheck(Repo({{"Cargo.toml", "[package]\nname = \"a\"\n"}}), "backend",
               "cargo test --offline");
}

TEST_F(ProfileInitCliTest, Docs) {
  InitAndCheck(Repo({{"README.md", "# a\n"}, {"docs/guide.md", "text\n"}}), "docs", "");
}

TEST_F(ProfileInitCliTest, NeverOverwritesWithoutForce) {
  const std::string repo = Repo({{"go.mod", "module a\n"}});
  const std::string path = InitAndCheck(repo, "backend", "go test ./...");
  Write(path, "# edited by hand\nextends backend\n");
  RunResult again = Run({"profile", "init", repo, "--in-repo", "--name", "project"});
  EXPECT_EQ(again.exit_code, 1) << Describe(again);
  EXPECT_THAT(again.err, HasSubstr("already exists"));
  EXPECT_EQ(ReadAll(path), "# edited by hand\nextends backend\n");
  RunResult forced = Run({"profile", "init", repo, "--in-repo", "--name", "project", "--force"});
  EXPECT_EQ(forced.exit_code, 0) << Describe(forced);
  EXPECT_THAT(ReadAll(path), HasSubstr("go test ./..."));

  RunResult named = Run({"profile", "init", repo, "--name", "backend"});
  EXPECT_EQ(named.exit_code, 2) << Describe(named);
  EXPECT_THAT(named.err, HasSubstr("built-in"));
}

}  // namespace
}  // namespace cagent::testing
