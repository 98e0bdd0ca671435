// libFuzzer target for the one host grammar of the policy and the egress proxy
// (common/host_name.h), as a differential against the two normalisers it replaced
// (tests/common/old_host_names.h). The sandboxed client names hosts in CONNECT targets, Host
// headers, SOCKS5 requests, SNI and DNS queries; a profile names them in rules.
//
// Input: the host text. Invariants:
//   - where the new normaliser and an old one answer differently, the text is in one of the
//     classes issue #33 names (DifferenceClass), and but for brackets the new one refuses: it never
//     accepts a host an old one refused, and never gives another normal form;
//   - CheckHostName finds a problem in exactly the names NormalizeHost refuses (literals aside);
//   - an accepted host normalizes to itself again, and is a literal or a problem-free name.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/host_name.h"
#include "tests/common/old_host_names.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;

void Differ(std::string_view text, const std::optional<std::string>& now,
            const std::optional<std::string>& before) {
  if (now == before) return;
  const std::string why = cagent::old_host_names::DifferenceClass(text);
  Check(!why.empty());
  if (why != "brackets") Check(!now.has_value());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 300) return 0;  // past every length limit; the limits have their own seeds
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::optional<std::string> now = cagent::NormalizeHost(text);
  Differ(text, now, cagent::old_host_names::OldPolicyNormalize(text));
  Differ(text, now, cagent::old_host_names::OldProxyNormalize(text));
  if (!cagent::IsAddressLiteral(text) && !(text.starts_with('[') && text.ends_with(']'))) {
    Check(cagent::CheckHostName(text).has_value() == !now.has_value());
  }
  if (now) {
    Check(cagent::NormalizeHost(*now) == now);
    Check(cagent::IsAddressLiteral(*now) || !cagent::CheckHostName(*now).has_value());
  }
  return 0;
}
