// Host names, IP literals and the patterns of the `hosts` section (docs/policy-language.md,
// "hosts"). Pure: no I/O, no name resolution.
//
// A host is a name, an IPv4 literal or an IPv6 literal as common/host_name.h defines them
// (literals written in brackets in patterns, compared in canonical form). The checker (patterns),
// the engine (requests) and the audit (address ranges, shared hosting) use these, and the egress
// proxy uses the same common/host_name.h, so all of them agree on what a host is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "common/host_name.h"

namespace cagent::policy {

// What a host is (names, IPv4 and IPv6 literals) and its normal form are common/host_name.h's,
// shared with the egress proxy: NormalizeHost and IsAddressLiteral are those.
using cagent::IsAddressLiteral;
using cagent::NormalizeHost;

// One pattern of a `hosts` rule (docs/policy-language.md, "hosts"): which destinations of the
// egress proxy it names. Patterns are parsed by ParseHostPattern (policy/match/hosts.h).
struct HostPattern {
  enum class Kind : std::uint8_t {
    kName,     // pypi.org: that name only
    kSuffix,   // *.example.com: any subdomain of example.com, never example.com itself
    kAny,      // *: any host (names and addresses)
    kAddress,  // 10.0.0.5, [fd00::5]: that IP literal only
  };
  Kind kind = Kind::kName;
  // kName: the lowercase name without a trailing dot; kSuffix: the part after "*."; kAny: "";
  // kAddress: the canonical literal without brackets ("fd00::5", "10.0.0.5").
  std::string host;
  std::optional<std::uint16_t> port;  // nullopt: ports 443 and 80

  // Whether the pattern names `normalized_host` (NormalizeHost's output: lowercase, no trailing
  // dot, an IPv6 literal canonical and without brackets). An IP literal matches only kAddress
  // patterns and `*`; a name matches only kName, kSuffix and `*`.
  [[nodiscard]] bool MatchesHost(std::string_view normalized_host) const;
  // `port` == the pattern's port, or 443 or 80 when the pattern has none.
  [[nodiscard]] bool MatchesPort(std::uint16_t port) const;
  // As written back: "pypi.org", "*.github.io:443", "*", "10.0.0.5:8080", "[fd00::5]:443".
  [[nodiscard]] std::string Text() const;
};

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
