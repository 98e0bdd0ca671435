// list_dir, glob and grep, each in a fresh temporary workspace.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "agent/toolbox.h"
#include "tests/agent/tool_test_util.h"

namespace cagent::agent {
namespace {

using testing::Call;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::OpenToolbox;
using testing::PrepareFailure;
using testing::TempWorkspace;

PathFilter DenyEnv() {
  return [](std::string_view path, PathAccess) -> std::optional<PathDenial> {
    if (path == ".env" || path.ends_with("/.env")) return PathDenial{"deny **/.env", ""};
    if (path == "secrets" || path.starts_with("secrets/")) return PathDenial{"deny secrets/**", ""};
    return std::nullopt;
  };
}

// ---- list_dir ----

TEST(ListDir, SortedWithDirectoriesAndSymlinksMarked) {
  TempWorkspace ws;
  ws.Write("b.txt", "b");
  ws.Write("a.txt", "a");
  ws.Mkdir("src");
  ws.Symlink("a.txt", "link");
  auto box = OpenToolbox(ws);
  auto out = Call(box, "list_dir", nlohmann::json::object());
  ASSERT_TRUE(out.ok) << out.Render();
  EXPECT_EQ(out.output, "a.txt\nb.txt\nlink -> a.txt\nsrc/\n");
  EXPECT_EQ(out.message, "`.`: 4 entries");
  auto empty = Call(box, "list_dir", {{"path", "src"}});
  EXPECT_EQ(empty.output, "(empty directory)\n");
  auto file = PrepareFailure(box, "list_dir", {{"path", "a.txt"}});
  EXPECT_EQ(file.code, "not_a_directory");
  EXPECT_THAT(file.hint, HasSubstr("read_file"));
}

TEST(ListDir, HostileNamesCannotForgeLines) {
  TempWorkspace ws;
  ws.Write("evil\nfake.txt", "x");
  auto box = OpenToolbox(ws);
  auto out = Call(box, "list_dir", {{"path", "."}});
  EXPECT_EQ(out.output, "evil\\nfake.txt\n");
}

TEST(ListDir, CapsEntriesAndSkipsDeniedOnesCountingThem) {
  TempWorkspace ws;
  for (int i = 0; i < 5; ++i) ws.Write("f" + std::to_string(i), "x");
  ws.Write(".env", "TOKEN=1");
  ws.Write("secrets/key", "k");
  ToolLimits limits;
  limits.list_max_entries = 3;
  auto box = OpenToolbox(ws, limits, DenyEnv());
  auto out = Call(box, "list_dir", {{"path", "."}});
  ASSERT_TRUE(out.ok);
  EXPECT_EQ(out.output, "f0\nf1\nf2\n");
  EXPECT_THAT(out.message, HasSubstr("5 entries, first 3 shown (2 more not shown"));
  EXPECT_THAT(out.message,
              HasSubstr("2 entries skipped: denied by policy (`deny **/.env`, `deny secrets/**`)"));
  EXPECT_THAT(out.Render(), Not(HasSubstr("TOKEN")));
  auto denied_dir = PrepareFailure(box, "list_dir", {{"path", "secrets"}});
  EXPECT_EQ(denied_dir.code, "denied");
}

// ---- glob ----

TEST(Glob, DoubleStarSortedAndGitSkipped) {
  TempWorkspace ws;
  ws.Write("src/a.py", "");
  ws.Write("src/deep/b.py", "");
  ws.Write("top.py", "");
  ws.Write("src/c.txt", "");
  ws.Write(".git/hooks/x.py", "");
  auto box = OpenToolbox(ws);
  auto out = Call(box, "glob", {{"pattern", "**/*.py"}});
  ASSERT_TRUE(out.ok) << out.Render();
  EXPECT_EQ(out.output, "src/a.py\nsrc/deep/b.py\ntop.py\n");
  EXPECT_THAT(out.message, HasSubstr("3 matches for `**/*.py`"));
  EXPECT_THAT(out.message, HasSubstr(".git/ was not searched"));
  auto under = Call(box, "glob", {{"pattern", "*.py"}, {"path", "src"}});
  EXPECT_EQ(under.output, "src/a.py\n");
  auto none = Call(box, "glob", {{"pattern", "*.rs"}});
  EXPECT_TRUE(none.ok);
  EXPECT_THAT(none.message, HasSubstr("no files match"));
}

TEST(Glob, CapDeniedAndInvalidPatterns) {
  TempWorkspace ws;
  for (int i = 0; i < 5; ++i) ws.Write("d/f" + std::to_string(i) + ".txt", "");
  ws.Write("d/.env", "");
  ws.Write("secrets/a.txt", "");
  ToolLimits limits;
  limits.glob_max_results = 2;
  auto box = OpenToolbox(ws, limits, DenyEnv());
  auto out = Call(box, "glob", {{"pattern", "**/*"}});
  ASSERT_TRUE(out.ok);
  EXPECT_THAT(out.message, HasSubstr("6 matches"));  // d/ and d/f0..4
  EXPECT_THAT(out.message, HasSubstr("first 2 shown"));
  EXPECT_THAT(out.message, HasSubstr("2 entries skipped: denied by policy"));
  EXPECT_THAT(out.output, Not(HasSubstr("secrets")));
  auto dots = PrepareFailure(box, "glob", {{"pattern", "../**"}});
  EXPECT_EQ(dots.code, "bad_arguments");
  auto abs = PrepareFailure(box, "glob", {{"pattern", "/etc/*"}});
  EXPECT_EQ(abs.code, "bad_arguments");
  auto outside = PrepareFailure(box, "glob", {{"pattern", "*"}, {"path", ".."}});
  EXPECT_EQ(outside.code, "outside_workspace");
}

TEST(Glob, SymlinkedDirectoriesAreListedNotFollowed) {
  TempWorkspace ws;
  testing::WriteAbsolute(ws.outside() + "/secret.py", "");
  ws.Symlink(ws.outside(), "out");
  ws.Symlink(".", "loop");
  auto box = OpenToolbox(ws);
  auto out = Call(box, "glob", {{"pattern", "**"}});
  ASSERT_TRUE(out.ok);
  EXPECT_EQ(out.output, "loop\nout\n");
}

// ---- grep ----

TEST(Grep, PrintsPathLineAndText) {
  TempWorkspace ws;
  ws.Write("a.py", "import os\ndef main():\n    os.exit(0)\n");
  ws.Write("sub/b.py", "def helper():\n    pass\n");
  ws.Write("c.txt", "def not python\n");
  auto box = OpenToolbox(ws);
  auto out = Call(box, "grep", {{"pattern", "def \\w+\\("}});
  ASSERT_TRUE(out.ok) << out.Render();
  EXPECT_EQ(out.output, "a.py:2: def main():\nsub/b.py:1: def helper():\n");
  EXPECT_THAT(out.message, HasSubstr("2 matches in 2 files"));
  auto inc = Call(box, "grep", {{"pattern", "def"}, {"include", "*.txt"}});
  EXPECT_EQ(inc.output, "c.txt:1: def not python\n");
  auto inc_path = Call(box, "grep", {{"pattern", "def"}, {"include", "sub/**/*.py"}});
  EXPECT_EQ(inc_path.output, "sub/b.py:1: def helper():\n");
  auto icase = Call(box, "grep", {{"pattern", "IMPORT"}, {"ignore_case", true}});
  EXPECT_EQ(icase.output, "a.py:1: import os\n");
  auto one_file = Call(box, "grep", {{"pattern", "os"}, {"path", "a.py"}});
  EXPECT_EQ(one_file.output, "a.py:1: import os\na.py:3:     os.exit(0)\n");
  auto none = Call(box, "grep", {{"pattern", "zzz"}});
  EXPECT_TRUE(none.ok);
  EXPECT_THAT(none.message, HasSubstr("no matches"));
}

TEST(Grep, InvalidRegexIsBadArguments) {
  TempWorkspace ws;
  auto box = OpenToolbox(ws);
  auto out = PrepareFailure(box, "grep", {{"pattern", "foo("}});
  EXPECT_EQ(out.code, "bad_arguments");
  EXPECT_THAT(out.message, HasSubstr("invalid regular expression /foo(/"));
  EXPECT_THAT(out.message, HasSubstr("unbalanced ( )"));
  auto backref = PrepareFailure(box, "grep", {{"pattern", "(a)\\1"}});
  EXPECT_EQ(backref.code, "bad_arguments");
}

TEST(Grep, SkipsBinaryLargeDeniedAndLongLinesAndSaysSo) {
  TempWorkspace ws;
  ws.Write("bin.dat", std::string("needle\0\0", 8));
  ws.Write("big.txt", std::string(7000, 'x') + "\nneedle\n");
  ws.Write("long.txt", std::string(5000, 'y') + "needle\nneedle short\n");
  ws.Write(".env", "needle=secret\n");
  ws.Write(".git/config", "needle\n");
  ws.Write("ok.txt", "needle\n");
  ToolLimits limits;
  limits.grep_max_file_bytes = 6000;
  auto box = OpenToolbox(ws, limits, DenyEnv());
  auto out = Call(box, "grep", {{"pattern", "needle"}});
  ASSERT_TRUE(out.ok) << out.Render();
  EXPECT_EQ(out.output, "long.txt:2: needle short\nok.txt:1: needle\n");
  EXPECT_THAT(out.message, HasSubstr("1 binary file(s) skipped"));
  EXPECT_THAT(out.message, HasSubstr("1 file(s) above 5.9 KiB skipped"));
  EXPECT_THAT(out.message, HasSubstr("1 line(s) longer than 4096 bytes not searched"));
  EXPECT_THAT(out.message, HasSubstr("1 entry skipped: denied by policy (`deny **/.env`)"));
  EXPECT_THAT(out.message, HasSubstr(".git/ was not searched"));
  EXPECT_THAT(out.Render(), Not(HasSubstr("secret")));
}

TEST(Grep, StopsAtTheMatchCap) {
  TempWorkspace ws;
  std::string many;
  for (int i = 0; i < 50; ++i) many += "hit\n";
  ws.Write("a.txt", many);
  ToolLimits limits;
  limits.grep_max_matches = 10;
  auto box = OpenToolbox(ws, limits);
  auto out = Call(box, "grep", {{"pattern", "hit"}});
  ASSERT_TRUE(out.ok);
  EXPECT_THAT(out.message, HasSubstr("10 matches"));
  EXPECT_THAT(out.message, HasSubstr("stopped after 10 matches"));
}

TEST(Grep, StopsAtTheScanCap) {
  TempWorkspace ws;
  for (int i = 0; i < 4; ++i)
    ws.Write("f" + std::to_string(i) + ".txt", std::string(400, 'a') + "\n");
  ToolLimits limits;
  limits.grep_max_scan_bytes = 1000;
  auto box = OpenToolbox(ws, limits);
  auto out = Call(box, "grep", {{"pattern", "b"}});
  ASSERT_TRUE(out.ok);
  EXPECT_THAT(out.message, HasSubstr("2 files searched"));
  EXPECT_THAT(out.message, HasSubstr("stopped after scanning 802 bytes"));
}

TEST(Grep, NestedQuantifiersDoNotBacktrackExponentially) {
  // With a backtracking matcher (a+)+b on 4000 a's would not finish in the test's lifetime; the
  // breadth-first mode makes it linear in the line length. (No timing assert: finishing is it.)
  TempWorkspace ws;
  ws.Write("a.txt", std::string(4000, 'a') + "\n");
  auto box = OpenToolbox(ws);
  auto out = Call(box, "grep", {{"pattern", "(a+)+b"}});
  EXPECT_TRUE(out.ok) << out.Render();
  EXPECT_THAT(out.message, HasSubstr("no matches"));
}

}  // namespace
}  // namespace cagent::agent
