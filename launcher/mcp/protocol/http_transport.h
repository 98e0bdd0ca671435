// MCP "Streamable HTTP" transport (revision 2025-11-25) on loopback, with a bearer token: the
// HTTP side of `cagent mcp serve --listen 127.0.0.1:PORT`. Runs in cagent (trusted), on one
// boost::asio::io_context's thread; every Session (session.h) it makes lives on that thread too.
//
// Who can reach it: the listener is loopback only, but every local process can connect, and every
// web page the user's browser shows can send it requests (DNS rebinding turns evil.example into
// 127.0.0.1). So each request is checked, in this order, before any session sees it:
//   Host      must name a loopback host (127.0.0.1, localhost, [::1], the bound address), with
//             this port if it has one, else 403 (a rebinding page's requests carry its own name)
//   Origin    when present, must be http(s)://<one of those hosts>:PORT, else 403 (the spec's
//             MUST; a page elsewhere cannot read the answers or drive a session)
//   Authorization  `Bearer <token>`, compared in constant time, else 401 + WWW-Authenticate
// and then by the protocol: one endpoint path (else 404); POST carries one JSON-RPC message
// (Content-Type application/json, else 415; no batches); GET is 405 (no server-initiated stream:
// the spec allows it); DELETE ends a session; anything else 405.
//
// Sessions: a POST of an `initialize` request without Mcp-Session-Id makes one (the
// HandlerFactory's handler, a new Session) and its answer carries `Mcp-Session-Id` (256 random
// bits from getrandom, hex). Every later request must carry it: missing → 400, unknown or ended →
// 404. An MCP-Protocol-Version header naming a revision the session does not support → 400
// (absent: the negotiated one is assumed).
//
// Answers: a request gets either application/json (when the session answered it before Receive
// returned, with nothing else for it) or a text/event-stream (SSE, chunked) carrying every
// Outgoing whose `related` is that request's id (progress, elicitation/create) as
// `event: message` events, ending after the final response. A notification or a response (the
// client's answer to elicitation/create) gets 202 with no body. An Outgoing with `related` null
// goes to any open stream of its session, else is dropped. A client that drops a stream mid-call
// does not cancel the call (the spec says so); later messages for it are dropped. A
// notifications/cancelled for a call in progress ends that call's stream (the session sends no
// response for it).
//
// Limits (hostile input never crashes it, nothing throws out of a handler): body ≤
// max_body_bytes (413), request head ≤ 16 KiB (431), malformed HTTP → 400 and close,
// max_sessions (one more initialize → 503 with a JSON-RPC error), read_timeout for reading a
// request and for each write (a slowloris client or one that never reads is cut), sessions idle (no
// request, no stream, no call in progress) longer than session_idle_timeout are ended.
//
// Connections before authentication: Host, Origin and Authorization are checked as soon as a
// request's head is in, before its body is read (or a 100 Continue invites it). A connection
// counts as unauthenticated until a head carrying the token has been read on it; those have their
// own small budget (max_unauthenticated: at the cap a new connection closes the oldest of them)
// and a short deadline for the head (head_timeout). Authenticated connections (max_connections;
// one more gets 503 and is closed) are never closed to make room for unauthenticated ones, so a
// local process without the token can neither fill the token holder's slots nor hold a
// half-sent head for the whole read_timeout. It can still keep opening connections to close the
// oldest unauthenticated one; a client with the token sends its head at once, so that takes a
// flood of max_unauthenticated connections within the moment between its connect and its head.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/result.h"
#include "launcher/mcp/protocol/session.h"

namespace cagent::launcher::mcp {

// The JSON-RPC error code in the body of every HTTP-level refusal (401, 403, 404, 413, 503 …) and
// of the end of a session the client asked for (DELETE) or the transport decided (Stop, idle):
// JSON-RPC's implementation-defined server-error range, as the official SDK's server uses it.
inline constexpr int kTransportError = -32000;

struct HttpOptions {
  std::string address = "127.0.0.1";  // loopback only (127.0.0.0/8, ::1); others: Listen fails
  std::uint16_t port = 0;             // 0 = a free port (see port())
  std::string path = "/mcp";          // the one endpoint; must start with '/'
  std::string bearer_token;           // required (empty → Listen fails)
  std::size_t max_sessions = 4;
  // Connections that have shown the token (a request head carrying it was read on them).
  std::size_t max_connections = 32;
  // Connections that have not (yet) shown the token: every new one until the head of its first
  // request is read and authorised. They have their own budget: at this cap a new connection
  // closes the oldest of them instead of being refused, so idle or half-sent connections of a
  // local process without the token cannot keep the token holder out (issue #33).
  std::size_t max_unauthenticated = 8;
  // How long a connection that has not shown the token may take to send a request head (from
  // its accept, or from the end of its previous answer) before it is closed; a body is read only
  // after its head was authorised, under read_timeout.
  std::chrono::milliseconds head_timeout{5000};
  // Test hook for the twin of the guard above, never false elsewhere: false restores the single
  // cap cagent had (every connection counts against max_connections from its accept, one more
  // is closed at accept, unauthenticated heads get the whole read_timeout), under which a process
  // without the token could lock the token holder out.
  bool unauthenticated_budget = true;
  std::size_t max_body_bytes = 4U << 20;
  std::chrono::seconds read_timeout{30};
  std::chrono::seconds session_idle_timeout{3600};
};

// Makes the handler of a new session (called on the io thread at initialize, with the id the
// session will have); an error refuses that initialize (HTTP 503 with a JSON-RPC error naming it).
using HandlerFactory =
    std::function<Result<std::shared_ptr<ToolHandler>>(const std::string& session_id)>;

class HttpTransport {
 public:
  // Binds options.address:options.port and starts accepting on `io` (which the caller runs, on
  // one thread). Fails (kInvalidInput) on a non-loopback or unparsable address, an empty token
  // or a path not starting with '/'; (kFailed) when the bind or listen fails. `on_session_end`
  // runs on the io thread once for every session that was made (the factory gave a handler),
  // after its id is forgotten: reason "deleted by the client", "idle for N s", "initialize
  // failed: …", "transport stopped" or EndSession's message. It may call EndSession and
  // sessions(); it must not destroy the transport.
  static Result<std::unique_ptr<HttpTransport>> Listen(
      boost::asio::io_context& io, HttpOptions options, SessionOptions session_options,
      HandlerFactory make_handler,
      std::function<void(const std::string& session_id, const std::string& reason)> on_session_end);
  // Stop(). Handlers still queued on the io_context then do nothing.
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  [[nodiscard]] std::uint16_t port() const;
  // "http://127.0.0.1:PORT/mcp" ("http://[::1]:PORT/mcp" on IPv6).
  [[nodiscard]] std::string url() const;
  // The owner ends one session (its budget ran out, its sandbox died): Session::End(code,
  // message), so every call in progress answers that error on its stream; then the id is
  // forgotten (later requests 404), open streams close and on_session_end runs. Unknown id:
  // no-op. Io thread only.
  void EndSession(const std::string& session_id, int code, std::string message);
  // Closes the listener and every connection and ends every session (kTransportError,
  // "the server is shutting down"; on_session_end for each). Idempotent. Io thread only.
  void Stop();
  // Sessions alive now. Io thread only.
  [[nodiscard]] std::size_t sessions() const;

  class State;  // implementation, shared with the connections' handlers

 private:
  explicit HttpTransport(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace cagent::launcher::mcp
