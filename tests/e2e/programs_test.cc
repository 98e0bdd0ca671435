// cagent is two programs (issue 37; launcher/cli/entry.h): the launcher answers exec, policy and
// --version without TLS, and hands every other command line to cagent-full, installed in
// ../libexec/cagent/ (the harness lays the binaries out that way).
#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using ::testing::HasSubstr;

// The commands the launcher does not have reach cagent-full with their arguments intact.
TEST(Programs, TheLauncherHandsOtherCommandsToCagentFull) {
  const RunResult help = Harness::Get().Run({"help", "run"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, HasSubstr("Usage: cagent run"));
  const RunResult misspelt = Harness::Get().Run({"batc"});
  EXPECT_EQ(misspelt.exit_code, 2);
  EXPECT_EQ(misspelt.err, "cagent: unknown subcommand 'batc'; did you mean 'batch'?\n");
}

// The launcher alone: exec and policy need nothing else; any other command says what is
// missing and fails (setup failed), rather than running something else or nothing at all.
TEST(Programs, WithoutCagentFullExecStillRunsAndTheOtherCommandsSaySo) {
  const Harness& h = Harness::Get();
  if (!h.skip_reason().empty()) GTEST_SKIP() << h.skip_reason();
  // The launcher's last place to look is the libexec directory the build was configured for.
  const std::string installed = std::string(CAGENT_LIBEXEC_DIR) + "/cagent-full";
  if (::access(installed.c_str(), F_OK) == 0) {
    GTEST_SKIP() << "a cagent-full is installed at " << installed
                 << ", which the lone launcher would find and run";
  }
  const std::string dir = h.MakeDir("lone");
  // In DIR/bin/, with no DIR/bin/cagent-full and no DIR/libexec/cagent/cagent-full.
  const std::string copy =
      "mkdir " + dir + "/bin && cp " + h.bin_dir() + "/cagent " + dir + "/bin/";
  ASSERT_EQ(::system(copy.c_str()), 0) << copy;
  h.GiveToRunUser(dir);
  EXPECT_EQ(h.ShAsUser(dir, "bin/cagent exec --workspace . -- true"), 0);
  EXPECT_EQ(h.ShAsUser(dir, "bin/cagent policy check backend"), 0);
  EXPECT_EQ(h.ShAsUser(dir, "bin/cagent runs 2> err.txt"), 125);
  const std::string err = ReadFile(dir + "/err.txt");
  EXPECT_THAT(err, HasSubstr("cagent: runs is carried out by cagent-full, which could not be "
                             "started (No such file or directory; tried "));
  EXPECT_THAT(err, HasSubstr(dir + "/bin/cagent-full"));
  // The twin: the same copy beside a cagent-full runs the command.
  const std::string beside = "cp " + std::string(FULL_BINARY) + " " + dir + "/bin/";
  ASSERT_EQ(::system(beside.c_str()), 0) << beside;
  h.GiveToRunUser(dir);
  EXPECT_EQ(h.ShAsUser(dir, "bin/cagent runs --help > out.txt"), 0);
  EXPECT_THAT(ReadFile(dir + "/out.txt"), HasSubstr("Usage: cagent runs"));
}

}  // namespace
}  // namespace cagent::testing
