// A repository's own profiles kept outside it (issue 32), and the per-repository key of its
// caches. Runs in cagent (trusted), before anything is built.
//
// `cagent profile init` writes a repository's profile to CONFIG/repos/KEY/NAME.cagent (CONFIG is
// policy::ConfigDir: ~/.config/cagent by default), not into the repository: a profile there needs
// no commit, never makes the tree dirty, never rides into a run's workspace or patch, and the
// repository's content cannot change it. KEY names the repository by where it is on this machine:
// the sanitised name of its top-level directory and the first 12 hex digits of the SHA-256 of
// that directory's canonical path ("app-3f1c0b9e2d4a"). Nothing read from the repository steers
// the path: its top level is found by lstat of ".git" entries on the way up from the directory
// (as policy::ProjectProfileDir does), its name and key come from the caller's own path to it.
// A repository moved or cloned elsewhere is another KEY (its profile is not found there; `cagent
// profile init` says where it wrote it).
//
// The lookup order of `--profile NAME` (docs/policy-language.md, "Where profiles are found"):
//   1. the repository's committed ./.cagent/ (refused when it would replace a profile of 2-4 of the
//      same name unless named by path or --trust-repo-profile; launcher/profile/choice.h),
//   2. CONFIG/repos/KEY/ of the repository holding the directory the command works on,
//   3. CONFIG/profiles/, 4. the installed profile directory, 5. the built-in profiles.
// A profile's `extends` looks only further down that list (policy/language/loader.h), so a profile
// of 2 never takes a parent from the repository's ./.cagent/.
#pragma once

#include <optional>
#include <string>

#include "policy/language/loader.h"

namespace cagent::launcher {

struct RepositoryIdentity {
  std::string root;  // canonical top level: the nearest directory from `dir` up holding ".git"
                     // (a directory, or a worktree's file), else `dir` itself
  std::string name;  // the profile name `profile init` gives it: the root's name, sanitised
  std::string key;   // NAME-HASH12: the directory under CONFIG/repos/ and the caches' key
};

// The repository holding `dir` (canonicalised with realpath first); nullopt when `dir` does not
// exist. Only realpath and lstat: git is never run, nothing in the repository is read.
std::optional<RepositoryIdentity> IdentifyRepository(const std::string& dir);

// A directory name as a profile name: [A-Za-z0-9._-] kept, runs of anything else one '-', no
// leading '.' or '-', at most 48 characters; "repo" when nothing is left; NAME-repo when it is a
// built-in profile's name (a repository profile must not shadow one).
std::string RepositoryProfileName(const std::string& dir_name);

// CONFIG/repos/KEY for `config_dir` (policy::ConfigDir), "" when config_dir is "".
std::string RepositoryProfileDir(const std::string& config_dir, const RepositoryIdentity& id);

// The search path of the commands that take --profile NAME, working on `dir` (run: its --repo or
// the current directory; exec, agent, mcp: the workspace; policy and profile: the current
// directory): policy::SearchPath::Default(home, installed_dir) with the repository's profile
// directory (when there is a config directory) right after the repository's own ./.cagent/.
policy::SearchPath ProfileSearchPath(const std::string& home, const std::string& installed_dir,
                                     const std::string& dir);

// The caches' per-repository key for work on `dir`: IdentifyRepository(dir)->key, or "" when
// `dir` does not exist.
std::string CacheScope(const std::string& dir);

}  // namespace cagent::launcher
