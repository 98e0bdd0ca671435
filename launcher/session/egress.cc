#include "launcher/session/egress.h"

#include <boost/asio/post.hpp>
#include <utility>
#include <variant>

#include "launcher/sandbox/rlimits.h"
#include "policy/language/diagnostics.h"
#include "policy/language/ir.h"
#include "policy/language/loader.h"
#include "policy/match/hosts.h"

namespace cagent::launcher::session {

namespace {

// The policy of a sandbox without network: every name is NXDOMAIN and nothing is decided (the
// stub is served without the proxy's listeners, so Decide is never asked).
class NoNetworkPolicy : public egress::Policy {
 public:
  void Decide(const egress::Destination&, std::function<void(egress::Decision)> done) override {
    done({false, "", "the sandbox has no network beyond loopback"});
  }
  [[nodiscard]] bool AddressNamed(std::string_view, std::uint16_t) const override { return false; }
  [[nodiscard]] bool MayResolve(std::string_view) const override { return false; }
};

}  // namespace

bool EgressSession::Applies(const LaunchSpec& spec) {
  return !spec.disabled.Has(Layer::kNetNamespace);
}

Result<std::unique_ptr<EgressSession>> EgressSession::Prepare(LaunchSpec& spec,
                                                              EgressSessionConfig config,
                                                              EgressSessionServices services) {
  std::unique_ptr<EgressSession> s(new EgressSession());
  s->filtered_ = config.policy != nullptr && config.policy->egress.value;
  config.hint.filtered = s->filtered_;
  s->tally_ = std::make_unique<RefusalTally>(config.hint);
  if (!s->filtered_) {
    if (config.credentials) {
      return PlainError("apply the profile's credentials",
                        "the sandbox has no filtered egress, and cagent's egress proxy is what "
                        "puts a credential's value into requests to its hosts; give the profile "
                        "network loopback and a hosts section allowing them")
          .WithCode(Error::Code::kInvalidInput);
    }
    // No network beyond loopback (or none): the no-network view, and the DNS stub alone once the
    // sandbox hands its sockets over. No io thread, gate or approver: nothing is ever asked.
    auto view = AddNoNetworkView(spec);
    if (!view) return view.error();
    s->view_ = std::move(*view);
    s->config_ = std::move(config);
    s->services_ = std::move(services);
    return s;
  }
  auto view = AddEgressView(spec, policy::HostPorts(*config.policy));
  if (!view) return view.error();
  s->view_ = std::move(*view);
  if (config.credentials) {
    if (!config.ca.ca || config.tls == nullptr) {
      return PlainError("apply the profile's credentials", "no CA was made for them");
    }
    CredentialViewOptions cv;
    for (const auto& [name, placeholder] : config.credentials->env) {
      cv.env.push_back({name, placeholder});
    }
    for (const auto& [path, placeholder] : config.credentials->files) {
      cv.files.push_back({path, placeholder});
    }
    cv.caller_home = config.binding.home;
    cv.ca_pem = config.ca.certificate_pem;
    auto credential_view = AddCredentialView(spec, cv);
    if (!credential_view) return credential_view.error();
    s->credential_view_ = std::move(*credential_view);
  }
  if (services.io == nullptr) {
    s->own_io_ = std::make_unique<boost::asio::io_context>();
    s->work_.emplace(s->own_io_->get_executor());
    services.io = s->own_io_.get();
    s->io_thread_ = std::thread([io = s->own_io_.get()] { io->run(); });
  }
  broker::EgressGateConfig gate_config;
  gate_config.policy = config.policy;
  gate_config.binding = config.binding;
  gate_config.approval = config.approval;
  gate_config.phase = config.phase;
  broker::EgressGateServices gate_services;
  gate_services.io = services.io;
  gate_services.approver = services.approver;
  gate_services.approvals = services.approvals;
  gate_services.audit = services.audit;
  s->gate_ = std::make_shared<broker::EgressGate>(std::move(gate_config), std::move(gate_services));
  s->config_ = std::move(config);
  s->services_ = std::move(services);
  return s;
}

EgressSession::~EgressSession() { Stop(); }

Status EgressSession::Start(std::vector<UniqueFd> fds) {
  auto lookup_refused = [this](const std::string& name) {
    const std::string hint = tally_->OnLookupRefused(name);
    if (!hint.empty() && services_.on_hint) services_.on_hint(hint);
  };
  if (!filtered_) {
    if (fds.size() <= view_.dns_index || fds.size() <= view_.dns_tcp_index) {
      return PlainError("the sandbox handed over fewer sockets than the no-network view made");
    }
    egress::ProxyConfig pc;
    pc.dns_fd = fds[view_.dns_index].Release();
    pc.dns_tcp_fd = fds[view_.dns_tcp_index].Release();
    pc.on_lookup_refused = lookup_refused;
    auto proxy = egress::Proxy::Start(std::move(pc), std::make_shared<NoNetworkPolicy>(), nullptr);
    if (!proxy) return proxy.error();
    proxy_ = std::move(*proxy);
    return Ok{};
  }
  if (fds.size() <= view_.dns_index || fds.size() <= view_.proxy_index) {
    return PlainError("the sandbox handed over fewer sockets than the egress view made");
  }
  egress::ProxyConfig pc;
  pc.on_lookup_refused = lookup_refused;
  pc.proxy_fd = fds[view_.proxy_index].Release();
  pc.dns_fd = fds[view_.dns_index].Release();
  for (const std::size_t i : view_.transparent_indexes) {
    if (i < fds.size()) pc.transparent_fds.push_back(fds[i].Release());
  }
  pc.overrides = config_.overrides;
  const broker::EgressBudgets profile = broker::EgressBudgetsFromPolicy(*config_.policy);
  auto lower = [](std::uint64_t a, std::uint64_t b) {
    if (a == 0) return b;
    if (b == 0) return a;
    return a < b ? a : b;
  };
  pc.max_bytes = lower(profile.bytes, config_.budgets.bytes);
  pc.max_connections = lower(profile.connections, config_.budgets.connections);
  if (config_.credentials && config_.ca.ca) {
    pc.intercept.ca = config_.ca.ca;
    pc.intercept.tls = config_.tls;
    pc.intercept.credentials = config_.credentials->credentials;
    pc.intercept.upstream_ca_file = config_.upstream_ca_file;
    pc.intercept.on_exchange = [this](const egress::ExchangeRecord& record) {
      {
        const std::lock_guard<std::mutex> lock(mu_);
        exchanges_.push_back(record);
      }
      gate_->RecordExchange(record);
      if (services_.on_exchange) services_.on_exchange(record);
    };
  }
  auto proxy =
      egress::Proxy::Start(std::move(pc), gate_, [this](const egress::ConnectionRecord& record) {
        {
          const std::lock_guard<std::mutex> lock(mu_);
          records_.push_back(record);
        }
        gate_->Record(record);
        if (services_.on_record) services_.on_record(record);
        const std::string hint = tally_->OnConnection(record);
        if (!hint.empty() && services_.on_hint) services_.on_hint(hint);
      });
  if (!proxy) return proxy.error();
  proxy_ = std::move(*proxy);
  return Ok{};
}

void EgressSession::Stop() {
  if (proxy_) {
    proxy_->Stop();
    {
      const std::lock_guard<std::mutex> lock(mu_);
      final_totals_ = proxy_->totals();
      final_budget_ = proxy_->budget_exhausted();
    }
    proxy_.reset();
  }
  if (own_io_) {
    // What the gate posted (audit events, asks) runs first; pending asks are cancelled.
    if (services_.approver != nullptr) {
      boost::asio::post(*own_io_, [a = services_.approver] { a->Cancel(); });
    }
    work_.reset();
    if (io_thread_.joinable()) io_thread_.join();
    own_io_.reset();
  }
}

egress::Proxy::Totals EgressSession::totals() const {
  if (proxy_) return proxy_->totals();
  const std::lock_guard<std::mutex> lock(mu_);
  return final_totals_;
}

std::string EgressSession::budget_exhausted() const {
  if (proxy_) return proxy_->budget_exhausted();
  const std::lock_guard<std::mutex> lock(mu_);
  return final_budget_;
}

std::vector<egress::ConnectionRecord> EgressSession::records() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return records_;
}

std::vector<egress::ExchangeRecord> EgressSession::exchanges() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return exchanges_;
}

Result<std::shared_ptr<const policy::Policy>> PolicyAllowingHosts(
    const std::vector<std::string>& hosts) {
  std::string text =
      "description \"--allow-host on the command line\"\nnetwork loopback\nhosts {\n";
  for (const std::string& h : hosts) {
    auto parsed = policy::ParseHostPattern(h);
    if (const auto* err = std::get_if<policy::HostPatternError>(&parsed)) {
      return PlainError("--allow-host " + h + ": " + err->message +
                        (err->hint.empty() ? "" : " (" + err->hint + ")"))
          .WithCode(Error::Code::kInvalidInput);
    }
    text += "  allow " + std::get<policy::HostPattern>(parsed).Text() + "\n";
  }
  text += "}\n";
  policy::Compiled compiled =
      policy::CompileText("command-line.cagent", text, policy::SearchPath{});
  if (!compiled.ok()) {
    return PlainError("--allow-host: the hosts do not make a profile: " +
                      policy::RenderAll(*compiled.sources, compiled.diags))
        .WithCode(Error::Code::kInvalidInput);
  }
  return compiled.policy;
}

Result<std::vector<egress::ResolveOverride>> ParseResolveOverrides(
    const std::vector<std::string>& values) {
  std::vector<egress::ResolveOverride> out;
  for (const std::string& v : values) {
    auto o = egress::ParseResolveOverride(v);
    if (!o) {
      return PlainError("--resolve " + v + ": " + o.error().Message())
          .WithCode(Error::Code::kInvalidInput);
    }
    out.push_back(std::move(*o));
  }
  return out;
}

std::string DescribeExchange(const egress::ExchangeRecord& x) {
  std::string out = std::string(x.allowed               ? "allow "
                                : x.misdirected.empty() ? "deny "
                                                        : "refused ") +
                    x.request.method + " " +
                    policy::HostPortText(x.request.dest.host, x.request.dest.port) + " " +
                    x.request.path;
  if (!x.credentials.empty()) {
    out += " with";
    for (const std::string& c : x.credentials) out += " " + c;
  }
  if (!x.rule.empty()) out += " (rule " + x.rule + ")";
  if (x.allowed) {
    out += ": " + (x.status != 0 ? std::to_string(x.status) : std::string("no response")) + ", " +
           HumanReadableSize(x.bytes_up) + " up, " + HumanReadableSize(x.bytes_down) + " down, " +
           std::to_string(x.duration.count()) + " ms";
  } else {
    out += ": " + x.reason;
  }
  if (!x.error.empty()) out += "; " + x.error;
  return out;
}

std::string DescribeConnection(const egress::ConnectionRecord& r) {
  std::string out = std::string(r.allowed ? "allow " : "deny ") +
                    (r.dest.host.empty() ? std::string("(no host)")
                                         : policy::HostPortText(r.dest.host, r.dest.port)) +
                    " via " + std::string(egress::ViaName(r.dest.via));
  if (!r.address.empty()) out += " to " + r.address;
  if (!r.rule.empty()) out += " (rule " + r.rule + ")";
  if (r.allowed) {
    out += ": " + HumanReadableSize(r.bytes_up) + " up, " + HumanReadableSize(r.bytes_down) +
           " down, " + std::to_string(r.duration.count()) + " ms";
    if (!r.error.empty()) out += "; " + r.error;
  } else {
    out += ": " + r.reason;
    if (!r.error.empty()) out += "; " + r.error;
  }
  return out;
}

}  // namespace cagent::launcher::session
