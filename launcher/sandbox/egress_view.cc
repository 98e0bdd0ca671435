#include "launcher/sandbox/egress_view.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <utility>

#include "common/unique_fd.h"
#include "launcher/sandbox/netns.h"

namespace cagent::launcher {
namespace {

constexpr std::string_view kResolvConf =
    "# cagent: the sandbox's names come from cagent's DNS stub (filtered egress)\n"
    "nameserver 127.0.0.1\n"
    "options attempts:1 timeout:2\n";

// No network beyond loopback: the stub answers every name NXDOMAIN (egress_view.h says why).
constexpr std::string_view kLoopbackResolvConf =
    "# cagent: this sandbox has no network beyond loopback (network loopback): cagent's DNS stub\n"
    "# answers every name \"no such name\" (NXDOMAIN) at once; /etc/hosts still resolves.\n"
    "nameserver 127.0.0.1\n"
    "options attempts:1 timeout:1\n";

// network none: no server at all; nsswitch.conf keeps glibc from trying one.
constexpr std::string_view kNoneResolvConf =
    "# cagent: this sandbox has no network (network none): there is no name server, and\n"
    "# /etc/nsswitch.conf looks names up in /etc/hosts only, so any other name is \"not found\".\n";

// Retrying a lookup cannot help in a sandbox without network, and npm and pip retry every failed
// request, "no such name" included (npm 11: three attempts 10 s and 60 s apart, 73 s in all; pip:
// five, with backoff, 10 s): they are told not to, unless the profile or the caller sets the
// variable (or passes it) itself. npm reads its variables whatever their case.
constexpr std::array<std::pair<std::string_view, std::string_view>, 2> kNoRetries = {{
    {"npm_config_fetch_retries", "0"},
    {"PIP_RETRIES", "0"},
}};

bool SameNameIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The host's nsswitch.conf is read up to this size (it is a few hundred bytes).
constexpr std::size_t kMaxNsswitch = 64 * 1024;

void RemoveDir(const std::string& dir, const std::vector<std::string>& files) {
  if (dir.empty()) return;
  for (const std::string& f : files) (void)::unlink((dir + "/" + f).c_str());
  (void)::rmdir(dir.c_str());
}

// The host's /etc/nsswitch.conf, or nullopt when it cannot be read (or is larger than
// kMaxNsswitch).
std::optional<std::string> ReadHostNsswitch() {
  UniqueFd fd(::open("/etc/nsswitch.conf", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string text;
  char buf[4096];
  while (text.size() <= kMaxNsswitch) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return text;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return std::nullopt;
}

}  // namespace

EgressView::~EgressView() { RemoveDir(dir_, files_); }

EgressView::EgressView(EgressView&& other) noexcept
    : proxy_index(other.proxy_index),
      dns_index(other.dns_index),
      dns_tcp_index(other.dns_tcp_index),
      transparent_indexes(std::move(other.transparent_indexes)),
      transparent_ports(std::move(other.transparent_ports)),
      dir_(std::move(other.dir_)),
      files_(std::move(other.files_)) {
  other.dir_.clear();
  other.files_.clear();
}

EgressView& EgressView::operator=(EgressView&& other) noexcept {
  if (this != &other) {
    RemoveDir(dir_, files_);
    proxy_index = other.proxy_index;
    dns_index = other.dns_index;
    dns_tcp_index = other.dns_tcp_index;
    transparent_indexes = std::move(other.transparent_indexes);
    transparent_ports = std::move(other.transparent_ports);
    dir_ = std::move(other.dir_);
    files_ = std::move(other.files_);
    other.dir_.clear();
    other.files_.clear();
  }
  return *this;
}

Status EgressView::AddFile(const char* name, std::string_view text, const std::string& target,
                           LaunchSpec& spec) {
  if (dir_.empty()) {
    const char* runtime = std::getenv("XDG_RUNTIME_DIR");
    std::string base = runtime != nullptr && runtime[0] == '/' ? runtime : "/tmp";
    std::string tmpl = base + "/cagent-egress-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return ErrnoError("create a directory for the sandbox's " + std::string(name) + " under " +
                        base);
    }
    dir_ = tmpl;
  }
  const std::string file = dir_ + "/" + name;
  UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444));
  if (!fd.valid()) return ErrnoError("create " + file);
  files_.emplace_back(name);
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return ErrnoError("write " + file);
  }
  spec.file_binds.push_back({file, target});
  return Ok{};
}

std::string NsswitchWithoutDns(std::string_view text) {
  std::string out;
  bool seen_hosts = false;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || !line.substr(first).starts_with("hosts:")) {
      out.append(line).push_back('\n');
      continue;
    }
    // hosts: SOURCE [STATUS=action]... ; a comment after '#' is dropped with the line.
    std::string_view rest = line.substr(first + 6);
    rest = rest.substr(0, rest.find('#'));
    std::string kept;
    bool skipping = false;  // inside the [..] items of a source taken out
    std::size_t pos = 0;
    while (pos < rest.size()) {
      const std::size_t b = rest.find_first_not_of(" \t", pos);
      if (b == std::string_view::npos) break;
      std::size_t e = rest.find_first_of(" \t", b);
      if (e == std::string_view::npos) e = rest.size();
      std::string_view token = rest.substr(b, e - b);
      pos = e;
      if (token.starts_with('[')) {
        // An action item, perhaps spread over several tokens ("[NOTFOUND=return" "]").
        std::string item(token);
        while (item.find(']') == std::string::npos && pos < rest.size()) {
          const std::size_t nb = rest.find_first_not_of(" \t", pos);
          if (nb == std::string_view::npos) break;
          std::size_t ne = rest.find_first_of(" \t", nb);
          if (ne == std::string_view::npos) ne = rest.size();
          item.append(" ").append(rest.substr(nb, ne - nb));
          pos = ne;
        }
        if (!skipping && !kept.empty()) kept.append(" ").append(item);
        continue;
      }
      skipping = token == "dns" || token == "resolve";
      if (!skipping) kept.append(kept.empty() ? "" : " ").append(token);
    }
    if (seen_hosts) continue;  // glibc reads the first hosts line
    seen_hosts = true;
    out.append("hosts: ").append(kept.empty() ? "files" : kept).push_back('\n');
  }
  if (!seen_hosts) out.append("hosts: files\n");
  return out;
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
  if (auto s = view.AddFile("resolv.conf", kResolvConf, "/etc/resolv.conf", spec); !s) {
    return s.error();
  }
  return view;
}

std::vector<EnvVar> NoNetworkEnvironment() {
  std::vector<EnvVar> out;
  out.reserve(std::size(kNoRetries));
  for (const auto& [name, value] : kNoRetries) {
    out.push_back({std::string(name), std::string(value)});
  }
  return out;
}

Result<EgressView> AddNoNetworkView(LaunchSpec& spec) {
  if (spec.disabled.Has(Layer::kNetNamespace)) {
    return PlainError(
               "the sandbox shares the host's network (--disable-layer net): its name lookups are "
               "the host's")
        .WithCode(Error::Code::kInvalidInput);
  }
  // After everything the profile and the command line set (the first of a name wins), and not at
  // all when either sets or passes the variable.
  for (EnvVar& v : NoNetworkEnvironment()) {
    const bool given =
        std::any_of(spec.env_set.begin(), spec.env_set.end(),
                    [&](const EnvVar& e) { return SameNameIgnoringCase(e.name, v.name); }) ||
        std::any_of(spec.env_pass.begin(), spec.env_pass.end(),
                    [&](const std::string& n) { return SameNameIgnoringCase(n, v.name); });
    if (!given) spec.env_set.push_back(std::move(v));
  }
  EgressView view;
  if (spec.network == NetworkMode::kNone) {
    if (auto s = view.AddFile("resolv.conf", kNoneResolvConf, "/etc/resolv.conf", spec); !s) {
      return s.error();
    }
    if (const auto host = ReadHostNsswitch()) {
      if (auto s =
              view.AddFile("nsswitch.conf", NsswitchWithoutDns(*host), "/etc/nsswitch.conf", spec);
          !s) {
        return s.error();
      }
    }
    return view;
  }
  if (spec.net_listeners.size() + 2 > kMaxListeners) {
    return PlainError("the sandbox already has " + std::to_string(spec.net_listeners.size()) +
                      " listeners; the DNS stub needs two more")
        .WithCode(Error::Code::kInvalidInput);
  }
  spec.net_listeners.push_back({NetListener::Kind::kUdp, "127.0.0.1", kEgressDnsPort});
  view.dns_index = spec.net_listeners.size() - 1;
  spec.net_listeners.push_back({NetListener::Kind::kTcp, "127.0.0.1", kEgressDnsPort});
  view.dns_tcp_index = spec.net_listeners.size() - 1;
  if (auto s = view.AddFile("resolv.conf", kLoopbackResolvConf, "/etc/resolv.conf", spec); !s) {
    return s.error();
  }
  return view;
}

}  // namespace cagent::launcher
