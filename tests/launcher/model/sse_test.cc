#include "launcher/model/sse.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cagent::launcher::model {
namespace {

std::vector<SseEvent> ParseAll(const std::string& text) {
  SseParser p;
  std::vector<SseEvent> out;
  EXPECT_TRUE(p.Feed(text, out).ok());
  return out;
}

// Feeds `text` split at `cut` (two Feed calls).
std::vector<SseEvent> ParseSplit(const std::string& text, std::size_t cut) {
  SseParser p;
  std::vector<SseEvent> out;
  EXPECT_TRUE(p.Feed(text.substr(0, cut), out).ok());
  EXPECT_TRUE(p.Feed(text.substr(cut), out).ok());
  return out;
}

std::string Describe(const std::vector<SseEvent>& events) {
  std::string s;
  for (const auto& e : events) s += "[" + e.event + "|" + e.data + "|" + e.id + "]";
  return s;
}

TEST(SseParser, DataEventWithLf) {
  const auto events = ParseAll("data: {\"a\":1}\n\n");
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].event, "");
  EXPECT_EQ(events[0].data, "{\"a\":1}");
}

TEST(SseParser, CrLfAndLoneCrEndLinesToo) {
  EXPECT_EQ(Describe(ParseAll("event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\r")), "[a|1|][b|2|]");
}

TEST(SseParser, EventNamesAreKeptPerEvent) {
  const auto events = ParseAll(
      "event: message_start\ndata: {}\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\ndata: x\n\n");
  EXPECT_EQ(Describe(events), "[message_start|{}|][ping|{\"type\":\"ping\"}|][|x|]");
}

TEST(SseParser, CommentsAreIgnored) {
  EXPECT_EQ(Describe(ParseAll(": keep-alive\n\n:another\ndata: y\n: mid-event comment\n\n")),
            "[|y|]");
}

TEST(SseParser, MultiLineDataJoinsWithNewline) {
  EXPECT_EQ(Describe(ParseAll("data: one\ndata: two\ndata:three\ndata\n\n")),
            "[|one\ntwo\nthree\n|]");
}

TEST(SseParser, OnlyOneLeadingSpaceIsDropped) {
  EXPECT_EQ(Describe(ParseAll("data:  two spaces\n\n")), "[| two spaces|]");
}

TEST(SseParser, EventWithoutDataIsNotDispatched) {
  EXPECT_EQ(Describe(ParseAll("event: lonely\n\ndata: z\n\n")), "[|z|]");
}

TEST(SseParser, IdIsStickyAndRetryIgnored) {
  EXPECT_EQ(Describe(ParseAll("id: 7\nretry: 100\ndata: a\n\ndata: b\n\n")), "[|a|7][|b|7]");
}

TEST(SseParser, ByteOrderMarkAtTheStartIsSkipped) {
  EXPECT_EQ(Describe(ParseAll("\xEF\xBB\xBF"
                              "data: q\n\n")),
            "[|q|]");
  // Split inside the BOM too.
  EXPECT_EQ(Describe(ParseSplit("\xEF\xBB\xBF"
                                "data: q\n\n",
                                2)),
            "[|q|]");
}

TEST(SseParser, PartialEventAtEndIsPendingNotDispatched) {
  SseParser p;
  std::vector<SseEvent> out;
  ASSERT_TRUE(p.Feed("data: complete\n\ndata: half", out).ok());
  EXPECT_EQ(Describe(out), "[|complete|]");
  EXPECT_TRUE(p.HasPending());
  SseParser q;
  ASSERT_TRUE(q.Feed("data: complete\n\n", out).ok());
  EXPECT_FALSE(q.HasPending());
}

// The same stream split at every byte boundary (and fed one byte at a time) gives the same events.
TEST(SseParser, SplitAtEveryByteBoundaryGivesTheSameEvents) {
  for (const std::string& text :
       {std::string(
            "event: a\r\ndata: {\"x\":\"1\"}\r\n\r\n: c\r\ndata: two\r\ndata: lines\r\n\r\n"),
        std::string("event: a\ndata: {\"x\":\"1\"}\n\n: c\ndata: two\ndata: lines\n\n"),
        std::string("event: a\rdata: {\"x\":\"1\"}\r\r: c\rdata: two\rdata: lines\r\r")}) {
    const std::string whole = Describe(ParseAll(text));
    ASSERT_EQ(whole, "[a|{\"x\":\"1\"}|][|two\nlines|]");
    for (std::size_t cut = 0; cut <= text.size(); ++cut) {
      EXPECT_EQ(Describe(ParseSplit(text, cut)), whole) << "split at byte " << cut;
    }
    SseParser p;
    std::vector<SseEvent> out;
    for (char c : text) ASSERT_TRUE(p.Feed(std::string(1, c), out).ok());
    EXPECT_EQ(Describe(out), whole);
  }
}

TEST(SseParser, OverlongLineFails) {
  SseParser p(/*max_event_bytes=*/16);
  std::vector<SseEvent> out;
  EXPECT_TRUE(p.Feed("data: 0123456", out).ok());
  const Status st = p.Feed("789abcdef", out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().Message().find("longer than 16 bytes"), std::string::npos);
  EXPECT_FALSE(p.Feed("\n\n", out).ok());  // stays failed
}

// Issue #33, found by fuzzing: the limit once applied only to a line begun in an earlier chunk.
TEST(SseParser, LineLimitDoesNotDependOnChunking) {
  const std::string stream = "event: 0123456789abcdef\n\n";  // a 23-byte line, no data
  SseParser whole(/*max_event_bytes=*/16);
  std::vector<SseEvent> out;
  EXPECT_FALSE(whole.Feed(stream, out).ok());
  SseParser split(/*max_event_bytes=*/16);
  EXPECT_TRUE(split.Feed(stream.substr(0, 8), out).ok());
  EXPECT_FALSE(split.Feed(stream.substr(8), out).ok());
  EXPECT_TRUE(out.empty());
  SseParser at_limit(/*max_event_bytes=*/16);
  EXPECT_TRUE(at_limit.Feed("data: 0123456789\n", out).ok());  // 16 bytes: at the limit
}

TEST(SseParser, OverlongEventDataFails) {
  SseParser p(/*max_event_bytes=*/16);
  std::vector<SseEvent> out;
  EXPECT_TRUE(p.Feed("data: 0123456789\n", out).ok());
  EXPECT_FALSE(p.Feed("data: 0123456789\n", out).ok());
}

}  // namespace
}  // namespace cagent::launcher::model
