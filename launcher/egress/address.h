// Address classification for the egress proxy: which addresses a destination may resolve into
// without a rule naming them (docs/threat-model.md, DNS rebinding). Pure; no syscalls.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <string_view>

namespace cagent::launcher::egress {

// What kind of address an IP address is. Only kPublic may be reached through a name; every other
// class needs a rule that names the address itself (Policy::AddressNamed).
enum class AddressClass : std::uint8_t {
  kPublic,
  kLoopback,     // 127/8, ::1
  kPrivate,      // 10/8, 172.16/12, 192.168/16, 100.64/10 (CGNAT), fc00::/7, fec0::/10
  kLinkLocal,    // 169.254/16, fe80::/10
  kMetadata,     // cloud metadata services: 169.254.169.254, 168.63.129.16, fd00:ec2::254
  kUnspecified,  // 0/8, ::
  kMulticast,    // 224/4, ff00::/8
  kReserved,     // 240/4 (and broadcast), 192.0.0/24, the documentation and benchmark ranges, ...
};

// The class of `address`. An IPv4-mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::/96) or 6to4
// (2002::/16) IPv6 address is classified by the IPv4 address it carries, so ::ffff:127.0.0.1 is
// loopback.
[[nodiscard]] AddressClass Classify(const boost::asio::ip::address& address);

// "a loopback address", "a cloud metadata address", ...: the class with its article, for reasons.
[[nodiscard]] std::string_view AddressClassPhrase(AddressClass c);

}  // namespace cagent::launcher::egress
