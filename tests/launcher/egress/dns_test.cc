#include "launcher/egress/dns.h"

#include <gtest/gtest.h>

#include <string>

#include "launcher/egress/socks5.h"
#include "tests/launcher/egress/egress_test_util.h"

namespace cagent::launcher::egress {
namespace {

// A query: id 0x1234, RD set, one question.
std::string Query(const std::string& name, std::uint16_t type, std::uint16_t id = 0x1234) {
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

int Rcode(const std::string& r) { return static_cast<std::uint8_t>(r[3]) & 0x0f; }
int Answers(const std::string& r) {
  return (static_cast<std::uint8_t>(r[6]) << 8) | static_cast<std::uint8_t>(r[7]);
}

class DnsTest : public ::testing::Test {
 protected:
  std::optional<std::string> Ask(const std::string& q) {
    return AnswerDnsQuery(
        q, [](std::string_view h) { return h == "pkgs.test" || h == "b.test"; }, table_);
  }
  SyntheticAddresses table_ = std::move(SyntheticAddresses::Create("127.77").value());
};

TEST_F(DnsTest, AGetsAStableSyntheticAddress) {
  const auto r = Ask(Query("Pkgs.Test", 1));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->substr(0, 2), "\x12\x34");
  EXPECT_EQ(static_cast<std::uint8_t>((*r)[2]) & 0x80, 0x80);  // QR
  EXPECT_EQ(static_cast<std::uint8_t>((*r)[2]) & 0x01, 0x01);  // RD echoed
  EXPECT_EQ(Rcode(*r), 0);
  ASSERT_EQ(Answers(*r), 1);
  const std::string q = Query("Pkgs.Test", 1);
  EXPECT_EQ(r->substr(12, q.size() - 12), q.substr(12)) << "the question is echoed, case kept";
  EXPECT_EQ(r->substr(r->size() - 4), std::string("\x7f\x4d\x00\x01", 4));  // 127.77.0.1
  // TTL 5
  EXPECT_EQ(r->substr(r->size() - 10, 4), std::string("\0\0\0\5", 4));
  // A second name gets the next address; the first keeps its own.
  const auto b = Ask(Query("b.test", 1, 7));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->substr(b->size() - 4), std::string("\x7f\x4d\x00\x02", 4));
  const auto again = Ask(Query("PKGS.test", 1));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->substr(again->size() - 4), std::string("\x7f\x4d\x00\x01", 4));
  EXPECT_EQ(table_.NameOf(boost::asio::ip::make_address_v4("127.77.0.1")), "pkgs.test");
  EXPECT_EQ(table_.NameOf(boost::asio::ip::make_address_v4("127.77.0.2")), "b.test");
  EXPECT_EQ(table_.NameOf(boost::asio::ip::make_address_v4("127.77.0.3")), std::nullopt);
  EXPECT_EQ(table_.NameOf(boost::asio::ip::make_address_v4("127.0.0.1")), std::nullopt);
}

TEST_F(DnsTest, AaaaAndOtherTypesAreEmptyAnswers) {
  for (std::uint16_t type : {28, 15, 16, 255}) {
    const auto r = Ask(Query("pkgs.test", type));
    ASSERT_TRUE(r);
    EXPECT_EQ(Rcode(*r), 0) << type;
    EXPECT_EQ(Answers(*r), 0) << type;
  }
}

TEST_F(DnsTest, OtherNamesAreNxdomain) {
  const auto r = Ask(Query("evil.test", 1, 0xbeef));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->substr(0, 2), "\xbe\xef");
  EXPECT_EQ(Rcode(*r), 3);
  EXPECT_EQ(Answers(*r), 0);
  EXPECT_EQ(table_.NameOf(boost::asio::ip::make_address_v4("127.77.0.1")), std::nullopt)
      << "a refused name is given no address";
}

TEST_F(DnsTest, Malformed) {
  EXPECT_FALSE(Ask("short"));
  std::string response = Query("pkgs.test", 1);
  response[2] = static_cast<char>(0x81);  // QR set: a response, dropped
  EXPECT_FALSE(Ask(response));
  std::string two = Query("pkgs.test", 1);
  two[5] = 2;  // QDCOUNT 2
  ASSERT_TRUE(Ask(two));
  EXPECT_EQ(Rcode(*Ask(two)), 1);
  const std::string q = Query("pkgs.test", 1);
  for (std::size_t n = 12; n < q.size(); ++n) {
    const auto r = Ask(q.substr(0, n));
    ASSERT_TRUE(r) << n;
    EXPECT_EQ(Rcode(*r), 1) << n;
  }
  std::string compressed = q.substr(0, 12) + "\xc0\x0c" + q.substr(q.size() - 4);
  EXPECT_EQ(Rcode(*Ask(compressed)), 1);
  std::string opcode = q;
  opcode[2] = static_cast<char>(0x10);  // opcode 2 (STATUS)
  EXPECT_EQ(Rcode(*Ask(opcode)), 4);
  std::string chaos = q;
  chaos[chaos.size() - 1] = 3;  // class CH
  EXPECT_EQ(Rcode(*Ask(chaos)), 5);
  EXPECT_EQ(Rcode(*Ask(q + "junk")), 1);
}

TEST(SyntheticAddressesTest, PrefixMustBeTwoOctets) {
  EXPECT_FALSE(SyntheticAddresses::Create("127").ok());
  EXPECT_FALSE(SyntheticAddresses::Create("127.77.1").ok());
  EXPECT_FALSE(SyntheticAddresses::Create("127.300").ok());
  EXPECT_TRUE(SyntheticAddresses::Create("127.78").ok());
}

TEST(SyntheticAddressesTest, RunsOutAfter65534) {
  auto t = std::move(SyntheticAddresses::Create("127.77").value());
  for (int i = 0; i < 65534; ++i) {
    ASSERT_TRUE(t.Assign("n" + std::to_string(i))) << i;
  }
  EXPECT_EQ(t.Assign("n65533")->to_string(), "127.77.255.254");
  EXPECT_FALSE(t.Assign("one-more"));
}

TEST(Socks5Test, GreetingAndRequest) {
  auto g = ParseSocks5Greeting(std::string("\x05\x02\x02\x00", 4));
  EXPECT_EQ(g.status, Socks5Status::kComplete);
  EXPECT_TRUE(g.no_auth);
  EXPECT_EQ(g.size, 4U);
  g = ParseSocks5Greeting(std::string("\x05\x01\x02", 3));
  EXPECT_FALSE(g.no_auth);
  EXPECT_EQ(ParseSocks5Greeting(std::string("\x05\x02\x00", 3)).status, Socks5Status::kIncomplete);
  EXPECT_EQ(ParseSocks5Greeting("\x04").status, Socks5Status::kMalformed);

  const std::string domain = std::string("\x05\x01\x00\x03\x09pkgs.test\x01\xbb", 16);
  for (std::size_t n = 0; n < domain.size(); ++n) {
    EXPECT_EQ(ParseSocks5Request(domain.substr(0, n)).status, Socks5Status::kIncomplete) << n;
  }
  auto r = ParseSocks5Request(domain);
  ASSERT_EQ(r.status, Socks5Status::kComplete);
  EXPECT_EQ(r.host, "pkgs.test");
  EXPECT_EQ(r.port, 443);
  r = ParseSocks5Request(std::string("\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50", 10));
  EXPECT_EQ(r.host, "127.0.0.1");
  EXPECT_EQ(r.port, 80);
  std::string v6("\x05\x01\x00\x04", 4);
  v6 += std::string(15, '\0') + "\x01" + std::string("\x00\x16", 2);
  r = ParseSocks5Request(v6);
  EXPECT_EQ(r.host, "::1");
  EXPECT_EQ(r.port, 22);
  r = ParseSocks5Request(std::string("\x05\x01\x00\x05\x00\x00", 6));
  EXPECT_EQ(r.status, Socks5Status::kMalformed);
  EXPECT_EQ(r.reply, kSocksAddressTypeNotSupported);
  r = ParseSocks5Request(std::string("\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50", 10));
  EXPECT_EQ(r.status, Socks5Status::kComplete);
  EXPECT_EQ(r.command, 2);  // BIND: the proxy replies "command not supported"
  EXPECT_EQ(Socks5Reply(kSocksNotAllowed), std::string("\x05\x02\x00\x01\0\0\0\0\0\0", 10));
}

}  // namespace
}  // namespace cagent::launcher::egress
