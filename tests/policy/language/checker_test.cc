// The checker, compiler and loader: exact rendered diagnostics (message, source line, caret, hint)
// for the mistakes people make in profiles, and the merge rules of `extends`.
#include "policy/language/checker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "policy/language/compiler.h"
#include "policy/language/dump.h"
#include "policy/language/engine.h"
#include "policy/language/loader.h"
#include "tests/policy/policy_test_util.h"

namespace cagent::policy {
namespace {

using testing::Argv;
using testing::MustCompile;
using testing::MustFail;

// A directory of profile files for one test, removed afterwards. Rendered diagnostics name files
// by their full path; Render() replaces the directory with "DIR" so expectations are stable.
class ProfileDir {
 public:
  ProfileDir() {
    std::string tmpl = ::testing::TempDir() + "cagent_checker_XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr);
    path_ = tmpl;
  }
  ~ProfileDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  void Write(const std::string& name, std::string_view text) const {
    std::ofstream(path_ + "/" + name) << text;
  }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] SearchPath Search(bool builtins = true) const {
    return SearchPath{{path_}, builtins};
  }
  // Loads `name` (a profile name or a file in the directory) and renders its diagnostics.
  [[nodiscard]] std::string Render(const Compiled& c) const {
    std::string out = RenderAll(*c.sources, c.diags);
    for (std::size_t at = out.find(path_); at != std::string::npos; at = out.find(path_, at)) {
      out.replace(at, path_.size(), "DIR");
    }
    return out;
  }

 private:
  std::string path_;
};

// ---------------------------------------------------------------------------------------------
// Unknown keys
// ---------------------------------------------------------------------------------------------

TEST(CheckerUnknownKey, TopLevelWithDidYouMean) {
  EXPECT_EQ(MustFail("descripton \"x\"\n"),
            "test.cagent:1:1: error: unknown key 'descripton' at the top level\n"
            "  descripton \"x\"\n"
            "  ^~~~~~~~~~\n"
            "  hint: did you mean 'description'?\n");
}

TEST(CheckerUnknownKey, TopLevelWithoutAGuessListsTheKeys) {
  EXPECT_EQ(MustFail("zzzzzz 1\n"),
            "test.cagent:1:1: error: unknown key 'zzzzzz' at the top level\n"
            "  zzzzzz 1\n"
            "  ^~~~~~\n"
            "  hint: valid keys here: description workspace filesystem network commands tools "
            "limits environment approval verify require best-effort examples extends include "
            "hosts setup cache carry git-identity outputs credentials\n");
}

TEST(CheckerUnknownKey, InLimits) {
  EXPECT_EQ(MustFail("limits {\n  wal-time 10m\n}\n"),
            "test.cagent:2:3: error: unknown key 'wal-time' in limits\n"
            "    wal-time 10m\n"
            "    ^~~~~~~~\n"
            "  hint: did you mean 'wall-time'?\n");
  EXPECT_EQ(MustFail("limits {\n  frobnicate 3\n}\n"),
            "test.cagent:2:3: error: unknown key 'frobnicate' in limits\n"
            "    frobnicate 3\n"
            "    ^~~~~~~~~~\n"
            "  hint: valid keys here: wall-time cpu-time command-timeout memory file-size "
            "command-output total-output patch-size processes open-files model-turns model-tokens "
            "tool-calls changed-files egress-bytes egress-connections model-cost\n");
}

TEST(CheckerUnknownKey, InEverySection) {
  EXPECT_EQ(MustFail("filesystem {\n  mount /usr\n}\n"),
            "test.cagent:2:3: error: unknown key 'mount' in filesystem\n"
            "    mount /usr\n"
            "    ^~~~~\n"
            "  hint: valid keys here: read-only read-write hide deny ask allow\n");
  EXPECT_EQ(MustFail("commands {\n  permit git\n}\n"),
            "test.cagent:2:3: error: unknown key 'permit' in commands\n"
            "    permit git\n"
            "    ^~~~~~\n"
            "  hint: valid keys here: allow ask deny default\n");
  EXPECT_EQ(MustFail("tools {\n  alow grep\n}\n"),
            "test.cagent:2:3: error: unknown key 'alow' in tools\n"
            "    alow grep\n"
            "    ^~~~\n"
            "  hint: did you mean 'allow'?\n");
  EXPECT_EQ(MustFail("environment {\n  passs TERM\n}\n"),
            "test.cagent:2:3: error: unknown key 'passs' in environment\n"
            "    passs TERM\n"
            "    ^~~~~\n"
            "  hint: did you mean 'pass'?\n");
  EXPECT_EQ(MustFail("verify {\n  exec \"x\"\n}\n"),
            "test.cagent:2:3: error: unknown key 'exec' in verify\n"
            "    exec \"x\"\n"
            "    ^~~~\n"
            "  hint: valid keys here: run\n");
  EXPECT_EQ(MustFail("examples {\n  permit command \"x\"\n}\n"),
            "test.cagent:2:3: error: unknown key 'permit' in examples\n"
            "    permit command \"x\"\n"
            "    ^~~~~~\n"
            "  hint: valid keys here: allow ask deny\n");
  EXPECT_EQ(MustFail("commands {\n  allow git {\n    matches \"git\"\n  }\n}\n"),
            "test.cagent:3:5: error: unknown key 'matches' in a command rule's block\n"
            "      matches \"git\"\n"
            "      ^~~~~~~\n"
            "  hint: did you mean 'match'?\n");
}

TEST(CheckerUnknownKey, ValuesWithDidYouMean) {
  EXPECT_EQ(MustFail("approval on-requst\n"),
            "test.cagent:1:10: error: unknown approval mode 'on-requst'\n"
            "  approval on-requst\n"
            "           ^~~~~~~~~\n"
            "  hint: did you mean 'on-request'?\n");
  EXPECT_EQ(MustFail("require landlok\n"),
            "test.cagent:1:9: error: unknown layer 'landlok'\n"
            "  require landlok\n"
            "          ^~~~~~~\n"
            "  hint: did you mean 'landlock'?\n");
  EXPECT_EQ(MustFail("require selinux\n"),
            "test.cagent:1:9: error: unknown layer 'selinux'\n"
            "  require selinux\n"
            "          ^~~~~~~\n"
            "  hint: known: landlock, seccomp, cgroup, memory-limit, pids-limit\n");
  EXPECT_EQ(MustFail("network wifi\n"),
            "test.cagent:1:9: error: unknown network mode 'wifi'\n"
            "  network wifi\n"
            "          ^~~~\n"
            "  hint: use none (no IP sockets) or loopback (lo only)\n");
  EXPECT_EQ(MustFail("workspace writable\n"),
            "test.cagent:1:11: error: unknown workspace mode 'writable'\n"
            "  workspace writable\n"
            "            ^~~~~~~~\n"
            "  hint: use read-write or read-only\n");
}

TEST(CheckerUnknownKey, ToolNames) {
  EXPECT_EQ(MustFail("tools {\n  allow read_fil\n}\n"),
            "test.cagent:2:9: error: unknown tool 'read_fil'\n"
            "    allow read_fil\n"
            "          ^~~~~~~~\n"
            "  hint: did you mean 'read_file'?\n");
  EXPECT_EQ(
      MustFail("tools {\n  deny shell\n}\n"),
      "test.cagent:2:8: error: unknown tool 'shell'\n"
      "    deny shell\n"
      "         ^~~~~\n"
      "  hint: tools: read_file write_file edit_file list_dir glob grep run_command finish; a "
      "wrapped MCP server's tool is mcp:NAME\n");
}

TEST(DidYouMean, ClosestWithinTwoOrThreeEdits) {
  std::vector<std::string_view> keys = {"wall-time", "cpu-time", "memory"};
  EXPECT_EQ(DidYouMean("wal-time", keys), "wall-time");
  EXPECT_EQ(DidYouMean("memroy", keys), "memory");
  EXPECT_EQ(DidYouMean("cpu_tme", keys), "cpu-time");
  EXPECT_EQ(DidYouMean("walltimeout", keys), "");
  EXPECT_EQ(DidYouMean("xy", {"ab"}), "");  // everything replaced is not a typo
}

// ---------------------------------------------------------------------------------------------
// Arguments: counts and types
// ---------------------------------------------------------------------------------------------

TEST(CheckerArgs, WrongCounts) {
  EXPECT_EQ(MustFail("description \"a\" \"b\"\n"),
            "test.cagent:1:17: error: 'description' takes one quoted string, found 2 arguments\n"
            "  description \"a\" \"b\"\n"
            "                  ^~~\n");
  EXPECT_EQ(MustFail("workspace\n"),
            "test.cagent:1:1: error: 'workspace' takes read-write or read-only, found 0 "
            "arguments\n"
            "  workspace\n"
            "  ^~~~~~~~~\n");
  EXPECT_EQ(MustFail("network none loopback\n"),
            "test.cagent:1:14: error: 'network' takes one mode, found 2 arguments\n"
            "  network none loopback\n"
            "               ^~~~~~~~\n");
  EXPECT_EQ(MustFail("limits {\n  model-turns 1 2\n}\n"),
            "test.cagent:2:17: error: 'model-turns' takes one number or unlimited, found 2 "
            "arguments\n"
            "    model-turns 1 2\n"
            "                  ^\n");
  EXPECT_EQ(MustFail("environment {\n  set A\n}\n"),
            "test.cagent:2:3: error: 'set' takes a name and a value, found 1 argument\n"
            "    set A\n"
            "    ^~~\n");
  EXPECT_EQ(MustFail("verify {\n  run\n}\n"),
            "test.cagent:2:3: error: 'run' takes a quoted command and optionally 'timeout "
            "DURATION'\n"
            "    run\n"
            "    ^~~\n"
            "  hint: e.g.: run \"make test\" timeout 10m\n");
  EXPECT_EQ(MustFail("commands {\n  allow\n}\n"),
            "test.cagent:2:3: error: 'allow' needs a command pattern, e.g. 'git status'\n"
            "    allow\n"
            "    ^~~~~\n");
  EXPECT_EQ(MustFail("require\n"),
            "test.cagent:1:1: error: 'require' needs one or more layer names\n"
            "  require\n"
            "  ^~~~~~~\n");
}

TEST(CheckerArgs, Blocks) {
  EXPECT_EQ(MustFail("filesystem\n"),
            "test.cagent:1:1: error: 'filesystem' needs a block\n"
            "  filesystem\n"
            "  ^~~~~~~~~~\n"
            "  hint: write: filesystem { ... }\n");
  EXPECT_EQ(MustFail("description { }\n"),
            "test.cagent:1:13: error: 'description' does not take a block\n"
            "  description { }\n"
            "              ^\n");
  EXPECT_EQ(MustFail("limits 10m {\n}\n"),
            "test.cagent:1:8: error: 'limits' takes no arguments before its block\n"
            "  limits 10m {\n"
            "         ^~~\n");
}

TEST(CheckerArgs, GroupsOnlyInCommandPatterns) {
  EXPECT_EQ(MustFail("filesystem {\n  read-only (a | b)\n}\n"),
            "test.cagent:2:13: error: alternatives '( | )' are only allowed in command patterns\n"
            "    read-only (a | b)\n"
            "              ^~~~~~~\n");
}

TEST(CheckerValues, InvalidDurations) {
  EXPECT_EQ(MustFail("limits {\n  wall-time 10x\n}\n"),
            "test.cagent:2:13: error: invalid duration '10x'\n"
            "    wall-time 10x\n"
            "              ^~~\n"
            "  hint: write digits and a unit: 500ms, 90s, 10m, 2h\n");
  EXPECT_EQ(MustFail("limits {\n  cpu-time 0s\n}\n"),
            "test.cagent:2:12: error: a zero cpu-time would stop everything at once\n"
            "    cpu-time 0s\n"
            "             ^~\n"
            "  hint: write a positive duration, or unlimited\n");
  EXPECT_EQ(MustFail("verify {\n  run \"make test\" timeout 0s\n}\n"),
            "test.cagent:2:27: error: invalid duration '0s'\n"
            "    run \"make test\" timeout 0s\n"
            "                            ^~\n"
            "  hint: write digits and a unit: 90s, 10m\n");
  EXPECT_EQ(MustFail("verify {\n  run \"make\" after 10m\n}\n"),
            "test.cagent:2:14: error: expected 'timeout', found 'after'\n"
            "    run \"make\" after 10m\n"
            "               ^~~~~\n");
}

TEST(CheckerValues, InvalidSizesAndNumbers) {
  EXPECT_EQ(MustFail("limits {\n  memory 1.5G\n}\n"),
            "test.cagent:2:10: error: invalid size '1.5G'\n"
            "    memory 1.5G\n"
            "           ^~~~\n"
            "  hint: write digits and a unit: 512K, 64M, 4G, 1T\n");
  EXPECT_EQ(MustFail("limits {\n  open-files -1\n}\n"),
            "test.cagent:2:14: error: invalid number '-1'\n"
            "    open-files -1\n"
            "               ^~\n"
            "  hint: write a whole number, e.g. 256, or unlimited\n");
  EXPECT_EQ(MustFail("limits {\n  changed-files 99999999999999999999\n}\n"),
            "test.cagent:2:17: error: invalid number '99999999999999999999'\n"
            "    changed-files 99999999999999999999\n"
            "                  ^~~~~~~~~~~~~~~~~~~~\n"
            "  hint: write a whole number, e.g. 256, or unlimited\n");
}

TEST(CheckerValues, ValidLimitSpellings) {
  auto p = MustCompile(
      "limits {\n  wall-time 90s\n  cpu-time 1500ms\n  command-timeout 2h\n  memory 512M\n"
      "  file-size 4096\n  processes 256\n  model-tokens unlimited\n}\n");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->limit(Limit::kWallTime).value, 90'000U);
  EXPECT_EQ(p->limit(Limit::kCpuTime).value, 1'500U);
  EXPECT_EQ(p->limit(Limit::kCommandTimeout).value, 7'200'000U);
  EXPECT_EQ(p->limit(Limit::kMemory).value, 512ULL << 20);
  EXPECT_EQ(p->limit(Limit::kFileSize).value, 4096U);
  EXPECT_EQ(p->limit(Limit::kProcesses).value, 256U);
  EXPECT_TRUE(p->limit(Limit::kModelTokens).set);
  EXPECT_TRUE(p->limit(Limit::kModelTokens).unlimited);
  EXPECT_FALSE(p->limit(Limit::kModelTokens).bounded());
  EXPECT_FALSE(p->limit(Limit::kToolCalls).set);
}

TEST(CheckerValues, ModelCostIsAnAmountAndACurrency) {
  auto p = MustCompile("limits {\n  model-cost 2.50 USD\n}\n");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->limit(Limit::kModelCost).value, 2'500'000U);
  EXPECT_EQ(p->limit(Limit::kModelCost).currency, "USD");
  EXPECT_EQ(FormatLimit(Limit::kModelCost, p->limit(Limit::kModelCost)), "2.50 USD");
  auto u = MustCompile("limits {\n  model-cost unlimited\n}\n");
  ASSERT_NE(u, nullptr);
  EXPECT_TRUE(u->limit(Limit::kModelCost).unlimited);
  EXPECT_EQ(MustFail("limits {\n  model-cost 2.50\n}\n"),
            "test.cagent:2:3: error: 'model-cost' takes an amount and a currency, or unlimited\n"
            "    model-cost 2.50\n"
            "    ^~~~~~~~~~\n"
            "  hint: write e.g. model-cost 2.50 USD\n");
  EXPECT_EQ(MustFail("limits {\n  model-cost 2,50 USD\n}\n"),
            "test.cagent:2:14: error: invalid amount '2,50 USD'\n"
            "    model-cost 2,50 USD\n"
            "               ^~~~\n"
            "  hint: write a number with at most six decimals, e.g. 2.50\n");
  EXPECT_EQ(MustFail("limits {\n  model-cost 2 dollars\n}\n"),
            "test.cagent:2:16: error: invalid amount '2 dollars'\n"
            "    model-cost 2 dollars\n"
            "                 ^~~~~~~\n"
            "  hint: the currency must be a code of three capital letters, e.g. USD or EUR\n");
}

TEST(CheckerValues, EnvironmentNames) {
  EXPECT_EQ(MustFail("environment {\n  pass 9BAD\n}\n"),
            "test.cagent:2:8: error: invalid variable name pattern '9BAD'\n"
            "    pass 9BAD\n"
            "         ^~~~\n"
            "  hint: names are letters, digits and '_', with * or ? wildcards: AWS_*, *_TOKEN\n");
  EXPECT_EQ(MustFail("environment {\n  set 1X 2\n}\n"),
            "test.cagent:2:7: error: invalid variable name '1X'\n"
            "    set 1X 2\n"
            "        ^~\n"
            "  hint: names are letters, digits and '_', not starting with a digit\n");
}

// ---------------------------------------------------------------------------------------------
// Paths and globs
// ---------------------------------------------------------------------------------------------

TEST(CheckerPaths, InvalidMountPaths) {
  EXPECT_EQ(MustFail("filesystem {\n  read-only ../x\n}\n"),
            "test.cagent:2:13: error: invalid path '../x': '..' components are not allowed\n"
            "    read-only ../x\n"
            "              ^~~~\n"
            "  hint: write the path without . or ..\n");
  EXPECT_EQ(MustFail("filesystem {\n  read-only /usr/./lib\n}\n"),
            "test.cagent:2:13: error: invalid path '/usr/./lib': '.' components are not allowed\n"
            "    read-only /usr/./lib\n"
            "              ^~~~~~~~~~\n"
            "  hint: write the path without . or ..\n");
  EXPECT_EQ(MustFail("filesystem {\n  hide ~bob/x\n}\n"),
            "test.cagent:2:8: error: invalid path '~bob/x': '~user' paths are not supported\n"
            "    hide ~bob/x\n"
            "         ^~~~~~\n"
            "  hint: write ~/ for the caller's home\n");
  EXPECT_EQ(MustFail("filesystem {\n  read-only /opt/*\n}\n"),
            "test.cagent:2:13: error: invalid path '/opt/*': mount paths cannot contain "
            "wildcards\n"
            "    read-only /opt/*\n"
            "              ^~~~~~\n"
            "  hint: use a deny rule with a glob to hide matching files\n");
  EXPECT_EQ(MustFail("filesystem {\n  read-write /usr//lib\n}\n"),
            "test.cagent:2:14: error: invalid path '/usr//lib': it has an empty component "
            "('//')\n"
            "    read-write /usr//lib\n"
            "               ^~~~~~~~~\n");
  EXPECT_EQ(MustFail("filesystem {\n  read-only /usr /\n}\n"),
            "test.cagent:2:18: error: '/' cannot be mounted whole\n"
            "    read-only /usr /\n"
            "                   ^\n"
            "  hint: name the trees the sandbox needs, e.g. /usr /etc\n");
  EXPECT_EQ(MustFail("filesystem {\n  read-only .\n}\n"),
            "test.cagent:2:13: error: the workspace is not set here\n"
            "    read-only .\n"
            "              ^\n"
            "  hint: use 'workspace read-only' or 'workspace read-write' at the top level\n");
}

TEST(CheckerPaths, ParsePathRef) {
  auto usr = ParsePathRef("/usr/lib/");
  ASSERT_TRUE(usr);
  EXPECT_EQ(usr->base, PathBase::kAbsolute);
  EXPECT_EQ(usr->rel, "usr/lib");
  EXPECT_EQ(usr->Text(), "/usr/lib");
  auto home = ParsePathRef("~");
  ASSERT_TRUE(home);
  EXPECT_EQ(home->base, PathBase::kHome);
  EXPECT_EQ(home->Text(), "~");
  auto ws = ParsePathRef("./src");
  ASSERT_TRUE(ws);
  EXPECT_EQ(ws->base, PathBase::kWorkspace);
  EXPECT_EQ(ws->Text(), "src");
  EXPECT_FALSE(ParsePathRef(""));
  EXPECT_FALSE(ParsePathRef(std::string_view("a\0b", 3)));
  EXPECT_FALSE(ParsePathRef("a/../b"));
  EXPECT_FALSE(ParsePathRef("~root"));
  EXPECT_FALSE(ParsePathRef("src/[ab]"));
}

TEST(CheckerPaths, InvalidGlobs) {
  EXPECT_EQ(MustFail("filesystem {\n  deny a**b\n}\n"),
            "test.cagent:2:8: error: invalid glob 'a**b': '**' must be a whole path component\n"
            "    deny a**b\n"
            "         ^~~~\n"
            "  hint: in 'a**b', 'a**b': write 'a/**/b' to match any depth, or '*' (as in 'a*') "
            "to match within one component\n");
  EXPECT_EQ(MustFail("filesystem {\n  deny [abc\n}\n"),
            "test.cagent:2:8: error: invalid glob '[abc': unterminated '[' in glob\n"
            "    deny [abc\n"
            "         ^~~~\n"
            "  hint: '[abc' opens a set at offset 0 without a closing ']'; write '\\[' to match a "
            "literal '['\n");
  EXPECT_EQ(MustFail("commands {\n  allow [abc\n}\n"),
            "test.cagent:2:9: error: invalid pattern '[abc': unterminated '[' in glob\n"
            "    allow [abc\n"
            "          ^~~~\n"
            "  hint: '[abc' opens a set at offset 0 without a closing ']'; write '\\[' to match a "
            "literal '['\n");
  EXPECT_EQ(MustFail("commands {\n  allow git (\"\" | x)\n}\n"),
            "test.cagent:2:13: error: empty word in a command pattern\n"
            "    allow git (\"\" | x)\n"
            "              ^~~~~~~~\n");
  EXPECT_EQ(MustFail("filesystem {\n  deny ~bob/x\n}\n"),
            "test.cagent:2:8: error: '~user' paths are not supported\n"
            "    deny ~bob/x\n"
            "         ^~~~~~\n"
            "  hint: write ~/ for the caller's home\n");
  EXPECT_EQ(MustFail("filesystem {\n  deny read\n}\n"),
            "test.cagent:2:8: error: 'deny read' needs one or more globs\n"
            "    deny read\n"
            "         ^~~~\n");
  EXPECT_EQ(MustFail("filesystem {\n  allow src\n}\n"),
            "test.cagent:2:3: error: filesystem rules can only restrict\n"
            "    allow src\n"
            "    ^~~~~\n"
            "  hint: paths are made visible with read-only or read-write; use deny or ask here\n");
}

TEST(CheckerPaths, MountConflictsAndDuplicates) {
  // The same path twice with different modes is an error; with the same mode, a warning.
  EXPECT_EQ(
      MustFail("filesystem {\n  read-only /usr /opt\n  read-write /usr\n  read-only /opt\n}\n"),
      "test.cagent:3:14: error: path /usr is both read-only (line 2) and read-write\n"
      "    read-write /usr\n"
      "               ^~~~\n"
      "  hint: keep one; a subdirectory may differ from its parent, the same path may not\n"
      "test.cagent:4:13: warning: path /opt is listed twice\n"
      "    read-only /opt\n"
      "              ^~~~\n"
      "  hint: the first is at line 2\n");
  // Spelled differently, the same path.
  EXPECT_EQ(MustFail("filesystem {\n  hide ~/.ssh/\n  read-only ~/.ssh\n}\n"),
            "test.cagent:3:13: error: path ~/.ssh is both hide (line 2) and read-only\n"
            "    read-only ~/.ssh\n"
            "              ^~~~~~\n"
            "  hint: keep one; a subdirectory may differ from its parent, the same path may not\n");
  // A subdirectory may differ from its parent.
  EXPECT_NE(MustCompile("filesystem {\n  read-only /usr\n  hide /usr/share\n}\n"), nullptr);
}

TEST(CheckerPaths, DuplicateMountIsOnlyAWarning) {
  SearchPath search;
  Compiled c = CompileText("test.cagent", "filesystem {\n  read-only /usr /usr\n}\n", search);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(RenderAll(*c.sources, c.diags),
            "test.cagent:2:18: warning: path /usr is listed twice\n"
            "    read-only /usr /usr\n"
            "                   ^~~~\n"
            "  hint: the first is at line 2\n");
  EXPECT_EQ(c.policy->mounts.size(), 1U);
}

// ---------------------------------------------------------------------------------------------
// Duplicates, tools, requirements
// ---------------------------------------------------------------------------------------------

TEST(CheckerDuplicates, ScalarsSetTwice) {
  EXPECT_EQ(MustFail("limits {\n  memory 1G\n}\nlimits {\n  memory 2G\n}\n"),
            "test.cagent:5:3: error: 'limits.memory' is set twice in this profile\n"
            "    memory 2G\n"
            "    ^~~~~~\n"
            "  hint: the first is at line 2; keep one\n");
  EXPECT_EQ(MustFail("approval auto\napproval never-ask\n"),
            "test.cagent:2:1: error: 'approval' is set twice in this profile\n"
            "  approval never-ask\n"
            "  ^~~~~~~~\n"
            "  hint: the first is at line 1; keep one\n");
  EXPECT_EQ(MustFail("network none\nnetwork none\n"),
            "test.cagent:2:1: error: 'network' is set twice in this profile\n"
            "  network none\n"
            "  ^~~~~~~\n"
            "  hint: the first is at line 1; keep one\n");
  EXPECT_EQ(MustFail("environment {\n  set A 1\n  set A 2\n}\n"),
            "test.cagent:3:7: error: 'A' is set twice in this profile\n"
            "    set A 2\n"
            "        ^\n"
            "  hint: the first is at line 2\n");
}

TEST(CheckerTools, OnNeedsGlobsAndToolNames) {
  EXPECT_EQ(MustFail("tools {\n  allow write_file on\n}\n"),
            "test.cagent:2:20: error: 'on' needs one or more workspace path globs\n"
            "    allow write_file on\n"
            "                     ^~\n");
  EXPECT_EQ(MustFail("tools {\n  deny on src/**\n}\n"),
            "test.cagent:2:8: error: 'deny' needs a tool name before 'on'\n"
            "    deny on src/**\n"
            "         ^~\n");
  EXPECT_EQ(MustFail("tools {\n  allow grep on /etc/**\n}\n"),
            "test.cagent:2:17: error: tool paths are relative to the workspace\n"
            "    allow grep on /etc/**\n"
            "                  ^~~~~~~\n"
            "  hint: the agent's file tools only reach the workspace\n");
  EXPECT_EQ(MustFail("tools {\n  allow grep on src/a**\n}\n"),
            "test.cagent:2:17: error: invalid glob 'src/a**': '**' must be a whole path "
            "component\n"
            "    allow grep on src/a**\n"
            "                  ^~~~~~~\n"
            "  hint: in 'src/a**', 'a**': write 'a/**/b' to match any depth, or '*' (as in 'a*') "
            "to match within one component\n");
}

TEST(CheckerTools, RuleTextIsNormalised) {
  auto p = MustCompile("tools {\n  allow grep read_file grep on ./src/** docs\n}\n");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->tools.size(), 1U);
  EXPECT_EQ(p->tools[0].text, "read_file grep on src/** docs");
}

TEST(CheckerRequirements, BestEffortOnlyForLandlockAndCgroup) {
  EXPECT_EQ(MustFail("best-effort landlock seccomp\n"),
            "test.cagent:1:22: error: 'seccomp' cannot be best-effort\n"
            "  best-effort landlock seccomp\n"
            "                       ^~~~~~~\n"
            "  hint: only landlock and cgroup may be missing; everything else always fails "
            "closed\n");
}

TEST(CheckerRequirements, RequireAndBestEffortConflict) {
  EXPECT_EQ(MustFail("require landlock\nbest-effort landlock\n"),
            "test.cagent:2:13: error: 'landlock' is best-effort but 'require landlock' needs it\n"
            "  best-effort landlock\n"
            "              ^~~~~~~~\n"
            "  hint: a required layer cannot be optional; drop one of the two (the require is at "
            "line 1)\n");
  // memory-limit and pids-limit need the cgroup layer.
  EXPECT_EQ(MustFail("limits {\n  processes 10\n}\nrequire pids-limit\nbest-effort cgroup\n"),
            "test.cagent:5:13: error: 'cgroup' is best-effort but 'require pids-limit' needs it\n"
            "  best-effort cgroup\n"
            "              ^~~~~~\n"
            "  hint: a required layer cannot be optional; drop one of the two (the require is at "
            "line 4)\n");
}

TEST(CheckerRequirements, RequireLimitWithoutTheLimit) {
  EXPECT_EQ(MustFail("require landlock memory-limit\n"),
            "test.cagent:1:18: error: 'require memory-limit' but no memory limit is set\n"
            "  require landlock memory-limit\n"
            "                   ^~~~~~~~~~~~\n"
            "  hint: add 'limits { memory ... }'\n");
  // `unlimited` is not a limit.
  EXPECT_EQ(MustFail("require pids-limit\nlimits {\n  processes unlimited\n}\n"),
            "test.cagent:1:9: error: 'require pids-limit' but no processes limit is set\n"
            "  require pids-limit\n"
            "          ^~~~~~~~~~\n"
            "  hint: add 'limits { processes ... }'\n");
}

TEST(CheckerCommands, DefaultAndReasonAreCheckedWithCarets) {
  EXPECT_EQ(MustFail("commands {\n  default permit\n}\n"),
            "test.cagent:2:11: error: unknown default verdict 'permit'\n"
            "    default permit\n"
            "            ^~~~~~\n"
            "  hint: use allow (the sandbox is the boundary), ask or deny (an allow-list)\n");
  EXPECT_EQ(MustFail("commands {\n  default alow\n}\n"),
            "test.cagent:2:11: error: unknown default verdict 'alow'\n"
            "    default alow\n"
            "            ^~~~\n"
            "  hint: did you mean 'allow'?\n");
  EXPECT_THAT(MustFail("commands {\n  default allow\n  default deny\n}\n"),
              ::testing::HasSubstr("'commands default' is set twice in this profile"));
  EXPECT_THAT(MustFail("commands {\n  deny git push {\n    reason bare\n  }\n}\n"),
              ::testing::HasSubstr("error: a reason is a non-empty quoted string"));
  EXPECT_THAT(
      MustFail("commands {\n  deny git push {\n    reason \"a\"\n    reason \"b\"\n  }\n}\n"),
      ::testing::HasSubstr("'reason' is given twice for this rule"));
  EXPECT_THAT(MustFail("commands {\n  deny git push {\n    reason \"" + std::string(401, 'x') +
                       "\"\n  }\n}\n"),
              ::testing::HasSubstr("a reason is one line of at most 400 bytes"));
}

// BUG (failing until fixed, see the report): base says `best-effort cgroup`, and a child that
// wants the memory limit enforced (`require memory-limit`, a strengthening) gets an error it cannot
// fix, reported in base.cagent. A nearer profile's `require` should replace a parent's
// best-effort for the same layer; only a conflict within one profile, or a child that relaxes a
// parent's require, is an error.
TEST(CheckerRequirements, ChildMayRequireWhatItsParentMadeBestEffort) {
  auto p = MustCompile("extends backend\nrequire memory-limit cgroup\n");
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->Requires(Requirement::kMemoryLimit));
  EXPECT_TRUE(p->Requires(Requirement::kCgroup));
  EXPECT_FALSE(p->IsBestEffort(Requirement::kCgroup));
}

TEST(CheckerRequirements, ChildMayNotRelaxWhatItsParentRequires) {
  ProfileDir dir;
  dir.Write("strict.cagent", "require landlock\n");
  dir.Write("lax.cagent", "extends strict\nbest-effort landlock\n");
  Compiled c = LoadProfile("lax", dir.Search(false));
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(dir.Render(c),
            "DIR/lax.cagent:2:13: error: 'landlock' is best-effort but 'require landlock' needs "
            "it\n"
            "  best-effort landlock\n"
            "              ^~~~~~~~\n"
            "  hint: a required layer cannot be optional; drop one of the two (the require is at "
            "line 1)\n");
}

// ---------------------------------------------------------------------------------------------
// credentials (issue 36)
// ---------------------------------------------------------------------------------------------

TEST(CheckerCredentials, NamesWhereTheValueComesFromAndTheHostsItIsFor) {
  auto p = MustCompile(
      "credentials {\n"
      "  gh    env GITHUB_TOKEN for github.com api.github.com\n"
      "  npm   optional env NPM_TOKEN for registry.npmjs.org\n"
      "  gitea file ~/.config/tea/token for git.example.org:443\n"
      "}\n");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->credentials.size(), 3U);
  const CredentialRule& gh = p->credentials[0];  // sorted by name: gh, gitea, npm
  EXPECT_EQ(gh.name, "gh");
  EXPECT_EQ(gh.source, CredentialSource::kEnv);
  EXPECT_EQ(gh.from, "GITHUB_TOKEN");
  EXPECT_FALSE(gh.optional);
  ASSERT_EQ(gh.hosts.size(), 2U);
  EXPECT_EQ(gh.hosts[1].Text(), "api.github.com");
  EXPECT_EQ(p->credentials[0].name, "gh");
  EXPECT_EQ(p->credentials[1].name, "gitea");
  EXPECT_EQ(p->credentials[1].source, CredentialSource::kFile);
  EXPECT_EQ(p->credentials[1].from, "~/.config/tea/token");
  EXPECT_EQ(p->credentials[1].hosts[0].Text(), "git.example.org:443");
  EXPECT_TRUE(p->credentials[2].optional);
  // The dump compiles back to the same credentials.
  const std::string dumped = Dump(*p, false);
  EXPECT_THAT(dumped,
              ::testing::HasSubstr("  gh env GITHUB_TOKEN for github.com api.github.com\n"));
  EXPECT_THAT(dumped,
              ::testing::HasSubstr("  npm optional env NPM_TOKEN for registry.npmjs.org\n"));
}

TEST(CheckerCredentials, EveryMistakeIsAnErrorAtItsPlace) {
  EXPECT_EQ(MustFail("credentials {\n  GH env GITHUB_TOKEN for github.com\n}\n"),
            "test.cagent:2:3: error: invalid credential name 'GH'\n"
            "    GH env GITHUB_TOKEN for github.com\n"
            "    ^~\n"
            "  hint: a name is lowercase letters, digits, '_' and '-', starting with a letter or "
            "digit\n");
  EXPECT_EQ(MustFail("credentials {\n  gh vault x for github.com\n}\n"),
            "test.cagent:2:6: error: credential 'gh' needs where its value comes from\n"
            "    gh vault x for github.com\n"
            "       ^~~~~\n"
            "  hint: write: NAME env VARIABLE for HOST... (or NAME file PATH for HOST...)\n");
  EXPECT_EQ(MustFail("credentials {\n  gh env 1TOKEN for github.com\n}\n"),
            "test.cagent:2:10: error: invalid variable name '1TOKEN'\n"
            "    gh env 1TOKEN for github.com\n"
            "           ^~~~~~\n"
            "  hint: names are letters, digits and '_', not starting with a digit\n");
  EXPECT_EQ(MustFail("credentials {\n  gh file token.txt for github.com\n}\n"),
            "test.cagent:2:11: error: a credential file is an absolute path or starts with ~/\n"
            "    gh file token.txt for github.com\n"
            "            ^~~~~~~~~\n"
            "  hint: e.g. file ~/.config/tea/token\n");
  EXPECT_EQ(MustFail("credentials {\n  gh env T github.com\n}\n"),
            "test.cagent:2:12: error: credential 'gh' needs the hosts it is for\n"
            "    gh env T github.com\n"
            "             ^~~~~~~~~~\n"
            "  hint: write: NAME env VARIABLE for HOST... (or NAME file PATH for HOST...)\n");
  EXPECT_EQ(MustFail("credentials {\n  gh env T for\n}\n"),
            "test.cagent:2:12: error: credential 'gh' is for no host\n"
            "    gh env T for\n"
            "             ^~~\n"
            "  hint: name one or more hosts after 'for', e.g. for github.com api.github.com\n");
  EXPECT_THAT(MustFail("credentials {\n  gh env T for http://github.com\n}\n"),
              ::testing::HasSubstr("error: invalid host pattern 'http://github.com'"));
  EXPECT_THAT(MustFail("credentials {\n  gh env T for a.com\n  gh env U for b.com\n}\n"),
              ::testing::HasSubstr("error: credential 'gh' is defined twice in this profile"));
}

TEST(CheckerCredentials, AChildAddsCredentialsButCannotRedefineItsParents) {
  ProfileDir dir;
  dir.Write("parent.cagent", "credentials {\n  gh env GITHUB_TOKEN for github.com\n}\n");
  dir.Write("child.cagent",
            "extends parent\ncredentials {\n  npm env NPM_TOKEN for registry.npmjs.org\n}\n");
  Compiled ok = LoadProfile("child", dir.Search(false));
  ASSERT_TRUE(ok.ok()) << dir.Render(ok);
  ASSERT_EQ(ok.policy->credentials.size(), 2U);
  dir.Write("rebind.cagent",
            "extends parent\ncredentials {\n  gh env GITHUB_TOKEN for evil.example\n}\n");
  Compiled bad = LoadProfile("rebind", dir.Search(false));
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(dir.Render(bad), ::testing::HasSubstr("error: credential 'gh' is already defined at "
                                                    "DIR/parent.cagent:2:3"));
}

// ---------------------------------------------------------------------------------------------
// Inline examples
// ---------------------------------------------------------------------------------------------

TEST(CheckerExamples, RuleMatchAndNotMatch) {
  EXPECT_EQ(MustFail("commands {\n  allow git status {\n    match \"git log\"\n"
                     "    not_match \"git status -s\"\n  }\n}\n"),
            "test.cagent:3:11: error: example failed: the rule does not match \"git log\"\n"
            "      match \"git log\"\n"
            "            ^~~~~~~~~\n"
            "  hint: patterns match argv elements from the start; '*' matches within one "
            "argument\n"
            "test.cagent:4:15: error: example failed: the rule matches \"git status -s\"\n"
            "      not_match \"git status -s\"\n"
            "                ^~~~~~~~~~~~~~~\n");
  EXPECT_EQ(MustFail("filesystem {\n  deny **/.env {\n    match src/.envrc\n    not_match .env\n"
                     "  }\n}\n"),
            "test.cagent:3:11: error: example failed: the rule does not match 'src/.envrc'\n"
            "      match src/.envrc\n"
            "            ^~~~~~~~~~\n"
            "  hint: globs match the whole path: '*' stays within one directory, '**' spans "
            "directories\n"
            "test.cagent:4:15: error: example failed: the rule matches '.env'\n"
            "      not_match .env\n"
            "                ^~~~\n");
  EXPECT_EQ(MustFail("commands {\n  allow git {\n    match \"git status; ls\"\n  }\n}\n"),
            "test.cagent:3:11: error: an example must be one simple command\n"
            "      match \"git status; ls\"\n"
            "            ^~~~~~~~~~~~~~~~\n"
            "  hint: write one command without ; && || |\n");
}

TEST(CheckerExamples, ExamplesSectionRunsAgainstTheWholeProfile) {
  EXPECT_EQ(MustFail("commands {\n  allow make\n}\nexamples {\n  allow command \"cargo build\"\n"
                     "  ask tool write_file README\n}\n"),
            "test.cagent:5:9: error: example failed: expected allow for command \"cargo build\", "
            "got deny\n"
            "    allow command \"cargo build\"\n"
            "          ^~~~~~~\n"
            "  hint: decided because no rule matches: no commands rule allows 'cargo'\n"
            "test.cagent:6:7: error: example failed: expected ask for tool write_file \"README\", "
            "got deny\n"
            "    ask tool write_file README\n"
            "        ^~~~\n"
            "  hint: decided because no rule matches: no tools rule allows write_file\n");
  EXPECT_EQ(
      MustFail("examples {\n  allow\n  allow frobnicate x\n  allow tool nosuch\n}\n"),
      "test.cagent:2:3: error: an example needs a request\n"
      "    allow\n"
      "    ^~~~~\n"
      "  hint: write: command \"git status\" (a shell line) / argv git status (no shell) / "
      "read .env / write src/main.c / tool write_file Cargo.lock / tool run_command \"make "
      "test\" / host pypi.org:443 / mcp-tool get-sum / http github.com GET "
      "/org/repo.git/info/refs\n"
      "test.cagent:3:9: error: unknown request kind 'frobnicate'\n"
      "    allow frobnicate x\n"
      "          ^~~~~~~~~~\n"
      "  hint: use command (a shell line), argv (no shell), read, write, tool, host, mcp-tool "
      "or http\n"
      "test.cagent:4:14: error: unknown tool 'nosuch'\n"
      "    allow tool nosuch\n"
      "               ^~~~~~\n"
      "  hint: the tools are: read_file, write_file, edit_file, list_dir, glob, grep, "
      "run_command, finish\n");
}

// `command` in an example is one shell line; several words are refused with the way to write
// them, and `argv` is the form without a shell (the same grammar as a `policy test` cases file).
TEST(CheckerExamples, CommandIsOneShellLineAndArgvIsExplicit) {
  EXPECT_EQ(MustFail("examples {\n  allow command git status\n}\n"),
            "test.cagent:2:21: error: 'command' takes one shell command line, quoted; found 2 "
            "words\n"
            "    allow command git status\n"
            "                      ^~~~~~\n"
            "  hint: write command \"git status\" for the shell line, or argv git status for the "
            "argv without a shell\n");
  EXPECT_EQ(MustFail("commands {\n  allow echo\n}\nexamples {\n  allow argv echo \"a|b\"\n"
                     "  allow command \"echo a|b\"\n}\n"),
            "test.cagent:6:9: error: example failed: expected allow for command \"echo a|b\", got "
            "deny\n"
            "    allow command \"echo a|b\"\n"
            "          ^~~~~~~\n"
            "  hint: decided because no rule matches: no commands rule allows 'b'\n");
}

// BUG (failing until fixed, see the report): a failed example names the rule that decided and
// where it is written, but the compiler runs the examples before the loader attaches the sources
// to the policy, so every location prints as "<built-in>" — even this profile's own rules.
TEST(CheckerExamples, FailedExampleSaysWhereTheDecidingRuleIs) {
  EXPECT_EQ(MustFail("extends base\ncommands {\n  allow git\n}\nexamples {\n"
                     "  allow command \"git push\"\n  deny command \"git gc\"\n}\n"),
            "test.cagent:6:9: error: example failed: expected allow for command \"git push\", got "
            "deny\n"
            "    allow command \"git push\"\n"
            "          ^~~~~~~\n"
            "  hint: decided by rule 'commands: deny git push' at <built-in>/base.cagent:58:8: "
            "pushing publishes the work; cagent captures your change as a patch that the user "
            "reviews and applies, so commit locally and finish\n"
            "test.cagent:7:8: error: example failed: expected deny for command \"git gc\", got "
            "allow\n"
            "    deny command \"git gc\"\n"
            "         ^~~~~~~\n"
            "  hint: decided by rule 'commands: allow git' at test.cagent:3:9: the profile "
            "allows this command\n");
}

// ---------------------------------------------------------------------------------------------
// Lexer and parser errors reach the same rendering, and every error is reported
// ---------------------------------------------------------------------------------------------

TEST(CheckerAllErrors, SyntaxAndCheckerErrorsTogether) {
  EXPECT_EQ(MustFail("description \"abc\n}\nlimits {\n  wal-time 1m\n}\n}\n"),
            "test.cagent:1:13: error: unterminated string\n"
            "  description \"abc\n"
            "              ^~~~\n"
            "  hint: close it with '\"' on the same line\n"
            "test.cagent:2:1: error: unbalanced '}'\n"
            "  }\n"
            "  ^\n"
            "  hint: no block is open here; remove it or add the missing '{'\n"
            "test.cagent:4:3: error: unknown key 'wal-time' in limits\n"
            "    wal-time 1m\n"
            "    ^~~~~~~~\n"
            "  hint: did you mean 'wall-time'?\n"
            "test.cagent:6:1: error: unbalanced '}'\n"
            "  }\n"
            "  ^\n"
            "  hint: no block is open here; remove it or add the missing '{'\n");
}

TEST(CheckerAllErrors, EveryErrorInEverySectionSorted) {
  SearchPath search;
  Compiled c = CompileText("test.cagent",
                           "limits {\n  memory 12Q\n  processes lots\n}\n"
                           "network wifi\ntools {\n  allow read_fil\n}\n"
                           "filesystem {\n  read-only ../x ~bob/x\n}\napproval sometimes\n",
                           search);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.diags.ErrorCount(), 7U);
  std::string all = RenderAll(*c.sources, c.diags);
  std::vector<std::string> firsts;
  for (std::size_t at = 0; at < all.size();) {
    std::size_t end = all.find('\n', at);
    std::string line = all.substr(at, end - at);
    if (line.starts_with("test.cagent:")) firsts.push_back(line);
    at = end + 1;
  }
  EXPECT_EQ(firsts, (std::vector<std::string>{
                        "test.cagent:2:10: error: invalid size '12Q'",
                        "test.cagent:3:13: error: invalid number 'lots'",
                        "test.cagent:5:9: error: unknown network mode 'wifi'",
                        "test.cagent:7:9: error: unknown tool 'read_fil'",
                        "test.cagent:10:13: error: invalid path '../x': '..' components are not "
                        "allowed",
                        "test.cagent:10:18: error: invalid path '~bob/x': '~user' paths are not "
                        "supported",
                        "test.cagent:12:10: error: unknown approval mode 'sometimes'",
                    }));
}

// ---------------------------------------------------------------------------------------------
// The loader: extends and include
// ---------------------------------------------------------------------------------------------

TEST(LoaderExtends, CycleNamesTheWholeCycle) {
  ProfileDir dir;
  dir.Write("a.cagent", "extends b\n");
  dir.Write("b.cagent", "extends c\n");
  dir.Write("c.cagent", "extends a\n");
  Compiled c = LoadProfile("a", dir.Search());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(dir.Render(c),
            "DIR/c.cagent:1:9: error: profiles extend each other in a cycle: a -> b -> c -> a\n"
            "  extends a\n"
            "          ^\n"
            "  hint: one of them must stop extending the other\n");
}

TEST(LoaderExtends, ExtendingItsOwnNameMeansTheNextOneOnTheSearchPath) {
  // `extends me` in me.cagent skips the file itself: with nothing further down, no parent.
  ProfileDir dir;
  dir.Write("me.cagent", "extends me\n");
  Compiled c = LoadProfile(dir.path() + "/me.cagent", dir.Search());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(dir.Render(c),
            "DIR/me.cagent:1:9: error: no profile named 'me' other than this one\n"
            "  extends me\n"
            "          ^~\n"
            "  hint: a profile cannot extend itself; it extends the next profile of its name "
            "down the search order, and there is none (looked in DIR and the built-in "
            "profiles)\n");
  // A local base.cagent that extends base gets the built-in one.
  dir.Write("base.cagent", "extends base\ncommands {\n  allow make\n}\n");
  Compiled local = LoadProfile("base", dir.Search());
  ASSERT_TRUE(local.ok()) << dir.Render(local);
  EXPECT_EQ(local.policy->files,
            (std::vector<std::string>{dir.path() + "/base.cagent", "<built-in>/base.cagent"}));
  Engine e(*local.policy, PortableBinding());
  EXPECT_ALLOW(e.Command(Argv({"make"})), "commands: allow make");
  EXPECT_ALLOW(e.Command(Argv({"git", "status"})),
               "commands: allow git (add | blame | branch | diff | grep | log | ls-files | "
               "rev-parse | show | status)");
}

TEST(LoaderExtends, MissingParent) {
  ProfileDir dir;
  dir.Write("m.cagent", "extends nosuch\n");
  Compiled c = LoadProfile("m", dir.Search());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(dir.Render(c),
            "DIR/m.cagent:1:9: error: no profile named 'nosuch'\n"
            "  extends nosuch\n"
            "          ^~~~~~\n"
            "  hint: looked in DIR and the built-in profiles; `cagent policy list` shows what "
            "exists\n");
  Compiled p = LoadProfile("m", dir.Search(/*builtins=*/false));
  EXPECT_EQ(dir.Render(p),
            "DIR/m.cagent:1:9: error: no profile named 'nosuch'\n"
            "  extends nosuch\n"
            "          ^~~~~~\n"
            "  hint: looked in DIR; `cagent policy list` shows what exists\n");
}

TEST(LoaderExtends, MissingParentFile) {
  ProfileDir dir;
  dir.Write("p.cagent", "extends ./nofile.cagent\n");
  Compiled c = LoadProfile("p", dir.Search());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(dir.Render(c),
            "DIR/p.cagent:1:9: error: profile file 'DIR/./nofile.cagent' not found\n"
            "  extends ./nofile.cagent\n"
            "          ^~~~~~~~~~~~~~~\n");
}

// BUG (failing until fixed, see the report): with an empty search path the hint reads "looked in
// and the built-in profiles".
TEST(LoaderExtends, MissingProfileWithNoSearchDirectories) {
  SearchPath search;
  Compiled c = LoadProfile("nosuch", search);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(RenderAll(*c.sources, c.diags),
            "error: no profile named 'nosuch'\n"
            "  hint: looked in the built-in profiles; `cagent policy list` shows what exists\n");
}

TEST(LoaderExtends, OneParentOnly) {
  EXPECT_EQ(MustFail("extends base\nextends backend\n"),
            "test.cagent:2:1: error: a profile can extend only one parent\n"
            "  extends backend\n"
            "  ^~~~~~~\n"
            "  hint: the first 'extends' is at line 1\n");
  EXPECT_EQ(MustFail("extends base backend\n"),
            "test.cagent:1:1: error: 'extends' takes one profile name\n"
            "  extends base backend\n"
            "  ^~~~~~~\n"
            "  hint: e.g.: extends base\n");
  EXPECT_EQ(MustFail("extends \"no good\"\n"),
            "test.cagent:1:9: error: invalid profile name 'no good'\n"
            "  extends \"no good\"\n"
            "          ^~~~~~~~~\n"
            "  hint: names are letters, digits, '-', '_' and '.'\n");
}

TEST(LoaderExtends, ErrorsInParentAndChildAreAllReported) {
  ProfileDir dir;
  dir.Write("parent.cagent", "network wifi\n");
  dir.Write("child.cagent", "extends parent\napproval sometimes\n");
  Compiled c = LoadProfile("child", dir.Search(false));
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(dir.Render(c),
            "DIR/child.cagent:2:10: error: unknown approval mode 'sometimes'\n"
            "  approval sometimes\n"
            "           ^~~~~~~~~\n"
            "  hint: use never-ask, on-request or auto\n"
            "DIR/parent.cagent:1:9: error: unknown network mode 'wifi'\n"
            "  network wifi\n"
            "          ^~~~\n"
            "  hint: use none (no IP sockets) or loopback (lo only)\n");
}

TEST(LoaderInclude, CycleNamesTheFiles) {
  ProfileDir dir;
  dir.Write("i.cagent", "include \"f1.cagent\"\n");
  dir.Write("f1.cagent", "include \"f2.cagent\"\n");
  dir.Write("f2.cagent", "include \"f1.cagent\"\n");
  Compiled c = LoadProfile("i", dir.Search());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(dir.Render(c),
            "DIR/f2.cagent:1:9: error: files include each other in a cycle: DIR/i.cagent -> "
            "DIR/f1.cagent -> DIR/f2.cagent -> DIR/f1.cagent\n"
            "  include \"f1.cagent\"\n"
            "          ^~~~~~~~~~~\n");
}

TEST(LoaderInclude, MissingFile) {
  ProfileDir dir;
  dir.Write("im.cagent", "include \"missing.cagent\"\nnetwork wifi\n");
  Compiled c = LoadProfile("im", dir.Search());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(dir.Render(c),
            "DIR/im.cagent:1:9: error: cannot include missing.cagent: cannot read "
            "'DIR/missing.cagent': No such file or directory\n"
            "  include \"missing.cagent\"\n"
            "          ^~~~~~~~~~~~~~~~\n"
            "DIR/im.cagent:2:9: error: unknown network mode 'wifi'\n"
            "  network wifi\n"
            "          ^~~~\n"
            "  hint: use none (no IP sockets) or loopback (lo only)\n");
}

TEST(LoaderInclude, ExtendsInsideAnIncludedFile) {
  ProfileDir dir;
  dir.Write("top.cagent", "include \"frag.cagent\"\n");
  dir.Write("frag.cagent", "extends base\n");
  Compiled c = LoadProfile("top", dir.Search());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(dir.Render(c),
            "DIR/frag.cagent:1:1: error: 'extends' is not allowed in an included file\n"
            "  extends base\n"
            "  ^~~~~~~\n"
            "  hint: put it in the profile that includes this file\n");
}

TEST(LoaderInclude, SplicesStatementsAndReportsErrorsInTheFragment) {
  ProfileDir dir;
  dir.Write("top.cagent", "extends base\ninclude \"tools.cagent\"\n");
  dir.Write("tools.cagent", "commands {\n  allow make\n}\n");
  Compiled c = LoadProfile("top", dir.Search());
  ASSERT_TRUE(c.ok()) << dir.Render(c);
  Engine e(*c.policy, PortableBinding());
  Decision d = e.Command(Argv({"make"}));
  EXPECT_ALLOW(d, "commands: allow make");
  EXPECT_EQ(c.policy->Where(d.loc), dir.path() + "/tools.cagent:2:9");
  EXPECT_EQ(c.policy->files,
            (std::vector<std::string>{dir.path() + "/top.cagent", dir.path() + "/tools.cagent",
                                      "<built-in>/base.cagent"}));

  dir.Write("tools.cagent", "commands {\n  alow make\n}\n");
  Compiled bad = LoadProfile("top", dir.Search());
  EXPECT_EQ(dir.Render(bad),
            "DIR/tools.cagent:2:3: error: unknown key 'alow' in commands\n"
            "    alow make\n"
            "    ^~~~\n"
            "  hint: did you mean 'allow'?\n");
}

// ---------------------------------------------------------------------------------------------
// Merge semantics (compiler.h)
// ---------------------------------------------------------------------------------------------

constexpr std::string_view kParent = R"(description "parent"
network loopback
approval on-request
workspace read-only
filesystem {
  read-only /usr /opt
  read-write /srv
  deny **/.env
}
commands {
  allow git
  deny git push
}
tools {
  allow read_file
}
limits {
  wall-time 10m
  memory 1G
}
environment {
  pass TERM
  scrub *_TOKEN
  set A parent
  set B parent
}
verify {
  run "make test"
  run "make lint" timeout 2m
}
require landlock
)";

constexpr std::string_view kChild = R"(extends parent
network none
filesystem {
  read-write /opt
  hide /srv
}
commands {
  allow make
  allow git
}
limits {
  memory 2G
}
environment {
  pass LANG
  set B child
}
verify {
  run "ctest"
}
require seccomp
)";

TEST(Merge, ScalarsNearestWins) {
  ProfileDir dir;
  dir.Write("parent.cagent", kParent);
  dir.Write("child.cagent", kChild);
  Compiled c = LoadProfile("child", dir.Search(false));
  ASSERT_TRUE(c.ok()) << dir.Render(c);
  const Policy& p = *c.policy;
  EXPECT_EQ(p.name, "child");
  EXPECT_EQ(p.chain, (std::vector<std::string>{"parent", "child"}));
  EXPECT_EQ(p.description, "parent");  // the child has none
  EXPECT_EQ(p.network.value, NetworkMode::kNone);
  EXPECT_EQ(p.Where(p.network.loc), dir.path() + "/child.cagent:2:1");
  EXPECT_EQ(p.approval.value, ApprovalMode::kOnRequest);
  EXPECT_EQ(p.Where(p.approval.loc), dir.path() + "/parent.cagent:3:1");
  EXPECT_FALSE(p.workspace_writable.value);
  EXPECT_EQ(p.limit(Limit::kWallTime).value, 600'000U);
  EXPECT_EQ(p.limit(Limit::kMemory).value, 2ULL << 30);
  EXPECT_EQ(p.Where(p.limit(Limit::kMemory).loc), dir.path() + "/child.cagent:12:3");
}

TEST(Merge, RulesAreAUnion) {
  ProfileDir dir;
  dir.Write("parent.cagent", kParent);
  dir.Write("child.cagent", kChild);
  Compiled c = LoadProfile("child", dir.Search(false));
  ASSERT_TRUE(c.ok()) << dir.Render(c);
  const Policy& p = *c.policy;
  ASSERT_EQ(p.commands.size(), 3U);
  EXPECT_EQ(p.commands[0].text, "git");
  // Written in both: kept once, at the parent's location.
  EXPECT_EQ(p.Where(p.commands[0].loc), dir.path() + "/parent.cagent:11:9");
  EXPECT_EQ(p.commands[1].text, "git push");
  EXPECT_EQ(p.commands[2].text, "make");
  ASSERT_EQ(p.path_rules.size(), 1U);
  ASSERT_EQ(p.tools.size(), 1U);
  ASSERT_EQ(p.requirements.size(), 2U);
  EXPECT_TRUE(p.Requires(Requirement::kLandlock));
  EXPECT_TRUE(p.Requires(Requirement::kSeccomp));
  Engine e(p, PortableBinding());
  EXPECT_DENY(e.Command(Argv({"git", "push"})), "commands: deny git push");
  EXPECT_ALLOW(e.Command(Argv({"make"})), "commands: allow make");
  EXPECT_DENY(e.Path(Access::kRead, ".env"), "filesystem: deny **/.env");
}

TEST(Merge, MountsPerPathNearestWins) {
  ProfileDir dir;
  dir.Write("parent.cagent", kParent);
  dir.Write("child.cagent", kChild);
  Compiled c = LoadProfile("child", dir.Search(false));
  ASSERT_TRUE(c.ok()) << dir.Render(c);
  const Policy& p = *c.policy;
  ASSERT_EQ(p.mounts.size(), 3U);
  EXPECT_EQ(p.mounts[0].path.Text(), "/opt");
  EXPECT_EQ(p.mounts[0].mode, MountMode::kReadWrite);
  EXPECT_EQ(p.mounts[1].path.Text(), "/srv");
  EXPECT_EQ(p.mounts[1].mode, MountMode::kHidden);
  EXPECT_EQ(p.mounts[2].path.Text(), "/usr");
  EXPECT_EQ(p.mounts[2].mode, MountMode::kReadOnly);
  Engine e(p, PortableBinding());
  EXPECT_ALLOW(e.Path(Access::kWrite, "/opt/x"), "filesystem: read-write /opt");
  EXPECT_DENY(e.Path(Access::kRead, "/srv/x"), "filesystem: hide /srv");
  EXPECT_DENY(e.Path(Access::kWrite, "src/a.c"), "workspace read-only");
}

TEST(Merge, EnvironmentSetPerNameAndVerifyReplaced) {
  ProfileDir dir;
  dir.Write("parent.cagent", kParent);
  dir.Write("child.cagent", kChild);
  Compiled c = LoadProfile("child", dir.Search(false));
  ASSERT_TRUE(c.ok()) << dir.Render(c);
  const Policy& p = *c.policy;
  ASSERT_EQ(p.env_set.size(), 2U);
  EXPECT_EQ(p.env_set[0].name, "A");
  EXPECT_EQ(p.env_set[0].value, "parent");
  EXPECT_EQ(p.env_set[1].name, "B");
  EXPECT_EQ(p.env_set[1].value, "child");
  ASSERT_EQ(p.env_pass.size(), 2U);
  EXPECT_EQ(p.env_pass[0].name.pattern(), "LANG");
  EXPECT_EQ(p.env_pass[1].name.pattern(), "TERM");
  ASSERT_EQ(p.env_scrub.size(), 1U);
  ASSERT_EQ(p.verify.size(), 1U);
  EXPECT_EQ(p.verify[0].command, "ctest");
  EXPECT_FALSE(p.verify[0].timeout_ms.has_value());
}

TEST(Merge, ChildWithoutVerifyKeepsTheParents) {
  ProfileDir dir;
  dir.Write("parent.cagent", kParent);
  dir.Write("kid.cagent", "extends parent\nnetwork none\n");
  Compiled c = LoadProfile("kid", dir.Search(false));
  ASSERT_TRUE(c.ok()) << dir.Render(c);
  const Policy& p = *c.policy;
  ASSERT_EQ(p.verify.size(), 2U);
  EXPECT_EQ(p.verify[0].command, "make test");
  EXPECT_EQ(p.verify[1].command, "make lint");
  EXPECT_EQ(p.verify[1].timeout_ms, 120'000U);
  EXPECT_EQ(p.description, "parent");
  EXPECT_EQ(p.env_set.size(), 2U);
}

TEST(Merge, ExtendsResolvesNearTheChildFirst) {
  // A file named like a built-in, next to the child, wins over the built-in.
  ProfileDir dir;
  dir.Write("base.cagent", "description \"local base\"\n");
  dir.Write("kid.cagent", "extends base\n");
  Compiled c = LoadProfile(dir.path() + "/kid.cagent", SearchPath{});
  ASSERT_TRUE(c.ok()) << dir.Render(c);
  EXPECT_EQ(c.policy->description, "local base");
  EXPECT_EQ(c.policy->files,
            (std::vector<std::string>{dir.path() + "/kid.cagent", dir.path() + "/base.cagent"}));
}

}  // namespace
}  // namespace cagent::policy
