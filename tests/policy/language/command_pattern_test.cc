// Command patterns beyond plain prefixes: `...` (any run of arguments), `workspace:GLOB`
// (programs inside the workspace, and the cd that may leave it), wrappers looked through
// (timeout, env, nice ...), and `[` as a command name. Each guard has a twin: the same line is
// allowed without the rule or the construct that denies it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "policy/language/checker.h"
#include "tests/policy/policy_test_util.h"

namespace cagent::policy {
namespace {

using ::testing::HasSubstr;
using testing::MustCompile;
using testing::MustFail;

constexpr const char* kDefault = "default";

Engine MakeEngine(const std::shared_ptr<const Policy>& p) { return Engine(*p, PortableBinding()); }

// ---- `...` ----

TEST(AnyRun, MatchesTheNextElementAtAnyLaterPosition) {
  auto p = MustCompile(
      "commands {\n  allow find\n  deny find ... (-exec | -delete)\n"
      "  deny tar ... -x ... --to-command*\n}\n");
  ASSERT_NE(p, nullptr);
  Engine e = MakeEngine(p);
  const std::string deny = "commands: deny find ... (-delete | -exec)";
  EXPECT_ALLOW(e.Shell("find . -name '*.c'"), "commands: allow find");
  EXPECT_DENY(e.Shell("find . -name '*.pyc' -delete"), deny);
  EXPECT_DENY(e.Shell("find -delete"), deny);  // right after the name: a run of none
  EXPECT_DENY(e.Shell("find . -type f -exec grep -l x {} +"), deny);
  // Only whole arguments match: -executable is not -exec.
  EXPECT_ALLOW(e.Shell("find . -executable"), "commands: allow find");
  // Blocks after several `...` are found in order.
  EXPECT_FALSE(p->commands.empty());
  const CommandRule* tar = nullptr;
  for (const auto& r : p->commands) {
    if (r.text.starts_with("tar")) tar = &r;
  }
  ASSERT_NE(tar, nullptr);
  EXPECT_EQ(tar->text, "tar ... -x ... --to-command*");
  const std::vector<std::string> yes = {"tar", "-f", "a", "-x", "-v", "--to-command=sh"};
  const std::vector<std::string> order = {"tar", "--to-command=sh", "-x"};
  const std::vector<std::string> none = {"tar", "-x", "-f", "a"};
  EXPECT_TRUE(tar->Matches(yes));
  EXPECT_FALSE(tar->Matches(order));
  EXPECT_FALSE(tar->Matches(none));
}

TEST(AnyRun, TheTwinWithoutTheDenyAllowsTheSameLine) {
  auto p = MustCompile("commands {\n  allow find\n}\n");
  ASSERT_NE(p, nullptr);
  EXPECT_ALLOW(MakeEngine(p).Shell("find . -name '*.pyc' -delete"), "commands: allow find");
}

TEST(AnyRun, ConsecutiveElementsAfterItMatchConsecutiveArguments) {
  auto p = MustCompile("commands {\n  ask git ... -c core.pager\n}\n");
  ASSERT_NE(p, nullptr);
  Engine e = MakeEngine(p);
  EXPECT_ASK(e.Shell("git --no-pager -c core.pager log"), "commands: ask git ... -c core.pager");
  EXPECT_DENY(e.Shell("git -c x core.pager log"), kDefault);
}

TEST(AnyRun, QuotedIsTheLiteralWord) {
  auto p = MustCompile("commands {\n  allow echo \"...\"\n}\n");
  ASSERT_NE(p, nullptr);
  Engine e = MakeEngine(p);
  EXPECT_ALLOW(e.Shell("echo ..."), "commands: allow echo \"...\"");
  EXPECT_DENY(e.Shell("echo hi"), kDefault);
}

TEST(AnyRun, MisplacedIsAnError) {
  EXPECT_EQ(MustFail("commands {\n  deny ... rm\n}\n"),
            "test.cagent:2:8: error: a command pattern starts with the program's name\n"
            "    deny ... rm\n"
            "         ^~~\n"
            "  hint: write the name first: 'deny find ... -delete'\n");
  EXPECT_THAT(MustFail("commands {\n  deny find -x ...\n}\n"),
              HasSubstr("'...' at the end of a pattern adds nothing"));
  EXPECT_THAT(MustFail("commands {\n  deny find ... ... -x\n}\n"),
              HasSubstr("'...' written twice in a row"));
}

TEST(AnyRun, InlineExamplesUseIt) {
  EXPECT_THAT(
      MustFail("commands {\n  deny find ... -delete {\n    match \"find . -print\"\n  }\n}\n"),
      HasSubstr("example failed: the rule does not match"));
}

// ---- workspace: ----

TEST(WorkspaceProgram, NormalisesRelativePathsThatStayInside) {
  EXPECT_EQ(WorkspaceProgram("./t"), "t");
  EXPECT_EQ(WorkspaceProgram("build//./tests/unit"), "build/tests/unit");
  EXPECT_EQ(WorkspaceProgram("t"), std::nullopt);  // a name: looked up in PATH
  EXPECT_EQ(WorkspaceProgram("/usr/bin/t"), std::nullopt);
  EXPECT_EQ(WorkspaceProgram("~/bin/t"), std::nullopt);
  EXPECT_EQ(WorkspaceProgram("../t"), std::nullopt);
  EXPECT_EQ(WorkspaceProgram("build/../t"), std::nullopt);
  EXPECT_EQ(WorkspaceProgram("./"), std::nullopt);
  EXPECT_EQ(WorkspaceProgram("build/"), std::nullopt);
}

TEST(WorkspaceProgram, AllowsProgramsBuiltInTheWorkspace) {
  auto p = MustCompile("commands {\n  allow cd\n  allow workspace:*\n  deny curl\n}\n");
  ASSERT_NE(p, nullptr);
  Engine e = MakeEngine(p);
  const std::string allow = "commands: allow workspace:*";
  EXPECT_ALLOW(e.Shell("./t"), allow);
  EXPECT_ALLOW(e.Shell("./build/app --help"), allow);
  EXPECT_ALLOW(e.Shell("build/tests/unit --gtest_filter=A.*"), allow);
  // On a tie the first command's rule is named.
  EXPECT_ALLOW(e.Shell("cd build && ./t"), "commands: allow cd");
  EXPECT_ALLOW(e.Shell("cd build/x; ./t"), "commands: allow cd");
  // Not in the workspace, or not known to be.
  EXPECT_DENY(e.Shell("../t"), kDefault);
  EXPECT_DENY(e.Shell("/usr/bin/t"), kDefault);
  EXPECT_DENY(e.Shell("t"), kDefault);
  const Decision after_cd = e.Shell("cd /usr/bin && ./t");
  EXPECT_DENY(after_cd, kDefault);
  EXPECT_THAT(after_cd.reason, HasSubstr("after a cd that may leave the workspace"));
  EXPECT_DENY(e.Shell("cd .. && ./t"), kDefault);
  EXPECT_DENY(e.Shell("cd && ./t"), kDefault);
  EXPECT_DENY(e.Shell("cd - && ./t"), kDefault);
  EXPECT_DENY(e.Shell("cd ~ && ./t"), kDefault);
  EXPECT_DENY(e.Shell("cd $HOME && ./t"), kDefault);
  EXPECT_DENY(e.Shell("cd a/../.. && ./t"), kDefault);
  // A cd in a subshell is counted for the rest of the line too (an over-approximation).
  EXPECT_DENY(e.Shell("(cd /tmp); ./t"), kDefault);
  // A deny rule still matches a workspace program by its name.
  EXPECT_DENY(e.Shell("./curl x"), "commands: deny curl");
}

TEST(WorkspaceProgram, TheTwinWithoutTheRuleDeniesIt) {
  auto p = MustCompile("commands {\n  allow cd\n}\n");
  ASSERT_NE(p, nullptr);
  EXPECT_DENY(MakeEngine(p).Shell("cd build && ./t"), kDefault);
}

TEST(WorkspaceProgram, GlobSelectsPaths) {
  auto p = MustCompile(
      "commands {\n  allow cd\n  allow workspace:build/*\n  deny workspace:scripts/deploy*\n}\n");
  ASSERT_NE(p, nullptr);
  Engine e = MakeEngine(p);
  EXPECT_ALLOW(e.Shell("./build/t"), "commands: allow workspace:build/*");
  EXPECT_ALLOW(e.Shell("build/sub/t"), "commands: allow workspace:build/*");  // * matches '/'
  EXPECT_DENY(e.Shell("./t"), kDefault);
  EXPECT_DENY(e.Shell("./scripts/deploy.sh"), "commands: deny workspace:scripts/deploy*");
  // Deny rules for workspace programs apply after a cd too.
  EXPECT_DENY(e.Shell("cd /x; scripts/deploy.sh"), "commands: deny workspace:scripts/deploy*");
}

TEST(WorkspaceProgram, BadPatternsAreErrors) {
  EXPECT_THAT(MustFail("commands {\n  allow workspace:\n}\n"), HasSubstr("needs a path glob"));
  EXPECT_THAT(MustFail("commands {\n  allow workspace:/usr/*\n}\n"),
              HasSubstr("without a leading '/', './' or '~'"));
  EXPECT_THAT(MustFail("commands {\n  allow workspace:./t\n}\n"),
              HasSubstr("without a leading '/', './' or '~'"));
  EXPECT_THAT(MustFail("commands {\n  allow workspace:a/../t\n}\n"),
              HasSubstr("an empty, '.' or '..' component"));
  EXPECT_THAT(MustFail("commands {\n  allow (make | workspace:t)\n}\n"),
              HasSubstr("cannot be an alternative in a group"));
  EXPECT_THAT(MustFail("commands {\n  allow env workspace:t\n}\n"),
              HasSubstr("can only be a pattern's first element"));
}

// ---- wrappers ----

TEST(Wrappers, TheCommandTheyRunIsJudged) {
  auto p = MustCompile(
      "commands {\n  allow (timeout | nice | env | nohup | stdbuf | time | ionice | command | "
      "exec)\n"
      "  allow make\n  deny curl\n}\n");
  ASSERT_NE(p, nullptr);
  Engine e = MakeEngine(p);
  const Decision d = e.Shell("timeout 60 make test");
  EXPECT_ALLOW(d, "commands: allow make");
  EXPECT_THAT(d.reason, HasSubstr("run by 'timeout', which is looked through"));
  EXPECT_ALLOW(e.Shell("nice -n 5 timeout -s KILL 5 env CC=clang make"), "commands: allow make");
  EXPECT_ALLOW(e.Shell("nohup make > /tmp/log 2>&1 &"), "commands: allow make");
  EXPECT_ALLOW(e.Shell("env"),
               "commands: allow (command | env | exec | ionice | nice | nohup | "
               "stdbuf | time | timeout)");
  EXPECT_DENY(e.Shell("timeout 60 curl https://example.com"), "commands: deny curl");
  EXPECT_DENY(e.Shell("exec /usr/bin/curl x"), "commands: deny curl");
  EXPECT_DENY(e.Shell("timeout 5 rm -rf x"), kDefault);
  // The assignments env makes are judged like leading assignments.
  for (const char* line : {"env PATH=./bin make", "env -i LD_PRELOAD=./x.so make",
                           "env -u PATH make", "env --unset=PYTHONPATH make"}) {
    const Decision a = e.Shell(line);
    EXPECT_DENY(a, "shell") << line;
    EXPECT_THAT(a.reason, HasSubstr("changes which program or code a command runs")) << line;
  }
  EXPECT_DENY(e.Shell("env -S 'make test'"), "shell");
  EXPECT_DENY(e.Shell("time -o /tmp/t make"), "shell");
}

TEST(Wrappers, TheTwinWithoutTheWrapperRuleDeniesThem) {
  auto p = MustCompile("commands {\n  allow make\n}\n");
  ASSERT_NE(p, nullptr);
  EXPECT_DENY(MakeEngine(p).Shell("timeout 60 make test"), kDefault);
}

TEST(Wrappers, BeforeLookingThroughAnAllowedWrapperAllowedAnything) {
  // What looking through guards against: a rule that allows the wrapper by its name alone matches
  // `timeout 60 curl`, so only the wrapped command's own judgement can deny it.
  auto p = MustCompile("commands {\n  allow timeout\n  deny curl\n}\n");
  ASSERT_NE(p, nullptr);
  const std::vector<std::string> argv = {"timeout", "60", "curl", "x"};
  EXPECT_ALLOW(MakeEngine(p).Command(argv), "commands: allow timeout");  // argv: not looked through
  EXPECT_DENY(MakeEngine(p).Shell("timeout 60 curl x"), "commands: deny curl");
}

// ---- [ ----

TEST(Brackets, TestAsBracketIsACommandName) {
  auto p = MustCompile("commands {\n  allow (\\[ | echo)\n}\n");
  ASSERT_NE(p, nullptr);
  Engine e = MakeEngine(p);
  EXPECT_ALLOW(e.Shell("[ -f Makefile ] && echo yes"), "commands: allow (\"\\\\[\" | echo)");
  EXPECT_ALLOW(e.Shell("[ -d build ]"), "commands: allow (\"\\\\[\" | echo)");
  // `[[ … ]]` is read as one test command named "[[", which this profile does not allow.
  EXPECT_DENY(e.Shell("[[ -d build ]]"), "default");
  EXPECT_EQ(e.Shell("[[ -d build ]]").reason, "no commands rule allows '[['");
}

}  // namespace
}  // namespace cagent::policy
