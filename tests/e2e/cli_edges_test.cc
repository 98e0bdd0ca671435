// End-to-end tests of cagent's command-line edges (issue #20): a misspelt subcommand or option
// gets a "did you mean" hint and the usage status, `cagent help [SUBCOMMAND]` is the --help of the
// tree or of one subcommand.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CliEdges, MisspeltSubcommandSuggestsTheNearestName) {
  const RunResult r = Harness::Get().Run({"exce"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "cagent: unknown subcommand 'exce'; did you mean 'exec'?\n");
  EXPECT_EQ(r.out, "");
  const RunResult p = Harness::Get().Run({"polcy", "check", "x"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_EQ(p.err, "cagent: unknown subcommand 'polcy'; did you mean 'policy'?\n");
}

TEST(CliEdges, UnknownSubcommandWithNothingCloseGetsNoSuggestion) {
  const RunResult r = Harness::Get().Run({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("cagent: unknown subcommand 'frobnicate'"));
  EXPECT_THAT(r.err, Not(HasSubstr("did you mean")));
  EXPECT_THAT(r.err, HasSubstr("cagent --help"));
}

TEST(CliEdges, MisspeltGlobalOptionSuggestsTheNearestOption) {
  const RunResult r = Harness::Get().Run({"--verison"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "cagent: unknown option '--verison'; did you mean '--version'?\n");
  const RunResult far = Harness::Get().Run({"--frobnicate"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_THAT(far.err, HasSubstr("unknown option '--frobnicate'"));
  EXPECT_THAT(far.err, Not(HasSubstr("did you mean")));
}

TEST(CliEdges, GlobalOptionsStillWork) {
  const RunResult v = Harness::Get().Run({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_THAT(v.out, HasSubstr("cagent "));
  const RunResult h = Harness::Get().Run({"--help"});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_THAT(h.out, HasSubstr("exec"));
}

TEST(CliEdges, HelpAlonePrintsTheTopLevelHelp) {
  const RunResult help = Harness::Get().Run({"help"});
  const RunResult flag = Harness::Get().Run({"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_EQ(help.out, flag.out);
  EXPECT_THAT(help.out, HasSubstr("SUBCOMMAND"));
  // `help help` is the same page, not an error.
  const RunResult twice = Harness::Get().Run({"help", "help"});
  EXPECT_EQ(twice.exit_code, 0);
  EXPECT_EQ(twice.out, flag.out);
}

TEST(CliEdges, HelpSubcommandPrintsThatSubcommandsHelp) {
  const RunResult help = Harness::Get().Run({"help", "exec"});
  const RunResult flag = Harness::Get().Run({"exec", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_EQ(help.out, flag.out);
  EXPECT_THAT(help.out, HasSubstr("cagent exec"));
}

TEST(CliEdges, HelpOfAnUnknownSubcommandIsAUsageErrorWithASuggestion) {
  const RunResult r = Harness::Get().Run({"help", "exce"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "cagent: unknown subcommand 'exce'; did you mean 'exec'?\n");
  const RunResult many = Harness::Get().Run({"help", "exec", "run"});
  EXPECT_EQ(many.exit_code, 2);
  EXPECT_THAT(many.err, HasSubstr("cagent: help takes at most one subcommand"));
}

// `--print-seccomp` runs nothing, so it needs no command (it used to want `-- true`).
TEST(CliEdges, PrintSeccompNeedsNoCommand) {
  const RunResult r = Harness::Get().Run({"exec", "--print-seccomp"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ptrace"));
  // The same filter as with a command.
  const RunResult with = Harness::Get().Run({"exec", "--print-seccomp", "--", "true"});
  EXPECT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(r.out, with.out);
}

TEST(CliEdges, ExecWithoutACommandIsStillAUsageError) {
  const RunResult r = Harness::Get().Run({"exec"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("cagent: exec needs a command"));
  EXPECT_EQ(r.out, "");
}

// --ro, --rw and --hide name paths that must exist: a typo is an error naming the flag and the
// path, not a sandbox silently without the bind (or, for --hide, with the file still visible).
TEST(CliEdges, AMissingExecPathIsAUsageError) {
  const std::string missing = Harness::Get().MakeDir("strict") + "/not-there";
  for (const char* flag : {"--ro", "--rw", "--hide"}) {
    const RunResult r = Harness::Get().Run({"exec", flag, missing, "--", "true"});
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(std::string("cagent: ") + flag + " " + missing +
                                 ": No such file or directory"))
        << flag;
    // The hint names the optional form.
    EXPECT_THAT(r.err, HasSubstr(std::string(flag) + " ?" + missing)) << flag;
  }
}

// "?PATH" keeps the old skip-if-absent rule: the command runs, without the bind.
TEST(CliEdges, AnOptionalExecPathMaySkip) {
  const std::string dir = Harness::Get().MakeDir("optional");
  const std::string missing = dir + "/not-there";
  for (const char* flag : {"--ro", "--rw", "--hide"}) {
    const RunResult r = Harness::Get().Run(
        {"exec", "--quiet", flag, "?" + missing, "--", "/bin/sh", "-c", "echo ran"});
    EXPECT_EQ(r.exit_code, 0) << flag << ": " << r.err;
    EXPECT_EQ(r.out, "ran\n") << flag;
  }
  // An existing path given as optional is bound as usual.
  WriteFile(dir + "/present.txt", "here\n");
  const RunResult bound =
      Harness::Get().Run({"exec", "--quiet", "--ro", "?" + dir, "--", "cat", dir + "/present.txt"});
  EXPECT_EQ(bound.exit_code, 0) << bound.err;
  EXPECT_EQ(bound.out, "here\n");
  // A bare "?" is not a path.
  const RunResult bare = Harness::Get().Run({"exec", "--ro", "?", "--", "true"});
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_THAT(bare.err, HasSubstr("needs a path after it"));
}

}  // namespace
}  // namespace cagent::testing
