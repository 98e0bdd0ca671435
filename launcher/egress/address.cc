#include "launcher/egress/address.h"

#include <array>

namespace cagent::launcher::egress {
namespace {

namespace ip = boost::asio::ip;

// Whether the top `bits` bits of `a` equal those of `net`.
bool InV4(std::uint32_t a, std::uint32_t net, int bits) {
  const std::uint32_t mask = bits == 0 ? 0U : ~std::uint32_t{0} << (32 - bits);
  return (a & mask) == (net & mask);
}

constexpr std::uint32_t V4(std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t d) {
  return (a << 24U) | (b << 16U) | (c << 8U) | d;
}

AddressClass ClassifyV4(std::uint32_t a) {
  if (a == V4(169, 254, 169, 254) || a == V4(168, 63, 129, 16)) {
    return AddressClass::kMetadata;
  }
  if (InV4(a, V4(0, 0, 0, 0), 8)) {
    return AddressClass::kUnspecified;
  }
  if (InV4(a, V4(127, 0, 0, 0), 8)) {
    return AddressClass::kLoopback;
  }
  if (InV4(a, V4(10, 0, 0, 0), 8) || InV4(a, V4(172, 16, 0, 0), 12) ||
      InV4(a, V4(192, 168, 0, 0), 16) || InV4(a, V4(100, 64, 0, 0), 10)) {
    return AddressClass::kPrivate;
  }
  if (InV4(a, V4(169, 254, 0, 0), 16)) {
    return AddressClass::kLinkLocal;
  }
  if (InV4(a, V4(224, 0, 0, 0), 4)) {
    return AddressClass::kMulticast;
  }
  if (InV4(a, V4(240, 0, 0, 0), 4) || InV4(a, V4(192, 0, 0, 0), 24) ||
      InV4(a, V4(192, 0, 2, 0), 24) || InV4(a, V4(192, 88, 99, 0), 24) ||
      InV4(a, V4(198, 18, 0, 0), 15) || InV4(a, V4(198, 51, 100, 0), 24) ||
      InV4(a, V4(203, 0, 113, 0), 24)) {
    return AddressClass::kReserved;
  }
  return AddressClass::kPublic;
}

// Whether the top `bits` bits of `b` equal `prefix` (given as its leading bytes).
template <std::size_t N>
bool InV6(const ip::address_v6::bytes_type& b, const std::array<std::uint8_t, N>& prefix,
          int bits) {
  for (int i = 0; i < bits; ++i) {
    const auto byte = static_cast<std::size_t>(i / 8);
    const auto bit = static_cast<unsigned>(7 - (i % 8));
    const unsigned want = byte < N ? (prefix[byte] >> bit) & 1U : 0U;
    if (((b[byte] >> bit) & 1U) != want) {
      return false;
    }
  }
  return true;
}

std::uint32_t V4At(const ip::address_v6::bytes_type& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24U) | (std::uint32_t{b[at + 1]} << 16U) |
         (std::uint32_t{b[at + 2]} << 8U) | std::uint32_t{b[at + 3]};
}

AddressClass ClassifyV6(const ip::address_v6& v6) {
  const auto b = v6.to_bytes();
  if (v6.is_v4_mapped()) {
    return ClassifyV4(V4At(b, 12));
  }
  if (InV6(b, std::array<std::uint8_t, 12>{0x00, 0x64, 0xff, 0x9b}, 96)) {  // NAT64
    return ClassifyV4(V4At(b, 12));
  }
  if (InV6(b, std::array<std::uint8_t, 2>{0x20, 0x02}, 16)) {  // 6to4
    return ClassifyV4(V4At(b, 2));
  }
  if (v6.is_unspecified()) {
    return AddressClass::kUnspecified;
  }
  if (v6.is_loopback()) {
    return AddressClass::kLoopback;
  }
  const std::array<std::uint8_t, 16> ec2{0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0,    0,
                                         0,    0,    0,    0,    0, 0, 0x02, 0x54};
  if (InV6(b, ec2, 128)) {
    return AddressClass::kMetadata;
  }
  if (InV6(b, std::array<std::uint8_t, 1>{0xfc}, 7) ||
      InV6(b, std::array<std::uint8_t, 2>{0xfe, 0xc0}, 10) ||
      InV6(b, std::array<std::uint8_t, 6>{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48)) {
    return AddressClass::kPrivate;
  }
  if (InV6(b, std::array<std::uint8_t, 2>{0xfe, 0x80}, 10)) {
    return AddressClass::kLinkLocal;
  }
  if (InV6(b, std::array<std::uint8_t, 1>{0xff}, 8)) {
    return AddressClass::kMulticast;
  }
  if (InV6(b, std::array<std::uint8_t, 1>{0x00}, 8) ||  // ::/8 (v4-compatible and the rest)
      InV6(b, std::array<std::uint8_t, 4>{0x20, 0x01, 0x0d, 0xb8}, 32) ||
      InV6(b, std::array<std::uint8_t, 2>{0x01, 0x00}, 64)) {
    return AddressClass::kReserved;
  }
  return AddressClass::kPublic;
}

}  // namespace

AddressClass Classify(const boost::asio::ip::address& address) {
  if (address.is_v4()) {
    return ClassifyV4(address.to_v4().to_uint());
  }
  return ClassifyV6(address.to_v6());
}

std::string_view AddressClassPhrase(AddressClass c) {
  switch (c) {
    case AddressClass::kPublic:
      return "a public address";
    case AddressClass::kLoopback:
      return "a loopback address";
    case AddressClass::kPrivate:
      return "a private address";
    case AddressClass::kLinkLocal:
      return "a link-local address";
    case AddressClass::kMetadata:
      return "a cloud metadata address";
    case AddressClass::kUnspecified:
      return "an unspecified address";
    case AddressClass::kMulticast:
      return "a multicast address";
    case AddressClass::kReserved:
      return "a reserved address";
  }
  return "an address";
}

}  // namespace cagent::launcher::egress
