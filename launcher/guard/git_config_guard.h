// Git config guard: git inside the sandbox may write its repository's own configuration
// (`git config user.email`, `git branch -D`, `git remote add`, `git checkout -b` ...), and nothing
// it writes there can make a later git on the host run code or reach another machine (issue #32).
//
// git rewrites .git/config by creating config.lock and renaming it over config, which a read-only
// mount point refuses (EBUSY) — the git guard's over-mount made every one of those commands fail.
// So config is writable inside, and cagent checks it after the sandbox has exited, before anything
// on the host runs git there (the capture, the look-inside hint, verification, apply, the return of
// `cagent exec`): every git dir in the writable trees whose `config` or `config.worktree` differs
// from what it was before the launch is rewritten from scratch, keeping only
//   - the entries on an allow-list of keys a repository's own config may set, with values checked
//     (user.name/email, core.* format and line-ending settings, branch.<b>.remote/merge/rebase,
//     remote.<r>.url/pushurl/fetch, pull.rebase, init.defaultBranch; see GitConfigEntryAllowed);
//   - and the entries (key and value) the file held before the launch: the caller's own.
// Everything else — core.fsmonitor, core.hooksPath, core.sshCommand, core.pager, alias.*,
// filter.*, diff.external, include.path, url.*.insteadOf, credential.*, http.*, ... — is dropped
// and reported by name. An allow-list, not a block-list: git grows keys that run programs
// (fsmonitor came in 2.16, hook.<name>.command in 2.46), and a block-list misses whatever comes
// next.
//
// cagent never parses the hostile file itself: the bytes (read without following a link, bounded)
// go to `git config --file /proc/self/fd/3 --list -z --no-includes` in a fixed environment (no
// system or global config, GIT_DIR=/nonexistent so no repository is discovered, no includes),
// bounded in memory, CPU, output and time. Listing a file executes nothing in git 2.39 (checked by
// tests/launcher/guard/git_config_guard_test.cc). A file git cannot list (malformed, binary, over 1
// MiB, a link, a FIFO, a directory) is replaced by the entries it held before the launch, or a
// minimal
// `[core] repositoryformatversion = 0` for a repository made inside. The new file is written beside
// the old one and renamed over it (atomically; a link is replaced, never written through).
//
// The same check covers repositories the sandbox made or planted anywhere in the writable trees:
// `sub/.git` directories, a directory laid out like a bare repository, the target of a `.git` file
// (`gitdir:`) and of a git dir's `commondir` when they lie in the writable trees — every place a
// later `cd sub && git status` would read configuration from. A `config.lock` the sandbox left
// behind is removed (it would make the next `git config` on the host fail).
//
// Hooks too (issue #33): a git dir the sandbox made or wrote is more than its config. `git status`
// on the host recurses into every populated gitlink (a nested `sub/.git` registered in the index
// as mode 160000) and runs `git status` there, which refreshes and writes that repository's index
// and so runs its `hooks/post-index-change`, no configuration needed. So in every git dir checked
// here, each entry of `hooks/` that was not there before the launch, or changed, is renamed to
// `NAME.cagent-disabled` (a name git never runs; `*.sample` files are left: git never runs them
// either), and a `hooks` that is not a plain directory (a symlink to elsewhere) is moved aside
// whole; each is reported. The caller's own hooks, unchanged, stay. A `.git` that is a symlink is
// followed (on the host, after the sandbox) to its target when that lies in the writable trees,
// and the target is checked like any git dir.
//
// Runs in cagent (the parent): Snapshot before clone, Neutralise after the sandbox has exited.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace cagent::launcher {

// The largest config file cagent reads; a bigger one is replaced, unread.
inline constexpr std::size_t kMaxGitConfigBytes = 1 << 20;
// The most git dirs one Neutralise looks at; the rest are reported.
inline constexpr std::size_t kMaxGitConfigDirs = 256;

// One entry as `git config --list -z` prints it: the key with section and variable lowercased
// and the subsection as written; no value for a bare boolean (`[core] bare`).
struct GitConfigEntry {
  std::string key;
  std::optional<std::string> value;
  bool operator==(const GitConfigEntry&) const = default;
};

// Pure: splits `git config --list -z` output (key, newline, value, NUL; or key, NUL). nullopt when
// it is not that shape (an empty key, a key without a dot, a control character in a key, no NUL at
// the end).
std::optional<std::vector<GitConfigEntry>> ParseGitConfigListing(std::string_view listing);

// Pure: whether a repository's own config may hold `entry` whoever wrote it. `new_repository`:
// the git dir did not exist before the launch (then extensions.objectformat sha1/sha256, which
// `git init` writes, is allowed; an existing repository keeps only the extensions it had).
bool GitConfigEntryAllowed(const GitConfigEntry& entry, bool new_repository);

struct GitConfigFilter {
  std::vector<GitConfigEntry> kept;  // in the file's order
  std::vector<std::string> dropped;  // keys, in the file's order, each once
};

// Pure: keeps each entry of `after` that GitConfigEntryAllowed allows or that `before` holds with
// the same value (`before` null: the repository is new).
GitConfigFilter FilterGitConfig(const std::vector<GitConfigEntry>& after,
                                const std::vector<GitConfigEntry>* before);

// Pure: a config file that git lists as exactly `entries` (sections in order of appearance, values
// quoted and escaped), with a comment saying cagent wrote it.
std::string RenderGitConfig(const std::vector<GitConfigEntry>& entries);

// Runs git to list `bytes` as a config file (see the file comment). Runs in cagent; blocks until
// git is done or killed (10 s). An error when git is missing, fails (a malformed file), times out
// or prints more than 8 MiB.
Result<std::vector<GitConfigEntry>> ListGitConfig(std::string_view bytes);

// The environment ListGitConfig gives git: GitEnvironment's isolation (no system or global
// config, no prompts, HOME=/nonexistent) and GIT_DIR=/nonexistent, so no repository is discovered.
std::vector<std::string> GitConfigListingEnvironment();

// What Neutralise did to one file.
struct GitConfigRewrite {
  std::string path;                  // absolute path of the file
  std::vector<std::string> dropped;  // keys removed (unescaped; escape before printing)
  std::string reason;                // why the whole file was replaced, "" when it was filtered
};

class GitConfigGuard {
 public:
  // Parent, before clone: records `config` and `config.worktree` (their bytes, up to
  // kMaxGitConfigBytes, or the identity of one that cannot be read) and whether `config.lock`
  // exists, for each of `git_dirs` (absolute paths; missing ones are skipped) and the target of
  // each one's `commondir` inside `roots`.
  static GitConfigGuard Snapshot(std::vector<std::string> git_dirs,
                                 const std::vector<std::string>& roots);

  // Parent, after the sandbox has exited: checks `git_dirs` (absolute paths of git dirs in the
  // writable trees now, the snapshot's included) and rewrites what changed (file comment). `roots`:
  // the writable trees; commondir targets outside them are not touched. Returns what it rewrote,
  // and in `notes` anything it could not do, one line each.
  std::vector<GitConfigRewrite> Neutralise(std::vector<std::string> git_dirs,
                                           const std::vector<std::string>& roots,
                                           std::vector<std::string>& notes);

  // The git dirs a `.git` file names (`gitdir: PATH`, relative to the file's directory), resolved
  // on the host; nullopt when the file cannot be read or names nothing inside `roots`.
  static std::optional<std::string> GitdirTarget(const std::string& dot_git_file,
                                                 const std::vector<std::string>& roots);

  // The directory a `.git` symlink leads to, resolved on the host; nullopt when it leads nowhere
  // or outside `roots` (a repository the sandbox could not write).
  static std::optional<std::string> SymlinkTarget(const std::string& dot_git_symlink,
                                                  const std::vector<std::string>& roots);

 private:
  struct FileState {
    bool exists = false;
    bool readable = false;  // a regular file of at most kMaxGitConfigBytes
    std::string bytes;
    // Identity, for telling whether an unreadable one (a link, a FIFO) is still the same.
    dev_t dev = 0;
    ino_t ino = 0;
    mode_t mode = 0;
    off_t size = 0;
    long long mtime_ns = 0;  // NOLINT(google-runtime-int)
  };
  // One entry of hooks/ (or hooks itself) as it was: a changed identity is a new hook.
  struct HookState {
    dev_t dev = 0;
    ino_t ino = 0;
    mode_t mode = 0;
    off_t size = 0;
    long long mtime_ns = 0;  // NOLINT(google-runtime-int)
    bool operator==(const HookState&) const = default;
  };
  struct DirState {
    dev_t dev = 0;
    ino_t ino = 0;
    FileState config, worktree;
    bool lock = false;
    std::optional<HookState> hooks_dir;      // hooks itself; nullopt when absent
    std::map<std::string, HookState> hooks;  // its entries, when it is a directory
  };
  static HookState HookOf(const struct stat& st);
  // Parent: the hooks of the git dir `dfd` now (hooks_dir and hooks of a DirState).
  static void ReadHooks(int dfd, DirState& into);
  // Parent, after the sandbox: disables what ReadHooks finds new or changed since `before`
  // (nullptr: a git dir made inside), one line in `notes` each.
  static void DisableNewHooks(int dfd, const std::string& dir, const DirState* before,
                              std::vector<std::string>& notes);
  std::map<std::string, DirState> before_;
};

}  // namespace cagent::launcher
