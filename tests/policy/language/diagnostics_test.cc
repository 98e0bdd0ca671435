// Tests for policy/language/source.h and policy/language/diagnostics.h: line lookup, sorting and
// the exact rendered text of a diagnostic (source line and caret line included).
#include "policy/language/diagnostics.h"

#include <gtest/gtest.h>

#include <string>

#include "policy/language/source.h"

namespace cagent::policy {
namespace {

Location At(std::uint32_t file, std::uint32_t line, std::uint32_t col) {
  return Location{file, line, col};
}

Diagnostic Err(Location loc, std::uint32_t length, std::string message, std::string hint = {}) {
  return Diagnostic{Severity::kError, loc, length, std::move(message), std::move(hint)};
}

TEST(SourceFileTest, LineReturnsTextWithoutNewline) {
  const SourceFile f{"x", "first\nsecond\r\n\nlast"};
  EXPECT_EQ(f.Line(1), "first");
  EXPECT_EQ(f.Line(2), "second");  // the '\r' of "\r\n" is not shown
  EXPECT_EQ(f.Line(3), "");
  EXPECT_EQ(f.Line(4), "last");
  EXPECT_EQ(f.Line(5), "");
  EXPECT_EQ(f.Line(0), "");
  EXPECT_EQ(f.Line(UINT32_MAX), "");
}

TEST(SourceFileTest, EmptyTextHasNoLines) {
  const SourceFile f{"x", ""};
  EXPECT_EQ(f.Line(1), "");
}

TEST(SourceSetTest, AddReturnsStableIndices) {
  SourceSet s;
  EXPECT_EQ(s.Add("a.cagent", "x"), 0u);
  EXPECT_EQ(s.Add("b.cagent", "y"), 1u);
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s.file(1).display_name, "b.cagent");
  EXPECT_EQ(s.file(0).text, "x");
}

TEST(SourceSetTest, FormatsLocations) {
  SourceSet s;
  s.Add("profiles/x.cagent", "");
  EXPECT_EQ(s.Format(At(0, 3, 9)), "profiles/x.cagent:3:9");
  EXPECT_EQ(s.Format(Location{}), "<none>");
  EXPECT_EQ(s.Format(At(7, 1, 1)), "<none>");  // no such file
}

TEST(DiagnosticsTest, CountsErrorsNotWarnings) {
  Diagnostics d;
  EXPECT_FALSE(d.HasErrors());
  d.Warning(At(0, 1, 1), 1, "w");
  EXPECT_FALSE(d.HasErrors());
  EXPECT_EQ(d.ErrorCount(), 0u);
  d.Error(At(0, 2, 1), 3, "e", "h");
  d.Add(Diagnostic{Severity::kNote, At(0, 1, 1), 1, "n", {}});
  d.Error(Location{}, 1, "e2");
  EXPECT_TRUE(d.HasErrors());
  EXPECT_EQ(d.ErrorCount(), 2u);
  ASSERT_EQ(d.list().size(), 4u);
  EXPECT_EQ(d.list()[0].severity, Severity::kWarning);
  EXPECT_EQ(d.list()[1].length, 3u);
  EXPECT_EQ(d.list()[1].hint, "h");
}

TEST(DiagnosticsTest, SortedOrdersByFileLineColStably) {
  Diagnostics d;
  d.Error(At(1, 1, 1), 1, "f1");
  d.Error(At(0, 2, 5), 1, "l2c5");
  d.Error(At(0, 2, 1), 1, "l2c1-first");
  d.Error(Location{}, 1, "nofile");
  d.Error(At(0, 1, 9), 1, "l1");
  d.Error(At(0, 2, 1), 1, "l2c1-second");
  std::string order;
  for (const Diagnostic& x : d.Sorted()) order += x.message + " ";
  EXPECT_EQ(order, "nofile l1 l2c1-first l2c1-second l2c5 f1 ");
  EXPECT_EQ(d.list()[0].message, "f1");  // list() keeps report order
}

class RenderTest : public ::testing::Test {
 protected:
  RenderTest() {
    file_ = sources_.Add("profiles/x.cagent",
                         "limits {\n"
                         "        wal-time 10m\n"
                         "\tmemory\t4G\n"
                         "path \"caf\xc3\xa9\" x\n"
                         "bad\x1b[31m\r\n"
                         "}");
  }
  SourceSet sources_;
  std::uint32_t file_ = 0;
};

TEST_F(RenderTest, HeaderExample) {
  EXPECT_EQ(Render(sources_, Err(At(file_, 2, 9), 8, "unknown key 'wal-time' in limits",
                                 "did you mean 'wall-time'?")),
            "profiles/x.cagent:2:9: error: unknown key 'wal-time' in limits\n"
            "          wal-time 10m\n"
            "          ^~~~~~~~\n"
            "  hint: did you mean 'wall-time'?\n");
}

TEST_F(RenderTest, NoHintLineWithoutHint) {
  EXPECT_EQ(Render(sources_, Err(At(file_, 1, 1), 6, "bad key")),
            "profiles/x.cagent:1:1: error: bad key\n"
            "  limits {\n"
            "  ^~~~~~\n");
}

TEST_F(RenderTest, SeverityWords) {
  Diagnostic w = Err(At(file_, 1, 8), 1, "w");
  w.severity = Severity::kWarning;
  EXPECT_EQ(Render(sources_, w),
            "profiles/x.cagent:1:8: warning: w\n"
            "  limits {\n"
            "         ^\n");
  w.severity = Severity::kNote;
  EXPECT_EQ(Render(sources_, w).substr(0, 29), "profiles/x.cagent:1:8: note: ");
}

TEST_F(RenderTest, TabsAreMirroredInTheCaretLine) {
  EXPECT_EQ(Render(sources_, Err(At(file_, 3, 9), 2, "bad size")),
            "profiles/x.cagent:3:9: error: bad size\n"
            "  \tmemory\t4G\n"
            "  \t      \t^~\n");
}

TEST_F(RenderTest, CaretAtEndOfLineIsOneCaretAfterTheLastByte) {
  EXPECT_EQ(Render(sources_, Err(At(file_, 1, 9), 5, "expected something")),
            "profiles/x.cagent:1:9: error: expected something\n"
            "  limits {\n"
            "          ^\n");
  // A column even further right is clamped to the same place.
  EXPECT_EQ(Render(sources_, Err(At(file_, 1, 40), 1, "far")),
            "profiles/x.cagent:1:40: error: far\n"
            "  limits {\n"
            "          ^\n");
}

TEST_F(RenderTest, UnderlineIsClampedToTheLine) {
  EXPECT_EQ(Render(sources_, Err(At(file_, 2, 18), 100, "long")),
            "profiles/x.cagent:2:18: error: long\n"
            "          wal-time 10m\n"
            "                   ^~~\n");
  EXPECT_EQ(Render(sources_, Err(At(file_, 2, 18), UINT32_MAX, "huge")),
            "profiles/x.cagent:2:18: error: huge\n"
            "          wal-time 10m\n"
            "                   ^~~\n");
}

TEST_F(RenderTest, ZeroLengthAndZeroColumnStillShowOneCaret) {
  EXPECT_EQ(Render(sources_, Err(At(file_, 1, 3), 0, "zero")),
            "profiles/x.cagent:1:3: error: zero\n"
            "  limits {\n"
            "    ^\n");
  EXPECT_EQ(Render(sources_, Err(At(file_, 1, 0), 1, "col0")),
            "profiles/x.cagent:1:0: error: col0\n"
            "  limits {\n"
            "  ^\n");
}

TEST_F(RenderTest, Utf8CountsOneColumnPerCharacter) {
  // "path \"café\" x": the 'x' is byte column 14 but display column 13.
  EXPECT_EQ(Render(sources_, Err(At(file_, 4, 14), 1, "after utf-8")),
            "profiles/x.cagent:4:14: error: after utf-8\n"
            "  path \"caf\xc3\xa9\" x\n"
            "              ^\n");
  // The string "café" is 7 bytes and 6 columns.
  EXPECT_EQ(Render(sources_, Err(At(file_, 4, 6), 7, "string")),
            "profiles/x.cagent:4:6: error: string\n"
            "  path \"caf\xc3\xa9\" x\n"
            "       ^~~~~~\n");
}

TEST_F(RenderTest, ControlBytesAreNotSentToTheTerminal) {
  EXPECT_EQ(Render(sources_, Err(At(file_, 5, 4), 1, "control character 0x1b in profile")),
            "profiles/x.cagent:5:4: error: control character 0x1b in profile\n"
            "  bad?[31m\n"
            "     ^\n");
}

TEST_F(RenderTest, LastLineWithoutNewline) {
  EXPECT_EQ(Render(sources_, Err(At(file_, 6, 1), 1, "x")),
            "profiles/x.cagent:6:1: error: x\n"
            "  }\n"
            "  ^\n");
}

TEST_F(RenderTest, LinePastTheEndShowsAnEmptyLine) {
  EXPECT_EQ(Render(sources_, Err(At(file_, 9, 1), 1, "x")),
            "profiles/x.cagent:9:1: error: x\n"
            "  \n"
            "  ^\n");
}

TEST_F(RenderTest, InvalidLocationHasNoPositionOrSnippet) {
  EXPECT_EQ(Render(sources_, Err(Location{}, 1, "no profile given", "pass --profile NAME")),
            "error: no profile given\n"
            "  hint: pass --profile NAME\n");
  EXPECT_EQ(Render(sources_, Err(Location{}, 1, "plain")), "error: plain\n");
  // A file index the set does not hold is treated the same way, never dereferenced.
  EXPECT_EQ(Render(sources_, Err(At(42, 1, 1), 1, "stray")), "error: stray\n");
}

TEST_F(RenderTest, RenderAllIsSortedAndConcatenated) {
  Diagnostics d;
  d.Error(At(file_, 2, 9), 8, "second");
  d.Error(Location{}, 1, "first");
  d.Warning(At(file_, 1, 1), 6, "middle", "h");
  EXPECT_EQ(RenderAll(sources_, d),
            "error: first\n"
            "profiles/x.cagent:1:1: warning: middle\n"
            "  limits {\n"
            "  ^~~~~~\n"
            "  hint: h\n"
            "profiles/x.cagent:2:9: error: second\n"
            "          wal-time 10m\n"
            "          ^~~~~~~~\n");
  EXPECT_EQ(RenderAll(sources_, Diagnostics{}), "");
}

}  // namespace
}  // namespace cagent::policy
