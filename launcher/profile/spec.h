// From a compiled profile (policy::Policy) to the LaunchSpec of one sandbox.
//
// Runs in cagent, before anything is cloned. It resolves what the pure policy leaves symbolic: "~"
// becomes the caller's home, workspace-relative paths the canonical workspace, environment
// patterns are matched against the caller's environment, and the filesystem deny globs are
// expanded against what exists in the workspace now:
//   - `deny GLOB` (read and write): every existing match is hidden (an empty file or directory is
//     mounted over it);
//   - `deny write GLOB`: every existing match is bound read-only over itself; a glob "dir/**"
//     covers the directory itself, so nothing can be created in it either.
// Files created later that match a glob are not covered by mounts; the agent's tools and the run's
// patch check (which judge paths by the same rules) cover them. The walk never follows symlinks
// and stops with an error past kMaxWorkspaceEntries, so a huge tree cannot stall or silently
// escape the rules.
//
// The workspace is hostile input here: no host path derived from its content is ever added to the
// view. Every workspace path (mounts of ./x, hide entries, the deny walk) is opened beneath a
// workspace fd with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), never by its string:
//   - a read-only / read-write entry with a symlinked component is skipped with a note;
//   - a deny rule (or hide entry) that meets a symlink covers what the link leads to *in the
//     sandbox's view*, resolved component by component in the trees the view shows, and only if
//     the view shows it already: a target the view shows read-write is re-bound read-only onto
//     itself (deny write) or hidden (deny); one shown read-only needs nothing for deny write, and
//     is hidden for deny only when it is workspace content; one outside the view, in the
//     sandbox's private trees (/tmp, HOME, /dev, /proc) or missing is left alone with a note
//     (reading through the link finds nothing of the host's). A mount cannot cover the link
//     itself: writes to its name are judged by the broker's path rules and the run's patch check.
//   - an absolute or ~ path whose host resolution passes through the workspace is workspace
//     content too, and skipped with a note.
// What this file checks can change before mountns binds it (a process writing to the workspace
// concurrently); mountns resolves each bind again when it builds the view.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "launcher/sandbox/launch_spec.h"
#include "policy/language/binding.h"
#include "policy/language/ir.h"

namespace cagent::launcher {

inline constexpr std::size_t kMaxWorkspaceEntries = 500000;

// What one sandbox is built from besides the profile: the run's binding (policy/language/binding.h:
// the workspace, what "~" means, the sandbox's own HOME) and the caller's environment.
struct ProfileContext {
  ProfileContext() = default;
  ProfileContext(policy::Binding b, std::vector<std::string> env)
      : binding(std::move(b)), environ(std::move(env)) {}

  policy::Binding binding;           // binding.home "" = none: ~ paths are skipped
  std::vector<std::string> environ;  // the caller's environment, "NAME=value"
  // Where the profile's `cache` directories live on the host (launcher/profile/caches.h,
  // CacheRoot());
  // "" = caches are not mounted (noted).
  std::string cache_root;
  // The caches' per-repository key (launcher/profile/repo_profiles.h, CacheScope); "" = the key of
  // the repository holding binding.workspace. A run sets the caller's repository's: its workspace
  // is a copy under the state directory (issue 32).
  std::string cache_scope;
  // Setup (trusted commands before the agent): every cache writable. Otherwise only the caches
  // the profile marks `read-write` are, the rest read-only.
  bool caches_writable = false;
  // The caller's checkout whose `carry` paths are shown read-only at the same place in the
  // workspace (`cagent run`); "" = the profile's carry list is not applied (noted).
  std::string carry_from;
  // The caller's git identity as variables to set inside (GIT_AUTHOR_NAME, ...; made by
  // session::CallerGitIdentity, launcher/session/git_identity.h), set unless the profile says
  // `git-identity none`. Empty: none.
  std::vector<EnvVar> git_identity;
};

// The binding of a run or a sandbox started by this caller over `workspace` (canonical): "~" is
// CallerHome(), the sandbox's HOME the launcher's default. Made once per run and passed to the
// view, the broker, the patch check and `policy explain` alike.
policy::Binding RunBinding(const std::string& workspace);

struct ProfileLaunch {
  LaunchSpec spec;
  // What the profile named but this machine does not have, and what the deny globs covered, for
  // `--json` and verbose output ("skipped ~/.rustup: does not exist").
  std::vector<std::string> notes;
};

// `ctx.binding.workspace` must be canonical (CanonicalDirectory); the spec's HOME is
// `ctx.binding.sandbox_home`. Fails when a deny glob cannot be applied (an unreadable tree, more
// than kMaxWorkspaceEntries entries, a directory swapped during the walk) or the workspace cannot
// be opened. Notes name workspace paths through TerminalSafe.
Result<ProfileLaunch> SpecFromPolicy(const policy::Policy& policy, std::vector<std::string> argv,
                                     const ProfileContext& ctx);

// Hides the host secret set (policy/match/host_secrets.h: ~/.ssh, ~/.aws, .npmrc, ...) in `spec`'s
// view, as SpecFromPolicy does for a profile's: under the caller's `home` ("" = none) wherever the
// view shows it, and at the workspace's top level. For the launcher's default view and what the
// command line added to it (exec --ro/--rw); call it after the last bind is added. Workspace paths
// are resolved beneath a workspace fd, never following a workspace symlink on the host; a symlink
// in the set is judged like a deny rule on a link (its target is hidden where the view shows it).
// Binds inside the set are dropped. Notes say what was hidden or skipped. Fails when the workspace
// cannot be opened. Runs in cagent.
Status HideHostSecrets(LaunchSpec& spec, const std::string& home, std::vector<std::string>& notes);

// Whether resolving host path `path` the way the kernel would (every symlink followed, at most
// 40) passes through `dir` (canonical) at any step, `path` itself included. Such a path is not the
// host's: its remaining components are `dir`'s content. Used so that a profile's absolute or ~
// path is never resolved through the workspace (`read-only ~/.config/x` with the home inside the
// workspace and .config -> /etc), and by `cagent profile init` for the repository. lstat/readlink
// only; runs in cagent.
bool HostResolutionEnters(const std::string& path, const std::string& dir);

// The caller's home: $HOME when it is absolute, else the passwd entry, else "".
std::string CallerHome();
// The caller's environment as "NAME=value" strings (for ProfileContext::environ).
std::vector<std::string> CallerEnviron();

// Expands ~/ at the start of each ':'-separated element of an environment value.
std::string ExpandHomeInValue(const std::string& value, const std::string& home);

}  // namespace cagent::launcher
