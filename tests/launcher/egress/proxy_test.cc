// The proxy end to end on loopback: the test makes the listening sockets (as the launcher does
// inside the sandbox), fake upstream servers run on threads, and a FakePolicy decides.
#include "launcher/egress/proxy.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "launcher/egress/socks5.h"
#include "tests/launcher/egress/egress_test_util.h"

namespace cagent::launcher::egress {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

// Reads until the peer closes, then answers "pong:" + what it read.
void PongServer(int fd) {
  const std::string got = ReadAll(fd);
  SendAll(fd, "pong:" + got);
}

class ProxyTest : public ::testing::Test {
 protected:
  void SetUp() override { policy_ = std::make_shared<FakePolicy>(); }
  void TearDown() override {
    if (proxy_) {
      proxy_->Stop();
    }
  }

  // Starts the proxy on a fresh listener on 127.0.0.1 with `config`'s other settings.
  void Start(ProxyConfig config = {}) {
    const int fd = ListenTcp("127.0.0.1");
    ASSERT_GE(fd, 0);
    port_ = PortOf(fd);
    config.proxy_fd = fd;
    auto started = Proxy::Start(std::move(config), policy_, sink_.Callback());
    ASSERT_TRUE(started.ok()) << started.error().Message();
    proxy_ = std::move(started.value());
  }

  int Client() const { return ConnectTcp("127.0.0.1", port_); }

  // Sends a CONNECT and reads the response head.
  std::string Connect(int fd, const std::string& authority) const {
    SendAll(fd, "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
    return ReadUntil(fd, "\r\n\r\n");
  }

  std::shared_ptr<FakePolicy> policy_;
  RecordSink sink_;
  std::unique_ptr<Proxy> proxy_;
  std::uint16_t port_ = 0;
};

ResolveOverride To127(const std::string& host, std::uint16_t port) {
  return {host, port, "127.0.0.1"};
}

TEST_F(ProxyTest, ConnectAllowedRelaysBothWaysAndCounts) {
  FakeUpstream up(PongServer);
  policy_->Allow("up.test");
  ProxyConfig config;
  config.overrides = {To127("up.test", up.port())};
  Start(config);
  const int c = Client();
  ASSERT_GE(c, 0);
  EXPECT_EQ(Connect(c, "Up.Test:" + std::to_string(up.port())),
            "HTTP/1.1 200 Connection established\r\n\r\n");
  ASSERT_TRUE(SendAll(c, "hello"));
  ::shutdown(c, SHUT_WR);  // the half-close reaches the upstream, which then answers
  EXPECT_EQ(ReadAll(c), "pong:hello");
  ::close(c);
  const ConnectionRecord r = sink_.Wait();
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.dest.host, "up.test");
  EXPECT_EQ(r.dest.port, up.port());
  EXPECT_EQ(r.dest.via, Via::kHttpConnect);
  EXPECT_EQ(r.address, "127.0.0.1");
  EXPECT_EQ(r.rule, "allow up.test");
  EXPECT_EQ(r.bytes_up, 5U);
  EXPECT_EQ(r.bytes_down, 10U);
  EXPECT_EQ(r.error, "");
  const Proxy::Totals t = proxy_->totals();
  EXPECT_EQ(t.connections, 1U);
  EXPECT_EQ(t.refused, 0U);
  EXPECT_EQ(t.bytes_up, 5U);
  EXPECT_EQ(t.bytes_down, 10U);
}

TEST_F(ProxyTest, TheCopyRelayCountsAndHalfClosesToo) {
  FakeUpstream up(PongServer);
  policy_->Allow("up.test");
  ProxyConfig config;
  config.overrides = {To127("up.test", up.port())};
  config.use_splice = false;
  Start(config);
  const int c = Client();
  EXPECT_EQ(Connect(c, "up.test:" + std::to_string(up.port())),
            "HTTP/1.1 200 Connection established\r\n\r\n");
  ASSERT_TRUE(SendAll(c, std::string(300000, 'u')));
  ::shutdown(c, SHUT_WR);
  EXPECT_EQ(ReadAll(c), "pong:" + std::string(300000, 'u'));
  ::close(c);
  const ConnectionRecord r = sink_.Wait();
  EXPECT_EQ(r.bytes_up, 300000U);
  EXPECT_EQ(r.bytes_down, 300005U);
}

TEST_F(ProxyTest, ConnectDeniedIs403WithTheReason) {
  Start();
  const int c = Client();
  SendAll(c, "CONNECT denied.test:443 HTTP/1.1\r\n\r\n");
  const std::string response = ReadAll(c);
  ::close(c);
  EXPECT_THAT(response, StartsWith("HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_THAT(response, HasSubstr("\r\nContent-Type: text/plain\r\n"));
  EXPECT_THAT(response, HasSubstr("\r\nX-Cagent-Refusal: 1\r\n"));
  EXPECT_THAT(response, HasSubstr("\r\nConnection: close\r\n"));
  EXPECT_THAT(response, HasSubstr("\r\n\r\ncagent: connection to denied.test:443 refused: "
                                  "denied.test is not on the allow-list (rule: deny *)\n"));
  const ConnectionRecord r = sink_.Wait();
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.rule, "deny *");
  EXPECT_EQ(r.reason, "denied.test is not on the allow-list");
  EXPECT_EQ(proxy_->totals().refused, 1U);
}

TEST_F(ProxyTest, HttpForwardSendsOriginForm) {
  std::string seen;
  std::mutex mu;
  FakeUpstream up([&](int fd) {
    const std::string head = ReadUntil(fd, "\r\n\r\n");
    std::string body(4, '\0');
    ::recv(fd, body.data(), body.size(), MSG_WAITALL);
    {
      const std::lock_guard<std::mutex> lock(mu);
      seen = head + body;
    }
    SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  });
  policy_->Allow("up.test");
  ProxyConfig config;
  config.overrides = {To127("up.test", up.port())};
  Start(config);
  const int c = Client();
  const std::string port = std::to_string(up.port());
  SendAll(c, "POST http://up.test:" + port + "/p?q=1 HTTP/1.1\r\nHost: up.test:" + port +
                 "\r\nProxy-Authorization: Basic dTpw\r\nProxy-Connection: keep-alive\r\n"
                 "Content-Length: 4\r\nAccept: */*\r\n\r\nbo");
  SendAll(c, "dy");
  const std::string response = ReadAll(c);
  ::close(c);
  EXPECT_EQ(response, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
  const std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen, "POST /p?q=1 HTTP/1.1\r\nHost: up.test:" + port +
                      "\r\nContent-Length: 4\r\nAccept: */*\r\nConnection: close\r\n\r\nbody");
  EXPECT_EQ(sink_.Wait().dest.via, Via::kHttpForward);
}

// The client hears that the connection closes after the response, whatever the upstream said
// (an HTTP/1.1 client would otherwise send its next request on it and get a reset), and however
// the head arrives: an interim 100 first, the final head in pieces, through both relays.
TEST_F(ProxyTest, HttpForwardTellsTheClientTheConnectionCloses) {
  for (const bool splice : {true, false}) {
    FakeUpstream up([](int fd) {
      ReadUntil(fd, "\r\n\r\n");
      const std::string response =
          "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConnection: keep-alive\r\n"
          "Keep-Alive: timeout=5\r\nContent-Length: 5\r\n\r\nhello";
      for (const char c : response) {
        SendAll(fd, std::string(1, c));
      }
    });
    policy_->Allow("up.test");
    ProxyConfig config;
    config.overrides = {To127("up.test", up.port())};
    config.use_splice = splice;
    Start(config);
    const int c = Client();
    const std::string port = std::to_string(up.port());
    SendAll(c, "GET http://up.test:" + port + "/ HTTP/1.1\r\nHost: up.test:" + port +
                   "\r\nConnection: keep-alive\r\n\r\n");
    EXPECT_EQ(ReadAll(c),
              "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
              "Connection: close\r\n\r\nhello")
        << "splice " << splice;
    ::close(c);
    const ConnectionRecord r = sink_.Wait();
    EXPECT_EQ(r.error, "");
    EXPECT_EQ(r.bytes_down, 87U);  // what the client got
    proxy_->Stop();
    proxy_.reset();
  }
}

TEST_F(ProxyTest, HttpForwardDeniedIs403) {
  Start();
  const int c = Client();
  SendAll(c, "GET http://denied.test/x HTTP/1.1\r\nHost: denied.test\r\n\r\n");
  const std::string response = ReadAll(c);
  ::close(c);
  EXPECT_THAT(response, StartsWith("HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_THAT(response, HasSubstr("cagent: connection to denied.test:80 refused:"));
}

TEST_F(ProxyTest, MalformedAndOriginFormAre400) {
  Start();
  for (const std::string& bad :
       {std::string("GET /x HTTP/1.1\r\n\r\n"), std::string("garbage\r\n\r\n"),
        std::string("GET https://h.test/ HTTP/1.1\r\n\r\n"),
        "GET http://h.test/ HTTP/1.1\r\nX: " + std::string(17000, 'a') + "\r\n\r\n"}) {
    const int c = Client();
    SendAll(c, bad);
    const std::string response = ReadAll(c);
    ::close(c);
    EXPECT_THAT(response, StartsWith("HTTP/1.1 400 Bad Request\r\n")) << bad.substr(0, 40);
  }
  EXPECT_THAT(sink_.Wait(1).reason, StartsWith("malformed request: "));
  EXPECT_TRUE(policy_->asked().empty());
}

TEST_F(ProxyTest, Socks5DomainAllowed) {
  FakeUpstream up(PongServer);
  policy_->Allow("up.test");
  ProxyConfig config;
  config.overrides = {To127("up.test", up.port())};
  Start(config);
  const int c = Client();
  EXPECT_EQ(Socks5Connect(c, "up.test", up.port()), Socks5Reply(kSocksSucceeded));
  SendAll(c, "abc");
  ::shutdown(c, SHUT_WR);
  EXPECT_EQ(ReadAll(c), "pong:abc");
  ::close(c);
  const ConnectionRecord r = sink_.Wait();
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.dest.via, Via::kSocks5);
}

TEST_F(ProxyTest, Socks5DomainDenied) {
  Start();
  const int c = Client();
  EXPECT_EQ(Socks5Connect(c, "denied.test", 443), Socks5Reply(kSocksNotAllowed));
  ::close(c);
  EXPECT_FALSE(sink_.Wait().allowed);
}

TEST_F(ProxyTest, Socks5WithoutNoAuthAndNotConnect) {
  Start();
  int c = Client();
  SendAll(c, std::string("\x05\x01\x02", 3));  // username/password only
  EXPECT_EQ(ReadAll(c), std::string("\x05\xff", 2));
  ::close(c);
  c = Client();
  SendAll(c, std::string("\x05\x01\x00\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50", 13));  // BIND
  EXPECT_EQ(ReadAll(c), std::string("\x05\x00", 2) + Socks5Reply(kSocksCommandNotSupported));
  ::close(c);
}

TEST_F(ProxyTest, ANameResolvingToLoopbackIsRefused) {
  FakeUpstream up(PongServer);
  policy_->Allow("localhost");
  Start();
  const int c = Client();
  const std::string response = Connect(c, "localhost:" + std::to_string(up.port()));
  ::close(c);
  EXPECT_THAT(response, StartsWith("HTTP/1.1 403 Forbidden\r\n"));
  const ConnectionRecord r = sink_.Wait();
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.reason, MatchesRegex("localhost resolves to (127\\.0\\.0\\.1|::1), a loopback "
                                     "address, and no rule names that address"));
  EXPECT_EQ(up.accepted(), 0);
}

TEST_F(ProxyTest, ANameResolvingToLoopbackIsAllowedWhenARuleNamesTheAddress) {
  FakeUpstream up(PongServer);
  policy_->Allow("localhost");
  policy_->NameAddress("127.0.0.1", up.port());
  policy_->NameAddress("::1", up.port());
  Start();
  const int c = Client();
  EXPECT_EQ(Connect(c, "localhost:" + std::to_string(up.port())),
            "HTTP/1.1 200 Connection established\r\n\r\n");
  SendAll(c, "x");
  ::shutdown(c, SHUT_WR);
  EXPECT_EQ(ReadAll(c), "pong:x");
  ::close(c);
  EXPECT_EQ(sink_.Wait().address, "127.0.0.1");
}

TEST_F(ProxyTest, ALoopbackLiteralIsRefusedWithoutARule) {
  policy_->Allow("127.0.0.1");
  Start();
  const int c = Client();
  Connect(c, "127.0.0.1:9");
  ::close(c);
  EXPECT_EQ(sink_.Wait().reason, "127.0.0.1 is a loopback address and no rule names that address");
}

TEST_F(ProxyTest, AnOverrideToLoopbackIsTrusted) {
  FakeUpstream up(PongServer);
  policy_->Allow("localhost");
  ProxyConfig config;
  config.overrides = {To127("localhost", up.port())};
  Start(config);
  const int c = Client();
  EXPECT_EQ(Connect(c, "localhost:" + std::to_string(up.port())),
            "HTTP/1.1 200 Connection established\r\n\r\n");
  ::close(c);
  EXPECT_TRUE(sink_.Wait().allowed);
}

TEST_F(ProxyTest, UpstreamRefusedIs502) {
  policy_->Allow("up.test");
  const int probe = ListenTcp("127.0.0.1");
  const std::uint16_t dead = PortOf(probe);
  ::close(probe);  // nothing listens there now
  ProxyConfig config;
  config.overrides = {To127("up.test", dead)};
  Start(config);
  const int c = Client();
  SendAll(c, "CONNECT up.test:" + std::to_string(dead) + " HTTP/1.1\r\n\r\n");
  const std::string response = ReadAll(c);
  ::close(c);
  EXPECT_THAT(response, StartsWith("HTTP/1.1 502 Bad Gateway\r\n"));
  EXPECT_THAT(response, HasSubstr("Connection refused"));
  const ConnectionRecord r = sink_.Wait();
  EXPECT_TRUE(r.allowed) << "the policy allowed it; the upstream failed";
  EXPECT_THAT(r.error, HasSubstr("Connection refused"));
}

TEST_F(ProxyTest, TlsServerNameMustMatchTheConnectHost) {
  FakeUpstream up(PongServer);
  policy_->Allow("up.test");
  ProxyConfig config;
  config.overrides = {To127("up.test", up.port())};
  Start(config);
  const int c = Client();
  EXPECT_EQ(Connect(c, "up.test:" + std::to_string(up.port())),
            "HTTP/1.1 200 Connection established\r\n\r\n");
  SendAll(c, BuildClientHello("evil.test"));
  ReadAll(c);
  ::close(c);
  const ConnectionRecord r = sink_.Wait();
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.reason, "TLS server name evil.test does not match CONNECT host up.test");
  EXPECT_EQ(r.bytes_up, 0U) << "not one byte of the hello reached the upstream";
}

TEST_F(ProxyTest, TlsServerNameMatchingTheConnectHostPasses) {
  FakeUpstream up(PongServer);
  policy_->Allow("up.test");
  ProxyConfig config;
  config.overrides = {To127("up.test", up.port())};
  Start(config);
  const int c = Client();
  EXPECT_EQ(Connect(c, "up.test:" + std::to_string(up.port())),
            "HTTP/1.1 200 Connection established\r\n\r\n");
  const std::string hello = BuildClientHello("UP.test");
  // In two pieces: the proxy waits for the whole hello.
  SendAll(c, hello.substr(0, 7));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  SendAll(c, hello.substr(7));
  ::shutdown(c, SHUT_WR);
  EXPECT_EQ(ReadAll(c), "pong:" + hello);
  ::close(c);
  EXPECT_TRUE(sink_.Wait().allowed);
}

TEST_F(ProxyTest, Port443NeedsAClientHelloNamingTheHost) {
  // Port 443 on loopback: only where the test may bind it and nothing else has.
  FakeUpstream up(PongServer, "127.0.0.1", 443);
  if (!up.ok()) {
    GTEST_SKIP() << "cannot listen on 127.0.0.1:443 here (not root, or in use)";
  }
  policy_->Allow("up.test");
  ProxyConfig config;
  config.overrides = {To127("up.test", 443)};
  Start(config);
  int c = Client();
  EXPECT_EQ(Connect(c, "up.test:443"), "HTTP/1.1 200 Connection established\r\n\r\n");
  SendAll(c, "GET / HTTP/1.1\r\n\r\n");  // plain text on 443
  ReadAll(c);
  ::close(c);
  EXPECT_EQ(sink_.Wait(1).reason,
            "the client's first bytes to up.test:443 are not a well-formed "
            "TLS ClientHello");
  c = Client();
  Connect(c, "up.test:443");
  SendAll(c, BuildClientHello(""));
  ReadAll(c);
  ::close(c);
  EXPECT_EQ(sink_.Wait(2).reason, "the TLS ClientHello names no server (CONNECT host up.test)");
  c = Client();
  Connect(c, "up.test:443");
  const std::string hello = BuildClientHello("up.test");
  SendAll(c, hello);
  ::shutdown(c, SHUT_WR);
  EXPECT_EQ(ReadAll(c), "pong:" + hello);
  ::close(c);
  EXPECT_TRUE(sink_.Wait(3).allowed);
}

TEST_F(ProxyTest, AServerThatSpeaksFirstIsNotHeldBack) {
  FakeUpstream up([](int fd) {
    SendAll(fd, "SSH-2.0-fake\r\n");
    ReadAll(fd);
  });
  policy_->Allow("up.test");
  ProxyConfig config;
  config.overrides = {To127("up.test", up.port())};
  Start(config);
  const int c = Client();
  Connect(c, "up.test:" + std::to_string(up.port()));
  EXPECT_EQ(ReadUntil(c, "\r\n"), "SSH-2.0-fake\r\n");
  ::close(c);
}

TEST_F(ProxyTest, AsyncDecisionFromAnotherThread) {
  FakeUpstream up(PongServer);
  policy_->Allow("up.test");
  policy_->set_async(true);
  ProxyConfig config;
  config.overrides = {To127("up.test", up.port())};
  Start(config);
  const int c = Client();
  EXPECT_EQ(Connect(c, "up.test:" + std::to_string(up.port())),
            "HTTP/1.1 200 Connection established\r\n\r\n");
  ::close(c);
}

TEST_F(ProxyTest, StopWithADecisionPendingThenDone) {
  policy_->set_hold(true);
  Start();
  const int c = Client();
  SendAll(c, "CONNECT up.test:80 HTTP/1.1\r\n\r\n");
  auto done = policy_->TakeHeld();
  ASSERT_TRUE(done);
  proxy_->Stop();
  EXPECT_EQ(sink_.Wait().error, "proxy stopped");
  done(Decision{true, "allow up.test", "late"});  // after Stop: nothing happens, no crash
  proxy_->Stop();                                 // idempotent
  proxy_.reset();
  ::close(c);
}

TEST_F(ProxyTest, ADecisionOutlivingTheProxyIsHarmless) {
  policy_->set_hold(true);
  Start();
  const int c = Client();
  SendAll(c, "CONNECT up.test:80 HTTP/1.1\r\n\r\n");
  auto done = policy_->TakeHeld();
  ASSERT_TRUE(done);
  proxy_.reset();  // destroyed outright
  done(Decision{false, "", "late"});
  ::close(c);
}

TEST_F(ProxyTest, SlowlorisHeadIsCutAfterTheTimeout) {
  ProxyConfig config;
  config.head_timeout = std::chrono::milliseconds(200);
  Start(config);
  const int c = Client();
  SendAll(c, "CONNECT up.te");
  const auto start = std::chrono::steady_clock::now();
  ReadAll(c);  // the proxy closes
  const auto took = std::chrono::steady_clock::now() - start;
  ::close(c);
  EXPECT_LT(took, std::chrono::seconds(4));
  EXPECT_EQ(sink_.Wait().reason, "the client sent no complete request within 200 ms");
}

TEST_F(ProxyTest, ConnectionBudget) {
  FakeUpstream up(PongServer);
  policy_->Allow("up.test");
  ProxyConfig config;
  config.overrides = {To127("up.test", up.port())};
  config.max_connections = 1;
  Start(config);
  int c = Client();
  EXPECT_EQ(Connect(c, "up.test:" + std::to_string(up.port())),
            "HTTP/1.1 200 Connection established\r\n\r\n");
  ::close(c);
  EXPECT_EQ(proxy_->budget_exhausted(), "");
  c = Client();
  SendAll(c, "CONNECT up.test:" + std::to_string(up.port()) + " HTTP/1.1\r\n\r\n");
  const std::string response = ReadAll(c);
  ::close(c);
  EXPECT_THAT(response, StartsWith("HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_THAT(response, HasSubstr("refused: egress connection budget of 1 used up\n"));
  EXPECT_EQ(proxy_->budget_exhausted(), "egress connection budget of 1 used up");
}

TEST_F(ProxyTest, ByteBudgetCutsTheRelayAndRefusesLater) {
  FakeUpstream up([](int fd) { SendAll(fd, std::string(1 << 20, 'x')); });
  policy_->Allow("up.test");
  ProxyConfig config;
  config.overrides = {To127("up.test", up.port())};
  config.max_bytes = 100000;
  Start(config);
  int c = Client();
  Connect(c, "up.test:" + std::to_string(up.port()));
  const std::string got = ReadAll(c);
  ::close(c);
  EXPECT_LE(got.size(), 100000U);
  const ConnectionRecord r = sink_.Wait();
  EXPECT_EQ(r.error, "egress byte budget of 97.7 KiB used up");
  EXPECT_EQ(proxy_->budget_exhausted(), "egress byte budget of 97.7 KiB used up");
  EXPECT_LE(proxy_->totals().bytes_down, 100000U);
  c = Client();
  SendAll(c, "CONNECT up.test:" + std::to_string(up.port()) + " HTTP/1.1\r\n\r\n");
  EXPECT_THAT(ReadAll(c), HasSubstr("refused: egress byte budget of 97.7 KiB used up"));
  ::close(c);
}

TEST_F(ProxyTest, ByteBudgetOnTheCopyRelay) {
  FakeUpstream up([](int fd) { SendAll(fd, std::string(1 << 20, 'x')); });
  policy_->Allow("up.test");
  ProxyConfig config;
  config.overrides = {To127("up.test", up.port())};
  config.max_bytes = 100000;
  config.use_splice = false;
  Start(config);
  const int c = Client();
  Connect(c, "up.test:" + std::to_string(up.port()));
  EXPECT_LE(ReadAll(c).size(), 100000U);
  ::close(c);
  EXPECT_EQ(sink_.Wait().error, "egress byte budget of 97.7 KiB used up");
}

TEST_F(ProxyTest, BeyondMaxConcurrentConnectionsAreClosedAtOnce) {
  policy_->set_hold(true);
  ProxyConfig config;
  config.max_concurrent = 1;
  Start(config);
  const int first = Client();
  SendAll(first, "CONNECT up.test:80 HTTP/1.1\r\n\r\n");
  auto done = policy_->TakeHeld();
  ASSERT_TRUE(done);
  const int second = Client();
  int err = 0;
  EXPECT_EQ(ReadAll(second, &err), "");
  EXPECT_EQ(err, ECONNRESET);
  ::close(second);
  EXPECT_EQ(proxy_->totals().refused, 1U);
  EXPECT_EQ(sink_.size(), 0U) << "no record for a connection closed at once";
  ::close(first);
}

TEST_F(ProxyTest, ManyConnectionsAtOnce) {
  FakeUpstream up(PongServer);
  policy_->Allow("up.test");
  ProxyConfig config;
  config.overrides = {To127("up.test", up.port())};
  Start(config);
  std::vector<int> clients;
  for (int i = 0; i < 100; ++i) {
    clients.push_back(Client());
  }
  for (const int c : clients) {
    SendAll(c, "CONNECT up.test:" + std::to_string(up.port()) + " HTTP/1.1\r\n\r\nping");
    ::shutdown(c, SHUT_WR);
  }
  for (const int c : clients) {
    EXPECT_EQ(ReadAll(c), "HTTP/1.1 200 Connection established\r\n\r\npong:ping");
    ::close(c);
  }
  sink_.Wait(100);
  EXPECT_EQ(proxy_->totals().connections, 100U);
}

// The transparent listeners and the DNS stub together.
class TransparentTest : public ProxyTest {
 protected:
  std::string Resolve(int dns_port, const std::string& name) {
    std::string q;
    Put16(q, 0x4242);
    Put16(q, 0x0100);
    Put16(q, 1);
    Put16(q, 0);
    Put16(q, 0);
    Put16(q, 0);
    q.push_back(static_cast<char>(name.find('.')));
    q += name.substr(0, name.find('.'));
    q.push_back(static_cast<char>(name.size() - name.find('.') - 1));
    q += name.substr(name.find('.') + 1);
    q.push_back(0);
    Put16(q, 1);
    Put16(q, 1);
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    SetTimeout(fd, 5000);
    const auto a = Addr("127.0.0.1", static_cast<std::uint16_t>(dns_port));
    ::sendto(fd, q.data(), q.size(), 0, reinterpret_cast<const ::sockaddr*>(&a), sizeof(a));
    std::string r(512, '\0');
    const ssize_t n = ::recv(fd, r.data(), r.size(), 0);
    ::close(fd);
    r.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    if (r.size() < 16 || (static_cast<std::uint8_t>(r[3]) & 0x0f) != 0) {
      return "";
    }
    std::array<char, 16> text{};
    ::inet_ntop(AF_INET, r.data() + r.size() - 4, text.data(), text.size());
    return text.data();
  }
};

TEST_F(TransparentTest, ASyntheticAddressIsRelayedToItsName) {
  FakeUpstream up(PongServer);
  policy_->Allow("up.test");
  const int dns = BindUdp("127.0.0.1");
  const int dns_port = PortOf(dns);
  // The transparent listener for the upstream's port, on the first synthetic address (all of
  // 127/8 is local on Linux).
  const int transparent = ListenTcp("127.77.0.1", up.port());
  ASSERT_GE(transparent, 0);
  const int unknown = ListenTcp("127.77.0.9", up.port());
  ASSERT_GE(unknown, 0);
  ProxyConfig config;
  config.dns_fd = dns;
  config.transparent_fds = {transparent, unknown};
  config.overrides = {To127("up.test", up.port())};
  Start(config);
  EXPECT_EQ(Resolve(dns_port, "evil.test"), "") << "a name that may not resolve is NXDOMAIN";
  ASSERT_EQ(Resolve(dns_port, "up.test"), "127.77.0.1");
  int c = ConnectTcp("127.77.0.1", up.port());
  ASSERT_GE(c, 0);
  SendAll(c, "raw");
  ::shutdown(c, SHUT_WR);
  EXPECT_EQ(ReadAll(c), "pong:raw");
  ::close(c);
  ConnectionRecord r = sink_.Wait(1);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.dest.host, "up.test");
  EXPECT_EQ(r.dest.via, Via::kTransparent);
  // An address the stub never gave out: an immediate reset, not a hang.
  c = ConnectTcp("127.77.0.9", up.port());
  ASSERT_GE(c, 0);
  int err = 0;
  EXPECT_EQ(ReadAll(c, &err), "");
  EXPECT_EQ(err, ECONNRESET);
  ::close(c);
  r = sink_.Wait(2);
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.reason, "127.77.0.9 is not an address the DNS stub gave a name");
}

TEST_F(TransparentTest, Socks5WithASyntheticAddressDecidesByTheName) {
  FakeUpstream up(PongServer);
  policy_->Allow("up.test");
  const int dns = BindUdp("127.0.0.1");
  const int dns_port = PortOf(dns);
  ProxyConfig config;
  config.dns_fd = dns;
  config.overrides = {To127("up.test", up.port())};
  Start(config);
  ASSERT_EQ(Resolve(dns_port, "up.test"), "127.77.0.1");
  const int c = Client();
  // The greeting and the request in one write (a client that does not wait for the method).
  std::string req =
      std::string("\x05\x01\x00", 3) + std::string("\x05\x01\x00\x01\x7f\x4d\x00\x01", 8);
  Put16(req, up.port());
  SendAll(c, req);
  std::string reply(12, '\0');
  ::recv(c, reply.data(), reply.size(), MSG_WAITALL);
  EXPECT_EQ(reply, std::string("\x05\x00", 2) + Socks5Reply(kSocksSucceeded));
  ::close(c);
  EXPECT_EQ(sink_.Wait().dest.host, "up.test");
}

// Real clients that nobody here wrote: curl through the HTTP proxy and SOCKS5.
std::string RunCurl(const std::string& args, int* status) {
  const std::string cmd = "curl -sS --max-time 10 " + args + " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) {
    out.append(buf.data(), n);
  }
  *status = ::pclose(p);
  return out;
}

class CurlTest : public ProxyTest {
 protected:
  void SetUp() override {
    ProxyTest::SetUp();
    if (std::system("curl --version > /dev/null 2>&1") != 0) {
      GTEST_SKIP() << "curl is not installed";
    }
  }
};

void HttpFileServer(int fd) {
  const std::string head = ReadUntil(fd, "\r\n\r\n");
  const std::string body = head.rfind("GET /f ", 0) == 0 ? "the file\n" : "not found\n";
  SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                  "\r\nConnection: close\r\n\r\n" + body);
}

TEST_F(CurlTest, HttpThroughTheProxy) {
  FakeUpstream up(HttpFileServer);
  policy_->Allow("pkgs.test");
  ProxyConfig config;
  config.overrides = {{"pkgs.test", up.port(), "127.0.0.2"}};
  FakeUpstream up2(HttpFileServer, "127.0.0.2", up.port());
  ASSERT_TRUE(up2.ok());
  Start(config);
  int status = 0;
  const std::string proxy = "http://127.0.0.1:" + std::to_string(port_);
  EXPECT_EQ(
      RunCurl("-x " + proxy + " http://pkgs.test:" + std::to_string(up.port()) + "/f", &status),
      "the file\n");
  EXPECT_EQ(status, 0);
  EXPECT_EQ(sink_.Wait().address, "127.0.0.2");
  // Through CONNECT (curl's -p), and SOCKS5 with the name sent to the proxy.
  EXPECT_EQ(
      RunCurl("-p -x " + proxy + " http://pkgs.test:" + std::to_string(up.port()) + "/f", &status),
      "the file\n");
  EXPECT_EQ(RunCurl("-x socks5h://127.0.0.1:" + std::to_string(port_) +
                        " http://pkgs.test:" + std::to_string(up.port()) + "/f",
                    &status),
            "the file\n");
  EXPECT_EQ(status, 0);
}

TEST_F(CurlTest, ADeniedHostShowsTheRefusal) {
  Start();
  int status = 0;
  const std::string proxy = "http://127.0.0.1:" + std::to_string(port_);
  EXPECT_EQ(RunCurl("-x " + proxy + " http://denied.test/f", &status),
            "cagent: connection to denied.test:80 refused: denied.test is not on the allow-list "
            "(rule: deny *)\n");
  const std::string tunnel = RunCurl("-p -x " + proxy + " http://denied.test/f", &status);
  EXPECT_NE(status, 0);
  EXPECT_THAT(tunnel, HasSubstr("CONNECT tunnel failed, response 403"));
}

}  // namespace
}  // namespace cagent::launcher::egress

namespace cagent::launcher::egress {
namespace {

TEST_F(ProxyTest, ClientsClosingAtEveryByteOfTheHandshake) {
  FakeUpstream up(PongServer);
  policy_->Allow("up.test");
  ProxyConfig config;
  config.overrides = {To127("up.test", up.port())};
  Start(config);
  std::string socks("\x05\x01\x00\x05\x01\x00\x03\x07up.test", 13);
  Put16(socks, up.port());
  const std::string http = "CONNECT up.test:" + std::to_string(up.port()) + " HTTP/1.1\r\n\r\n";
  std::size_t sessions = 0;
  for (const std::string& whole : {socks, http}) {
    for (std::size_t n = 0; n < whole.size(); ++n) {
      const int c = Client();
      ASSERT_GE(c, 0);
      SendAll(c, whole.substr(0, n));
      ::close(c);
      ++sessions;
    }
  }
  // Every one of them ends with a record, and the proxy still serves.
  sink_.Wait(sessions);
  EXPECT_EQ(sink_.size(), sessions);
  const int c = Client();
  EXPECT_EQ(Connect(c, "up.test:" + std::to_string(up.port())),
            "HTTP/1.1 200 Connection established\r\n\r\n");
  ::close(c);
}

TEST_F(ProxyTest, GarbageNeverCrashes) {
  Start();
  std::uint32_t seed = 12345;
  for (int i = 0; i < 200; ++i) {
    std::string junk;
    const std::size_t len = 1 + (seed % 300);
    for (std::size_t j = 0; j < len; ++j) {
      seed = seed * 1103515245U + 12345U;
      junk.push_back(static_cast<char>(seed >> 16U));
    }
    if (i % 2 == 0) {
      junk[0] = 5;  // the SOCKS5 path
    }
    const int c = Client();
    SendAll(c, junk);
    ::shutdown(c, SHUT_WR);
    ReadAll(c);
    ::close(c);
  }
  sink_.Wait(200);
  EXPECT_EQ(proxy_->totals().connections, 0U);
}

// curl through CONNECT to a real TLS server (openssl s_server): curl's own ClientHello, with the
// SNI it puts there, passes the check and the page arrives.
TEST_F(CurlTest, HttpsThroughConnectWithARealTlsServer) {
  if (std::system("openssl version > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "openssl is not installed";
  }
  const std::string dir = ::testing::TempDir() + "egress-tls-" + std::to_string(::getpid());
  ASSERT_EQ(
      std::system(("mkdir -p " + dir + " && openssl req -x509 -newkey rsa:2048 -nodes -keyout " +
                   dir + "/key.pem -out " + dir +
                   "/cert.pem -days 1 -subj /CN=tls.test > /dev/null 2>&1")
                      .c_str()),
      0);
  const int probe = ListenTcp("127.0.0.1");
  const std::uint16_t tls_port = PortOf(probe);
  ::close(probe);
  const pid_t server = ::fork();
  if (server == 0) {
    const std::string accept = "127.0.0.1:" + std::to_string(tls_port);
    const std::string cert = dir + "/cert.pem";
    const std::string key = dir + "/key.pem";
    ::freopen("/dev/null", "w", stdout);
    ::execlp("openssl", "openssl", "s_server", "-quiet", "-accept", accept.c_str(), "-cert",
             cert.c_str(), "-key", key.c_str(), "-www", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(server, 0);
  for (int i = 0; i < 100; ++i) {  // until it listens
    const int c = ConnectTcp("127.0.0.1", tls_port);
    if (c >= 0) {
      ::close(c);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  policy_->Allow("tls.test");
  ProxyConfig config;
  config.overrides = {To127("tls.test", tls_port)};
  Start(config);
  int status = 0;
  const std::string out = RunCurl("-k -x http://127.0.0.1:" + std::to_string(port_) +
                                      " https://tls.test:" + std::to_string(tls_port) + "/",
                                  &status);
  ::kill(server, SIGTERM);
  ::waitpid(server, nullptr, 0);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("s_server"));
  const ConnectionRecord r = sink_.Wait();
  EXPECT_TRUE(r.allowed) << r.reason;
  EXPECT_GT(r.bytes_down, 1000U);
  (void)std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace cagent::launcher::egress

namespace cagent::launcher::egress {
namespace {

// CPU time (user + system, in clock ticks) of process `pid` so far.
long CpuTicks(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) {
    return -1;
  }
  std::array<char, 4096> buf{};
  const std::size_t n = std::fread(buf.data(), 1, buf.size() - 1, f);
  std::fclose(f);
  const std::string stat(buf.data(), n);
  // Fields after the command's closing parenthesis: state is 3, utime 14, stime 15.
  std::size_t pos = stat.rfind(')') + 2;
  long fields[15] = {};
  for (int i = 3; i <= 15 && pos < stat.size(); ++i) {
    const std::size_t end = stat.find(' ', pos);
    if (i >= 14) {
      fields[i - 1] = std::stol(stat.substr(pos, end - pos));
    }
    pos = end + 1;
  }
  return fields[13] + fields[14];
}

// Out of descriptors, the accept loop waits instead of spinning on a listener that stays
// readable, and serves again once descriptors are free. The proxy runs in a child process whose
// descriptor limit is just above what it has open.
//
// Not under the sanitizers: UBSan's vptr check tests whether a vtable is readable by writing it
// into a pipe (the sanitizer runtime's IsAccessibleMemoryRange), so in a process with no free
// descriptor every virtual call it has not seen before is reported as "invalid vptr". That is
// the report this test once gave in CI (a member call on boost::system's error_category in the
// out-of-descriptors child). A ten-line program (a virtual call after dup() has taken every
// descriptor) gets the same report under -fsanitize=undefined and none with a descriptor free: a
// property of the checker, not of the proxy. The plain build runs it.
TEST(ProxyLimitsTest, OutOfDescriptorsBacksOffAndRecovers) {
#ifdef CAGENT_SANITIZE_BUILD
  GTEST_SKIP() << "UBSan's vptr check needs a free descriptor (it probes memory through a pipe) "
                  "and this test leaves the process none; it runs in the plain build";
#endif
  const int listener = ListenTcp("127.0.0.1");
  ASSERT_GE(listener, 0);
  const std::uint16_t port = PortOf(listener);
  std::array<int, 2> ready{-1, -1};
  ASSERT_EQ(::pipe(ready.data()), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto policy = std::make_shared<FakePolicy>();
    ProxyConfig config;
    config.proxy_fd = listener;
    auto proxy = Proxy::Start(std::move(config), policy, nullptr);
    if (!proxy.ok()) {
      ::_exit(1);
    }
    int highest = 0;
    for (int fd = 0; fd < 4096; ++fd) {
      if (::fcntl(fd, F_GETFD) >= 0) {
        highest = fd;
      }
    }
    const ::rlimit limit{static_cast<rlim_t>(highest + 8), static_cast<rlim_t>(highest + 8)};
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      ::_exit(2);
    }
    // Fill every free number up to the limit, then free three: room for three sessions.
    std::vector<int> filler;
    for (int fd = ::dup(0); fd >= 0; fd = ::dup(0)) {
      filler.push_back(fd);
    }
    for (int i = 0; i < 3 && !filler.empty(); ++i) {
      ::close(filler.back());
      filler.pop_back();
    }
    (void)::write(ready[1], "r", 1);
    ::sleep(60);
    ::_exit(0);
  }
  ::close(listener);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  std::vector<int> clients;
  for (int i = 0; i < 20; ++i) {  // more than the child has descriptors for
    clients.push_back(ConnectTcp("127.0.0.1", port));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const long before = CpuTicks(child);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const long spent = CpuTicks(child) - before;
  std::printf("the proxy used %ld clock ticks of CPU in 1 s while out of descriptors\n", spent);
  EXPECT_LT(spent, 30) << "the proxy used " << spent << " ticks of CPU in 1 s while out of "
                       << "descriptors: it spins on accept";
  for (const int fd : clients) {
    ::close(fd);
  }
  // Served again: a request gets its refusal (the policy allows nothing).
  std::string response;
  for (int attempt = 0; attempt < 50 && response.empty(); ++attempt) {
    const int fd = ConnectTcp("127.0.0.1", port);
    SendAll(fd, "CONNECT x.test:1 HTTP/1.1\r\n\r\n");
    response = ReadAll(fd);
    ::close(fd);
    if (response.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  EXPECT_THAT(response, StartsWith("HTTP/1.1 403 Forbidden\r\n"));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace
}  // namespace cagent::launcher::egress

namespace cagent::launcher::egress {
namespace {

TEST_F(ProxyTest, UpstreamConnectTimeoutIs504) {
  // A listener that never accepts, its backlog filled: the next connect hangs in SYN retries.
  const int full = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const auto a = Addr("127.0.0.1", 0);
  ASSERT_EQ(::bind(full, reinterpret_cast<const ::sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(full, 0), 0);
  const std::uint16_t port = PortOf(full);
  std::vector<int> fillers;
  for (int i = 0; i < 8; ++i) {
    const int f = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const auto to = Addr("127.0.0.1", port);
    (void)::connect(f, reinterpret_cast<const ::sockaddr*>(&to), sizeof(to));
    fillers.push_back(f);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  policy_->Allow("slow.test");
  ProxyConfig config;
  config.overrides = {To127("slow.test", port)};
  config.connect_timeout = std::chrono::milliseconds(300);
  Start(config);
  const int c = Client();
  SendAll(c, "CONNECT slow.test:" + std::to_string(port) + " HTTP/1.1\r\n\r\n");
  const std::string response = ReadAll(c);
  ::close(c);
  for (const int f : fillers) {
    ::close(f);
  }
  ::close(full);
  if (response.rfind("HTTP/1.1 200", 0) == 0) {
    GTEST_SKIP() << "this kernel completed the connect despite the full backlog";
  }
  EXPECT_THAT(response, StartsWith("HTTP/1.1 504 Gateway Timeout\r\n"));
  EXPECT_THAT(response,
              HasSubstr("cagent: connecting to slow.test:" + std::to_string(port) + " timed out"));
  EXPECT_EQ(sink_.Wait().error, "connecting timed out after 300 ms");
}

}  // namespace
}  // namespace cagent::launcher::egress
