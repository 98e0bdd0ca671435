// libFuzzer target for the egress proxy's SOCKS5 handshake (launcher/egress/socks5.h): the method
// greeting and the request, which the sandboxed client writes, then the host it names as the
// proxy normalizes it.
//
// Input: the client's bytes, read as the proxy reads them: a greeting, then a request from where
// the greeting ended (and, separately, the whole input as a request). Invariants: a complete
// message consumed at most the bytes there were and parses the same from exactly those bytes, and
// every proper prefix of it is incomplete (a parser must not decide before it has the bytes);
// a malformed request carries a reply code the proxy may send; an IP literal's text is canonical;
// every host accepted by NormalizeHost is clean (egress_host_check.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "launcher/egress/socks5.h"
#include "tests/fuzz/egress_host_check.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;
namespace egress = cagent::launcher::egress;
using egress::Socks5Status;

void CheckGreeting(std::string_view data) {
  const egress::Socks5Greeting g = egress::ParseSocks5Greeting(data);
  if (g.status != Socks5Status::kComplete) {
    Check(g.size == 0);
    return;
  }
  Check(g.size >= 2 && g.size <= data.size());
  const auto exact = egress::ParseSocks5Greeting(data.substr(0, g.size));
  Check(exact.status == Socks5Status::kComplete && exact.size == g.size &&
        exact.no_auth == g.no_auth);
  for (std::size_t n = 0; n < g.size; ++n) {
    Check(egress::ParseSocks5Greeting(data.substr(0, n)).status == Socks5Status::kIncomplete);
  }
}

void CheckRequest(std::string_view data) {
  const egress::Socks5Request r = egress::ParseSocks5Request(data);
  if (r.status == Socks5Status::kMalformed) {
    Check(r.reply == egress::kSocksGeneralFailure || r.reply == egress::kSocksHostUnreachable ||
          r.reply == egress::kSocksAddressTypeNotSupported);
    return;
  }
  if (r.status == Socks5Status::kIncomplete) return;
  Check(r.size >= 7 && r.size <= data.size());  // header, one address byte at least, port
  Check(!r.host.empty() && r.host.size() <= 255);
  const auto exact = egress::ParseSocks5Request(data.substr(0, r.size));
  Check(exact.status == Socks5Status::kComplete && exact.size == r.size && exact.host == r.host &&
        exact.port == r.port && exact.command == r.command);
  for (std::size_t n = 0; n < r.size; ++n) {
    Check(egress::ParseSocks5Request(data.substr(0, n)).status == Socks5Status::kIncomplete);
  }
  const auto atyp = static_cast<unsigned char>(data[3]);
  if (atyp == 1 || atyp == 4) {
    // An address type's text is already the canonical form the proxy compares.
    Check(cagent::fuzz::CheckedNormalizeHost(r.host) == r.host);
  } else {
    (void)cagent::fuzz::CheckedNormalizeHost(r.host);
  }
  const std::string reply = egress::Socks5Reply(r.reply);
  Check(reply.size() == 10 && reply[0] == 5);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CheckGreeting(bytes);
  const auto g = egress::ParseSocks5Greeting(bytes);
  if (g.status == Socks5Status::kComplete) CheckRequest(bytes.substr(g.size));
  CheckRequest(bytes);
  return 0;
}
