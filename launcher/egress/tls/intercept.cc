#include "launcher/egress/tls/intercept.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>
#include <utility>

namespace cagent::launcher::egress {

namespace {

namespace asio = boost::asio;
using boost::system::error_code;

constexpr std::size_t kHeadLimit = 16 * 1024;
constexpr std::size_t kResponseHeadLimit = 64 * 1024;
constexpr std::size_t kBuffer = 64 * 1024;
// How long the client has to answer cagent's TLS close_notify before the connection is closed.
constexpr auto kShutdownWait = std::chrono::seconds(2);

std::string OpenSslErrors(std::string_view what) {
  std::string out(what);
  unsigned long e = 0;  // NOLINT(google-runtime-int): OpenSSL's type
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out.append(": ").append(buf);
  }
  return out;
}

std::string HostPortText(const Destination& d) {
  const bool v6 = d.host.find(':') != std::string::npos;
  return (v6 ? "[" + d.host + "]" : d.host) + ":" + std::to_string(d.port);
}

// The Host header the upstream gets: the destination, never what the client wrote.
std::string HostHeader(const Destination& d) {
  if (d.port == 443) {
    return d.host.find(':') != std::string::npos ? "[" + d.host + "]" : d.host;
  }
  return HostPortText(d);
}

std::string FormatMs(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000) + " s";
  return std::to_string(ms.count()) + " ms";
}

std::string Response(std::string_view status, std::string_view body) {
  std::string out = "HTTP/1.1 ";
  out.append(status)
      .append("\r\nContent-Type: text/plain\r\nX-Cagent-Refusal: 1\r\nConnection: close\r\n")
      .append("Content-Length: ")
      .append(std::to_string(body.size() + 1))
      .append("\r\n\r\n")
      .append(body)
      .append("\n");
  return out;
}

// "HTTP/1.1 204 ..." -> 204; 0 when the head does not start so.
int StatusOf(std::string_view head) {
  if (head.size() < 12 || head.substr(0, 7) != "HTTP/1." || head[8] != ' ') return 0;
  int status = 0;
  for (std::size_t i = 9; i < 12; i++) {
    if (head[i] < '0' || head[i] > '9') return 0;
    status = status * 10 + (head[i] - '0');
  }
  return status;
}

bool IsEnd(const error_code& ec) {
  return ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
}

bool IsLiteral(const std::string& host) {
  error_code ec;
  (void)asio::ip::make_address(host, ec);
  return !ec;
}

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

}  // namespace

Result<std::shared_ptr<ssl_ctx_st>> MakeUpstreamContext(const std::string& ca_file) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!ctx) return PlainError(OpenSslErrors("make the upstream TLS context"));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  const int loaded = ca_file.empty()
                         ? SSL_CTX_set_default_verify_paths(ctx.get())
                         : SSL_CTX_load_verify_locations(ctx.get(), ca_file.c_str(), nullptr);
  if (loaded != 1) {
    return PlainError(OpenSslErrors(ca_file.empty()
                                        ? std::string("load the system's trusted certificates")
                                        : "load the trusted certificates of " + ca_file));
  }
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  if (SSL_CTX_set_alpn_protos(ctx.get(), kHttp11, sizeof kHttp11) != 0) {
    return PlainError(OpenSslErrors("offer HTTP/1.1 by ALPN"));
  }
  return ctx;
}

Interception::Interception(asio::ip::tcp::socket& client, asio::ip::tcp::socket& upstream,
                           InterceptSetup setup, InterceptHooks hooks, std::shared_ptr<void> keep,
                           std::function<void(const InterceptEnd&)> done)
    : keep_(std::move(keep)),
      client_(client),
      upstream_(upstream),
      setup_(std::move(setup)),
      hooks_(std::move(hooks)),
      done_(std::move(done)),
      timer_(client.get_executor()),
      read_buf_(kBuffer),
      down_buf_(kBuffer) {}

Interception::~Interception() = default;

void Interception::Start() {
  // asio's context frees its handle: each gets a reference of its own.
  SSL_CTX_up_ref(setup_.server.get());
  server_ctx_.emplace(setup_.server.get());
  SSL_CTX_up_ref(setup_.upstream.get());
  upstream_ctx_.emplace(setup_.upstream.get());
  client_tls_.emplace(client_, *server_ctx_);
  upstream_tls_.emplace(upstream_, *upstream_ctx_);
  ArmTimer("the client completed no TLS handshake within " + FormatMs(setup_.head_timeout),
           TimeoutKind::kRefusal);
  client_tls_->async_handshake(
      asio::ssl::stream_base::server,
      [self = shared_from_this()](const error_code& ec) { self->OnClientHandshake(ec); });
}

void Interception::Stop(const std::string& error) {
  if (!ended_) End("", error);
}

void Interception::ArmTimer(const std::string& what, TimeoutKind kind) {
  const std::uint64_t gen = ++timer_gen_;
  timer_.expires_after(kind == TimeoutKind::kClose ? std::chrono::milliseconds(kShutdownWait)
                                                   : setup_.head_timeout);
  timer_.async_wait([self = shared_from_this(), gen, what, kind](const error_code& ec) {
    if (ec || self->ended_ || gen != self->timer_gen_) return;
    switch (kind) {
      case TimeoutKind::kRefusal:
        self->End(what, "");
        return;
      case TimeoutKind::kError:
        self->End("", what);
        return;
      case TimeoutKind::kClose:
        self->End("", "");
        return;
    }
  });
}

void Interception::Disarm() {
  ++timer_gen_;
  timer_.cancel();
}

void Interception::OnClientHandshake(const error_code& ec) {
  if (ended_) return;
  const std::string& host = setup_.dest.host;
  if (ec) {
    End("the client's TLS handshake for " + HostPortText(setup_.dest) + " failed (" + ec.message() +
            "): the destination has a credential bound to it, so cagent terminates its TLS and "
            "the client must trust the sandbox's CA and speak TLS",
        "");
    return;
  }
  const char* sni = SSL_get_servername(client_tls_->native_handle(), TLSEXT_NAMETYPE_host_name);
  const bool literal = IsLiteral(host);
  if (!literal && (sni == nullptr || Lower(sni) != host)) {
    End(sni == nullptr ? "the TLS ClientHello names no server (CONNECT host " + host + ")"
                       : "TLS server name " + Lower(sni) + " does not match CONNECT host " + host,
        "");
    return;
  }
  SSL* up = upstream_tls_->native_handle();
  if (literal) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(up), host.c_str());
  } else {
    SSL_set_tlsext_host_name(up, host.c_str());
    SSL_set1_host(up, host.c_str());
  }
  ArmTimer("the client sent no complete request within " + FormatMs(setup_.head_timeout),
           TimeoutKind::kRefusal);
  ReadRequest();
}

// The upstream's TLS starts only once a request was read and allowed: nothing reaches it for a
// refused one, and an approval that takes a person minutes does not idle a TLS session meanwhile.
void Interception::OnUpstreamHandshake(const error_code& ec) {
  if (ended_) return;
  if (ec) {
    std::string why = ec.message();
    const auto verified = SSL_get_verify_result(upstream_tls_->native_handle());
    if (verified != X509_V_OK) {
      why =
          std::string("its certificate did not verify: ") + X509_verify_cert_error_string(verified);
    }
    const std::string where = HostPortText(setup_.dest);
    const std::string error = "upstream TLS with " + where + ": " + why;
    exchange_->error = error;
    Answer("502 Bad Gateway", "cagent: no trusted TLS connection to " + where + ": " + why, "",
           error, /*refused=*/false);
    return;
  }
  Disarm();
  ReadResponse();
  WriteUpstream(std::exchange(pending_up_, {}));
}

void Interception::ReadRequest() {
  client_reading_ = true;
  client_tls_->async_read_some(asio::buffer(read_buf_),
                               [self = shared_from_this()](const error_code& ec, std::size_t n) {
                                 self->client_reading_ = false;
                                 self->OnRequestBytes(ec, n);
                               });
}

void Interception::OnRequestBytes(const error_code& ec, std::size_t n) {
  if (ended_) return;
  if (ec) {
    if (in_.empty() && IsEnd(ec)) {
      End("", "");  // the client closed without a request
      return;
    }
    End("", "the client's stream ended inside a request head" +
                (IsEnd(ec) ? std::string() : " (" + ec.message() + ")"));
    return;
  }
  in_.append(read_buf_.data(), n);
  const HttpHeadParse p = ParseHttpHead(in_, kHeadLimit);
  switch (p.status) {
    case HttpHeadParse::Status::kIncomplete:
      ReadRequest();
      return;
    case HttpHeadParse::Status::kMalformed:
      Answer("400 Bad Request", "cagent: malformed request: " + p.error,
             "malformed request: " + p.error, "");
      return;
    case HttpHeadParse::Status::kTooLarge:
      Answer("431 Request Header Fields Too Large", "cagent: " + p.error, p.error, "");
      return;
    case HttpHeadParse::Status::kComplete:
      Disarm();
      OnRequest(p.head);
      return;
  }
}

void Interception::OnRequest(const HttpHead& head) {
  in_.erase(0, head.size);
  head_ = head;
  exchange_.emplace();
  exchange_start_ = std::chrono::steady_clock::now();
  exchange_->request.dest = setup_.dest;
  exchange_->request.method = head.method;
  exchange_->request.path = head.target.substr(0, head.target.find('?'));
  if (head.method == "CONNECT") {
    Answer("405 Method Not Allowed", "cagent: CONNECT inside an intercepted connection",
           "CONNECT inside an intercepted connection is not served", "");
    return;
  }
  if (head.target.empty() || (head.target.front() != '/' && head.target != "*")) {
    Answer("400 Bad Request",
           "cagent: a request on an intercepted connection needs an origin-form target (/path)",
           "the request target is not in origin form", "");
    return;
  }
  auto body = RequestBody::For(head);
  if (!body) {
    const std::string why = body.error().Message();
    const bool coding = why.find("transfer coding") != std::string::npos;
    Answer(coding ? "501 Not Implemented" : "400 Bad Request", "cagent: " + why, why, "");
    return;
  }
  body_ = std::move(*body);

  RequestHead swap{head.method, head.target, {}};
  swap.headers.reserve(head.headers.size());
  for (const HttpHeader& h : head.headers) swap.headers.emplace_back(h.name, h.value);
  const SwapResult swapped = SwapCredentials(swap, setup_.bound, *setup_.all);
  if (swapped.misdirected) {
    exchange_->misdirected = *swapped.misdirected;
    const std::string why = "the request carries the placeholder of credential '" +
                            *swapped.misdirected + "', which is not bound to " +
                            HostPortText(setup_.dest);
    Answer("403 Forbidden", "cagent: refused: " + why, why, "");
    return;
  }
  exchange_->credentials = swapped.used;
  head_->target = std::move(swap.target);
  head_->headers.clear();
  for (auto& [name, value] : swap.headers) head_->headers.push_back({name, std::move(value)});

  std::weak_ptr<Interception> weak = weak_from_this();
  hooks_.decide(exchange_->request, [weak](const Decision& d) {
    if (auto self = weak.lock()) self->OnDecision(d);
  });
}

void Interception::OnDecision(const Decision& d) {
  if (ended_ || !exchange_ || decided_) return;
  decided_ = true;
  exchange_->rule = d.rule;
  exchange_->reason = d.reason;
  if (!d.allow) {
    std::string body = "cagent: " + exchange_->request.method + " " + exchange_->request.path +
                       " on " + HostPortText(setup_.dest) + " refused: " + d.reason;
    if (!d.rule.empty()) body += " (rule: " + d.rule + ")";
    Answer("403 Forbidden", body, d.reason, "");
    return;
  }
  HttpUrl url;
  url.authority = {setup_.dest.host, setup_.dest.port};
  url.authority_text = HostHeader(setup_.dest);
  url.path = head_->target;
  std::string out = OriginFormHead(*head_, url);
  const std::size_t n = body_->Feed(in_);
  if (!body_->error().empty()) {
    Answer("400 Bad Request", "cagent: malformed request body: " + body_->error(),
           "malformed request body: " + body_->error(), "");
    return;
  }
  out.append(in_, 0, n);
  in_.clear();  // anything after the body is not relayed
  exchange_->allowed = true;
  pending_up_ = std::move(out);
  ArmTimer("the TLS handshake with " + HostPortText(setup_.dest) + " took longer than " +
               FormatMs(setup_.head_timeout),
           TimeoutKind::kError);
  upstream_tls_->async_handshake(
      asio::ssl::stream_base::client,
      [self = shared_from_this()](const error_code& uec) { self->OnUpstreamHandshake(uec); });
}

void Interception::WriteUpstream(std::string bytes) {
  if (!hooks_.spend(bytes.size(), true)) {
    Stop("the egress byte budget is used up");
    return;
  }
  end_.bytes_up += bytes.size();
  exchange_->bytes_up += bytes.size();
  up_out_ = std::move(bytes);
  asio::async_write(*upstream_tls_, asio::buffer(up_out_),
                    [self = shared_from_this()](const error_code& ec, std::size_t) {
                      if (self->ended_) return;
                      if (ec) {
                        self->End("", "writing to the upstream: " + ec.message());
                        return;
                      }
                      if (!self->body_->done()) self->ReadRequestBody();
                    });
}

void Interception::ReadRequestBody() {
  client_reading_ = true;
  client_tls_->async_read_some(
      asio::buffer(read_buf_), [self = shared_from_this()](const error_code& ec, std::size_t n) {
        self->client_reading_ = false;
        if (self->ended_) return;
        if (ec) {
          self->End("", "the client's stream ended inside the request body" +
                            (IsEnd(ec) ? std::string() : " (" + ec.message() + ")"));
          return;
        }
        const std::size_t used = self->body_->Feed({self->read_buf_.data(), n});
        if (!self->body_->error().empty()) {
          self->End("", "malformed request body: " + self->body_->error());
          return;
        }
        self->WriteUpstream(std::string(self->read_buf_.data(), used));
      });
}

void Interception::ReadResponse() {
  upstream_tls_->async_read_some(asio::buffer(down_buf_),
                                 [self = shared_from_this()](const error_code& ec, std::size_t n) {
                                   self->OnResponseBytes(ec, n);
                                 });
}

void Interception::OnResponseBytes(const error_code& ec, std::size_t n) {
  if (ended_) return;
  if (ec) {
    if (!IsEnd(ec)) {
      End("", "reading from the upstream: " + ec.message());
      return;
    }
    if (response_head_ && !response_in_.empty()) {
      response_head_ = false;  // ended inside a head: the client gets what came
      WriteClient(std::exchange(response_in_, {}), false);
      return;
    }
    EndResponse();
    return;
  }
  if (!response_head_) {
    WriteClient(std::string(down_buf_.data(), n), true);
    return;
  }
  response_in_.append(down_buf_.data(), n);
  std::string out;
  while (response_head_) {
    const ResponseHead r = RewriteResponseHead(response_in_, kResponseHeadLimit);
    switch (r.status) {
      case ResponseHead::Status::kIncomplete:
        if (out.empty()) {
          ReadResponse();
        } else {
          WriteClient(std::move(out), true);  // a 100 Continue goes on at once
        }
        return;
      case ResponseHead::Status::kInterim:
        out.append(response_in_, 0, r.size);
        response_in_.erase(0, r.size);
        break;
      case ResponseHead::Status::kRewritten:
        exchange_->status = StatusOf(r.head);
        out.append(r.head).append(response_in_, r.size);
        response_in_.clear();
        response_head_ = false;
        break;
      case ResponseHead::Status::kPassThrough:
        exchange_->status = StatusOf(response_in_);
        out.append(response_in_);
        response_in_.clear();
        response_head_ = false;
        break;
    }
  }
  WriteClient(std::move(out), true);
}

void Interception::WriteClient(std::string bytes, bool then_read) {
  if (!hooks_.spend(bytes.size(), false)) {
    Stop("the egress byte budget is used up");
    return;
  }
  end_.bytes_down += bytes.size();
  exchange_->bytes_down += bytes.size();
  down_out_ = std::move(bytes);
  asio::async_write(*client_tls_, asio::buffer(down_out_),
                    [self = shared_from_this(), then_read](const error_code& ec, std::size_t) {
                      if (self->ended_) return;
                      if (ec) {
                        self->End("", "writing to the client: " + ec.message());
                        return;
                      }
                      if (then_read) {
                        self->ReadResponse();
                      } else {
                        self->EndResponse();
                      }
                    });
}

void Interception::EndResponse() {
  if (client_reading_) {
    // The upstream answered before the request's body was all there: nothing more is relayed.
    End("", "");
    return;
  }
  CloseClient();
}

void Interception::CloseClient() {
  // close_notify, so that a response delimited by the connection's end reads as complete.
  ArmTimer("", TimeoutKind::kClose);
  client_tls_->async_shutdown([self = shared_from_this()](const error_code&) {
    if (!self->ended_) self->End("", "");
  });
}

void Interception::Answer(const std::string& status, const std::string& body,
                          const std::string& reason, const std::string& error, bool refused) {
  Disarm();
  if (exchange_ && refused) {
    exchange_->allowed = false;
    exchange_->reason = reason;
  }
  answer_error_ = error;
  down_out_ = Response(status, body);
  asio::async_write(*client_tls_, asio::buffer(down_out_),
                    [self = shared_from_this()](const error_code& ec, std::size_t) {
                      if (self->ended_) return;
                      if (ec) {
                        self->End("", self->answer_error_);
                        return;
                      }
                      self->answered_ = true;
                      self->CloseClient();
                    });
}

void Interception::End(const std::string& refusal, const std::string& error) {
  if (ended_) return;
  ended_ = true;
  Disarm();
  const std::string& err = error.empty() && answered_ ? answer_error_ : error;
  if (exchange_) {
    exchange_->duration = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - exchange_start_);
    if (exchange_->error.empty()) exchange_->error = err;
    if (hooks_.on_exchange) hooks_.on_exchange(*exchange_);
  }
  end_.refusal = refusal;
  end_.error = err;
  auto done = std::move(done_);
  done_ = nullptr;
  if (done) done(end_);
}

}  // namespace cagent::launcher::egress
