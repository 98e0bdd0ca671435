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
#include <string_view>
#include <vector>

#include "common/result.h"
#include "launcher/sandbox/launch_spec.h"

namespace cagent::launcher {

inline constexpr std::uint16_t kEgressProxyPort = 3128;
inline constexpr std::uint16_t kEgressDnsPort = 53;

// A sandbox without network beyond loopback (issue #32: "no network looks like a broken
// network"). Left alone, /etc/resolv.conf inside is the host's: it names a resolver the sandbox
// cannot reach (or shows the host's), and every lookup fails with a *temporary* error (EAI_AGAIN),
// which npm, pip and git retry for a minute before giving up with a misleading message. So:
//   network loopback (no hosts section): the DNS stub of filtered egress, served by cagent from
//     outside on 127.0.0.1:53 (UDP and TCP) inside the namespace, answers every query NXDOMAIN at
//     once ("no such name", permanent: ENOTFOUND / EAI_NONAME), holding and reaching nothing; and
//     because cagent sees the queries, it can say once why they fail and how to allow a host
//     (launcher/session/network_hint.h). resolv.conf names the stub; /etc/hosts still resolves
//     first (nsswitch's `files`), so localhost works.
//   network none: seccomp refuses IP sockets (EAFNOSUPPORT), so no stub can be reached, and
//     glibc turns the refused socket into EAI_AGAIN as well. Instead the view's nsswitch.conf
//     lists no DNS source for hosts (the host's own file, `dns` and `resolve` taken out of its
//     hosts line), so a name outside /etc/hosts is "not found" without a socket being tried; the
//     resolv.conf names no server. cagent sees nothing of such lookups, so none gets no hint.
// Either way the host's resolver address is not visible inside, and npm and pip are told not to
// retry (NoNetworkEnvironment): both retry even "no such name" (npm for 73 s), and a retry cannot
// succeed here.
inline constexpr std::size_t kNoListener = static_cast<std::size_t>(-1);

// What AddEgressView / AddNoNetworkView added: where its listeners are in spec.net_listeners, and
// the directory of the files it wrote (removed by the destructor).
class EgressView {
 public:
  EgressView() = default;
  ~EgressView();
  EgressView(EgressView&& other) noexcept;
  EgressView& operator=(EgressView&& other) noexcept;
  EgressView(const EgressView&) = delete;
  EgressView& operator=(const EgressView&) = delete;

  std::size_t proxy_index = kNoListener;    // TCP 127.0.0.1:3128 (filtered egress only)
  std::size_t dns_index = kNoListener;      // UDP 127.0.0.1:53 (not in network none)
  std::size_t dns_tcp_index = kNoListener;  // TCP 127.0.0.1:53 (no network beyond loopback only)
  std::vector<std::size_t> transparent_indexes;  // TCP 0.0.0.0:P, in the order of `ports`
  std::vector<std::uint16_t> transparent_ports;

 private:
  friend Result<EgressView> AddEgressView(LaunchSpec& spec, std::span<const std::uint16_t> ports);
  friend Result<EgressView> AddNoNetworkView(LaunchSpec& spec);
  // Writes `text` to `name` in dir_ (made on first use) and shows it read-only at `target`.
  Status AddFile(const char* name, std::string_view text, const std::string& target,
                 LaunchSpec& spec);
  std::string dir_;                 // holds resolv.conf (and nsswitch.conf)
  std::vector<std::string> files_;  // the names written in dir_
};

// Adds the listeners, the environment and the resolv.conf bind to `spec`. `ports`: the ports to
// capture transparently (policy::HostPorts); 3128 and 53 are never captured (they are the proxy's
// own). Needs spec.network == kLoopback and the net layer on (fails with kInvalidInput naming
// them). The resolv.conf is written into a new private directory (mode 0700) under
// $XDG_RUNTIME_DIR or /tmp.
Result<EgressView> AddEgressView(LaunchSpec& spec, std::span<const std::uint16_t> ports);

// Adds to `spec`, which has no filtered egress, what makes a lookup fail at once with "no such
// name" (see above), and NoNetworkEnvironment(): for network loopback the stub's two listeners
// and a resolv.conf naming it;
// for network none a resolv.conf without a server and an nsswitch.conf whose hosts line has no DNS
// source (from the host's /etc/nsswitch.conf; nothing when the host has none). Needs the net layer
// on (kInvalidInput otherwise: the sandbox shares the host's network and resolver). The files are
// written into a new private directory (mode 0700) under $XDG_RUNTIME_DIR or /tmp.
Result<EgressView> AddNoNetworkView(LaunchSpec& spec);

// The host's nsswitch.conf `text` with `dns` and `resolve` (and the [STATUS=action] items after
// them) taken out of its hosts line, which becomes `hosts: files` when nothing is left or is added
// as that when there is none. Every other line as it was. Pure.
std::string NsswitchWithoutDns(std::string_view text);

// The variables AddNoNetworkView adds unless the spec sets or passes them: npm and pip told not to
// retry a request (it cannot succeed, and they would retry "no such name" for a minute).
std::vector<EnvVar> NoNetworkEnvironment();

// The variables AddEgressView sets, for tests and docs.
std::vector<EnvVar> EgressEnvironment();

}  // namespace cagent::launcher
