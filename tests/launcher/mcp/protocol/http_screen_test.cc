// The MCP HTTP transport's screening as pure functions (launcher/mcp/protocol/http_screen.h), over
// requests parsed from raw bytes the way the transport parses them. The transport's own tests
// (http_transport_test.cc) show the same answers on the wire.
#include "launcher/mcp/protocol/http_screen.h"

#include <gtest/gtest.h>

#include <boost/beast/http/parser.hpp>
#include <string>
#include <variant>

#include "launcher/mcp/protocol/http_transport.h"
#include "launcher/mcp/protocol/session.h"

namespace cagent::launcher::mcp {
namespace {

namespace http = boost::beast::http;

constexpr const char* kToken = "0123456789abcdef0123456789abcdef";

HttpScreenConfig Config() { return {"/mcp", 8123, "127.0.0.2", kToken, 64}; }

HttpRequest Parse(const std::string& raw) {
  http::request_parser<http::string_body> parser;
  parser.eager(true);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(raw), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(parser.is_done());
  return parser.release();
}

std::string Post(const std::string& headers, const std::string& body) {
  return "POST /mcp HTTP/1.1\r\n" + headers + "Content-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

const std::string kAuth = std::string("Authorization: Bearer ") + kToken + "\r\n";

TEST(HttpScreenTest, TheHeadNeedsALoopbackHostItsOwnOriginAndTheToken) {
  EXPECT_FALSE(ScreenHttpHead(Parse(Post("Host: 127.0.0.1:8123\r\n" + kAuth, "{}")), Config()));
  EXPECT_FALSE(ScreenHttpHead(Parse(Post("Host: 127.0.0.2\r\n" + kAuth, "{}")), Config()));
  EXPECT_FALSE(ScreenHttpHead(
      Parse(Post("Host: [::1]:8123\r\nOrigin: http://localhost:8123\r\n" + kAuth, "{}")),
      Config()));
  const auto no_host = ScreenHttpHead(Parse("GET /mcp HTTP/1.0\r\n" + kAuth + "\r\n"), Config());
  ASSERT_TRUE(no_host);
  EXPECT_EQ(no_host->status, 400);
  const auto rebinding =
      ScreenHttpHead(Parse(Post("Host: evil.example\r\n" + kAuth, "{}")), Config());
  ASSERT_TRUE(rebinding);
  EXPECT_EQ(rebinding->status, 403);
  const auto other_port =
      ScreenHttpHead(Parse(Post("Host: 127.0.0.1:8124\r\n" + kAuth, "{}")), Config());
  ASSERT_TRUE(other_port);
  EXPECT_EQ(other_port->status, 403);
  const auto origin = ScreenHttpHead(
      Parse(Post("Host: 127.0.0.1\r\nOrigin: https://evil.example\r\n" + kAuth, "{}")), Config());
  ASSERT_TRUE(origin);
  EXPECT_EQ(origin->status, 403);
  const auto token = ScreenHttpHead(
      Parse(Post("Host: 127.0.0.1\r\nAuthorization: Bearer 0123456789abcdef\r\n", "{}")), Config());
  ASSERT_TRUE(token);
  EXPECT_EQ(token->status, 401);
  ASSERT_EQ(token->headers.size(), 1U);
  EXPECT_EQ(token->headers[0].first, "WWW-Authenticate");
}

TEST(HttpScreenTest, RequestsAreRoutedOrRefusedWithTheDocumentedStatus) {
  const std::string json = "Host: 127.0.0.1\r\n" + kAuth + "Content-Type: application/json\r\n";
  const auto init = ScreenHttpRequest(
      Parse(Post(json, R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})")), Config());
  ASSERT_TRUE(std::holds_alternative<HttpRoute>(init));
  EXPECT_EQ(std::get<HttpRoute>(init).to, HttpRoute::To::kInitialize);
  const auto call = ScreenHttpRequest(
      Parse(Post(json + "Mcp-Session-Id: s1\r\n",
                 R"({"jsonrpc":"2.0","id":"a","method":"tools/call","params":{}})")),
      Config());
  ASSERT_TRUE(std::holds_alternative<HttpRoute>(call));
  EXPECT_EQ(std::get<HttpRoute>(call).to, HttpRoute::To::kSession);
  EXPECT_EQ(std::get<HttpRoute>(call).session_id, "s1");
  EXPECT_EQ(std::get<HttpRoute>(call).kind, HttpMessageKind::kRequest);
  const auto del = ScreenHttpRequest(
      Parse("DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + kAuth + "Mcp-Session-Id: s1\r\n\r\n"),
      Config());
  ASSERT_TRUE(std::holds_alternative<HttpRoute>(del));
  EXPECT_EQ(std::get<HttpRoute>(del).to, HttpRoute::To::kDelete);

  const auto status = [](const std::variant<HttpRoute, HttpRefusal>& v) {
    return std::holds_alternative<HttpRefusal>(v) ? std::get<HttpRefusal>(v).status : 0;
  };
  EXPECT_EQ(
      status(ScreenHttpRequest(
          Parse("POST /other HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"), Config())),
      404);
  EXPECT_EQ(
      status(ScreenHttpRequest(Parse("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), Config())),
      405);
  EXPECT_EQ(
      status(ScreenHttpRequest(Parse("DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), Config())),
      400);
  EXPECT_EQ(status(ScreenHttpRequest(
                Parse(Post("Host: 127.0.0.1\r\nContent-Type: text/plain\r\n", "{}")), Config())),
            415);
  EXPECT_EQ(status(ScreenHttpRequest(Parse(Post(json, std::string(70, '[') + std::string(70, ']'))),
                                     Config())),
            400);
  EXPECT_EQ(status(ScreenHttpRequest(Parse(Post(json, "{")), Config())), 400);
  EXPECT_EQ(status(ScreenHttpRequest(Parse(Post(json, "[{}]")), Config())), 400);
  EXPECT_EQ(status(ScreenHttpRequest(Parse(Post(json, R"({"jsonrpc":"2.0"})")), Config())), 400);
  // Not initialize and no session id: refused with the request's id.
  const auto no_session = ScreenHttpRequest(
      Parse(Post(json, R"({"jsonrpc":"2.0","id":7,"method":"tools/list"})")), Config());
  ASSERT_TRUE(std::holds_alternative<HttpRefusal>(no_session));
  EXPECT_EQ(std::get<HttpRefusal>(no_session).status, 400);
  EXPECT_EQ(std::get<HttpRefusal>(no_session).id, 7);
  // A NUL after a valid message (nlohmann alone would take the message and ignore the rest).
  const std::string nul = std::string(R"({"jsonrpc":"2.0","id":1,"method":"initialize"})") + '\0';
  const auto with_nul = ScreenHttpRequest(Parse(Post(json, nul)), Config());
  ASSERT_TRUE(std::holds_alternative<HttpRefusal>(with_nul));
  EXPECT_EQ(std::get<HttpRefusal>(with_nul).code, kParseError);
}

}  // namespace
}  // namespace cagent::launcher::mcp
