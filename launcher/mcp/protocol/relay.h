// Relay: the JSON-RPC relay `cagent mcp wrap` puts between an MCP client and an MCP server it does
// not trust, over the stdio transport (newline-delimited JSON-RPC 2.0: one message per line, no
// embedded newlines). Runs in cagent (trusted), single-threaded on one boost::asio::io_context;
// policy-agnostic: what a tools/call gets is asked of a RelayGate.
//
// Both peers are hostile input. Every line from either side is parsed with limits (size, nesting
// depth); a line longer than max_frame_bytes is never buffered whole (its first bytes are kept to
// find its id, the rest is skipped up to the newline). Nothing is forwarded as received: each
// message that passes is re-serialised from the value the relay checked, so a peer cannot exploit
// a difference between JSON parsers (a duplicate "name" key read one way by the relay and another
// way by the server). Batches (JSON arrays) are refused in both directions.
//
// Client -> server:
//   malformed JSON           -32700 to the client (id null, or the id found in the line's text)
//   oversized / not a valid  -32600 to the client; nothing is forwarded. When the line looks like
//   JSON-RPC message         a response to a request the server is waiting for (no "method", an
//                            id the server used), the server gets -32603 for that id instead.
// Every message is gated by what it is (its method, ClassifyClientMethod), never by whether it
// has an id: a server that dispatches by method runs an id-less tools/call as readily as a request.
//   tools/call               to RelayGate::Check (asynchronously; several at once, up to
//                            max_checks); allow: forwarded; deny: answered by the relay with a
//                            CallToolResult {content: [{type: text, text: MESSAGE}], isError: true}
//                            and never forwarded; cancelled by the client while being checked:
//                            neither forwarded nor answered (as notifications/cancelled says).
//                            Without a string params.name or with non-object arguments: -32602.
//   tools/call without an id to RelayGate::Check as well (request_id null); allow: forwarded as
//                            it came; deny (or malformed params): dropped and counted, never
//                            forwarded; with no id there is nobody to answer. The gate's own
//                            record (the audit log's mcp_call) is its trace.
//   other requests           of a method on the list (ClassifyClientMethod): forwarded and
//                            remembered until the server answers them; any other method: -32601
//                            "method not found", not forwarded
//   notifications            of a method on the list: forwarded (notifications/cancelled of a call
//                            still being checked is not: the server never saw that id); any other
//                            method (a request's method without an id included): dropped
//   batches (JSON arrays)    refused as a whole with -32600 (id null), no element forwarded: MCP
//                            2025-06-18 removed batching, and answering part of a batch would need
//                            a batch response the relay does not build
//   responses                forwarded only when they answer a request the server sent and has
//                            not had answered; others are dropped
//   an id already in use by a request of the client still in progress: -32600, not forwarded.
//
// Server -> client:
//   malformed / oversized /  dropped; when an id found in the line names a request of the client
//   invalid                  the server was given, the client gets -32603 "the wrapped server sent
//                            a malformed message" (or "an oversized message") for it, and the
//                            request is no longer in progress
//   responses                forwarded only when they answer a request of the client that was
//                            forwarded to the server and not yet answered. A server cannot answer
//                            a tools/call the gate denied or is still checking (the relay answers
//                            those, or nobody does), an id the client never sent, or an id twice.
//                            The result of a tools/call is reported to RelayGate::Result; the
//                            result of tools/list is filtered (see below).
//   requests                 (sampling, elicitation, roots, ping) forwarded and remembered until
//                            the client answers; an id the server already has in progress gets
//                            -32600 back to the server
//   notifications            forwarded
//
// tools/list: the client is offered only the tools RelayGate::Listed allows; the hidden names are
// reported to RelayGate::ListFiltered (for the audit log) and, honestly, to the client in the
// result's `_meta` ("cagent/hiddenTools"). A hidden tool that the client calls anyway is still
// decided by Check.
//
// Ids are not rewritten: the client's ids reach the server as they are and the server's reach the
// client; the relay only tracks which are in progress (each direction separately, at most
// max_outstanding each; one more is refused with -32603).
//
// Back-pressure: each destination has a bounded queue (max_queued_bytes). While a queue is over
// its bound, the relay stops reading from the side that fills it (the client's side fills both
// the server's queue and, with the relay's own answers, its own); reading resumes once the queue
// has drained below half. A peer that does not read therefore slows the other down instead of
// growing cagent's memory.
//
// End: the client closing its side (EOF on client_in: a client that is done, or the end of a file
// of requests) closes the server's stdin once everything queued for it is written and calls the
// on_client_closed callback; the server's answers still reach the client. The server closing its
// stdout answers every client request still in progress with -32603, flushes what is queued for
// the client (at most kDrainTimeout, 5 s, for a client that does not read), closes client_out and
// ends the relay: kClientClosed when the client had closed first, else kServerClosed. A read or
// write error ends it at once (kClientGone / kServerGone). The owner stops the server (a server
// that does not exit when its stdin closes keeps the relay waiting until the owner calls Stop).
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/unique_fd.h"

namespace cagent::launcher::mcp {

// What the gate says about one tools/call.
struct GateVerdict {
  bool allow = false;
  // With a denial: the text the client's CallToolResult carries (names the rule and says what to
  // do instead). Ignored with an allow.
  std::string message;
};

// What the server answered to a tools/call the gate allowed.
struct CallOutcome {
  nlohmann::json request_id;  // the client's id of the tools/call
  std::string tool;
  // true: a JSON-RPC result; false: a JSON-RPC error, or the server sent something unusable for
  // it (malformed, oversized), or it ended before answering.
  bool ok = false;
  bool is_error = false;    // the result's isError was true
  std::uint64_t bytes = 0;  // bytes of the response line as the server sent it
  // SHA-256 (hex) of the canonical JSON (keys sorted, no whitespace) of the result, or of the
  // error object; "" when there was none.
  std::string digest;
  std::string error;  // !ok: the error's message, or what the relay saw ("" when ok)
};

// Decides tools/call requests and hears their outcomes. Every method is called on the relay's
// io_context thread and must not call back into the Relay synchronously except through `done`.
class RelayGate {
 public:
  virtual ~RelayGate() = default;
  // A client's tools/call of `tool` with `arguments` (an object; {} when absent) under the
  // client's JSON-RPC id `request_id` (null for an id-less tools/call: decided all the same).
  // `done` must be called exactly once, on the io_context's thread, possibly later (an approval);
  // it may be called from inside Check. A `done` called after the relay ended is ignored.
  virtual void Check(const std::string& tool, const nlohmann::json& arguments,
                     const nlohmann::json& request_id, std::function<void(GateVerdict)> done) = 0;
  // The outcome of an allowed tools/call (once per forwarded call with an id; also when the relay
  // ends with the call still in progress: ok false, error says so). An id-less one has none.
  virtual void Result(const CallOutcome& outcome) = 0;
  // Whether tools/list may offer `tool` to the client: false for a tool that Check would deny
  // whatever its arguments.
  [[nodiscard]] virtual bool Listed(const std::string& tool) = 0;
  // One tools/list response as filtered: the names offered and those hidden (both in the
  // server's order).
  virtual void ListFiltered(const std::vector<std::string>& offered,
                            const std::vector<std::string>& hidden) = 0;
};

struct RelayOptions {
  // A line (one JSON-RPC message, without its newline) longer than this is refused.
  std::size_t max_frame_bytes = std::size_t{4} << 20;
  std::size_t max_depth = 64;  // JSON nesting (objects and arrays) of a message
  // Bytes queued for one destination before the relay stops reading from the side filling it.
  std::size_t max_queued_bytes = std::size_t{8} << 20;
  // Requests in progress per direction (client -> server, server -> client).
  std::size_t max_outstanding = 1024;
  // tools/call requests waiting for the gate at once; one more is answered -32603.
  std::size_t max_checks = 16;
};

// The four ends, each a pipe, socket or terminal (something epoll can wait on: not a regular file
// or /dev/null; the caller interposes a pipe for those). Owned by the relay from Start on and
// closed when it ends. Set to non-blocking mode by the relay (O_NONBLOCK is shared by every
// descriptor of the same open file description: pass a descriptor of its own).
struct RelayEnds {
  UniqueFd client_in;   // read: the client's messages (cagent's stdin)
  UniqueFd client_out;  // write: to the client (cagent's stdout)
  UniqueFd server_in;   // write: the server's stdin
  UniqueFd server_out;  // read: the server's stdout
};

enum class RelayEnd : std::uint8_t {
  kClientClosed,  // EOF from the client
  kServerClosed,  // EOF from the server
  kClientGone,    // reading from or writing to the client failed (EPIPE ...)
  kServerGone,    // reading from or writing to the server failed
  kStopped,       // Stop() was called
};
std::string_view RelayEndName(RelayEnd end);  // "client closed", "server closed", ...

// Counters, for the session's summary and the tests.
struct RelayStats {
  std::uint64_t client_messages = 0;      // lines from the client that parsed as a message
  std::uint64_t server_messages = 0;      // lines from the server that parsed as a message
  std::uint64_t client_refused = 0;       // client lines not forwarded (answered with an error,
                                          // or a response to nothing the server asked: dropped)
  std::uint64_t server_dropped = 0;       // server lines not forwarded (malformed, unmatched ...)
  std::uint64_t unmatched_responses = 0;  // of which: responses to ids not in progress
  std::uint64_t calls_allowed = 0;
  std::uint64_t calls_denied = 0;
  std::uint64_t tools_hidden = 0;  // summed over tools/list responses
  // Client messages of a method the relay does not forward (ClassifyClientMethod: kRefused),
  // requests and notifications.
  std::uint64_t methods_refused = 0;
  // Id-less client messages dropped: an id-less tools/call the gate denied (or that was
  // malformed, or over max_checks) and notifications of a refused method.
  std::uint64_t notifications_dropped = 0;
};

class Relay {
 public:
  Relay(boost::asio::io_context& io, RelayGate& gate, RelayOptions options = {});
  // Stops the relay if it still runs (as Stop, but on_end is not called). Destroy it on the
  // io_context's thread, or after the io_context stopped running; `gate` must outlive it.
  ~Relay();
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  // Takes the ends and starts relaying. `on_end` runs once, on the io thread, when the relay has
  // ended (see the file comment) with why and a sentence for people. Fails only when an end
  // cannot be registered with the io_context (e.g. a regular file): the error's text says which.
  // Call once, on the io thread (or before the io_context runs).
  [[nodiscard]] bool Start(RelayEnds ends, std::function<void(RelayEnd, std::string)> on_end,
                           std::string* error = nullptr);
  // Called (on the io thread) when the client closed its input, e.g. to give the server a grace
  // period and then stop it. Call before Start, or on the io thread.
  void SetOnClientClosed(std::function<void()> on_client_closed);
  // Ends the relay now: every end is closed, calls still being checked or in progress are reported
  // (RelayGate::Result with ok false for the forwarded ones), on_end runs with kStopped. On the io
  // thread. Idempotent.
  void Stop();

  [[nodiscard]] RelayStats stats() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

// ---- pieces the relay is made of, exposed for tests and for other transports ----

// The JSON nesting pre-scan is cagent::JsonDepth (common/json_text.h).

// How the relay treats a client -> server message, by its method and whether it has an id (a
// request) or not (a notification).
enum class ClientMethod : std::uint8_t {
  kToolsCall,  // tools/call, with an id or without: decided by RelayGate::Check
  kForwarded,  // an MCP method that runs no tool, in the form the specification gives it
  kRefused,    // anything else: a request gets -32601, a notification is dropped
};
// The explicit list: requests initialize, ping, tools/list, resources/list,
// resources/templates/list, resources/read, resources/subscribe, resources/unsubscribe,
// prompts/list, prompts/get, completion/complete, logging/setLevel, tasks/get, tasks/list,
// tasks/result, tasks/cancel; notifications notifications/initialized, notifications/cancelled,
// notifications/progress, notifications/roots/list_changed, notifications/tasks/status.
ClientMethod ClassifyClientMethod(std::string_view method, bool has_id);

// What a (possibly cut or malformed) line says about itself: the value of its top-level "id" when
// that is a number or a string and can be read from the text, and whether it has a top-level
// "method" key before the text ends. Best effort, for errors about frames that do not parse.
struct FrameHint {
  nlohmann::json id;  // null when not found
  bool has_method = false;
};
FrameHint ScanFrameHint(std::string_view text);

}  // namespace cagent::launcher::mcp
