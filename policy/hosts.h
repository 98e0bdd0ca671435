// Host names, IP literals and the patterns of the `hosts` section (docs/policy-language.md,
// "hosts"). Pure: no I/O, no name resolution.
//
// A host is a name (labels of [A-Za-z0-9-], 1..63 bytes, not starting or ending with '-', at most
// 253 bytes in all; compared lowercase, one trailing dot ignored), an IPv4 literal (dotted quad)
// or an IPv6 literal (written in brackets in patterns and requests, compared in canonical form).
// The checker (patterns), the engine (requests) and the audit (address ranges, shared hosting)
// use these, and so can the egress proxy, so all of them agree on what a host is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "policy/ir.h"

namespace cagent::policy {

// `host` as the hosts rules compare it: lowercase, one trailing dot stripped, an IPv6 literal
// (with or without brackets) in canonical form without brackets, an IPv4 literal as a dotted
// quad. nullopt when it is neither a valid name nor an IP literal (empty, bad characters, a label
// too long, an IPv6 zone, a name whose last label is all digits but is no IPv4 address).
[[nodiscard]] std::optional<std::string> NormalizeHost(std::string_view host);

// Whether `normalized` (NormalizeHost's output) is an IP literal rather than a name.
[[nodiscard]] bool IsAddressLiteral(std::string_view normalized);

// `host` (normalised) as written before ":PORT": IPv6 literals in brackets.
[[nodiscard]] std::string HostPortText(std::string_view host, std::uint16_t port);

// Why a host pattern is malformed: the bytes at fault (offset and length within the pattern's
// text, for a caret), the message and a hint.
struct HostPatternError {
  std::size_t offset = 0;
  std::size_t length = 1;
  std::string message;
  std::string hint;
};

// Parses one pattern of the hosts section: NAME, *.SUFFIX, *, IPv4, [IPv6], each with an optional
// :PORT (1..65535). URLs, wildcards other than a whole first label, bad labels and bad ports are
// refused with a message saying what to write instead.
[[nodiscard]] std::variant<HostPattern, HostPatternError> ParseHostPattern(std::string_view text);

// The special range a (canonical) IP literal falls in, as a phrase ("loopback", "private",
// "link-local", "cloud metadata", "unspecified", "carrier-grade NAT", "multicast",
// "unique local"), or "" for an ordinary public address or a non-literal. IPv4-mapped and NAT64
// IPv6 addresses are judged by the IPv4 address inside. The egress proxy refuses a name resolving
// into such a range unless a rule names the address (Engine::AddressNamed).
[[nodiscard]] std::string_view RestrictedRange(std::string_view normalized);

// The shared-hosting suffix (githubusercontent.com, github.io, s3.amazonaws.com, ...: domains
// where anyone can publish content under a subdomain) that `suffix` equals or lies under, or ""
// when it lies under none. `suffix` is normalised (lowercase, no trailing dot).
[[nodiscard]] std::string_view SharedHostingSuffix(std::string_view suffix);

}  // namespace cagent::policy
