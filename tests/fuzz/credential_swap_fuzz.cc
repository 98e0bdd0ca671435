// libFuzzer target for the credential swap (launcher/egress/credential_swap.h, issue 36): the
// request head a sandboxed client sends to a host cagent terminates TLS for, in which the proxy
// puts real values in place of placeholders. Two credentials: "a" bound to the request's host,
// "b" not. The input is the target line, then header lines "Name: value".
//
// Invariants: a head carrying b's placeholder (raw, or inside a Basic credential) is refused and
// left exactly as it was; otherwise no raw placeholder of a remains in the target or a header,
// b's real value never appears unless the client wrote it, and a's real value is reported used
// only when it went in. Base64Decode accepts only what Base64Encode gives back byte for byte.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/egress/credential_swap.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;
namespace egress = cagent::launcher::egress;

const std::vector<egress::SandboxCredential>& Credentials() {
  static const std::vector<egress::SandboxCredential> all = {
      {"a", "ghp_PLACEHOLDERAAAAAAAAAAAAAAAAAAAAAAAAAA",
       "ghp_REALVALUEAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
      {"b", "npm_PLACEHOLDERBBBBBBBBBBBBBBBBBBBBBBBBBB",
       "npm_REALVALUEBBBBBBBBBBBBBBBBBBBBBBBBBBB"},
  };
  return all;
}

bool Has(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

egress::RequestHead HeadFrom(std::string_view bytes) {
  egress::RequestHead head{"GET", "", {}};
  std::size_t line = 0;
  while (!bytes.empty() && line < 64) {
    const std::size_t nl = bytes.find('\n');
    const std::string_view l = bytes.substr(0, nl);
    bytes = nl == std::string_view::npos ? std::string_view{} : bytes.substr(nl + 1);
    if (line++ == 0) {
      head.target = std::string(l);
      continue;
    }
    const std::size_t colon = l.find(':');
    if (colon == std::string_view::npos) continue;
    head.headers.emplace_back(std::string(l.substr(0, colon)), std::string(l.substr(colon + 1)));
  }
  return head;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cagent::fuzz::InputReader in(data, size);
  const std::string_view rest = in.Rest();
  const auto& all = Credentials();

  // Base64: a decoded text encodes back to the input; any bytes round-trip.
  if (auto decoded = egress::Base64Decode(rest)) Check(egress::Base64Encode(*decoded) == rest);
  Check(egress::Base64Decode(egress::Base64Encode(rest)).value_or("\x01") == rest);

  egress::RequestHead head = HeadFrom(rest);
  const egress::RequestHead before = head;
  bool wrote_b_value = Has(before.target, all[1].value);
  for (const auto& [n, v] : before.headers) wrote_b_value = wrote_b_value || Has(v, all[1].value);

  const egress::SwapResult r = egress::SwapCredentials(head, {&all[0]}, all);
  bool raw_b = Has(before.target, all[1].placeholder);
  for (const auto& [n, v] : before.headers) raw_b = raw_b || Has(v, all[1].placeholder);
  if (raw_b) Check(r.misdirected.has_value());
  if (r.misdirected) {
    Check(*r.misdirected == "b");
    Check(r.used.empty());
    Check(head.target == before.target && head.headers == before.headers);
    return 0;
  }
  Check(head.headers.size() == before.headers.size());
  Check(!Has(head.target, all[0].placeholder));
  bool a_in = Has(head.target, all[0].value);
  bool b_value = Has(head.target, all[1].value);
  for (std::size_t i = 0; i < head.headers.size(); ++i) {
    Check(head.headers[i].first == before.headers[i].first);
    Check(!Has(head.headers[i].second, all[0].placeholder));
    a_in = a_in || Has(head.headers[i].second, all[0].value);
    b_value = b_value || Has(head.headers[i].second, all[1].value);
  }
  if (!r.used.empty()) Check(r.used.size() == 1 && r.used[0] == "a" && a_in);
  if (b_value) Check(wrote_b_value);
  return 0;
}
