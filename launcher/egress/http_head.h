// The HTTP/1.x request head the egress proxy reads from the sandboxed client (RFC 9112), and the
// host names and authorities in it. Pure; the client is hostile, so every limit is checked and
// anything unusual (bare LF, folded headers, control bytes) is malformed rather than guessed at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/host_name.h"

namespace cagent::launcher::egress {

struct HttpHeader {
  std::string name;  // as sent
  std::string value;
};

struct HttpHead {
  std::string method;
  std::string target;
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  std::vector<HttpHeader> headers;
  std::size_t size = 0;  // bytes of the head, the final CRLF CRLF included
};

struct HttpHeadParse {
  enum class Status : std::uint8_t { kComplete, kIncomplete, kMalformed, kTooLarge };
  Status status = Status::kIncomplete;
  HttpHead head;
  std::string error;  // for kMalformed / kTooLarge: what is wrong, one line
};

// Parses the request head at the start of `data`: request-line, header fields, empty line. A head
// longer than `limit` bytes (or, while incomplete, `data` already past it) is kTooLarge.
[[nodiscard]] HttpHeadParse ParseHttpHead(std::string_view data, std::size_t limit);

// A destination host as the proxy passes it on is common/host_name.h's NormalizeHost: the same
// grammar and normal form the policy's hosts rules use.
using cagent::NormalizeHost;

struct Authority {
  std::string host;  // normalized (NormalizeHost)
  std::uint16_t port = 0;
};

// "host:port", "[v6]:port", or "host" alone when default_port is not 0. nullopt: malformed (no
// userinfo, port 1-65535 in digits).
[[nodiscard]] std::optional<Authority> ParseAuthority(std::string_view text,
                                                      std::uint16_t default_port);

struct HttpUrl {
  Authority authority;
  std::string authority_text;  // as written, for the Host header
  std::string path;            // origin-form: "/..." (with the query)
};

// An absolute-form target "http://host[:port][/path][?query]" (scheme case-insensitive; port 80 by
// default). nullopt: any other form or scheme.
[[nodiscard]] std::optional<HttpUrl> ParseHttpUrl(std::string_view target);

// The request head to send upstream: the request-line in origin form, the Host header set to the
// URL's authority, the hop-by-hop and Proxy-* headers removed (Connection and the headers it
// names, Keep-Alive, Proxy-Authorization, Proxy-Connection, TE, Upgrade, Trailer), and
// "Connection: close".
[[nodiscard]] std::string OriginFormHead(const HttpHead& head, const HttpUrl& url);

// The upstream's response head as the client gets it. The proxy asks the upstream to close after
// one response (OriginFormHead's "Connection: close") and relays one exchange per client
// connection, so the client must hear that too: an HTTP/1.1 response without it reads as "keep
// the connection", and a client that sends its next request on it before noticing the close gets
// a reset (npm's "socket hang up"). So Connection, Keep-Alive, Proxy-Connection and the headers
// Connection names are removed and "Connection: close" is added (RFC 9112 9.6).
struct ResponseHead {
  enum class Status : std::uint8_t {
    kRewritten,    // `head` replaces the first `size` bytes; the relay is raw after them
    kInterim,      // a 1xx other than 101: the first `size` bytes pass as they are, a head follows
    kIncomplete,   // no complete head yet: read more
    kPassThrough,  // not a head to rewrite (not HTTP/1.x, longer than the limit, a 101): relay
                   // everything as it is
  };
  Status status = Status::kIncomplete;
  std::size_t size = 0;
  std::string head;
};

// The upstream is an allowed host, not the sandbox, and its head is only rewritten for the
// connection's sake, so this is lenient where ParseHttpHead is strict: anything it does not
// recognize passes through unchanged. `limit` bounds the bytes looked at.
[[nodiscard]] ResponseHead RewriteResponseHead(std::string_view data, std::size_t limit);

}  // namespace cagent::launcher::egress
