#include "launcher/mcp/protocol/http_screen.h"

#include <algorithm>
#include <cctype>

#include "common/json_text.h"
#include "launcher/mcp/protocol/http_transport.h"
#include "launcher/mcp/protocol/session.h"

namespace cagent::launcher::mcp {
namespace {

namespace http = boost::beast::http;
using nlohmann::json;

// Whether `given` equals `expected`, in time that depends on expected's length only (no early
// exit at the first differing byte: a local process must not learn the token byte by byte).
bool ConstantTimeEqual(std::string_view given, std::string_view expected) {
  unsigned diff = given.size() == expected.size() ? 0U : 1U;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0U;
    diff |= static_cast<unsigned>(g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0U;
}

// host[:port] of a Host header or an Origin: "[::1]:8080" → ("[::1]", "8080"). nullopt when it
// is not of that shape (two colons outside brackets, junk after ']').
struct HostPort {
  std::string host;  // lowercased, IPv6 literals with their brackets
  std::optional<std::string> port;
};
std::optional<HostPort> SplitHostPort(std::string_view text) {
  HostPort out;
  std::string_view rest;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return std::nullopt;
    }
    out.host = LowerAscii(text.substr(0, close + 1));
    rest = text.substr(close + 1);
  } else {
    const std::size_t colon = text.find(':');
    out.host = LowerAscii(text.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon);
  }
  if (!rest.empty()) {
    if (rest.front() != ':' || rest.size() < 2 || rest.size() > 6) {
      return std::nullopt;
    }
    rest.remove_prefix(1);
    if (!std::all_of(rest.begin(), rest.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
      return std::nullopt;
    }
    out.port = std::string(rest);
  }
  if (out.host.empty()) {
    return std::nullopt;
  }
  return out;
}

bool HostAllowed(std::string_view host, const HttpScreenConfig& config) {
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]" ||
         host == config.host_literal;
}

bool OriginAllowed(std::string_view origin, const HttpScreenConfig& config) {
  std::string_view rest = origin;
  std::string_view default_port;
  if (rest.substr(0, 7) == "http://") {
    rest.remove_prefix(7);
    default_port = "80";
  } else if (rest.substr(0, 8) == "https://") {
    rest.remove_prefix(8);
    default_port = "443";
  } else {
    return false;  // "null" (a sandboxed frame, a file: page) or another scheme
  }
  const std::optional<HostPort> hp = SplitHostPort(rest);
  if (!hp || !HostAllowed(hp->host, config)) {
    return false;
  }
  return hp->port.value_or(std::string(default_port)) == std::to_string(config.port);
}

HttpRefusal Refusal(int status, int code, std::string message, json id = nullptr,
                    HttpHeaders headers = {}) {
  return HttpRefusal{status, code, std::move(message), std::move(id), std::move(headers)};
}

}  // namespace

std::string LowerAscii(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::string_view TrimOws(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

std::optional<HttpRefusal> ScreenHttpHead(const HttpRequest& head, const HttpScreenConfig& config) {
  // DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends Host: evil.example.
  const auto host_field = head.find(http::field::host);
  if (host_field == head.end()) {
    return Refusal(400, kTransportError, "the request has no Host header");
  }
  const std::optional<HostPort> host = SplitHostPort(TrimOws(View(host_field->value())));
  if (!host || !HostAllowed(host->host, config) ||
      (host->port && *host->port != std::to_string(config.port))) {
    return Refusal(403, kTransportError,
                   "forbidden Host header: this server answers only to 127.0.0.1, localhost or "
                   "[::1] on port " +
                       std::to_string(config.port));
  }
  const auto origin = head.find(http::field::origin);
  if (origin != head.end() && !OriginAllowed(TrimOws(View(origin->value())), config)) {
    return Refusal(403, kTransportError,
                   "forbidden Origin: only pages of this server's own loopback origin may call it");
  }
  const auto auth = head.find(http::field::authorization);
  bool authorized = false;
  if (auth != head.end()) {
    const std::string_view value = TrimOws(View(auth->value()));
    const std::size_t space = value.find(' ');
    if (space != std::string_view::npos && LowerAscii(value.substr(0, space)) == "bearer") {
      authorized = ConstantTimeEqual(TrimOws(value.substr(space + 1)), config.bearer_token);
    }
  }
  if (!authorized) {
    return Refusal(
        401, kTransportError,
        "unauthorized: send the bearer token cagent printed (Authorization: Bearer <token>)",
        nullptr, {{"WWW-Authenticate", "Bearer"}});
  }
  return std::nullopt;
}

HttpMessageKind ClassifyHttpMessage(const json& message) {
  if (!message.is_object()) {
    return HttpMessageKind::kInvalid;
  }
  const auto method = message.find("method");
  const auto id = message.find("id");
  const bool id_ok = id != message.end() && (id->is_string() || id->is_number_integer());
  if (method != message.end()) {
    if (!method->is_string()) {
      return HttpMessageKind::kInvalid;
    }
    if (id == message.end()) {
      return HttpMessageKind::kNotification;
    }
    return id_ok ? HttpMessageKind::kRequest : HttpMessageKind::kInvalid;
  }
  if (id != message.end() && (message.contains("result") || message.contains("error"))) {
    return HttpMessageKind::kResponse;
  }
  return HttpMessageKind::kInvalid;
}

std::variant<HttpRoute, HttpRefusal> ScreenHttpRequest(const HttpRequest& request,
                                                       const HttpScreenConfig& config) {
  const std::string_view target = View(request.target());
  if (target.substr(0, target.find('?')) != config.path) {
    return Refusal(404, kTransportError, "no such endpoint; the MCP endpoint is " + config.path);
  }
  HttpRoute route;
  route.session_id = std::string(TrimOws(View(request["Mcp-Session-Id"])));
  if (request.method() == http::verb::delete_) {
    if (route.session_id.empty()) {
      return Refusal(400, kTransportError, "Mcp-Session-Id header is required");
    }
    route.to = HttpRoute::To::kDelete;
    return route;
  }
  if (request.method() != http::verb::post) {
    // GET included: this server opens no server-initiated stream (the spec allows 405).
    return Refusal(405, kTransportError,
                   "method not allowed; use POST (or DELETE to end a session)", nullptr,
                   {{"Allow", "POST, DELETE"}});
  }
  const std::string_view content_type = View(request[http::field::content_type]);
  if (LowerAscii(TrimOws(content_type.substr(0, content_type.find(';')))) != "application/json") {
    return Refusal(415, kTransportError, "Content-Type must be application/json");
  }
  const std::string& body = request.body();
  if (JsonDepth(body, config.max_depth) > config.max_depth) {
    return Refusal(400, kInvalidRequest,
                   "the message nests deeper than " + std::to_string(config.max_depth));
  }
  route.message = ParseJsonText(body);
  if (route.message.is_discarded()) {
    return Refusal(400, kParseError, "parse error: the body is not JSON");
  }
  if (route.message.is_array()) {
    return Refusal(400, kInvalidRequest, "JSON-RPC batches are not supported; send one message");
  }
  route.kind = ClassifyHttpMessage(route.message);
  if (route.kind == HttpMessageKind::kInvalid) {
    return Refusal(400, kInvalidRequest, "not a JSON-RPC request, notification or response");
  }
  if (route.session_id.empty()) {
    if (route.kind == HttpMessageKind::kRequest && route.message["method"] == "initialize") {
      route.to = HttpRoute::To::kInitialize;
      return route;
    }
    return Refusal(400, kTransportError, "Mcp-Session-Id header is required (initialize first)",
                   route.kind == HttpMessageKind::kRequest ? route.message["id"] : json(nullptr));
  }
  route.to = HttpRoute::To::kSession;
  return route;
}

}  // namespace cagent::launcher::mcp
