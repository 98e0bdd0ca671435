// The TLS half of the egress proxy, behind an interface (issue 37).
//
// Interception (issue 36) terminates the sandbox's TLS to a credential-bound host and opens its own
// upstream: that is the only egress code that needs OpenSSL. It lives in launcher/egress/tls/
// (cagent_egress_tls), reached only through `Tls` below, so that a program which never intercepts
// links no OpenSSL at all: `cagent`, the launcher (`exec`, `policy`, `--version`), maps and
// relocates none of it on every launch. The programs that do intercept (`cagent-full`, the tests)
// install the OpenSSL implementation at start (tls/openssl_tls.h); where none is installed, a
// profile with credentials is refused, or (`cagent exec`) handed to cagent-full.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/egress/credential_swap.h"
#include "launcher/egress/proxy.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX: only ever held here, never touched

namespace cagent::launcher::egress {

class SandboxCa;  // tls/sandbox_ca.h

struct SandboxCaOptions {
  std::string label = "cagent sandbox CA";  // the CA's common name (the run id is useful here)
  // The hosts the CA may sign for: DNS names (lowercase, no trailing dot) and IP literals.
  std::vector<std::string> hosts;
  // Tests only: a CA without the name constraints, to show what they prevent.
  bool name_constraints = true;
};

// A CA made for one sandbox, and its certificate for the sandbox's trust bundle.
struct MadeCa {
  std::shared_ptr<SandboxCa> ca;
  std::string certificate_pem;
};

struct InterceptSetup {
  Destination dest;
  std::shared_ptr<ssl_ctx_st> server;           // presents the leaf for dest.host to the client
  std::shared_ptr<ssl_ctx_st> upstream;         // Tls::MakeUpstreamContext
  std::vector<const SandboxCredential*> bound;  // bound to dest, non-empty
  const std::vector<SandboxCredential>* all = nullptr;  // every credential; outlives this
  std::chrono::milliseconds head_timeout{10000};        // for the handshake and the request head
};

struct InterceptHooks {
  // Counts relayed bytes against the proxy's budget; false: over it (the proxy is cutting every
  // connection).
  std::function<bool(std::uint64_t n, bool up)> spend;
  // Decides a request (Policy::DecideRequest); the callback must be called on the io thread.
  std::function<void(const HttpExchange&, std::function<void(Decision)>)> decide;
  // Each request read (allowed, refused or failed), once.
  std::function<void(const ExchangeRecord&)> on_exchange;
};

struct InterceptEnd {
  std::uint64_t bytes_up = 0;    // to the upstream, through its TLS (plaintext bytes)
  std::uint64_t bytes_down = 0;  // to the client (plaintext bytes)
  // The proxy refused the connection itself (no TLS from the client, the wrong server name, no
  // request within the time): the connection's record becomes a refusal with this reason.
  std::string refusal;
  std::string error;  // the upstream's TLS failure, a relay error; "" otherwise
};

// One intercepted connection (tls/intercept.h).
class InterceptionHandle {
 public:
  virtual ~InterceptionHandle() = default;
  virtual void Start() = 0;
  // Ends it now (the proxy stops, the budget is used up): the request read so far is recorded with
  // `error`, and `done` is called.
  virtual void Stop(const std::string& error) = 0;
};

class Tls {
 public:
  virtual ~Tls() = default;

  // Makes the key and the self-signed, name-constrained certificate. kInvalidInput for an empty
  // host list or a host that is neither a DNS name nor an IP literal; kFailed when OpenSSL fails.
  virtual Result<MadeCa> MakeCa(SandboxCaOptions options) const = 0;
  // A server context presenting a leaf `ca` signed for `host`; kInvalidInput for a host the CA
  // was not made for.
  virtual Result<std::shared_ptr<ssl_ctx_st>> ServerContextFor(SandboxCa& ca,
                                                               const std::string& host) const = 0;
  // The client-side context for upstream connections: peer verification against the PEM file
  // `ca_file`, or OpenSSL's default paths when it is "". kFailed when the file cannot be loaded.
  virtual Result<std::shared_ptr<ssl_ctx_st>> MakeUpstreamContext(
      const std::string& ca_file) const = 0;
  // An interception of the connection `client` -> `upstream` (both connected; they belong to the
  // caller and stay open until `done`). `keep` is held until the interception is destroyed; `done`
  // is called once, on the io thread. Not started: call Start().
  virtual std::shared_ptr<InterceptionHandle> Intercept(
      boost::asio::ip::tcp::socket& client, boost::asio::ip::tcp::socket& upstream,
      InterceptSetup setup, InterceptHooks hooks, std::shared_ptr<void> keep,
      std::function<void(const InterceptEnd&)> done) const = 0;
};

// The program's TLS, installed once at start by a program that has one (before any thread that
// could read it); null in one that does not (the launcher).
void InstallTls(const Tls* tls);
const Tls* InstalledTls();

}  // namespace cagent::launcher::egress
