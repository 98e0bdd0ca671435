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

// Below the top level CLI11 alone said "The following arguments were not expected: --jsn" or "A
// subcommand is required", naming neither the subcommand nor what was meant.
TEST(CliEdges, MisspeltOptionOfASubcommandSuggestsThatSubcommandsOption) {
  const RunResult r = Harness::Get().Run({"runs", "--stauts", "failed"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "cagent: unknown option '--stauts' for 'cagent runs'; did you mean '--status'?\n");
  const RunResult nested = Harness::Get().Run({"policy", "check", "--jsno", "base"});
  EXPECT_EQ(nested.exit_code, 2);
  EXPECT_THAT(nested.err, HasSubstr("for 'cagent policy check'"));
  // An option of the value form is matched by its name.
  const RunResult value = Harness::Get().Run({"exec", "--json-fil=/dev/null", "--", "true"});
  EXPECT_EQ(value.exit_code, 2);
  EXPECT_EQ(value.err,
            "cagent: unknown option '--json-fil' for 'cagent exec'; did you mean '--json-file'?\n");
  // Nothing close: where to look instead.
  const RunResult far = Harness::Get().Run({"runs", "--frobnicate"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_THAT(far.err, HasSubstr("run 'cagent runs --help' for its options"));
  EXPECT_THAT(far.err, Not(HasSubstr("did you mean")));
}

TEST(CliEdges, MisspeltOrMissingNestedSubcommandNamesTheChoices) {
  const RunResult r = Harness::Get().Run({"policy", "chek", "base"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "cagent: unknown subcommand 'chek' of 'cagent policy'; did you mean 'check'?\n");
  const RunResult none = Harness::Get().Run({"policy"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("'cagent policy' needs a subcommand: list, check,"));
  // A hostile word is shown with its control characters replaced.
  const RunResult hostile = Harness::Get().Run({"policy", "\x1b]0;pwned\x07"});
  EXPECT_EQ(hostile.exit_code, 2);
  EXPECT_THAT(hostile.err, Not(HasSubstr("\x1b")));
  EXPECT_THAT(hostile.err, HasSubstr("unknown subcommand '?]0;pwned?' of 'cagent policy'"));
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

// ---- Where profiles are found ----

constexpr const char* kProfile = "description \"a test profile\"\nextends base\n";

// `cagent policy check NAME` in `cwd` with HOME at `home` and the given config variables ("" for
// unset ones: an empty value is ignored like an unset one).
RunResult CheckProfile(const std::string& name, const std::string& cwd, const std::string& home,
                       const std::string& xdg = "", const std::string& config_dir = "") {
  RunOptions o;
  o.cwd = cwd;
  o.extra_env = {"HOME=" + home, "XDG_CONFIG_HOME=" + xdg, "CAGENT_CONFIG_DIR=" + config_dir};
  return Harness::Get().Run({"policy", "check", name}, o);
}

TEST(CliEdges, ProjectProfilesAreFoundFromASubdirectoryOfTheRepository) {
  Harness& h = Harness::Get();
  const std::string home = h.MakeDir("home");
  const std::string repo = h.MakeDir("repo");
  WriteFile(repo + "/.git/HEAD", "ref: refs/heads/main\n");
  WriteFile(repo + "/.cagent/project.cagent", kProfile);
  WriteFile(repo + "/src/deep/file.txt", "x\n");
  const RunResult top = CheckProfile("project", repo, home);
  EXPECT_EQ(top.exit_code, 0) << top.err;
  const RunResult deep = CheckProfile("project", repo + "/src/deep", home);
  EXPECT_EQ(deep.exit_code, 0) << deep.err;
  EXPECT_THAT(deep.out + deep.err, Not(HasSubstr("not found")));
  // A worktree's .git is a file, and marks the top the same way.
  const std::string worktree = h.MakeDir("worktree");
  WriteFile(worktree + "/.git", "gitdir: /nowhere\n");
  WriteFile(worktree + "/.cagent/project.cagent", kProfile);
  WriteFile(worktree + "/sub/file.txt", "x\n");
  const RunResult wt = CheckProfile("project", worktree + "/sub", home);
  EXPECT_EQ(wt.exit_code, 0) << wt.err;
}

// The walk stops at the directory holding .git: a .cagent above the repository is not its own.
// Outside any repository nothing above the current directory is looked at.
TEST(CliEdges, ProjectProfilesAreNotLookedUpPastTheRepository) {
  Harness& h = Harness::Get();
  const std::string home = h.MakeDir("home");
  const std::string outer = h.MakeDir("outer");
  WriteFile(outer + "/.cagent/project.cagent", kProfile);
  WriteFile(outer + "/inner/.git/HEAD", "ref: refs/heads/main\n");
  WriteFile(outer + "/inner/src/file.txt", "x\n");
  WriteFile(outer + "/plain/file.txt", "x\n");
  const RunResult nested = CheckProfile("project", outer + "/inner/src", home);
  EXPECT_EQ(nested.exit_code, 2) << nested.out << nested.err;
  const RunResult norepo = CheckProfile("project", outer + "/plain", home);
  EXPECT_EQ(norepo.exit_code, 2) << norepo.out << norepo.err;
  // Twin: from the directory that has it, the same profile is found.
  const RunResult here = CheckProfile("project", outer, home);
  EXPECT_EQ(here.exit_code, 0) << here.err;
}

// Found from a subdirectory, a repository's profile is still the repository's: one named like a
// built-in is refused by name unless trusted, as at the top (RunRecordsTest has the top's case).
TEST(CliEdges, ARepositoryProfileFoundFromASubdirectoryStillCannotReplaceABuiltIn) {
  Harness& h = Harness::Get();
  const std::string home = h.MakeDir("home");
  const std::string repo = h.MakeDir("repo");
  WriteFile(repo + "/.git/HEAD", "ref: refs/heads/main\n");
  WriteFile(repo + "/.cagent/backend.cagent", kProfile);
  WriteFile(repo + "/sub/file.txt", "x\n");
  RunOptions o;
  o.cwd = repo + "/sub";
  o.extra_env = {"HOME=" + home, "XDG_CONFIG_HOME=", "CAGENT_CONFIG_DIR="};
  const RunResult by_name = h.Run({"exec", "--quiet", "--profile", "backend", "--", "true"}, o);
  EXPECT_EQ(by_name.exit_code, 2) << by_name.err;
  EXPECT_THAT(by_name.err, HasSubstr("the built-in profile 'backend'"));
  EXPECT_THAT(by_name.err, HasSubstr("--trust-repo-profile"));
  // Twin: trusted, the repository's profile (found in ../.cagent) is the one used.
  const RunResult trusted =
      h.Run({"exec", "--quiet", "--trust-repo-profile", "--profile", "backend", "--", "true"}, o);
  EXPECT_EQ(trusted.exit_code, 0) << trusted.err;
}

TEST(CliEdges, UserProfilesFollowXdgConfigHomeAndCagentConfigDir) {
  Harness& h = Harness::Get();
  const std::string cwd = h.MakeDir("plain");
  const std::string home = h.MakeDir("home");
  const std::string xdg = h.MakeDir("xdg");
  const std::string config = h.MakeDir("config");
  WriteFile(home + "/.config/cagent/profiles/in-home.cagent", kProfile);
  WriteFile(xdg + "/cagent/profiles/in-xdg.cagent", kProfile);
  WriteFile(config + "/profiles/in-config.cagent", kProfile);
  // Default: ~/.config/cagent.
  EXPECT_EQ(CheckProfile("in-home", cwd, home).exit_code, 0);
  EXPECT_EQ(CheckProfile("in-xdg", cwd, home).exit_code, 2);
  // $XDG_CONFIG_HOME/cagent replaces it.
  EXPECT_EQ(CheckProfile("in-xdg", cwd, home, xdg).exit_code, 0);
  EXPECT_EQ(CheckProfile("in-home", cwd, home, xdg).exit_code, 2);
  // A relative XDG_CONFIG_HOME is ignored (the XDG rule).
  EXPECT_EQ(CheckProfile("in-home", cwd, home, "relative/dir").exit_code, 0);
  // $CAGENT_CONFIG_DIR overrides both.
  EXPECT_EQ(CheckProfile("in-config", cwd, home, xdg, config).exit_code, 0);
  EXPECT_EQ(CheckProfile("in-xdg", cwd, home, xdg, config).exit_code, 2);
}

}  // namespace
}  // namespace cagent::testing
