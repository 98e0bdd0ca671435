// What the egress fuzz targets check about every host the proxy would pass on
// (http_head, socks5, sni): NormalizeHost's output is a host and nothing else.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "launcher/egress/http_head.h"
#include "tests/fuzz/fuzz_util.h"

namespace cagent::fuzz {

inline bool HostByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
         c == ':';
}

// NormalizeHost(`host`): when it accepts, the input held only bytes a name or an IP literal has
// (no NUL, no zone index: issue #33; brackets only around an IPv6 literal), the output only
// lowercase ones, at most 253 bytes of them for a name, and normalizing the output again gives it
// unchanged.
inline std::optional<std::string> CheckedNormalizeHost(std::string_view host) {
  auto out = launcher::egress::NormalizeHost(host);
  if (!out) return out;
  // An IPv6 literal may come in brackets ("[::1]", common/host_name.h); they are not kept.
  for (const char c : host) {
    const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    Check(HostByte(lower) || ((c == '[' || c == ']') && out->find(':') != std::string::npos));
  }
  Check(!out->empty() && out->size() <= 253 + 2);  // IPv6 text is at most 45
  for (const char c : *out) Check(HostByte(c));
  Check(launcher::egress::NormalizeHost(*out) == out);
  return out;
}

}  // namespace cagent::fuzz
