// The DNS stub served on its own, as for a sandbox without network beyond loopback (issue #32):
// no proxy listener, a policy that resolves nothing, real queries over UDP and TCP (RFC 7766
// framing) to sockets the test made, as the launcher makes them inside the sandbox. Every name is
// NXDOMAIN at once, each refused lookup is reported, and hostile clients are cut off without
// harming the next one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "launcher/egress/proxy.h"
#include "tests/launcher/egress/egress_test_util.h"

namespace cagent::launcher::egress {
namespace {

// A query: `id`, RD set, one question of `type` class IN.
std::string Query(const std::string& name, std::uint16_t type, std::uint16_t id) {
  std::string q;
  Put16(q, id);
  Put16(q, 0x0100);  // RD
  Put16(q, 1);
  Put16(q, 0);
  Put16(q, 0);
  Put16(q, 0);
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t dot = name.find('.', start);
    const std::string label =
        name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    q.push_back(static_cast<char>(label.size()));
    q += label;
    if (dot == std::string::npos) {
      break;
    }
    start = dot + 1;
  }
  q.push_back(0);
  Put16(q, type);
  Put16(q, 1);
  return q;
}

std::string Framed(const std::string& message) {
  std::string out;
  Put16(out, message.size());
  return out + message;
}

unsigned Byte(const std::string& r, std::size_t i) { return static_cast<std::uint8_t>(r[i]); }
unsigned U16At(const std::string& r, std::size_t i) { return (Byte(r, i) << 8U) | Byte(r, i + 1); }

// The header and question of a reply to Query(name, type, id) that the stub refused.
void ExpectNxdomain(const std::string& reply, const std::string& query, std::uint16_t id) {
  ASSERT_GE(reply.size(), query.size()) << "a reply echoes the question";
  EXPECT_EQ(U16At(reply, 0), id) << "the id is echoed";
  EXPECT_EQ(Byte(reply, 2) & 0x80U, 0x80U) << "QR: a response";
  EXPECT_EQ(Byte(reply, 2) & 0x78U, 0U) << "opcode QUERY";
  EXPECT_EQ(Byte(reply, 2) & 0x04U, 0x04U) << "AA: the stub is the authority for the sandbox";
  EXPECT_EQ(Byte(reply, 2) & 0x02U, 0U) << "TC: never truncated";
  EXPECT_EQ(Byte(reply, 2) & 0x01U, 0x01U) << "RD echoed";
  EXPECT_EQ(Byte(reply, 3) & 0x0fU, 3U) << "RCODE NXDOMAIN";
  EXPECT_EQ(U16At(reply, 4), 1U) << "QDCOUNT";
  EXPECT_EQ(U16At(reply, 6), 0U) << "ANCOUNT";
  EXPECT_EQ(U16At(reply, 8), 0U) << "NSCOUNT";
  EXPECT_EQ(U16At(reply, 10), 0U) << "ARCOUNT";
  EXPECT_EQ(reply.substr(12), query.substr(12)) << "the question, as asked (case kept)";
}

class DnsStubTest : public ::testing::Test {
 protected:
  void SetUp() override { policy_ = std::make_shared<FakePolicy>(); }
  void TearDown() override {
    if (proxy_) {
      proxy_->Stop();
    }
  }

  // Serves the stub alone on a fresh UDP socket and TCP listener on 127.0.0.1.
  void Start(std::chrono::milliseconds head_timeout = std::chrono::milliseconds(10000)) {
    const int udp = BindUdp("127.0.0.1");
    const int tcp = ListenTcp("127.0.0.1");
    ASSERT_GE(udp, 0);
    ASSERT_GE(tcp, 0);
    udp_port_ = PortOf(udp);
    tcp_port_ = PortOf(tcp);
    ProxyConfig config;
    config.dns_fd = udp;
    config.dns_tcp_fd = tcp;
    config.head_timeout = head_timeout;
    config.on_lookup_refused = [this](const std::string& name) {
      const std::lock_guard<std::mutex> lock(mu_);
      refused_.push_back(name);
    };
    auto started = Proxy::Start(std::move(config), policy_, nullptr);
    ASSERT_TRUE(started.ok()) << started.error().Message();
    proxy_ = std::move(started.value());
  }

  // One datagram to the stub and its answer ("" when none came within `timeout_ms`).
  std::string AskUdp(const std::string& query, int timeout_ms = 5000) const {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    SetTimeout(fd, timeout_ms);
    const auto a = Addr("127.0.0.1", udp_port_);
    ::sendto(fd, query.data(), query.size(), 0, reinterpret_cast<const ::sockaddr*>(&a), sizeof(a));
    std::string r(1024, '\0');
    const ssize_t n = ::recv(fd, r.data(), r.size(), 0);
    ::close(fd);
    r.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return r;
  }

  // Reads one length-prefixed reply from a TCP connection ("" at EOF or timeout).
  static std::string ReadFramed(int fd) {
    std::string len(2, '\0');
    if (::recv(fd, len.data(), 2, MSG_WAITALL) != 2) {
      return "";
    }
    std::string r(U16At(len, 0), '\0');
    if (::recv(fd, r.data(), r.size(), MSG_WAITALL) != static_cast<ssize_t>(r.size())) {
      return "";
    }
    return r;
  }

  std::vector<std::string> refused() {
    const std::lock_guard<std::mutex> lock(mu_);
    return refused_;
  }

  std::shared_ptr<FakePolicy> policy_;
  std::unique_ptr<Proxy> proxy_;
  std::uint16_t udp_port_ = 0;
  std::uint16_t tcp_port_ = 0;
  std::mutex mu_;
  std::vector<std::string> refused_;
};

TEST_F(DnsStubTest, AUdpQueryIsNxdomainAndReported) {
  Start();
  const std::string q = Query("Registry.NPMJS.org", 1, 0xabcd);
  const std::string r = AskUdp(q);
  ExpectNxdomain(r, q, 0xabcd);
  const std::string q6 = Query("registry.npmjs.org", 28, 0x0102);  // AAAA
  ExpectNxdomain(AskUdp(q6), q6, 0x0102);
  EXPECT_THAT(refused(), ::testing::ElementsAre("registry.npmjs.org", "registry.npmjs.org"))
      << "each refused query is reported, by its normalized name";
}

TEST_F(DnsStubTest, AnAllowedNameGetsAnAddressInstead) {
  // The twin: the same query to the same stub gets an answer when the policy lets the name
  // resolve, so the NXDOMAIN above is the policy's, not a broken stub's.
  policy_->Allow("registry.npmjs.org");
  Start();
  const std::string r = AskUdp(Query("registry.npmjs.org", 1, 7));
  ASSERT_GE(r.size(), 16U);
  EXPECT_EQ(Byte(r, 3) & 0x0fU, 0U) << "NOERROR";
  EXPECT_EQ(U16At(r, 6), 1U) << "one answer";
  EXPECT_TRUE(refused().empty());
}

TEST_F(DnsStubTest, TcpQueriesAreAnsweredInTurnOnOneConnection) {
  Start();
  const int c = ConnectTcp("127.0.0.1", tcp_port_);
  ASSERT_GE(c, 0);
  const std::string q1 = Query("example.com", 1, 1);
  const std::string q2 = Query("pypi.org", 28, 2);
  // Pipelined in one write, then a third sent a byte at a time.
  ASSERT_TRUE(SendAll(c, Framed(q1) + Framed(q2)));
  ExpectNxdomain(ReadFramed(c), q1, 1);
  ExpectNxdomain(ReadFramed(c), q2, 2);
  const std::string q3 = Framed(Query("github.com", 1, 3));
  for (const char b : q3) {
    ASSERT_TRUE(SendAll(c, std::string(1, b)));
  }
  ExpectNxdomain(ReadFramed(c), q3.substr(2), 3);
  ::close(c);
  EXPECT_THAT(refused(), ::testing::ElementsAre("example.com", "pypi.org", "github.com"));
}

TEST_F(DnsStubTest, HostileTcpClientsAreCutOffAndTheNextIsServed) {
  Start(std::chrono::milliseconds(300));
  struct Case {
    const char* what;
    std::string bytes;
  };
  std::string response = Query("example.com", 1, 9);
  response[2] = static_cast<char>(0x81);  // QR set
  const std::vector<Case> cases = {
      {"a zero length", std::string("\0\0", 2)},
      {"a length beyond any query", std::string("\xff\xff", 2) + std::string(100, 'x')},
      {"a length longer than what follows", std::string("\x00\x40", 2) + "short"},
      {"a response instead of a query", Framed(response)},
      {"shorter than a header", Framed("tiny")},
      {"half a length", std::string("\x00", 1)},
      {"nothing at all", ""},
  };
  for (const Case& k : cases) {
    const int c = ConnectTcp("127.0.0.1", tcp_port_);
    ASSERT_GE(c, 0) << k.what;
    ASSERT_TRUE(SendAll(c, k.bytes)) << k.what;
    int err = 0;
    // The stub closes (at once, or after the 300 ms head timeout for a client that stops short)
    // and sends no answer.
    EXPECT_EQ(ReadAll(c, &err), "") << k.what;
    ::close(c);
  }
  // Malformed but a query: FORMERR, and the connection stays usable.
  const int c = ConnectTcp("127.0.0.1", tcp_port_);
  ASSERT_GE(c, 0);
  std::string junk = Query("example.com", 1, 5);
  junk += "trailing junk";
  ASSERT_TRUE(SendAll(c, Framed(junk)));
  const std::string formerr = ReadFramed(c);
  ASSERT_GE(formerr.size(), 12U);
  EXPECT_EQ(U16At(formerr, 0), 5U);
  EXPECT_EQ(Byte(formerr, 3) & 0x0fU, 1U) << "FORMERR";
  const std::string q = Query("example.com", 1, 6);
  ASSERT_TRUE(SendAll(c, Framed(q)));
  ExpectNxdomain(ReadFramed(c), q, 6);
  ::close(c);
  // And over UDP too, after all that.
  ExpectNxdomain(AskUdp(q), q, 6);
}

TEST_F(DnsStubTest, GarbageDatagramsNeverStopTheStub) {
  Start();
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const auto a = Addr("127.0.0.1", udp_port_);
  std::uint32_t seed = 12345;
  for (int i = 0; i < 2000; ++i) {
    std::string d(static_cast<std::size_t>(i % 300), '\0');
    for (char& ch : d) {
      seed = seed * 1103515245U + 12345U;
      ch = static_cast<char>(seed >> 16U);
    }
    ::sendto(fd, d.data(), d.size(), 0, reinterpret_cast<const ::sockaddr*>(&a), sizeof(a));
  }
  ::close(fd);
  // A flood fills the socket's receive buffer, and UDP drops what does not fit, ours included
  // while the stub works through the backlog: ask again as a resolver would, until it answers.
  const std::string q = Query("example.com", 1, 0x7777);
  std::string r;
  for (int attempt = 0; attempt < 20 && r.empty(); ++attempt) {
    r = AskUdp(q, 500);
  }
  ExpectNxdomain(r, q, 0x7777);
}

TEST_F(DnsStubTest, StopClosesOpenTcpConnections) {
  Start();
  const int c = ConnectTcp("127.0.0.1", tcp_port_);
  ASSERT_GE(c, 0);
  const std::string q = Query("example.com", 1, 1);
  ASSERT_TRUE(SendAll(c, Framed(q)));
  ExpectNxdomain(ReadFramed(c), q, 1);
  proxy_->Stop();
  EXPECT_EQ(ReadAll(c), "") << "the connection is closed, not left hanging";
  ::close(c);
}

}  // namespace
}  // namespace cagent::launcher::egress
