#include "launcher/egress/socks5.h"

#include <array>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/address_v6.hpp>

namespace cagent::launcher::egress {
namespace {

std::uint8_t Byte(std::string_view d, std::size_t i) { return static_cast<std::uint8_t>(d[i]); }

}  // namespace

Socks5Greeting ParseSocks5Greeting(std::string_view data) {
  Socks5Greeting g;
  if (data.empty()) {
    return g;
  }
  if (Byte(data, 0) != 5) {
    g.status = Socks5Status::kMalformed;
    return g;
  }
  if (data.size() < 2) {
    return g;
  }
  const std::size_t n = Byte(data, 1);
  if (data.size() < 2 + n) {
    return g;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (Byte(data, 2 + i) == 0) {
      g.no_auth = true;
    }
  }
  g.size = 2 + n;
  g.status = Socks5Status::kComplete;
  return g;
}

Socks5Request ParseSocks5Request(std::string_view data) {
  Socks5Request r;
  if (data.size() < 4) {
    if (!data.empty() && Byte(data, 0) != 5) {
      r.status = Socks5Status::kMalformed;
      r.reply = kSocksGeneralFailure;
    }
    return r;
  }
  if (Byte(data, 0) != 5 || Byte(data, 2) != 0) {
    r.status = Socks5Status::kMalformed;
    r.reply = kSocksGeneralFailure;
    return r;
  }
  r.command = Byte(data, 1);
  const std::uint8_t atyp = Byte(data, 3);
  std::size_t addr_len = 0;
  std::size_t at = 4;
  if (atyp == 1) {
    addr_len = 4;
  } else if (atyp == 4) {
    addr_len = 16;
  } else if (atyp == 3) {
    if (data.size() < 5) {
      return r;
    }
    addr_len = Byte(data, 4);
    at = 5;
    if (addr_len == 0) {
      r.status = Socks5Status::kMalformed;
      r.reply = kSocksHostUnreachable;
      return r;
    }
  } else {
    r.status = Socks5Status::kMalformed;
    r.reply = kSocksAddressTypeNotSupported;
    return r;
  }
  if (data.size() < at + addr_len + 2) {
    return r;
  }
  const std::string_view addr = data.substr(at, addr_len);
  if (atyp == 1) {
    std::array<unsigned char, 4> b{};
    for (std::size_t i = 0; i < 4; ++i) {
      b[i] = static_cast<unsigned char>(addr[i]);
    }
    r.host = boost::asio::ip::address_v4(b).to_string();
  } else if (atyp == 4) {
    std::array<unsigned char, 16> b{};
    for (std::size_t i = 0; i < 16; ++i) {
      b[i] = static_cast<unsigned char>(addr[i]);
    }
    r.host = boost::asio::ip::address_v6(b).to_string();
  } else {
    r.host = addr;
  }
  r.port =
      static_cast<std::uint16_t>((Byte(data, at + addr_len) << 8U) | Byte(data, at + addr_len + 1));
  r.size = at + addr_len + 2;
  r.status = Socks5Status::kComplete;
  return r;
}

std::string Socks5Reply(std::uint8_t code) {
  std::string out = {5, static_cast<char>(code), 0, 1, 0, 0, 0, 0, 0, 0};
  return out;
}

}  // namespace cagent::launcher::egress
