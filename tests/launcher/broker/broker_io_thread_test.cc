// The broker with its io_context on a thread of its own and the agent blocking on another, as in
// a run (session.cc): requests one at a time (answered on the io thread that read them, the next
// one usually caught by the adaptive poll) and pipelined (their replies gathered into one write),
// with polling on and off. Each decision's audit entry is in the log file before the agent can
// read the decision.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "common/protocol.h"
#include "launcher/broker/audit_log.h"
#include "launcher/broker/broker.h"
#include "tests/launcher/broker/broker_test_util.h"

namespace cagent::launcher::broker::testing {
namespace {

// The agent's end, blocking, used from the test thread while the io_context runs on another (so
// TestPeer, which pumps the io_context itself, is not used).
class BlockingAgent {
 public:
  explicit BlockingAgent(int fd) : fd_(fd) {
    const int flags = ::fcntl(fd_, F_GETFL);
    ok_ = flags >= 0 && ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) == 0;
  }

  bool Send(const std::vector<json>& messages) {
    std::string bytes;
    for (const json& m : messages) {
      const std::string payload = m.dump();
      bytes += Header(static_cast<std::uint32_t>(payload.size())) + payload;
    }
    std::size_t done = 0;
    while (ok_ && done < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ok_ = false;
      if (n > 0) done += static_cast<std::size_t>(n);
    }
    return ok_;
  }

  // The next frame, parsed; nullopt after 5 s without one or when the broker closed.
  std::optional<json> Recv() {
    for (;;) {
      if (auto payload = decoder_.Next()) return json::parse(*payload, nullptr, false);
      pollfd p{fd_, POLLIN, 0};
      if (!ok_ || ::poll(&p, 1, 5000) != 1) return std::nullopt;
      char buf[65536];
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || !decoder_.Feed(std::string_view(buf, static_cast<std::size_t>(n))).ok()) {
        return std::nullopt;
      }
    }
  }

 private:
  int fd_;
  bool ok_ = false;
  protocol::FrameDecoder decoder_{protocol::kMaxFrameBytes};
};

std::string PathOf(int i) { return "src/file_" + std::to_string(i) + ".c"; }

class BrokerIoThread : public ::testing::TestWithParam<int> {};

TEST_P(BrokerIoThread, DecisionsAreLoggedBeforeTheyAreSentOnePerRequestAndPipelined) {
  constexpr int kOneByOne = 200;
  constexpr int kPipelined = 64;
  HarnessOptions options;
  options.budgets = Budgets{};  // unlimited: the profile's tool-call budget is smaller
  options.max_poll = std::chrono::microseconds(GetParam());
  Harness h(options);
  h.Hello();
  std::vector<protocol::ToolCall> calls;
  for (int i = 0; i < kOneByOne + kPipelined; ++i) {
    calls.push_back(Call("call_" + std::to_string(i), "read_file", {{"path", PathOf(i)}}));
  }
  ASSERT_EQ(h.ModelTurn(calls)["type"], "model_result");
  const auto request = [&](int i) {
    return h.Msg("tool_request", {{"call_id", "call_" + std::to_string(i)},
                                  {"tool", "read_file"},
                                  {"args", {{"path", PathOf(i)}}},
                                  {"paths", {PathOf(i)}}});
  };
  const auto result = [&](std::uint64_t req) {
    return h.Msg("tool_result", {{"request", req}, {"ok", true}, {"output", "int x;\n"}});
  };

  // On the io thread, right after each decision's entry is written: nothing may wait in the
  // agent's socket yet (one request at a time, every earlier reply already read), or the reply
  // went out before its entry.
  std::atomic<bool> checking{true};
  std::atomic<int> decision_entries{0};
  std::atomic<int> replied_before_logged{0};
  const int agent_fd = h.peer->fd();
  h.audit->SetObserver([&](std::string_view line, const json&) {
    if (!checking || line.find("\"event\":\"decision\"") == std::string_view::npos) return;
    ++decision_entries;
    char c = 0;
    if (::recv(agent_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0) ++replied_before_logged;
  });

  h.io.restart();
  std::thread io_thread([&h] { h.io.run(); });
  BlockingAgent agent(agent_fd);
  for (int i = 0; i < kOneByOne; ++i) {
    const json req = request(i);
    ASSERT_TRUE(agent.Send({req}));
    const std::optional<json> d = agent.Recv();
    ASSERT_TRUE(d.has_value());
    ASSERT_EQ((*d)["type"], "decision") << d->dump();
    EXPECT_EQ((*d)["id"], req["id"]);
    EXPECT_EQ((*d)["verdict"], "allow");
    // The broker writes the entry before it sends the reply: it is in the file already.
    const std::vector<json> entries = h.AuditEntries();
    ASSERT_FALSE(entries.empty());
    EXPECT_EQ(entries.back().value("event", ""), "decision");
    EXPECT_EQ(entries.back()["detail"].value("id", 0U), req["id"].get<std::uint64_t>());
    ASSERT_TRUE(agent.Send({result(req["id"])}));
    const std::optional<json> ack = agent.Recv();
    ASSERT_TRUE(ack.has_value());
    EXPECT_EQ((*ack)["type"], "result_ack") << ack->dump();
  }

  checking = false;
  EXPECT_EQ(decision_entries, kOneByOne);
  EXPECT_EQ(replied_before_logged, 0);

  // Pipelined: the decisions come back in order, one per request.
  std::vector<json> burst;
  for (int i = kOneByOne; i < kOneByOne + kPipelined; ++i) burst.push_back(request(i));
  ASSERT_TRUE(agent.Send(burst));
  std::vector<json> results;
  for (const json& req : burst) {
    const std::optional<json> d = agent.Recv();
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ((*d)["type"], "decision") << d->dump();
    EXPECT_EQ((*d)["id"], req["id"]);
    results.push_back(result(req["id"]));
  }
  ASSERT_TRUE(agent.Send(results));
  for (const json& res : results) {
    const std::optional<json> ack = agent.Recv();
    ASSERT_TRUE(ack.has_value());
    EXPECT_EQ((*ack)["id"], res["id"]);
  }

  const json finish = h.Msg("finish", {{"outcome", "done"}, {"summary", "ok"}});
  ASSERT_TRUE(agent.Send({finish}));
  const std::optional<json> ack = agent.Recv();
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ((*ack)["type"], "ack");
  io_thread.join();  // the session ended, the socket is closed: the io_context ran out of work
  ASSERT_TRUE(h.ended.has_value());
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kFinished) << h.ended->reason;
  std::size_t decisions = 0;
  for (const json& e : h.AuditEntries()) decisions += e.value("event", "") == "decision" ? 1 : 0;
  EXPECT_EQ(decisions, static_cast<std::size_t>(kOneByOne + kPipelined));
  const auto verified = VerifyAuditLog(h.audit_path);
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->ok) << verified->message;
}

// Microseconds of BrokerConfig::max_poll: off (the default), and on.
INSTANTIATE_TEST_SUITE_P(MaxPoll, BrokerIoThread, ::testing::Values(0, 100));

}  // namespace
}  // namespace cagent::launcher::broker::testing
