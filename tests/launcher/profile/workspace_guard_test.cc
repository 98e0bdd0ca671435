// The workspace guard's classification (launcher/profile/workspace_guard.h) on fixed contexts, and
// its messages; HostGuardContext on this machine's own paths.
#include "launcher/profile/workspace_guard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "policy/match/host_secrets.h"

namespace cagent::launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

WorkspaceGuardContext Ctx(std::string home = "/home/alice") {
  WorkspaceGuardContext c;
  c.home = std::move(home);
  c.system_dirs = {"/",    "/usr", "/usr/bin", "/etc", "/bin", "/lib",
                   "/tmp", "/var", "/opt",     "/srv", "/run", "/root"};
  c.system_trees = {"/dev", "/proc", "/sys"};
  return c;
}

TEST(WorkspaceGuard, ClassifiesHomeAncestorsAndSecrets) {
  const auto c = Ctx();
  EXPECT_EQ(ClassifyWorkspace("/home/alice", c), WorkspaceClass::kHome);
  EXPECT_EQ(ClassifyWorkspace("/home", c), WorkspaceClass::kHomeAncestor);
  EXPECT_EQ(ClassifyWorkspace("/home/alice/src/app", c), WorkspaceClass::kOrdinary);
  EXPECT_EQ(ClassifyWorkspace("/home/alice/.ssh", c), WorkspaceClass::kHostSecret);
  EXPECT_EQ(ClassifyWorkspace("/home/alice/.config/gh/hosts", c), WorkspaceClass::kHostSecret);
  EXPECT_EQ(ClassifyWorkspace("/home/alice/.config", c), WorkspaceClass::kOrdinary);
  // By component: a sibling whose name only starts with the home's is not the home.
  EXPECT_EQ(ClassifyWorkspace("/home/alice2", c), WorkspaceClass::kOrdinary);
  EXPECT_EQ(ClassifyWorkspace("/home/al", c), WorkspaceClass::kOrdinary);
  EXPECT_EQ(ClassifyWorkspace("/home/bob", c), WorkspaceClass::kOrdinary);
  // Another user's .ssh is not the caller's secret set (and not readable to the caller anyway).
  EXPECT_EQ(ClassifyWorkspace("/home/bob/.ssh", c), WorkspaceClass::kOrdinary);
}

TEST(WorkspaceGuard, ClassifiesSystemDirectories) {
  const auto c = Ctx();
  for (const char* p : {"/", "/usr", "/usr/bin", "/etc", "/bin", "/lib", "/tmp", "/var", "/opt",
                        "/srv", "/run", "/root", "/dev", "/dev/shm", "/proc/self", "/sys/fs"}) {
    SCOPED_TRACE(p);
    EXPECT_EQ(ClassifyWorkspace(p, c), WorkspaceClass::kSystem);
  }
  // Their subdirectories are where projects live.
  for (const char* p : {"/opt/app", "/srv/site", "/var/www/site", "/tmp/build-1",
                        "/usr/local/src/x", "/etc2", "/devel"}) {
    SCOPED_TRACE(p);
    EXPECT_EQ(ClassifyWorkspace(p, c), WorkspaceClass::kOrdinary);
  }
}

TEST(WorkspaceGuard, ASystemDirectoryStaysOneWhenTheHomeIsBelowIt) {
  // HOME=/tmp/h (tests, services): /tmp does not become "a directory holding the home".
  const auto c = Ctx("/tmp/h");
  EXPECT_EQ(ClassifyWorkspace("/tmp", c), WorkspaceClass::kSystem);
  EXPECT_EQ(ClassifyWorkspace("/tmp/h", c), WorkspaceClass::kHome);
  EXPECT_EQ(ClassifyWorkspace("/tmp/h/.aws", c), WorkspaceClass::kHostSecret);
  // A home at /root is the home, not a system directory (HostGuardContext leaves /root out).
  auto root = Ctx("/root");
  std::erase(root.system_dirs, "/root");
  EXPECT_EQ(ClassifyWorkspace("/root", root), WorkspaceClass::kHome);
}

TEST(WorkspaceGuard, WithoutAHomeOnlySystemDirectoriesAndHomeAreSpecial) {
  const auto c = Ctx("");
  EXPECT_EQ(ClassifyWorkspace("/home", c), WorkspaceClass::kHomeAncestor);
  EXPECT_EQ(ClassifyWorkspace("/home/alice", c), WorkspaceClass::kOrdinary);
  EXPECT_EQ(ClassifyWorkspace("/usr", c), WorkspaceClass::kSystem);
}

TEST(WorkspaceGuard, CheckRefusesTheHomeFromTheCurrentDirectoryAndSaysWhatToDo) {
  const auto c = Ctx();
  const Status s = CheckWorkspace("/home/alice", WorkspaceChoice{}, c);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, Error::Code::kInvalidInput);
  EXPECT_EQ(s.error().Message(),
            "the workspace (the current directory, /home/alice) is your home directory: the "
            "sandboxed command would get all of it read-write: run cagent from a project "
            "directory, or pass --workspace DIR; to use it anyway, name it: --workspace "
            "/home/alice --allow-home (the host secret set, ~/.ssh and the rest, stays hidden)");
}

TEST(WorkspaceGuard, AllowHomeNeedsTheDirectoryNamed) {
  const auto c = Ctx();
  WorkspaceChoice from_cwd;
  from_cwd.allow_home = true;
  const Status s = CheckWorkspace("/home/alice", from_cwd, c);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().Message(), HasSubstr("--allow-home needs --workspace naming"));
  // Even for an ordinary directory: the flag must say what it allows.
  EXPECT_FALSE(CheckWorkspace("/home/alice/src", from_cwd, c));

  WorkspaceChoice named;
  named.named = true;
  EXPECT_FALSE(CheckWorkspace("/home/alice", named, c));
  EXPECT_FALSE(CheckWorkspace("/home", named, c));
  named.allow_home = true;
  EXPECT_TRUE(CheckWorkspace("/home/alice", named, c));
  EXPECT_TRUE(CheckWorkspace("/home", named, c));
  EXPECT_TRUE(CheckWorkspace("/home/alice/src", named, c));
}

TEST(WorkspaceGuard, SystemDirectoriesAndTheSecretSetHaveNoOverride) {
  const auto c = Ctx();
  WorkspaceChoice named;
  named.named = true;
  named.allow_home = true;
  for (const char* p : {"/usr", "/etc", "/tmp", "/", "/proc/1"}) {
    SCOPED_TRACE(p);
    const Status s = CheckWorkspace(p, named, c);
    ASSERT_FALSE(s);
    EXPECT_THAT(s.error().Message(), HasSubstr("is a system directory"));
    EXPECT_THAT(s.error().Message(), HasSubstr("pass --workspace with a project directory"));
  }
  const Status ssh = CheckWorkspace("/home/alice/.ssh", named, c);
  ASSERT_FALSE(ssh);
  EXPECT_THAT(ssh.error().Message(), HasSubstr("inside the host secret set"));
}

TEST(WorkspaceGuard, MessagesShowHostileDirectoryNamesSafely) {
  const auto c = Ctx();
  const Status s = CheckWorkspace("/home", WorkspaceChoice{}, c);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().Message(), HasSubstr("contains home directories"));
  WorkspaceChoice from_cwd;
  from_cwd.allow_home = true;
  const Status e = CheckWorkspace("/x/\x1b[2Jy", from_cwd, Ctx("/x/\x1b[2Jy"));
  ASSERT_FALSE(e);
  EXPECT_THAT(e.error().Message(), Not(HasSubstr("\x1b")));
}

TEST(WorkspaceGuard, HostContextHasCanonicalForms) {
  const WorkspaceGuardContext c = HostGuardContext();
  auto has = [&](const std::string& p) {
    return std::find(c.system_dirs.begin(), c.system_dirs.end(), p) != c.system_dirs.end();
  };
  EXPECT_TRUE(has("/usr"));
  EXPECT_TRUE(has("/etc"));
  // On merged-/usr systems /bin is a link to usr/bin: its canonical form is refused too.
  std::error_code ec;
  const auto bin = std::filesystem::canonical("/bin", ec);
  if (!ec) {
    EXPECT_TRUE(has(bin.string()));
  }
  if (c.home != "/root") {
    EXPECT_TRUE(has("/root"));
  }
  EXPECT_FALSE(has(c.home));
}

TEST(HostSecrets, TheListIsSortedRelativeAndMatchedByComponent) {
  const auto paths = policy::HostSecretPaths();
  ASSERT_FALSE(paths.empty());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    EXPECT_FALSE(paths[i].starts_with('/')) << paths[i];
    EXPECT_FALSE(paths[i].ends_with('/')) << paths[i];
    if (i > 0) {
      EXPECT_LT(paths[i - 1], paths[i]);
    }
  }
  EXPECT_TRUE(policy::IsHostSecretPath(".ssh"));
  EXPECT_TRUE(policy::IsHostSecretPath(".ssh/id_ed25519"));
  EXPECT_TRUE(policy::IsHostSecretPath(".docker/config.json"));
  EXPECT_FALSE(policy::IsHostSecretPath(".docker"));
  EXPECT_FALSE(policy::IsHostSecretPath(".sshx"));
  EXPECT_FALSE(policy::IsHostSecretPath("src/.ssh"));
}

}  // namespace
}  // namespace cagent::launcher
