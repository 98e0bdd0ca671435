#include "agent/unified_diff.h"

#include <gtest/gtest.h>

#include <string>

namespace cagent::agent {
namespace {

std::string Lines(int from, int to) {
  std::string s;
  for (int i = from; i <= to; ++i) s += std::to_string(i) + "\n";
  return s;
}

TEST(UnifiedDiff, EqualTextsGiveNothing) { EXPECT_EQ(UnifiedDiff("a\n", "a\n", "a", "b"), ""); }

TEST(UnifiedDiff, OneChangeWithThreeLinesOfContext) {
  EXPECT_EQ(UnifiedDiff(Lines(1, 10), "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n", "a/f", "b/f"),
            "--- a/f\n+++ b/f\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
}

TEST(UnifiedDiff, DistantChangesMakeTwoHunksCloseOnesOne) {
  std::string b = Lines(1, 20);
  b.replace(b.find("2\n"), 2, "two\n");
  b.replace(b.find("19\n"), 3, "nineteen\n");
  EXPECT_EQ(UnifiedDiff(Lines(1, 20), b, "a", "b"),
            "--- a\n+++ b\n@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n"
            "@@ -16,5 +16,5 @@\n 16\n 17\n 18\n-19\n+nineteen\n 20\n");
  std::string c = Lines(1, 20);
  c.replace(c.find("5\n"), 2, "five\n");
  c.replace(c.find("11\n"), 3, "eleven\n");  // 5 equal lines between: merged (<= 6)
  const std::string d = UnifiedDiff(Lines(1, 20), c, "a", "b");
  EXPECT_EQ(d,
            "--- a\n+++ b\n@@ -2,13 +2,13 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n 9\n 10\n-11\n"
            "+eleven\n 12\n 13\n 14\n");
}

TEST(UnifiedDiff, InsertionsDeletionsAndEmptyFiles) {
  EXPECT_EQ(UnifiedDiff("", "x\ny\n", "a", "b"), "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+x\n+y\n");
  EXPECT_EQ(UnifiedDiff("x\ny\n", "", "a", "b"), "--- a\n+++ b\n@@ -1,2 +0,0 @@\n-x\n-y\n");
  EXPECT_EQ(UnifiedDiff("a\nc\n", "a\nb\nc\n", "a", "b"),
            "--- a\n+++ b\n@@ -1,2 +1,3 @@\n a\n+b\n c\n");
}

TEST(UnifiedDiff, MissingFinalNewlineIsMarked) {
  EXPECT_EQ(UnifiedDiff("a\nb", "a\nb\n", "a", "b"),
            "--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
}

TEST(DiffLines, MinimalScriptForInterleavedChanges) {
  const std::string a = "a\nb\nc\na\nb\nb\na\n";
  const std::string b = "c\nb\na\nb\na\nc\n";
  auto edits = DiffLines(SplitLinesKeepEnds(a), SplitLinesKeepEnds(b));
  int changes = 0;
  for (const auto& e : edits) changes += e.op != DiffOp::kEqual ? 1 : 0;
  EXPECT_EQ(changes, 5);  // the classic Myers example: D = 5
  // Replaying the script rebuilds b.
  std::string rebuilt;
  auto bl = SplitLinesKeepEnds(b);
  for (const auto& e : edits) {
    if (e.op != DiffOp::kDelete) rebuilt += std::string(bl[e.new_index]);
  }
  EXPECT_EQ(rebuilt, b);
}

TEST(DiffLines, EditDistanceAboveTheCapFallsBackToOneReplacement) {
  std::string a;
  std::string b;
  for (int i = 0; i < 100; ++i) {
    a += "a" + std::to_string(i) + "\n";
    b += "b" + std::to_string(i) + "\n";
  }
  auto edits = DiffLines(SplitLinesKeepEnds(a), SplitLinesKeepEnds(b), /*max_edit_distance=*/10);
  ASSERT_EQ(edits.size(), 200U);
  EXPECT_EQ(edits[0].op, DiffOp::kDelete);
  EXPECT_EQ(edits[99].op, DiffOp::kDelete);
  EXPECT_EQ(edits[100].op, DiffOp::kInsert);
  const std::string d = UnifiedDiff(a, b, "a", "b", 3, 10);
  EXPECT_EQ(d.rfind("--- a\n+++ b\n", 0), 0U);
  EXPECT_NE(d.find("@@ -1,100 +1,100 @@\n"), std::string::npos);
}

}  // namespace
}  // namespace cagent::agent
