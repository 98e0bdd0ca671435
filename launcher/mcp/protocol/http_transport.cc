#include "launcher/mcp/protocol/http_transport.h"

#include <sys/random.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>
#include <deque>
#include <exception>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "common/json_text.h"
#include "launcher/mcp/protocol/http_screen.h"

namespace cagent::launcher::mcp {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using Headers = HttpHeaders;

// A request's head (request line and header fields) larger than this is refused with 431.
constexpr std::size_t kMaxHeaderBytes = 16 * 1024;
// After an error answer the connection is closed; what the client still sends is read and
// dropped for at most this long, so the answer is not lost to a reset (a close with unread data
// sends RST, and the client may then never see the 413).
constexpr std::chrono::seconds kLingerTime{2};
// Accept failed (EMFILE and the like): try again after this pause instead of spinning.
constexpr std::chrono::milliseconds kAcceptRetry{100};

// 256 bits from the kernel's CSPRNG as 64 hex digits (visible ASCII, as the spec asks).
Result<std::string> RandomSessionId() {
  std::array<unsigned char, 32> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return ErrnoError("getrandom");
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr std::string_view kHex = "0123456789abcdef";
  std::string id;
  id.reserve(bytes.size() * 2);
  for (const unsigned char b : bytes) {
    id.push_back(kHex[b >> 4U]);
    id.push_back(kHex[b & 0xFU]);
  }
  return id;
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 202:
      return "Accepted";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

std::string FormatResponse(int status, const Headers& headers, std::string_view content_type,
                           std::string_view body, bool keep_alive) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) + "\r\n";
  for (const auto& [name, value] : headers) {
    out += name + ": " + value + "\r\n";
  }
  if (!content_type.empty()) {
    out += "Content-Type: ";
    out += content_type;
    out += "\r\n";
  }
  out += "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  out += body;
  return out;
}

// A JSON-RPC error message: the body of every HTTP refusal (as the SDK's server sends them, so a
// client shows the reason) and the answer to a request whose session ended under it.
std::string ErrorMessage(const json& id, int code, std::string message) {
  return JsonText({{"jsonrpc", "2.0"},
                   {"id", id},
                   {"error", {{"code", code}, {"message", std::move(message)}}}});
}

std::string Chunk(std::string_view data) {
  std::array<char, 20> size{};
  const int n = std::snprintf(size.data(), size.size(), "%zx\r\n", data.size());
  std::string out(size.data(), n > 0 ? static_cast<std::size_t>(n) : 0U);
  out += data;
  out += "\r\n";
  return out;
}

std::string SseEvent(std::string_view json_text) {
  // JSON text on one line has no raw line break (they are escaped inside strings), so one data
  // line carries it whole.
  std::string event = "event: message\ndata: ";
  event += json_text;
  event += "\n\n";
  return Chunk(event);
}

class Connection;

// One client request waiting for its answer: the connection it came on and what the session has
// sent for it so far.
struct Exchange {
  std::string key;                    // JsonText(request id)
  std::shared_ptr<Connection> conn;   // reset once the answer is complete
  std::vector<std::string> buffered;  // messages sent before the HTTP answer began (JSON text)
  bool keep_alive = true;
  bool started = false;  // the SSE head went out; later messages go out as they come
  bool done = false;     // the final response came (or the session ended)
  bool initialize = false;
};

// One MCP session: its handler, the Session, the requests waiting for answers.
struct SessionEntry {
  std::string id;
  std::shared_ptr<ToolHandler> handler;  // declared before `session`: outlives it
  std::unique_ptr<Session> session;
  std::map<std::string, std::shared_ptr<Exchange>> streams;
  Clock::time_point last_activity = Clock::now();
  bool forgotten = false;
};

}  // namespace

class HttpTransport::State : public std::enable_shared_from_this<HttpTransport::State> {
 public:
  State(asio::io_context& io, HttpOptions options, SessionOptions session_options,
        HandlerFactory make_handler,
        std::function<void(const std::string&, const std::string&)> on_session_end)
      : io_(io),
        options_(std::move(options)),
        session_options_(std::move(session_options)),
        make_handler_(std::move(make_handler)),
        on_session_end_(std::move(on_session_end)),
        acceptor_(io),
        accept_timer_(io),
        sweep_timer_(io) {}

  Status Open(const asio::ip::address& address);
  void Accept();
  // Closes the oldest unauthenticated connection when max_unauthenticated are open.
  void MakeRoomForUnauthenticated();
  void Sweep();
  void Stop();
  void EndSession(const std::string& id, int code, std::string message);
  // A request head read off `conn`, before its body: Host, Origin and the bearer token. True when
  // the request may go on (the connection is then authenticated); false when it was refused
  // (answered, and the connection closes after the answer).
  bool Admit(const std::shared_ptr<Connection>& conn, const http::request<http::string_body>& head);
  // A request read off `conn` (its head admitted); answers it (now or, for a stream, later).
  // Never throws.
  void Handle(const std::shared_ptr<Connection>& conn, http::request<http::string_body>& request);
  void Unregister(std::uint64_t id) { connections_.erase(id); }

  [[nodiscard]] const HttpOptions& options() const { return options_; }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::size_t sessions() const { return sessions_.size(); }
  [[nodiscard]] const std::string& host_literal() const { return host_literal_; }

 private:
  void HandlePost(const std::shared_ptr<Connection>& conn,
                  const http::request<http::string_body>& request, const HttpRoute& route);
  void HandleDelete(const std::shared_ptr<Connection>& conn,
                    const http::request<http::string_body>& request, const HttpRoute& route);
  void Initialize(const std::shared_ptr<Connection>& conn,
                  const http::request<http::string_body>& request, const json& message);
  void RunRequest(const std::shared_ptr<Connection>& conn, bool keep_alive,
                  const std::shared_ptr<SessionEntry>& entry, const json& id,
                  const std::string& body, bool initialize);
  // The session's `send`.
  void Route(const std::shared_ptr<SessionEntry>& entry, Outgoing outgoing);
  // The answer to `ex` is complete: end its stream (when it began) and drop it.
  static void Complete(SessionEntry& entry, const std::shared_ptr<Exchange>& ex);
  // Forgets the session: later requests 404, its open streams close, it is destroyed once the
  // current handler returns (it may be inside its own Receive), on_session_end(reason) runs.
  void Forget(const std::shared_ptr<SessionEntry>& entry, const std::string& reason);
  void Refuse(const std::shared_ptr<Connection>& conn, int status, int code, std::string message,
              const json& id = nullptr, const Headers& headers = {});
  void Refuse(const std::shared_ptr<Connection>& conn, HttpRefusal refusal) {
    Refuse(conn, refusal.status, refusal.code, std::move(refusal.message), refusal.id,
           refusal.headers);
  }

  asio::io_context& io_;
  HttpOptions options_;
  SessionOptions session_options_;
  HandlerFactory make_handler_;
  std::function<void(const std::string&, const std::string&)> on_session_end_;
  tcp::acceptor acceptor_;
  asio::steady_timer accept_timer_;
  asio::steady_timer sweep_timer_;
  std::uint16_t port_ = 0;
  std::string host_literal_;  // the bound address as a Host names it: "127.0.0.1", "[::1]"
  HttpScreenConfig screen_;   // what http_screen.h checks, set once the listener is bound
  bool stopped_ = false;
  std::uint64_t next_connection_ = 0;
  std::unordered_map<std::uint64_t, std::weak_ptr<Connection>> connections_;
  std::map<std::string, std::shared_ptr<SessionEntry>> sessions_;
};

namespace {

// One accepted TCP connection: reads requests one at a time (HTTP/1.1 keep-alive), writes their
// answers; while an SSE answer is open it reads nothing (pipelined bytes wait in the kernel) but
// watches for the client going away.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::weak_ptr<HttpTransport::State> state, std::uint64_t id,
             const HttpOptions& options)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        state_(std::move(state)),
        id_(id),
        read_timeout_(options.read_timeout),
        head_timeout_(options.head_timeout),
        unauthenticated_budget_(options.unauthenticated_budget),
        max_body_bytes_(options.max_body_bytes) {}

  void Start() {
    boost::system::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    socket_.non_blocking(true, ec);  // the close watch peeks without blocking
    ReadRequest();
  }

  [[nodiscard]] bool closed() const { return closed_; }
  // Whether a request head carrying the bearer token was read on this connection.
  [[nodiscard]] bool authenticated() const { return authenticated_; }
  void set_authenticated() { authenticated_ = true; }

  // A complete answer; then the next request (keep_alive) or a lingering close.
  void Respond(std::string raw, bool keep_alive) {
    after_ = keep_alive ? After::kRead : After::kLinger;
    Write(std::move(raw));
  }
  // The head of an SSE answer and the events so far; more follow with StreamEvent.
  void BeginStream(std::string head) {
    streaming_ = true;
    after_ = After::kNothing;
    Write(std::move(head));
    WatchForClose();
  }
  void StreamEvent(std::string chunk) {
    if (streaming_) {
      Write(std::move(chunk));
    }
  }
  void EndStream(bool keep_alive) {
    if (!streaming_) {
      return;
    }
    streaming_ = false;
    after_ = keep_alive ? After::kRead : After::kLinger;
    Write("0\r\n\r\n");
  }

  void Close() {
    if (closed_) {
      return;
    }
    closed_ = true;
    streaming_ = false;
    writes_.clear();
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    timer_.cancel();
    if (auto state = state_.lock()) {
      state->Unregister(id_);
    }
  }

 private:
  enum class After : std::uint8_t { kNothing, kRead, kLinger };

  void ReadRequest() {
    if (closed_) {
      return;
    }
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(kMaxHeaderBytes));
    parser_->body_limit(max_body_bytes_);
    // One deadline for the whole request, head and body; before the token was seen, a short one
    // for the head alone (the body is read only once the head is admitted).
    Arm(authenticated_ || !unauthenticated_budget_ ? Clock::duration(read_timeout_)
                                                   : Clock::duration(head_timeout_));
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t /*bytes*/) {
          self->OnHeader(ec);
        });
  }

  // The head is in. A client that sent `Expect: 100-continue` (curl does for bodies over 1 KiB)
  // waits for a 100 before it sends the body; the rest of the request is then read.
  void OnHeader(beast::error_code ec) {
    if (ec || closed_) {
      OnRead(ec);
      return;
    }
    // Checked before the body is read or invited: a request without the token costs its head
    // only. (A refusal is answered by Admit; the connection then closes.)
    auto state = state_.lock();
    if (!state) {
      Close();
      return;
    }
    const bool was_authenticated = authenticated_;
    if (!state->Admit(shared_from_this(), parser_->get())) {
      return;
    }
    if (!was_authenticated && unauthenticated_budget_) {
      Arm(read_timeout_);  // the token holder's body: the ordinary deadline from here
    }
    if (parser_->is_done()) {
      OnRead(ec);
      return;
    }
    auto read_body = [self = shared_from_this()] {
      http::async_read(
          self->socket_, self->buffer_, *self->parser_,
          [self](beast::error_code read_ec, std::size_t /*bytes*/) { self->OnRead(read_ec); });
    };
    if (LowerAscii(TrimOws(View(parser_->get()[http::field::expect]))) != "100-continue") {
      read_body();
      return;
    }
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(socket_, asio::buffer(kContinue),
                      [self = shared_from_this(), read_body](boost::system::error_code write_ec,
                                                             std::size_t /*bytes*/) {
                        if (write_ec || self->closed_) {
                          self->Close();
                          return;
                        }
                        read_body();
                      });
  }

  void OnRead(beast::error_code ec) {
    Disarm();
    if (closed_) {
      return;
    }
    auto state = state_.lock();
    if (!state) {
      Close();
      return;
    }
    if (ec) {
      // Limits and malformed HTTP get an answer; a client that left, or timed out, does not.
      const int status =
          ec == http::error::body_limit     ? 413
          : ec == http::error::header_limit ? 431
          : ec.category() == http::make_error_code(http::error::bad_method).category() &&
                  ec != http::error::end_of_stream && ec != http::error::partial_message
              ? 400
              : 0;
      if (status == 0) {
        Close();
        return;
      }
      const std::string why =
          status == 413
              ? "the request body is larger than " + std::to_string(max_body_bytes_) + " bytes"
          : status == 431
              ? "the request head is larger than " + std::to_string(kMaxHeaderBytes) + " bytes"
              : "malformed HTTP request: " + ec.message();
      Respond(FormatResponse(status, {}, "application/json",
                             ErrorMessage(nullptr, kTransportError, why), false),
              false);
      return;
    }
    http::request<http::string_body> request = parser_->release();
    parser_.reset();
    try {
      state->Handle(shared_from_this(), request);
    } catch (const std::exception& e) {
      if (!closed_ && !streaming_ && !writing_) {
        Respond(FormatResponse(500, {}, "application/json",
                               ErrorMessage(nullptr, kInternalError,
                                            std::string("internal error: ") + e.what()),
                               false),
                false);
      }
    }
  }

  void Write(std::string data) {
    if (closed_) {
      return;
    }
    writes_.push_back(std::move(data));
    if (!writing_) {
      DoWrite();
    }
  }

  void DoWrite() {
    writing_ = true;
    Arm(read_timeout_);  // a client that never reads is cut like one that never writes
    asio::async_write(socket_, asio::buffer(writes_.front()),
                      [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                        self->OnWrite(ec);
                      });
  }

  void OnWrite(boost::system::error_code ec) {
    Disarm();
    writing_ = false;
    if (closed_) {
      return;
    }
    if (ec) {
      Close();  // the client left: later messages for its stream are dropped
      return;
    }
    writes_.pop_front();
    if (!writes_.empty()) {
      DoWrite();
      return;
    }
    const After after = after_;
    after_ = After::kNothing;
    if (after == After::kRead) {
      ReadRequest();
    } else if (after == After::kLinger) {
      Linger();
    }
  }

  // While an SSE answer is open: a client that closes its end is noticed (and its connection
  // slot freed) even when the call sends nothing for an hour.
  // One wait at a time: a wait left from an earlier stream watches the next one.
  void WatchForClose() {
    if (watching_) {
      return;
    }
    watching_ = true;
    socket_.async_wait(
        tcp::socket::wait_read, [self = shared_from_this()](boost::system::error_code ec) {
          self->watching_ = false;
          if (self->closed_ || !self->streaming_) {
            return;
          }
          if (ec) {
            self->Close();
            return;
          }
          std::array<char, 1> peek{};
          boost::system::error_code rec;
          const std::size_t n =
              self->socket_.receive(asio::buffer(peek), tcp::socket::message_peek, rec);
          if (rec == asio::error::would_block) {
            self->WatchForClose();
          } else if (rec || n == 0) {
            self->Close();
          }
          // Bytes waiting: the next (pipelined) request; read after this answer.
        });
  }

  void Linger() {
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    Arm(kLingerTime);
    Drain();
  }

  void Drain() {
    socket_.async_read_some(asio::buffer(drain_),
                            [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                              if (ec || self->closed_) {
                                self->Close();
                              } else {
                                self->Drain();
                              }
                            });
  }

  // One deadline for the operation in progress; when it passes the connection is closed (which
  // cancels the operation).
  void Arm(std::chrono::steady_clock::duration timeout) {
    ++timer_generation_;
    timer_.expires_after(timeout);
    timer_.async_wait(
        [self = shared_from_this(), generation = timer_generation_](boost::system::error_code ec) {
          if (!ec && generation == self->timer_generation_) {
            self->Close();
          }
        });
  }
  void Disarm() {
    ++timer_generation_;
    timer_.cancel();
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  std::weak_ptr<HttpTransport::State> state_;
  std::uint64_t id_;
  std::chrono::seconds read_timeout_;
  std::chrono::milliseconds head_timeout_;
  bool unauthenticated_budget_;
  bool authenticated_ = false;
  std::size_t max_body_bytes_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::string> writes_;
  std::array<char, 4096> drain_{};
  std::uint64_t timer_generation_ = 0;
  After after_ = After::kNothing;
  bool writing_ = false;
  bool watching_ = false;
  bool streaming_ = false;
  bool closed_ = false;
};

}  // namespace

Status HttpTransport::State::Open(const asio::ip::address& address) {
  const tcp::endpoint endpoint(address, options_.port);
  boost::system::error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  if (ec) {
    return PlainError("open the MCP HTTP listener", ec.message());
  }
  acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (ec) {
    return PlainError("set SO_REUSEADDR on the MCP HTTP listener", ec.message());
  }
  acceptor_.bind(endpoint, ec);
  if (ec) {
    return PlainError("bind " + address.to_string() + ":" + std::to_string(options_.port),
                      ec.message() + "; is the port in use? choose another with --listen");
  }
  acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return PlainError("listen on the MCP HTTP listener", ec.message());
  }
  port_ = acceptor_.local_endpoint(ec).port();
  if (ec) {
    return PlainError("read the MCP HTTP listener's port", ec.message());
  }
  host_literal_ = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  screen_ = HttpScreenConfig{options_.path, port_, host_literal_, options_.bearer_token,
                             session_options_.max_depth};
  return Ok{};
}

void HttpTransport::State::Accept() {
  acceptor_.async_accept(
      [weak = weak_from_this()](boost::system::error_code ec, tcp::socket socket) {
        auto self = weak.lock();
        if (!self || self->stopped_) {
          return;
        }
        if (ec) {
          if (ec == asio::error::operation_aborted) {
            return;
          }
          self->accept_timer_.expires_after(kAcceptRetry);
          self->accept_timer_.async_wait([weak](boost::system::error_code timer_ec) {
            auto again = weak.lock();
            if (!timer_ec && again && !again->stopped_) {
              again->Accept();
            }
          });
          return;
        }
        if (!self->options_.unauthenticated_budget) {
          // The single cap (the guard's twin test only): every connection counts from its accept.
          if (self->connections_.size() >= self->options_.max_connections) {
            boost::system::error_code ignored;
            socket.close(ignored);  // over the limit: refused before a byte is read
            self->Accept();
            return;
          }
        } else {
          self->MakeRoomForUnauthenticated();
        }
        const std::uint64_t id = self->next_connection_++;
        auto conn = std::make_shared<Connection>(std::move(socket), weak, id, self->options_);
        self->connections_.emplace(id, conn);
        conn->Start();
        self->Accept();
      });
}

void HttpTransport::State::MakeRoomForUnauthenticated() {
  // A new connection has not shown the token. At the cap of those, the oldest of them goes: a
  // newcomer is never refused, so connections that sit idle or half-sent (a local process without
  // the token) cannot keep out a client that has it; the authenticated ones are never touched.
  std::size_t unauthenticated = 0;
  std::shared_ptr<Connection> oldest;
  std::uint64_t oldest_id = 0;
  for (const auto& [id, weak] : connections_) {
    auto conn = weak.lock();
    if (!conn || conn->closed() || conn->authenticated()) {
      continue;
    }
    ++unauthenticated;
    if (!oldest || id < oldest_id) {
      oldest = std::move(conn);
      oldest_id = id;
    }
  }
  if (oldest && unauthenticated >= std::max<std::size_t>(1, options_.max_unauthenticated)) {
    oldest->Close();  // unregisters it
  }
}

void HttpTransport::State::Sweep() {
  const auto interval = std::clamp<std::chrono::seconds>(
      options_.session_idle_timeout / 4, std::chrono::seconds{1}, std::chrono::seconds{60});
  sweep_timer_.expires_after(interval);
  sweep_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->stopped_) {
      return;
    }
    const auto now = Clock::now();
    std::vector<std::shared_ptr<SessionEntry>> idle;
    for (const auto& [id, entry] : self->sessions_) {
      if (entry->streams.empty() && entry->session->calls_in_progress() == 0 &&
          now - entry->last_activity > self->options_.session_idle_timeout) {
        idle.push_back(entry);
      }
    }
    for (const auto& entry : idle) {
      const std::string reason =
          "idle for " + std::to_string(self->options_.session_idle_timeout.count()) + " s";
      entry->session->End(kTransportError, "the session ended: " + reason);
      self->Forget(entry, reason);
    }
    self->Sweep();
  });
}

void HttpTransport::State::Stop() {
  if (stopped_) {
    return;
  }
  stopped_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  accept_timer_.cancel();
  sweep_timer_.cancel();
  while (!sessions_.empty()) {
    const std::shared_ptr<SessionEntry> entry = sessions_.begin()->second;
    entry->session->End(kTransportError, "the server is shutting down");
    Forget(entry, "transport stopped");
  }
  std::vector<std::shared_ptr<Connection>> open;
  for (const auto& [id, weak] : connections_) {
    if (auto conn = weak.lock()) {
      open.push_back(std::move(conn));
    }
  }
  for (const auto& conn : open) {
    conn->Close();
  }
  connections_.clear();
}

void HttpTransport::State::EndSession(const std::string& id, int code, std::string message) {
  const auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    return;
  }
  const std::shared_ptr<SessionEntry> entry = it->second;
  const std::string reason = message;
  entry->session->End(code, std::move(message));
  Forget(entry, reason);
}

void HttpTransport::State::Forget(const std::shared_ptr<SessionEntry>& entry,
                                  const std::string& reason) {
  if (entry->forgotten) {
    return;
  }
  entry->forgotten = true;
  sessions_.erase(entry->id);
  const auto streams = std::move(entry->streams);
  entry->streams.clear();
  for (const auto& [key, ex] : streams) {
    ex->done = true;
    Complete(*entry, ex);
  }
  // Not destroyed here: this may run inside the session's own Receive (a handler ended it).
  asio::post(io_, [entry] { (void)entry; });
  if (on_session_end_) {
    on_session_end_(entry->id, reason);
  }
}

void HttpTransport::State::Complete(SessionEntry& entry, const std::shared_ptr<Exchange>& ex) {
  entry.streams.erase(ex->key);
  if (ex->started && ex->conn) {
    ex->conn->EndStream(ex->keep_alive);
    ex->conn.reset();
  }
}

void HttpTransport::State::Route(const std::shared_ptr<SessionEntry>& entry, Outgoing outgoing) {
  std::shared_ptr<Exchange> ex;
  bool final = false;
  if (!outgoing.related.is_null()) {
    const auto it = entry->streams.find(JsonText(outgoing.related));
    if (it != entry->streams.end()) {
      ex = it->second;
      final = outgoing.final;
    }
  } else {
    for (const auto& [key, candidate] : entry->streams) {
      if (candidate->conn && !candidate->conn->closed()) {
        ex = candidate;
        break;
      }
    }
  }
  if (!ex) {
    return;  // its stream is gone (the client left, or never had one): dropped
  }
  std::string text = JsonText(outgoing.message);
  if (ex->started) {
    if (ex->conn) {
      ex->conn->StreamEvent(SseEvent(text));
    }
  } else {
    ex->buffered.push_back(std::move(text));
  }
  if (final) {
    ex->done = true;
    Complete(*entry, ex);
    if (ex->initialize && outgoing.message.is_object() && outgoing.message.contains("error")) {
      const json& error = outgoing.message["error"];
      const std::string why =
          error.is_object() && error.contains("message") && error["message"].is_string()
              ? error["message"].get<std::string>()
              : std::string("an error");
      Forget(entry, "initialize failed: " + why);
    }
  }
}

void HttpTransport::State::Refuse(const std::shared_ptr<Connection>& conn, int status, int code,
                                  std::string message, const json& id, const Headers& headers) {
  conn->Respond(FormatResponse(status, headers, "application/json",
                               ErrorMessage(id, code, std::move(message)), false),
                false);
}

bool HttpTransport::State::Admit(const std::shared_ptr<Connection>& conn,
                                 const http::request<http::string_body>& head) {
  if (stopped_) {
    conn->Close();
    return false;
  }
  // Host, Origin and the token, before the body is read.
  if (auto refusal = ScreenHttpHead(head, screen_)) {
    Refuse(conn, std::move(*refusal));
    return false;
  }
  if (!conn->authenticated()) {
    if (options_.unauthenticated_budget) {
      std::size_t authenticated = 0;
      for (const auto& [id, weak] : connections_) {
        const auto other = weak.lock();
        authenticated += other && !other->closed() && other->authenticated() ? 1 : 0;
      }
      if (authenticated >= options_.max_connections) {
        Refuse(conn, 503, kTransportError,
               "too many connections (" + std::to_string(options_.max_connections) +
                   "); close one or reuse it (keep-alive)");
        return false;
      }
    }
    conn->set_authenticated();
  }
  return true;
}

void HttpTransport::State::Handle(const std::shared_ptr<Connection>& conn,
                                  http::request<http::string_body>& request) {
  if (stopped_) {
    conn->Close();
    return;
  }
  // Host, Origin and the token were checked on the head (Admit), before the body was read.
  auto screened = ScreenHttpRequest(request, screen_);
  if (auto* refusal = std::get_if<HttpRefusal>(&screened)) {
    Refuse(conn, std::move(*refusal));
    return;
  }
  HttpRoute& route = std::get<HttpRoute>(screened);
  switch (route.to) {
    case HttpRoute::To::kDelete:
      HandleDelete(conn, request, route);
      return;
    case HttpRoute::To::kInitialize:
      Initialize(conn, request, route.message);
      return;
    case HttpRoute::To::kSession:
      HandlePost(conn, request, route);
      return;
  }
}

void HttpTransport::State::HandleDelete(const std::shared_ptr<Connection>& conn,
                                        const http::request<http::string_body>& request,
                                        const HttpRoute& route) {
  const std::string& id = route.session_id;
  const auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    Refuse(conn, 404, kTransportError, "session not found");
    return;
  }
  const std::shared_ptr<SessionEntry> entry = it->second;
  entry->session->End(kTransportError, "the client ended the session");
  Forget(entry, "deleted by the client");
  conn->Respond(FormatResponse(200, {}, "", "", request.keep_alive()), request.keep_alive());
}

void HttpTransport::State::HandlePost(const std::shared_ptr<Connection>& conn,
                                      const http::request<http::string_body>& request,
                                      const HttpRoute& route) {
  const json& message = route.message;
  const std::string& body = request.body();
  const std::string& session_id = route.session_id;
  const HttpMessageKind kind = route.kind;
  const auto it = sessions_.find(session_id);
  if (it == sessions_.end()) {
    Refuse(conn, 404, kTransportError, "session not found (it ended; initialize again)",
           kind == HttpMessageKind::kRequest ? message["id"] : json(nullptr));
    return;
  }
  const std::shared_ptr<SessionEntry> entry = it->second;
  const std::string_view version = TrimOws(View(request["MCP-Protocol-Version"]));
  if (!version.empty()) {
    const auto& supported = SupportedProtocolVersions();
    if (std::find(supported.begin(), supported.end(), version) == supported.end()) {
      Refuse(conn, 400, kTransportError,
             "unsupported MCP-Protocol-Version " + std::string(version).substr(0, 64));
      return;
    }
  }
  entry->last_activity = Clock::now();
  if (kind == HttpMessageKind::kRequest) {
    RunRequest(conn, request.keep_alive(), entry, message["id"], body, false);
    return;
  }
  entry->session->Receive(body);
  // The session sends no response for a cancelled call (as the spec says): end its stream.
  if (kind == HttpMessageKind::kNotification && message["method"] == "notifications/cancelled" &&
      message.contains("params") && message["params"].is_object() &&
      message["params"].contains("requestId")) {
    const auto stream = entry->streams.find(JsonText(message["params"]["requestId"]));
    if (stream != entry->streams.end()) {
      const std::shared_ptr<Exchange> ex = stream->second;
      ex->done = true;
      Complete(*entry, ex);
    }
  }
  conn->Respond(FormatResponse(202, {}, "", "", request.keep_alive()), request.keep_alive());
}

void HttpTransport::State::Initialize(const std::shared_ptr<Connection>& conn,
                                      const http::request<http::string_body>& request,
                                      const json& message) {
  const json& request_id = message["id"];
  if (sessions_.size() >= options_.max_sessions) {
    Refuse(conn, 503, kTransportError,
           "too many sessions (" + std::to_string(options_.max_sessions) +
               "); end one (DELETE) or wait for one to expire",
           request_id);
    return;
  }
  Result<std::string> id = RandomSessionId();
  if (!id.ok()) {
    Refuse(conn, 500, kInternalError, "cannot make a session id: " + id.error().Message(),
           request_id);
    return;
  }
  Result<std::shared_ptr<ToolHandler>> handler = PlainError("make the session's handler");
  try {
    handler = make_handler_
                  ? make_handler_(*id)
                  : Result<std::shared_ptr<ToolHandler>>(PlainError("no handler factory"));
  } catch (const std::exception& e) {
    handler = PlainError("make the session's handler", e.what());
  }
  if (handler.ok() && !*handler) {
    handler = PlainError("make the session's handler", "no handler");
  }
  if (!handler.ok()) {
    Refuse(conn, 503, kTransportError, "cannot start a session: " + handler.error().Message(),
           request_id);
    return;
  }
  auto entry = std::make_shared<SessionEntry>();
  entry->id = *id;
  entry->handler = std::move(*handler);
  entry->session = std::make_unique<Session>(
      io_, *entry->handler, session_options_,
      [weak_state = weak_from_this(),
       weak_entry = std::weak_ptr<SessionEntry>(entry)](Outgoing outgoing) {
        auto state = weak_state.lock();
        auto target = weak_entry.lock();
        if (state && target) {
          state->Route(target, std::move(outgoing));
        }
      });
  sessions_.emplace(entry->id, entry);
  RunRequest(conn, request.keep_alive(), entry, request_id, request.body(), true);
}

void HttpTransport::State::RunRequest(const std::shared_ptr<Connection>& conn, bool keep_alive,
                                      const std::shared_ptr<SessionEntry>& entry, const json& id,
                                      const std::string& body, bool initialize) {
  const std::string key = JsonText(id);
  if (entry->streams.count(key) != 0) {
    Refuse(conn, 400, kInvalidRequest, "a request with this id is still in progress", id);
    return;
  }
  auto ex = std::make_shared<Exchange>();
  ex->key = key;
  ex->conn = conn;
  ex->keep_alive = keep_alive;
  ex->initialize = initialize;
  entry->streams.emplace(key, ex);
  entry->session->Receive(body);

  Headers headers;
  if (initialize && !entry->forgotten) {
    headers.emplace_back("Mcp-Session-Id", entry->id);
  }
  if (ex->done) {
    ex->conn.reset();
    if (ex->buffered.empty()) {
      // The session ended under the request before it answered.
      conn->Respond(
          FormatResponse(200, headers, "application/json",
                         ErrorMessage(id, kTransportError, "the session ended"), keep_alive),
          keep_alive);
    } else if (ex->buffered.size() == 1) {
      conn->Respond(
          FormatResponse(200, headers, "application/json", ex->buffered.front(), keep_alive),
          keep_alive);
    } else {
      std::string sse;
      for (const std::string& text : ex->buffered) {
        sse += SseEvent(text);
      }
      sse += "0\r\n\r\n";
      std::string head = "HTTP/1.1 200 OK\r\n";
      for (const auto& [name, value] : headers) {
        head += name + ": " + value + "\r\n";
      }
      head += "Content-Type: text/event-stream\r\nCache-Control: no-cache, no-store\r\n";
      head += "Transfer-Encoding: chunked\r\n";
      head += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
      conn->Respond(head + sse, keep_alive);
    }
    return;
  }
  std::string head = "HTTP/1.1 200 OK\r\n";
  for (const auto& [name, value] : headers) {
    head += name + ": " + value + "\r\n";
  }
  head += "Content-Type: text/event-stream\r\nCache-Control: no-cache, no-store\r\n";
  head += "Transfer-Encoding: chunked\r\n";
  head += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  for (const std::string& text : ex->buffered) {
    head += SseEvent(text);
  }
  ex->buffered.clear();
  ex->started = true;
  conn->BeginStream(std::move(head));
}

HttpTransport::HttpTransport(std::shared_ptr<State> state) : state_(std::move(state)) {}

HttpTransport::~HttpTransport() { Stop(); }

Result<std::unique_ptr<HttpTransport>> HttpTransport::Listen(
    asio::io_context& io, HttpOptions options, SessionOptions session_options,
    HandlerFactory make_handler,
    std::function<void(const std::string& session_id, const std::string& reason)> on_session_end) {
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(options.address, ec);
  if (ec) {
    return PlainError("listen for MCP over HTTP",
                      "'" + options.address + "' is not an IP address; use 127.0.0.1 or ::1")
        .WithCode(Error::Code::kInvalidInput);
  }
  // Loopback only: the token is the one secret between this server and its client, and it goes
  // over the wire in clear text (no TLS here).
  if (!address.is_loopback()) {
    return PlainError("listen for MCP over HTTP on " + options.address,
                      "not a loopback address; only 127.0.0.0/8 and ::1 are allowed")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (options.bearer_token.empty()) {
    return PlainError("listen for MCP over HTTP", "a bearer token is required")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (options.path.empty() || options.path.front() != '/') {
    return PlainError("listen for MCP over HTTP", "the path must start with '/'")
        .WithCode(Error::Code::kInvalidInput);
  }
  auto state = std::make_shared<State>(io, std::move(options), std::move(session_options),
                                       std::move(make_handler), std::move(on_session_end));
  if (Status opened = state->Open(address); !opened.ok()) {
    Error error = opened.error();
    return std::move(error).Context("listen for MCP over HTTP");
  }
  state->Accept();
  state->Sweep();
  return std::unique_ptr<HttpTransport>(new HttpTransport(std::move(state)));
}

std::uint16_t HttpTransport::port() const { return state_->port(); }

std::string HttpTransport::url() const {
  return "http://" + state_->host_literal() + ":" + std::to_string(state_->port()) +
         state_->options().path;
}

void HttpTransport::EndSession(const std::string& session_id, int code, std::string message) {
  state_->EndSession(session_id, code, std::move(message));
}

void HttpTransport::Stop() { state_->Stop(); }

std::size_t HttpTransport::sessions() const { return state_->sessions(); }

}  // namespace cagent::launcher::mcp
