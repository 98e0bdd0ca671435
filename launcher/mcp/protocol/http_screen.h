// The checks of `cagent mcp serve --listen` (http_transport.h lists them and their order) that
// depend only on the request and the server's settings: Host, Origin and the bearer token on a
// request's head, then the endpoint, the method, the content type and the JSON-RPC message of the
// whole request. Pure: the transport applies the verdict (a refusal to send, or where the request
// goes); the mcp_http fuzz target feeds it requests parsed from raw bytes.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace cagent::launcher::mcp {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpScreenConfig {
  std::string path;  // the endpoint, "/mcp"
  std::uint16_t port = 0;
  std::string host_literal;  // the bound address as a Host names it: "127.0.0.1", "[::1]"
  std::string bearer_token;
  std::size_t max_depth = 64;  // of a POSTed message
};

// An answer that ends the request: an HTTP status with a JSON-RPC error body (`code`, `message`,
// for `id`: null unless the request's id is known) and extra headers.
struct HttpRefusal {
  int status = 0;
  int code = 0;
  std::string message;
  nlohmann::json id = nullptr;
  HttpHeaders headers;
};

// Host (a loopback name, this port if any), Origin (when present: this server's own origin) and
// Authorization (Bearer and the token, compared in constant time), in that order. nullopt: the
// head is admitted.
[[nodiscard]] std::optional<HttpRefusal> ScreenHttpHead(const HttpRequest& head,
                                                        const HttpScreenConfig& config);

// What a POSTed message is (JSON-RPC 2.0): a request has a string method and a string or integer
// id; a notification a method and no id; a response an id and a result or an error.
enum class HttpMessageKind : std::uint8_t { kRequest, kNotification, kResponse, kInvalid };
[[nodiscard]] HttpMessageKind ClassifyHttpMessage(const nlohmann::json& message);

// Where an admitted, complete request goes.
struct HttpRoute {
  enum class To : std::uint8_t {
    kDelete,      // DELETE: end session `session_id`
    kInitialize,  // POST of an initialize request without a session id: make a session
    kSession,     // POST to session `session_id`
  };
  To to = To::kSession;
  std::string session_id;
  HttpMessageKind kind = HttpMessageKind::kInvalid;  // POST
  nlohmann::json message;                            // POST: the parsed message
};

// The endpoint path (404), the method (POST or DELETE, else 405), DELETE's session id (400),
// POST's Content-Type (415), the body's nesting (400), JSON (400, parse error), no batch (400),
// a JSON-RPC message (400), and a session id unless it is an initialize request (400).
[[nodiscard]] std::variant<HttpRoute, HttpRefusal> ScreenHttpRequest(
    const HttpRequest& request, const HttpScreenConfig& config);

// Small text helpers the transport shares: ASCII lowercase, without surrounding spaces and tabs,
// and a Beast string as a std::string_view.
[[nodiscard]] std::string LowerAscii(std::string_view text);
[[nodiscard]] std::string_view TrimOws(std::string_view text);
[[nodiscard]] inline std::string_view View(boost::beast::string_view text) {
  return {text.data(), text.size()};
}

}  // namespace cagent::launcher::mcp
