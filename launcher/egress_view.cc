#include "launcher/egress_view.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "common/unique_fd.h"
#include "launcher/netns.h"

namespace cagent::launcher {
namespace {

constexpr std::string_view kResolvConf =
    "# cagent: the sandbox's names come from cagent's DNS stub (filtered egress)\n"
    "nameserver 127.0.0.1\n"
    "options attempts:1 timeout:2\n";

void RemoveDir(const std::string& dir) {
  if (dir.empty()) return;
  (void)::unlink((dir + "/resolv.conf").c_str());
  (void)::rmdir(dir.c_str());
}

}  // namespace

EgressView::~EgressView() { RemoveDir(dir_); }

EgressView::EgressView(EgressView&& other) noexcept
    : proxy_index(other.proxy_index),
      dns_index(other.dns_index),
      transparent_indexes(std::move(other.transparent_indexes)),
      transparent_ports(std::move(other.transparent_ports)),
      dir_(std::move(other.dir_)) {
  other.dir_.clear();
}

EgressView& EgressView::operator=(EgressView&& other) noexcept {
  if (this != &other) {
    RemoveDir(dir_);
    proxy_index = other.proxy_index;
    dns_index = other.dns_index;
    transparent_indexes = std::move(other.transparent_indexes);
    transparent_ports = std::move(other.transparent_ports);
    dir_ = std::move(other.dir_);
    other.dir_.clear();
  }
  return *this;
}

std::vector<EnvVar> EgressEnvironment() {
  const std::string http = "http://127.0.0.1:" + std::to_string(kEgressProxyPort);
  const std::string socks = "socks5h://127.0.0.1:" + std::to_string(kEgressProxyPort);
  const std::string local = "localhost,127.0.0.1,::1";
  return {
      {"HTTP_PROXY", http},       {"http_proxy", http},
      {"HTTPS_PROXY", http},      {"https_proxy", http},
      {"ALL_PROXY", socks},       {"all_proxy", socks},
      {"NO_PROXY", local},        {"no_proxy", local},
      {"npm_config_proxy", http}, {"npm_config_https_proxy", http},
  };
}

Result<EgressView> AddEgressView(LaunchSpec& spec, std::span<const std::uint16_t> ports) {
  if (spec.network != NetworkMode::kLoopback || spec.disabled.Has(Layer::kNetNamespace)) {
    return PlainError(
               "filtered egress needs loopback networking in the sandbox's own network "
               "namespace (network loopback, the net layer on)")
        .WithCode(Error::Code::kInvalidInput);
  }
  EgressView view;
  auto add = [&spec](NetListener::Kind kind, const char* address, std::uint16_t port) {
    spec.net_listeners.push_back({kind, address, port});
    return spec.net_listeners.size() - 1;
  };
  view.proxy_index = add(NetListener::Kind::kTcp, "127.0.0.1", kEgressProxyPort);
  view.dns_index = add(NetListener::Kind::kUdp, "127.0.0.1", kEgressDnsPort);
  for (const std::uint16_t port : ports) {
    if (port == kEgressProxyPort || port == kEgressDnsPort || port == 0) continue;
    if (std::find(view.transparent_ports.begin(), view.transparent_ports.end(), port) !=
        view.transparent_ports.end()) {
      continue;
    }
    view.transparent_indexes.push_back(add(NetListener::Kind::kTcp, "0.0.0.0", port));
    view.transparent_ports.push_back(port);
  }
  if (spec.net_listeners.size() > kMaxListeners) {
    return PlainError("filtered egress can capture at most " + std::to_string(kMaxListeners - 2) +
                      " ports; the hosts rules name " +
                      std::to_string(view.transparent_ports.size()))
        .WithCode(Error::Code::kInvalidInput);
  }

  // The environment: ours first (the first of a name wins), and the caller's values of these
  // names never pass.
  std::vector<EnvVar> env = EgressEnvironment();
  auto ours = [&env](std::string_view name) {
    return std::any_of(env.begin(), env.end(), [&](const EnvVar& v) { return v.name == name; });
  };
  std::erase_if(spec.env_set, [&](const EnvVar& v) { return ours(v.name); });
  std::erase_if(spec.env_pass, [&](const std::string& n) { return ours(n); });
  spec.env_set.insert(spec.env_set.begin(), env.begin(), env.end());

  // resolv.conf, in a directory of our own.
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  std::string base = runtime != nullptr && runtime[0] == '/' ? runtime : "/tmp";
  std::string tmpl = base + "/cagent-egress-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return ErrnoError("create a directory for the sandbox's resolv.conf under " + base);
  }
  view.dir_ = tmpl;
  const std::string file = tmpl + "/resolv.conf";
  UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444));
  if (!fd.valid()) return ErrnoError("create " + file);
  if (::write(fd.get(), kResolvConf.data(), kResolvConf.size()) !=
      static_cast<ssize_t>(kResolvConf.size())) {
    return ErrnoError("write " + file);
  }
  spec.file_binds.push_back({file, "/etc/resolv.conf"});
  return view;
}

}  // namespace cagent::launcher
