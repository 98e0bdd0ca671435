// Interception (issue 36) end to end on loopback: a client that trusts the sandbox's CA reaches
// an HTTPS upstream (with a test CA of its own, given to the proxy as upstream_ca_file) through
// CONNECT; the upstream is a real TLS server on a thread that records what it was sent.
#include "launcher/egress/tls/intercept.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <csignal>
#include <fstream>
#include <string>

#include "launcher/egress/http_body.h"
#include "launcher/egress/proxy.h"
#include "launcher/egress/socks5.h"
#include "launcher/egress/tls/openssl_tls.h"
#include "launcher/egress/tls/sandbox_ca.h"
#include "tests/launcher/egress/egress_test_util.h"

namespace cagent::launcher::egress {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSecret[] = "ghp_TheRealSecretValue0123456789abcdefXYZ";

// FakePolicy with credentials bound by host and a per-request decision.
class CredPolicy : public FakePolicy {
 public:
  [[nodiscard]] std::vector<std::string> CredentialsFor(const Destination& dest) const override {
    const std::lock_guard<std::mutex> lock(mu_);
    const auto it = bound_.find(dest.host);
    return it == bound_.end() ? std::vector<std::string>{} : it->second;
  }
  void DecideRequest(const HttpExchange& request, std::function<void(Decision)> done) override {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(request);
      if (deny_method_ == request.method) {
        Decision d{false, "deny pkgs.test POST *", "no pushing here"};
        done(d);
        return;
      }
    }
    done({true, "allow pkgs.test", "allowed"});
  }
  void Bind(const std::string& host, std::vector<std::string> names) {
    const std::lock_guard<std::mutex> lock(mu_);
    bound_[host] = std::move(names);
  }
  void DenyMethod(const std::string& m) {
    const std::lock_guard<std::mutex> lock(mu_);
    deny_method_ = m;
  }
  std::vector<HttpExchange> requests() const {
    const std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::string>> bound_;
  std::string deny_method_;
  std::vector<HttpExchange> requests_;
};

// What the upstream was sent: every request head and body it read, in order.
class UpstreamLog {
 public:
  void Add(std::string request) {
    const std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back(std::move(request));
  }
  std::vector<std::string> seen() const {
    const std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> seen_;
};

std::string SslRead(SSL* ssl, std::size_t max = 1U << 20U) {
  std::string out;
  char buf[4096];
  while (out.size() < max) {
    const int n = SSL_read(ssl, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// Reads one request (head, then a Content-Length or chunked body) from `ssl`.
std::string ReadOneRequest(SSL* ssl) {
  std::string in;
  char buf[4096];
  while (in.find("\r\n\r\n") == std::string::npos) {
    const int n = SSL_read(ssl, buf, sizeof buf);
    if (n <= 0) return in;
    in.append(buf, static_cast<std::size_t>(n));
  }
  const auto p = ParseHttpHead(in, 1 << 16);
  if (p.status != HttpHeadParse::Status::kComplete) return in;
  auto body = RequestBody::For(p.head);
  if (!body) return in;
  std::size_t at = p.head.size;
  while (true) {
    at += body->Feed(std::string_view(in).substr(at));
    if (body->done()) break;
    const int n = SSL_read(ssl, buf, sizeof buf);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
  }
  return in;
}

// An HTTPS upstream for `host`: answers 200 "data for <path>" when the request carries
// "Authorization: Bearer <kSecret>", 401 otherwise.
class TlsUpstream {
 public:
  explicit TlsUpstream(const std::string& host) {
    auto ca = SandboxCa::Make({"upstream test CA", {host}, true});
    EXPECT_TRUE(ca.ok());
    ca_ = std::move(*ca);
    auto ctx = ca_->ServerContextFor(host);
    EXPECT_TRUE(ctx.ok());
    ctx_ = std::move(*ctx);
    ca_file_ = ::testing::TempDir() + "upstream-ca-" + std::to_string(::getpid()) + "-" +
               std::to_string(counter_++) + ".pem";
    std::ofstream(ca_file_) << ca_->CertificatePem();
    server_ = std::make_unique<FakeUpstream>([this](int fd) { Serve(fd); });
  }
  ~TlsUpstream() { std::remove(ca_file_.c_str()); }
  TlsUpstream(const TlsUpstream&) = delete;
  TlsUpstream& operator=(const TlsUpstream&) = delete;

  [[nodiscard]] std::uint16_t port() const { return server_->port(); }
  [[nodiscard]] const std::string& ca_file() const { return ca_file_; }
  [[nodiscard]] std::vector<std::string> seen() const { return log_.seen(); }
  [[nodiscard]] int accepted() const { return server_->accepted(); }

 private:
  void Serve(int fd) {
    SSL* ssl = SSL_new(ctx_.get());
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1) {
      const std::string request = ReadOneRequest(ssl);
      if (request.empty()) {
        SSL_free(ssl);
        return;  // the proxy closed without sending a request
      }
      const std::size_t eol = request.find(' ', request.find(' ') + 1);
      const std::string path = request.substr(request.find(' ') + 1, eol - request.find(' ') - 1);
      const bool ok = request.find(std::string("Authorization: Bearer ") + kSecret + "\r\n") !=
                      std::string::npos;
      const std::string body = ok ? "data for " + path : "who are you?";
      const std::string response = std::string(ok ? "HTTP/1.1 200 OK" : "HTTP/1.1 401 No") +
                                   "\r\nContent-Length: " + std::to_string(body.size()) +
                                   "\r\n\r\n" + body;
      SSL_write(ssl, response.data(), static_cast<int>(response.size()));
      // Anything more the proxy sends (it must send nothing) within 300 ms is recorded.
      ::timeval tv{0, 300000};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::string more;
      char buf[4096];
      const int n = SSL_read(ssl, buf, sizeof buf);
      if (n > 0) more.assign(buf, static_cast<std::size_t>(n));
      if (!request.empty()) log_.Add(request + more);
      SSL_shutdown(ssl);
    }
    SSL_free(ssl);
  }

  static inline int counter_ = 0;
  std::unique_ptr<SandboxCa> ca_;
  std::shared_ptr<ssl_ctx_st> ctx_;
  std::string ca_file_;
  UpstreamLog log_;
  std::unique_ptr<FakeUpstream> server_;
};

class InterceptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The test's upstream writes with write(2) through OpenSSL: a peer the proxy closed must not
    // kill the test.
    std::signal(SIGPIPE, SIG_IGN);
    policy_ = std::make_shared<CredPolicy>();
    policy_->Allow("pkgs.test");
    policy_->Allow("other.test");
    auto ca = SandboxCa::Make({"cagent test sandbox CA", {"pkgs.test"}, true});
    ASSERT_TRUE(ca.ok());
    ca_ = std::shared_ptr<SandboxCa>(std::move(*ca));
    credentials_ = {{"tok", MakePlaceholder(kSecret), kSecret},
                    {"other", MakePlaceholder("npm_OtherSecretValue"), "npm_OtherSecretValue"}};
  }
  void TearDown() override {
    if (proxy_) proxy_->Stop();
  }

  void Start(const TlsUpstream& up, const std::string& upstream_ca_file,
             std::chrono::milliseconds head_timeout = std::chrono::milliseconds(3000)) {
    const int fd = ListenTcp("127.0.0.1");
    ASSERT_GE(fd, 0);
    port_ = PortOf(fd);
    ProxyConfig config;
    config.proxy_fd = fd;
    config.overrides = {{"pkgs.test", up.port(), "127.0.0.1"},
                        {"other.test", up.port(), "127.0.0.1"}};
    policy_->NameAddress("127.0.0.1", up.port());
    config.intercept.ca = ca_;
    config.intercept.tls = &OpenSslTls();
    config.intercept.credentials = credentials_;
    config.intercept.upstream_ca_file = upstream_ca_file;
    config.intercept.on_exchange = exchanges_.Callback();
    config.head_timeout = head_timeout;
    auto started = Proxy::Start(std::move(config), policy_, sink_.Callback());
    ASSERT_TRUE(started.ok()) << started.error().Message();
    proxy_ = std::move(started.value());
  }

  // CONNECTs to host:port, does TLS trusting `trust_pem` (the sandbox's CA, as the sandbox does),
  // sends `request`, and returns the whole response ("" when TLS failed, with *tls_error set).
  std::string Exchange(const std::string& host, std::uint16_t port, const std::string& request,
                       const std::string& trust_pem, std::string* tls_error = nullptr,
                       bool socks = false) const {
    const int fd = ConnectTcp("127.0.0.1", port_);
    if (socks) {
      if (Socks5Connect(fd, host, port) != Socks5Reply(kSocksSucceeded)) {
        ::close(fd);
        return "socks refused";
      }
    } else {
      const std::string authority = host + ":" + std::to_string(port);
      SendAll(fd, "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
      const std::string head = ReadUntil(fd, "\r\n\r\n");
      if (head.rfind("HTTP/1.1 200", 0) != 0) {
        ::close(fd);
        return head;
      }
    }
    std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
    BIO* bio = BIO_new_mem_buf(trust_pem.data(), static_cast<int>(trust_pem.size()));
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), cert);
    X509_free(cert);
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    SSL* ssl = SSL_new(ctx.get());
    SSL_set_fd(ssl, fd);
    SSL_set_tlsext_host_name(ssl, host.c_str());
    SSL_set1_host(ssl, host.c_str());
    std::string out;
    if (SSL_connect(ssl) != 1) {
      if (tls_error != nullptr) {
        *tls_error = X509_verify_cert_error_string(SSL_get_verify_result(ssl));
      }
    } else {
      SSL_write(ssl, request.data(), static_cast<int>(request.size()));
      out = SslRead(ssl);
    }
    SSL_free(ssl);
    ::close(fd);
    return out;
  }

  std::string Get(const std::string& path, const std::string& auth) const {
    return "GET " + path + " HTTP/1.1\r\nHost: pkgs.test\r\nAuthorization: " + auth + "\r\n\r\n";
  }

  std::shared_ptr<CredPolicy> policy_;
  std::shared_ptr<SandboxCa> ca_;
  std::vector<SandboxCredential> credentials_;
  RecordSink sink_;
  Sink<ExchangeRecord> exchanges_;
  std::unique_ptr<Proxy> proxy_;
  std::uint16_t port_ = 0;
};

TEST_F(InterceptTest, ThePlaceholderBecomesTheValueForTheBoundHost) {
  TlsUpstream up("pkgs.test");
  policy_->Bind("pkgs.test", {"tok"});
  Start(up, up.ca_file());
  const std::string out =
      Exchange("pkgs.test", up.port(), Get("/data?x=1", "Bearer " + credentials_[0].placeholder),
               ca_->CertificatePem());
  EXPECT_THAT(out, HasSubstr("200 OK"));
  EXPECT_THAT(out, HasSubstr("data for /data?x=1"));
  EXPECT_THAT(out, HasSubstr("Connection: close"));
  EXPECT_THAT(out, Not(HasSubstr(kSecret)));
  const ExchangeRecord x = exchanges_.Wait();
  EXPECT_TRUE(x.allowed) << x.reason;
  EXPECT_EQ(x.request.method, "GET");
  EXPECT_EQ(x.request.path, "/data");  // never the query
  EXPECT_EQ(x.credentials, std::vector<std::string>{"tok"});
  EXPECT_EQ(x.status, 200);
  EXPECT_GT(x.bytes_down, 0U);
  const ConnectionRecord r = sink_.Wait();
  EXPECT_TRUE(r.allowed) << r.reason;
  ASSERT_EQ(up.seen().size(), 1U);
  EXPECT_THAT(up.seen()[0], HasSubstr("Host: pkgs.test:" + std::to_string(up.port())));
}

// The twin: the same client and request without interception (nothing bound: the tunnel) reach
// the upstream with the placeholder, which it refuses.
TEST_F(InterceptTest, WithoutTheSwapTheUpstreamSeesOnlyThePlaceholder) {
  TlsUpstream up("pkgs.test");
  Start(up, up.ca_file());
  std::ifstream in(up.ca_file());
  const std::string upstream_ca((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  const std::string out = Exchange(
      "pkgs.test", up.port(), Get("/data", "Bearer " + credentials_[0].placeholder), upstream_ca);
  EXPECT_THAT(out, HasSubstr("401"));
  EXPECT_EQ(exchanges_.size(), 0U);
}

TEST_F(InterceptTest, AnUntrustedUpstreamCertificateIs502) {
  TlsUpstream up("pkgs.test");
  TlsUpstream stranger("pkgs.test");  // another CA: the proxy trusts only this one
  policy_->Bind("pkgs.test", {"tok"});
  Start(up, stranger.ca_file());
  const std::string out =
      Exchange("pkgs.test", up.port(), Get("/data", "Bearer " + credentials_[0].placeholder),
               ca_->CertificatePem());
  EXPECT_THAT(out, HasSubstr("502 Bad Gateway"));
  EXPECT_THAT(out, HasSubstr("did not verify"));
  const ConnectionRecord r = sink_.Wait();
  EXPECT_THAT(r.error, HasSubstr("did not verify"));
  EXPECT_TRUE(up.seen().empty());
}

TEST_F(InterceptTest, APlaceholderOfAnotherCredentialIsRefusedAndRecorded) {
  TlsUpstream up("pkgs.test");
  policy_->Bind("pkgs.test", {"tok"});
  Start(up, up.ca_file());
  const std::string out =
      Exchange("pkgs.test", up.port(), Get("/x", "Bearer " + credentials_[1].placeholder),
               ca_->CertificatePem());
  EXPECT_THAT(out, HasSubstr("403 Forbidden"));
  EXPECT_THAT(out, HasSubstr("'other'"));
  const ExchangeRecord x = exchanges_.Wait();
  EXPECT_FALSE(x.allowed);
  EXPECT_EQ(x.misdirected, "other");
  EXPECT_TRUE(up.seen().empty());  // nothing went upstream
  EXPECT_THAT(x.reason, Not(HasSubstr(credentials_[1].placeholder)));
}

TEST_F(InterceptTest, ARequestThePolicyRefusesNeverLeaves) {
  TlsUpstream up("pkgs.test");
  policy_->Bind("pkgs.test", {"tok"});
  policy_->DenyMethod("POST");
  Start(up, up.ca_file());
  const std::string out = Exchange(
      "pkgs.test", up.port(),
      "POST /org/repo.git/git-receive-pack HTTP/1.1\r\nHost: pkgs.test\r\nAuthorization: Bearer " +
          credentials_[0].placeholder + "\r\nContent-Length: 5\r\n\r\nhello",
      ca_->CertificatePem());
  EXPECT_THAT(out, HasSubstr("403 Forbidden"));
  EXPECT_THAT(out, HasSubstr("no pushing here"));
  const ExchangeRecord x = exchanges_.Wait();
  EXPECT_FALSE(x.allowed);
  EXPECT_EQ(x.rule, "deny pkgs.test POST *");
  EXPECT_EQ(x.request.path, "/org/repo.git/git-receive-pack");
  EXPECT_TRUE(up.seen().empty());
  ASSERT_EQ(policy_->requests().size(), 1U);
  EXPECT_EQ(policy_->requests()[0].method, "POST");
}

// A second request written after the first one's body is never relayed: it was not decided.
TEST_F(InterceptTest, NothingAfterTheFirstRequestReachesTheUpstream) {
  TlsUpstream up("pkgs.test");
  policy_->Bind("pkgs.test", {"tok"});
  policy_->DenyMethod("DELETE");
  Start(up, up.ca_file());
  const std::string first = "POST /a HTTP/1.1\r\nHost: pkgs.test\r\nAuthorization: Bearer " +
                            credentials_[0].placeholder +
                            "\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
  const std::string second = "DELETE /everything HTTP/1.1\r\nHost: pkgs.test\r\n\r\n";
  const std::string out = Exchange("pkgs.test", up.port(), first + second, ca_->CertificatePem());
  EXPECT_THAT(out, HasSubstr("200 OK"));
  ASSERT_EQ(up.seen().size(), 1U);
  EXPECT_THAT(up.seen()[0], HasSubstr("5\r\nhello\r\n0\r\n\r\n"));
  EXPECT_THAT(up.seen()[0], Not(HasSubstr("DELETE")));
  EXPECT_EQ(policy_->requests().size(), 1U);
}

TEST_F(InterceptTest, ThroughSocks5TooThePlaceholderBecomesTheValue) {
  TlsUpstream up("pkgs.test");
  policy_->Bind("pkgs.test", {"tok"});
  Start(up, up.ca_file());
  const std::string out =
      Exchange("pkgs.test", up.port(), Get("/s", "Bearer " + credentials_[0].placeholder),
               ca_->CertificatePem(), nullptr, /*socks=*/true);
  EXPECT_THAT(out, HasSubstr("data for /s"));
  EXPECT_EQ(sink_.Wait().dest.via, Via::kSocks5);
}

// A client that opens the tunnel and then says nothing is cut after the head timeout.
TEST_F(InterceptTest, ASilentClientIsCutAfterTheTimeout) {
  TlsUpstream up("pkgs.test");
  policy_->Bind("pkgs.test", {"tok"});
  Start(up, up.ca_file(), std::chrono::milliseconds(300));
  const int fd = ConnectTcp("127.0.0.1", port_);
  const std::string authority = "pkgs.test:" + std::to_string(up.port());
  SendAll(fd, "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
  EXPECT_THAT(ReadUntil(fd, "\r\n\r\n"), HasSubstr("200"));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ReadAll(fd), "");  // closed by cagent, not by the client
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  ::close(fd);
  const ConnectionRecord r = sink_.Wait();
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.reason, HasSubstr("no TLS handshake within 300 ms"));
}

TEST_F(InterceptTest, AClientThatDoesNotTrustTheSandboxCaIsRefusedWithAReason) {
  TlsUpstream up("pkgs.test");
  policy_->Bind("pkgs.test", {"tok"});
  Start(up, up.ca_file());
  TlsUpstream other("pkgs.test");
  std::ifstream in(other.ca_file());
  const std::string wrong((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string tls_error;
  const std::string out =
      Exchange("pkgs.test", up.port(), Get("/x", "Bearer x"), wrong, &tls_error);
  EXPECT_EQ(out, "");
  EXPECT_FALSE(tls_error.empty());
  const ConnectionRecord r = sink_.Wait();
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.reason, HasSubstr("trust the sandbox's CA"));
  EXPECT_TRUE(up.seen().empty());
}

TEST_F(InterceptTest, PlainHttpToABoundHostIsRefused) {
  TlsUpstream up("pkgs.test");
  policy_->Bind("pkgs.test", {"tok"});
  Start(up, up.ca_file());
  const int fd = ConnectTcp("127.0.0.1", port_);
  SendAll(fd, "GET http://pkgs.test:" + std::to_string(up.port()) +
                  "/x HTTP/1.1\r\nHost: pkgs.test\r\n\r\n");
  const std::string out = ReadAll(fd);
  ::close(fd);
  EXPECT_THAT(out, HasSubstr("403"));
  EXPECT_THAT(out, HasSubstr("only inside TLS"));
  EXPECT_EQ(up.accepted(), 0);
}

// A plain request to an unbound host is read in clear, so a placeholder in it is caught.
TEST_F(InterceptTest, APlaceholderInPlainHttpToAnotherHostIsRefused) {
  TlsUpstream up("pkgs.test");
  policy_->Bind("pkgs.test", {"tok"});
  Start(up, up.ca_file());
  const int fd = ConnectTcp("127.0.0.1", port_);
  SendAll(fd, "GET http://other.test:" + std::to_string(up.port()) + "/leak?t=" +
                  credentials_[0].placeholder + " HTTP/1.1\r\nHost: other.test\r\n\r\n");
  const std::string out = ReadAll(fd);
  ::close(fd);
  EXPECT_THAT(out, HasSubstr("403"));
  const ExchangeRecord x = exchanges_.Wait();
  EXPECT_EQ(x.misdirected, "tok");
  EXPECT_EQ(x.request.path, "/leak");
  EXPECT_EQ(up.accepted(), 0);
  EXPECT_TRUE(policy_->asked().empty());  // refused before the policy was asked
}

TEST(HttpBodyTest, FramingIsStrict) {
  auto head = [](const std::string& headers) {
    const auto p = ParseHttpHead("POST / HTTP/1.1\r\nHost: h\r\n" + headers + "\r\n", 1 << 16);
    EXPECT_EQ(p.status, HttpHeadParse::Status::kComplete) << p.error;
    return p.head;
  };
  EXPECT_FALSE(RequestBody::For(head("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n")).ok());
  EXPECT_FALSE(RequestBody::For(head("Transfer-Encoding: gzip, chunked\r\n")).ok());
  EXPECT_FALSE(RequestBody::For(head("Content-Length: 5\r\nContent-Length: 6\r\n")).ok());
  EXPECT_FALSE(RequestBody::For(head("Content-Length: -1\r\n")).ok());
  EXPECT_FALSE(RequestBody::For(head("Content-Length: 5, 5\r\n")).ok());
  auto same = RequestBody::For(head("Content-Length: 3\r\nContent-Length: 3\r\n"));
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->Feed("abcdef"), 3U);
  EXPECT_TRUE(same->done());
  auto none = RequestBody::For(head(""));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->done());
  EXPECT_EQ(none->Feed("GET / HTTP/1.1\r\n"), 0U);
}

TEST(HttpBodyTest, ChunkedEndsAfterTheTerminatorAndTrailers) {
  const auto p = ParseHttpHead("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", 1 << 16);
  auto body = RequestBody::For(p.head);
  ASSERT_TRUE(body.ok());
  const std::string wire = "4;ext=1\r\nwiki\r\n5\r\npedia\r\n0\r\nX-T: 1\r\n\r\nGET /next";
  // Fed a byte at a time, the body ends exactly before "GET /next".
  std::size_t used = 0;
  for (std::size_t i = 0; i < wire.size() && !body->done(); i++) {
    used += body->Feed(wire.substr(i, 1));
  }
  EXPECT_TRUE(body->done());
  EXPECT_EQ(body->error(), "");
  EXPECT_EQ(wire.substr(used), "GET /next");
  for (const std::string bad : {"x\r\n", "4\r\nwikiXX", "4\n", "\r\n", "fffffffffffffffff\r\n"}) {
    auto b = RequestBody::For(p.head);
    b->Feed(bad);
    EXPECT_TRUE(b->done()) << bad;
    EXPECT_NE(b->error(), "") << bad;
  }
}

}  // namespace
}  // namespace cagent::launcher::egress

namespace cagent::launcher::egress {
namespace {

// A real client: curl through CONNECT, trusting the sandbox's CA only (as SSL_CERT_FILE inside the
// sandbox makes it), with the placeholder in its bearer header.
TEST_F(InterceptTest, CurlGetsTheDataWithThePlaceholder) {
  if (std::system("curl --version > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "curl is not installed";
  }
  TlsUpstream up("pkgs.test");
  policy_->Bind("pkgs.test", {"tok"});
  Start(up, up.ca_file());
  const std::string ca_file = ::testing::TempDir() + "sandbox-ca-" + std::to_string(::getpid());
  std::ofstream(ca_file) << ca_->CertificatePem();
  auto curl = [&](const std::string& token) {
    const std::string cmd = "curl -sS --fail --max-time 10 --cacert " + ca_file +
                            " -x http://127.0.0.1:" + std::to_string(port_) +
                            " -H 'Authorization: Bearer " + token +
                            "' https://pkgs.test:" + std::to_string(up.port()) + "/data 2>&1";
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int status = ::pclose(p);
    return std::make_pair(status, out);
  };
  const auto [status, out] = curl(credentials_[0].placeholder);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "data for /data");
  // Twin: a token that is not the placeholder is not swapped, and the upstream refuses it.
  const auto [bad_status, bad_out] = curl("ghp_" + std::string(36, 'a'));
  EXPECT_NE(bad_status, 0);
  EXPECT_THAT(bad_out, HasSubstr("401"));
  std::remove(ca_file.c_str());
}

}  // namespace
}  // namespace cagent::launcher::egress
