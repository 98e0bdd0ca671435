// LoadTasks on hostile task files: a task file is usually generated from a benchmark's data, so
// every line is checked, every bad line is named, and nothing in it reaches a directory name, a
// git command line or cagent run's flags unchecked.
#include "launcher/batch/tasks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace cagent::launcher::batch {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class TasksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cagent-tasks-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ + "/repos/calc");
    fs::create_directories(root_ + "/repos/other");
    Write(root_ + "/task.md", "Fix add.\n");
    Write(root_ + "/session.jsonl", "{}\n");
    Write(root_ + "/strict.cagent", "profile strict {}\n");
  }
  void TearDown() override { fs::remove_all(root_); }

  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }

  // Writes `text` as the task file and loads it.
  Result<std::vector<BatchTask>> Load(const std::string& text) {
    Write(root_ + "/tasks.jsonl", text);
    return LoadTasks(root_ + "/tasks.jsonl");
  }

  // The error text of loading `text` (fails the test if it loads).
  std::string ErrorOf(const std::string& text) {
    auto r = Load(text);
    EXPECT_FALSE(r.ok()) << "loaded: " << text;
    if (r.ok()) return {};
    EXPECT_EQ(r.error().code, Error::Code::kInvalidInput);
    return r.error().Message();
  }

  // A valid task line with `extra` spliced in before the closing brace.
  static std::string Line(const std::string& id, const std::string& extra = {}) {
    return R"({"id": ")" + id +
           R"(", "repo": "repos/calc", "task": "Fix add.", "profile": "fix-add")" + extra + "}\n";
  }

  std::string root_;
};

TEST_F(TasksTest, LoadsEveryFieldAndResolvesRelativePathsAgainstTheFile) {
  auto r = Load(
      R"({"id": "a-1", "repo": "repos/calc", "commit": "main", "task_file": "task.md", )"
      R"("profile": "strict.cagent", "model": "replay:session.jsonl", )"
      R"("budgets": {"max_turns": 20, "max_tool_calls": 40, "max_tokens": 2000, "wall_time": "20m"}})"
      "\n\n" +
      Line("b.2"));
  ASSERT_TRUE(r.ok()) << r.error().Message();
  ASSERT_EQ(r->size(), 2U);
  const BatchTask& a = (*r)[0];
  EXPECT_EQ(a.line, 1U);
  EXPECT_EQ(a.index, 0U);
  EXPECT_EQ(a.id, "a-1");
  EXPECT_EQ(a.repo, root_ + "/repos/calc");
  EXPECT_FALSE(a.repo_is_url);
  EXPECT_EQ(a.commit, "main");
  EXPECT_EQ(a.task_file, root_ + "/task.md");
  EXPECT_EQ(a.task_text, "");
  EXPECT_EQ(a.profile, root_ + "/strict.cagent");
  EXPECT_EQ(a.model, "replay:" + root_ + "/session.jsonl");
  EXPECT_EQ(a.budgets.max_turns, 20U);
  EXPECT_EQ(a.budgets.max_tool_calls, 40U);
  EXPECT_EQ(a.budgets.max_tokens, 2000U);
  EXPECT_EQ(a.budgets.wall_time, "20m");
  const BatchTask& b = (*r)[1];
  EXPECT_EQ(b.line, 3U);  // the blank line is skipped but counted
  EXPECT_EQ(b.index, 1U);
  EXPECT_EQ(b.task_text, "Fix add.");
  EXPECT_EQ(b.profile, "fix-add");  // a name stays a name
  EXPECT_EQ(b.model, "");
  EXPECT_FALSE(b.budgets.max_turns.has_value());
}

TEST_F(TasksTest, EveryBadLineIsNamedWithItsNumber) {
  const std::string err = ErrorOf(Line("ok") + "not json\n" + Line("ok2") +
                                  R"({"id": "x", "repo": "repos/calc", "profile": "p"})"
                                  "\n" +
                                  "[1, 2]\n" + "{\"id\":" + std::string(100000, '[') +
                                  std::string(100000, ']') + "}\n");
  const std::string file = root_ + "/tasks.jsonl";
  EXPECT_THAT(err, HasSubstr(file + ":6: nested deeper than 16 levels"));
  EXPECT_THAT(err, HasSubstr(file + ":2: not valid JSON"));
  EXPECT_THAT(err, HasSubstr(file + ":4: missing the task"));
  EXPECT_THAT(err, HasSubstr(file + ":5: a task is a JSON object"));
  EXPECT_THAT(err, Not(HasSubstr(":1:")));
  EXPECT_THAT(err, Not(HasSubstr(":3:")));
}

TEST_F(TasksTest, UnknownFieldsAreRefusedSoNothingCanWidenTheProfile) {
  // Fields that would widen a run if anything passed them on: none exist in the format.
  for (const char* field : {R"("allow_host": ["evil.example"])", R"("approve": "always")",
                            R"("pre_approve": ["exec *"])", R"("allow_dirty": true)",
                            R"("trust_repo_profile": true)", R"("Id": "shadow")"}) {
    EXPECT_THAT(ErrorOf(Line("t", std::string(", ") + field)), HasSubstr("unknown field")) << field;
  }
  EXPECT_THAT(ErrorOf(Line("t", R"(, "budgets": {"max_memory": 1})")),
              HasSubstr("unknown budget \"max_memory\""));
}

TEST_F(TasksTest, AKeyGivenTwiceIsRefusedNotResolvedToEitherValue) {
  EXPECT_THAT(ErrorOf(Line("t", R"(, "profile": "wide")")),
              HasSubstr("field \"profile\" is given twice"));
  EXPECT_THAT(ErrorOf(Line("t", R"(, "budgets": {"max_turns": 1, "max_turns": 999})")),
              HasSubstr("field \"max_turns\" is given twice"));
}

TEST_F(TasksTest, IdsAreSafeAsOneDirectoryName) {
  for (const char* id : {"../escape", "a/b", "..", ".", ".hidden", "-rf", "", "a b", "a\\u0000b",
                         "a..b", "\\u00e9t\\u00e9", "a\\u001b[2Jb"}) {
    const std::string err = ErrorOf(Line(id));
    EXPECT_THAT(err, HasSubstr("\"id\"")) << id;
    EXPECT_THAT(err, Not(HasSubstr("\x1b"))) << "the id is echoed escaped";
  }
  EXPECT_THAT(ErrorOf(Line(std::string(65, 'a'))), HasSubstr("longer than 64"));
  EXPECT_TRUE(Load(Line(std::string(64, 'a'))).ok());
  EXPECT_THAT(ErrorOf(Line("summary.jsonl")), HasSubstr("a file batch writes"));
  EXPECT_THAT(ErrorOf(R"({"id": 7, "repo": "repos/calc", "task": "x", "profile": "p"})"),
              HasSubstr("\"id\" must be a string"));
}

TEST_F(TasksTest, DuplicateIdsNameTheFirstLineAndIgnoreCase) {
  const std::string err = ErrorOf(Line("t1") + Line("t2") + Line("T1"));
  EXPECT_THAT(err, HasSubstr(":3: duplicate id \"T1\" (first on line 1"));
}

TEST_F(TasksTest, ExactlyOneOfTaskAndTaskFile) {
  EXPECT_THAT(ErrorOf(Line("t", R"(, "task_file": "task.md")")),
              HasSubstr("\"task\" or \"task_file\", not both"));
  EXPECT_THAT(ErrorOf(R"({"id": "t", "repo": "repos/calc", "profile": "p"})"),
              HasSubstr("missing the task"));
  EXPECT_THAT(ErrorOf(R"({"id": "t", "repo": "repos/calc", "profile": "p", "task": "  "})"),
              HasSubstr("\"task\" is empty"));
  EXPECT_THAT(
      ErrorOf(R"({"id": "t", "repo": "repos/calc", "profile": "p", "task_file": "nope.md"})"),
      HasSubstr("task \"t\": \"task_file\" \"nope.md\" does not exist"));
  EXPECT_THAT(ErrorOf(R"({"id": "t", "repo": "repos/calc", "profile": "p", "task_file": "repos"})"),
              HasSubstr("\"task_file\" \"repos\" is not a readable file"));
}

TEST_F(TasksTest, RepositoryPathsMustExistAndUrlsAreRecognised) {
  EXPECT_THAT(ErrorOf(R"({"id": "t", "repo": "repos/missing", "task": "x", "profile": "p"})"),
              HasSubstr("does not exist"));
  EXPECT_THAT(ErrorOf(R"({"id": "t", "repo": "task.md", "task": "x", "profile": "p"})"),
              HasSubstr("is not a directory"));
  auto r =
      Load(R"({"id": "u1", "repo": "https://example.com/calc.git", "task": "x", "profile": "p"})"
           "\n"
           R"({"id": "u2", "repo": "git@example.com:org/calc.git", "task": "x", "profile": "p"})"
           "\n"
           R"({"id": "u3", "repo": "file://)" +
           root_ +
           R"(/repos/calc", "task": "x", "profile": "p"})"
           "\n"
           R"({"id": "p1", "repo": "./repos/../repos/other", "task": "x", "profile": "p"})"
           "\n");
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_TRUE((*r)[0].repo_is_url);
  EXPECT_EQ((*r)[0].repo, "https://example.com/calc.git");
  EXPECT_TRUE((*r)[1].repo_is_url);
  EXPECT_TRUE((*r)[2].repo_is_url);
  EXPECT_EQ((*r)[2].repo, "file://" + root_ + "/repos/calc");
  EXPECT_FALSE((*r)[3].repo_is_url);
  EXPECT_EQ((*r)[3].repo, root_ + "/repos/other");
}

TEST_F(TasksTest, TransportsThatRunProgramsAreRefused) {
  // git's remote-helper syntax runs a command ("ext::") or reads a descriptor ("fd::"); an
  // unknown scheme is handed to a git-remote-<scheme> program.
  EXPECT_THAT(ErrorOf(R"({"id": "t", "repo": "ext::sh -c touch% /tmp/pwned", "task": "x", )"
                      R"("profile": "p"})"),
              HasSubstr("remote-helper syntax"));
  EXPECT_THAT(ErrorOf(R"({"id": "t", "repo": "fd::3", "task": "x", "profile": "p"})"),
              HasSubstr("remote-helper syntax"));
  EXPECT_THAT(ErrorOf(R"({"id": "t", "repo": "evil://host/x", "task": "x", "profile": "p"})"),
              HasSubstr("scheme \"evil\" is not one batch clones"));
  EXPECT_THAT(
      ErrorOf(R"({"id": "t", "repo": "--upload-pack=touch /tmp/x", "task": "x", "profile": "p"})"),
      HasSubstr("must not start with '-'"));
}

TEST_F(TasksTest, NothingStartsWithADashWhereItBecomesAnArgument) {
  EXPECT_THAT(ErrorOf(Line("t", R"(, "commit": "--output=/etc/passwd")")),
              HasSubstr("\"commit\" must not start with '-'"));
  EXPECT_THAT(ErrorOf(Line("t", R"(, "commit": "main branch")")), HasSubstr("\"commit\" holds"));
  EXPECT_THAT(ErrorOf(R"({"id": "t", "repo": "repos/calc", "task": "x", "profile": "--trust"})"),
              HasSubstr("\"profile\" must not start with '-'"));
  EXPECT_THAT(ErrorOf(Line("t", R"(, "model": "--approve=always")")),
              HasSubstr("\"model\" must not start with '-'"));
}

TEST_F(TasksTest, BudgetsAreTypedAndPositive) {
  EXPECT_THAT(ErrorOf(Line("t", R"(, "budgets": {"max_turns": -1})")),
              HasSubstr("must be a positive integer"));
  EXPECT_THAT(ErrorOf(Line("t", R"(, "budgets": {"max_turns": 0})")),
              HasSubstr("must be a positive integer"));
  EXPECT_THAT(ErrorOf(Line("t", R"(, "budgets": {"max_turns": "20"})")),
              HasSubstr("must be a positive integer"));
  EXPECT_THAT(ErrorOf(Line("t", R"(, "budgets": {"max_turns": 1.5})")),
              HasSubstr("must be a positive integer"));
  EXPECT_THAT(ErrorOf(Line("t", R"(, "budgets": {"wall_time": "forever"})")),
              HasSubstr("not a duration"));
  EXPECT_THAT(ErrorOf(Line("t", R"(, "budgets": [1])")), HasSubstr("must be an object"));
}

TEST_F(TasksTest, ReplayAndProfileFilesMustExist) {
  EXPECT_THAT(ErrorOf(Line("t", R"(, "model": "replay:missing.jsonl")")), HasSubstr("replay file"));
  EXPECT_THAT(
      ErrorOf(R"({"id": "t", "repo": "repos/calc", "task": "x", "profile": "nope.cagent"})"),
      HasSubstr("\"profile\""));
}

// The attack: a task file from someone else names the caller's private files; its task_file is
// sent to the model provider, a replay session or profile file lands in the run's record, a
// repository becomes the agent's workspace. Each local path is opened beneath the task root by
// the kernel, so "..", an absolute path elsewhere and a symlink that leads out are refused alike,
// naming the task and the path. Twin: with TaskPaths::trust (--trust-task-paths), the very same
// lines load and resolve to the outside file, which is what a run would then have read.
class TaskPathsTest : public TasksTest {
 protected:
  void SetUp() override {
    TasksTest::SetUp();
    char tmpl[] = "/tmp/cagent-tasks-home-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    fs::create_directories(home_ + "/.ssh");
    fs::create_directories(home_ + "/private-repo");
    Write(home_ + "/.ssh/id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\n");
    Write(home_ + "/.ssh/key.cagent", "profile key {}\n");
    // Symlinks planted in the task file's directory, pointing out of it.
    fs::create_symlink(home_ + "/.ssh/id_rsa", root_ + "/innocent.md");
    fs::create_symlink(home_ + "/.ssh", root_ + "/notes");
    fs::create_symlink(home_ + "/private-repo", root_ + "/repos/vendored");
    // A symlink that stays inside is an ordinary file of the task.
    fs::create_symlink("task.md", root_ + "/alias.md");
  }
  void TearDown() override {
    fs::remove_all(home_);
    TasksTest::TearDown();
  }

  // The escapes: (field, the task line, the path as written, where it really leads).
  struct Escape {
    std::string field;
    std::string line;
    std::string raw;
    std::string target;
  };
  std::vector<Escape> Escapes() const {
    const std::string key = home_ + "/.ssh/id_rsa";
    const std::string dots = "../" + fs::path(home_).filename().string() + "/.ssh/id_rsa";
    const std::string base = R"({"id": "t", "repo": "repos/calc", "profile": "p", )";
    auto task_file = [&](const std::string& raw) {
      return Escape{"task_file", base + R"("task_file": ")" + raw + R"("})", raw, key};
    };
    auto replay = [&](const std::string& raw) {
      return Escape{"replay file", base + R"("task": "x", "model": "replay:)" + raw + R"("})", raw,
                    key};
    };
    auto profile = [&](const std::string& raw) {
      return Escape{
          "profile",
          R"({"id": "t", "repo": "repos/calc", "task": "x", "profile": ")" + raw + R"("})", raw,
          home_ + "/.ssh/key.cagent"};
    };
    auto repo = [&](const std::string& raw) {
      return Escape{"repo", R"({"id": "t", "repo": ")" + raw + R"(", "task": "x", "profile": "p"})",
                    raw, home_ + "/private-repo"};
    };
    return {
        task_file(dots),
        task_file(key),
        task_file("innocent.md"),
        task_file("notes/id_rsa"),
        task_file("repos/../../" + fs::path(home_).filename().string() + "/.ssh/id_rsa"),
        replay(dots),
        replay(key),
        replay("innocent.md"),
        profile("../" + fs::path(home_).filename().string() + "/.ssh/key.cagent"),
        profile(home_ + "/.ssh/key.cagent"),
        profile("notes/key.cagent"),
        repo("../" + fs::path(home_).filename().string() + "/private-repo"),
        repo(home_ + "/private-repo"),
        repo("repos/vendored"),
        repo("file://" + home_ + "/private-repo"),
        repo("file://repos/vendored"),
    };
  }

  std::string home_;
};

TEST_F(TaskPathsTest, PathsLeadingOutOfTheTaskFilesDirectoryAreRefused) {
  for (const Escape& e : Escapes()) {
    SCOPED_TRACE(e.line);
    const std::string error = ErrorOf(e.line + "\n");
    EXPECT_THAT(error, HasSubstr("tasks.jsonl:1: task \"t\": "));
    EXPECT_THAT(error, HasSubstr(e.field));
    EXPECT_THAT(error, HasSubstr(e.field == "repo" && e.raw.starts_with("file://") ? e.raw.substr(7)
                                                                                   : e.raw));
    EXPECT_THAT(error, HasSubstr("leads outside the task root " + root_));
    EXPECT_THAT(error, HasSubstr("--trust-task-paths"));
  }
}

TEST_F(TaskPathsTest, TwinWithTrustTheSameLinesReachTheCallersFiles) {
  Write(root_ + "/tasks.jsonl", "");
  for (const Escape& e : Escapes()) {
    SCOPED_TRACE(e.line);
    // A relative file:// URL means whatever git's working directory makes of it: no file to
    // compare with here.
    if (e.raw.starts_with("file://") && e.raw[7] != '/') continue;
    Write(root_ + "/tasks.jsonl", e.line + "\n");
    auto r = LoadTasks(root_ + "/tasks.jsonl", TaskPaths{.root = "", .trust = true});
    ASSERT_TRUE(r.ok()) << r.error().Message();
    const BatchTask& t = (*r)[0];
    EXPECT_FALSE(t.paths_confined);
    // What the run would read: the caller's file, by whichever road the line took.
    std::string path = t.task_file;
    if (e.field == "replay file") path = t.model.substr(7);
    if (e.field == "profile") path = t.profile;
    if (e.field == "repo") path = t.repo.starts_with("file://") ? t.repo.substr(7) : t.repo;
    EXPECT_EQ(fs::canonical(path), fs::path(e.target));
  }
}

TEST_F(TaskPathsTest, ASymlinkThatStaysInsideIsFollowedAndRecordedLinkFree) {
  auto r = Load(R"({"id": "t", "repo": "repos/calc", "profile": "p", "task_file": "alias.md"})"
                "\n");
  ASSERT_TRUE(r.ok()) << r.error().Message();
  EXPECT_EQ((*r)[0].task_file, root_ + "/task.md");
  EXPECT_TRUE((*r)[0].paths_confined);
  // An absolute link is refused even when it points inside: RESOLVE_BENEATH's rule.
  fs::create_symlink(root_ + "/task.md", root_ + "/absolute.md");
  EXPECT_THAT(
      ErrorOf(R"({"id": "t", "repo": "repos/calc", "profile": "p", "task_file": "absolute.md"})"
              "\n"),
      HasSubstr("leads outside the task root"));
}

TEST_F(TaskPathsTest, TheOperatorCanNameAWiderTaskRoot) {
  // tasks/tasks.jsonl names ../shared/task.md and an absolute path under the wider root.
  fs::create_directories(root_ + "/tasks");
  fs::create_directories(root_ + "/shared");
  Write(root_ + "/shared/task.md", "Shared.\n");
  const std::string file = root_ + "/tasks/tasks.jsonl";
  Write(file, R"({"id": "a", "repo": "../repos/calc", "profile": "p", "task_file": )"
              R"("../shared/task.md"})"
              "\n"
              R"({"id": "b", "repo": ")" +
                  root_ + R"(/repos/calc", "profile": "p", "task": "x"})" + "\n");
  auto narrow = LoadTasks(file);
  ASSERT_FALSE(narrow.ok());
  EXPECT_THAT(narrow.error().Message(),
              HasSubstr("task \"a\": \"repo\" \"../repos/calc\" leads outside the task root " +
                        root_ + "/tasks"));
  EXPECT_THAT(narrow.error().Message(), HasSubstr("tasks.jsonl:2: task \"b\": \"repo\""));
  auto wide = LoadTasks(file, TaskPaths{.root = root_, .trust = false});
  ASSERT_TRUE(wide.ok()) << wide.error().Message();
  EXPECT_EQ((*wide)[0].task_file, root_ + "/shared/task.md");
  EXPECT_EQ((*wide)[0].repo, root_ + "/repos/calc");
  EXPECT_EQ((*wide)[1].repo, root_ + "/repos/calc");
  // The wider root still ends somewhere.
  Write(file, R"({"id": "c", "repo": "../repos/calc", "profile": "p", "task_file": ")" + home_ +
                  R"(/.ssh/id_rsa"})" + "\n");
  auto out = LoadTasks(file, TaskPaths{.root = root_, .trust = false});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.error().Message(), HasSubstr("leads outside the task root " + root_));
  // A task root that is not a directory is the operator's mistake, said once.
  auto bad = LoadTasks(file, TaskPaths{.root = root_ + "/nope", .trust = false});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().Message(), HasSubstr("task root " + root_ + "/nope"));
}

TEST_F(TasksTest, EmptyFilesAndNonFilesAreErrors) {
  EXPECT_THAT(ErrorOf("\n  \n"), HasSubstr("no tasks"));
  auto dir = LoadTasks(root_);
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(dir.error().Message(), HasSubstr("not a regular file"));
  auto missing = LoadTasks(root_ + "/nope.jsonl");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Error::Code::kInvalidInput);
}

TEST_F(TasksTest, CrlfLinesAndManyBadLinesAreBounded) {
  auto r =
      Load("{\"id\": \"t\", \"repo\": \"repos/calc\", \"task\": \"x\", \"profile\": \"p\"}\r\n");
  ASSERT_TRUE(r.ok()) << r.error().Message();
  std::string many;
  for (int i = 0; i < 80; ++i) many += "x\n";
  const std::string err = ErrorOf(many);
  EXPECT_THAT(err, HasSubstr(":50: not valid JSON"));
  EXPECT_THAT(err, Not(HasSubstr(":51:")));
  EXPECT_THAT(err, HasSubstr("... and 30 more"));
}

}  // namespace
}  // namespace cagent::launcher::batch
