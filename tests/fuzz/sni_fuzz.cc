// libFuzzer target for the egress proxy's ClientHello scan (launcher/egress/sni.h): the first
// bytes of a TLS connection the sandboxed client opens, from which the proxy takes the server
// name it checks against the CONNECT host.
//
// Invariants: the verdict depends only on the bytes it needs — a ClientHello found in `data` is
// found, with the same name, in `data` with more bytes after it, and "not a ClientHello" stays so
// whatever follows; the name is lowercase host bytes without a trailing dot, and a name
// NormalizeHost accepts normalizes to itself (egress_host_check.h).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "launcher/egress/sni.h"
#include "tests/fuzz/egress_host_check.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;
namespace egress = cagent::launcher::egress;
using Status = egress::ClientHelloScan::Status;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cagent::fuzz::InputReader in(data, size);
  const std::size_t cut = in.Byte();  // the prefix also scanned: all but the last `cut` bytes
  const std::string_view bytes = in.Rest();

  const egress::ClientHelloScan scan = egress::ScanClientHello(bytes);
  if (scan.status == Status::kClientHello) {
    const std::string& name = scan.server_name;
    for (const char c : name) Check(cagent::fuzz::HostByte(c));
    Check(name.empty() || name.back() != '.');
    if (!name.empty() && egress::NormalizeHost(name)) {
      Check(cagent::fuzz::CheckedNormalizeHost(name) == name);
    }
  } else {
    Check(scan.server_name.empty());
  }

  // More bytes after it change nothing once the verdict is made.
  const std::string longer = std::string(bytes) + std::string(bytes.substr(0, 64)) + '\x16';
  const egress::ClientHelloScan more = egress::ScanClientHello(longer);
  if (scan.status != Status::kIncomplete) {
    Check(more.status == scan.status && more.server_name == scan.server_name);
  }
  // And fewer bytes never give a verdict the whole contradicts.
  if (cut > 0 && cut <= bytes.size()) {
    const egress::ClientHelloScan prefix =
        egress::ScanClientHello(bytes.substr(0, bytes.size() - cut));
    if (prefix.status != Status::kIncomplete) {
      Check(prefix.status == scan.status && prefix.server_name == scan.server_name);
    }
  }
  return 0;
}
