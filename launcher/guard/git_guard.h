// Git guard: a sandbox cannot trap a later host git through the repository metadata of a writable
// tree (issue #13, class 4).
//
// git finds its repository and configuration through a few names in the git dir: `commondir`
// (moves config, hooks, refs and objects to another directory), `config`, `config.worktree`,
// `info/` (exclude, attributes, sparse-checkout, grafts), `objects/info/alternates` (and
// `http-alternates`), `worktrees/`, `modules/` (submodule git dirs) and `hooks/`. Writing any of
// them from inside — `.git/commondir` pointing at a directory whose config sets core.fsmonitor —
// makes a plain `git status` on the host run the sandbox's code.
//
// The design: every such name but `config` is made a read-only mount point inside the sandbox, so
// it can be neither written, created, unlinked nor renamed over (a mount point answers EBUSY),
// while the git dir itself stays writable for what `git add`, `git commit`, `git checkout -b` and
// `git stash` write (index, HEAD, refs/, logs/, objects/, ORIG_HEAD, COMMIT_EDITMSG, *.lock and
// their renames). `config` stays writable too — git renames config.lock over it for
// `git config user.email`, `git branch -D`, `git remote add` — and the git config guard
// (git_config_guard.h) rewrites it after the sandbox, keeping only allow-listed keys. The git dir,
// objects/ and objects/info/ are bound onto themselves (writable) so that they cannot be renamed
// away and re-created either. A name that does not exist cannot be mounted on, so cagent creates a
// placeholder on the host first, each one equivalent to its absence for git 2.39 (checked by
// tests/launcher/git_guard_test.cc):
//   commondir        a file containing "." — setup.c resolves it to the git dir itself
//   config.worktree  an empty file — an empty configuration
//   objects/info/alternates, objects/info/http-alternates   empty files — no alternates
//   hooks/, info/, worktrees/, modules/, objects/info/       empty directories — git's defaults
// and removes the placeholders it created once the sandbox has exited (and no other cagent is
// using the same git dir: a shared flock on it says so). A placeholder left behind by a killed
// cagent changes nothing for git. A host-side check after the run alone would be weaker: a killed
// cagent would leave the trap in place.
//
// A `.git` that is a file (a worktree's or submodule's `gitdir:` link) is bound read-only onto
// itself. A `.git`, or a protected name inside it, that is a symlink or another kind of file than
// expected makes Prepare fail: cagent cannot guard it and says what to do.
//
// prepare: parent, before clone (creates placeholders on the host); the binds are carried out by
// the mount view (mountns) as ordinary read-only / read-write paths. Finish: parent, after the
// sandbox has exited.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace cagent::launcher {

// The most git repositories one guard protects; more makes Prepare fail (each needs ~12 mounts).
inline constexpr std::size_t kMaxGuardedRepositories = 64;

class GitGuard {
 public:
  // Prepare (parent, before clone): `git_entries` are absolute paths of entries named `.git` in
  // the sandbox's writable trees (see TreeSnapshot::git_entries). Creates the placeholders and
  // computes the binds. Fails, naming the path and what to do, on a symlinked or unexpected entry,
  // on more than kMaxGuardedRepositories repositories, and on I/O errors other than EACCES/EROFS
  // (a git dir the caller cannot write is one the sandbox, with the caller's uid and no
  // capabilities, cannot write either; it is left as it is).
  static Result<GitGuard> Prepare(const std::vector<std::string>& git_entries);

  GitGuard() = default;
  GitGuard(GitGuard&&) noexcept = default;
  GitGuard& operator=(GitGuard&& other) noexcept;
  GitGuard(const GitGuard&) = delete;
  GitGuard& operator=(const GitGuard&) = delete;
  // Removes the placeholders if Finish() has not run.
  ~GitGuard();

  // Paths to bind read-only onto themselves (protected names, .git files).
  [[nodiscard]] const std::vector<std::string>& ReadOnlyPaths() const { return read_only_; }
  // Directories to bind read-write onto themselves (git dirs, objects/, objects/info/), so they
  // cannot be renamed or replaced.
  [[nodiscard]] const std::vector<std::string>& SelfBinds() const { return self_binds_; }
  // What was guarded, in words ("guarded 1 repository: /w/.git (placeholders: commondir, ...)").
  [[nodiscard]] std::string Summary() const;

  // Parent, after the sandbox has exited: removes the placeholders cagent created, each only if it
  // is still the very inode cagent made (and, for directories, empty); skipped while another
  // cagent holds the same git dir. Returns what could not be removed, in words.
  std::vector<std::string> Finish();

 private:
  struct Placeholder {
    int dir = -1;  // index into dirs_: the directory holding it
    std::string name;
    std::string path;  // for messages
    bool directory = false;
    dev_t dev = 0;
    ino_t ino = 0;
  };
  struct GitDir {
    std::string path;
    UniqueFd fd;  // holds a shared flock while the sandbox runs
  };

  // Guards one git dir (`entry`, a directory): its protected files and directories, and
  // objects/info/alternates below an existing objects/.
  Status GuardGitDir(const std::string& entry);
  // Makes sure `name` exists in dirs_[dir] as the expected kind, creating a placeholder when it
  // is absent. false (and no error) when the caller cannot create it.
  Result<bool> Ensure(int dir, const std::string& dir_path, const std::string& name, bool directory,
                      std::string_view content);
  // Opens the directory `name` of `parent` (no link followed) into dirs_, owned by
  // git_dirs_[owner]; its index.
  Result<int> OpenDir(int parent, const std::string& name, const std::string& path, int owner);

  std::vector<GitDir> git_dirs_;
  std::vector<UniqueFd> dirs_;  // the directories placeholders live in (git dirs, objects/info)
  std::vector<int> dir_owner_;  // dirs_[i] belongs to git_dirs_[dir_owner_[i]]
  std::vector<Placeholder> placeholders_;
  std::vector<std::string> read_only_;
  std::vector<std::string> self_binds_;
  std::vector<std::string> guarded_;
  bool finished_ = true;
};

}  // namespace cagent::launcher
