// The run's workspace and patch capture: the caller's repository is only read, the capture sees
// every kind of change, and a hostile workspace cannot make the capture execute anything.
#include "launcher/run/workspace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/sha256.h"
#include "launcher/run/git.h"
#include "policy/loader.h"

namespace cagent::launcher::run {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs a shell command (test set-up only); fails the test when it fails.
void Sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  ASSERT_EQ(rc, 0) << cmd;
}

// A digest of everything in a tree: names, types, modes, sizes, contents, symlink targets, and
// modification times — any write shows up.
std::string TreeDigest(const fs::path& root) {
  std::vector<std::string> lines;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    struct stat st {};
    ::lstat(it->path().c_str(), &st);
    std::string line = fs::relative(it->path(), root).string() + " " + std::to_string(st.st_mode) +
                       " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) +
                       "." + std::to_string(st.st_mtim.tv_nsec);
    if (S_ISREG(st.st_mode)) line += " " + Sha256Hex(Read(it->path()));
    if (S_ISLNK(st.st_mode)) line += " -> " + fs::read_symlink(it->path()).string();
    lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  Sha256 h;
  for (const auto& l : lines) h.Update(l + "\n");
  return h.FinishHex();
}

class WorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
    char tmpl[] = "/tmp/cagent-ws-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    repo_ = base_ / "repo";
    fs::create_directories(repo_);
    Write(repo_ / "src/calc.py", "def add(a, b):\n    return a - b\n");
    Write(repo_ / "README.md", "# demo\n");
    Write(repo_ / "data.bin", std::string("\x00\x01\x02\x03", 4));
    Write(repo_ / ".gitignore", "*.log\n");
    Sh("cd " + repo_.string() +
       " && git init -q -b main . && git -c user.name=t -c user.email=t@t add -A && "
       "git -c user.name=t -c user.email=t@t commit -q -m base");
    run_dir_ = base_ / "run";
    fs::create_directories(run_dir_);
    layout_ = LayoutFor(run_dir_.string());
  }
  void TearDown() override {
    if (!base_.empty()) fs::remove_all(base_);
  }

  Materialized MakeWorkspace(bool allow_dirty = false) {
    auto info = InspectRepo(repo_.string(), "");
    EXPECT_TRUE(info.ok()) << (info.ok() ? "" : info.error().Message());
    auto m = MaterializeWorkspace(*info, layout_, allow_dirty);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().Message());
    return m.ok() ? *m : Materialized{};
  }

  fs::path base_, repo_, run_dir_;
  WorkspaceLayout layout_;
};

TEST_F(WorkspaceTest, PinsTheFullBaseCommitAndChecksItOut) {
  auto info = InspectRepo((repo_ / "src").string(), "");
  ASSERT_TRUE(info.ok()) << info.error().Message();
  EXPECT_EQ(info->root, repo_.string());
  EXPECT_EQ(info->commit.size(), 40U);
  EXPECT_TRUE(info->dirty.empty());
  auto m = MaterializeWorkspace(*info, layout_, false);
  ASSERT_TRUE(m.ok()) << m.error().Message();
  EXPECT_EQ(m->base_commit, info->commit);
  EXPECT_EQ(Read(fs::path(layout_.workspace) / "src/calc.py"), "def add(a, b):\n    return a - b\n");
  EXPECT_TRUE(fs::exists(fs::path(layout_.workspace) / ".git"));
}

TEST_F(WorkspaceTest, RefusesADirtyTreeAndSaysHowToProceed) {
  Write(repo_ / "README.md", "# changed\n");
  auto info = InspectRepo(repo_.string(), "");
  ASSERT_TRUE(info.ok());
  ASSERT_FALSE(info->dirty.empty());
  auto m = MaterializeWorkspace(*info, layout_, false);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().Message().find("--allow-dirty"), std::string::npos) << m.error().Message();
  EXPECT_NE(m.error().Message().find("README.md"), std::string::npos);
}

TEST_F(WorkspaceTest, AllowDirtyCarriesTrackedAndUntrackedChangesButNotIgnoredFiles) {
  Write(repo_ / "README.md", "# changed\n");
  Write(repo_ / "notes/new.txt", "untracked\n");
  Write(repo_ / "debug.log", "ignored\n");
  const Materialized m = MakeWorkspace(/*allow_dirty=*/true);
  EXPECT_TRUE(m.carried_dirty);
  EXPECT_EQ(Read(fs::path(layout_.workspace) / "README.md"), "# changed\n");
  EXPECT_EQ(Read(fs::path(layout_.workspace) / "notes/new.txt"), "untracked\n");
  EXPECT_FALSE(fs::exists(fs::path(layout_.workspace) / "debug.log"));
}

TEST_F(WorkspaceTest, UnknownRevisionIsAClearError) {
  auto info = InspectRepo(repo_.string(), "no-such-branch");
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.error().Message().find("no-such-branch"), std::string::npos);
  auto outside = InspectRepo(base_.string(), "");
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().Message().find("not inside a git repository"), std::string::npos);
}

TEST_F(WorkspaceTest, CaptureSeesEveryKindOfChangeAndThePatchAppliesToTheCallersRepo) {
  const Materialized m = MakeWorkspace();
  const fs::path ws = layout_.workspace;
  Write(ws / "src/calc.py", "def add(a, b):\n    return a + b\n");  // modified
  fs::remove(ws / "README.md");                                     // deleted
  Write(ws / "src/new_module.py", "X = 1\n");                        // untracked, added
  Write(ws / "data.bin", std::string("\x00\xff\x10", 3));           // binary modified
  fs::create_symlink("calc.py", ws / "src/link.py");                // symlink added
  Write(ws / "run.sh", "#!/bin/sh\n");
  ::chmod((ws / "run.sh").c_str(), 0755);                            // executable added
  Write(ws / "build.log", "ignored by .gitignore\n");

  auto p = CapturePatch(layout_, m.base_commit);
  ASSERT_TRUE(p.ok()) << p.error().Message();
  std::map<std::string, char> seen;
  for (const auto& f : p->files) seen[f.path] = f.status;
  EXPECT_EQ(seen["src/calc.py"], 'M');
  EXPECT_EQ(seen["README.md"], 'D');
  EXPECT_EQ(seen["src/new_module.py"], 'A');
  EXPECT_EQ(seen["data.bin"], 'M');
  EXPECT_EQ(seen["src/link.py"], 'A');
  EXPECT_EQ(seen["run.sh"], 'A');
  EXPECT_EQ(seen.count("build.log"), 0U);
  for (const auto& f : p->files) {
    if (f.path == "data.bin") {
      EXPECT_TRUE(f.binary);
    }
    if (f.path == "run.sh") {
      EXPECT_EQ(f.new_mode, "100755");
    }
    if (f.path == "src/link.py") {
      EXPECT_EQ(f.new_mode, "120000");
    }
  }
  EXPECT_EQ(p->sha256, Sha256Hex(p->patch));
  EXPECT_NE(p->patch.find("GIT binary patch"), std::string::npos);

  // The patch applies to the caller's repository as captured.
  Write(base_ / "p.patch", p->patch);
  Sh("cd " + repo_.string() + " && git apply --check " + (base_ / "p.patch").string());

  // Captured twice, the same digest: the capture does not depend on earlier captures.
  auto again = CapturePatch(layout_, m.base_commit);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->sha256, p->sha256);
}

TEST_F(WorkspaceTest, DiffCheckReportsWhitespaceErrors) {
  const Materialized m = MakeWorkspace();
  Write(fs::path(layout_.workspace) / "src/calc.py", "def add(a, b):   \n    return a + b\n");
  auto p = CapturePatch(layout_, m.base_commit);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->check_clean);
  EXPECT_NE(p->check_output.find("trailing whitespace"), std::string::npos) << p->check_output;
}

TEST_F(WorkspaceTest, CallersRepositoryIsNeverWritten) {
  Write(repo_ / ".git/hooks/post-checkout", "#!/bin/sh\ntouch \"$GIT_DIR/../HOOK-RAN\"\n");
  ::chmod((repo_ / ".git/hooks/post-checkout").c_str(), 0755);
  const std::string before = TreeDigest(repo_);
  const Materialized m = MakeWorkspace();
  Write(fs::path(layout_.workspace) / "src/calc.py", "changed\n");
  // The agent's own .git in the workspace is trashed: no effect on the caller's repo.
  Write(fs::path(layout_.workspace) / ".git/config", "[core]\n\tbare = maybe\n");
  auto p = CapturePatch(layout_, m.base_commit);
  ASSERT_TRUE(p.ok()) << p.error().Message();
  EXPECT_EQ(TreeDigest(repo_), before);
  EXPECT_FALSE(fs::exists(repo_ / "HOOK-RAN"));
}

// The workspace's git configuration, attributes and hooks are the agent's. Each of these runs a
// program when plain git works in the workspace; the capture must run none of them.
TEST_F(WorkspaceTest, HostileGitConfigurationInTheWorkspaceExecutesNothingDuringCapture) {
  const Materialized m = MakeWorkspace();
  const fs::path ws = layout_.workspace;
  const fs::path marker = base_ / "PWNED";
  const std::string touch = "touch " + marker.string();
  Write(ws / ".git/config",
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
        "\tfsmonitor = \"" + touch + "; echo\"\n"
        "\tpager = " + touch + "\n"
        "[filter \"evil\"]\n\tclean = sh -c '" + touch + "; cat'\n\tsmudge = cat\n"
        "[diff \"evil\"]\n\ttextconv = sh -c '" + touch + "; cat'\n"
        "[diff]\n\texternal = sh -c '" + touch + "'\n");
  Write(ws / ".gitattributes", "* filter=evil diff=evil\n");
  Write(ws / ".git/hooks/post-index-change", "#!/bin/sh\n" + touch + "\n");
  ::chmod((ws / ".git/hooks/post-index-change").c_str(), 0755);
  Write(ws / "src/calc.py", "def add(a, b):\n    return a + b\n");

  auto p = CapturePatch(layout_, m.base_commit);
  ASSERT_TRUE(p.ok()) << p.error().Message();
  EXPECT_FALSE(fs::exists(marker)) << "the capture executed the workspace's configuration";
  EXPECT_NE(p->patch.find("return a + b"), std::string::npos);

  // Twin: the same workspace makes plain git run the attacker's program.
  Sh("cd " + ws.string() + " && git diff >/dev/null 2>&1; git add -A >/dev/null 2>&1; true");
  EXPECT_TRUE(fs::exists(marker)) << "the planted configuration should run under plain git";
}

TEST_F(WorkspaceTest, ProfileRulesApplyToWhatGitObserved) {
  const Materialized m = MakeWorkspace();
  const fs::path ws = layout_.workspace;
  Write(ws / ".github/workflows/ci.yml", "on: push\n");
  Write(ws / "src/a.py", "a\n");
  Write(ws / "src/b.py", "b\n");
  auto p = CapturePatch(layout_, m.base_commit);
  ASSERT_TRUE(p.ok());

  policy::SearchPath search;
  auto compiled = policy::CompileText(
      "test.cagent",
      "extends base\n"
      "filesystem {\n  deny write .github/**\n}\n"
      "limits {\n  changed-files 2\n  patch-size 1K\n}\n",
      search);
  ASSERT_TRUE(compiled.policy) << "profile did not compile";
  const auto violations =
      CheckPatch(*p, *compiled.policy, policy::Engine::Bindings{layout_.workspace, "/home/cagent"});
  bool denied = false, too_many = false;
  for (const auto& v : violations) {
    if (v.path == ".github/workflows/ci.yml") denied = true;
    if (v.rule.rfind("changed-files", 0) == 0) too_many = true;
  }
  EXPECT_TRUE(denied);
  EXPECT_TRUE(too_many);

  // Within the rules: no violation.
  fs::remove_all(ws / ".github");
  fs::remove(ws / "src/b.py");
  auto ok = CapturePatch(layout_, m.base_commit);
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(CheckPatch(*ok, *compiled.policy,
                         policy::Engine::Bindings{layout_.workspace, "/home/cagent"})
                  .empty());
}

}  // namespace
}  // namespace cagent::launcher::run
