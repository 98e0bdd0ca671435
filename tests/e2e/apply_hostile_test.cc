// `cagent apply RUN` against a hostile repository, with the real binary (as the caller and as
// nobody): an ignored symlink on the patch's path, a file where a directory should be, a patch
// touching .git/config, a filter driver of the repository's own config. Each attack is shown
// working with the naive operation first (what apply did before: git update-index --refresh + git
// apply --index; GNU patch for .git/), run as the same user, then refused or neutralised by cagent.
// The run directories are fakes made by the test: a completed, verified result.json whose
// patch.sha256 matches patch.diff, and the run's own git dir (a bare clone of the repository).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr int kExitRefused = 3;  // run::kExitRunFailed
constexpr const char* kGit = "git -c user.name=t -c user.email=t@t -c init.defaultBranch=main";
const std::string kOldApply = "git update-index -q --refresh; git apply --index ";

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// sh -c CMD in DIR as this process (root or the invoking user); stdout into *out.
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

// sh -c CMD in DIR as the user cagent runs as (nobody in the nobody variant): the naive operation
// runs with the same rights cagent has.
int ShAsUser(const std::string& dir, const std::string& cmd) {
  return Harness::Get().ShAsUser(dir, cmd);
}

class ApplyHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& h = Harness::Get();
    if (!h.skip_reason().empty()) GTEST_SKIP() << h.skip_reason();
    if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
    // For this suite's own git commands; put back in TearDown, so the suites that run after it
    // in one process (a twin that needs the caller's git configuration) see the caller's.
    for (const char* name : {"GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL"}) {
      const char* was = std::getenv(name);
      saved_env_.emplace_back(name,
                              was != nullptr ? std::optional<std::string>(was) : std::nullopt);
    }
    ::setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
    ::setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
    dir_ = h.MakeDir("apply");
    state_ = dir_ + "/state";
    outside_ = dir_ + "/outside";
    fs::create_directories(outside_);
  }

  void TearDown() override {
    for (const auto& [name, value] : saved_env_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

  // The repository at dir_/NAME with `files` committed and .gitignore = `ignored`.
  std::string MakeRepo(const std::string& name, const std::map<std::string, std::string>& files,
                       const std::string& ignored = "") {
    const std::string repo = dir_ + "/" + name;
    fs::create_directories(repo);
    EXPECT_EQ(Sh(repo, std::string(kGit) + " init -q"), 0);
    for (const auto& [path, content] : files) WriteFile(repo + "/" + path, content);
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

  std::string RunDir(const std::string& id) const { return state_ + "/cagent/runs/" + id; }

  // A fake completed, verified run `id` of `repo` whose patch is what `edit` does to a clone.
  void MakeRun(const std::string& id, const std::string& repo, const std::string& edit) {
    const std::string run_dir = RunDir(id);
    fs::create_directories(run_dir);
    ASSERT_EQ(Sh(dir_, "git clone -q --bare " + Quote(repo) + " " + Quote(run_dir + "/git")), 0);
    const std::string work = dir_ + "/work-" + id;
    ASSERT_EQ(Sh(dir_, "git clone -q " + Quote(repo) + " " + Quote(work)), 0);
    ASSERT_EQ(Sh(work, edit + " && " + kGit + " add -A -f"), 0) << edit;
    std::string patch, raw;
    Sh(work, "git diff --cached --binary --full-index --no-renames HEAD", &patch);
    Sh(work, "git diff --cached --raw -z --no-renames HEAD", &raw);
    json files = json::array();
    std::vector<std::string> fields;
    for (std::size_t start = 0; start < raw.size();) {
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
    WriteRun(id, repo, patch, files);
  }

  void WriteRun(const std::string& id, const std::string& repo, const std::string& patch,
                const json& files) {
    const std::string run_dir = RunDir(id);
    WriteFile(run_dir + "/patch.diff", patch);
    std::string sum;
    ASSERT_EQ(Sh(run_dir, "sha256sum patch.diff", &sum), 0);
    const json result = {{"run_id", id},
                         {"status", "completed"},
                         {"verified", true},
                         {"repo", repo},
                         {"base_commit", Head(repo)},
                         {"patch", {{"sha256", sum.substr(0, 64)}, {"bytes", patch.size()}}},
                         {"changed_files", files}};
    WriteFile(run_dir + "/result.json", result.dump(2));
  }

  // Hands everything under dir_ to the user cagent runs as, and copies `repo` for the naive
  // operation.
  std::string HandOver(const std::string& repo) {
    const std::string naive = repo + "-naive";
    EXPECT_EQ(Sh(dir_, "cp -a " + Quote(repo) + " " + Quote(naive)), 0);
    auto& h = Harness::Get();
    const std::string chown = "chown -R " + std::to_string(h.run_uid()) + ":" +
                              std::to_string(h.run_gid()) + " " + Quote(dir_);
    EXPECT_EQ(std::system(chown.c_str()), 0);
    return naive;
  }

  RunResult Apply(const std::string& id, const std::string& repo) {
    RunOptions o;
    o.extra_env = {"XDG_STATE_HOME=" + state_, "GIT_CONFIG_GLOBAL=/dev/null"};
    return Harness::Get().Run({"apply", id, "--repo", repo}, o);
  }

  std::string Status(const std::string& repo) {
    std::string out;
    Sh(repo, "git -c safe.directory='*' status --porcelain", &out);
    return out;
  }

  std::string dir_, state_, outside_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_env_;
};

TEST_F(ApplyHostileTest, AnIgnoredSymlinkOnThePatchsPathIsRefusedNothingWrittenOutside) {
  const std::string repo = MakeRepo("repo", {{"a.txt", "a\n"}}, "data\n");
  MakeRun("r1", repo, "mkdir data && echo x > data/x");
  fs::create_symlink(outside_, repo + "/data");
  const std::string naive = HandOver(repo);

  // Guard off: the old apply writes through the ignored link.
  ASSERT_EQ(ShAsUser(naive, kOldApply + Quote(RunDir("r1") + "/patch.diff")), 0);
  EXPECT_EQ(ReadFile(outside_ + "/x"), "x\n") << "the old apply did not write through the link";
  fs::remove(outside_ + "/x");

  const RunResult r = Apply("r1", repo);
  EXPECT_EQ(r.exit_code, kExitRefused) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("'data/x' goes through 'data', which is a symbolic link"));
  EXPECT_THAT(r.err, HasSubstr("Nothing was written"));
  EXPECT_FALSE(Exists(outside_ + "/x"));
  EXPECT_EQ(Status(repo), "");
}

TEST_F(ApplyHostileTest, AFileOnThePatchsPathIsRefusedBeforeAnythingIsWritten) {
  const std::string repo = MakeRepo("repo", {{"a.txt", "a\n"}}, "data\n");
  MakeRun("r2", repo, "echo more >> a.txt && mkdir data && echo x > data/x");
  WriteFile(repo + "/data", "ignored\n");
  const std::string naive = HandOver(repo);

  // Guard off: the old apply fails on data/x after rewriting a.txt.
  EXPECT_NE(ShAsUser(naive, kOldApply + Quote(RunDir("r2") + "/patch.diff")), 0);
  EXPECT_EQ(ReadFile(naive + "/a.txt"), "a\nmore\n") << "the old apply did not half-apply";

  const RunResult r = Apply("r2", repo);
  EXPECT_EQ(r.exit_code, kExitRefused) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("'data', which is a regular file, not a directory"));
  EXPECT_EQ(ReadFile(repo + "/a.txt"), "a\n");
  EXPECT_EQ(ReadFile(repo + "/data"), "ignored\n");
}

TEST_F(ApplyHostileTest, APatchTouchingDotGitConfigIsRefused) {
  if (std::system("patch --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "GNU patch is not installed (the naive operation of this twin)";
  }
  const std::string repo = MakeRepo("repo", {{"a.txt", "a\n"}});
  const std::string config = ReadFile(repo + "/.git/config");
  const auto lines = std::count(config.begin(), config.end(), '\n');
  const std::string patch =
      "diff --git a/.git/config b/.git/config\n--- a/.git/config\n"
      "+++ b/.git/config\n@@ -" +
      std::to_string(lines) + ",0 +" + std::to_string(lines + 1) +
      ",2 @@\n+[core]\n+\tfsmonitor = " + outside_ + "/planted\n";
  fs::create_directories(RunDir("r3"));
  ASSERT_EQ(Sh(dir_, "git clone -q --bare " + Quote(repo) + " " + Quote(RunDir("r3") + "/git")), 0);
  WriteRun("r3", repo, patch,
           json::array({{{"path", ".git/config"},
                         {"status", "M"},
                         {"old_mode", "100644"},
                         {"new_mode", "100644"}}}));
  const std::string naive = HandOver(repo);

  // Guard off: a patch tool without the .git check plants configuration a later git runs.
  ASSERT_EQ(ShAsUser(naive, "patch -p1 -s < " + Quote(RunDir("r3") + "/patch.diff")), 0);
  EXPECT_THAT(ReadFile(naive + "/.git/config"), HasSubstr("fsmonitor = "));

  const RunResult r = Apply("r3", repo);
  EXPECT_EQ(r.exit_code, kExitRefused) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("'.git/config'"));
  EXPECT_THAT(r.err, HasSubstr("never writes repository metadata"));
  EXPECT_EQ(ReadFile(repo + "/.git/config"), config);
}

TEST_F(ApplyHostileTest, TheRepositorysFilterDriverDoesNotRun) {
  const std::string marker = dir_ + "/marker";
  const std::string repo =
      MakeRepo("repo", {{"calc.py", "x = 1\n"}, {".gitattributes", "*.py filter=mark\n"}});
  MakeRun("r4", repo, "echo 'y = 2' >> calc.py");
  const std::string driver = "sh -c 'touch " + marker + "; cat'";
  ASSERT_EQ(Sh(repo, "git config filter.mark.clean " + Quote(driver) +
                         " && git config filter.mark.smudge " + Quote(driver)),
            0);
  const std::string naive = HandOver(repo);
  fs::remove(marker);

  // Guard off: the old apply runs the repository's filter driver.
  ASSERT_EQ(ShAsUser(naive, kOldApply + Quote(RunDir("r4") + "/patch.diff")), 0);
  EXPECT_TRUE(Exists(marker)) << "the old apply did not run the filter driver";
  fs::remove(marker);

  const RunResult r = Apply("r4", repo);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("applied run r4 (1 files)"));
  EXPECT_FALSE(Exists(marker)) << "cagent apply ran the repository's filter driver";
  EXPECT_EQ(ReadFile(repo + "/calc.py"), "x = 1\ny = 2\n");
}

}  // namespace
}  // namespace cagent::testing
