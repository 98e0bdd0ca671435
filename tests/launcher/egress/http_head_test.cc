#include "launcher/egress/http_head.h"

#include <gtest/gtest.h>

#include <string>

#include "launcher/egress/proxy.h"

namespace cagent::launcher::egress {
namespace {

using Status = HttpHeadParse::Status;

TEST(HttpHeadTest, Connect) {
  const auto p =
      ParseHttpHead("CONNECT pkgs.test:443 HTTP/1.1\r\nHost: pkgs.test:443\r\n\r\nTLS", 16384);
  ASSERT_EQ(p.status, Status::kComplete) << p.error;
  EXPECT_EQ(p.head.method, "CONNECT");
  EXPECT_EQ(p.head.target, "pkgs.test:443");
  EXPECT_EQ(p.head.version, "HTTP/1.1");
  ASSERT_EQ(p.head.headers.size(), 1U);
  EXPECT_EQ(p.head.headers[0].name, "Host");
  EXPECT_EQ(p.head.headers[0].value, "pkgs.test:443");
  EXPECT_EQ(p.head.size,
            std::string("CONNECT pkgs.test:443 HTTP/1.1\r\nHost: pkgs.test:443\r\n\r\n").size());
}

TEST(HttpHeadTest, IncompleteUntilTheEmptyLine) {
  const std::string head = "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n";
  for (std::size_t n = 0; n < head.size(); ++n) {
    EXPECT_EQ(ParseHttpHead(head.substr(0, n), 16384).status, Status::kIncomplete) << n;
  }
  EXPECT_EQ(ParseHttpHead(head, 16384).status, Status::kComplete);
}

TEST(HttpHeadTest, Malformed) {
  for (const char* bad : {
           "GET  / HTTP/1.1\r\n\r\n",                    // two spaces
           "GET /\r\n\r\n",                              // no version
           "GET / HTTP/2.0\r\n\r\n",                     // not 1.x
           "G(T / HTTP/1.1\r\n\r\n",                     // not a token
           "GET / HTTP/1.1\r\nNoColon\r\n\r\n",          // not NAME: VALUE
           "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",  // obs-fold
           "GET / HTTP/1.1\r\nA: b\nB: c\r\n\r\n",       // bare LF
           "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n",         // control byte
           "GET / HTTP/1.1\r\nBad Name: b\r\n\r\n",      // space in the name
           "\r\n\r\n",                                   // empty
       }) {
    const auto p = ParseHttpHead(bad, 16384);
    EXPECT_EQ(p.status, Status::kMalformed) << bad;
    EXPECT_FALSE(p.error.empty());
  }
}

TEST(HttpHeadTest, Oversized) {
  const std::string big = "GET / HTTP/1.1\r\nX: " + std::string(20000, 'a');
  const auto p = ParseHttpHead(big, 16384);
  EXPECT_EQ(p.status, Status::kTooLarge);
  EXPECT_EQ(p.error, "the request head is longer than 16384 bytes");
  // Complete but over the limit is too large as well; at the limit it is fine.
  const std::string whole = "GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n";
  EXPECT_EQ(ParseHttpHead(whole, whole.size() - 1).status, Status::kTooLarge);
  EXPECT_EQ(ParseHttpHead(whole, whole.size()).status, Status::kComplete);
}

TEST(HttpHeadTest, NormalizeHost) {
  EXPECT_EQ(NormalizeHost("PyPI.Org."), "pypi.org");
  EXPECT_EQ(NormalizeHost("a_b-c.test"),
            std::nullopt);  // the policy's grammar (common/host_name.h)
  EXPECT_EQ(NormalizeHost("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(NormalizeHost("::FFFF:127.0.0.1"), "::ffff:127.0.0.1");
  EXPECT_EQ(NormalizeHost("0:0::1"), "::1");
  EXPECT_EQ(NormalizeHost(""), std::nullopt);
  EXPECT_EQ(NormalizeHost("."), std::nullopt);
  EXPECT_EQ(NormalizeHost("a..b"), std::nullopt);
  EXPECT_EQ(NormalizeHost("a b"), std::nullopt);
  EXPECT_EQ(NormalizeHost("a/b"), std::nullopt);
  EXPECT_EQ(NormalizeHost(std::string(64, 'a') + ".test"), std::nullopt);
  EXPECT_EQ(NormalizeHost("fe80::1%eth0"), std::nullopt);
  // Issue #33, found by fuzzing: a zone index that names no interface is scope id 0, and
  // make_address stops reading at a NUL.
  EXPECT_EQ(NormalizeHost("fe80::1%0"), std::nullopt);
  EXPECT_EQ(NormalizeHost("fe80::1%nosuchif"), std::nullopt);
  EXPECT_EQ(NormalizeHost(std::string_view("1.2.3.4\0evil", 12)), std::nullopt);
  EXPECT_EQ(NormalizeHost(std::string_view("::1\0", 4)), std::nullopt);
  EXPECT_EQ(ParseAuthority("[fe80::1%0]:443", 0), std::nullopt);
}

TEST(HttpHeadTest, Authority) {
  auto a = ParseAuthority("Pkgs.Test:8080", 0);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "pkgs.test");
  EXPECT_EQ(a->port, 8080);
  a = ParseAuthority("[::1]:443", 0);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 443);
  a = ParseAuthority("h.test", 80);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->port, 80);
  EXPECT_FALSE(ParseAuthority("h.test", 0));  // CONNECT needs a port
  EXPECT_FALSE(ParseAuthority("h.test:0", 0));
  EXPECT_FALSE(ParseAuthority("h.test:65536", 0));
  EXPECT_FALSE(ParseAuthority("h.test:+80", 0));
  EXPECT_FALSE(ParseAuthority("h.test:", 0));
  EXPECT_FALSE(ParseAuthority("::1:443", 0));       // IPv6 needs brackets
  EXPECT_FALSE(ParseAuthority("[h.test]:443", 0));  // brackets are for IPv6
  EXPECT_FALSE(ParseAuthority("user@h.test:443", 0));
}

TEST(HttpHeadTest, AbsoluteUrl) {
  auto u = ParseHttpUrl("HTTP://Pkgs.Test:8080/simple/x/?a=1#frag");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->authority.host, "pkgs.test");
  EXPECT_EQ(u->authority.port, 8080);
  EXPECT_EQ(u->authority_text, "Pkgs.Test:8080");
  EXPECT_EQ(u->path, "/simple/x/?a=1");
  u = ParseHttpUrl("http://h.test");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->authority.port, 80);
  EXPECT_EQ(u->path, "/");
  u = ParseHttpUrl("http://h.test?q");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->path, "/?q");
  EXPECT_FALSE(ParseHttpUrl("/origin/form"));
  EXPECT_FALSE(ParseHttpUrl("https://h.test/"));
  EXPECT_FALSE(ParseHttpUrl("http://u:p@h.test/"));
  EXPECT_FALSE(ParseHttpUrl("http:///x"));
}

TEST(HttpHeadTest, OriginFormDropsHopByHopAndProxyHeaders) {
  const auto p = ParseHttpHead(
      "POST http://h.test:81/up?x HTTP/1.1\r\nHost: wrong.test\r\nProxy-Authorization: Basic "
      "eA==\r\n"
      "Proxy-Connection: keep-alive\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n"
      "Content-Length: 3\r\nAccept: */*\r\n\r\n",
      16384);
  ASSERT_EQ(p.status, Status::kComplete) << p.error;
  const auto u = ParseHttpUrl(p.head.target);
  ASSERT_TRUE(u);
  EXPECT_EQ(OriginFormHead(p.head, *u),
            "POST /up?x HTTP/1.1\r\nHost: h.test:81\r\nContent-Length: 3\r\nAccept: */*\r\n"
            "Connection: close\r\n\r\n");
}

// The response head the client gets says the connection closes: without it an HTTP/1.1 client
// keeps the connection for its next request, which the proxy (one exchange per connection) then
// drops: npm's "socket hang up" in the e2e suite.
TEST(ResponseHeadTest, AKeepAliveResponseIsRewrittenToClose) {
  const std::string body = "0123456789";
  const std::string in =
      "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: keep-alive, X-Hop\r\n"
      "Keep-Alive: timeout=5\r\nX-Hop: 1\r\nproxy-connection: keep-alive\r\n"
      "ETag: \"a\"\r\n\r\n";
  const ResponseHead r = RewriteResponseHead(in + body, 65536);
  ASSERT_EQ(r.status, ResponseHead::Status::kRewritten);
  EXPECT_EQ(r.size, in.size());
  EXPECT_EQ(r.head,
            "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nETag: \"a\"\r\nConnection: close\r\n\r\n");
  // A response that says nothing about the connection (Python's http.server, the e2e fixture).
  const ResponseHead plain = RewriteResponseHead("HTTP/1.1 404 Not Found\r\n\r\n", 65536);
  ASSERT_EQ(plain.status, ResponseHead::Status::kRewritten);
  EXPECT_EQ(plain.head, "HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n");
  // No reason phrase; HTTP/1.0.
  EXPECT_EQ(RewriteResponseHead("HTTP/1.0 204\r\n\r\n", 100).head,
            "HTTP/1.0 204\r\nConnection: close\r\n\r\n");
}

TEST(ResponseHeadTest, InterimIncompleteAndPassThrough) {
  const ResponseHead cont = RewriteResponseHead("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 2", 100);
  EXPECT_EQ(cont.status, ResponseHead::Status::kInterim);
  EXPECT_EQ(cont.size, 25U);
  EXPECT_EQ(RewriteResponseHead("HTTP/1.1 101 Switching Protocols\r\n\r\n", 100).status,
            ResponseHead::Status::kPassThrough);
  // Byte by byte, every prefix of a head is incomplete, never passed through.
  const std::string head = "HTTP/1.1 200 OK\r\nA: b\r\n\r\n";
  for (std::size_t i = 0; i < head.size(); ++i) {
    EXPECT_EQ(RewriteResponseHead(head.substr(0, i), 100).status, ResponseHead::Status::kIncomplete)
        << i;
  }
  // Not an HTTP/1.x status line: known from the first bytes that differ.
  EXPECT_EQ(RewriteResponseHead("SSH-2.0", 100).status, ResponseHead::Status::kPassThrough);
  EXPECT_EQ(RewriteResponseHead("HTTP/2", 100).status, ResponseHead::Status::kPassThrough);
  EXPECT_EQ(RewriteResponseHead("HTTP/1.1 2x0 OK\r\n\r\n", 100).status,
            ResponseHead::Status::kPassThrough);
  EXPECT_EQ(RewriteResponseHead("HTTP/1.1 2000\r\n\r\n", 100).status,
            ResponseHead::Status::kPassThrough);
  // A head longer than the limit: passed through as it is, not held.
  const std::string big = "HTTP/1.1 200 OK\r\nX: " + std::string(200, 'x') + "\r\n\r\n";
  EXPECT_EQ(RewriteResponseHead(big, 100).status, ResponseHead::Status::kPassThrough);
  EXPECT_EQ(RewriteResponseHead(big.substr(0, 99), 100).status, ResponseHead::Status::kIncomplete);
  EXPECT_EQ(RewriteResponseHead(big, big.size()).status, ResponseHead::Status::kRewritten);
}

TEST(ResolveOverrideTest, Good) {
  auto o = ParseResolveOverride("Pkgs.Test:8080:127.0.0.2");
  ASSERT_TRUE(o.ok()) << o.error().Message();
  EXPECT_EQ(o->host, "pkgs.test");
  EXPECT_EQ(o->port, 8080);
  EXPECT_EQ(o->address, "127.0.0.2");
  o = ParseResolveOverride("h:443:[::1]");
  ASSERT_TRUE(o.ok()) << o.error().Message();
  EXPECT_EQ(o->host, "h");
  EXPECT_EQ(o->address, "::1");
  o = ParseResolveOverride("h:443:::1");
  ASSERT_TRUE(o.ok()) << o.error().Message();
  EXPECT_EQ(o->address, "::1");
}

TEST(ResolveOverrideTest, Bad) {
  for (const char* bad : {"h", "h:443", "h:443:", "h:0:127.0.0.1", "h:x:127.0.0.1",
                          "h:70000:127.0.0.1", ":443:127.0.0.1", "h h:443:127.0.0.1",
                          "h:443:not-an-ip", "h:443:[::1", "h:443:fe80::1%lo"}) {
    const auto o = ParseResolveOverride(bad);
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.error().code, Error::Code::kInvalidInput) << bad;
    EXPECT_NE(o.error().Message().find("expected HOST:PORT:ADDRESS"), std::string::npos)
        << o.error().Message();
  }
}

}  // namespace
}  // namespace cagent::launcher::egress
