// SandboxCa: the certificate authority cagent makes for one sandbox, so that its egress proxy can
// terminate TLS for the hosts a profile binds credentials to (issue 36) and put the real value in
// place of the sandbox's placeholder. Runs in cagent (trusted).
//
// The CA's private key exists only in this process's memory: the sandbox gets the certificate (to
// trust, through its CA bundle) and never a key. The CA is name-constrained (RFC 5280, critical)
// to exactly the bound hosts, so the certificate the sandbox trusts vouches for nothing else: a
// leaf for another name fails verification in every TLS client that checks name constraints
// (OpenSSL, GnuTLS, NSS, Go, Node, Python). Leaf certificates are minted per host on first use
// and kept for the sandbox's life. Keys are ECDSA P-256; lifetimes are one day, back-dated an hour
// for clock skew.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/egress/tls.h"

struct ssl_ctx_st;
struct x509_st;
struct evp_pkey_st;

namespace cagent::launcher::egress {

class SandboxCa {
 public:
  // Makes the key and the self-signed certificate. kInvalidInput for an empty host list or a host
  // that is neither a DNS name nor an IP literal; kFailed when OpenSSL fails.
  static Result<std::unique_ptr<SandboxCa>> Make(SandboxCaOptions options);
  ~SandboxCa();
  SandboxCa(const SandboxCa&) = delete;
  SandboxCa& operator=(const SandboxCa&) = delete;

  // The CA certificate in PEM, for the sandbox's trust bundle.
  [[nodiscard]] const std::string& CertificatePem() const { return ca_pem_; }

  // A server context presenting a leaf certificate for `host` (chain: leaf, CA), HTTP/1.1 offered
  // by ALPN. Refused (kInvalidInput) for a host the CA was not made for: the proxy terminates TLS
  // only for bound hosts. The context is shared: the same for every call with the same host.
  Result<std::shared_ptr<ssl_ctx_st>> ServerContextFor(const std::string& host);

  // Mints a leaf for any name, bypassing the bound-host check: for the tests that show the name
  // constraints refuse it. PEM of the certificate.
  Result<std::string> MintLeafPemForTest(const std::string& host);

 private:
  explicit SandboxCa(SandboxCaOptions options) : options_(std::move(options)) {}
  Status Init();
  struct Leaf;
  Result<Leaf> MintLeaf(const std::string& host);

  SandboxCaOptions options_;
  evp_pkey_st* key_ = nullptr;
  x509_st* cert_ = nullptr;
  std::string ca_pem_;
  std::map<std::string, std::shared_ptr<ssl_ctx_st>> contexts_;
};

}  // namespace cagent::launcher::egress
