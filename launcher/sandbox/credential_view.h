// The sandbox's side of credentials that never enter it (issue 36): what the launch adds so that
// the sandbox holds only placeholders, and trusts the CA cagent's proxy presents for the hosts a
// credential is bound to. Runs in cagent (trusted), before the launch; nothing here ever sees a
// real value (the caller passes placeholders), so nothing here can leak one.
//
// What the sandbox sees (HOME below is LaunchSpec::home, the sandbox's private HOME):
//   - each env credential's variable = its placeholder, set last (LaunchSpec::env_override): no
//     `env { pass ... }`, `--pass-env` or `set` of the same name can bring the real value in;
//   - each file credential: a file holding the placeholder (and a newline) at its path. A path
//     below the caller's home lands at the same place below HOME (a HomeFile, mode 0600), and is
//     also shown over the caller's own file when the view shows that (a profile binding ~/.config
//     read-only); any other path is shown read-only (a FileBind from this view's directory) over
//     the file at that path, which the view must show (else the launch fails, saying so);
//   - the trust bundle: HOME/.cagent/ca-bundle.pem (the host's system bundle, when it has one,
//     followed by the sandbox CA's certificate) and HOME/.cagent/cagent-ca.pem (the CA alone),
//     mode 0444; the bundle also shown read-only over /etc/ssl/certs/ca-certificates.crt when the
//     view shows that file; SSL_CERT_FILE, CURL_CA_BUNDLE, REQUESTS_CA_BUNDLE, GIT_SSL_CAINFO and
//     PIP_CERT = the bundle, NODE_EXTRA_CA_CERTS = the CA alone (Node adds it to its own roots),
//     all set last like the placeholders (without them the proxy's certificate is not trusted).
// HOME is the one directory every view has and the sandbox owns; the sandbox may overwrite these
// files, which only changes what it trusts itself.
//
// Refused (kInvalidInput): a spec without the mount view or without its own pid namespace. The
// first shows the host's files (the credential file itself), the second the host's /proc, where
// cagent's own environment (/proc/PID/environ) holds the real value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "launcher/sandbox/launch_spec.h"

namespace cagent::launcher {

struct CredentialViewOptions {
  // Variables to set inside: the credential's variable name and its placeholder.
  std::vector<EnvVar> env;
  struct File {
    std::string host_path;    // absolute, normalised: where the tool looks for it (~ expanded)
    std::string placeholder;  // what the file holds inside
  };
  std::vector<File> files;
  // The caller's home ("~" of the profile); "" = none (every file path is handled as absolute).
  std::string caller_home;
  // The sandbox CA's certificate (PEM); "" = no trust bundle (nothing is intercepted).
  std::string ca_pem;
  // The host's trust bundle put before the CA ("" or a missing file: the CA alone).
  std::string system_bundle = "/etc/ssl/certs/ca-certificates.crt";
};

// The bundle's and the CA's paths inside, below `home` (the spec's HOME).
std::string CaBundlePathInside(std::string_view home);
std::string CaCertificatePathInside(std::string_view home);

// The variables that point clients at the bundle (all but NODE_EXTRA_CA_CERTS) or at the CA
// alone (NODE_EXTRA_CA_CERTS), in the order they are set.
std::vector<std::string> CaBundleVariables();

// What AddCredentialView wrote: its private directory (mode 0700, under $XDG_RUNTIME_DIR or
// /tmp), removed with its files by the destructor.
class CredentialView {
 public:
  CredentialView() = default;
  ~CredentialView();
  CredentialView(CredentialView&& other) noexcept;
  CredentialView& operator=(CredentialView&& other) noexcept;
  CredentialView(const CredentialView&) = delete;
  CredentialView& operator=(const CredentialView&) = delete;

  // The directory holding the files bound into the view; "" before anything was written.
  [[nodiscard]] const std::string& dir() const { return dir_; }

 private:
  friend Result<CredentialView> AddCredentialView(LaunchSpec& spec,
                                                  const CredentialViewOptions& options);
  // Writes `text` to `name` in dir_ (made on first use), mode 0444; its host path.
  Result<std::string> WriteFile(const std::string& name, std::string_view text);
  std::string dir_;
  std::vector<std::string> files_;
};

// Adds the above to `spec`. Fails (kInvalidInput) for a spec without the mount view or its own
// pid namespace, a file path that is not absolute and normalised, or a variable named twice;
// (kFailed) when the directory or a file cannot be written.
Result<CredentialView> AddCredentialView(LaunchSpec& spec, const CredentialViewOptions& options);

}  // namespace cagent::launcher
