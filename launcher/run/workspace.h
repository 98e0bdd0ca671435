// The run's disposable workspace and the independent capture of what changed in it. Runs in
// cagent (trusted), outside the sandbox.
//
// Layout of a run directory ($XDG_STATE_HOME/cagent/runs/<run-id>/):
//   git/        cagent's own bare repository (a copy of the caller's objects); never visible in a
//               sandbox, never configured by anyone but cagent — capture runs git from here
//   workspace/  the agent's working tree at the base commit, with its own .git (a clone of git/)
//               for the agent's convenience; hostile once the agent has run
//   githome/    an empty HOME for git
//   verify-tree/  a fresh checkout of base + the captured patch, made from git/ after the agent
//               has run (checkout.h); verification runs there, never in workspace/
// The caller's repository is only read: clone reads its objects; status/diff run with
// GIT_OPTIONAL_LOCKS=0 so not even the index's stat cache is refreshed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "launcher/run/run_record.h"
#include "policy/language/engine.h"
#include "policy/language/ir.h"

namespace cagent::launcher::run {

struct RepoInfo {
  std::string root;                // top level of the caller's working tree
  std::string commit;              // the full base commit id
  std::string rev;                 // what the caller asked for ("HEAD", a branch, a sha)
  std::vector<std::string> dirty;  // uncommitted paths ("M src/x.c", "?? new.txt")
  // Untracked paths under the profile's `outputs` (LeaveOutUntrackedOutputs): not dirt, and
  // never carried into the workspace.
  std::vector<std::string> untracked_outputs;
};

// Resolves `dir`'s repository and pins `rev` ("" = HEAD) to a full commit id.
Result<RepoInfo> InspectRepo(const std::string& dir, const std::string& rev);

// Moves the untracked paths `outputs` cover (a build/ left by an earlier in-tree build) from
// `repo.dirty` to `repo.untracked_outputs`: what a build leaves is not an uncommitted change, so it
// neither makes the tree dirty nor rides into the run (issue 32). Tracked changes there stay
// dirt. Returns how many were moved.
std::size_t LeaveOutUntrackedOutputs(RepoInfo& repo,
                                     const std::vector<policy::OutputRule>& outputs);

// Refuses a dirty tree unless `allow_dirty`, naming up to five of the paths, and --allow-dirty
// with a base other than HEAD (kInvalidInput). MaterializeWorkspace checks it too; `cagent run`
// calls it before the run directory exists.
[[nodiscard]] Status CheckDirty(const RepoInfo& repo, bool allow_dirty);

struct WorkspaceLayout {
  std::string run_dir;
  std::string trusted_git;  // run_dir/git
  std::string workspace;    // run_dir/workspace
  std::string git_home;     // run_dir/githome
  std::string verify_tree;  // run_dir/verify-tree
};
WorkspaceLayout LayoutFor(const std::string& run_dir);

struct Materialized {
  std::string base_commit;
  bool carried_dirty = false;
  std::vector<std::string> carried_paths;  // uncommitted paths brought along with --allow-dirty
};

// Creates the run's git/, workspace/ and githome/ from the caller's repository at repo.commit.
// A dirty tree is refused unless `allow_dirty` (then tracked changes and untracked, not ignored
// files are carried into the workspace and listed). `run_dir` must exist and be empty of these.
Result<Materialized> MaterializeWorkspace(const RepoInfo& repo, const WorkspaceLayout& layout,
                                          bool allow_dirty);

// ChangedFile, LeftOut, CapturedPatch and PatchViolation are in run_record.h: what the capture
// and the patch check find is part of the run's record.

// Whether `rel` looks like a source file by its extension (.c, .h, .cc, .py, .rs, .go, .js, .ts,
// .java, .kt, .rb, .sh, ...): the left-out files named with a warning.
[[nodiscard]] bool LooksLikeSource(std::string_view rel);

// Asks git (from the trusted git dir, over the workspace as --work-tree) what changed since
// `base_commit`: tracked and untracked paths (ignored files are not part of a change set), except
// the untracked ones at or below an `outputs` glob, which are left out and counted in
// CapturedPatch::left_out (a tracked file there that changed stays in). Runs in cagent after the
// sandbox is gone (nothing can change the workspace meanwhile). The workspace is hostile:
// ScanWorkspace() refuses it first; in-tree attributes are neutralised (NeutraliseAttributes); git
// is bounded (RunGit); the left-out names reach git only as literal pathspecs in a NUL-separated
// file of the run directory. An error names the path or the git step.
Result<CapturedPatch> CapturePatch(const WorkspaceLayout& layout, const std::string& base_commit,
                                   const std::vector<policy::OutputRule>& outputs = {});

// CapturePatch's first half: the same checks, then the tree git records for the workspace over
// `base_commit` (as `git write-tree` names it), without computing the patch. For telling whether
// a step changed what git sees. `left_out`, when given, receives what `outputs` kept out.
Result<std::string> CaptureTree(const WorkspaceLayout& layout, const std::string& base_commit,
                                const std::vector<policy::OutputRule>& outputs = {},
                                LeftOut* left_out = nullptr);

// The paths that differ between two trees CaptureTree (or CapturePatch) recorded, as git names
// them; for telling what a step between two captures changed.
Result<std::vector<std::string>> PathsChangedBetween(const WorkspaceLayout& layout,
                                                     const std::string& tree_a,
                                                     const std::string& tree_b);

struct WorkspaceScan {
  std::uint64_t entries = 0;  // directory entries looked at (the root's own .git not descended)
  std::uint64_t sockets = 0;  // Unix sockets left behind: git skips them, nothing to capture
};
struct ScanLimits {
  std::uint64_t max_entries = 2'000'000;
  unsigned max_depth = 256;
};

// Walks `workspace` before git is pointed at it (openat/fstatat with AT_SYMLINK_NOFOLLOW from a
// directory fd, no symlink followed, nothing opened but directories) and refuses, naming the path:
//   - a ".git" entry (any case; directory, file or symlink) anywhere below the root: git would take
//     its directory for a nested repository and read it (refs that are symlinks to /dev/zero read
//     until out of memory; a "gitdir:" file points git at another repository on the host);
//   - a FIFO or a device node: git could block opening or reading it;
//   - more than `limits.max_entries` entries or directories deeper than `limits.max_depth`.
// The root's own .git is the agent's repository, which cagent's git never reads: it is skipped.
Result<WorkspaceScan> ScanWorkspace(const std::string& workspace, const ScanLimits& limits = {});

// The profile's rules applied to what git observed: every changed path must be writable under
// the policy (Engine::Path kWrite on the workspace-relative path), at most `changed-files` files,
// at most `patch-size` bytes. Empty = the patch is acceptable.
std::vector<PatchViolation> CheckPatch(const CapturedPatch& patch, const policy::Policy& policy,
                                       const policy::Binding& bindings);

}  // namespace cagent::launcher::run
