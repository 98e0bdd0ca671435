// What a host is, for every part of cagent that names one: the policy's hosts rules and their
// checker, the engine's decisions, the approval prompt, and the egress proxy (HTTP heads, CONNECT
// targets, SOCKS5 destinations, DNS questions, --resolve). One grammar, so a host the proxy passes
// on is a host the policy can name, and the other way round. Pure: no I/O, no name resolution.
//
// A host is one of
//   - a name: labels of ASCII letters, digits and '-' (not first or last in a label), 1..63 bytes
//     each, at most 253 bytes in all, one trailing dot allowed; the last label is not a number
//     (all digits, or 0x and hex digits), since the C library's resolver reads such a "name" as
//     an IPv4 address in one of inet_aton's old forms (1.2.3 -> 1.2.0.3, 1.0x7f -> 1.0.0.127);
//   - an IPv4 literal, four decimal numbers 0..255 with no leading zeros (inet_pton's form);
//   - an IPv6 literal, with or without brackets, without a zone ("%eth0" names an interface, not
//     a destination).
// '_' is not a name byte: it is legal in DNS records (_dmarc) but not in host names (RFC 1123),
// and no policy could name a host with one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cagent {

// The limits of a name: bytes in all (the trailing dot not counted) and bytes in one label.
inline constexpr std::size_t kMaxHostNameBytes = 253;
inline constexpr std::size_t kMaxHostLabelBytes = 63;

// What is wrong with a name (HostNameProblem::fault), and where (offset, length: the bytes at
// fault within the text given, for a caret under them).
enum class HostNameFault : std::uint8_t {
  kEmpty,         // nothing before the optional trailing dot
  kTooLong,       // more than 253 bytes (the trailing dot not counted)
  kEmptyLabel,    // two dots in a row, or a leading dot
  kBadByte,       // a byte that is not a letter, digit, '-' or '.'
  kLabelTooLong,  // a label of more than 63 bytes
  kHyphenAtEdge,  // a label starting or ending with '-'
  kNumericLast,   // the last label is a number: an IPv4 address in one of inet_aton's forms
};

struct HostNameProblem {
  HostNameFault fault = HostNameFault::kEmpty;
  std::size_t offset = 0;
  std::size_t length = 1;
};

// Checks `name` (a host name, one trailing dot allowed; not an IP literal) against the grammar
// above. nullopt: it is a valid name.
[[nodiscard]] std::optional<HostNameProblem> CheckHostName(std::string_view name);

// IPv4 / IPv6 literals as bytes (network order). nullopt: not such a literal (a NUL byte, a zone,
// brackets and anything inet_pton refuses included).
[[nodiscard]] std::optional<std::array<unsigned char, 4>> ParseIpv4Literal(std::string_view text);
[[nodiscard]] std::optional<std::array<unsigned char, 16>> ParseIpv6Literal(std::string_view text);

// The canonical text of an address: a dotted quad; RFC 5952 for IPv6 (lowercase, longest zero
// run as "::", no brackets).
[[nodiscard]] std::string Ipv4LiteralText(const std::array<unsigned char, 4>& bytes);
[[nodiscard]] std::string Ipv6LiteralText(const std::array<unsigned char, 16>& bytes);

// `host` as it is compared and passed on: a name lowercased with one trailing dot stripped, an
// IPv4 literal as a dotted quad, an IPv6 literal (brackets optional) in canonical form without
// brackets. nullopt: `host` is none of these.
[[nodiscard]] std::optional<std::string> NormalizeHost(std::string_view host);

// Whether `normalized` (NormalizeHost's output) is an IP literal rather than a name.
[[nodiscard]] bool IsAddressLiteral(std::string_view normalized);

}  // namespace cagent
