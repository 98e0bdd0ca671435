// The server name (SNI) of a TLS ClientHello, read by the egress proxy before it relays a TLS
// connection (an allowed CONNECT host must be the name the client asks the server for: no domain
// fronting through an allowed name). Pure; reads the hostile client's bytes with every length
// checked against what is there.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cagent::launcher::egress {

struct ClientHelloScan {
  enum class Status : std::uint8_t {
    kClientHello,     // a whole ClientHello; server_name is its SNI host name ("" if it has none)
    kIncomplete,      // a ClientHello so far: more bytes are needed
    kNotClientHello,  // not a TLS handshake record with a well-formed ClientHello
  };
  Status status = Status::kNotClientHello;
  std::string server_name;  // lowercased, a trailing dot stripped
};

// Scans the start of a client's byte stream for a ClientHello, which may span several handshake
// records. Never reads past `data`. A ClientHello with two host names, or a name with bytes that
// no host name has, is kNotClientHello.
[[nodiscard]] ClientHelloScan ScanClientHello(std::string_view data);

}  // namespace cagent::launcher::egress
