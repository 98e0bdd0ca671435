// HttpClient: one HTTP/1.1 request per connection (Connection: close) over TCP or TLS, fully
// asynchronous on the broker's io_context (DNS included), with a deadline per exchange and
// cancellation. The response body is handed to the caller piece by piece as it arrives, so a
// streamed (SSE) answer can be parsed while it is still coming. Runs in cagent (trusted), on the
// io_context's thread; not thread-safe (the io_context is run by one thread).
//
// TLS: certificates are always verified — against the system's trust store (OpenSSL's default
// paths, which honour SSL_CERT_FILE / SSL_CERT_DIR) plus an optional extra CA file — and the
// certificate must name the host (OpenSSL's own host/IP check), with SNI sent for host names.
// There is deliberately no switch to turn verification off.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace cagent::launcher::model {

// An http:// or https:// URL split into what a request needs. Userinfo ("user:pw@") is refused:
// credentials travel in headers, never in a URL that ends up in logs.
struct Url {
  bool tls = true;
  std::string host;  // without brackets for IPv6 literals
  std::string port;  // always set ("443" / "80" when the URL has none)
  std::string path;  // "/v1" (no trailing '/'; "" for the root); query kept if present

  // "https://host[:port]path" — safe to log.
  [[nodiscard]] std::string ToString() const;
  // The Host header value ("host" or "host:port" when the port is not the scheme's default).
  [[nodiscard]] std::string HostHeader() const;
  // True for plain http:// to localhost, 127.0.0.0/8 or ::1 (a local model server).
  [[nodiscard]] bool IsLoopbackHttp() const;
};
Result<Url> ParseUrl(std::string_view text);
// True for "localhost" (any case) and the literal addresses 127.0.0.0/8 and ::1.
[[nodiscard]] bool IsLoopbackHost(const std::string& host);

struct HttpRequest {
  Url url;  // scheme, host and port to connect to
  std::string method = "POST";
  std::string target;  // request target ("/v1/chat/completions")
  std::vector<std::pair<std::string, std::string>> headers;  // Host, Content-Length, Connection
                                                             // are set by the client
  std::string body;
};

// Status line and headers of a response (header names lower-cased; a repeated header keeps the
// last value).
struct HttpHead {
  int status = 0;
  std::map<std::string, std::string> headers;
  [[nodiscard]] std::string Header(const std::string& lower_name) const;
};

// Why an exchange failed before the response was complete.
struct HttpFailure {
  enum class Kind { kResolve, kConnect, kTls, kWrite, kRead, kTimeout, kTooLarge };
  Kind kind = Kind::kRead;
  std::string message;  // "cannot connect to host:port: Connection refused" (no credentials)
  // kConnect only: the host answered that nothing listens on the port (ECONNREFUSED, from the last
  // address tried), as opposed to no answer at all or an unreachable network.
  bool refused = false;
};

struct HttpHandlers {
  // The status line and headers arrived.
  std::function<void(const HttpHead&)> on_head;
  // A piece of the (de-chunked) body arrived. The caller may Cancel() the exchange from here.
  std::function<void(std::string_view)> on_body;
  // The exchange ended: nullptr when the whole response was read, else why not. Not called after
  // Cancel().
  std::function<void(const HttpFailure*)> on_done;
};

class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  // Aborts the exchange (closes the connection); no handler is called afterwards.
  virtual void Cancel() = 0;
};

class HttpClient {
 public:
  // `ca_file`: an extra PEM file of trusted CAs, added to the default trust store ("" = none).
  // Fails when the TLS context cannot be set up or the CA file cannot be loaded.
  static Result<std::unique_ptr<HttpClient>> Make(boost::asio::io_context& io,
                                                  const std::string& ca_file = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts `request`; the handlers run on the io_context's thread, never inline from Start().
  // `timeout` bounds the whole exchange (resolve, connect, handshake, write, read).
  // `max_body_bytes` bounds the response body. The returned handle may be used to Cancel(); the
  // exchange keeps itself alive until it ends, and this client must outlive it.
  std::shared_ptr<HttpExchange> Start(HttpRequest request, std::chrono::milliseconds timeout,
                                      HttpHandlers handlers,
                                      std::size_t max_body_bytes = std::size_t{64} << 20);

 private:
  HttpClient(boost::asio::io_context& io, std::unique_ptr<boost::asio::ssl::context> tls);
  boost::asio::io_context& io_;
  std::unique_ptr<boost::asio::ssl::context> tls_;
};

}  // namespace cagent::launcher::model
