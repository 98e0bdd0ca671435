#include "policy/match/hosts.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "common/host_name.h"

namespace cagent::policy {
namespace {

constexpr std::uint16_t kHttps = 443;
constexpr std::uint16_t kHttp = 80;

constexpr std::string_view kPatternForms =
    "write a host name (pypi.org), *.SUFFIX (its subdomains), * (any host) or an IP address "
    "(10.0.0.5, [fd00::5]), each with an optional :PORT";

// Domains under which anyone can publish content (a repository, a bucket, a page, a tunnel):
// allowing a wildcard over one lets the sandbox send data to, or fetch code from, anyone. More
// specific entries first, so the most specific one is named.
constexpr std::array<std::string_view, 20> kSharedHosting = {
    "s3.amazonaws.com",
    "blob.core.windows.net",
    "githubusercontent.com",
    "github.io",
    "gitlab.io",
    "pages.dev",
    "workers.dev",
    "vercel.app",
    "netlify.app",
    "herokuapp.com",
    "azurewebsites.net",
    "cloudfront.net",
    "amazonaws.com",
    "appspot.com",
    "web.app",
    "firebaseapp.com",
    "ngrok.io",
    "ngrok-free.app",
    "glitch.me",
    "repl.co",
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsDigit);
}

// What is wrong with `name` (a host name, one trailing dot allowed; the grammar is
// common/host_name.h's), in words, with offsets relative to `base` in the enclosing text; nullopt
// when it is a valid name.
std::optional<HostPatternError> NameError(std::string_view name, std::size_t base) {
  const std::optional<HostNameProblem> problem = CheckHostName(name);
  if (!problem) return std::nullopt;
  auto fail = [&](std::string message, std::string hint = std::string(kPatternForms)) {
    return HostPatternError{base + problem->offset, std::max<std::size_t>(problem->length, 1),
                            std::move(message), std::move(hint)};
  };
  std::string_view body = name;
  if (body.ends_with('.')) body.remove_suffix(1);
  switch (problem->fault) {
    case HostNameFault::kEmpty:
      return fail("empty host name");
    case HostNameFault::kTooLong:
      return fail("host name is " + std::to_string(body.size()) + " bytes long; at most " +
                  std::to_string(kMaxHostNameBytes) + " are allowed");
    case HostNameFault::kEmptyLabel:
      return fail("empty label in host name '" + std::string(name) + "'",
                  "labels are separated by single dots: a.example.com");
    case HostNameFault::kBadByte: {
      const char c = name[problem->offset];
      if (c == '*') {
        return fail("'*' is allowed only as the whole first label",
                    "write *.example.com (its subdomains) or * (any host)");
      }
      if (c == '_') {
        return fail("invalid character '_' in host name",
                    "host names are letters, digits, '-' and dots ('_' belongs to DNS records, "
                    "not to host names)");
      }
      const bool ascii = static_cast<unsigned char>(c) < 0x80;
      return fail(ascii ? "invalid character '" + std::string(1, c) + "' in host name"
                        : std::string("non-ASCII byte in host name"),
                  ascii ? "host names are letters, digits, '-' and dots"
                        : "write an internationalised name in its xn-- (punycode) form");
    }
    case HostNameFault::kLabelTooLong:
      return fail("label is " + std::to_string(problem->length) + " bytes long; at most " +
                  std::to_string(kMaxHostLabelBytes) + " are allowed");
    case HostNameFault::kHyphenAtEdge:
      return fail("label '" + std::string(name.substr(problem->offset, problem->length)) +
                      "' starts or ends with '-'",
                  "labels are letters and digits, with '-' only inside");
    case HostNameFault::kNumericLast:
      return fail("'" + std::string(name) + "' is neither a host name nor an IPv4 address",
                  "a name cannot end in a numeric label; IPv4 addresses are four numbers "
                  "0..255: 10.0.0.5");
  }
  return fail("invalid host name");
}

std::string LowerName(std::string_view name) {
  if (name.ends_with('.')) name.remove_suffix(1);
  std::string out(name);
  std::transform(out.begin(), out.end(), out.begin(), Lower);
  return out;
}

// The authority of a URL-like text, for the hint: "https://user@x.org:8443/p" -> "x.org:8443".
std::string Authority(std::string_view text) {
  const std::size_t scheme = text.find("://");
  std::string_view rest = scheme == std::string_view::npos ? text : text.substr(scheme + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
    rest.remove_prefix(at + 1);
  }
  return std::string(rest);
}

}  // namespace

std::string HostPortText(std::string_view host, std::uint16_t port) {
  std::string out =
      host.find(':') != std::string_view::npos ? "[" + std::string(host) + "]" : std::string(host);
  return out + ":" + std::to_string(port);
}

std::variant<HostPattern, HostPatternError> ParseHostPattern(std::string_view text) {
  using Err = HostPatternError;
  if (text.empty()) return Err{0, 1, "empty host pattern", std::string(kPatternForms)};
  if (const std::size_t scheme = text.find("://"); scheme != std::string_view::npos) {
    return Err{0, scheme + 3, "'" + std::string(text) + "' is a URL; a hosts rule names a host",
               "write the host only: " + Authority(text)};
  }
  if (const std::size_t slash = text.find('/'); slash != std::string_view::npos) {
    return Err{slash, text.size() - slash, "a host pattern cannot contain a path",
               "write the host only: " + Authority(text) + " (paths are not matched)"};
  }
  if (const std::size_t at = text.find('@'); at != std::string_view::npos) {
    return Err{at, 1, "a host pattern cannot contain '@' (user names are not matched)",
               "write the host only: " + Authority(text)};
  }

  HostPattern out;
  std::string_view host = text;
  std::size_t port_at = std::string_view::npos;  // offset of the first byte after ':'
  bool bracketed = false;
  if (text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return Err{0, text.size(), "unterminated '[' in host pattern",
                 "IPv6 addresses are written in brackets: [fd00::5] or [fd00::5]:443"};
    }
    host = text.substr(1, close - 1);
    bracketed = true;
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') {
        return Err{close + 1, text.size() - close - 1, "expected ':PORT' after ']'",
                   "write [fd00::5]:443"};
      }
      port_at = close + 2;
    }
  } else {
    const std::size_t colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
      return Err{0, text.size(), "IPv6 addresses are written in brackets",
                 ParseIpv6Literal(text) ? "write [" + std::string(text) + "]"
                                        : std::string("write [fd00::5] or [fd00::5]:443")};
    }
    if (colon != std::string_view::npos) {
      host = text.substr(0, colon);
      port_at = colon + 1;
    }
  }

  if (port_at != std::string_view::npos) {
    const std::string_view port = text.substr(port_at);
    if (port.empty()) {
      return Err{port_at - 1, 1, "missing port after ':'",
                 "write HOST:PORT (1..65535), or leave the port out for 443 and 80"};
    }
    std::uint32_t value = 0;
    const bool digits = AllDigits(port) && port.size() <= 5;
    if (digits) {
      for (const char c : port) value = value * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (!digits || value == 0 || value > 65535) {
      return Err{port_at, port.size(), "invalid port '" + std::string(port) + "'",
                 "ports are 1..65535; leave the port out for 443 and 80"};
    }
    out.port = static_cast<std::uint16_t>(value);
  }

  const std::size_t host_at = bracketed ? 1 : 0;
  if (bracketed) {
    auto bytes = ParseIpv6Literal(host);
    if (!bytes) {
      return Err{0, host.size() + 2, "invalid IPv6 address '" + std::string(host) + "'",
                 "write a literal such as [fd00::5] (no zone, no port inside the brackets)"};
    }
    out.kind = HostPattern::Kind::kAddress;
    out.host = Ipv6LiteralText(*bytes);
    return out;
  }
  if (host.empty()) {
    return Err{0, 1, "missing host before ':'", std::string(kPatternForms)};
  }
  if (host == "*") {
    out.kind = HostPattern::Kind::kAny;
    return out;
  }
  if (host.starts_with("*.")) {
    const std::string_view suffix = host.substr(2);
    if (auto bad = NameError(suffix, host_at + 2)) return *bad;
    out.kind = HostPattern::Kind::kSuffix;
    out.host = LowerName(suffix);
    return out;
  }
  if (host.front() == '*') {
    return Err{0, 1, "'*' must be a whole label: '" + std::string(host) + "' is not a pattern",
               "write *." + std::string(host.substr(1)) +
                   " for its subdomains (the name itself needs a rule of its own)"};
  }
  if (auto v4 = ParseIpv4Literal(host)) {
    out.kind = HostPattern::Kind::kAddress;
    out.host = Ipv4LiteralText(*v4);
    return out;
  }
  if (auto bad = NameError(host, host_at)) return *bad;
  out.kind = HostPattern::Kind::kName;
  out.host = LowerName(host);
  return out;
}

bool HostPattern::MatchesHost(std::string_view normalized_host) const {
  switch (kind) {
    case Kind::kAny:
      return true;
    case Kind::kName:
    case Kind::kAddress:
      // Names never look like literals (NormalizeHost refuses an all-digit last label and ':'),
      // so equality keeps names and addresses apart.
      return normalized_host == host;
    case Kind::kSuffix:
      return normalized_host.size() > host.size() + 1 && normalized_host.ends_with(host) &&
             normalized_host[normalized_host.size() - host.size() - 1] == '.' &&
             !IsAddressLiteral(normalized_host);
  }
  return false;
}

bool HostPattern::MatchesPort(std::uint16_t p) const {
  return port ? *port == p : (p == kHttps || p == kHttp);
}

std::string HostPattern::Text() const {
  std::string out;
  switch (kind) {
    case Kind::kAny:
      out = "*";
      break;
    case Kind::kSuffix:
      out = "*." + host;
      break;
    case Kind::kName:
      out = host;
      break;
    case Kind::kAddress:
      out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
      break;
  }
  if (port) out += ":" + std::to_string(*port);
  return out;
}

std::string_view RestrictedRange(std::string_view normalized) {
  std::array<unsigned char, 4> v4{};
  if (normalized.find(':') != std::string_view::npos) {
    auto v6 = ParseIpv6Literal(normalized);
    if (!v6) return "";
    const auto& b = *v6;
    auto zero = [&](std::size_t from, std::size_t to) {
      return std::all_of(b.begin() + static_cast<std::ptrdiff_t>(from),
                         b.begin() + static_cast<std::ptrdiff_t>(to),
                         [](unsigned char c) { return c == 0; });
    };
    const bool mapped = zero(0, 10) && b[10] == 0xff && b[11] == 0xff;
    const bool nat64 = b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && zero(4, 12);
    if (mapped || nat64) {
      std::copy(b.begin() + 12, b.end(), v4.begin());
    } else {
      if (zero(0, 15) && b[15] == 1) return "loopback";
      if (zero(0, 16)) return "unspecified";
      // fd00:ec2::254, the IPv6 address of EC2's instance metadata service.
      constexpr std::array<unsigned char, 16> kEc2 = {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0,    0,
                                                      0,    0,    0,    0,    0, 0, 0x02, 0x54};
      if (b == kEc2) return "cloud metadata";
      if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return "link-local";
      if ((b[0] & 0xfe) == 0xfc) return "private";
      if (b[0] == 0xff) return "multicast";
      return "";
    }
  } else if (auto parsed = ParseIpv4Literal(normalized)) {
    v4 = *parsed;
  } else {
    return "";
  }
  const unsigned a = v4[0];
  const unsigned b = v4[1];
  if (v4 == std::array<unsigned char, 4>{169, 254, 169, 254} ||
      v4 == std::array<unsigned char, 4>{100, 100, 100, 200} ||
      v4 == std::array<unsigned char, 4>{168, 63, 129, 16}) {
    return "cloud metadata";
  }
  if (a == 127) return "loopback";
  if (a == 0) return "unspecified";
  if (a == 10 || (a == 172 && (b & 0xf0) == 16) || (a == 192 && b == 168)) return "private";
  if (a == 169 && b == 254) return "link-local";
  if (a == 100 && (b & 0xc0) == 64) return "carrier-grade NAT";
  if (a >= 224) return a < 240 ? "multicast" : "reserved";
  return "";
}

std::string_view SharedHostingSuffix(std::string_view suffix) {
  for (const std::string_view s : kSharedHosting) {
    if (suffix == s) return s;
    if (suffix.size() > s.size() && suffix.ends_with(s) &&
        suffix[suffix.size() - s.size() - 1] == '.') {
      return s;
    }
  }
  return "";
}

}  // namespace cagent::policy
