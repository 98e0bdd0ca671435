// The sandbox's CA (issue 36): leaves for the bound hosts verify against it; the proxy refuses to
// mint for any other host; and a leaf for another name, minted anyway, fails verification
// because the CA is name-constrained (shown passing with the constraints switched off). A real
// TLS handshake, in memory, offers HTTP/1.1 by ALPN.
#include "launcher/egress/tls/sandbox_ca.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>

namespace cagent::launcher::egress {
namespace {

using ::testing::HasSubstr;

X509* ReadPem(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

// X509_V_OK, or the verification error, of `leaf` for `host` against `ca` alone.
int Verify(const std::string& ca_pem, X509* leaf, const std::string& host) {
  X509_STORE* store = X509_STORE_new();
  X509* ca = ReadPem(ca_pem);
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  if (host.find_first_not_of("0123456789.") == std::string::npos) {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  }
  const int ok = X509_verify_cert(ctx);
  const int err = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(ca);
  return err;
}

std::unique_ptr<SandboxCa> Make(bool constraints = true) {
  SandboxCaOptions o;
  o.label = "cagent test CA";
  o.hosts = {"pkgs.test", "Registry.Example.ORG.", "127.0.0.2"};
  o.name_constraints = constraints;
  auto ca = SandboxCa::Make(o);
  EXPECT_TRUE(ca.ok()) << (ca.ok() ? "" : ca.error().Message());
  return ca.ok() ? std::move(*ca) : nullptr;
}

TEST(SandboxCa, LeavesForBoundHostsVerifyAgainstTheCa) {
  auto ca = Make();
  ASSERT_NE(ca, nullptr);
  EXPECT_THAT(ca->CertificatePem(), HasSubstr("-----BEGIN CERTIFICATE-----"));
  EXPECT_THAT(ca->CertificatePem(), ::testing::Not(HasSubstr("PRIVATE KEY")));
  for (const std::string host : {"pkgs.test", "registry.example.org", "127.0.0.2"}) {
    auto ctx = ca->ServerContextFor(host);
    ASSERT_TRUE(ctx.ok()) << ctx.error().Message();
    X509* leaf = SSL_CTX_get0_certificate(ctx->get());
    ASSERT_NE(leaf, nullptr);
    const int verified = Verify(ca->CertificatePem(), leaf, host);
    EXPECT_EQ(verified, X509_V_OK) << host << ": " << X509_verify_cert_error_string(verified);
    // The same context again: minted once per host.
    EXPECT_EQ(ca->ServerContextFor(host)->get(), ctx->get());
  }
}

TEST(SandboxCa, NoLeafForAHostWithoutACredential) {
  auto ca = Make();
  ASSERT_NE(ca, nullptr);
  auto ctx = ca->ServerContextFor("evil.test");
  ASSERT_FALSE(ctx.ok());
  EXPECT_THAT(ctx.error().Message(), HasSubstr("no credential is bound to it"));
}

TEST(SandboxCa, TheNameConstraintsRefuseALeafForAnotherName) {
  // A leaf for evil.test, minted by the CA itself (the proxy never would): with the constraints it
  // fails verification, without them it would pass — the constraints are what refuse it.
  auto constrained = Make(true);
  auto open = Make(false);
  ASSERT_TRUE(constrained && open);
  auto bad = constrained->MintLeafPemForTest("evil.test");
  auto twin = open->MintLeafPemForTest("evil.test");
  ASSERT_TRUE(bad.ok() && twin.ok());
  X509* bad_leaf = ReadPem(*bad);
  X509* twin_leaf = ReadPem(*twin);
  EXPECT_EQ(Verify(constrained->CertificatePem(), bad_leaf, "evil.test"),
            X509_V_ERR_PERMITTED_VIOLATION);
  EXPECT_EQ(Verify(open->CertificatePem(), twin_leaf, "evil.test"), X509_V_OK);
  // An address the CA was not made for is refused the same way.
  auto ip = constrained->MintLeafPemForTest("10.0.0.1");
  ASSERT_TRUE(ip.ok());
  X509* ip_leaf = ReadPem(*ip);
  EXPECT_EQ(Verify(constrained->CertificatePem(), ip_leaf, "10.0.0.1"),
            X509_V_ERR_PERMITTED_VIOLATION);
  X509_free(bad_leaf);
  X509_free(twin_leaf);
  X509_free(ip_leaf);
}

TEST(SandboxCa, BadHostsAreRefused) {
  SandboxCaOptions o;
  EXPECT_FALSE(SandboxCa::Make(o).ok());
  o.hosts = {"not a host"};
  EXPECT_FALSE(SandboxCa::Make(o).ok());
}

// Moves what each side wrote to the other until both are idle.
void Pump(BIO* client_net, BIO* server_net) {
  char buf[16384];
  for (BIO* from : {client_net, server_net}) {
    BIO* to = from == client_net ? server_net : client_net;
    for (int n; (n = BIO_read(from, buf, sizeof buf)) > 0;) BIO_write(to, buf, n);
  }
}

TEST(SandboxCa, AClientTrustingTheCaCompletesAHandshakeAndGetsHttp11) {
  auto ca = Make();
  ASSERT_NE(ca, nullptr);
  auto server_ctx = ca->ServerContextFor("pkgs.test");
  ASSERT_TRUE(server_ctx.ok());
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  X509* ca_cert = ReadPem(ca->CertificatePem());
  X509_STORE_add_cert(SSL_CTX_get_cert_store(client_ctx), ca_cert);
  SSL_CTX_set_verify(client_ctx, SSL_VERIFY_PEER, nullptr);
  SSL* client = SSL_new(client_ctx);
  SSL* server = SSL_new(server_ctx->get());
  SSL_set_tlsext_host_name(client, "pkgs.test");
  SSL_set1_host(client, "pkgs.test");
  static const unsigned char kProtos[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_set_alpn_protos(client, kProtos, sizeof kProtos);
  BIO *client_io = nullptr, *client_net = nullptr, *server_io = nullptr, *server_net = nullptr;
  BIO_new_bio_pair(&client_io, 0, &client_net, 0);
  BIO_new_bio_pair(&server_io, 0, &server_net, 0);
  SSL_set_bio(client, client_io, client_io);
  SSL_set_bio(server, server_io, server_io);
  SSL_set_connect_state(client);
  SSL_set_accept_state(server);
  int c = 0, s = 0;
  for (int round = 0; round < 20 && (c != 1 || s != 1); ++round) {
    if (c != 1) c = SSL_do_handshake(client);
    if (s != 1) s = SSL_do_handshake(server);
    Pump(client_net, server_net);
  }
  ASSERT_EQ(c, 1) << ERR_error_string(ERR_get_error(), nullptr);
  ASSERT_EQ(s, 1);
  EXPECT_EQ(SSL_get_verify_result(client), X509_V_OK);
  const unsigned char* alpn = nullptr;
  unsigned int alpn_len = 0;
  SSL_get0_alpn_selected(client, &alpn, &alpn_len);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(alpn), alpn_len), "http/1.1");
  SSL_free(client);
  SSL_free(server);
  BIO_free(client_net);
  BIO_free(server_net);
  SSL_CTX_free(client_ctx);
  X509_free(ca_cert);
}

}  // namespace
}  // namespace cagent::launcher::egress
