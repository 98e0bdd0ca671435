// The SOCKS5 handshake (RFC 1928) the egress proxy reads from the sandboxed client: the method
// greeting and the request. Pure and bounded; only "no authentication" and CONNECT are served.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cagent::launcher::egress {

enum class Socks5Status : std::uint8_t { kComplete, kIncomplete, kMalformed };

// The reply codes of RFC 1928 section 6 that the proxy sends.
inline constexpr std::uint8_t kSocksSucceeded = 0x00;
inline constexpr std::uint8_t kSocksGeneralFailure = 0x01;
inline constexpr std::uint8_t kSocksNotAllowed = 0x02;
inline constexpr std::uint8_t kSocksHostUnreachable = 0x04;
inline constexpr std::uint8_t kSocksConnectionRefused = 0x05;
inline constexpr std::uint8_t kSocksTtlExpired = 0x06;
inline constexpr std::uint8_t kSocksCommandNotSupported = 0x07;
inline constexpr std::uint8_t kSocksAddressTypeNotSupported = 0x08;

struct Socks5Greeting {
  Socks5Status status = Socks5Status::kIncomplete;
  std::size_t size = 0;  // bytes consumed
  bool no_auth = false;  // the client offers method 0x00
};

// VER(5) NMETHODS METHODS...
[[nodiscard]] Socks5Greeting ParseSocks5Greeting(std::string_view data);

struct Socks5Request {
  Socks5Status status = Socks5Status::kIncomplete;
  std::size_t size = 0;                  // bytes consumed
  std::uint8_t command = 0;              // 1 = CONNECT
  std::uint8_t reply = kSocksSucceeded;  // for kMalformed: the reply code to send
  std::string host;  // a name as sent (not yet normalized) or an IP literal's text
  std::uint16_t port = 0;
};

// VER(5) CMD RSV ATYP DST.ADDR DST.PORT.
[[nodiscard]] Socks5Request ParseSocks5Request(std::string_view data);

// A reply: VER REP RSV ATYP(IPv4) 0.0.0.0:0 (the bound address is not the client's business).
[[nodiscard]] std::string Socks5Reply(std::uint8_t code);

}  // namespace cagent::launcher::egress
