// libFuzzer target for the HTTP side of `cagent mcp serve --listen`
// (launcher/mcp/protocol/http_screen.h): any local process, and any web page the user's browser
// shows, can send it requests. The bytes are parsed as the transport parses them (Beast's request
// parser, the same head and body limits), then screened: the head (Host, Origin, token), then the
// whole request.
//
// Input: the raw request. Invariants:
//   - a refusal has a status and a JSON-RPC code of the documented ones and a one-line message;
//   - an admitted head named a loopback Host and carried "Bearer <the token>";
//   - a route is what it says: DELETE with a session id; POST initialize request without one
//     (a JSON object, a string or integer id); POST to a session with its id and a JSON-RPC
//     message nested at most max_depth deep.
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "common/json_text.h"
#include "launcher/mcp/protocol/http_screen.h"
#include "launcher/mcp/protocol/http_transport.h"
#include "launcher/mcp/protocol/session.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;
namespace mcp = cagent::launcher::mcp;
namespace http = boost::beast::http;

const mcp::HttpScreenConfig& Config() {
  static const mcp::HttpScreenConfig config{"/mcp", 8123, "127.0.0.1",
                                            "0123456789abcdef0123456789abcdef", 64};
  return config;
}

void CheckRefusal(const mcp::HttpRefusal& r) {
  Check(r.status == 400 || r.status == 401 || r.status == 403 || r.status == 404 ||
        r.status == 405 || r.status == 415);
  Check(r.code == mcp::kTransportError || r.code == mcp::kInvalidRequest ||
        r.code == mcp::kParseError);
  Check(!r.message.empty() && r.message.find('\n') == std::string::npos);
  Check(r.id.is_null() || r.id.is_string() || r.id.is_number_integer());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(64 * 1024);
  parser.eager(true);
  boost::beast::error_code ec;
  const std::size_t used = parser.put(boost::asio::buffer(data, size), ec);
  (void)used;
  if (ec || !parser.is_header_done()) return 0;
  const mcp::HttpRequest& request = parser.get();

  const auto head = mcp::ScreenHttpHead(request, Config());
  if (head) {
    CheckRefusal(*head);
    return 0;
  }
  const auto auth = request.find(http::field::authorization);
  Check(auth != request.end() &&
        mcp::View(auth->value()).find(Config().bearer_token) != std::string_view::npos);
  Check(request.find(http::field::host) != request.end());
  if (!parser.is_done()) return 0;

  const auto screened = mcp::ScreenHttpRequest(request, Config());
  if (const auto* refusal = std::get_if<mcp::HttpRefusal>(&screened)) {
    CheckRefusal(*refusal);
    return 0;
  }
  const auto& route = std::get<mcp::HttpRoute>(screened);
  switch (route.to) {
    case mcp::HttpRoute::To::kDelete:
      Check(request.method() == http::verb::delete_ && !route.session_id.empty());
      break;
    case mcp::HttpRoute::To::kInitialize:
      Check(request.method() == http::verb::post && route.session_id.empty());
      Check(route.kind == mcp::HttpMessageKind::kRequest && route.message.is_object());
      Check(route.message["method"] == "initialize");
      Check(route.message["id"].is_string() || route.message["id"].is_number_integer());
      break;
    case mcp::HttpRoute::To::kSession:
      Check(request.method() == http::verb::post && !route.session_id.empty());
      Check(route.kind != mcp::HttpMessageKind::kInvalid && route.message.is_object());
      Check(cagent::JsonDepth(request.body(), 1000) <= Config().max_depth);
      break;
  }
  return 0;
}
