// End-to-end: nothing a sandbox leaves behind gains privilege when the host runs it (issue #13,
// class 10). A root caller's sandbox is uid 0 over its files and, with every capability dropped,
// may still chmod them: `chmod u+s` would leave a setuid-root executable in the workspace. Two
// guards: seccomp refuses the privileged modes it can see, and cagent's sweep after the exit
// clears whatever got through (shown with the seccomp layer off). The naive twin makes the same
// file on the host directly, to show the payload is real. As nobody, the same commands must work
// as before for ordinary modes and leave no setuid-nobody file either.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

bool Setuid(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) != 0;
}

int ShAsUser(const std::string& dir, const std::string& cmd) {
  return Harness::Get().ShAsUser(dir, cmd);
}

constexpr const char kChmod[] = "cp /bin/true x && chmod u+s x; echo chmod=$?";
constexpr const char kCreate[] =
    "perl -e 'use Fcntl; sysopen(F, \"y\", O_CREAT|O_WRONLY, 04755) or die \"$!\\n\"'; "
    "echo create=$?";

class SetuidTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    ws_ = h_.MakeDir("suidws");
  }
  RunResult Exec(const std::string& script, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"exec", "--workspace", ws_};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", script});
    return h_.Run(args);
  }
  Harness& h_ = Harness::Get();
  std::string ws_;
};

TEST_F(SetuidTest, NaiveTwinTheOwnerCanMakeASetuidFile) {
  ASSERT_EQ(ShAsUser(ws_, std::string(kChmod) + "; " + kCreate), 0);
  EXPECT_TRUE(Setuid(ws_ + "/x"));
  EXPECT_TRUE(Setuid(ws_ + "/y"));
}

TEST_F(SetuidTest, WithTheGuardSwitchedOffTheSandboxLeavesASetuidFile) {
  // The twin through cagent itself: every other layer on, only the setuid guard (the seccomp
  // mode rules and the sweep) off. For a root caller x is now a setuid-root program in the
  // workspace.
  const RunResult r =
      Exec(std::string(kChmod) + "; " + kCreate, {"--disable-layer", "setuid-guard"});
  EXPECT_THAT(r.out, HasSubstr("chmod=0")) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("create=0")) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("layer 'setuid-guard' is switched off"));
  EXPECT_TRUE(Setuid(ws_ + "/x"));
  EXPECT_TRUE(Setuid(ws_ + "/y"));
}

TEST_F(SetuidTest, SeccompRefusesPrivilegedModes) {
  const RunResult r = Exec(std::string(kChmod) + "; " + kCreate + "; chmod 0755 x; echo plain=$?");
  EXPECT_THAT(r.out, HasSubstr("chmod=1")) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("create=1")) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("plain=0")) << "ordinary modes still work";
  EXPECT_THAT(r.err, HasSubstr("Operation not permitted"));
  EXPECT_FALSE(Setuid(ws_ + "/x"));
  EXPECT_FALSE(Setuid(ws_ + "/y"));
}

TEST_F(SetuidTest, TheSweepClearsWhatGotPastTheFilter) {
  // The seccomp layer off stands for the routes the filter cannot see (openat2's mode).
  const RunResult r = Exec(std::string(kChmod) + "; " + kCreate, {"--disable-layer", "seccomp"});
  EXPECT_THAT(r.out, HasSubstr("chmod=0")) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("create=0")) << r.out << r.err;
  if (h_.run_uid() != 0) {
    // The sweep is for root callers. nobody's sandbox runs as nobody, and a set-user-ID-nobody
    // file runs as nobody: nothing gained, nothing swept (and no walk paid for it).
    EXPECT_TRUE(Setuid(ws_ + "/x"));
    EXPECT_THAT(r.err, Not(HasSubstr("cleared the set-user/group-ID bits")));
    return;
  }
  EXPECT_FALSE(Setuid(ws_ + "/x"));
  EXPECT_FALSE(Setuid(ws_ + "/y"));
  EXPECT_THAT(r.err, HasSubstr("cleared the set-user/group-ID bits of '" + ws_ + "/x'"));
  EXPECT_THAT(r.err, HasSubstr("which the sandboxed command set"));
}

TEST_F(SetuidTest, FileCapabilitiesCannotBeSetInside) {
  const RunResult r = Exec("cp /bin/true c && /usr/sbin/setcap cap_net_raw+ep c; echo setcap=$?");
  if (r.out.find("setcap=127") != std::string::npos) GTEST_SKIP() << "setcap is not installed";
  EXPECT_THAT(r.out, Not(HasSubstr("setcap=0"))) << r.out << r.err;
}

}  // namespace
}  // namespace cagent::testing
