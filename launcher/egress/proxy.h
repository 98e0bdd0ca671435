// The egress proxy: cagent (trusted, outside the sandbox) serves it on listening sockets that
// were made inside the sandbox's network namespace, and connects out from its own namespace. HTTP
// CONNECT, plain HTTP forwarding and SOCKS5 on one port, a DNS stub, and transparent listeners
// for clients that ignore proxy variables. Policy-agnostic: every decision comes through Policy.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "launcher/egress/address.h"
#include "launcher/egress/credential_swap.h"

namespace cagent::launcher::egress {

// How the client reached the proxy.
enum class Via : std::uint8_t { kHttpConnect, kHttpForward, kSocks5, kTransparent };

// "connect", "http", "socks5", "transparent".
[[nodiscard]] std::string_view ViaName(Via via);

struct Destination {
  std::string host;  // a lowercase name (trailing dot stripped) or an IP literal (IPv6 bare)
  std::uint16_t port = 0;
  Via via = Via::kHttpConnect;
};

struct Decision {
  bool allow = false;
  std::string rule;    // the deciding rule's text ("" for the default)
  std::string reason;  // one line for people
};

// One HTTP request the proxy reads in clear on an intercepted connection (a destination some
// credential is bound to, issue 36), as it is about to go upstream.
struct HttpExchange {
  Destination dest;
  std::string method;  // as sent ("GET")
  // The request target's path in origin form, without the query ("/org/repo.git/info/refs"); the
  // query is never given to the policy or the audit log (it may hold a credential).
  std::string path;
};

// What the proxy asks. Implemented over the policy engine and the broker's approver; called on
// the proxy's io thread, so no call may block.
class Policy {
 public:
  virtual ~Policy() = default;
  // Decides whether the sandbox may reach `dest`; may complete later (a person is asked). `done`
  // is to be called exactly once, from any thread; calling it after the proxy stopped is safe
  // (it does nothing).
  virtual void Decide(const Destination& dest, std::function<void(Decision)> done) = 0;
  // Whether a rule names this address (an IP literal's canonical text) and port: only then may a
  // destination resolve into loopback, private, link-local, metadata or other non-public space.
  [[nodiscard]] virtual bool AddressNamed(std::string_view address, std::uint16_t port) const = 0;
  // Whether the DNS stub answers this (normalized) name; false: NXDOMAIN.
  [[nodiscard]] virtual bool MayResolve(std::string_view host) const = 0;
  // The names of the credentials bound to `dest` (ProxyConfig::intercept.credentials), sorted.
  // Non-empty: the proxy terminates the connection's TLS and reads its requests (with
  // ProxyConfig::intercept.ca set); empty: a tunnel, as before. Called on the io thread; no
  // blocking.
  [[nodiscard]] virtual std::vector<std::string> CredentialsFor(const Destination& dest) const {
    (void)dest;
    return {};
  }
  // Decides one request on an intercepted connection, after the connection itself was allowed
  // (Decide): the profile's method and path rules, and the approver for `ask`. Like Decide, `done`
  // is called exactly once, from any thread. Default: allowed (the connection's decision holds).
  virtual void DecideRequest(const HttpExchange& request, std::function<void(Decision)> done) {
    (void)request;
    // Moved, not copied: clang-tidy's performance-unnecessary-value-param flags a by-value
    // parameter that is only called.
    const std::function<void(Decision)> reply = std::move(done);
    reply({true, "", "the connection is allowed"});
  }
};

// The operator's curl-style `--resolve HOST:PORT:ADDR`. Trusted, so exempt from the refusal of
// non-public addresses.
struct ResolveOverride {
  std::string host;  // normalized
  std::uint16_t port = 0;
  std::string address;  // canonical IP text
};

// Parses "pkgs.test:8080:127.0.0.2" or "h:443:[::1]". kInvalidInput, saying what is wrong.
[[nodiscard]] Result<ResolveOverride> ParseResolveOverride(std::string_view text);

// Who refused a connection, for the hint that says how to allow it
// (launcher/session/network_hint.h).
enum class RefusedBy : std::uint8_t {
  kNone,     // not refused (allowed), or ended before anything was decided
  kPolicy,   // the policy's decision: no rule allows the host, or a deny rule
  kAddress,  // the proxy: the destination is (or resolves to) a non-public address no rule names
  kProxy,    // the proxy, for another reason: malformed request, TLS name mismatch, budget, ...
};

// One per connection, reported when it ends (or is refused).
struct ConnectionRecord {
  Destination dest;     // host "" when the client never named one (a malformed request)
  std::string address;  // the address connected to ("" if none)
  // The verdict: allowed by the policy and not refused by the proxy itself. An allowed connection
  // may still have failed (error: the upstream refused, the budget cut it, ...).
  bool allowed = false;
  std::string rule;
  std::string reason;  // the policy's, or the proxy's own refusal (private address, SNI mismatch,
                       // budget, malformed request)
  RefusedBy refused_by = RefusedBy::kNone;  // set when allowed is false and something refused it
  // RefusedBy::kAddress: the non-public address refused (the first, when a name has several).
  std::string refused_address;
  std::uint64_t bytes_up = 0;    // client -> upstream, relayed
  std::uint64_t bytes_down = 0;  // upstream -> client, relayed
  std::chrono::milliseconds duration{0};
  std::string error;  // the upstream connect error, a relay error, "proxy stopped", ...
};

// One request on an intercepted connection, reported when its response ended (or it was refused).
struct ExchangeRecord {
  HttpExchange request;
  // The credentials whose value went into it (names, never values), sorted.
  std::vector<std::string> credentials;
  bool allowed = false;  // decided allowed and sent upstream
  std::string rule;
  std::string reason;  // the policy's reason, or the proxy's refusal
  // Set when the request carried the placeholder of a credential not bound to this host (an
  // attempted exfiltration): the credential's name. The request was refused.
  std::string misdirected;
  int status = 0;  // the upstream's final status code; 0: none (refused, failed, or no head)
  std::uint64_t bytes_up = 0;    // the request as sent upstream (head and body)
  std::uint64_t bytes_down = 0;  // the response as relayed to the client
  std::chrono::milliseconds duration{0};
  std::string error;  // the upstream TLS or relay error, ""
};

class SandboxCa;
class Tls;

// TLS interception for destinations a credential is bound to (issue 36).
struct InterceptConfig {
  // Mints the leaf certificates; null: nothing is intercepted (every connection a tunnel). Used on
  // the io thread only.
  std::shared_ptr<SandboxCa> ca;
  // What does TLS (tls.h); needed with a CA.
  const Tls* tls = nullptr;
  std::vector<SandboxCredential> credentials;  // every credential of the sandbox
  // The trust anchors for upstream certificates: a PEM file (cagent's own SSL_CERT_FILE), or ""
  // for OpenSSL's default paths (the host's trust store).
  std::string upstream_ca_file;
  // Each request on an intercepted connection, on the io thread; may be empty.
  std::function<void(const ExchangeRecord&)> on_exchange;
};

struct ProxyConfig {
  // A listening TCP socket: HTTP proxy (CONNECT and absolute-form forwarding) and SOCKS5 on the
  // same port, told apart by the first byte (0x05 = SOCKS5). -1 = none.
  int proxy_fd = -1;
  int dns_fd = -1;  // a bound UDP socket: the DNS stub; -1 = none
  // A listening TCP socket: the same stub over TCP (RFC 7766 framing: a two-byte length before
  // each message, several queries per connection); -1 = none.
  int dns_tcp_fd = -1;
  // Called on the io thread for each query the stub answers NXDOMAIN because Policy::MayResolve
  // said no, with the normalized name (queries for it, A and AAAA alike, each call it). May be
  // empty. It must not block and must not call Stop().
  std::function<void(const std::string& name)> on_lookup_refused;
  // Listening TCP sockets bound to 0.0.0.0:PORT (one per port): connections to a synthetic address
  // on that port.
  std::vector<int> transparent_fds;
  std::vector<ResolveOverride> overrides;
  std::uint64_t max_bytes = 0;        // egress budget, both ways, all connections; 0 = unlimited
  std::uint64_t max_connections = 0;  // destinations asked for; 0 = unlimited
  std::size_t max_concurrent = 256;   // beyond it a new connection is accepted and closed at once
  std::chrono::milliseconds connect_timeout{10000};
  // To read a request head, a SOCKS greeting and request, or a ClientHello.
  std::chrono::milliseconds head_timeout{10000};
  std::string synthetic_prefix = "127.77";  // synthetic A answers are 127.77.x.y
  // Relay with splice(2) through a pipe per direction (no copy through user space); false, or no
  // pipe to be had: copy through a 64 KiB buffer each way.
  bool use_splice = true;
  InterceptConfig intercept;
};

class Proxy {
 public:
  // Starts serving on the fds in `config`, which it owns from this call on (closed on failure
  // too), on its own io thread until Stop(). `on_record` is called on that thread, one call at a
  // time; it must not call Stop().
  static Result<std::unique_ptr<Proxy>> Start(
      ProxyConfig config, std::shared_ptr<Policy> policy,
      std::function<void(const ConnectionRecord&)> on_record);

  // Closes the listeners and every connection (each open one is recorded with error "proxy
  // stopped"), joins the thread. Idempotent; also run by the destructor.
  void Stop();
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  struct Totals {
    std::uint64_t connections = 0;  // records with allowed (relayed, or failed upstream)
    // Records without allowed, and connections closed at once beyond max_concurrent (which get no
    // record: a flood of them is not to flood the audit log).
    std::uint64_t refused = 0;
    std::uint64_t bytes_up = 0;
    std::uint64_t bytes_down = 0;
  };
  // Totals so far; thread-safe.
  [[nodiscard]] Totals totals() const;
  // Why the proxy refuses everything now, e.g. "egress byte budget of 10.0 MiB used up" ("" while
  // within budget); thread-safe.
  [[nodiscard]] std::string budget_exhausted() const;

  class Impl;

 private:
  explicit Proxy(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace cagent::launcher::egress
