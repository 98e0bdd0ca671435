// Interception (issue 36): for a destination some credential is bound to, the egress proxy does
// not tunnel the client's TLS. It completes the handshake itself with a leaf the sandbox's CA
// signed for that host (launcher/egress/tls/sandbox_ca.h), opens its own TLS connection upstream
// that verifies the real certificate, and reads the request in clear: the placeholders of the bound
// credentials are swapped for their values (credential_swap.h), a placeholder of any other
// credential gets the request refused, the policy decides the method and path, and only then does
// the request go upstream. Runs in cagent (trusted) on the proxy's io thread; the client is
// hostile.
//
// One request per connection: the upstream is asked to close after its response and the client
// hears "Connection: close" (as the proxy's plain forwarding does), and the client's bytes after
// the first request's body are never relayed, so nothing reaches the upstream that was not read,
// swapped and decided. Only TLS is intercepted: a client that does not start TLS on a bound
// destination is refused (a credential never travels in clear).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/egress/credential_swap.h"
#include "launcher/egress/http_body.h"
#include "launcher/egress/http_head.h"
#include "launcher/egress/proxy.h"
#include "launcher/egress/tls.h"

struct ssl_ctx_st;

namespace cagent::launcher::egress {

// The client-side TLS context for upstream connections: peer verification against the PEM file
// `ca_file`, or OpenSSL's default paths when it is "", TLS 1.2 at least, HTTP/1.1 offered by ALPN.
// kFailed when the file cannot be loaded.
Result<std::shared_ptr<ssl_ctx_st>> MakeUpstreamContext(const std::string& ca_file);

class Interception final : public InterceptionHandle,
                           public std::enable_shared_from_this<Interception> {
 public:
  // `client` and `upstream` (connected) belong to the caller and stay open until `done`; `keep`
  // is held until this object is destroyed (the sockets' owner). `done` is called once, on the io
  // thread; the caller then closes both sockets, which ends any operation still pending.
  Interception(boost::asio::ip::tcp::socket& client, boost::asio::ip::tcp::socket& upstream,
               InterceptSetup setup, InterceptHooks hooks, std::shared_ptr<void> keep,
               std::function<void(const InterceptEnd&)> done);
  ~Interception() override;
  Interception(const Interception&) = delete;
  Interception& operator=(const Interception&) = delete;

  void Start() override;
  // Ends it now (the proxy stops, the budget is used up): the request read so far is recorded with
  // `error`, and `done` is called.
  void Stop(const std::string& error) override;

 private:
  using TlsStream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>;
  enum class TimeoutKind : std::uint8_t {
    kRefusal,  // the proxy refuses the connection (the client was too slow)
    kError,    // the upstream was too slow
    kClose,    // the client did not answer close_notify: the end, as planned
  };

  void ArmTimer(const std::string& what, TimeoutKind kind);
  void Disarm();
  void OnClientHandshake(const boost::system::error_code& ec);
  void OnUpstreamHandshake(const boost::system::error_code& ec);
  void ReadRequest();
  void OnRequestBytes(const boost::system::error_code& ec, std::size_t n);
  void OnRequest(const HttpHead& head);
  void OnDecision(const Decision& d);
  void WriteUpstream(std::string bytes);
  void ReadRequestBody();
  void ReadResponse();
  void OnResponseBytes(const boost::system::error_code& ec, std::size_t n);
  void WriteClient(std::string bytes, bool then_read);
  void EndResponse();
  void CloseClient();
  // Answers the client with `status` and a one-line text body, then ends (the request, if one was
  // read and `refused`, recorded as refused with `reason`).
  void Answer(const std::string& status, const std::string& body, const std::string& reason,
              const std::string& error, bool refused = true);
  void End(const std::string& refusal, const std::string& error);

  std::shared_ptr<void> keep_;  // first: released last
  boost::asio::ip::tcp::socket& client_;
  boost::asio::ip::tcp::socket& upstream_;
  InterceptSetup setup_;
  InterceptHooks hooks_;
  std::function<void(const InterceptEnd&)> done_;
  std::optional<boost::asio::ssl::context> server_ctx_;
  std::optional<boost::asio::ssl::context> upstream_ctx_;
  std::optional<TlsStream> client_tls_;
  std::optional<TlsStream> upstream_tls_;
  boost::asio::steady_timer timer_;
  std::uint64_t timer_gen_ = 0;
  bool client_reading_ = false;  // a read of the client's stream is pending

  std::string in_;  // the request head as read, then body bytes
  std::vector<char> read_buf_;
  std::optional<HttpHead> head_;
  std::optional<RequestBody> body_;
  std::string up_out_;    // a write to the upstream in flight
  std::string down_out_;  // a write to the client in flight
  std::vector<char> down_buf_;
  std::string response_in_;  // the response until its head is rewritten
  bool response_head_ = true;
  bool decided_ = false;    // the policy's decision arrived
  std::string pending_up_;  // the request's head (and body so far) until then
  std::optional<ExchangeRecord> exchange_;
  std::chrono::steady_clock::time_point exchange_start_;
  InterceptEnd end_;
  std::string answer_error_;  // the error an Answer() ends with
  bool answered_ = false;
  bool ended_ = false;
};

}  // namespace cagent::launcher::egress
