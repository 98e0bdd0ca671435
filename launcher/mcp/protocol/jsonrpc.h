// JSON-RPC 2.0 framing for MCP: parsing a peer's frame with limits (size, nesting) into a checked
// message, finding the id of a frame too large or too deep to parse, and building the messages
// cagent sends. Pure functions and one small scanner; no I/O, safe on any thread, never throws
// (an allocation failure aside).
//
// The peer is hostile: a frame is refused before it is parsed when it nests deeper than the limit
// (nlohmann's parser is iterative, but destroying and dumping a value are recursive, so a hostile
// "[[[[…" of a few MiB would exhaust the stack), and every field is checked for its type before
// anything reads it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace cagent::launcher::mcp {

// A checked JSON-RPC 2.0 message.
struct RpcMessage {
  enum class Kind : std::uint8_t {
    kRequest,       // method and id
    kNotification,  // method, no id
    kResponse,      // id and result or error (id may be null only in an error response)
  };
  Kind kind = Kind::kNotification;
  nlohmann::json id;      // a string or an integer; null for notifications
  std::string method;     // requests and notifications
  nlohmann::json params;  // an object or an array; null when absent
  bool is_error = false;  // responses: `error` holds {code (integer), message (string), data?}
  nlohmann::json result;  // responses without error
  nlohmann::json error;
};

// Why a frame was refused, and what to answer: a JSON-RPC error `code` (kParseError or
// kInvalidRequest) with `message`, for `id` (null when no id could be read).
struct RpcRefusal {
  int code = 0;
  std::string message;
  // The id to answer the refusal to: that of a request (a message with "method"), else null. A
  // refused response is never answered to its id: the peer's request ids and ours are two
  // separate sequences, so an error to it would reach the peer's own request of that number.
  nlohmann::json id;
  // A refused response's id (the request of ours it meant to answer), else null.
  nlohmann::json answers;
};

struct RpcLimits {
  std::size_t max_bytes = 4U << 20;
  std::size_t max_depth = 64;
};

// `text` as one JSON-RPC 2.0 message: an object with "jsonrpc": "2.0" and the members of a
// request, a notification or a response, the id a string or an integer. A batch (an array) is
// refused like any other non-object (MCP 2025-06-18 removed batching). Invalid JSON → kParseError
// (id null); too large, too deep or not a message → kInvalidRequest (with the id when it can be
// read).
std::variant<RpcMessage, RpcRefusal> ParseRpcMessage(std::string_view text,
                                                     const RpcLimits& limits);

// Whether `id` may be a JSON-RPC id here: a string or an integer (MCP forbids null).
[[nodiscard]] bool IsValidRpcId(const nlohmann::json& id);

// Reads the "id" member of a top-level JSON object from text given piece by piece, without
// keeping the text: for a frame too large to keep (only a prefix is kept, or none) or too deep to
// parse. Keeps O(1) state plus a short copy of the id's text. The id is the value of the last
// top-level "id" member seen whose text was complete, valid and within 128 bytes.
class RpcIdScanner {
 public:
  void Feed(std::string_view chunk);
  // The id found so far: a string or an integer, or nullopt.
  [[nodiscard]] std::optional<nlohmann::json> id() const { return id_; }
  // Whether a top-level "method" member was seen so far: the message is a request (or a
  // notification), not a response.
  [[nodiscard]] bool saw_method() const { return saw_method_; }

 private:
  void EndValue();
  enum class State : std::uint8_t {
    kStart,    // before the top-level '{'
    kKey,      // inside the top-level object, expecting a key (or '}')
    kKeyText,  // inside a top-level key string
    kColon,    // after a key, expecting ':'
    kValue,    // expecting a member's value
    kIdText,   // inside the value of an "id" member
    kSkip,     // inside some other member's value
    kComma,    // after a value, expecting ',' or '}'
    kDone,     // the top-level value ended, or it is not an object
  };
  State state_ = State::kStart;
  std::string key_;        // the current key (up to a few bytes: "id" and "method" matter)
  bool key_long_ = false;  // the current key is longer than "method"
  bool is_id_ = false;     // the current member is "id"
  bool saw_method_ = false;
  std::string value_;  // the id's text so far
  bool value_string_ = false;
  std::size_t depth_ = 0;  // nesting inside a skipped value
  bool in_string_ = false;
  bool escaped_ = false;
  std::optional<nlohmann::json> id_;
};

// The messages cagent sends ("jsonrpc": "2.0" included).
nlohmann::json RpcResult(const nlohmann::json& id, nlohmann::json result);
nlohmann::json RpcError(const nlohmann::json& id, int code, std::string message);
nlohmann::json RpcRequest(const nlohmann::json& id, std::string method, nlohmann::json params);
nlohmann::json RpcNotification(std::string method, nlohmann::json params);

// `text` cut to at most `limit` bytes without splitting a UTF-8 sequence, "…" appended when cut:
// for quoting a peer's string (a method or tool name) in an error message.
std::string QuotedPrefix(std::string_view text, std::size_t limit = 64);

}  // namespace cagent::launcher::mcp
