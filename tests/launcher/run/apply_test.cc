// run::ApplyRun against real git repositories in temporary directories: a patch that would go
// through an ignored symlink, a file, a .git directory, a filter driver of the caller's repository,
// a symlink swapped in between the check and the write, a hard link. Each attack is first shown
// working with the naive operation ApplyRun replaces (git apply --index, GNU patch, a write by
// path string, the old git status dirty check), then refused (or neutralised) by ApplyRun.
#include "launcher/run/apply.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/sha256.h"

namespace cagent::launcher::run {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `cmd` with sh in `dir`; returns the exit status and (optionally) stdout.
int Sh(const std::string& dir, const std::string& cmd, std::string* out = nullptr) {
  const std::string full = "cd " + Quote(dir) + " && (" + cmd + ") 2>/dev/null";
  FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) return -1;
  std::string text;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
  const int status = ::pclose(p);
  if (out != nullptr) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

constexpr const char* kGit = "git -c user.name=t -c user.email=t@t -c init.defaultBranch=main";
// What cagent apply did before (and the naive operation of the twins): refresh the index's stat
// data, then git apply --index in the caller's repository.
const std::string kOldApply = "git update-index -q --refresh; git apply --index ";

class ApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
    char tmpl[] = "/tmp/cagent-apply-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
    ::setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
    outside_ = dir_ + "/outside";
    fs::create_directories(outside_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // A repository at dir_/NAME with `files` committed (NAME -> content; a content starting with
  // "->" makes a symlink) and .gitignore ignoring `ignored`.
  std::string MakeRepo(const std::string& name, const std::map<std::string, std::string>& files,
                       const std::string& ignored = "") {
    const std::string repo = dir_ + "/" + name;
    fs::create_directories(repo);
    EXPECT_EQ(Sh(repo, std::string(kGit) + " init -q"), 0);
    for (const auto& [path, content] : files) {
      if (content.starts_with("->")) {
        fs::create_directories(fs::path(repo + "/" + path).parent_path());
        fs::create_symlink(content.substr(2), repo + "/" + path);
      } else {
        WriteFile(repo + "/" + path, content);
      }
    }
    if (!ignored.empty()) WriteFile(repo + "/.gitignore", ignored);
    EXPECT_EQ(Sh(repo, std::string(kGit) + " add -A && " + kGit + " commit -q -m base"), 0);
    return repo;
  }

  std::string Head(const std::string& repo) {
    std::string out;
    Sh(repo, "git rev-parse HEAD", &out);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  // A completed, verified run of `repo` whose patch is what `edit` does to a clone (run in the
  // clone's directory by sh, then git add -A -f). Returns the run dir; the patch is in
  // run_dir/patch.diff.
  std::string MakeRun(const std::string& repo, const std::string& edit) {
    const std::string run_dir = dir_ + "/runs/run-" + std::to_string(++runs_);
    fs::create_directories(run_dir);
    EXPECT_EQ(Sh(dir_, "git clone -q --bare " + Quote(repo) + " " + Quote(run_dir + "/git")), 0);
    const std::string work = run_dir + "/workspace";
    EXPECT_EQ(Sh(dir_, "git clone -q " + Quote(repo) + " " + Quote(work)), 0);
    EXPECT_EQ(Sh(work, edit), 0) << edit;
    EXPECT_EQ(Sh(work, std::string(kGit) + " add -A -f"), 0);
    std::string patch, raw;
    Sh(work, "git diff --cached --binary --full-index --no-renames HEAD", &patch);
    Sh(work, "git diff --cached --raw -z --no-renames HEAD", &raw);
    json files = json::array();
    std::vector<std::string> fields;
    std::size_t start = 0;
    while (start < raw.size()) {
      const auto end = raw.find('\0', start);
      fields.push_back(raw.substr(start, end - start));
      start = end + 1;
    }
    for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
      std::istringstream in(fields[i]);
      std::string om, nm, ob, nb, st;
      in >> om >> nm >> ob >> nb >> st;
      files.push_back(
          {{"path", fields[i + 1]}, {"status", st}, {"old_mode", om.substr(1)}, {"new_mode", nm}});
    }
    WriteRun(run_dir, repo, Head(repo), patch, files);
    return run_dir;
  }

  static void WriteRun(const std::string& run_dir, const std::string& repo, const std::string& base,
                       const std::string& patch, const json& files) {
    WriteFile(run_dir + "/patch.diff", patch);
    const json result = {{"run_id", fs::path(run_dir).filename().string()},
                         {"status", "completed"},
                         {"verified", true},
                         {"repo", repo},
                         {"base_commit", base},
                         {"patch", {{"sha256", Sha256Hex(patch)}, {"bytes", patch.size()}}},
                         {"changed_files", files}};
    WriteFile(run_dir + "/result.json", result.dump(2));
  }

  // A second, identical copy of `repo` (for the naive operation to attack).
  std::string Copy(const std::string& repo, const std::string& name) {
    const std::string copy = dir_ + "/" + name;
    EXPECT_EQ(Sh(dir_, "cp -a " + Quote(repo) + " " + Quote(copy)), 0);
    return copy;
  }

  Result<ApplyReport> Apply(const std::string& run_dir, const std::string& repo,
                            const std::string& branch = "",
                            std::function<void()> before_write = {}) {
    ApplyRequest req;
    req.run_dir = run_dir;
    req.repo = repo;
    req.branch = branch;
    req.before_write = std::move(before_write);
    return ApplyRun(req);
  }

  std::string dir_, outside_;
  int runs_ = 0;
};

TEST_F(ApplyTest, AppliesAddModifyDeleteModesAndTypeChangesAndStagesThem) {
  const std::string repo = MakeRepo("repo", {{"a.txt", "a\n"},
                                             {"gone.txt", "x\n"},
                                             {"dir/one", "1\n"},
                                             {"link", "->a.txt"},
                                             {"tool.sh", "#!/bin/sh\n"}});
  const std::string run = MakeRun(
      repo,
      "echo more >> a.txt && rm gone.txt && rm -r dir && echo file > dir && mkdir -p new/deep && "
      "echo n > new/deep/f && chmod +x tool.sh && rm link && ln -s ../outside/x link2 && "
      "printf 'weird' > \"$(printf 'line\\nbreak')\"");
  auto r = Apply(run, repo);
  ASSERT_TRUE(r) << r.error().Message();
  EXPECT_EQ(ReadFile(repo + "/a.txt"), "a\nmore\n");
  EXPECT_FALSE(Exists(repo + "/gone.txt"));
  EXPECT_EQ(ReadFile(repo + "/dir"), "file\n");
  EXPECT_EQ(ReadFile(repo + "/new/deep/f"), "n\n");
  EXPECT_EQ(ReadFile(repo + "/line\nbreak"), "weird");
  EXPECT_TRUE(fs::is_symlink(repo + "/link2"));  // a symlink the patch makes is content
  EXPECT_EQ(fs::read_symlink(repo + "/link2"), "../outside/x");
  EXPECT_FALSE(Exists(outside_ + "/x"));
  struct stat st {};
  ASSERT_EQ(::stat((repo + "/tool.sh").c_str(), &st), 0);
  EXPECT_NE(st.st_mode & S_IXUSR, 0U);
  EXPECT_EQ(st.st_mode & (S_ISUID | S_ISGID), 0U);
  // Staged, and the work tree matches the index.
  std::string status;
  Sh(repo, "git status --porcelain", &status);
  EXPECT_EQ(status,
            "M  a.txt\nA  dir\nD  dir/one\nD  gone.txt\nA  \"line\\nbreak\"\nD  link\nA  link2\n"
            "A  new/deep/f\nM  tool.sh\n");
  EXPECT_EQ(r->paths.size(), 9U);
}

// Class 3: an ignored symlink data -> /outside and a patch adding data/x.
TEST_F(ApplyTest, AnIgnoredSymlinkedParentIsRefusedWhereGitApplyWritesThroughIt) {
  const std::string repo = MakeRepo("repo", {{"a.txt", "a\n"}}, "data\n");
  const std::string run = MakeRun(repo, "mkdir data && echo x > data/x");
  fs::create_symlink(outside_, repo + "/data");
  const std::string naive = Copy(repo, "naive");

  // Guard off (the naive operation): git apply --index in the repository writes outside it.
  ASSERT_EQ(Sh(naive, kOldApply + Quote(run + "/patch.diff")), 0);
  EXPECT_EQ(ReadFile(outside_ + "/x"), "x\n") << "git apply did not write through the symlink";
  fs::remove(outside_ + "/x");

  auto r = Apply(run, repo);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().Message(),
              HasSubstr("'data/x' goes through 'data', which is a symbolic link"));
  EXPECT_THAT(r.error().Message(), HasSubstr("Nothing was written"));
  EXPECT_FALSE(Exists(outside_ + "/x"));
  std::string status;
  Sh(repo, "git status --porcelain", &status);
  EXPECT_EQ(status, "");
}

TEST_F(ApplyTest, AFileAsAParentIsRefusedBeforeAnythingIsWrittenWhereGitApplyHalfApplies) {
  const std::string repo = MakeRepo("repo", {{"a.txt", "a\n"}}, "data\n");
  const std::string run = MakeRun(repo, "echo more >> a.txt && mkdir data && echo x > data/x");
  WriteFile(repo + "/data", "an ignored file\n");
  const std::string naive = Copy(repo, "naive");

  // Guard off: git apply fails on data/x only after it has rewritten a.txt.
  EXPECT_EQ(Sh(naive, kOldApply + Quote(run + "/patch.diff")), 128);
  EXPECT_EQ(ReadFile(naive + "/a.txt"), "a\nmore\n") << "git apply no longer half-applies";

  auto r = Apply(run, repo);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().Message(), HasSubstr("'data', which is a regular file, not a directory"));
  EXPECT_EQ(ReadFile(repo + "/a.txt"), "a\n");
  EXPECT_EQ(ReadFile(repo + "/data"), "an ignored file\n");
}

TEST_F(ApplyTest, DotGitInEverySpellingIsRefusedAsAPath) {
  for (const char* bad :
       {".git/config", ".GIT/config", ".Git/hooks/pre-commit", ".git./config", ".git /config",
        ".git::$INDEX_ALLOCATION/config", "git~1/config", "GIT~1/config", "sub/.git/config",
        ".g\u200cit/config", "\ufeff.git/config", ".git", "a/../b", "./a", "/etc/passwd", "a//b",
        ""}) {
    EXPECT_NE(RefusedPatchPath(bad, "100644"), std::nullopt) << bad;
  }
  for (const char* good : {".github/workflows/x.yml", ".gitignore", ".gitattributes", "a.git/x",
                           "git/x", ".gitx/y", "src/git~2", "x.git"}) {
    EXPECT_EQ(RefusedPatchPath(good, "100644"), std::nullopt) << good;
  }
  EXPECT_NE(RefusedPatchPath("sub", "160000"), std::nullopt);
  EXPECT_NE(RefusedPatchPath("x/.gitattributes", "120000"), std::nullopt);
  EXPECT_NE(RefusedPatchPath(".GITMODULES", "120000"), std::nullopt);
  EXPECT_EQ(RefusedPatchPath("x/.gitattributes", "100644"), std::nullopt);
}

TEST_F(ApplyTest, APatchTouchingDotGitConfigIsRefusedWherePatchWritesIt) {
  if (std::system("patch --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "GNU patch is not installed (the naive operation of this twin)";
  }
  const std::string repo = MakeRepo("repo", {{"a.txt", "a\n"}});
  const std::string config = ReadFile(repo + "/.git/config");
  const int lines = static_cast<int>(std::count(config.begin(), config.end(), '\n'));
  const std::string patch =
      "diff --git a/.git/config b/.git/config\n--- a/.git/config\n"
      "+++ b/.git/config\n@@ -" +
      std::to_string(lines) + ",0 +" + std::to_string(lines + 1) +
      ",2 @@\n+[core]\n+\thooksPath = /tmp/evil\n";
  const std::string run_dir = dir_ + "/runs/run-git";
  fs::create_directories(run_dir);
  ASSERT_EQ(Sh(dir_, "git clone -q --bare " + Quote(repo) + " " + Quote(run_dir + "/git")), 0);
  WriteRun(run_dir, repo, Head(repo), patch,
           json::array({{{"path", ".git/config"},
                         {"status", "M"},
                         {"old_mode", "100644"},
                         {"new_mode", "100644"}}}));
  const std::string naive = Copy(repo, "naive");

  // Guard off: a patch tool without the .git check writes the repository's configuration.
  ASSERT_EQ(Sh(naive, "patch -p1 -s < " + Quote(run_dir + "/patch.diff")), 0);
  EXPECT_THAT(ReadFile(naive + "/.git/config"), HasSubstr("hooksPath = /tmp/evil"));

  auto r = Apply(run_dir, repo);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().Message(), HasSubstr("'.git/config'"));
  EXPECT_THAT(r.error().Message(), HasSubstr("never writes repository metadata"));
  EXPECT_EQ(ReadFile(repo + "/.git/config"), config);

  // The same path hidden from result.json: the patch's own file list still names it.
  WriteRun(run_dir, repo, Head(repo), patch, json::array());
  auto hidden = Apply(run_dir, repo);
  ASSERT_FALSE(hidden);
  EXPECT_EQ(ReadFile(repo + "/.git/config"), config);
}

TEST_F(ApplyTest, ResultJsonAndThePatchMustAgree) {
  const std::string repo = MakeRepo("repo", {{"a.txt", "a\n"}, {"b.txt", "b\n"}});
  const std::string run = MakeRun(repo, "echo 1 >> a.txt && echo 2 >> b.txt");
  json result = json::parse(ReadFile(run + "/result.json"));
  result["changed_files"].erase(1);  // b.txt changed, but not recorded
  WriteFile(run + "/result.json", result.dump());
  auto r = Apply(run, repo);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().Message(), HasSubstr("'b.txt'"));
  EXPECT_THAT(r.error().Message(), HasSubstr("not what result.json records"));
  EXPECT_EQ(ReadFile(repo + "/a.txt"), "a\n");
}

// A filter driver in the caller's repository config, selected by a committed .gitattributes.
TEST_F(ApplyTest, TheRepositorysFilterDriversDoNotRunWhereGitApplyRunsThem) {
  const std::string marker = dir_ + "/marker";
  const std::string repo =
      MakeRepo("repo", {{"a.txt", "a\n"}, {".gitattributes", "*.txt filter=mark\n"}});
  const std::string run = MakeRun(repo, "echo more >> a.txt && echo new > b.txt");
  const std::string driver = "sh -c 'touch " + marker + "; cat'";
  ASSERT_EQ(Sh(repo, "git config filter.mark.clean " + Quote(driver) +
                         " && git config filter.mark.smudge " + Quote(driver) +
                         " && git config filter.mark.required true"),
            0);
  const std::string naive = Copy(repo, "naive");
  fs::remove(marker);

  // Guard off: git apply --index runs the repository's filter.
  ASSERT_EQ(Sh(naive, kOldApply + Quote(run + "/patch.diff")), 0);
  EXPECT_TRUE(Exists(marker)) << "git apply did not run the filter driver";
  fs::remove(marker);

  auto r = Apply(run, repo);
  ASSERT_TRUE(r) << r.error().Message();
  EXPECT_FALSE(Exists(marker)) << "cagent apply ran the repository's filter driver";
  EXPECT_EQ(ReadFile(repo + "/a.txt"), "a\nmore\n");
  EXPECT_EQ(ReadFile(repo + "/b.txt"), "new\n");
  std::string staged;
  Sh(repo, "git diff --cached --name-only", &staged);
  EXPECT_EQ(staged, "a.txt\nb.txt\n");
}

TEST_F(ApplyTest, HashObjectNoFiltersReallyBypassesTheFilterDriver) {
  const std::string marker = dir_ + "/marker";
  const std::string repo =
      MakeRepo("repo", {{"a.txt", "a\n"}, {".gitattributes", "*.txt filter=mark\n"}});
  ASSERT_EQ(Sh(repo, "git config filter.mark.clean " + Quote("sh -c 'touch " + marker + "; cat'")),
            0);
  WriteFile(dir_ + "/blob", "content\n");
  fs::remove(marker);
  ASSERT_EQ(Sh(repo, "git hash-object -w --path=x.txt " + Quote(dir_ + "/blob")), 0);
  EXPECT_TRUE(Exists(marker)) << "the filter did not run without --no-filters";
  fs::remove(marker);
  ASSERT_EQ(Sh(repo, "git hash-object -w --no-filters " + Quote(dir_ + "/blob")), 0);
  EXPECT_FALSE(Exists(marker));
}

TEST_F(ApplyTest, BranchCreatesItAtTheBaseWithoutRunningTheFilterWhereGitSwitchRunsIt) {
  const std::string marker = dir_ + "/marker";
  const std::string repo =
      MakeRepo("repo", {{"a.txt", "a\n"}, {".gitattributes", "*.txt filter=mark\n"}});
  const std::string base = Head(repo);
  const std::string run = MakeRun(repo, "echo more >> a.txt");
  // HEAD moves on, so the branch needs a checkout of the base.
  ASSERT_EQ(Sh(repo, "echo later > a.txt && " + std::string(kGit) + " commit -q -am later"), 0);
  const std::string driver = "sh -c 'touch " + marker + "; cat'";
  ASSERT_EQ(Sh(repo, "git config filter.mark.clean " + Quote(driver) +
                         " && git config filter.mark.smudge " + Quote(driver)),
            0);
  const std::string naive = Copy(repo, "naive");
  fs::remove(marker);

  ASSERT_EQ(Sh(naive, "git switch -q --create b " + base), 0);
  EXPECT_TRUE(Exists(marker)) << "git switch did not run the smudge filter";
  fs::remove(marker);

  auto r = Apply(run, repo, "fix");
  ASSERT_TRUE(r) << r.error().Message();
  EXPECT_FALSE(Exists(marker));
  EXPECT_EQ(r->branch, "fix");
  std::string head;
  Sh(repo, "git symbolic-ref --short HEAD", &head);
  EXPECT_EQ(head, "fix\n");
  EXPECT_EQ(ReadFile(repo + "/a.txt"), "a\nmore\n");
}

TEST_F(ApplyTest, IgnoredFilesAtAddedPathsRefuseTheApplyWhereGitStatusSeesAClean) {
  const std::string repo = MakeRepo("repo", {{"a.txt", "a\n"}}, "secret.env\nnotes.md\n");
  const std::string run = MakeRun(repo, "echo from-patch > secret.env");
  WriteFile(repo + "/secret.env", "TOKEN=mine\n");

  // Guard off: the old dirty check (git status) calls the tree clean.
  std::string status;
  Sh(repo, "git status --porcelain --untracked-files=all", &status);
  EXPECT_EQ(status, "");

  auto r = Apply(run, repo);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().Message(), HasSubstr("adds 'secret.env', but"));
  EXPECT_THAT(r.error().Message(), HasSubstr("regular file there that git does not track"));
  EXPECT_EQ(ReadFile(repo + "/secret.env"), "TOKEN=mine\n");

  // An ignored symlink at an added path, and an ignored directory holding an ignored file.
  const std::string run2 = MakeRun(repo, "echo n > notes.md");
  fs::create_symlink(outside_ + "/notes", repo + "/notes.md");
  auto r2 = Apply(run2, repo);
  ASSERT_FALSE(r2);
  EXPECT_THAT(r2.error().Message(), HasSubstr("symbolic link there"));
  EXPECT_FALSE(Exists(outside_ + "/notes"));
}

TEST_F(ApplyTest, ASymlinkSwappedInAfterTheCheckIsRefusedAtWriteTime) {
  const std::string repo = MakeRepo("repo", {{"sub/f.txt", "f\n"}});
  const std::string run = MakeRun(repo, "echo changed > sub/f.txt");
  WriteFile(outside_ + "/f.txt", "outside\n");
  auto swap = [&](const std::string& r) {
    fs::rename(r + "/sub", r + "/sub.real");
    fs::create_symlink(outside_, r + "/sub");
  };

  // Guard off: a write by path string after the swap lands outside.
  const std::string naive = Copy(repo, "naive");
  swap(naive);
  WriteFile(naive + "/sub/f.txt", "changed\n");
  EXPECT_EQ(ReadFile(outside_ + "/f.txt"), "changed\n");
  WriteFile(outside_ + "/f.txt", "outside\n");

  auto r = Apply(run, repo, "", [&] { swap(repo); });
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().Message(), HasSubstr("'sub': is a symbolic link"));
  EXPECT_THAT(r.error().Message(), HasSubstr("nothing was written"));
  EXPECT_EQ(ReadFile(outside_ + "/f.txt"), "outside\n");
  EXPECT_EQ(ReadFile(repo + "/sub.real/f.txt"), "f\n");
}

TEST_F(ApplyTest, AHardLinkedFileIsReplacedNotWrittenThrough) {
  const std::string repo = MakeRepo("repo", {{"a.txt", "a\n"}});
  const std::string run = MakeRun(repo, "echo more >> a.txt");
  WriteFile(outside_ + "/h", "a\n");
  const std::string naive = Copy(repo, "naive");
  fs::remove(naive + "/a.txt");
  fs::create_hard_link(outside_ + "/h", naive + "/a.txt");

  // Guard off: writing the file in place (open + truncate) changes the other name too.
  ASSERT_EQ(Sh(naive, "printf 'a\\nmore\\n' > a.txt"), 0);
  EXPECT_EQ(ReadFile(outside_ + "/h"), "a\nmore\n");
  WriteFile(outside_ + "/h", "a\n");  // a new inode, linked below

  fs::remove(repo + "/a.txt");
  fs::create_hard_link(outside_ + "/h", repo + "/a.txt");
  auto r = Apply(run, repo);
  ASSERT_TRUE(r) << r.error().Message();
  EXPECT_EQ(ReadFile(repo + "/a.txt"), "a\nmore\n");
  EXPECT_EQ(ReadFile(outside_ + "/h"), "a\n");
}

TEST_F(ApplyTest, ANestedRepositoryIsNotWrittenInto) {
  const std::string repo = MakeRepo("repo", {{"a.txt", "a\n"}}, "vendor/\n");
  const std::string run = MakeRun(repo, "mkdir -p vendor/lib && echo x > vendor/lib/x");
  fs::create_directories(repo + "/vendor/lib");
  ASSERT_EQ(Sh(repo + "/vendor/lib", std::string(kGit) + " init -q"), 0);
  auto r = Apply(run, repo);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().Message(), HasSubstr("another git repository"));
  EXPECT_FALSE(Exists(repo + "/vendor/lib/x"));
}

TEST_F(ApplyTest, ADirtyOrMovedRepositoryAndATamperedPatchAreRefused) {
  const std::string repo = MakeRepo("repo", {{"a.txt", "a\n"}});
  const std::string run = MakeRun(repo, "echo more >> a.txt");
  WriteFile(repo + "/untracked", "u\n");
  auto dirty = Apply(run, repo);
  ASSERT_FALSE(dirty);
  EXPECT_THAT(dirty.error().Message(), HasSubstr("uncommitted changes"));
  fs::remove(repo + "/untracked");

  ASSERT_EQ(Sh(repo, "echo b > b && " + std::string(kGit) + " add b && " + kGit + " commit -qm b"),
            0);
  auto moved = Apply(run, repo);
  ASSERT_FALSE(moved);
  EXPECT_THAT(moved.error().Message(), HasSubstr("has moved"));

  WriteFile(run + "/patch.diff", ReadFile(run + "/patch.diff") + " ");
  auto tampered = Apply(run, repo);
  ASSERT_FALSE(tampered);
  EXPECT_THAT(tampered.error().Message(), HasSubstr("does not match the digest"));
  EXPECT_EQ(ReadFile(repo + "/a.txt"), "a\n");
}

}  // namespace
}  // namespace cagent::launcher::run
