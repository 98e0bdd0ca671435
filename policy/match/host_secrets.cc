#include "policy/match/host_secrets.h"

#include <array>

namespace cagent::policy {
namespace {

// Keep sorted (a unit test checks). Only paths that hold credentials for other systems: a whole
// directory where the tool keeps nothing else a build needs (.ssh, .gnupg, .aws, .azure,
// gcloud's and gh's configuration), the single file where the directory also holds caches a
// build may use (.cargo/registry, .docker/buildx, .kube/cache).
constexpr std::array<std::string_view, 17> kPaths = {
    ".aws",                // AWS access keys and SSO tokens
    ".azure",              // Azure CLI tokens
    ".cargo/credentials",  // crates.io token (old name)
    ".cargo/credentials.toml",
    ".config/gcloud",           // Google Cloud credentials
    ".config/gh",               // GitHub CLI tokens
    ".config/git/credentials",  // git's credential store (XDG location)
    ".config/hub",              // hub's GitHub token
    ".docker/config.json",      // registry auths
    ".git-credentials",         // git's credential store
    ".gnupg",                   // private keys, gpg-agent sockets
    ".kube/config",             // cluster credentials
    ".netrc",                   // machine passwords (curl, git, ftp)
    ".npmrc",                   // registry tokens
    ".pypirc",                  // PyPI tokens
    ".ssh",                     // keys, agent configuration, known hosts
    ".vault-token",             // HashiCorp Vault token
};

}  // namespace

std::span<const std::string_view> HostSecretPaths() { return kPaths; }

bool IsHostSecretPath(std::string_view rel) {
  for (std::string_view p : kPaths) {
    if (rel == p) return true;
    if (rel.size() > p.size() && rel.starts_with(p) && rel[p.size()] == '/') return true;
  }
  return false;
}

}  // namespace cagent::policy
