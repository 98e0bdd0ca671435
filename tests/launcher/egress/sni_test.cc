#include "launcher/egress/sni.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tests/launcher/egress/egress_test_util.h"

namespace cagent::launcher::egress {
namespace {

using Status = ClientHelloScan::Status;

// A ClientHello that `openssl s_client -servername Pkgs.Example.` (OpenSSL 3.0) sent, captured by
// a dumping server on loopback.
const std::string kOpensslHello = FromHex(
    "160301013a010001360303972e6ccbf7a60b4368bac2db5ff38f1c32bb215c163be20815ce63ee481f575e20"
    "71aa9257456c6347abfa9df0158cf6d6783dc78cc9ce7f91911b7550e4948840003e130213031301c02cc030"
    "009fcca9cca8ccaac02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d009c003d"
    "003c0035002f00ff010000af00000012001000000d506b67732e4578616d706c652e000b000403000102000a"
    "00160014001d0017001e0019001801000101010201030104002300000016000000170000000d002a00280403"
    "05030603080708080809080a080b080408050806040105010601030303010302040205020602002b00090803"
    "04030303020301002d00020101003300260024001d00200ac6deaf42ca50c6ee229c84e0ceb4f30434bd3bc6"
    "033b20f9e63bb6392c726d");

TEST(SniTest, ARealClientHello) {
  const ClientHelloScan scan = ScanClientHello(kOpensslHello);
  ASSERT_EQ(scan.status, Status::kClientHello);
  EXPECT_EQ(scan.server_name, "pkgs.example");
}

TEST(SniTest, EveryTruncationOfARealHelloIsIncomplete) {
  for (std::size_t n = 0; n < kOpensslHello.size(); ++n) {
    EXPECT_EQ(ScanClientHello(kOpensslHello.substr(0, n)).status, Status::kIncomplete) << n;
  }
}

TEST(SniTest, BuiltHelloWithAndWithoutSni) {
  EXPECT_EQ(ScanClientHello(BuildClientHello("up.test")).server_name, "up.test");
  const ClientHelloScan none = ScanClientHello(BuildClientHello(""));
  EXPECT_EQ(none.status, Status::kClientHello);
  EXPECT_EQ(none.server_name, "");
}

TEST(SniTest, EveryTruncationOfABuiltHelloIsIncomplete) {
  const std::string hello = BuildClientHello("a-rather-long-name.example.org");
  for (std::size_t n = 0; n < hello.size(); ++n) {
    EXPECT_EQ(ScanClientHello(hello.substr(0, n)).status, Status::kIncomplete) << n;
  }
}

TEST(SniTest, AHelloSplitOverTwoRecords) {
  const std::string hello = BuildClientHello("split.test");
  // Re-frame the handshake message into two records of 20 bytes and the rest.
  const std::string handshake = hello.substr(5);
  auto record = [](const std::string& fragment) {
    std::string r = {22, 3, 1};
    r.push_back(static_cast<char>(fragment.size() >> 8U));
    r.push_back(static_cast<char>(fragment.size() & 0xffU));
    return r + fragment;
  };
  const std::string two = record(handshake.substr(0, 20)) + record(handshake.substr(20));
  EXPECT_EQ(ScanClientHello(two).server_name, "split.test");
  EXPECT_EQ(ScanClientHello(two.substr(0, 30)).status, Status::kIncomplete);
}

TEST(SniTest, NotTls) {
  EXPECT_EQ(ScanClientHello("GET / HTTP/1.1\r\n\r\n").status, Status::kNotClientHello);
  EXPECT_EQ(ScanClientHello("SSH-2.0-OpenSSH_9.2\r\n").status, Status::kNotClientHello);
  EXPECT_EQ(ScanClientHello(std::string("\x16\x02", 2)).status, Status::kNotClientHello);
  // A handshake record that is not a ClientHello (a ServerHello, type 2).
  std::string server_hello = BuildClientHello("x.test");
  server_hello[5] = 2;
  EXPECT_EQ(ScanClientHello(server_hello).status, Status::kNotClientHello);
  // An alert record.
  std::string alert = BuildClientHello("x.test");
  alert[0] = 21;
  EXPECT_EQ(ScanClientHello(alert).status, Status::kNotClientHello);
}

TEST(SniTest, LengthsThatLieAreNotAClientHello) {
  const std::string good = BuildClientHello("liar.test");
  // Every single byte of the body flipped to 0xff: never a crash, never reading past the end
  // (the sanitizer build checks), and never a different name unless the name bytes changed.
  for (std::size_t i = 9; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(0xff);
    const ClientHelloScan scan = ScanClientHello(bad);
    if (scan.status == Status::kClientHello && !scan.server_name.empty()) {
      EXPECT_EQ(scan.server_name, "liar.test") << i;
    }
  }
}

TEST(SniTest, TwoHostNamesAreRefused) {
  const std::string hello = BuildClientHello("one.test", "two.test");
  EXPECT_EQ(ScanClientHello(hello).status, Status::kNotClientHello);
}

TEST(SniTest, ANameWithBytesNoHostHasIsRefused) {
  EXPECT_EQ(ScanClientHello(BuildClientHello(std::string("a\0b.test", 8))).status,
            Status::kNotClientHello);
  EXPECT_EQ(ScanClientHello(BuildClientHello("a b.test")).status, Status::kNotClientHello);
}

}  // namespace
}  // namespace cagent::launcher::egress
