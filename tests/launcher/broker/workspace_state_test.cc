// The workspace state digest loop detection compares (issue #13): it changes when the workspace
// really changes, not when it is only read; it never follows a symlink, opens a special file or
// walks without bound, and it says when it saw only part of the tree.
#include "launcher/broker/workspace_state.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace cagent::launcher::broker {
namespace {

namespace fs = std::filesystem;

class WorkspaceStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "cagent_wsstate_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    base_ = tmpl;
    ws_ = base_ + "/ws";
    outside_ = base_ + "/outside";
    fs::create_directories(ws_ + "/src/deep");
    fs::create_directories(outside_);
    Write("src/main.c", "int main() {}\n");
    Write("src/deep/x.h", "#pragma once\n");
    Write("README", "hello\n");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(base_, ec);
  }
  void Write(const std::string& rel, const std::string& text, bool append = false) {
    std::ofstream out(ws_ + "/" + rel, append ? std::ios::app : std::ios::trunc);
    out << text;
  }
  std::string Digest(const WorkspaceStateLimits& limits = {}) {
    return DigestWorkspaceState(ws_, limits).digest;
  }

  std::string base_, ws_, outside_;
};

TEST_F(WorkspaceStateTest, StableWhileNothingChangesAndReadingIsNotAChange) {
  const WorkspaceState a = DigestWorkspaceState(ws_);
  EXPECT_EQ(a.digest.size(), 64U);
  EXPECT_EQ(a.entries, 6U);  // ., README, src, src/main.c, src/deep, src/deep/x.h
  EXPECT_FALSE(a.truncated);
  EXPECT_EQ(a.not_walked, 0U);
  EXPECT_TRUE(a.error.empty());
  std::ifstream in(ws_ + "/src/main.c");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(Digest(), a.digest);
}

TEST_F(WorkspaceStateTest, EveryKindOfChangeChangesIt) {
  std::string last = Digest();
  const auto changed = [&](const char* what) {
    const std::string now = Digest();
    EXPECT_NE(now, last) << what;
    last = now;
  };
  Write("src/main.c", "x", /*append=*/true);
  changed("append");
  Write("new.txt", "");
  changed("create an empty file");
  ::chmod((ws_ + "/new.txt").c_str(), 0755);
  changed("chmod");
  fs::rename(ws_ + "/new.txt", ws_ + "/renamed.txt");
  changed("rename");
  fs::create_symlink("src/main.c", ws_ + "/link");
  changed("symlink");
  fs::remove(ws_ + "/link");
  fs::create_symlink("README", ws_ + "/link");
  changed("symlink retargeted");
  fs::create_hard_link(ws_ + "/README", ws_ + "/hard");
  changed("hard link (link count)");
  fs::remove(ws_ + "/renamed.txt");
  changed("remove");
  Write("src/deep/x.h", "#pragma twice\n");  // same size, rewritten
  changed("rewrite of the same size (mtime/ctime)");
}

TEST_F(WorkspaceStateTest, SymlinksAreNotFollowed) {
  std::ofstream(outside_ + "/secret") << "1";
  fs::create_directory_symlink(outside_, ws_ + "/out");
  const std::string before = Digest();
  std::ofstream(outside_ + "/secret", std::ios::app) << "2";
  std::ofstream(outside_ + "/more") << "3";
  EXPECT_EQ(Digest(), before) << "the walk looked through the link at a host directory";

  // Twin: the naive walk (std::filesystem following directory links) reaches the host directory.
  bool reached = false;
  for (const auto& e :
       fs::recursive_directory_iterator(ws_, fs::directory_options::follow_directory_symlink)) {
    reached = reached || e.path().filename() == "secret";
  }
  EXPECT_TRUE(reached) << "the attack, with the guard off";
}

TEST_F(WorkspaceStateTest, SpecialFilesAreNeverOpened) {
  ASSERT_EQ(::mkfifo((ws_ + "/fifo").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", ws_ + "/zero");
  const auto start = std::chrono::steady_clock::now();
  const WorkspaceState s = DigestWorkspaceState(ws_);  // returns: nothing blocks on the FIFO
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(s.entries, 8U);

  // Twin: a walk that opens what it finds (to hash content, say) blocks on the FIFO forever.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(1);
    const int fd = ::open((ws_ + "/fifo").c_str(), O_RDONLY);  // no writer: blocks
    ::_exit(fd >= 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
      << "the naive open did not block (status " << status << ")";
}

TEST_F(WorkspaceStateTest, TheEntryCapIsSaidAndTheDigestStaysStable) {
  for (int i = 0; i < 50; ++i) Write("f" + std::to_string(i), "x");
  const WorkspaceStateLimits cap{.max_entries = 10};
  const WorkspaceState a = DigestWorkspaceState(ws_, cap);
  EXPECT_TRUE(a.truncated);
  EXPECT_EQ(a.entries, 10U);
  EXPECT_EQ(DigestWorkspaceState(ws_, cap).digest, a.digest);
  EXPECT_NE(Digest(), a.digest) << "a cut walk is not the complete walk";
}

TEST_F(WorkspaceStateTest, TheDepthCapIsSaid) {
  fs::create_directories(ws_ + "/a/b/c/d/e");
  const WorkspaceState s = DigestWorkspaceState(ws_, {.max_entries = 1000, .max_depth = 3});
  EXPECT_GE(s.not_walked, 1U);
  EXPECT_FALSE(s.truncated);
}

TEST_F(WorkspaceStateTest, AMissingRootGivesAStableErrorDigest) {
  const WorkspaceState a = DigestWorkspaceState(base_ + "/nope");
  EXPECT_NE(a.error.find("ENOENT"), std::string::npos) << a.error;
  EXPECT_EQ(a.digest.size(), 64U);
  EXPECT_EQ(DigestWorkspaceState(base_ + "/nope").digest, a.digest);
}

// A measurement, not a test (run with --gtest_also_run_disabled_tests): the cost of one walk of a
// workspace of ~10k files in 100 directories.
TEST_F(WorkspaceStateTest, DISABLED_MeasureTenThousandFiles) {
  for (int d = 0; d < 100; ++d) {
    const std::string dir = "d" + std::to_string(d);
    fs::create_directories(ws_ + "/" + dir);
    for (int f = 0; f < 100; ++f) Write(dir + "/f" + std::to_string(f) + ".py", "x = 1\n");
  }
  DigestWorkspaceState(ws_);  // warm the dentry cache
  constexpr int kRuns = 50;
  const auto start = std::chrono::steady_clock::now();
  std::size_t entries = 0;
  for (int i = 0; i < kRuns; ++i) entries = DigestWorkspaceState(ws_).entries;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
      kRuns;
  std::printf("workspace state digest: %zu entries, %.2f ms per walk (mean of %d)\n", entries, ms,
              kRuns);
}

}  // namespace
}  // namespace cagent::launcher::broker
