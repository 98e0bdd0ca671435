#include "launcher/egress/proxy.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "common/unique_fd.h"
#include "launcher/egress/dns.h"
#include "launcher/egress/http_head.h"
#include "launcher/egress/sni.h"
#include "launcher/egress/socks5.h"
#include "launcher/egress/tls.h"

namespace cagent::launcher::egress {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using udp = asio::ip::udp;
using boost::system::error_code;

constexpr std::size_t kRelayBuffer = 64 * 1024;
constexpr std::size_t kSpliceChunk = 1024 * 1024;  // the pipe's size (F_SETPIPE_SZ)
constexpr std::size_t kHeadLimit = 16 * 1024;
// The upstream's response head is looked at (RewriteResponseHead) within this many bytes.
constexpr std::size_t kResponseHeadLimit = 64 * 1024;
constexpr std::size_t kHelloLimit = 16 * 1024 + 64;  // a ClientHello in up to 16 KiB of records
constexpr std::size_t kSocksLimit = 1024;
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

std::string FormatBytes(std::uint64_t n) {
  std::array<char, 64> buf{};
  if (n >= 1024ULL * 1024ULL) {
    std::snprintf(buf.data(), buf.size(), "%.1f MiB", static_cast<double>(n) / (1024.0 * 1024.0));
  } else if (n >= 1024ULL) {
    std::snprintf(buf.data(), buf.size(), "%.1f KiB", static_cast<double>(n) / 1024.0);
  } else {
    std::snprintf(buf.data(), buf.size(), "%llu bytes", static_cast<unsigned long long>(n));
  }
  return buf.data();
}

std::string HostPort(std::string_view host, std::uint16_t port) {
  std::string out;
  if (host.find(':') != std::string_view::npos) {
    out.append("[").append(host).append("]");
  } else {
    out.append(host);
  }
  return out + ":" + std::to_string(port);
}

std::string FormatMs(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) {
    return std::to_string(ms.count() / 1000) + " s";
  }
  return std::to_string(ms.count()) + " ms";
}

std::string HttpResponse(std::string_view status, std::string_view body, bool refusal) {
  std::string out = "HTTP/1.1 ";
  out.append(status).append("\r\nContent-Type: text/plain\r\n");
  if (refusal) {
    out.append("X-Cagent-Refusal: 1\r\n");
  }
  out.append("Connection: close\r\nContent-Length: ")
      .append(std::to_string(body.size() + 1))
      .append("\r\n\r\n")
      .append(body)
      .append("\n");
  return out;
}

// A connect failure as the client should hear of it.
bool IsRefused(const error_code& ec) { return ec == asio::error::connection_refused; }

}  // namespace

std::string_view ViaName(Via via) {
  switch (via) {
    case Via::kHttpConnect:
      return "connect";
    case Via::kHttpForward:
      return "http";
    case Via::kSocks5:
      return "socks5";
    case Via::kTransparent:
      return "transparent";
  }
  return "connect";
}

Result<ResolveOverride> ParseResolveOverride(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return PlainError("--resolve " + std::string(text), why + " (expected HOST:PORT:ADDRESS)")
        .WithCode(Error::Code::kInvalidInput);
  };
  const std::size_t c1 = text.find(':');
  if (c1 == std::string_view::npos) {
    return bad("no port");
  }
  const std::size_t c2 = text.find(':', c1 + 1);
  if (c2 == std::string_view::npos) {
    return bad("no address");
  }
  const auto host = NormalizeHost(text.substr(0, c1));
  if (!host) {
    return bad("'" + std::string(text.substr(0, c1)) + "' is not a host name");
  }
  const auto authority = ParseAuthority("x:" + std::string(text.substr(c1 + 1, c2 - c1 - 1)), 0);
  if (!authority) {
    return bad("the port is not a number from 1 to 65535");
  }
  std::string_view addr = text.substr(c2 + 1);
  if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']') {
    addr = addr.substr(1, addr.size() - 2);
  }
  error_code ec;
  const auto parsed = asio::ip::make_address(std::string(addr), ec);
  // make_address reads a C string ("1.2.3.4\0x" would be 1.2.3.4) and takes zone indexes ("%0").
  if (ec || addr.find_first_of(std::string_view("%\0", 2)) != std::string_view::npos ||
      (parsed.is_v6() && parsed.to_v6().scope_id() != 0)) {
    return bad("'" + std::string(addr) + "' is not an IP address");
  }
  ResolveOverride o;
  o.host = *host;
  o.port = authority->port;
  o.address = parsed.to_string();
  return o;
}

namespace {

// Shared with the policy's callbacks, which may outlive the proxy: they post into `io` while it
// is set, and do nothing once Stop() has cleared it.
struct Gate {
  std::mutex mu;
  asio::io_context* io = nullptr;
};

class Session;
class DnsTcpConnection;

}  // namespace

class Proxy::Impl {
 public:
  Impl(ProxyConfig config, std::shared_ptr<Policy> policy,
       std::function<void(const ConnectionRecord&)> on_record, SyntheticAddresses synthetic)
      : config_(std::move(config)),
        policy_(std::move(policy)),
        on_record_(std::move(on_record)),
        synthetic_(std::move(synthetic)),
        gate_(std::make_shared<Gate>()) {
    gate_->io = &io_;
  }
  ~Impl() { Stop(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  enum class Kind : std::uint8_t { kProxy, kTransparent, kDnsTcp };
  struct Listener {
    Listener(asio::io_context& io, Kind k) : acceptor(io), backoff(io), kind(k) {}
    tcp::acceptor acceptor;
    asio::steady_timer backoff;
    Kind kind;
  };

  Status Open(std::vector<UniqueFd> tcp_fds, std::vector<Kind> kinds, UniqueFd dns_fd);
  void Run();
  void Stop();

  void Accept(Listener& l);
  void ReadDns();
  // The stub's reply to one query (UDP or TCP), or nullopt to drop it; reports NXDOMAIN for a
  // name the policy may not resolve through config_.on_lookup_refused. Io thread.
  std::optional<std::string> AnswerDns(std::string_view query);

  // The io thread's side of a session's end.
  void Record(const ConnectionRecord& rec);
  void Remove(Session* s);
  void RemoveDns(DnsTcpConnection* c);
  // Counts `n` relayed bytes against the budget; false (and every session cut) when it is over.
  bool Spend(std::uint64_t n, bool up);
  // A new destination against the connection budget; false: refuse it, reason in *why.
  bool Admit(std::string* why);
  void Exhaust(const std::string& why);
  [[nodiscard]] std::string exhausted() const {
    const std::lock_guard<std::mutex> lock(budget_mu_);
    return exhausted_;
  }

  // Members used by the sessions. io_ first: destroyed last, after everything that uses it.
  asio::io_context io_;
  ProxyConfig config_;
  std::shared_ptr<Policy> policy_;
  std::function<void(const ConnectionRecord&)> on_record_;
  SyntheticAddresses synthetic_;
  std::shared_ptr<Gate> gate_;
  std::atomic<std::uint64_t> connections_{0};
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> bytes_up_{0};
  std::atomic<std::uint64_t> bytes_down_{0};
  // Verifies upstream certificates on intercepted connections; null without interception.
  std::shared_ptr<ssl_ctx_st> upstream_ctx_;

 private:
  void CloseAll();

  std::vector<std::unique_ptr<Listener>> listeners_;
  std::optional<udp::socket> dns_;
  std::array<char, 4096> dns_buf_{};
  udp::endpoint dns_peer_;
  std::unordered_map<Session*, std::shared_ptr<Session>> sessions_;
  std::unordered_map<DnsTcpConnection*, std::shared_ptr<DnsTcpConnection>> dns_tcp_;
  std::uint64_t attempts_ = 0;  // io thread
  std::uint64_t spent_ = 0;     // io thread
  bool closing_ = false;        // io thread
  std::mutex record_mu_;
  mutable std::mutex budget_mu_;
  std::string exhausted_;
  std::mutex stop_mu_;
  bool stopped_ = false;
  std::thread thread_;
};

namespace {

// One client connection, from accept to its record. Lives on the io thread; owned by the
// proxy's session table and by its pending handlers.
class Session : public std::enable_shared_from_this<Session> {
 public:
  using Kind = Proxy::Impl::Kind;
  Session(Proxy::Impl* impl, tcp::socket client, Kind kind)
      : impl_(impl),
        client_(std::move(client)),
        upstream_(impl->io_),
        resolver_(impl->io_),
        timer_(impl->io_),
        kind_(kind),
        start_(std::chrono::steady_clock::now()),
        up_buf_(kRelayBuffer) {}

  void Begin();
  // Ends the session at once: closes both sockets and records it with `error`.
  void Abort(const std::string& error) { Finish(error); }

 private:
  enum class Phase : std::uint8_t { kHead, kDecide, kConnect, kHello, kRelay };

  void ArmTimer(std::chrono::milliseconds d);
  void OnTimeout();
  void ReadHead(std::size_t limit);
  void OnHeadBytes();
  void OnHttpHead(const HttpHead& head);
  void OnSocksBytes();
  void Ask();
  void OnDecision(const Decision& d);
  void Resolve();
  bool Usable(const asio::ip::address& a, std::string* why, std::string_view name);
  void TryConnect();
  void OnConnected();
  void StartRelay();
  void CheckHello();
  void ReadHello();
  void ReadFrom(bool up);
  void ReadResponseHead();
  void OnResponseHeadBytes(const error_code& ec);
  bool SetUpSplice();
  void WaitReadable(bool up);
  void SpliceIn(bool up);
  void SpliceOut(bool up);
  void OnRead(bool up, const error_code& ec, std::size_t n);
  void Forward(bool up, const char* data, std::size_t n);
  // Interception (tls.h): the bound credentials, the placeholder check of a plain request,
  // and the hand-over once the upstream is connected.
  [[nodiscard]] bool FindBound();
  [[nodiscard]] bool Misdirected(const HttpHead& head, const std::string& path);
  void StartIntercept();
  void OnInterceptEnd(const InterceptEnd& end);

  // Refusals and failures, each in the client's protocol, then Finish.
  void Refuse(const std::string& reason, bool policy_rule);
  void Malformed(const std::string& why);
  void FailUpstream(const std::string& error, bool timeout, bool refused);
  void Reply(std::string bytes, const std::string& error);
  void Finish(const std::string& error);

  [[nodiscard]] std::string_view Buffered() const { return {up_buf_.data(), up_len_}; }
  void Consume(std::size_t n) {
    std::memmove(up_buf_.data(), up_buf_.data() + n, up_len_ - n);
    up_len_ -= n;
  }

  Proxy::Impl* impl_;
  tcp::socket client_;
  tcp::socket upstream_;
  tcp::resolver resolver_;
  asio::steady_timer timer_;
  Kind kind_;
  std::chrono::steady_clock::time_point start_;
  std::vector<char> up_buf_;  // the head, then client -> upstream
  std::size_t up_len_ = 0;
  std::vector<char> down_buf_;
  // HTTP forwarding: the upstream's response until its head is rewritten (RewriteResponseHead),
  // and what goes to the client for it.
  bool response_head_ = false;
  std::string response_in_;
  std::string response_out_;
  std::string out_;  // a reply being written, or the origin-form head for upstream
  Phase phase_ = Phase::kHead;
  std::uint64_t timer_gen_ = 0;
  bool socks_ = false;
  bool socks_greeted_ = false;
  bool rst_ = false;
  bool timed_out_ = false;
  bool finished_ = false;
  int half_closed_ = 0;
  std::vector<tcp::endpoint> endpoints_;
  std::size_t next_endpoint_ = 0;
  std::string last_connect_error_;
  bool last_refused_ = false;
  ConnectionRecord rec_;
  struct Pipe {
    UniqueFd r;
    UniqueFd w;
    std::size_t in = 0;  // bytes in the pipe
  };
  std::array<Pipe, 2> pipes_;  // [0] upstream -> client, [1] client -> upstream
  // Chunks moved per direction since the last wait for readiness (see SpliceOut).
  std::array<unsigned, 2> burst_{0, 0};
  bool splice_ = false;
  std::vector<const SandboxCredential*> bound_;  // credentials bound to the destination
  std::shared_ptr<InterceptionHandle> intercept_;
};

// One TCP connection to the DNS stub (RFC 7766): a two-byte length, then that many bytes of
// query, answered the same way, until the client closes, sends something that is not a query, or
// stays silent for the head timeout. Lives on the io thread; owned by the proxy's table of them
// and by its pending handlers.
class DnsTcpConnection : public std::enable_shared_from_this<DnsTcpConnection> {
 public:
  DnsTcpConnection(Proxy::Impl* impl, tcp::socket socket)
      : impl_(impl), socket_(std::move(socket)), timer_(impl->io_) {}
  void Begin() { ReadLength(); }
  // Closes the socket; the pending handlers then end without doing anything.
  void Close() {
    if (closed_) {
      return;
    }
    closed_ = true;
    error_code ignored;
    timer_.cancel();
    socket_.close(ignored);
  }

 private:
  // A query longer than this is not one the stub answers (a name is at most 255 bytes; EDNS
  // options add little): the connection is closed.
  static constexpr std::size_t kMaxQuery = 4096;

  void End() {
    Close();
    impl_->RemoveDns(this);
  }
  void Arm() {
    const std::uint64_t gen = ++gen_;
    timer_.expires_after(impl_->config_.head_timeout);
    timer_.async_wait([self = shared_from_this(), gen](const error_code& ec) {
      if (!ec && !self->closed_ && gen == self->gen_) {
        self->End();
      }
    });
  }
  void ReadLength() {
    Arm();
    asio::async_read(socket_, asio::buffer(length_),
                     [self = shared_from_this()](const error_code& ec, std::size_t) {
                       if (self->closed_) {
                         return;
                       }
                       if (ec) {
                         self->End();
                         return;
                       }
                       const std::size_t n =
                           (static_cast<std::size_t>(self->length_[0]) << 8U) | self->length_[1];
                       if (n == 0 || n > kMaxQuery) {
                         self->End();
                         return;
                       }
                       self->query_.resize(n);
                       self->ReadQuery();
                     });
  }
  void ReadQuery() {
    asio::async_read(socket_, asio::buffer(query_),
                     [self = shared_from_this()](const error_code& ec, std::size_t) {
                       if (self->closed_) {
                         return;
                       }
                       if (ec) {
                         self->End();
                         return;
                       }
                       self->Answer();
                     });
  }
  void Answer() {
    const auto reply = impl_->AnswerDns(std::string_view(query_.data(), query_.size()));
    if (!reply) {
      End();  // a response, or shorter than a header: not a client worth keeping
      return;
    }
    out_.clear();
    out_.push_back(static_cast<char>((reply->size() >> 8U) & 0xffU));
    out_.push_back(static_cast<char>(reply->size() & 0xffU));
    out_.append(*reply);
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](const error_code& ec, std::size_t) {
                        if (self->closed_) {
                          return;
                        }
                        if (ec) {
                          self->End();
                          return;
                        }
                        self->ReadLength();
                      });
  }

  Proxy::Impl* impl_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::array<std::uint8_t, 2> length_{};
  std::vector<char> query_;
  std::string out_;
  std::uint64_t gen_ = 0;
  bool closed_ = false;
};

void Session::Begin() {
  error_code ec;
  client_.set_option(tcp::no_delay(true), ec);
  if (kind_ == Kind::kTransparent) {
    // The address the client dialled: a synthetic address the DNS stub gave a name.
    const auto local = client_.local_endpoint(ec);
    rec_.dest.via = Via::kTransparent;
    if (ec) {
      rst_ = true;
      Finish("getsockname: " + ec.message());
      return;
    }
    rec_.dest.port = local.port();
    auto address = local.address();
    if (address.is_v6() && address.to_v6().is_v4_mapped()) {
      address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
    }
    const auto name = address.is_v4() ? impl_->synthetic_.NameOf(address.to_v4()) : std::nullopt;
    if (!name) {
      rst_ = true;
      rec_.dest.host = address.to_string();
      rec_.reason = address.to_string() + " is not an address the DNS stub gave a name";
      Finish("");
      return;
    }
    rec_.dest.host = *name;
    Ask();
    return;
  }
  ArmTimer(impl_->config_.head_timeout);
  ReadHead(kHeadLimit);
}

void Session::ArmTimer(std::chrono::milliseconds d) {
  const std::uint64_t gen = ++timer_gen_;
  timer_.expires_after(d);
  timer_.async_wait([self = shared_from_this(), gen](const error_code& ec) {
    if (ec || self->finished_ || gen != self->timer_gen_) {
      return;
    }
    self->OnTimeout();
  });
}

void Session::OnTimeout() {
  const std::string limit = FormatMs(impl_->config_.head_timeout);
  switch (phase_) {
    case Phase::kHead:
      rec_.reason = "the client sent no complete request within " + limit;
      Finish("");
      return;
    case Phase::kHello:
      rec_.allowed = false;
      rec_.reason = "the client sent no complete TLS ClientHello within " + limit;
      Finish("");
      return;
    case Phase::kConnect: {
      timed_out_ = true;
      error_code ignored;
      upstream_.close(ignored);  // the pending connect completes with operation_aborted
      return;
    }
    case Phase::kDecide:
    case Phase::kRelay:
      return;
  }
}

void Session::ReadHead(std::size_t limit) {
  if (up_len_ >= limit) {
    Malformed("the request is longer than " + std::to_string(limit) + " bytes");
    return;
  }
  client_.async_read_some(asio::buffer(up_buf_.data() + up_len_, limit - up_len_),
                          [self = shared_from_this()](const error_code& ec, std::size_t n) {
                            if (self->finished_) {
                              return;
                            }
                            if (ec) {
                              self->rec_.reason =
                                  "the client closed the connection before a complete request";
                              self->Finish(ec == asio::error::eof ? "" : ec.message());
                              return;
                            }
                            self->up_len_ += n;
                            self->OnHeadBytes();
                          });
}

void Session::OnHeadBytes() {
  if (up_len_ > 0 && static_cast<std::uint8_t>(up_buf_[0]) == 5) {
    socks_ = true;
  }
  if (socks_) {
    OnSocksBytes();
    return;
  }
  const HttpHeadParse p = ParseHttpHead(Buffered(), kHeadLimit);
  switch (p.status) {
    case HttpHeadParse::Status::kIncomplete:
      ReadHead(kHeadLimit);
      return;
    case HttpHeadParse::Status::kMalformed:
    case HttpHeadParse::Status::kTooLarge:
      Malformed(p.error);
      return;
    case HttpHeadParse::Status::kComplete:
      OnHttpHead(p.head);
      return;
  }
}

void Session::OnHttpHead(const HttpHead& head) {
  Consume(head.size);
  if (head.method == "CONNECT") {
    const auto authority = ParseAuthority(head.target, 0);
    if (!authority) {
      Malformed("CONNECT needs HOST:PORT, not '" + head.target + "'");
      return;
    }
    rec_.dest = {authority->host, authority->port, Via::kHttpConnect};
    Ask();
    return;
  }
  const auto url = ParseHttpUrl(head.target);
  if (!url) {
    Malformed("the proxy serves CONNECT and absolute http:// targets, not '" + head.target + "'");
    return;
  }
  rec_.dest = {url->authority.host, url->authority.port, Via::kHttpForward};
  if (Misdirected(head, url->path)) {
    return;
  }
  out_ = OriginFormHead(head, *url);
  Ask();
}

void Session::OnSocksBytes() {
  if (!socks_greeted_) {
    const Socks5Greeting g = ParseSocks5Greeting(Buffered());
    if (g.status == Socks5Status::kIncomplete) {
      ReadHead(kSocksLimit);
      return;
    }
    if (g.status == Socks5Status::kMalformed) {
      Malformed("a malformed SOCKS5 greeting");
      return;
    }
    Consume(g.size);
    if (!g.no_auth) {
      rec_.dest.via = Via::kSocks5;
      rec_.reason = "the SOCKS5 client offers no method but no authentication";
      Reply(std::string{5, static_cast<char>(0xff)}, "");
      return;
    }
    socks_greeted_ = true;
    out_ = std::string{5, 0};
    asio::async_write(client_, asio::buffer(out_),
                      [self = shared_from_this()](const error_code& ec, std::size_t) {
                        if (self->finished_) {
                          return;
                        }
                        if (ec) {
                          self->rec_.reason = "the client closed the connection mid-handshake";
                          self->Finish(ec.message());
                          return;
                        }
                        self->OnSocksBytes();
                      });
    return;
  }
  const Socks5Request r = ParseSocks5Request(Buffered());
  rec_.dest.via = Via::kSocks5;
  if (r.status == Socks5Status::kIncomplete) {
    ReadHead(kSocksLimit);
    return;
  }
  if (r.status == Socks5Status::kMalformed) {
    rec_.reason = "malformed request: a malformed SOCKS5 request";
    Reply(Socks5Reply(r.reply), "");
    return;
  }
  Consume(r.size);
  const auto host = NormalizeHost(r.host);
  if (r.command != 1 || !host) {
    rec_.reason = r.command != 1 ? "the SOCKS5 request is not CONNECT (only CONNECT is served)"
                                 : "malformed request: the SOCKS5 destination is not a host name";
    Reply(Socks5Reply(r.command != 1 ? kSocksCommandNotSupported : kSocksHostUnreachable), "");
    return;
  }
  rec_.dest.host = *host;
  rec_.dest.port = r.port;
  Ask();
}

void Session::Ask() {
  timer_gen_++;  // the head timer no longer applies
  timer_.cancel();
  phase_ = Phase::kDecide;
  // A synthetic address stands for its name, whichever way the client reached the proxy (a
  // SOCKS client that resolved through the stub sends the address).
  error_code ec;
  const auto literal = asio::ip::make_address_v4(rec_.dest.host, ec);
  if (!ec && impl_->synthetic_.InRange(literal)) {
    const auto name = impl_->synthetic_.NameOf(literal);
    if (!name) {
      Refuse(rec_.dest.host + " is not an address the DNS stub gave a name", false);
      return;
    }
    rec_.dest.host = *name;
  }
  std::string why;
  if (!impl_->Admit(&why)) {
    Refuse(why, false);
    return;
  }
  std::weak_ptr<Session> weak = weak_from_this();
  impl_->policy_->Decide(rec_.dest, [gate = impl_->gate_, weak](Decision d) {
    const std::lock_guard<std::mutex> lock(gate->mu);
    if (gate->io == nullptr) {
      return;
    }
    asio::post(*gate->io, [weak, d = std::move(d)]() {
      if (auto self = weak.lock()) {
        self->OnDecision(d);
      }
    });
  });
}

void Session::OnDecision(const Decision& d) {
  if (finished_ || phase_ != Phase::kDecide) {
    return;
  }
  rec_.rule = d.rule;
  rec_.reason = d.reason;
  rec_.allowed = d.allow;  // the proxy's own refusals below turn it off again
  if (!d.allow) {
    Refuse(d.reason, true);
    return;
  }
  if (!FindBound()) {
    return;
  }
  if (!bound_.empty() && rec_.dest.via == Via::kHttpForward) {
    Refuse(HostPort(rec_.dest.host, rec_.dest.port) + " has a credential bound to it (" +
               bound_.front()->name +
               "), which cagent sends only inside TLS: use https:// (plain http:// is refused)",
           false);
    return;
  }
  Resolve();
}

bool Session::Usable(const asio::ip::address& a, std::string* why, std::string_view name) {
  const AddressClass c = Classify(a);
  if (c == AddressClass::kPublic || impl_->policy_->AddressNamed(a.to_string(), rec_.dest.port)) {
    return true;
  }
  if (rec_.refused_address.empty()) {
    rec_.refused_address = a.to_string();
  }
  if (why->empty()) {
    if (name.empty()) {
      *why = a.to_string() + " is " + std::string(AddressClassPhrase(c)) +
             " and no rule names that address";
    } else {
      *why = std::string(name) + " resolves to " + a.to_string() + ", " +
             std::string(AddressClassPhrase(c)) + ", and no rule names that address";
    }
  }
  return false;
}

void Session::Resolve() {
  for (const auto& o : impl_->config_.overrides) {
    if (o.host == rec_.dest.host && o.port == rec_.dest.port) {
      error_code ec;
      const auto a = asio::ip::make_address(o.address, ec);
      if (!ec) {
        endpoints_.emplace_back(a, rec_.dest.port);  // the operator's own: trusted
        TryConnect();
        return;
      }
    }
  }
  error_code ec;
  const auto literal = asio::ip::make_address(rec_.dest.host, ec);
  if (!ec) {
    std::string why;
    if (!Usable(literal, &why, "")) {
      rec_.refused_by = RefusedBy::kAddress;
      Refuse(why, false);
      return;
    }
    endpoints_.emplace_back(literal, rec_.dest.port);
    TryConnect();
    return;
  }
  resolver_.async_resolve(
      rec_.dest.host, std::to_string(rec_.dest.port),
      [self = shared_from_this()](const error_code& rec,
                                  const tcp::resolver::results_type& results) {
        if (self->finished_) {
          return;
        }
        if (rec) {
          self->FailUpstream("cannot resolve " + self->rec_.dest.host + ": " + rec.message(), false,
                             false);
          return;
        }
        std::string why;
        for (const auto& entry : results) {
          auto a = entry.endpoint().address();
          if (a.is_v6() && a.to_v6().is_v4_mapped()) {
            a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
          }
          if (self->Usable(a, &why, self->rec_.dest.host)) {
            self->endpoints_.emplace_back(a, self->rec_.dest.port);
          }
        }
        if (self->endpoints_.empty()) {
          if (!why.empty()) {
            self->rec_.refused_by = RefusedBy::kAddress;
          }
          self->Refuse(why.empty() ? self->rec_.dest.host + " has no address" : why, false);
          return;
        }
        self->rec_.refused_address.clear();  // a usable address was found: nothing was refused
        self->TryConnect();
      });
}

void Session::TryConnect() {
  if (phase_ != Phase::kConnect) {
    phase_ = Phase::kConnect;
    ArmTimer(impl_->config_.connect_timeout);
  }
  if (timed_out_) {
    FailUpstream("connecting timed out after " + FormatMs(impl_->config_.connect_timeout), true,
                 false);
    return;
  }
  if (next_endpoint_ >= endpoints_.size()) {
    FailUpstream(last_connect_error_, false, last_refused_);
    return;
  }
  const tcp::endpoint ep = endpoints_[next_endpoint_++];
  error_code ec;
  upstream_.close(ec);
  upstream_.open(ep.protocol(), ec);
  if (ec) {
    last_connect_error_ = "socket: " + ec.message();
    TryConnect();
    return;
  }
  upstream_.async_connect(ep, [self = shared_from_this(), ep](const error_code& cec) {
    if (self->finished_) {
      return;
    }
    if (cec) {
      self->last_connect_error_ =
          "connect to " + HostPort(ep.address().to_string(), ep.port()) + ": " + cec.message();
      self->last_refused_ = IsRefused(cec);
      self->TryConnect();
      return;
    }
    self->rec_.address = ep.address().to_string();
    self->OnConnected();
  });
}

void Session::OnConnected() {
  timer_gen_++;
  error_code ec;
  timer_.cancel();
  upstream_.set_option(tcp::no_delay(true), ec);
  if (!bound_.empty()) {
    phase_ = Phase::kRelay;
    auto then_intercept = [self = shared_from_this()](const error_code& wec, std::size_t) {
      if (self->finished_) {
        return;
      }
      if (wec) {
        self->Finish(wec.message());
        return;
      }
      self->StartIntercept();
    };
    switch (rec_.dest.via) {
      case Via::kHttpConnect:
        out_ = "HTTP/1.1 200 Connection established\r\n\r\n";
        asio::async_write(client_, asio::buffer(out_), then_intercept);
        return;
      case Via::kSocks5:
        out_ = Socks5Reply(kSocksSucceeded);
        asio::async_write(client_, asio::buffer(out_), then_intercept);
        return;
      case Via::kTransparent:
        StartIntercept();
        return;
      case Via::kHttpForward:  // refused in OnDecision
        Finish("plain HTTP to a destination with a credential");
        return;
    }
  }
  splice_ = impl_->config_.use_splice && SetUpSplice();
  if (!splice_) {
    down_buf_.resize(kRelayBuffer);
  }
  auto then_relay = [self = shared_from_this()](const error_code& wec, std::size_t) {
    if (self->finished_) {
      return;
    }
    if (wec) {
      self->Finish(wec.message());
      return;
    }
    self->StartRelay();
  };
  switch (rec_.dest.via) {
    case Via::kHttpConnect:
      out_ = "HTTP/1.1 200 Connection established\r\n\r\n";
      asio::async_write(client_, asio::buffer(out_), then_relay);
      return;
    case Via::kSocks5:
      out_ = Socks5Reply(kSocksSucceeded);
      asio::async_write(client_, asio::buffer(out_), then_relay);
      return;
    case Via::kHttpForward:
      // The origin-form head is in out_; the body (what followed the head) in up_buf_.
      response_head_ = true;
      if (!impl_->Spend(out_.size(), true)) {
        return;
      }
      rec_.bytes_up += out_.size();
      asio::async_write(upstream_, asio::buffer(out_), then_relay);
      return;
    case Via::kTransparent:
      StartRelay();
      return;
  }
}

void Session::StartRelay() {
  phase_ = Phase::kRelay;
  ReadFrom(false);
  if (rec_.dest.via == Via::kHttpForward) {
    if (up_len_ > 0) {
      const std::size_t n = std::exchange(up_len_, 0);
      Forward(true, up_buf_.data(), n);
      return;
    }
    ReadFrom(true);
    return;
  }
  if (rec_.dest.port == 443) {
    phase_ = Phase::kHello;
    ArmTimer(impl_->config_.head_timeout);
  }
  CheckHello();
}

void Session::ReadHello() {
  client_.async_read_some(
      asio::buffer(up_buf_.data() + up_len_, kHelloLimit - up_len_),
      [self = shared_from_this()](const error_code& ec, std::size_t n) {
        if (self->finished_) {
          return;
        }
        if (ec && self->phase_ != Phase::kHello) {
          self->OnRead(true, ec, 0);  // EOF before any byte on a non-TLS port: a half-close
          return;
        }
        if (ec) {
          self->rec_.allowed = false;
          self->rec_.reason = "the client closed the connection before a complete TLS ClientHello";
          self->Finish(ec == asio::error::eof ? "" : ec.message());
          return;
        }
        self->up_len_ += n;
        self->CheckHello();
      });
}

// Reads the client's first bytes until a whole ClientHello is there and compares its SNI with
// the destination host; only then forwards it. On port 443 anything but a ClientHello naming the
// host is refused; on another port the check applies when the first byte starts a TLS handshake
// record (and nothing waits for the client there: a server may speak first).
void Session::CheckHello() {
  if (up_len_ > 0 && phase_ != Phase::kHello) {
    if (static_cast<std::uint8_t>(up_buf_[0]) != 22) {
      const std::size_t n = std::exchange(up_len_, 0);
      Forward(true, up_buf_.data(), n);
      return;
    }
    phase_ = Phase::kHello;
    ArmTimer(impl_->config_.head_timeout);
  }
  if (up_len_ == 0) {
    ReadHello();
    return;
  }
  const ClientHelloScan scan = ScanClientHello(Buffered());
  const std::string& host = rec_.dest.host;
  const std::string what = rec_.dest.via == Via::kTransparent ? "name" : "CONNECT host";
  switch (scan.status) {
    case ClientHelloScan::Status::kIncomplete:
      if (up_len_ >= kHelloLimit) {
        rec_.allowed = false;
        rec_.reason =
            "the TLS ClientHello is longer than " + std::to_string(kHelloLimit) + " bytes";
        Finish("");
        return;
      }
      ReadHello();
      return;
    case ClientHelloScan::Status::kNotClientHello:
      rec_.allowed = false;
      rec_.reason = "the client's first bytes to " + HostPort(host, rec_.dest.port) +
                    " are not a well-formed TLS ClientHello";
      Finish("");
      return;
    case ClientHelloScan::Status::kClientHello:
      break;
  }
  error_code ec;
  (void)asio::ip::make_address(host, ec);
  const bool literal = !ec;
  if (scan.server_name.empty() ? !literal : scan.server_name != host) {
    rec_.allowed = false;
    rec_.reason =
        scan.server_name.empty()
            ? "the TLS ClientHello names no server (" + what + " " + host + ")"
            : "TLS server name " + scan.server_name + " does not match " + what + " " + host;
    Finish("");
    return;
  }
  phase_ = Phase::kRelay;
  timer_gen_++;
  timer_.cancel();
  const std::size_t n = std::exchange(up_len_, 0);
  Forward(true, up_buf_.data(), n);
}

void Session::ReadFrom(bool up) {
  if (!up && response_head_) {
    ReadResponseHead();
    return;
  }
  if (splice_) {
    WaitReadable(up);
    return;
  }
  tcp::socket& from = up ? client_ : upstream_;
  std::vector<char>& buf = up ? up_buf_ : down_buf_;
  from.async_read_some(asio::buffer(buf.data(), buf.size()),
                       [self = shared_from_this(), up](const error_code& ec, std::size_t n) {
                         self->OnRead(up, ec, n);
                       });
}

void Session::ReadResponseHead() {
  const std::size_t have = response_in_.size();
  response_in_.resize(kResponseHeadLimit);
  upstream_.async_read_some(asio::buffer(response_in_.data() + have, kResponseHeadLimit - have),
                            [self = shared_from_this(), have](const error_code& ec, std::size_t n) {
                              self->response_in_.resize(have + (ec ? 0 : n));
                              self->OnResponseHeadBytes(ec);
                            });
}

// Heads are rewritten as they complete (a 1xx passes and the next is looked at); what is ready
// goes to the client, and the relay reads on: more of the head, or raw bytes once it is done.
void Session::OnResponseHeadBytes(const error_code& ec) {
  if (finished_) {
    return;
  }
  if (ec) {
    // The upstream ended (or failed) inside a head: the client gets what came, then the end.
    response_head_ = false;
    if (response_in_.empty()) {
      OnRead(false, ec, 0);
      return;
    }
    response_out_ = std::move(response_in_);
    response_in_.clear();
    const error_code end = ec;
    if (!impl_->Spend(response_out_.size(), false)) {
      return;
    }
    rec_.bytes_down += response_out_.size();
    asio::async_write(client_, asio::buffer(response_out_),
                      [self = shared_from_this(), end](const error_code& wec, std::size_t) {
                        if (self->finished_) {
                          return;
                        }
                        if (wec) {
                          self->Finish(wec.message());
                          return;
                        }
                        self->OnRead(false, end, 0);
                      });
    return;
  }
  response_out_.clear();
  for (;;) {
    const ResponseHead r = RewriteResponseHead(response_in_, kResponseHeadLimit);
    if (r.status == ResponseHead::Status::kIncomplete) {
      break;
    }
    if (r.status == ResponseHead::Status::kInterim) {
      response_out_.append(response_in_, 0, r.size);
      response_in_.erase(0, r.size);
      continue;
    }
    response_head_ = false;
    if (r.status == ResponseHead::Status::kRewritten) {
      response_out_.append(r.head);
      response_in_.erase(0, r.size);
    }
    response_out_.append(response_in_);
    response_in_.clear();
    response_in_.shrink_to_fit();
    break;
  }
  if (response_out_.empty()) {
    ReadResponseHead();
    return;
  }
  Forward(false, response_out_.data(), response_out_.size());
}

// The steady state of a relay without copies through user space: socket -> pipe -> socket with
// splice(2), one pipe per direction, the pipe drained before the next read (so its size bounds
// what is in flight, as the copy buffer does).
bool Session::SetUpSplice() {
  for (Pipe& p : pipes_) {
    std::array<int, 2> fds{-1, -1};
    if (::pipe2(fds.data(), O_NONBLOCK | O_CLOEXEC) != 0) {
      return false;  // out of descriptors: the copy path works without
    }
    p.r.Reset(fds[0]);
    p.w.Reset(fds[1]);
    (void)::fcntl(p.w.get(), F_SETPIPE_SZ, static_cast<int>(kSpliceChunk));
  }
  error_code ec;
  client_.native_non_blocking(true, ec);
  if (ec) {
    return false;
  }
  upstream_.native_non_blocking(true, ec);
  return !ec;
}

void Session::WaitReadable(bool up) {
  tcp::socket& from = up ? client_ : upstream_;
  from.async_wait(tcp::socket::wait_read, [self = shared_from_this(), up](const error_code& ec) {
    if (self->finished_) {
      return;
    }
    if (ec) {
      self->Finish(ec.message());
      return;
    }
    self->SpliceIn(up);
  });
}

void Session::SpliceIn(bool up) {
  tcp::socket& from = up ? client_ : upstream_;
  Pipe& p = pipes_[up ? 1 : 0];
  const ssize_t n = ::splice(from.native_handle(), nullptr, p.w.get(), nullptr, kSpliceChunk,
                             SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) {
      WaitReadable(up);
      return;
    }
    Finish(std::string("splice: ") + std::strerror(errno));
    return;
  }
  if (n == 0) {
    OnRead(up, asio::error::eof, 0);
    return;
  }
  const auto count = static_cast<std::size_t>(n);
  if (!impl_->Spend(count, up)) {
    return;  // the budget cut every session, this one included
  }
  (up ? rec_.bytes_up : rec_.bytes_down) += count;
  p.in = count;
  SpliceOut(up);
}

void Session::SpliceOut(bool up) {
  tcp::socket& to = up ? upstream_ : client_;
  Pipe& p = pipes_[up ? 1 : 0];
  while (p.in > 0) {
    const ssize_t n = ::splice(p.r.get(), nullptr, to.native_handle(), nullptr, p.in,
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN) {
        to.async_wait(tcp::socket::wait_write,
                      [self = shared_from_this(), up](const error_code& ec) {
                        if (self->finished_) {
                          return;
                        }
                        if (ec) {
                          self->Finish(ec.message());
                          return;
                        }
                        self->SpliceOut(up);
                      });
        return;
      }
      Finish(std::string("splice: ") + std::strerror(errno));
      return;
    }
    p.in -= static_cast<std::size_t>(n);
  }
  // Read on while data is there (a splice that finds none waits for readiness), instead of a trip
  // through the reactor per chunk; after a burst, yield to the other sessions on this thread.
  constexpr unsigned kBurst = 16;
  unsigned& burst = burst_[up ? 1 : 0];
  if (++burst < kBurst) {
    SpliceIn(up);
    return;
  }
  burst = 0;
  WaitReadable(up);
}

void Session::OnRead(bool up, const error_code& ec, std::size_t n) {
  if (finished_) {
    return;
  }
  if (ec) {
    if (ec != asio::error::eof) {
      Finish(ec.message());
      return;
    }
    // Half-close: pass the EOF on, keep the other direction.
    error_code ignored;
    (up ? upstream_ : client_).shutdown(tcp::socket::shutdown_send, ignored);
    if (++half_closed_ == 2) {
      Finish("");
    }
    return;
  }
  Forward(up, (up ? up_buf_ : down_buf_).data(), n);
}

void Session::Forward(bool up, const char* data, std::size_t n) {
  if (!impl_->Spend(n, up)) {
    return;  // the budget cut every session, this one included
  }
  if (up) {
    rec_.bytes_up += n;
  } else {
    rec_.bytes_down += n;
  }
  tcp::socket& to = up ? upstream_ : client_;
  asio::async_write(to, asio::buffer(data, n),
                    [self = shared_from_this(), up](const error_code& ec, std::size_t) {
                      if (self->finished_) {
                        return;
                      }
                      if (ec) {
                        self->Finish(ec.message());
                        return;
                      }
                      self->ReadFrom(up);
                    });
}

// Fills bound_; false when the session was refused (a credential is bound but nothing can
// intercept).
bool Session::FindBound() {
  const InterceptConfig& ic = impl_->config_.intercept;
  if (ic.credentials.empty()) {
    return true;
  }
  const std::vector<std::string> names = impl_->policy_->CredentialsFor(rec_.dest);
  for (const SandboxCredential& c : ic.credentials) {
    if (std::find(names.begin(), names.end(), c.name) != names.end()) {
      bound_.push_back(&c);
    }
  }
  if (!bound_.empty() && (ic.ca == nullptr || impl_->upstream_ctx_ == nullptr)) {
    Refuse(HostPort(rec_.dest.host, rec_.dest.port) +
               " has a credential bound to it but this proxy intercepts nothing",
           false);
    return false;
  }
  return true;
}

// A plain request's head is read in clear: a placeholder in it goes nowhere (credentials are
// swapped only inside TLS, and only for their hosts). Refuses and records the attempt.
bool Session::Misdirected(const HttpHead& head, const std::string& path) {
  const InterceptConfig& ic = impl_->config_.intercept;
  if (ic.credentials.empty()) {
    return false;
  }
  RequestHead copy{head.method, head.target, {}};
  for (const HttpHeader& h : head.headers) {
    copy.headers.emplace_back(h.name, h.value);
  }
  const SwapResult r = SwapCredentials(copy, {}, ic.credentials);
  if (!r.misdirected) {
    return false;
  }
  ExchangeRecord x;
  x.request = {rec_.dest, head.method, path.substr(0, path.find('?'))};
  x.misdirected = *r.misdirected;
  x.reason = "the request carries the placeholder of credential '" + *r.misdirected +
             "', which is not bound to " + HostPort(rec_.dest.host, rec_.dest.port) +
             " over plain HTTP";
  x.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start_);
  if (ic.on_exchange) {
    ic.on_exchange(x);
  }
  Refuse(x.reason, false);
  return true;
}

void Session::StartIntercept() {
  const InterceptConfig& ic = impl_->config_.intercept;
  auto server = ic.tls->ServerContextFor(*ic.ca, rec_.dest.host);
  if (!server) {
    rec_.allowed = false;
    rec_.reason = "no certificate for " + rec_.dest.host + ": " + server.error().Message();
    rec_.refused_by = RefusedBy::kProxy;
    Finish("");
    return;
  }
  InterceptSetup setup;
  setup.dest = rec_.dest;
  setup.server = std::move(*server);
  setup.upstream = impl_->upstream_ctx_;
  setup.bound = bound_;
  setup.all = &ic.credentials;
  setup.head_timeout = impl_->config_.head_timeout;
  InterceptHooks hooks;
  Proxy::Impl* impl = impl_;
  hooks.spend = [impl](std::uint64_t n, bool up) { return impl->Spend(n, up); };
  hooks.decide = [impl](const HttpExchange& request, std::function<void(Decision)> then) {
    impl->policy_->DecideRequest(
        request, [gate = impl->gate_, then = std::move(then)](Decision d) mutable {
          const std::lock_guard<std::mutex> lock(gate->mu);
          if (gate->io == nullptr) {
            return;
          }
          asio::post(*gate->io, [then = std::move(then), d = std::move(d)]() { then(d); });
        });
  };
  hooks.on_exchange = ic.on_exchange;
  intercept_ = ic.tls->Intercept(
      client_, upstream_, std::move(setup), std::move(hooks), shared_from_this(),
      [self = shared_from_this()](const InterceptEnd& end) { self->OnInterceptEnd(end); });
  intercept_->Start();
}

void Session::OnInterceptEnd(const InterceptEnd& end) {
  rec_.bytes_up += end.bytes_up;
  rec_.bytes_down += end.bytes_down;
  if (!end.refusal.empty()) {
    rec_.allowed = false;
    rec_.reason = end.refusal;
    rec_.refused_by = RefusedBy::kProxy;
  }
  intercept_.reset();
  Finish(end.error);
}

void Session::Refuse(const std::string& reason, bool policy_rule) {
  rec_.allowed = false;
  rec_.reason = reason;
  if (rec_.refused_by == RefusedBy::kNone) {
    rec_.refused_by = policy_rule ? RefusedBy::kPolicy : RefusedBy::kProxy;
  }
  const std::string where = HostPort(rec_.dest.host, rec_.dest.port);
  switch (rec_.dest.via) {
    case Via::kHttpConnect:
    case Via::kHttpForward: {
      std::string body = "cagent: connection to " + where + " refused: " + reason;
      if (policy_rule && !rec_.rule.empty()) {
        body += " (rule: " + rec_.rule + ")";
      }
      Reply(HttpResponse("403 Forbidden", body, true), "");
      return;
    }
    case Via::kSocks5:
      Reply(Socks5Reply(kSocksNotAllowed), "");
      return;
    case Via::kTransparent:
      rst_ = true;
      Finish("");
      return;
  }
}

void Session::Malformed(const std::string& why) {
  rec_.allowed = false;
  rec_.reason = "malformed request: " + why;
  if (socks_) {
    Reply(Socks5Reply(kSocksGeneralFailure), "");
    return;
  }
  Reply(HttpResponse("400 Bad Request", "cagent: malformed proxy request: " + why, false), "");
}

void Session::FailUpstream(const std::string& error, bool timeout, bool refused) {
  const std::string where = HostPort(rec_.dest.host, rec_.dest.port);
  switch (rec_.dest.via) {
    case Via::kHttpConnect:
    case Via::kHttpForward:
      Reply(timeout ? HttpResponse("504 Gateway Timeout",
                                   "cagent: connecting to " + where + " timed out", false)
                    : HttpResponse("502 Bad Gateway",
                                   "cagent: cannot connect to " + where + ": " + error, false),
            error);
      return;
    case Via::kSocks5:
      Reply(Socks5Reply(refused ? kSocksConnectionRefused : kSocksHostUnreachable), error);
      return;
    case Via::kTransparent:
      rst_ = true;
      Finish(error);
      return;
  }
}

void Session::Reply(std::string bytes, const std::string& error) {
  phase_ = Phase::kRelay;  // no timer applies any more
  timer_gen_++;
  out_ = std::move(bytes);
  asio::async_write(client_, asio::buffer(out_),
                    [self = shared_from_this(), error](const error_code&, std::size_t) {
                      if (self->finished_) {
                        return;
                      }
                      error_code ignored;
                      self->client_.shutdown(tcp::socket::shutdown_send, ignored);
                      self->Finish(error);
                    });
}

void Session::Finish(const std::string& error) {
  if (finished_) {
    return;
  }
  finished_ = true;
  const auto self = shared_from_this();  // Remove() below may drop the table's reference
  if (auto intercept = std::move(intercept_)) {
    intercept->Stop(error);  // its request is recorded; OnInterceptEnd adds its bytes to rec_
  }
  error_code ignored;
  timer_.cancel();
  resolver_.cancel();
  if (rst_) {
    // An immediate refusal, never a hang: RST instead of FIN.
    const ::linger lg{1, 0};
    ::setsockopt(client_.native_handle(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  }
  client_.close(ignored);
  upstream_.close(ignored);
  if (!rec_.allowed && rec_.refused_by == RefusedBy::kNone && !rec_.reason.empty()) {
    rec_.refused_by = RefusedBy::kProxy;  // a malformed request, a TLS name, a timeout, ...
  }
  rec_.error = error;
  rec_.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start_);
  impl_->Record(rec_);
  impl_->Remove(this);
}

}  // namespace

Status Proxy::Impl::Open(std::vector<UniqueFd> tcp_fds, std::vector<Kind> kinds, UniqueFd dns_fd) {
  for (std::size_t i = 0; i < tcp_fds.size(); ++i) {
    ::sockaddr_storage ss{};
    ::socklen_t len = sizeof(ss);
    if (::getsockname(tcp_fds[i].get(), reinterpret_cast<::sockaddr*>(&ss), &len) != 0) {
      return ErrnoError("getsockname of a proxy listener");
    }
    auto l = std::make_unique<Listener>(io_, kinds[i]);
    error_code ec;
    l->acceptor.assign(ss.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), tcp_fds[i].get(), ec);
    if (ec) {
      return PlainError("adopt a proxy listener", ec.message());
    }
    (void)tcp_fds[i].Release();
    l->acceptor.non_blocking(true, ec);
    listeners_.push_back(std::move(l));
  }
  if (dns_fd.valid()) {
    ::sockaddr_storage ss{};
    ::socklen_t len = sizeof(ss);
    if (::getsockname(dns_fd.get(), reinterpret_cast<::sockaddr*>(&ss), &len) != 0) {
      return ErrnoError("getsockname of the DNS socket");
    }
    dns_.emplace(io_);
    error_code ec;
    dns_->assign(ss.ss_family == AF_INET6 ? udp::v6() : udp::v4(), dns_fd.get(), ec);
    if (ec) {
      return PlainError("adopt the DNS socket", ec.message());
    }
    (void)dns_fd.Release();
    dns_->non_blocking(true, ec);
  }
  return Ok{};
}

void Proxy::Impl::Run() {
  for (auto& l : listeners_) {
    Accept(*l);
  }
  if (dns_) {
    ReadDns();
  }
  thread_ = std::thread([this] {
    auto guard = asio::make_work_guard(io_);
    while (true) {
      try {
        io_.run();
        return;
      } catch (const std::exception&) {  // a handler threw (allocation); keep serving
        continue;
      }
    }
  });
}

void Proxy::Impl::Accept(Listener& l) {
  l.acceptor.async_accept([this, &l](const error_code& ec, tcp::socket socket) {
    if (closing_ || ec == asio::error::operation_aborted) {
      return;
    }
    if (ec) {
      // Out of descriptors or memory: wait instead of spinning on a listener that stays ready.
      if (ec.value() == EMFILE || ec.value() == ENFILE || ec.value() == ENOBUFS ||
          ec.value() == ENOMEM) {
        l.backoff.expires_after(kAcceptBackoff);
        l.backoff.async_wait([this, &l](const error_code& wec) {
          if (!wec && !closing_) {
            Accept(l);
          }
        });
        return;
      }
      Accept(l);
      return;
    }
    if (l.kind == Kind::kDnsTcp && dns_tcp_.size() < config_.max_concurrent) {
      auto c = std::make_shared<DnsTcpConnection>(this, std::move(socket));
      dns_tcp_.emplace(c.get(), c);
      c->Begin();
    } else if (sessions_.size() >= config_.max_concurrent || l.kind == Kind::kDnsTcp) {
      if (l.kind != Kind::kDnsTcp) {
        refused_++;  // before the close, which the client sees
      }
      const ::linger lg{1, 0};
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
      error_code ignored;
      socket.close(ignored);
    } else {
      auto s = std::make_shared<Session>(this, std::move(socket), l.kind);
      sessions_.emplace(s.get(), s);
      s->Begin();
    }
    Accept(l);
  });
}

std::optional<std::string> Proxy::Impl::AnswerDns(std::string_view query) {
  return AnswerDnsQuery(
      query,
      [this](std::string_view host) {
        const bool may = policy_->MayResolve(host);
        if (!may && config_.on_lookup_refused) {
          config_.on_lookup_refused(std::string(host));
        }
        return may;
      },
      synthetic_);
}

void Proxy::Impl::ReadDns() {
  dns_->async_receive_from(asio::buffer(dns_buf_), dns_peer_,
                           [this](const error_code& ec, std::size_t n) {
                             if (closing_ || ec == asio::error::operation_aborted) {
                               return;
                             }
                             if (!ec) {
                               const auto reply = AnswerDns(std::string_view(dns_buf_.data(), n));
                               if (reply) {
                                 error_code ignored;
                                 dns_->send_to(asio::buffer(*reply), dns_peer_, 0, ignored);
                               }
                             }
                             ReadDns();
                           });
}

void Proxy::Impl::Record(const ConnectionRecord& rec) {
  if (rec.allowed) {
    connections_++;
  } else {
    refused_++;
  }
  const std::lock_guard<std::mutex> lock(record_mu_);
  if (on_record_) {
    on_record_(rec);
  }
}

void Proxy::Impl::Remove(Session* s) { sessions_.erase(s); }

void Proxy::Impl::RemoveDns(DnsTcpConnection* c) { dns_tcp_.erase(c); }

bool Proxy::Impl::Spend(std::uint64_t n, bool up) {
  if (config_.max_bytes != 0 && spent_ + n > config_.max_bytes) {
    Exhaust("egress byte budget of " + FormatBytes(config_.max_bytes) + " used up");
    return false;
  }
  spent_ += n;
  (up ? bytes_up_ : bytes_down_) += n;
  return true;
}

bool Proxy::Impl::Admit(std::string* why) {
  *why = exhausted();
  if (!why->empty()) {
    return false;
  }
  if (config_.max_connections != 0 && attempts_ >= config_.max_connections) {
    *why = "egress connection budget of " + std::to_string(config_.max_connections) + " used up";
    const std::lock_guard<std::mutex> lock(budget_mu_);
    exhausted_ = *why;
    return false;
  }
  attempts_++;
  return true;
}

void Proxy::Impl::Exhaust(const std::string& why) {
  {
    const std::lock_guard<std::mutex> lock(budget_mu_);
    if (exhausted_.empty()) {
      exhausted_ = why;
    }
  }
  std::vector<std::shared_ptr<Session>> all;
  all.reserve(sessions_.size());
  for (auto& [ptr, s] : sessions_) {
    all.push_back(s);
  }
  for (auto& s : all) {
    s->Abort(why);
  }
}

void Proxy::Impl::CloseAll() {
  closing_ = true;
  error_code ignored;
  for (auto& l : listeners_) {
    l->acceptor.close(ignored);
    l->backoff.cancel();
  }
  if (dns_) {
    dns_->close(ignored);
  }
  std::vector<std::shared_ptr<Session>> all;
  all.reserve(sessions_.size());
  for (auto& [ptr, s] : sessions_) {
    all.push_back(s);
  }
  for (auto& s : all) {
    s->Abort("proxy stopped");
  }
  sessions_.clear();
  for (auto& [ptr, c] : dns_tcp_) {
    c->Close();
  }
  dns_tcp_.clear();
}

void Proxy::Impl::Stop() {
  const std::lock_guard<std::mutex> lock(stop_mu_);
  if (stopped_) {
    return;
  }
  stopped_ = true;
  if (thread_.joinable()) {
    asio::post(io_, [this] {
      CloseAll();
      io_.stop();
    });
    thread_.join();
  } else {
    CloseAll();
  }
  const std::lock_guard<std::mutex> gate_lock(gate_->mu);
  gate_->io = nullptr;
}

Proxy::Proxy(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Proxy::~Proxy() { Stop(); }

void Proxy::Stop() { impl_->Stop(); }

Proxy::Totals Proxy::totals() const {
  Totals t;
  t.connections = impl_->connections_.load();
  t.refused = impl_->refused_.load();
  t.bytes_up = impl_->bytes_up_.load();
  t.bytes_down = impl_->bytes_down_.load();
  return t;
}

std::string Proxy::budget_exhausted() const { return impl_->exhausted(); }

Result<std::unique_ptr<Proxy>> Proxy::Start(
    ProxyConfig config, std::shared_ptr<Policy> policy,
    std::function<void(const ConnectionRecord&)> on_record) {
  std::vector<UniqueFd> tcp_fds;
  std::vector<Impl::Kind> kinds;
  if (config.proxy_fd >= 0) {
    tcp_fds.emplace_back(std::exchange(config.proxy_fd, -1));
    kinds.push_back(Impl::Kind::kProxy);
  }
  for (int& fd : config.transparent_fds) {
    tcp_fds.emplace_back(std::exchange(fd, -1));
    kinds.push_back(Impl::Kind::kTransparent);
  }
  if (config.dns_tcp_fd >= 0) {
    tcp_fds.emplace_back(std::exchange(config.dns_tcp_fd, -1));
    kinds.push_back(Impl::Kind::kDnsTcp);
  }
  UniqueFd dns_fd(std::exchange(config.dns_fd, -1));
  if (!policy) {
    return PlainError("start the egress proxy", "no policy").WithCode(Error::Code::kInvalidInput);
  }
  auto synthetic = SyntheticAddresses::Create(config.synthetic_prefix);
  if (!synthetic) {
    return std::move(synthetic).Context("start the egress proxy").error();
  }
  if (config.max_concurrent == 0) {
    config.max_concurrent = 1;
  }
  std::shared_ptr<ssl_ctx_st> upstream_ctx;
  if (config.intercept.ca != nullptr) {
    if (config.intercept.tls == nullptr) {
      return PlainError("start the egress proxy", "a CA to intercept with but no TLS")
          .WithCode(Error::Code::kInvalidInput);
    }
    auto made = config.intercept.tls->MakeUpstreamContext(config.intercept.upstream_ca_file);
    if (!made) {
      return std::move(made).Context("start the egress proxy").error();
    }
    upstream_ctx = std::move(*made);
  }
  auto impl = std::make_shared<Impl>(std::move(config), std::move(policy), std::move(on_record),
                                     std::move(*synthetic));
  impl->upstream_ctx_ = std::move(upstream_ctx);
  auto opened = impl->Open(std::move(tcp_fds), std::move(kinds), std::move(dns_fd));
  if (!opened) {
    return std::move(opened).Context("start the egress proxy").error();
  }
  impl->Run();
  return std::unique_ptr<Proxy>(new Proxy(std::move(impl)));
}

}  // namespace cagent::launcher::egress
