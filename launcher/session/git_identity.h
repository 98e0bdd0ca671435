// The caller's git identity, for git inside a sandbox.
//
// The sandbox's HOME is a private tmpfs, so git inside finds no ~/.gitconfig and `git commit`
// fails with "Author identity unknown". cagent reads user.name and user.email (only those) from
// the caller's own configuration on the host and sets GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL,
// GIT_COMMITTER_NAME and GIT_COMMITTER_EMAIL inside (exec with or without a profile, the agent's
// sandbox, verification), unless the profile says `git-identity none` or exec gets
// --no-git-identity. Variables rather than a ~/.gitconfig inside: nothing else of the caller's
// configuration crosses, and no repository config in the workspace can replace them (git gives
// the variables precedence over every config file), so a hostile repository cannot choose the name
// its commits are made under. A profile's `environment { set GIT_AUTHOR_NAME ... }` wins over
// them.
//
// Which files are read: only the caller's own, never a repository's. git runs with cwd "/", no
// GIT_DIR, and `git config --file F --includes` for each of, in git's order (a later one wins):
// the system file ($GIT_CONFIG_SYSTEM or /etc/gitconfig; none with GIT_CONFIG_NOSYSTEM), then the
// global ones ($GIT_CONFIG_GLOBAL alone when set; else $XDG_CONFIG_HOME/git/config, or
// ~/.config/git/config, then ~/.gitconfig). `include.path` is followed (HOME is the caller's, so
// ~ expands); `includeIf "gitdir:..."` never matches (there is no repository), so an identity kept
// per directory that way is not seen. Every git is RunGit's (launcher/guard/git.h): hardened, in
// its own process group, time- and output-bounded. A file that mentions neither a `user` section
// nor an include is not looked at further; one in the plain form ParseIdentitySettings takes is
// read by cagent itself (no git process per launch); one that is not a regular file is skipped with
// a note (a FIFO would hold git until its timeout).
//
// A value that is empty, longer than kMaxGitIdentityBytes or holds a control character, '<' or
// '>' is skipped with a note. No identity: nothing is set and git inside fails as before.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "launcher/sandbox/launch_spec.h"

namespace cagent::launcher::session {

inline constexpr std::size_t kMaxGitIdentityBytes = 256;

struct GitIdentity {
  std::string name;   // "" = none
  std::string email;  // "" = none
  // What was skipped and why ("user.name from /home/a/.gitconfig holds a control character").
  std::vector<std::string> notes;

  // The variables to set inside: GIT_AUTHOR_NAME/GIT_COMMITTER_NAME when `name` is set,
  // GIT_AUTHOR_EMAIL/GIT_COMMITTER_EMAIL when `email` is.
  [[nodiscard]] std::vector<EnvVar> Env() const;
};

// Whether `value` may be passed as a name or an email: nothing when it may, else why not.
Refusal GitIdentityProblem(const std::string& value);

// Reads the identity as described above, from the files the environment `env` ("NAME=value", the
// caller's) names, with `home` as the caller's home ("" = no ~ files). Runs git; blocks the thread
// for at most a few seconds per file. Never fails: an unreadable file is a note.
GitIdentity ReadGitIdentity(const std::vector<std::string>& env, const std::string& home);

// The user.name / user.email settings of configuration text `text`, in order, as git would read
// them, when the text is in the plain form cagent reads itself (sections, comments, `key = value`
// with git's quoting and escapes, no include); nullopt for anything else, which ReadGitIdentity
// hands to git. Saves the git process per launch for the usual ~/.gitconfig.
std::optional<std::vector<std::pair<std::string, std::string>>> ParseIdentitySettings(
    std::string_view text);

// ReadGitIdentity(CallerEnviron(), CallerHome()), read once per process and kept (thread-safe).
const GitIdentity& CallerGitIdentity();

}  // namespace cagent::launcher::session
