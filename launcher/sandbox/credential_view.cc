#include "launcher/sandbox/credential_view.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>

#include "common/unique_fd.h"

namespace cagent::launcher {
namespace {

constexpr std::string_view kCaDir = "/.cagent";
constexpr std::string_view kBundleName = "ca-bundle.pem";
constexpr std::string_view kCaName = "cagent-ca.pem";
constexpr std::string_view kSystemBundleTarget = "/etc/ssl/certs/ca-certificates.crt";
// A system bundle is a few hundred KiB; anything much larger is not one.
constexpr std::size_t kMaxBundle = 16U << 20;

Error Invalid(const std::string& why) {
  return PlainError("show credentials to the sandbox", why).WithCode(Error::Code::kInvalidInput);
}

void RemoveDir(const std::string& dir, const std::vector<std::string>& files) {
  if (dir.empty()) return;
  for (const std::string& f : files) (void)::unlink((dir + "/" + f).c_str());
  (void)::rmdir(dir.c_str());
}

// The host's trust bundle (the host's own file: trusted, so a link to it is followed); nullopt
// when there is none. An unreadable or oversized one is an error: a bundle without the system
// roots would break every other TLS connection of the sandbox.
Result<std::optional<std::string>> ReadSystemBundle(const std::string& path) {
  if (path.empty()) return std::optional<std::string>();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<std::string>();
    return ErrnoError("open " + path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return PlainError("read " + path, "not a regular file");
  }
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("read " + path);
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxBundle) {
      return PlainError("read " + path, "larger than " + std::to_string(kMaxBundle) + " bytes");
    }
  }
  return std::optional<std::string>(std::move(text));
}

bool Below(const std::string& path, const std::string& dir) {
  return !dir.empty() && path.size() > dir.size() && path.starts_with(dir) &&
         (dir == "/" || path[dir.size()] == '/');
}

}  // namespace

std::string CaBundlePathInside(std::string_view home) {
  return std::string(home) + std::string(kCaDir) + "/" + std::string(kBundleName);
}

std::string CaCertificatePathInside(std::string_view home) {
  return std::string(home) + std::string(kCaDir) + "/" + std::string(kCaName);
}

std::vector<std::string> CaBundleVariables() {
  return {"SSL_CERT_FILE",  "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE",
          "GIT_SSL_CAINFO", "PIP_CERT",       "NODE_EXTRA_CA_CERTS"};
}

CredentialView::~CredentialView() { RemoveDir(dir_, files_); }

CredentialView::CredentialView(CredentialView&& other) noexcept
    : dir_(std::move(other.dir_)), files_(std::move(other.files_)) {
  other.dir_.clear();
  other.files_.clear();
}

CredentialView& CredentialView::operator=(CredentialView&& other) noexcept {
  if (this != &other) {
    RemoveDir(dir_, files_);
    dir_ = std::move(other.dir_);
    files_ = std::move(other.files_);
    other.dir_.clear();
    other.files_.clear();
  }
  return *this;
}

Result<std::string> CredentialView::WriteFile(const std::string& name, std::string_view text) {
  if (dir_.empty()) {
    const char* runtime = std::getenv("XDG_RUNTIME_DIR");
    const std::string base = runtime != nullptr && runtime[0] == '/' ? runtime : "/tmp";
    std::string tmpl = base + "/cagent-credentials-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return ErrnoError("create a directory for the sandbox's credential files under " + base);
    }
    dir_ = tmpl;
  }
  const std::string file = dir_ + "/" + name;
  UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444));
  if (!fd.valid()) return ErrnoError("create " + file);
  files_.push_back(name);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("write " + file);
    done += static_cast<std::size_t>(n);
  }
  return file;
}

Result<CredentialView> AddCredentialView(LaunchSpec& spec, const CredentialViewOptions& options) {
  // Without these layers the sandbox sees the host's files or cagent's /proc (see the header).
  if (spec.disabled.Has(Layer::kMountView)) {
    return Invalid(
        "the mount view (the fs layer) is off, so the sandbox sees the host's files, a "
        "credential's file among them; drop --disable-layer fs, or the credentials section");
  }
  if (spec.disabled.Has(Layer::kPidNamespace)) {
    return Invalid(
        "the pid namespace is off, so the sandbox sees the host's /proc, where cagent's own "
        "environment holds the real values; drop --disable-layer pid, or the credentials section");
  }
  CredentialView view;
  std::vector<EnvVar> overrides;
  std::set<std::string> names;
  auto set_last = [&](const std::string& name, const std::string& value) -> Status {
    if (!names.insert(name).second) {
      return Invalid("the variable " + name +
                     " is given twice (two credentials, or a credential "
                     "named like one of the CA bundle's variables)");
    }
    overrides.push_back({name, value});
    return Ok{};
  };
  for (const EnvVar& v : options.env) {
    if (auto s = set_last(v.name, v.value); !s) return s.error();
  }

  std::size_t n = 0;
  for (const CredentialViewOptions::File& f : options.files) {
    if (f.host_path.empty() || f.host_path[0] != '/') {
      return Invalid("a credential file's path must be absolute (got '" + f.host_path + "')");
    }
    const std::string content = f.placeholder + "\n";
    auto written = view.WriteFile("credential-" + std::to_string(++n), content);
    if (!written) return written.error();
    if (Below(f.host_path, options.caller_home)) {
      // ~/...: in the sandbox's own HOME at the same place, and over the caller's file where
      // the view shows the caller's home (a profile binding ~/.config read-only).
      spec.home_files.push_back(
          {spec.home + f.host_path.substr(options.caller_home.size()), content, 0600});
      spec.file_binds.push_back({*written, f.host_path, /*required=*/false});
    } else {
      spec.file_binds.push_back({*written, f.host_path, /*required=*/true});
    }
  }

  if (!options.ca_pem.empty()) {
    auto system = ReadSystemBundle(options.system_bundle);
    if (!system) return std::move(system).Context("the sandbox's trust bundle").error();
    std::string bundle = system->value_or("");
    if (!bundle.empty() && !bundle.ends_with('\n')) bundle += '\n';
    bundle += options.ca_pem;
    auto bundle_file = view.WriteFile(std::string(kBundleName), bundle);
    if (!bundle_file) return bundle_file.error();
    auto ca_file = view.WriteFile(std::string(kCaName), options.ca_pem);
    if (!ca_file) return ca_file.error();
    const std::string bundle_inside = CaBundlePathInside(spec.home);
    const std::string ca_inside = CaCertificatePathInside(spec.home);
    spec.home_files.push_back({bundle_inside, bundle, 0444});
    spec.home_files.push_back({ca_inside, options.ca_pem, 0444});
    // Clients that read the system's path whatever the variables say (Go, Java with the
    // system store, anything statically configured) find the same bundle there.
    spec.file_binds.push_back({*bundle_file, std::string(kSystemBundleTarget), false});
    for (const std::string& name : CaBundleVariables()) {
      const std::string& path = name == "NODE_EXTRA_CA_CERTS" ? ca_inside : bundle_inside;
      if (auto s = set_last(name, path); !s) return s.error();
    }
  }

  // Set last: replace whatever an earlier step set under these names.
  std::erase_if(spec.env_override, [&](const EnvVar& v) { return names.contains(v.name); });
  spec.env_override.insert(spec.env_override.end(), overrides.begin(), overrides.end());
  return view;
}

}  // namespace cagent::launcher
