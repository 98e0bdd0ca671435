#include "launcher/egress/tls/openssl_tls.h"

#include <utility>

#include "launcher/egress/tls/intercept.h"
#include "launcher/egress/tls/sandbox_ca.h"

namespace cagent::launcher::egress {
namespace {

class OpenSsl final : public Tls {
 public:
  Result<MadeCa> MakeCa(SandboxCaOptions options) const override {
    auto made = SandboxCa::Make(std::move(options));
    if (!made) return made.error();
    MadeCa out;
    out.certificate_pem = (*made)->CertificatePem();
    out.ca = std::move(*made);
    return out;
  }

  Result<std::shared_ptr<ssl_ctx_st>> ServerContextFor(SandboxCa& ca,
                                                       const std::string& host) const override {
    return ca.ServerContextFor(host);
  }

  Result<std::shared_ptr<ssl_ctx_st>> MakeUpstreamContext(
      const std::string& ca_file) const override {
    return egress::MakeUpstreamContext(ca_file);
  }

  std::shared_ptr<InterceptionHandle> Intercept(
      boost::asio::ip::tcp::socket& client, boost::asio::ip::tcp::socket& upstream,
      InterceptSetup setup, InterceptHooks hooks, std::shared_ptr<void> keep,
      std::function<void(const InterceptEnd&)> done) const override {
    return std::make_shared<Interception>(client, upstream, std::move(setup), std::move(hooks),
                                          std::move(keep), std::move(done));
  }
};

}  // namespace

const Tls& OpenSslTls() {
  static const OpenSsl tls;
  return tls;
}

}  // namespace cagent::launcher::egress
