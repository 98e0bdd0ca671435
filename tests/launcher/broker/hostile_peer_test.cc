// A hostile agent: whatever it sends, the broker answers with the exact error code, records it,
// never crashes or blocks, keeps its memory bounded, and after too many violations shuts the
// session down.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "tests/launcher/broker/broker_test_util.h"

namespace cagent::launcher::broker::testing {
namespace {

using ::testing::HasSubstr;

// Sends `payload` framed and expects an error reply with `code` and `id`.
void ExpectError(Harness& h, std::string_view payload, const std::string& code, std::uint64_t id) {
  ASSERT_TRUE(h.peer->SendPayload(payload));
  auto reply = h.peer->Recv();
  ASSERT_TRUE(reply) << "no reply to: " << payload.substr(0, 200);
  EXPECT_EQ((*reply)["type"], "error") << reply->dump();
  EXPECT_EQ((*reply)["code"], code) << reply->dump();
  EXPECT_EQ((*reply)["id"], id) << reply->dump();
}

std::size_t ProtocolErrorEntries(const Harness& h) {
  std::size_t n = 0;
  for (const json& e : h.AuditEntries()) n += e.value("event", "") == "protocol_error";
  return n;
}

TEST(HostilePeer, GarbageBytesAreMalformed) {
  Harness h;
  ExpectError(h, std::string("\x01\x02\xff\xfe garbage", 13), "malformed", 0);
  EXPECT_EQ(h.broker->outcome().protocol_errors, 1U);
  EXPECT_EQ(ProtocolErrorEntries(h), 1U);
}

TEST(HostilePeer, NonJsonIsMalformed) {
  Harness h;
  ExpectError(h, "{\"v\":1,\"type\":\"hello\",", "malformed", 0);
}

TEST(HostilePeer, JsonArrayIsMalformed) {
  Harness h;
  ExpectError(h, R"([1,2,3])", "malformed", 0);
}

TEST(HostilePeer, MissingFieldsAreMalformedWithTheIdWhenKnown) {
  Harness h;
  h.Hello();
  // No "tool".
  ExpectError(h, R"({"v":2,"type":"tool_request","id":7,"args":{}})", "malformed", 7);
  // No id at all.
  ExpectError(h, R"({"v":2,"type":"progress","state":"x"})", "malformed", 0);
}

TEST(HostilePeer, WrongTypesAreMalformed) {
  Harness h;
  h.Hello();
  ExpectError(h, R"({"v":2,"type":"tool_request","id":5,"tool":42,"args":{}})", "malformed", 5);
  ExpectError(h, R"({"v":2,"type":"tool_request","id":6,"tool":"read_file","args":"x"})",
              "malformed", 6);
  ExpectError(h, R"({"v":2,"type":"progress","id":-3,"state":"x"})", "malformed", 0);
}

TEST(HostilePeer, WrongVersionIsBadVersion) {
  Harness h;
  // A version-1 agent (provider bodies in model_call) is not spoken to at all.
  ExpectError(h, R"({"v":2,"type":"hello","id":1,"agent":"x","protocols":[1]})", "bad_version", 1);
  // A hello at v2 that offers only other versions.
  ExpectError(h, R"({"v":2,"type":"hello","id":2,"agent":"x","protocols":[1,7]})", "bad_version",
              2);
}

TEST(HostilePeer, UnknownTypeIsUnknownType) {
  Harness h;
  h.Hello();
  ExpectError(h, R"({"v":2,"type":"format_disk","id":9})", "unknown_type", 9);
}

TEST(HostilePeer, BrokerOnlyTypeFromTheAgentIsUnknownType) {
  Harness h;
  h.Hello();
  ExpectError(h, R"({"v":2,"type":"approval","id":4,"verdict":"allow","scope":"run"})",
              "unknown_type", 4);
}

TEST(HostilePeer, HugeFrameHeaderIsTooLargeThenClosed) {
  Harness h;
  h.Hello();
  ASSERT_TRUE(h.peer->SendRaw(Header(0xFFFFFFFFU)));
  auto reply = h.peer->Recv();
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["type"], "error");
  EXPECT_EQ((*reply)["code"], "too_large");
  EXPECT_EQ((*reply)["id"], 0);
  auto shutdown = h.peer->Recv();
  ASSERT_TRUE(shutdown);
  EXPECT_EQ((*shutdown)["type"], "shutdown");
  EXPECT_TRUE(h.peer->WaitClosed());
  ASSERT_TRUE(h.WaitEnded());
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kFailed);
  EXPECT_THAT(h.ended->reason, HasSubstr("4294967295"));
}

TEST(HostilePeer, FrameJustAboveTheLimitIsTooLarge) {
  HarnessOptions o;
  o.max_frame_bytes = 4096;
  Harness h(o);
  h.Hello();
  // Exactly at the limit is fine (an answer comes back, even if the payload is nonsense)...
  ExpectError(h, std::string(4096, ' '), "malformed", 0);
  // ...one byte more is not, and the stream is closed.
  ASSERT_TRUE(h.peer->SendRaw(Header(4097) + std::string(4097, ' ')));
  auto reply = h.peer->Recv();
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["code"], "too_large");
  EXPECT_TRUE(h.peer->WaitClosed());
}

TEST(HostilePeer, OversizedHeaderAfterAGoodFrameInTheSameReadIsTooLarge) {
  HarnessOptions o;
  o.max_frame_bytes = 4096;
  Harness h(o);
  h.Hello();
  const std::string good = json{{"v", 2}, {"type", "progress"}, {"id", 2}, {"state", "x"}}.dump();
  ASSERT_TRUE(
      h.peer->SendRaw(Header(static_cast<std::uint32_t>(good.size())) + good + Header(100000)));
  auto ack = h.peer->Recv();
  ASSERT_TRUE(ack);
  EXPECT_EQ((*ack)["type"], "ack");
  auto reply = h.peer->Recv();
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["code"], "too_large");
  EXPECT_THAT((*reply)["message"].get<std::string>(), HasSubstr("100000"));
}

TEST(HostilePeer, ZeroLengthFrameIsMalformedThenClosed) {
  Harness h;
  h.Hello();
  ASSERT_TRUE(h.peer->SendRaw(Header(0)));
  auto reply = h.peer->Recv();
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["code"], "malformed");
  EXPECT_TRUE(h.peer->WaitClosed());
}

// The header straddles two reads: the broker learns which problem it is from the decoder's error
// code (broker.cc decides by Error::Code, not by the message), so a zero length split in two is
// still "malformed", and an oversized one split in two still "too_large".
TEST(HostilePeer, AHeaderSplitAcrossReadsKeepsItsErrorCode) {
  for (const auto& [length, code] : {std::pair<std::uint32_t, std::string>{0, "malformed"},
                                     std::pair<std::uint32_t, std::string>{100000, "too_large"}}) {
    HarnessOptions o;
    o.max_frame_bytes = 4096;
    Harness h(o);
    h.Hello();
    const std::string header = Header(length);
    ASSERT_TRUE(h.peer->SendRaw(header.substr(0, 2)));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(h.peer->SendRaw(header.substr(2)));
    auto reply = h.peer->Recv();
    ASSERT_TRUE(reply);
    EXPECT_EQ((*reply)["code"], code) << length;
    EXPECT_TRUE(h.peer->WaitClosed());
  }
}

TEST(HostilePeer, HalfFrameThenEofIsRecorded) {
  Harness h;
  h.Hello();
  ASSERT_TRUE(h.peer->SendRaw(Header(100) + "{\"v\":1"));
  h.peer->ShutdownWrite();
  ASSERT_TRUE(h.WaitEnded());
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kFailed);
  EXPECT_THAT(h.ended->reason, HasSubstr("mid-frame"));
  EXPECT_EQ(h.ended->protocol_errors, 1U);
  EXPECT_EQ(ProtocolErrorEntries(h), 1U);
}

TEST(HostilePeer, FramesBeforeHelloAreOutOfOrder) {
  Harness h;
  ExpectError(h, R"({"v":2,"type":"progress","id":1,"state":"x"})", "out_of_order", 1);
  ExpectError(
      h,
      R"({"v":2,"type":"tool_request","id":2,"call_id":"c","tool":"read_file","args":{"path":"a"}})",
      "out_of_order", 2);
  // hello still works afterwards.
  h.Hello();
}

TEST(HostilePeer, SecondHelloIsOutOfOrder) {
  Harness h;
  h.Hello();
  ExpectError(h, R"({"v":2,"type":"hello","id":2,"agent":"x","protocols":[1]})", "out_of_order", 2);
}

TEST(HostilePeer, ReusedOrDecreasingIdIsDuplicateId) {
  Harness h;
  h.Hello();  // id 1
  ExpectError(h, R"({"v":2,"type":"progress","id":1,"state":"x"})", "duplicate_id", 1);
  auto ok = h.Request(h.Msg("progress", {{"state", "x"}}, 10));
  ASSERT_TRUE(ok);
  EXPECT_EQ((*ok)["type"], "ack");
  ExpectError(h, R"({"v":2,"type":"progress","id":9,"state":"x"})", "duplicate_id", 9);
  ExpectError(h, R"({"v":2,"type":"progress","id":0,"state":"x"})", "duplicate_id", 0);
}

TEST(HostilePeer, ToolResultForAnUnknownRequestIsOutOfOrder) {
  Harness h;
  h.Hello();
  const std::uint64_t id = h.NextId();
  ExpectError(h, h.Msg("tool_result", {{"request", 1}, {"ok", true}, {"output", "x"}}, id).dump(),
              "out_of_order", id);
  // A result may name an allowed request only once.
  const json d = h.ToolRequest("read_file", {{"path", "a"}});
  ASSERT_EQ(d["verdict"], "allow");
  EXPECT_EQ(h.ToolResult(d["id"], true, "x")["type"], "result_ack");
  const json again = h.ToolResult(d["id"], true, "x");
  EXPECT_EQ(again["code"], "out_of_order");
}

TEST(HostilePeer, DeepNestingIsMalformedNotACrash) {
  Harness h;
  h.Hello();
  std::string deep = R"({"v":2,"type":"model_call","id":2,"messages":[],"body":)";
  deep += std::string(100000, '[') + std::string(100000, ']') + "}";
  ExpectError(h, deep, "malformed", 0);
}

TEST(HostilePeer, FloodOfProgressIsAllAnswered) {
  Harness h;
  h.Hello();
  constexpr int kCount = 10000;
  std::string batch;
  for (int i = 0; i < kCount; ++i) {
    const std::string m = h.Msg("progress", {{"state", "tool"}, {"text", "step"}}).dump();
    batch += Header(static_cast<std::uint32_t>(m.size())) + m;
  }
  // The peer reads while it writes (SendRaw pumps and reads when the socket is full).
  ASSERT_TRUE(h.peer->SendRaw(batch));
  int acks = 0;
  std::uint64_t expected_id = 2;
  while (acks < kCount) {
    auto reply = h.peer->Recv();
    ASSERT_TRUE(reply) << "after " << acks << " acks";
    ASSERT_EQ((*reply)["type"], "ack");
    ASSERT_EQ((*reply)["id"], expected_id);
    ++expected_id;
    ++acks;
  }
  EXPECT_EQ(h.broker->outcome().protocol_errors, 0U);
  EXPECT_EQ(h.broker->outcome().status, BrokerOutcome::Status::kRunning);
}

// A peer that floods and never reads its replies: the broker stops reading once its unsent
// replies pass a bound, so the peer's writes stall (its own socket fills) instead of the broker's
// memory growing; and the broker is still responsive: Stop() ends the session.
TEST(HostilePeer, PeerThatNeverReadsStallsItselfNotTheBroker) {
  // A low pause mark so the broker reaches it after a few thousand messages even when slow (under
  // the sanitizers on a loaded machine, 1 MiB of queued acks took longer than any fixed deadline).
  HarnessOptions options;
  options.pause_reading_above = 16 * 1024;
  Harness h(options);
  h.Hello();
  // Valid messages only (each id above the last), so every one would be answered.
  std::uint64_t id = 1000;
  std::size_t accepted = 0;
  // Generous: the loop ends as soon as the socket stays full; the deadline only catches a broker
  // that keeps reading forever.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int stalls = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string frame_body =
        h.Msg("progress", {{"state", "tool"}, {"text", std::string(200, 'x')}}, ++id).dump();
    const std::string frame = Header(static_cast<std::uint32_t>(frame_body.size())) + frame_body;
    const ssize_t n = ::send(h.peer->fd(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(frame.size())) {
      accepted += frame.size();
      stalls = 0;
      if (accepted % (64 * 1024) < frame.size()) h.peer->Pump(std::chrono::milliseconds(1), false);
      continue;
    }
    ASSERT_TRUE(n < 0 || n == 0) << "partial frame write of " << n << " bytes";
    // The socket is full: give the broker time to read more, if it still reads.
    h.peer->Pump(std::chrono::milliseconds(20), /*read=*/false);
    if (++stalls >= 25) break;  // 500 ms without room: the broker has stopped reading
  }
  EXPECT_GE(stalls, 25) << "the broker kept reading a peer that never reads (" << (accepted >> 10)
                        << " KiB accepted)";
  // Bounded: socket buffers on both ends plus the broker's pause threshold, far below the 64 MiB
  // at which a non-pausing broker would give up.
  EXPECT_LT(accepted, 16U << 20);
  EXPECT_EQ(h.broker->outcome().status, BrokerOutcome::Status::kRunning);
  h.broker->Stop(BrokerOutcome::Status::kCancelled, "stop a stuck peer");
  ASSERT_TRUE(h.WaitEnded());
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kCancelled);
}

TEST(HostilePeer, TooManyProtocolErrorsShutDownTheSession) {
  HarnessOptions o;
  o.max_protocol_errors = 3;
  Harness h(o);
  h.Hello();
  ExpectError(h, "nope", "malformed", 0);
  ExpectError(h, "[]", "malformed", 0);
  ASSERT_TRUE(h.peer->SendPayload("{}"));
  auto third = h.peer->Recv();
  ASSERT_TRUE(third);
  EXPECT_EQ((*third)["code"], "malformed");
  auto shutdown = h.peer->Recv();
  ASSERT_TRUE(shutdown);
  EXPECT_EQ((*shutdown)["type"], "shutdown");
  EXPECT_EQ((*shutdown)["status"], "failed");
  EXPECT_EQ((*shutdown)["reason"], "agent protocol violations");
  EXPECT_TRUE(h.peer->WaitClosed());
  ASSERT_TRUE(h.WaitEnded());
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kFailed);
  EXPECT_EQ(h.ended->protocol_errors, 3U);
  EXPECT_EQ(ProtocolErrorEntries(h), 3U);
}

TEST(HostilePeer, ErrorsBelowTheLimitKeepTheSessionGoing) {
  HarnessOptions o;
  o.max_protocol_errors = 3;
  Harness h(o);
  h.Hello();
  ExpectError(h, "nope", "malformed", 0);
  ExpectError(h, "[]", "malformed", 0);
  auto ok = h.Request(h.Msg("progress", {{"state", "x"}}));
  ASSERT_TRUE(ok);
  EXPECT_EQ((*ok)["type"], "ack");
  EXPECT_EQ(h.broker->outcome().status, BrokerOutcome::Status::kRunning);
}

}  // namespace
}  // namespace cagent::launcher::broker::testing
