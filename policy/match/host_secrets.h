// The host secret set: the files and directories of a home directory through which a process
// reaches the caller's other systems (SSH and GPG keys, cloud, registry and forge credentials).
//
// One list, read by both sides: the launcher hides these paths in every sandbox (exec with or
// without a profile, the agent's, verification, mcp serve/wrap; launcher/profile/spec.h,
// HideHostSecrets), and the policy engine judges them hidden (policy/language/engine.cc), so
// `cagent policy explain read ~/.ssh/id_ed25519` and the sandbox say the same.
//
// Where they are hidden, relative to two roots:
//   - the caller's home, wherever the sandbox's view shows it (a workspace that contains it, a
//     profile's `read-only ~/.cargo`, an exec --ro): ~/.ssh, ~/.aws, ...;
//   - the workspace's top level: WORKSPACE/.ssh, WORKSPACE/.npmrc, ... (a dotfiles checkout, a
//     workspace that is the home itself).
// Copies deeper in a project (src/fixtures/.ssh) are not in the set; the built-in profiles' deny
// globs (**/id_rsa*, **/.netrc, **/.env, ...) cover the usual names at any depth.
//
// .npmrc is in the set wherever it is (it holds registry tokens as `_authToken`/`_auth`/
// `_password`), so a project's registry settings in it are hidden too: set them in the
// environment instead (npm_config_registry=...). A project's .env files are the project's, not the
// host's: profiles deny them (base.cagent, `deny **/.env`); `cagent exec` without a profile shows
// them unless --hide names them.
#pragma once

#include <span>
#include <string_view>

namespace cagent::policy {

// Relative, normalised paths ("a/b", no "." or ".."), sorted. Each names a file or a directory;
// a directory is hidden as a whole.
std::span<const std::string_view> HostSecretPaths();

// Whether `rel` (relative, normalised) is one of HostSecretPaths() or lies below one.
bool IsHostSecretPath(std::string_view rel);

}  // namespace cagent::policy
