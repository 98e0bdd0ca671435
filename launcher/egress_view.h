// The sandbox's side of filtered egress (issue #16): what the launch adds so that the egress proxy,
// which cagent serves from outside, is the only way out.
//
// Inside the sandbox's network namespace (lo only):
//   127.0.0.1:3128 TCP   the proxy: HTTP (CONNECT and absolute-form) and SOCKS5 on one port
//   127.0.0.1:53   UDP   the DNS stub: allowed names get synthetic 127.77.x.y addresses
//   0.0.0.0:P      TCP   transparent capture, one per port a hosts rule can allow (80, 443, ...):
//                        a connection to a synthetic address on P reaches the proxy as that name
// and the environment points clients at the proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY
// in both cases; npm's npm_config_proxy/https_proxy), and /etc/resolv.conf in the view names the
// stub. Every socket is made by the launcher's child before the command runs (netns.h) and served
// by cagent; nothing runs inside for it, and no route leaves the namespace, so a connection to
// anything else fails at once (ECONNREFUSED on lo, ENETUNREACH elsewhere).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/launch_spec.h"

namespace cagent::launcher {

inline constexpr std::uint16_t kEgressProxyPort = 3128;
inline constexpr std::uint16_t kEgressDnsPort = 53;

// What AddEgressView added: where its listeners are in spec.net_listeners, and the directory of
// the resolv.conf it wrote (removed by the destructor).
class EgressView {
 public:
  EgressView() = default;
  ~EgressView();
  EgressView(EgressView&& other) noexcept;
  EgressView& operator=(EgressView&& other) noexcept;
  EgressView(const EgressView&) = delete;
  EgressView& operator=(const EgressView&) = delete;

  std::size_t proxy_index = 0;                   // TCP 127.0.0.1:3128
  std::size_t dns_index = 0;                     // UDP 127.0.0.1:53
  std::vector<std::size_t> transparent_indexes;  // TCP 0.0.0.0:P, in the order of `ports`
  std::vector<std::uint16_t> transparent_ports;

 private:
  friend Result<EgressView> AddEgressView(LaunchSpec& spec, std::span<const std::uint16_t> ports);
  std::string dir_;  // holds resolv.conf
};

// Adds the listeners, the environment and the resolv.conf bind to `spec`. `ports`: the ports to
// capture transparently (policy::HostPorts); 3128 and 53 are never captured (they are the proxy's
// own). Needs spec.network == kLoopback and the net layer on (fails with kInvalidInput naming
// them). The resolv.conf is written into a new private directory (mode 0700) under
// $XDG_RUNTIME_DIR or /tmp.
Result<EgressView> AddEgressView(LaunchSpec& spec, std::span<const std::uint16_t> ports);

// The variables AddEgressView sets, for tests and docs.
std::vector<EnvVar> EgressEnvironment();

}  // namespace cagent::launcher
