#include "launcher/egress/tls/sandbox_ca.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "common/host_name.h"

namespace cagent::launcher::egress {
namespace {

constexpr std::int64_t kLifetime = 24 * 60 * 60;  // seconds
constexpr std::int64_t kBackdate = 60 * 60;       // seconds, for clocks behind ours

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;

// The OpenSSL error queue as one line (and emptied).
std::string OpenSslErrors() {
  std::string out;
  while (const auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "no detail" : out;
}

Error SslError(const std::string& op) { return PlainError(op, OpenSslErrors()); }

bool IsIp(const std::string& host) { return IsAddressLiteral(host); }

// "IP:10.0.0.5/255.255.255.255" or the IPv6 form, for a name constraint naming one address.
std::string IpConstraint(const std::string& host) {
  if (ParseIpv4Literal(host)) return "IP:" + host + "/255.255.255.255";
  return "IP:" + host + "/FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF";
}

Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return SslError("certificate extension " + std::string(OBJ_nid2sn(nid)));
  const int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (added != 1) return SslError("adding extension " + std::string(OBJ_nid2sn(nid)));
  return Ok{};
}

// A certificate with a random 127-bit serial, the lifetime above, `subject` as its CN and `key`'s
// public half; not yet signed, without extensions.
Result<X509Ptr> NewCertificate(const std::string& common_name, EVP_PKEY* key) {
  X509Ptr cert(X509_new());
  std::unique_ptr<BIGNUM, BnFree> serial(BN_new());
  if (!cert || !serial || X509_set_version(cert.get(), 2) != 1 ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr ||
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -kBackdate) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), kLifetime) == nullptr ||
      X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                                 -1, 0) != 1 ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return SslError("making a certificate for " + common_name);
  }
  return cert;
}

Result<KeyPtr> NewKey() {
  KeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return SslError("making a P-256 key");
  return key;
}

Result<std::string> Pem(X509* cert) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return SslError("writing PEM");
  char* data = nullptr;
  const auto n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

// Offers HTTP/1.1 when the client offers it; otherwise no ALPN (HTTP/1.1 is then implied).
int SelectAlpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen,
               const unsigned char* in, unsigned int inlen, void* /*arg*/) {
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kHttp11, sizeof kHttp11, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

struct SandboxCa::Leaf {
  X509Ptr cert;
  KeyPtr key;
};

SandboxCa::~SandboxCa() {
  X509_free(cert_);
  EVP_PKEY_free(key_);
}

Result<std::unique_ptr<SandboxCa>> SandboxCa::Make(SandboxCaOptions options) {
  if (options.hosts.empty()) {
    return PlainError("making the sandbox's CA", "no host to sign for")
        .WithCode(Error::Code::kInvalidInput);
  }
  for (std::string& h : options.hosts) {
    auto normal = NormalizeHost(h);
    if (!normal || (!IsIp(*normal) && CheckHostName(*normal))) {
      return PlainError("making the sandbox's CA", "'" + h + "' is not a host name or address")
          .WithCode(Error::Code::kInvalidInput);
    }
    h = *normal;
  }
  std::sort(options.hosts.begin(), options.hosts.end());
  options.hosts.erase(std::unique(options.hosts.begin(), options.hosts.end()), options.hosts.end());
  std::unique_ptr<SandboxCa> ca(new SandboxCa(std::move(options)));
  if (auto st = ca->Init(); !st) return st.error();
  return ca;
}

Status SandboxCa::Init() {
  auto key = NewKey();
  if (!key) return key.error();
  auto cert = NewCertificate(options_.label, key->get());
  if (!cert) return cert.error();
  X509* c = cert->get();
  if (X509_set_issuer_name(c, X509_get_subject_name(c)) != 1) return SslError("CA issuer");
  std::string permitted;
  for (const std::string& h : options_.hosts) {
    permitted += (permitted.empty() ? "" : ",") + std::string("permitted;") +
                 (IsIp(h) ? IpConstraint(h) : "DNS:" + h);
  }
  for (const auto& [nid, value] : std::vector<std::pair<int, std::string>>{
           {NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
           {NID_key_usage, "critical,keyCertSign,cRLSign"},
           {NID_subject_key_identifier, "hash"}}) {
    if (auto st = AddExtension(c, c, nid, value); !st) return st;
  }
  if (options_.name_constraints) {
    if (auto st = AddExtension(c, c, NID_name_constraints, "critical," + permitted); !st) {
      return st;
    }
  }
  if (X509_sign(c, key->get(), EVP_sha256()) == 0) return SslError("signing the CA certificate");
  auto pem = Pem(c);
  if (!pem) return pem.error();
  ca_pem_ = std::move(*pem);
  key_ = key->release();
  cert_ = cert->release();
  return Ok{};
}

Result<SandboxCa::Leaf> SandboxCa::MintLeaf(const std::string& host) {
  auto key = NewKey();
  if (!key) return key.error();
  // The name is in the subjectAltName. An address as the common name would be checked against
  // the DNS name constraints (it looks like a host name) and refused, so an address's leaf gets a
  // common name that is not one.
  auto cert = NewCertificate(IsIp(host) ? "cagent proxy for " + host : host, key->get());
  if (!cert) return cert.error();
  X509* c = cert->get();
  if (X509_set_issuer_name(c, X509_get_subject_name(cert_)) != 1) return SslError("leaf issuer");
  for (const auto& [nid, value] : std::vector<std::pair<int, std::string>>{
           {NID_basic_constraints, "critical,CA:FALSE"},
           {NID_key_usage, "critical,digitalSignature"},
           {NID_ext_key_usage, "serverAuth"},
           {NID_subject_alt_name, (IsIp(host) ? "IP:" : "DNS:") + host},
           {NID_authority_key_identifier, "keyid:always"}}) {
    if (auto st = AddExtension(c, cert_, nid, value); !st) return st.error();
  }
  if (X509_sign(c, key_, EVP_sha256()) == 0) return SslError("signing the certificate of " + host);
  return Leaf{std::move(*cert), std::move(*key)};
}

Result<std::shared_ptr<SSL_CTX>> SandboxCa::ServerContextFor(const std::string& host) {
  const auto normal = NormalizeHost(host);
  if (!normal || !std::binary_search(options_.hosts.begin(), options_.hosts.end(), *normal)) {
    return PlainError("terminating TLS for " + host, "no credential is bound to it")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (auto it = contexts_.find(*normal); it != contexts_.end()) return it->second;
  auto leaf = MintLeaf(*normal);
  if (!leaf) return leaf.error();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), CtxFree{});
  if (!ctx || SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION) != 1 ||
      SSL_CTX_use_certificate(ctx.get(), leaf->cert.get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx.get(), leaf->key.get()) != 1 ||
      SSL_CTX_add1_chain_cert(ctx.get(), cert_) != 1 || SSL_CTX_check_private_key(ctx.get()) != 1) {
    return SslError("a TLS server context for " + *normal);
  }
  SSL_CTX_set_alpn_select_cb(ctx.get(), SelectAlpn, nullptr);
  contexts_.emplace(*normal, ctx);
  return ctx;
}

Result<std::string> SandboxCa::MintLeafPemForTest(const std::string& host) {
  auto leaf = MintLeaf(host);
  if (!leaf) return leaf.error();
  return Pem(leaf->cert.get());
}

}  // namespace cagent::launcher::egress
