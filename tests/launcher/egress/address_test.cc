#include "launcher/egress/address.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace cagent::launcher::egress {
namespace {

AddressClass Of(const std::string& text) { return Classify(boost::asio::ip::make_address(text)); }

TEST(ClassifyTest, EveryRange) {
  const std::vector<std::pair<std::string, AddressClass>> table = {
      {"8.8.8.8", AddressClass::kPublic},
      {"1.1.1.1", AddressClass::kPublic},
      {"151.101.0.223", AddressClass::kPublic},
      {"0.0.0.0", AddressClass::kUnspecified},
      {"0.1.2.3", AddressClass::kUnspecified},
      {"10.0.0.1", AddressClass::kPrivate},
      {"10.255.255.255", AddressClass::kPrivate},
      {"11.0.0.1", AddressClass::kPublic},
      {"100.64.0.1", AddressClass::kPrivate},
      {"100.127.255.255", AddressClass::kPrivate},
      {"100.128.0.0", AddressClass::kPublic},
      {"127.0.0.1", AddressClass::kLoopback},
      {"127.77.0.1", AddressClass::kLoopback},
      {"127.255.255.255", AddressClass::kLoopback},
      {"169.254.0.1", AddressClass::kLinkLocal},
      {"169.254.169.254", AddressClass::kMetadata},
      {"168.63.129.16", AddressClass::kMetadata},
      {"172.15.255.255", AddressClass::kPublic},
      {"172.16.0.1", AddressClass::kPrivate},
      {"172.31.255.255", AddressClass::kPrivate},
      {"172.32.0.0", AddressClass::kPublic},
      {"192.0.0.8", AddressClass::kReserved},
      {"192.0.2.1", AddressClass::kReserved},
      {"192.88.99.1", AddressClass::kReserved},
      {"192.168.1.1", AddressClass::kPrivate},
      {"192.169.0.1", AddressClass::kPublic},
      {"198.18.0.1", AddressClass::kReserved},
      {"198.19.255.255", AddressClass::kReserved},
      {"198.20.0.0", AddressClass::kPublic},
      {"198.51.100.1", AddressClass::kReserved},
      {"203.0.113.1", AddressClass::kReserved},
      {"224.0.0.1", AddressClass::kMulticast},
      {"239.255.255.250", AddressClass::kMulticast},
      {"240.0.0.1", AddressClass::kReserved},
      {"255.255.255.255", AddressClass::kReserved},
      {"::", AddressClass::kUnspecified},
      {"::1", AddressClass::kLoopback},
      {"::ffff:127.0.0.1", AddressClass::kLoopback},
      {"::ffff:10.1.2.3", AddressClass::kPrivate},
      {"::ffff:169.254.169.254", AddressClass::kMetadata},
      {"::ffff:8.8.8.8", AddressClass::kPublic},
      {"64:ff9b::7f00:1", AddressClass::kLoopback},
      {"64:ff9b::808:808", AddressClass::kPublic},
      {"64:ff9b:1::1", AddressClass::kPrivate},
      {"2002:7f00:1::1", AddressClass::kLoopback},
      {"2002:808:808::1", AddressClass::kPublic},
      {"::127.0.0.1", AddressClass::kReserved},
      {"fe80::1", AddressClass::kLinkLocal},
      {"febf::1", AddressClass::kLinkLocal},
      {"fec0::1", AddressClass::kPrivate},
      {"fc00::1", AddressClass::kPrivate},
      {"fd12:3456::1", AddressClass::kPrivate},
      {"fd00:ec2::254", AddressClass::kMetadata},
      {"fd00:ec2::253", AddressClass::kPrivate},
      {"ff02::1", AddressClass::kMulticast},
      {"2001:db8::1", AddressClass::kReserved},
      {"100::1", AddressClass::kReserved},
      {"2606:4700::6810:84e5", AddressClass::kPublic},
      {"2a00:1450:4001:80b::200e", AddressClass::kPublic},
  };
  for (const auto& [text, want] : table) {
    EXPECT_EQ(Of(text), want) << text << " is classified " << AddressClassPhrase(Of(text))
                              << ", expected " << AddressClassPhrase(want);
  }
}

TEST(ClassifyTest, PhrasesCarryTheirArticle) {
  EXPECT_EQ(AddressClassPhrase(AddressClass::kLoopback), "a loopback address");
  EXPECT_EQ(AddressClassPhrase(AddressClass::kUnspecified), "an unspecified address");
  EXPECT_EQ(AddressClassPhrase(AddressClass::kMetadata), "a cloud metadata address");
}

}  // namespace
}  // namespace cagent::launcher::egress
