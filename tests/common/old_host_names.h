// The two host normalisers common/host_name.h replaced (the policy's, policy/match/hosts.cc, and
// the proxy's, launcher/egress/http_head.cc, as they were before issue #33), kept in behaviour for
// the differential checks: tests/common/host_name_test.cc over a generated set, and the host_name
// fuzz target over whatever libFuzzer makes. DifferenceClass names why the new normaliser may
// answer differently; any other difference is a bug.
#pragma once

#include <arpa/inet.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <boost/system/error_code.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/host_name.h"

namespace cagent::old_host_names {

inline bool OldDigit(char c) { return c >= '0' && c <= '9'; }
inline char OldLower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// policy/match/hosts.cc's NormalizeHost: inet_pton over a copy of the text (a NUL inside ended it).
inline std::optional<std::string> OldPolicyNormalize(std::string_view host) {
  auto pton = [](int family, std::string_view text, std::size_t max) -> std::optional<std::string> {
    if (text.empty() || text.size() > max) return std::nullopt;
    char buf[64] = {};
    std::copy(text.begin(), text.end(), buf);
    unsigned char out[16] = {};
    if (inet_pton(family, buf, out) != 1) return std::nullopt;
    char txt[INET6_ADDRSTRLEN] = {};
    if (inet_ntop(family, out, txt, sizeof txt) == nullptr) return std::nullopt;
    return std::string(txt);
  };
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (host.find(':') == std::string_view::npos) return std::nullopt;
  }
  if (host.find(':') != std::string_view::npos) return pton(AF_INET6, host, 45);
  if (auto v4 = pton(AF_INET, host, 15)) return v4;
  std::string_view body = host;
  if (body.ends_with('.')) body.remove_suffix(1);
  if (body.empty() || body.size() > 253) return std::nullopt;
  std::size_t start = 0;
  std::string_view last;
  while (start <= body.size()) {
    std::size_t end = body.find('.', start);
    if (end == std::string_view::npos) end = body.size();
    const std::string_view label = body.substr(start, end - start);
    if (label.empty() || label.size() > 63) return std::nullopt;
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || OldDigit(c) || c == '-')) {
        return std::nullopt;
      }
    }
    if (label.front() == '-' || label.back() == '-') return std::nullopt;
    last = label;
    start = end + 1;
  }
  if (std::all_of(last.begin(), last.end(), OldDigit)) return std::nullopt;
  std::string out(body);
  std::transform(out.begin(), out.end(), out.begin(), OldLower);
  return out;
}

// launcher/egress/http_head.cc's NormalizeHost: boost's make_address, then a looser name grammar.
inline std::optional<std::string> OldProxyNormalize(std::string_view host) {
  if (host.empty() || host.size() > 254) return std::nullopt;
  boost::system::error_code ec;
  const auto literal = boost::asio::ip::make_address(std::string(host), ec);
  if (!ec) {
    if (literal.is_v6() && literal.to_v6().scope_id() != 0) return std::nullopt;
    return literal.to_string();
  }
  std::string name;
  for (char c : host) name.push_back(OldLower(c));
  if (name.back() == '.') name.pop_back();
  if (name.empty() || name.size() > 253) return std::nullopt;
  std::size_t label = 0;
  for (std::size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '.') {
      if (label == 0 || label > 63) return std::nullopt;
      label = 0;
      continue;
    }
    const char c = name[i];
    if (!((c >= 'a' && c <= 'z') || OldDigit(c) || c == '-' || c == '_')) return std::nullopt;
    ++label;
  }
  return name;
}

// Why the new normaliser may answer differently from an old one on `text`: the classes issue #33
// names (and two more the differential found), or "" for none (a difference then is a bug).
inline std::string DifferenceClass(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return "NUL byte";
  if (text.find('%') != std::string_view::npos) return "IPv6 zone";
  // The proxy's callers took the brackets off an IPv6 literal before they asked (ParseAuthority);
  // the shared normaliser takes them off itself, as the policy's did.
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') return "brackets";
  if (text.find('_') != std::string_view::npos) return "underscore";
  if (CheckHostName(text) && CheckHostName(text)->fault == HostNameFault::kHyphenAtEdge) {
    return "hyphen at a label's edge";
  }
  if (CheckHostName(text) && CheckHostName(text)->fault == HostNameFault::kNumericLast) {
    return "numeric last label";
  }
  return "";
}

}  // namespace cagent::old_host_names
