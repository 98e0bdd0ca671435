#include "launcher/model/http_client.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cctype>
#include <type_traits>

namespace cagent::launcher::model {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

// Whether `host` is an IP literal (SNI and the certificate's name check are for names only).
// make_address reads a C string, so text with a NUL in it ("1.2.3.4\0evil") is no literal even
// though the part before the NUL is.
bool IsAddressLiteral(const std::string& host) {
  if (host.find('\0') != std::string::npos) return false;
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(host, ec);
  return !ec;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Seconds(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  const auto tenths = (ms + 50) / 100;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " s";
}

// One request on one connection. Stream is tcp::socket or ssl::stream<tcp::socket>.
template <bool kTls>
class Session final : public HttpExchange, public std::enable_shared_from_this<Session<kTls>> {
  using Stream = std::conditional_t<kTls, ssl::stream<tcp::socket>, tcp::socket>;

 public:
  Session(asio::io_context& io, ssl::context* tls, HttpRequest request,
          std::chrono::milliseconds timeout, HttpHandlers handlers, std::size_t max_body)
      : resolver_(io),
        timer_(io),
        stream_(MakeStream(io, tls)),
        request_(std::move(request)),
        timeout_(timeout),
        handlers_(std::move(handlers)) {
    parser_.body_limit(max_body);
    parser_.header_limit(64 * 1024);
  }

  void Run() {
    auto self = this->shared_from_this();
    timer_.expires_after(timeout_);
    timer_.async_wait([self](beast::error_code ec) {
      if (ec || self->finished_) return;
      self->timed_out_ = true;
      self->Abort();
    });
    resolver_.async_resolve(
        request_.url.host, request_.url.port,
        [self](beast::error_code ec, const tcp::resolver::results_type& results) {
          self->OnResolve(ec, results);
        });
  }

  void Cancel() override {
    if (finished_) return;
    cancelled_ = true;
    finished_ = true;
    timer_.cancel();
    Abort();
    handlers_ = {};  // drops what the caller's handlers hold (they may hold the caller)
  }

 private:
  static Stream MakeStream(asio::io_context& io, ssl::context* tls) {
    if constexpr (kTls) {
      return Stream(io, *tls);
    } else {
      (void)tls;
      return Stream(io);
    }
  }

  tcp::socket& Socket() {
    if constexpr (kTls) {
      return stream_.next_layer();
    } else {
      return stream_;
    }
  }

  std::string Where() const { return request_.url.host + ":" + request_.url.port; }

  // Closes everything; pending operations complete with operation_aborted.
  void Abort() {
    beast::error_code ignored;
    resolver_.cancel();
    Socket().shutdown(tcp::socket::shutdown_both, ignored);
    Socket().close(ignored);
  }

  // True when the handler should stop (cancelled, or already failed). Converts an error seen
  // after the deadline passed into the timeout failure.
  bool Stopped(const beast::error_code& ec) {
    if (cancelled_ || finished_) return true;
    if (timed_out_) {
      Fail(HttpFailure::Kind::kTimeout,
           "timed out after " + Seconds(timeout_) + " (no complete answer from " + Where() + ")");
      return true;
    }
    (void)ec;
    return false;
  }

  void Fail(HttpFailure::Kind kind, std::string message, bool refused = false) {
    if (finished_) return;
    finished_ = true;
    timer_.cancel();
    Abort();
    HttpFailure failure{kind, std::move(message), refused};
    auto on_done = std::move(handlers_.on_done);
    handlers_ = {};
    if (on_done) on_done(&failure);
  }

  void Succeed() {
    if (finished_) return;
    finished_ = true;
    timer_.cancel();
    Abort();
    auto on_done = std::move(handlers_.on_done);
    handlers_ = {};
    if (on_done) on_done(nullptr);
  }

  void OnResolve(beast::error_code ec, const tcp::resolver::results_type& results) {
    if (Stopped(ec)) return;
    if (ec) {
      Fail(HttpFailure::Kind::kResolve,
           "cannot resolve " + request_.url.host + ": " + ec.message());
      return;
    }
    auto self = this->shared_from_this();
    asio::async_connect(Socket(), results,
                        [self](beast::error_code e, const tcp::endpoint&) { self->OnConnect(e); });
  }

  void OnConnect(beast::error_code ec) {
    if (Stopped(ec)) return;
    if (ec) {
      Fail(HttpFailure::Kind::kConnect, "cannot connect to " + Where() + ": " + ec.message(),
           ec == asio::error::connection_refused);
      return;
    }
    if constexpr (kTls) {
      SSL* ssl_handle = stream_.native_handle();
      bool ok = true;
      if (!IsAddressLiteral(request_.url.host)) {
        // SNI for host names only (RFC 6066 forbids IP literals), and OpenSSL's RFC 6125 host
        // check of the certificate's subjectAltName during the handshake.
        ok = SSL_set_tlsext_host_name(ssl_handle, request_.url.host.c_str()) == 1 &&
             SSL_set1_host(ssl_handle, request_.url.host.c_str()) == 1;
        SSL_set_hostflags(ssl_handle, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      } else {
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_handle), request_.url.host.c_str()) ==
             1;
      }
      if (!ok) {
        Fail(HttpFailure::Kind::kTls, "cannot set up TLS host verification for " + Where());
        return;
      }
      auto self = this->shared_from_this();
      stream_.async_handshake(ssl::stream_base::client,
                              [self](beast::error_code e) { self->OnHandshake(e); });
    } else {
      Write();
    }
  }

  void OnHandshake(beast::error_code ec) {
    if (Stopped(ec)) return;
    if constexpr (kTls) {
      if (ec) {
        std::string why = ec.message();
        const auto verify = SSL_get_verify_result(stream_.native_handle());
        if (verify != X509_V_OK) {
          why = std::string("certificate verification failed: ") +
                X509_verify_cert_error_string(verify) +
                " (the server's certificate must chain to a trusted CA and name " +
                request_.url.host + "; a private CA can be trusted with SSL_CERT_FILE)";
        }
        Fail(HttpFailure::Kind::kTls, "TLS handshake with " + Where() + " failed: " + why);
        return;
      }
    }
    Write();
  }

  void Write() {
    const http::verb verb = http::string_to_verb(request_.method);
    req_.method(verb == http::verb::unknown ? http::verb::post : verb);
    req_.target(request_.target.empty() ? "/" : request_.target);
    req_.version(11);
    req_.set(http::field::host, request_.url.HostHeader());
    for (const auto& [name, value] : request_.headers) req_.set(name, value);
    req_.set(http::field::connection, "close");
    req_.body() = std::move(request_.body);
    req_.prepare_payload();
    auto self = this->shared_from_this();
    http::async_write(stream_, req_,
                      [self](beast::error_code ec, std::size_t) { self->OnWrite(ec); });
  }

  void OnWrite(beast::error_code ec) {
    if (Stopped(ec)) return;
    if (ec) {
      Fail(HttpFailure::Kind::kWrite,
           "cannot send the request to " + Where() + ": " + ec.message());
      return;
    }
    auto self = this->shared_from_this();
    http::async_read_header(stream_, buffer_, parser_,
                            [self](beast::error_code e, std::size_t) { self->OnHeader(e); });
  }

  void OnHeader(beast::error_code ec) {
    if (Stopped(ec)) return;
    if (ec) {
      ReadFailed(ec, /*in_body=*/false);
      return;
    }
    HttpHead head;
    head.status = static_cast<int>(parser_.get().result_int());
    for (const auto& field : parser_.get()) {
      const auto name = field.name_string();
      const auto value = field.value();
      head.headers[Lower(std::string_view(name.data(), name.size()))] =
          std::string(value.data(), value.size());
    }
    // A copy: the handler may Cancel(), which drops handlers_ while the handler runs.
    if (auto on_head = handlers_.on_head) on_head(head);
    if (finished_) return;
    if (parser_.is_done()) {
      Succeed();
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    parser_.get().body().data = chunk_.data();
    parser_.get().body().size = chunk_.size();
    auto self = this->shared_from_this();
    http::async_read_some(stream_, buffer_, parser_,
                          [self](beast::error_code ec, std::size_t) { self->OnBody(ec); });
  }

  void OnBody(beast::error_code ec) {
    if (Stopped(ec)) return;
    if (ec == http::error::need_buffer) ec = {};
    if constexpr (kTls) {
      // A server that ends a read-to-EOF body without a TLS close_notify: accept the end only
      // where the message length is "until the connection closes".
      if (ec == ssl::error::stream_truncated && parser_.need_eof()) {
        beast::error_code eof_ec;
        parser_.put_eof(eof_ec);
        ec = eof_ec;
      }
    }
    const std::size_t got = chunk_.size() - parser_.get().body().size;
    if (got > 0 && handlers_.on_body) {
      auto on_body = handlers_.on_body;  // see OnHeader
      on_body(std::string_view(chunk_.data(), got));
      if (finished_) return;
    }
    if (ec) {
      ReadFailed(ec, /*in_body=*/true);
      return;
    }
    if (parser_.is_done()) {
      Succeed();
      return;
    }
    ReadBody();
  }

  void ReadFailed(beast::error_code ec, bool in_body) {
    if (ec == http::error::body_limit) {
      Fail(HttpFailure::Kind::kTooLarge, "the response from " + Where() + " is too large");
      return;
    }
    std::string why = ec.message();
    if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
        ec == asio::error::eof) {
      why = "the connection closed early";
    }
    Fail(HttpFailure::Kind::kRead,
         std::string(in_body ? "the response body from " : "the response from ") + Where() +
             " was cut off: " + why);
  }

  tcp::resolver resolver_;
  asio::steady_timer timer_;
  Stream stream_;
  HttpRequest request_;
  std::chrono::milliseconds timeout_;
  HttpHandlers handlers_;
  http::request<http::string_body> req_;
  beast::flat_buffer buffer_;
  http::response_parser<http::buffer_body> parser_;
  std::array<char, 16384> chunk_{};
  bool finished_ = false;
  bool cancelled_ = false;
  bool timed_out_ = false;
};

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string Url::ToString() const {
  std::string host_part = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  const bool default_port = (tls && port == "443") || (!tls && port == "80");
  return std::string(tls ? "https://" : "http://") + host_part + (default_port ? "" : ":" + port) +
         path;
}

std::string Url::HostHeader() const {
  std::string host_part = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  const bool default_port = (tls && port == "443") || (!tls && port == "80");
  return default_port ? host_part : host_part + ":" + port;
}

bool IsLoopbackHost(const std::string& host) {
  if (Lower(host) == "localhost") return true;
  if (host.find('\0') != std::string::npos) return false;  // see IsAddressLiteral
  boost::system::error_code ec;
  const auto addr = boost::asio::ip::make_address(host, ec);
  return !ec && addr.is_loopback();
}

bool Url::IsLoopbackHttp() const { return !tls && IsLoopbackHost(host); }

Result<Url> ParseUrl(std::string_view text) {
  const std::string what = "URL \"" + std::string(text) + "\"";
  Url url;
  std::string_view rest = text;
  const std::string lower = Lower(text.substr(0, std::min<std::size_t>(text.size(), 8)));
  if (lower.rfind("https://", 0) == 0) {
    url.tls = true;
    rest.remove_prefix(8);
  } else if (lower.rfind("http://", 0) == 0) {
    url.tls = false;
    rest.remove_prefix(7);
  } else {
    return PlainError(what, "expected http:// or https://");
  }
  const std::size_t authority_end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, authority_end);
  std::string_view path =
      authority_end == std::string_view::npos ? std::string_view{} : rest.substr(authority_end);
  if (authority.find('@') != std::string_view::npos) {
    return PlainError(what, "credentials in the URL are not supported; use the API key variable");
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return PlainError(what, "unterminated IPv6 address");
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return PlainError(what, "unexpected text after the IPv6 address");
      port = after.substr(1);
    }
  } else {
    const std::size_t colon = authority.find(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty()) return PlainError(what, "no host name");
  for (char c : url.host) {
    if (std::isspace(static_cast<unsigned char>(c)) ||
        std::iscntrl(static_cast<unsigned char>(c))) {
      return PlainError(what, "the host name contains a space or control character");
    }
  }
  if (!port.empty() || authority.find(':') != std::string_view::npos) {
    if (!AllDigits(port) || port.size() > 5 || std::stoi(std::string(port)) == 0 ||
        std::stoi(std::string(port)) > 65535) {
      return PlainError(what, "the port must be a number from 1 to 65535");
    }
    url.port = std::string(port);
  } else {
    url.port = url.tls ? "443" : "80";
  }
  if (const std::size_t hash = path.find('#'); hash != std::string_view::npos) {
    path = path.substr(0, hash);
  }
  for (char c : path) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return PlainError(what, "the path contains a space or control character");
    }
  }
  url.path = std::string(path);
  if (url.path.find('?') == std::string::npos) {
    while (!url.path.empty() && url.path.back() == '/') url.path.pop_back();
  }
  return url;
}

std::string HttpHead::Header(const std::string& lower_name) const {
  const auto it = headers.find(lower_name);
  return it == headers.end() ? std::string{} : it->second;
}

HttpClient::HttpClient(boost::asio::io_context& io, std::unique_ptr<ssl::context> tls)
    : io_(io), tls_(std::move(tls)) {}

HttpClient::~HttpClient() = default;

Result<std::unique_ptr<HttpClient>> HttpClient::Make(boost::asio::io_context& io,
                                                     const std::string& ca_file) {
  auto tls = std::make_unique<ssl::context>(ssl::context::tls_client);
  boost::system::error_code ec;
  // The system trust store (OpenSSL's default paths: SSL_CERT_FILE / SSL_CERT_DIR when set).
  if (tls->set_default_verify_paths(ec); ec) {
    return PlainError("TLS setup", "cannot load the default trust store: " + ec.message());
  }
  if (!ca_file.empty()) {
    if (tls->load_verify_file(ca_file, ec); ec) {
      return PlainError("TLS setup", "cannot load the CA file " + ca_file + ": " + ec.message());
    }
  }
  tls->set_verify_mode(ssl::verify_peer, ec);
  SSL_CTX_set_min_proto_version(tls->native_handle(), TLS1_2_VERSION);
  return std::unique_ptr<HttpClient>(new HttpClient(io, std::move(tls)));
}

std::shared_ptr<HttpExchange> HttpClient::Start(HttpRequest request,
                                                std::chrono::milliseconds timeout,
                                                HttpHandlers handlers, std::size_t max_body_bytes) {
  if (request.url.tls) {
    auto s = std::make_shared<Session<true>>(io_, tls_.get(), std::move(request), timeout,
                                             std::move(handlers), max_body_bytes);
    s->Run();
    return s;
  }
  auto s = std::make_shared<Session<false>>(io_, nullptr, std::move(request), timeout,
                                            std::move(handlers), max_body_bytes);
  s->Run();
  return s;
}

}  // namespace cagent::launcher::model
