// The run's workspace and patch capture: the caller's repository is only read, the capture sees
// every kind of change, and a hostile workspace cannot make the capture execute anything.
#include "launcher/run/workspace.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/sha256.h"
#include "launcher/guard/git.h"
#include "launcher/run/checkout.h"
#include "policy/language/diagnostics.h"
#include "policy/language/loader.h"

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
  EXPECT_EQ(Read(fs::path(layout_.workspace) / "src/calc.py"),
            "def add(a, b):\n    return a - b\n");
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
  Write(ws / "src/new_module.py", "X = 1\n");                       // untracked, added
  Write(ws / "data.bin", std::string("\x00\xff\x10", 3));           // binary modified
  fs::create_symlink("calc.py", ws / "src/link.py");                // symlink added
  Write(ws / "run.sh", "#!/bin/sh\n");
  ::chmod((ws / "run.sh").c_str(), 0755);  // executable added
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
        "\tfsmonitor = \"" +
            touch +
            "; echo\"\n"
            "\tpager = " +
            touch +
            "\n"
            "[filter \"evil\"]\n\tclean = sh -c '" +
            touch +
            "; cat'\n\tsmudge = cat\n"
            "[diff \"evil\"]\n\ttextconv = sh -c '" +
            touch +
            "; cat'\n"
            "[diff]\n\texternal = sh -c '" +
            touch + "'\n");
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
  auto compiled = policy::CompileText("test.cagent",
                                      "extends base\n"
                                      "filesystem {\n  deny write .github/**\n}\n"
                                      "limits {\n  changed-files 2\n  patch-size 1K\n}\n",
                                      search);
  ASSERT_TRUE(compiled.policy) << "profile did not compile";
  const auto violations =
      CheckPatch(*p, *compiled.policy, policy::Binding{layout_.workspace, "/home/cagent"});
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
  EXPECT_TRUE(CheckPatch(*ok, *compiled.policy, policy::Binding{layout_.workspace, "/home/cagent"})
                  .empty());
}

// ---- class 5: capture's git over planted nested repositories ----

// The naive operation CapturePatch replaces: the hardened git, pointed at the workspace, with no
// look at it first (and a temporary index, so the trusted one is not disturbed).
Result<GitResult> PlainCaptureAdd(const WorkspaceLayout& l, const std::string& base,
                                  std::uint64_t max_memory) {
  GitInvocation g;
  g.git_dir = l.trusted_git;
  g.work_tree = l.workspace;
  g.cwd = l.workspace;
  g.home = l.git_home;
  g.index_file = l.run_dir + "/naive-index";
  g.max_memory = max_memory;
  g.timeout = std::chrono::seconds(120);
  g.args = {"read-tree", base};
  if (auto r = RunGit(g); !r || r->exit_code != 0) return r;
  g.args = {"add", "--all", "--", "."};
  auto added = RunGit(g);
  if (!added || added->exit_code != 0) return added;
  g.args = {"diff", "--cached", "--raw", base};
  return RunGit(g);
}

TEST_F(WorkspaceTest, ANestedRepositoryWhoseRefIsDevZeroIsRefusedBeforeGitReadsIt) {
  const Materialized m = MakeWorkspace();
  const fs::path ws = layout_.workspace;
  Sh("git init -q -b main " + (ws / "vendor/sub").string());
  fs::create_symlink("/dev/zero", ws / "vendor/sub/.git/refs/heads/main");
  Write(ws / "vendor/sub/f", "x\n");
  Write(ws / "src/calc.py", "def add(a, b):\n    return a + b\n");

  // Twin: git reads the "ref" until it runs out of memory (bounded here to 512 MiB).
  auto naive = PlainCaptureAdd(layout_, m.base_commit, 512ULL << 20);
  ASSERT_TRUE(naive.ok()) << naive.error().Message();
  EXPECT_NE(naive->exit_code, 0);
  EXPECT_NE(naive->err.find("Out of memory"), std::string::npos) << naive->err;

  auto p = CapturePatch(layout_, m.base_commit);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().Message().find("'vendor/sub/.git'"), std::string::npos)
      << p.error().Message();
  EXPECT_NE(p.error().Message().find("nested git entry"), std::string::npos) << p.error().Message();
}

TEST_F(WorkspaceTest, AGitdirFileToAnotherHostRepositoryIsRefused) {
  const Materialized m = MakeWorkspace();
  const fs::path ws = layout_.workspace;
  // Another repository on this machine the agent never saw: its HEAD commit is the prize.
  const fs::path other = base_ / "other";
  fs::create_directories(other);
  Write(other / "secret.txt", "host secret\n");
  Sh("cd " + other.string() +
     " && git init -q -b main . && git add -A && git -c user.name=o -c user.email=o@o commit -q -m "
     "o");
  const std::string other_head = [&] {
    GitInvocation g;
    g.git_dir = (other / ".git").string();
    g.args = {"rev-parse", "HEAD"};
    auto r = GitOutput(g);
    return r.ok() ? r->substr(0, 40) : std::string("?");
  }();
  Write(ws / "lib/.git", "gitdir: " + (other / ".git").string() + "\n");
  Write(ws / "lib/x.py", "X = 1\n");

  // Twin: git follows the link and records the other repository's HEAD as a gitlink.
  auto naive = PlainCaptureAdd(layout_, m.base_commit, 4ULL << 30);
  ASSERT_TRUE(naive.ok()) << naive.error().Message();
  ASSERT_EQ(naive->exit_code, 0) << naive->err;
  EXPECT_NE(naive->out.find("160000"), std::string::npos) << naive->out;
  EXPECT_NE(naive->out.find(other_head.substr(0, 7)), std::string::npos) << naive->out;

  auto p = CapturePatch(layout_, m.base_commit);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().Message().find("'lib/.git'"), std::string::npos) << p.error().Message();
}

TEST_F(WorkspaceTest, NestedGitEntriesOfAnyCaseAndKindAreRefusedButTheRootsOwnIsNot) {
  const fs::path ws = (MakeWorkspace(), fs::path(layout_.workspace));
  ASSERT_TRUE(ScanWorkspace(ws.string()).ok()) << "the root's own .git is the agent's";
  fs::create_directories(ws / "a/b/.GIT");
  auto upper = ScanWorkspace(ws.string());
  ASSERT_FALSE(upper.ok());
  EXPECT_NE(upper.error().Message().find("'a/b/.GIT'"), std::string::npos)
      << upper.error().Message();
  fs::remove_all(ws / "a");
  fs::create_directories(ws / "c");
  fs::create_symlink(repo_ / ".git", ws / "c/.git");
  auto link = ScanWorkspace(ws.string());
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.error().Message().find("'c/.git'"), std::string::npos) << link.error().Message();
}

TEST_F(WorkspaceTest, FifosAndDevicesAreRefusedSocketsAreCounted) {
  // git 2.39 skips untracked special files and refuses a tracked path that became one, so no
  // blocking read is known today; the walk makes "git never opens a FIFO" hold by construction.
  const Materialized m = MakeWorkspace();
  const fs::path ws = layout_.workspace;
  ASSERT_EQ(::mkfifo((ws / "src/pipe").c_str(), 0600), 0);
  auto p = CapturePatch(layout_, m.base_commit);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().Message().find("'src/pipe': is a FIFO"), std::string::npos)
      << p.error().Message();
  fs::remove(ws / "src/pipe");

  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  const std::string sock = (ws / "s.sock").string();
  ASSERT_LT(sock.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(s);
  auto scan = ScanWorkspace(ws.string());
  ASSERT_TRUE(scan.ok()) << scan.error().Message();
  EXPECT_EQ(scan->sockets, 1U);
  auto ok = CapturePatch(layout_, m.base_commit);
  ASSERT_TRUE(ok.ok()) << ok.error().Message();
  EXPECT_TRUE(ok->files.empty()) << "a socket is not content";
}

TEST_F(WorkspaceTest, TheWalkIsBoundedInEntriesAndDepth) {
  const fs::path ws = (MakeWorkspace(), fs::path(layout_.workspace));
  for (int i = 0; i < 20; ++i) Write(ws / ("many/f" + std::to_string(i)), "x");
  auto many = ScanWorkspace(ws.string(), ScanLimits{10, 256});
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.error().Message().find("more than 10 entries"), std::string::npos);
  fs::create_directories(ws / "d/d/d/d/d");
  auto deep = ScanWorkspace(ws.string(), ScanLimits{1000, 3});
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().Message().find("more than 3 directories deep"), std::string::npos)
      << deep.error().Message();
}

TEST_F(WorkspaceTest, TheWorkspacesOwnRepositoryLayoutIsNeverRead) {
  // The agent replaces its .git with a link to another repository (a "gitdir:" file) and plants
  // a commondir: plain git in the workspace now works on that repository; cagent's capture, which
  // names its own git dir and work tree, sees only the files.
  const Materialized m = MakeWorkspace();
  const fs::path ws = layout_.workspace;
  const fs::path other = base_ / "other";
  fs::create_directories(other);
  Write(other / "o.txt", "o\n");
  Sh("cd " + other.string() +
     " && git init -q -b main . && git add -A && git -c user.name=o -c user.email=o@o commit -q -m "
     "o");
  fs::remove_all(ws / ".git");
  Write(ws / ".git", "gitdir: " + (other / ".git").string() + "\n");
  Write(other / ".git/commondir", ".\n");
  Write(ws / "src/calc.py", "def add(a, b):\n    return a + b\n");

  // Twin: plain git discovers the other repository from the workspace.
  GitInvocation plain;
  plain.cwd = ws.string();
  plain.args = {"rev-parse", "--absolute-git-dir"};
  auto found = GitOutput(plain);
  ASSERT_TRUE(found.ok()) << found.error().Message();
  EXPECT_EQ(fs::path(found->substr(0, found->find('\n'))), other / ".git");

  auto p = CapturePatch(layout_, m.base_commit);
  ASSERT_TRUE(p.ok()) << p.error().Message();
  ASSERT_EQ(p->files.size(), 1U);
  EXPECT_EQ(p->files[0].path, "src/calc.py");
}

// ---- class 5/3: attributes in the workspace ----

TEST_F(WorkspaceTest, InTreeAttributesDoNotChangeWhatTheCaptureRecords) {
  const Materialized m = MakeWorkspace();
  const fs::path ws = layout_.workspace;
  const std::string bytes = "line\r\n$Id: planted $\n";
  Write(ws / "notes.txt", bytes);
  Write(ws / ".gitattributes", "* text ident\n");

  // Twin: without cagent's info/attributes, git normalises CRLF and collapses $Id$.
  fs::remove(fs::path(layout_.trusted_git) / "info/attributes");
  auto naive = RunGit([&] {
    GitInvocation g;
    g.git_dir = layout_.trusted_git;
    g.work_tree = layout_.workspace;
    g.cwd = layout_.workspace;
    g.index_file = layout_.run_dir + "/naive-index";
    g.args = {"add", "--", "notes.txt"};
    return g;
  }());
  ASSERT_TRUE(naive.ok() && naive->exit_code == 0);
  auto naive_blob = GitOutput([&] {
    GitInvocation g;
    g.git_dir = layout_.trusted_git;
    g.index_file = layout_.run_dir + "/naive-index";
    g.args = {"cat-file", "blob", ":notes.txt"};
    return g;
  }());
  ASSERT_TRUE(naive_blob.ok()) << naive_blob.error().Message();
  EXPECT_EQ(*naive_blob, "line\n$Id$\n");

  auto p = CapturePatch(layout_, m.base_commit);  // writes info/attributes again
  ASSERT_TRUE(p.ok()) << p.error().Message();
  auto blob = GitOutput([&] {
    GitInvocation g;
    g.git_dir = layout_.trusted_git;
    g.args = {"cat-file", "blob", ":notes.txt"};
    return g;
  }());
  ASSERT_TRUE(blob.ok()) << blob.error().Message();
  EXPECT_EQ(*blob, bytes);
}

// ---- class 2: the verification tree ----

TEST_F(WorkspaceTest, TheVerifyTreeHoldsBasePlusPatchAndNothingTheAgentHid) {
  const Materialized m = MakeWorkspace();
  const fs::path ws = layout_.workspace;
  Write(ws / "src/calc.py", "def add(a, b):\n    return a + b\n");
  fs::create_symlink("calc.py", ws / "src/link.py");
  Write(ws / "run.sh", "#!/bin/sh\n");
  ::chmod((ws / "run.sh").c_str(), 0755);
  fs::remove(ws / "README.md");
  // What the agent hides from git: an ignored file, and a directory whose .gitignore hides it all.
  Write(ws / "debug.log", "ignored\n");
  Write(ws / "src/shadow/__init__.py", "cheat = True\n");
  Write(ws / "src/shadow/.gitignore", "*\n");
  auto p = CapturePatch(layout_, m.base_commit);
  ASSERT_TRUE(p.ok()) << p.error().Message();
  Write(run_dir_ / "patch.diff", p->patch);

  auto t = MakeVerifyTree(layout_, m.base_commit, (run_dir_ / "patch.diff").string(), p->tree);
  ASSERT_TRUE(t.ok()) << t.error().Message();
  EXPECT_EQ(t->tree, p->tree);
  EXPECT_EQ(t->base_commit, m.base_commit);
  const fs::path vt = t->dir;
  EXPECT_EQ(vt, fs::path(layout_.verify_tree));
  EXPECT_EQ(Read(vt / "src/calc.py"), "def add(a, b):\n    return a + b\n");
  EXPECT_EQ(fs::read_symlink(vt / "src/link.py"), "calc.py");
  EXPECT_EQ(fs::status(vt / "run.sh").permissions() & fs::perms::owner_exec, fs::perms::owner_exec);
  EXPECT_FALSE(fs::exists(vt / "README.md"));
  EXPECT_EQ(Read(vt / "data.bin"), std::string("\x00\x01\x02\x03", 4));
  EXPECT_FALSE(fs::exists(vt / "debug.log"));
  EXPECT_FALSE(fs::exists(vt / "src/shadow")) << "what git did not capture reached verification";
  EXPECT_FALSE(fs::exists(vt / ".git")) << "the verification tree has no repository";

  // Made once: a second call does not reuse (or write into) an existing directory.
  EXPECT_FALSE(
      MakeVerifyTree(layout_, m.base_commit, (run_dir_ / "patch.diff").string(), p->tree).ok());
}

TEST_F(WorkspaceTest, TheVerifyTreeIsCheckedOutWithoutTheTreesAttributes) {
  // The patch adds "* text eol=crlf ident": a plain checkout converts every file it writes.
  const Materialized m = MakeWorkspace();
  const fs::path ws = layout_.workspace;
  Write(ws / ".gitattributes", "* text eol=crlf ident\n");
  Write(ws / "id.txt", "a\n$Id$\n");
  auto p = CapturePatch(layout_, m.base_commit);
  ASSERT_TRUE(p.ok()) << p.error().Message();
  Write(run_dir_ / "patch.diff", p->patch);
  auto t = MakeVerifyTree(layout_, m.base_commit, (run_dir_ / "patch.diff").string(), p->tree);
  ASSERT_TRUE(t.ok()) << t.error().Message();
  EXPECT_EQ(Read(fs::path(t->dir) / "id.txt"), "a\n$Id$\n");
  EXPECT_EQ(Read(fs::path(t->dir) / "README.md"), "# demo\n");

  // Twin: the same tree checked out by the same git without cagent's info/attributes.
  fs::remove(fs::path(layout_.trusted_git) / "info/attributes");
  const fs::path plain = base_ / "plain";
  fs::create_directories(plain);
  GitInvocation co;
  co.git_dir = layout_.trusted_git;
  co.work_tree = plain.string();
  co.cwd = plain.string();
  co.index_file = layout_.trusted_git + "/verify-index";
  co.args = {"checkout-index", "--all", "--force"};
  ASSERT_TRUE(GitOutput(co).ok());
  EXPECT_EQ(Read(plain / "README.md"), "# demo\r\n");
  EXPECT_NE(Read(plain / "id.txt").find("$Id: "), std::string::npos) << Read(plain / "id.txt");
}

TEST_F(WorkspaceTest, APatchThatDoesNotReproduceTheCapturedTreeIsRefused) {
  const Materialized m = MakeWorkspace();
  Write(fs::path(layout_.workspace) / "src/calc.py", "changed\n");
  auto p = CapturePatch(layout_, m.base_commit);
  ASSERT_TRUE(p.ok()) << p.error().Message();
  Write(run_dir_ / "patch.diff", p->patch);
  auto t = MakeVerifyTree(layout_, m.base_commit, (run_dir_ / "patch.diff").string(),
                          std::string(40, '0'));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().Message().find("does not reproduce the captured tree"), std::string::npos)
      << t.error().Message();
  EXPECT_FALSE(fs::exists(layout_.verify_tree)) << "nothing is checked out for verification";
}

// ---- outputs (issue 32) ----

std::vector<policy::OutputRule> Outputs(const std::string& text) {
  policy::SearchPath search;
  policy::Compiled c = policy::CompileText("o.cagent", text, search);
  EXPECT_TRUE(c.ok()) << policy::RenderAll(*c.sources, c.diags);
  return c.ok() ? c.policy->outputs : std::vector<policy::OutputRule>{};
}

std::set<std::string> Paths(const CapturedPatch& p) {
  std::set<std::string> out;
  for (const auto& f : p.files) out.insert(f.path);
  return out;
}

// Twin of the test below: without outputs, everything a build leaves that git does not ignore is
// in the patch (the 222 files of issue 32's CMake run).
TEST_F(WorkspaceTest, WithoutOutputsABuildTreeIsCapturedAsTheAgentsChange) {
  const Materialized m = MakeWorkspace();
  const fs::path ws = layout_.workspace;
  Write(ws / "src/calc.py", "def add(a, b):\n    return a + b\n");
  Write(ws / "build/CMakeCache.txt", "x\n");
  Write(ws / "build/CMakeFiles/calc.o", "obj\n");
  auto p = CapturePatch(layout_, m.base_commit);
  ASSERT_TRUE(p.ok()) << p.error().Message();
  EXPECT_EQ(Paths(*p), (std::set<std::string>{"build/CMakeCache.txt", "build/CMakeFiles/calc.o",
                                              "src/calc.py"}));
  EXPECT_TRUE(p->left_out.empty());
}

TEST_F(WorkspaceTest, OutputsLeaveUntrackedBuildFilesOutAndSayWhat) {
  // A tracked file under build/ (checked in on purpose) stays the agent's change when it changes.
  Write(repo_ / "build/README", "build here\n");
  Sh("cd " + repo_.string() +
     " && git -c user.name=t -c user.email=t@t add -A && "
     "git -c user.name=t -c user.email=t@t commit -q -m build-readme");
  const Materialized m = MakeWorkspace();
  const fs::path ws = layout_.workspace;
  Write(ws / "src/calc.py", "def add(a, b):\n    return a + b\n");
  Write(ws / "build/README", "changed by the agent\n");
  Write(ws / "build/CMakeCache.txt", "x\n");
  Write(ws / "build/CMakeFiles/calc.o", "obj\n");
  Write(ws / "build/generated.c", "int generated;\n");  // source-looking: named
  Write(ws / "src/pkg/__pycache__/calc.cpython-311.pyc", "pyc");
  Write(ws / "build.log", "ignored by .gitignore: neither captured nor counted\n");
  // Names a pathspec or an option would read differently: each is left out as itself, and
  // nothing else with them.
  Write(ws / "build/*", "star\n");
  Write(ws / "build/:(glob)x", "magic\n");
  Write(ws / "build/--all", "option\n");
  Write(ws / "build/line\nbreak.o", "newline\n");
  Write(ws / "buildx.txt", "not under build\n");

  auto p = CapturePatch(layout_, m.base_commit, Outputs("outputs build/ **/__pycache__\n"));
  ASSERT_TRUE(p.ok()) << p.error().Message();
  EXPECT_EQ(Paths(*p), (std::set<std::string>{"build/README", "buildx.txt", "src/calc.py"}));
  const LeftOut& l = p->left_out;
  EXPECT_EQ(l.files, 8U);
  ASSERT_EQ(l.roots.size(), 2U);
  EXPECT_EQ(l.roots[0].path, "build");
  EXPECT_EQ(l.roots[0].files, 7U);
  EXPECT_EQ(l.roots[1].path, "src/pkg/__pycache__");
  EXPECT_EQ(l.roots[1].files, 1U);
  EXPECT_EQ(l.sources, (std::vector<std::string>{"build/generated.c"}));
  EXPECT_EQ(l.sources_total, 1U);
  // The patch applies to the caller's repository and holds nothing left out.
  EXPECT_EQ(p->patch.find("CMakeCache"), std::string::npos);
  Write(base_ / "p.patch", p->patch);
  Sh("cd " + repo_.string() + " && git apply --check " + (base_ / "p.patch").string());
  EXPECT_FALSE(fs::exists(run_dir_ / "capture-pathspecs")) << "the pathspec file is removed";

  // CaptureTree with the same outputs records the same tree.
  auto tree = CaptureTree(layout_, m.base_commit, Outputs("outputs build/ **/__pycache__\n"));
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(*tree, p->tree);
}

TEST_F(WorkspaceTest, OutputsNeverHideADeletedOrModifiedTrackedFile) {
  Write(repo_ / "dist/keep.js", "tracked\n");
  Sh("cd " + repo_.string() +
     " && git -c user.name=t -c user.email=t@t add -A && "
     "git -c user.name=t -c user.email=t@t commit -q -m dist");
  const Materialized m = MakeWorkspace();
  fs::remove(fs::path(layout_.workspace) / "dist/keep.js");
  auto p = CapturePatch(layout_, m.base_commit, Outputs("outputs dist\n"));
  ASSERT_TRUE(p.ok()) << p.error().Message();
  ASSERT_EQ(p->files.size(), 1U);
  EXPECT_EQ(p->files[0].path, "dist/keep.js");
  EXPECT_EQ(p->files[0].status, 'D');
  EXPECT_TRUE(p->left_out.empty());
}

TEST(LooksLikeSource, ByExtension) {
  EXPECT_TRUE(LooksLikeSource("build/gen.c"));
  EXPECT_TRUE(LooksLikeSource("dist/app.ts"));
  EXPECT_TRUE(LooksLikeSource("target/Main.java"));
  EXPECT_TRUE(LooksLikeSource("x.py"));
  EXPECT_FALSE(LooksLikeSource("build/calc.o"));
  EXPECT_FALSE(LooksLikeSource("build/CMakeCache.txt"));
  EXPECT_FALSE(LooksLikeSource("__pycache__/a.pyc"));
  EXPECT_FALSE(LooksLikeSource("build/.c"));
  EXPECT_FALSE(LooksLikeSource("build/c"));
}

// A build/ that an earlier in-tree build left in the caller's tree is not an uncommitted change:
// the run starts without --allow-dirty and the build never rides into the workspace. A tracked
// change under outputs, and an untracked file elsewhere, still make the tree dirty.
TEST_F(WorkspaceTest, UntrackedOutputsInTheCallersTreeAreNotDirt) {
  Write(repo_ / "build/CMakeCache.txt", "stale\n");
  Write(repo_ / "build/obj/calc.o", "stale\n");
  auto info = InspectRepo(repo_.string(), "");
  ASSERT_TRUE(info.ok());
  // Twin: without outputs the same tree is dirty.
  RepoInfo plain = *info;
  EXPECT_EQ(LeaveOutUntrackedOutputs(plain, {}), 0U);
  EXPECT_FALSE(CheckDirty(plain, false).ok());

  EXPECT_EQ(LeaveOutUntrackedOutputs(*info, Outputs("outputs build\n")), 2U);
  EXPECT_TRUE(info->dirty.empty());
  EXPECT_TRUE(CheckDirty(*info, false).ok());
  auto m = MaterializeWorkspace(*info, layout_, false);
  ASSERT_TRUE(m.ok()) << m.error().Message();
  EXPECT_FALSE(fs::exists(fs::path(layout_.workspace) / "build"));

  // With other dirt and --allow-dirty, the outputs still stay behind.
  Write(repo_ / "notes/new.txt", "untracked\n");
  fs::remove_all(run_dir_);
  fs::create_directories(run_dir_);
  auto again = InspectRepo(repo_.string(), "");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(LeaveOutUntrackedOutputs(*again, Outputs("outputs build\n")), 2U);
  EXPECT_FALSE(CheckDirty(*again, false).ok());
  auto carried = MaterializeWorkspace(*again, layout_, true);
  ASSERT_TRUE(carried.ok()) << carried.error().Message();
  EXPECT_EQ(Read(fs::path(layout_.workspace) / "notes/new.txt"), "untracked\n");
  EXPECT_FALSE(fs::exists(fs::path(layout_.workspace) / "build"));
}

}  // namespace
}  // namespace cagent::launcher::run
