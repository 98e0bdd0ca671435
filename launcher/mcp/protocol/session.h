// MCP server session: one Model Context Protocol session (JSON-RPC 2.0), transport-neutral and
// policy-agnostic. Runs in cagent (trusted), single-threaded on one boost::asio::io_context.
//
// The client is an MCP client nobody here wrote (Claude Code, Codex, an IDE, the official SDK) and
// is treated as hostile input: every frame is parsed with limits (size, nesting), every field is
// checked before use, a malformed or oversized frame gets a JSON-RPC error (or is dropped when it
// has no usable id) and the session goes on. Nothing here throws out of Receive.
//
// What the session speaks (the MCP revision current in the official SDK, 2025-11-25, and the
// older revisions the SDK still accepts, negotiated in `initialize`):
//   initialize                 protocolVersion negotiation, capabilities {tools, logging?},
//                              serverInfo, instructions; records what the client declared
//                              (elicitation form mode)
//   notifications/initialized  the client is ready
//   ping                       {} result
//   tools/list                 the handler's tools (one page; no cursor needed)
//   tools/call                 to the handler, asynchronously; several may be in progress
//   notifications/cancelled    the named in-progress call's cancel callback runs, and the session
//                              sends no response for it (as the specification says)
//   responses                  to requests the server sent (elicitation/create), routed by id
// Anything else is -32601 method not found; a request before initialize is -32600 (ping is
// allowed); a notification nobody knows is ignored.
//
// The transport (stdio_transport.h, http_transport.h) hands the session each frame's text and
// carries what the session sends. Each outgoing message names the client request it belongs to
// (`related`: the tools/call a progress notification or an elicitation request is for, or the
// request a response answers), so the HTTP transport can put it on that request's response
// stream; on stdio everything goes to stdout in order.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cagent::launcher::mcp {

// JSON-RPC 2.0 error codes used here.
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;

// The protocol revisions the session accepts, newest first; the first is what it offers when the
// client asks for one it does not know.
const std::vector<std::string>& SupportedProtocolVersions();

// One tool as tools/list shows it.
struct ToolDefinition {
  std::string name;
  std::string title;
  std::string description;
  nlohmann::json input_schema;   // a JSON Schema object
  nlohmann::json output_schema;  // a JSON Schema object for structuredContent, or null
  // MCP ToolAnnotations: readOnlyHint, destructiveHint, idempotentHint, openWorldHint (booleans),
  // or null.
  nlohmann::json annotations;
};

// The result of a tools/call: MCP CallToolResult.
struct ToolResult {
  nlohmann::json content = nlohmann::json::array();  // content blocks ({"type":"text","text":…})
  nlohmann::json structured;                         // structuredContent (an object), or null
  bool is_error = false;
  // A result with one text block.
  static ToolResult Text(std::string text, bool is_error = false);
};

// What the client answered to an elicitation/create request.
struct ElicitReply {
  enum class Action : std::uint8_t {
    kAccept,   // the user accepted; `content` holds the form's values
    kDecline,  // the user said no
    kCancel,   // the user dismissed the form
    kFailed,   // no usable answer: the client replied with an error or a malformed result, the
               // session ended, or the call was cancelled before the answer came
  };
  Action action = Action::kFailed;
  nlohmann::json content = nlohmann::json::object();
  std::string error;  // kFailed: why, in words
};

// One tools/call in progress. The session keeps it until Finish or Fail; the handler may keep the
// shared_ptr longer (every method is then a no-op once the call is done or the session ended).
// Only on the io_context's thread.
class ToolCall {
 public:
  virtual ~ToolCall() = default;
  [[nodiscard]] virtual const std::string& name() const = 0;
  [[nodiscard]] virtual const nlohmann::json& arguments() const = 0;  // an object ({} if absent)
  // The JSON-RPC id of the tools/call request (a number or a string).
  [[nodiscard]] virtual const nlohmann::json& request_id() const = 0;
  // notifications/progress for this call when the client gave a progressToken (progress must
  // increase from one notification to the next; a smaller or equal value is not sent); no-op
  // otherwise.
  virtual void Progress(double progress, std::optional<double> total, std::string message) = 0;
  // Whether the client declared the elicitation capability (form mode) in initialize.
  [[nodiscard]] virtual bool CanElicit() const = 0;
  // Sends elicitation/create {mode "form" (when the negotiated revision has modes), message,
  // requestedSchema} related to this call; `done` runs exactly once with the client's answer
  // (kFailed when CanElicit() is false, the call was cancelled or finished, or the session
  // ended first).
  virtual void Elicit(std::string message, nlohmann::json requested_schema,
                      std::function<void(ElicitReply)> done) = 0;
  // The response: a CallToolResult. Once; later Finish/Fail calls are ignored.
  virtual void Finish(ToolResult result) = 0;
  // The response: a JSON-RPC error (unknown tool, invalid arguments, the session is ending).
  virtual void Fail(int code, std::string message) = 0;
  // Runs (once) when the client cancels this call (notifications/cancelled) or the session ends
  // while it is in progress; the response is then not sent.
  virtual void OnCancel(std::function<void(std::string reason)> cancelled) = 0;
  [[nodiscard]] virtual bool done() const = 0;
};

// What the session serves. Called on the io_context's thread.
class ToolHandler {
 public:
  virtual ~ToolHandler() = default;
  // For tools/list, and once before the first tools/call when the client has not listed yet
  // (the names a tools/call may use are those of the last list: the set is taken to be fixed
  // for the session, as the capability listChanged: false says).
  virtual std::vector<ToolDefinition> ListTools() = 0;
  // A tools/call for a tool ListTools() named (others are answered by the session itself:
  // a CallToolResult with isError naming the unknown tool). The handler answers through `call`.
  virtual void Call(std::shared_ptr<ToolCall> call) = 0;
};

struct SessionOptions {
  std::string server_name = "cagent";
  std::string server_version;
  std::string instructions;  // initialize's "instructions" ("" = none)
  // A frame (one JSON-RPC message) larger than this is refused (-32600, or dropped without a
  // usable id) without ending the session.
  std::size_t max_frame_bytes = 4U << 20;
  std::size_t max_depth = 64;  // JSON nesting of a frame
  // Calls in progress at once; one more is answered -32603 "too many calls in progress".
  std::size_t max_calls_in_progress = 16;
};

// One message the session sends. `related` is the id of the client request it belongs to, or
// null (a message for the session's general stream). `final` marks the response to `related`
// (its stream, over HTTP, ends with it). A refusal of a frame whose id could not be read (invalid
// JSON, a batch, a bad id) is an error response with id null, sent with `related` null and
// `final` false.
struct Outgoing {
  nlohmann::json message;
  nlohmann::json related;
  bool final = false;
};

class Session {
 public:
  // `send` carries each outgoing message (called on the io thread, never re-entrantly from
  // Receive's caller's point of view: it may be called from inside Receive).
  // `io` is used to post callbacks that must not run inside the caller's own call (an
  // elicitation that cannot be sent, an OnCancel registered after the cancellation).
  Session(boost::asio::io_context& io, ToolHandler& handler, SessionOptions options,
          std::function<void(Outgoing)> send);
  // Sends nothing and runs no callback (End first for a clean end); ToolCalls the handler still
  // holds become no-ops (done() is true). Callbacks the session runs must not destroy it.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // One frame's text (a JSON-RPC message) from the client. `too_large` = the transport cut the
  // frame because it exceeded max_frame_bytes (the text is then its first bytes, for the id and
  // whether it has a "method"; ReceiveOversized).
  void Receive(std::string_view frame, bool too_large = false);
  // Ends the session: every call in progress gets the JSON-RPC error (code, message) unless it
  // is already done, pending elicitations complete kFailed, and later frames are answered with
  // that error (requests) or ignored. Idempotent.
  void End(int code, std::string message);
  // A frame the transport dropped unkept because it exceeded max_frame_bytes, its id read on the
  // way by (RpcIdScanner, jsonrpc.h) so that an id after a huge "params" is found too: `id` is
  // that id, or null; `request` = the scanner saw a "method" member. Answered as
  // Receive(prefix, true) is: -32600 "message exceeds N bytes" to the id, dropped when there is
  // none. A message with no "method" is a response (the client's answer to our elicitation): the
  // elicitation with that id fails and the refusal goes to no id (never to the id: the client's
  // request ids and ours are separate sequences). Receive(prefix, true) judges by the prefix.
  void ReceiveOversized(const nlohmann::json& id, bool request = true);
  // Optional: runs with a client request's id when that request, accepted by the session, will
  // get no response after all (the client cancelled it: notifications/cancelled), so a transport
  // can close what it keeps open for it (an HTTP response stream). Never runs for a request that
  // got its final Outgoing.
  void set_on_abandoned(std::function<void(const nlohmann::json& request_id)> abandoned);
  // Optional: runs (posted, on the io thread) whenever no call is in progress any more — after
  // the last one finishes or is cancelled, and once after it is set if none is in progress then.
  void set_on_idle(std::function<void()> idle);

  [[nodiscard]] bool initialized() const;  // initialize answered and notifications/initialized
  [[nodiscard]] bool ended() const;
  // The revision negotiated in initialize ("" before it).
  [[nodiscard]] const std::string& protocol_version() const;
  // The client's name and version from initialize ("" before it).
  [[nodiscard]] const std::string& client_name() const;
  [[nodiscard]] const std::string& client_version() const;
  [[nodiscard]] std::size_t calls_in_progress() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cagent::launcher::mcp
