#include "launcher/model/http_client.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <optional>
#include <string>

#include "tests/launcher/model/fake_provider_util.h"

namespace cagent::launcher::model {
namespace {

using cagent::testing::FakeProvider;
using cagent::testing::FakeReply;
using cagent::testing::MakeTestPki;
using cagent::testing::TestPki;

TEST(ParseUrl, HttpsDefaultsToPort443AndDropsTrailingSlash) {
  auto url = ParseUrl("https://api.openai.com/v1/");
  ASSERT_TRUE(url.ok()) << url.error().Message();
  EXPECT_TRUE(url->tls);
  EXPECT_EQ(url->host, "api.openai.com");
  EXPECT_EQ(url->port, "443");
  EXPECT_EQ(url->path, "/v1");
  EXPECT_EQ(url->ToString(), "https://api.openai.com/v1");
  EXPECT_EQ(url->HostHeader(), "api.openai.com");
  EXPECT_FALSE(url->IsLoopbackHttp());
}

TEST(ParseUrl, HttpWithPortAndIpv6) {
  auto url = ParseUrl("HTTP://127.0.0.1:11434/v1");
  ASSERT_TRUE(url.ok());
  EXPECT_FALSE(url->tls);
  EXPECT_EQ(url->port, "11434");
  EXPECT_EQ(url->HostHeader(), "127.0.0.1:11434");
  EXPECT_TRUE(url->IsLoopbackHttp());
  auto v6 = ParseUrl("http://[::1]:8080");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->path, "");
  EXPECT_EQ(v6->ToString(), "http://[::1]:8080");
  EXPECT_TRUE(v6->IsLoopbackHttp());
  EXPECT_TRUE(ParseUrl("http://localhost:1234")->IsLoopbackHttp());
  EXPECT_FALSE(ParseUrl("https://localhost:1234")->IsLoopbackHttp());
  EXPECT_FALSE(ParseUrl("http://10.0.0.1:1234")->IsLoopbackHttp());
}

TEST(ParseUrl, RefusesCredentialsBadSchemesAndPorts) {
  auto creds = ParseUrl("https://user:sk-secret@api.example.com/v1");
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.error().Message().find("credentials in the URL are not supported"),
            std::string::npos);
  EXPECT_FALSE(ParseUrl("ftp://example.com").ok());
  EXPECT_FALSE(ParseUrl("https://").ok());
  EXPECT_FALSE(ParseUrl("https://example.com:0").ok());
  EXPECT_FALSE(ParseUrl("https://example.com:99999").ok());
  EXPECT_FALSE(ParseUrl("https://example.com:12ab").ok());
  EXPECT_FALSE(ParseUrl("https://example.com/a b").ok());
  EXPECT_FALSE(ParseUrl("https://[::1").ok());
}

struct Exchange {
  std::optional<HttpHead> head;
  std::string body;
  int body_pieces = 0;
  bool done = false;
  std::optional<HttpFailure> failure;
};

// Runs one request to completion on a fresh io_context.
Exchange RunRequest(HttpClient& client, boost::asio::io_context& io, HttpRequest req,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  Exchange ex;
  HttpHandlers h;
  h.on_head = [&](const HttpHead& head) { ex.head = head; };
  h.on_body = [&](std::string_view bytes) {
    ex.body.append(bytes);
    ++ex.body_pieces;
  };
  h.on_done = [&](const HttpFailure* f) {
    ex.done = true;
    if (f != nullptr) ex.failure = *f;
  };
  client.Start(std::move(req), timeout, std::move(h));
  io.restart();
  io.run_for(std::chrono::seconds(20));
  return ex;
}

HttpRequest Post(const std::string& url_text, const std::string& target, std::string body) {
  HttpRequest req;
  req.url = *ParseUrl(url_text);
  req.target = target;
  req.headers = {{"content-type", "application/json"}, {"x-test", "yes"}};
  req.body = std::move(body);
  return req;
}

TEST(HttpClient, PostsAndReadsAChunkedBodyPieceByPiece) {
  FakeProvider server;
  FakeReply reply = FakeReply::Sse({"data: one\n\n", "data: two\n\n", "data: three\n\n"});
  reply.piece_delay = std::chrono::milliseconds(20);
  server.Enqueue(reply);
  boost::asio::io_context io;
  auto client = HttpClient::Make(io);
  ASSERT_TRUE(client.ok()) << client.error().Message();
  const Exchange ex =
      RunRequest(**client, io, Post(server.BaseUrl(), "/v1/x?y=1", R"({"hello":"world"})"));
  ASSERT_TRUE(ex.done);
  ASSERT_FALSE(ex.failure) << ex.failure->message;
  ASSERT_TRUE(ex.head);
  EXPECT_EQ(ex.head->status, 200);
  EXPECT_EQ(ex.head->Header("content-type"), "text/event-stream; charset=utf-8");
  EXPECT_EQ(ex.body, "data: one\n\ndata: two\n\ndata: three\n\n");
  EXPECT_GE(ex.body_pieces, 2);  // delivered as it arrived, not at the end
  const auto requests = server.Requests();
  ASSERT_EQ(requests.size(), 1U);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/v1/x?y=1");
  EXPECT_EQ(requests[0].body, R"({"hello":"world"})");
  EXPECT_EQ(requests[0].Header("x-test"), "yes");
  EXPECT_EQ(requests[0].Header("host"), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(requests[0].Header("content-length"), "17");
  EXPECT_EQ(requests[0].Header("connection"), "close");
}

TEST(HttpClient, ErrorStatusIsAResponseNotAFailure) {
  FakeProvider server;
  server.Enqueue(FakeReply::Json(503, {{"error", {{"message", "busy"}}}}, {{"Retry-After", "2"}}));
  boost::asio::io_context io;
  auto client = HttpClient::Make(io);
  const Exchange ex = RunRequest(**client, io, Post(server.BaseUrl(), "/", "{}"));
  ASSERT_TRUE(ex.done);
  EXPECT_FALSE(ex.failure);
  EXPECT_EQ(ex.head->status, 503);
  EXPECT_EQ(ex.head->Header("retry-after"), "2");
  EXPECT_EQ(ex.body, R"({"error":{"message":"busy"}})");
}

TEST(HttpClient, ConnectionRefusedIsAConnectFailure) {
  int port = 0;
  {
    FakeProvider closed;  // take a free port, then let it go
    port = closed.port();
  }
  boost::asio::io_context io;
  auto client = HttpClient::Make(io);
  const Exchange ex =
      RunRequest(**client, io, Post("http://127.0.0.1:" + std::to_string(port), "/", "{}"));
  ASSERT_TRUE(ex.done);
  ASSERT_TRUE(ex.failure);
  EXPECT_EQ(ex.failure->kind, HttpFailure::Kind::kConnect);
  EXPECT_NE(ex.failure->message.find("cannot connect to 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << ex.failure->message;
}

TEST(HttpClient, ResetMidBodyIsAReadFailure) {
  FakeProvider server;
  FakeReply reply = FakeReply::Sse({"data: partial\n\n"});
  reply.reset_after_pieces = true;
  server.Enqueue(reply);
  boost::asio::io_context io;
  auto client = HttpClient::Make(io);
  const Exchange ex = RunRequest(**client, io, Post(server.BaseUrl(), "/", "{}"));
  ASSERT_TRUE(ex.done);
  ASSERT_TRUE(ex.failure);
  EXPECT_EQ(ex.failure->kind, HttpFailure::Kind::kRead);
  EXPECT_NE(ex.failure->message.find("was cut off"), std::string::npos) << ex.failure->message;
}

TEST(HttpClient, SlowServerTimesOut) {
  FakeProvider server;
  FakeReply reply = FakeReply::Json(200, {{"late", true}});
  reply.delay = std::chrono::seconds(3);
  server.Enqueue(reply);
  boost::asio::io_context io;
  auto client = HttpClient::Make(io);
  const auto start = std::chrono::steady_clock::now();
  const Exchange ex =
      RunRequest(**client, io, Post(server.BaseUrl(), "/", "{}"), std::chrono::milliseconds(200));
  ASSERT_TRUE(ex.done);
  ASSERT_TRUE(ex.failure);
  EXPECT_EQ(ex.failure->kind, HttpFailure::Kind::kTimeout);
  EXPECT_NE(ex.failure->message.find("timed out after 0.2 s"), std::string::npos)
      << ex.failure->message;
  // It gave up at the deadline rather than waiting for the late answer.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

TEST(HttpClient, BodyLargerThanTheLimitFails) {
  FakeProvider server;
  server.Enqueue(FakeReply::Text(200, std::string(100000, 'x')));
  boost::asio::io_context io;
  auto client = HttpClient::Make(io);
  Exchange ex;
  HttpHandlers h;
  h.on_done = [&](const HttpFailure* f) {
    ex.done = true;
    if (f != nullptr) ex.failure = *f;
  };
  (*client)->Start(Post(server.BaseUrl(), "/", "{}"), std::chrono::seconds(10), std::move(h),
                   /*max_body_bytes=*/1000);
  io.run_for(std::chrono::seconds(20));
  ASSERT_TRUE(ex.failure);
  EXPECT_EQ(ex.failure->kind, HttpFailure::Kind::kTooLarge);
}

TEST(HttpClient, CancelStopsTheExchangeWithoutCallingBack) {
  FakeProvider server;
  FakeReply reply = FakeReply::Json(200, {{"late", true}});
  reply.delay = std::chrono::seconds(2);
  server.Enqueue(reply);
  boost::asio::io_context io;
  auto client = HttpClient::Make(io);
  bool called = false;
  HttpHandlers h;
  h.on_done = [&](const HttpFailure*) { called = true; };
  auto exchange =
      (*client)->Start(Post(server.BaseUrl(), "/", "{}"), std::chrono::seconds(10), std::move(h));
  io.run_for(std::chrono::milliseconds(100));
  exchange->Cancel();
  const auto start = std::chrono::steady_clock::now();
  io.restart();
  io.run_for(std::chrono::seconds(20));  // returns once nothing is pending
  EXPECT_FALSE(called);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(HttpClient, MissingCaFileIsAnError) {
  boost::asio::io_context io;
  auto client = HttpClient::Make(io, "/nonexistent/ca.pem");
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.error().Message().find("cannot load the CA file /nonexistent/ca.pem"),
            std::string::npos);
}

// ---- TLS: certificates made at test time with the openssl CLI ----

class HttpClientTls : public ::testing::Test {
 protected:
  // One CA and set of certificates for the suite (making them takes most of a second).
  static void SetUpTestSuite() { pki_ = MakeTestPki(&why_not_); }
  static void TearDownTestSuite() {
    if (pki_) std::system(("rm -rf " + pki_->dir).c_str());
    pki_.reset();
  }
  void SetUp() override {
    if (!pki_) GTEST_SKIP() << "TLS tests need test certificates: " << why_not_;
  }
  static std::optional<TestPki> pki_;
  static std::string why_not_;
};
std::optional<TestPki> HttpClientTls::pki_;
std::string HttpClientTls::why_not_;

TEST_F(HttpClientTls, UntrustedCaFailsVerificationWithAClearError) {
  FakeProvider server({.tls = true, .cert_file = pki_->cert_file, .key_file = pki_->key_file});
  boost::asio::io_context io;
  auto client = HttpClient::Make(io);  // system trust store only
  const Exchange ex = RunRequest(**client, io, Post(server.BaseUrl(), "/", "{}"));
  ASSERT_TRUE(ex.failure);
  EXPECT_EQ(ex.failure->kind, HttpFailure::Kind::kTls);
  EXPECT_NE(ex.failure->message.find("certificate verification failed"), std::string::npos)
      << ex.failure->message;
  EXPECT_NE(ex.failure->message.find("local issuer"), std::string::npos) << ex.failure->message;
  EXPECT_TRUE(server.Requests().empty());  // nothing was sent
}

TEST_F(HttpClientTls, TrustedCaFileSucceeds) {
  FakeProvider server({.tls = true, .cert_file = pki_->cert_file, .key_file = pki_->key_file});
  boost::asio::io_context io;
  auto client = HttpClient::Make(io, pki_->ca_file);
  ASSERT_TRUE(client.ok()) << client.error().Message();
  const Exchange ex = RunRequest(**client, io, Post(server.BaseUrl(), "/", R"({"a":1})"));
  ASSERT_FALSE(ex.failure) << ex.failure->message;
  EXPECT_EQ(ex.head->status, 404);  // the fake's answer for an unknown path
  ASSERT_EQ(server.Requests().size(), 1U);
  EXPECT_EQ(server.Requests()[0].body, R"({"a":1})");
}

TEST_F(HttpClientTls, SslCertFileEnvironmentIsHonoured) {
  FakeProvider server({.tls = true, .cert_file = pki_->cert_file, .key_file = pki_->key_file});
  const char* old = std::getenv("SSL_CERT_FILE");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("SSL_CERT_FILE", pki_->ca_file.c_str(), 1);
  boost::asio::io_context io;
  auto client = HttpClient::Make(io);
  if (old != nullptr) {
    ::setenv("SSL_CERT_FILE", saved.c_str(), 1);
  } else {
    ::unsetenv("SSL_CERT_FILE");
  }
  ASSERT_TRUE(client.ok());
  const Exchange ex = RunRequest(**client, io, Post(server.BaseUrl(), "/", "{}"));
  ASSERT_FALSE(ex.failure) << ex.failure->message;
  EXPECT_EQ(ex.head->status, 404);
}

TEST_F(HttpClientTls, CertificateForAnotherHostFails) {
  FakeProvider server(
      {.tls = true, .cert_file = pki_->wrong_cert_file, .key_file = pki_->wrong_key_file});
  boost::asio::io_context io;
  auto client = HttpClient::Make(io, pki_->ca_file);  // the CA is trusted; the name is wrong
  const Exchange ex = RunRequest(**client, io, Post(server.BaseUrl(), "/", "{}"));
  ASSERT_TRUE(ex.failure);
  EXPECT_EQ(ex.failure->kind, HttpFailure::Kind::kTls);
  EXPECT_NE(ex.failure->message.find("hostname mismatch"), std::string::npos)
      << ex.failure->message;
  EXPECT_TRUE(server.Requests().empty());
}

TEST_F(HttpClientTls, IpAddressMustBeInTheCertificate) {
  // The good certificate names IP 127.0.0.1; the wrong one does not.
  FakeProvider good({.tls = true, .cert_file = pki_->cert_file, .key_file = pki_->key_file});
  FakeProvider wrong(
      {.tls = true, .cert_file = pki_->wrong_cert_file, .key_file = pki_->wrong_key_file});
  boost::asio::io_context io;
  auto client = HttpClient::Make(io, pki_->ca_file);
  const Exchange ok =
      RunRequest(**client, io, Post("https://127.0.0.1:" + std::to_string(good.port()), "/", "{}"));
  EXPECT_FALSE(ok.failure) << ok.failure->message;
  const Exchange bad = RunRequest(
      **client, io, Post("https://127.0.0.1:" + std::to_string(wrong.port()), "/", "{}"));
  ASSERT_TRUE(bad.failure);
  EXPECT_EQ(bad.failure->kind, HttpFailure::Kind::kTls);
  EXPECT_NE(bad.failure->message.find("IP address mismatch"), std::string::npos)
      << bad.failure->message;
}

}  // namespace
}  // namespace cagent::launcher::model
