// `cagent apply RUN`: a completed run's patch brought into the caller's repository. Runs in cagent
// (trusted), outside any sandbox, on the caller's repository — which may hold content cagent did
// not write and git does not track (ignored symlinks, ignored files, a repository-local filter
// driver named by a committed .gitattributes).
//
// The patch is never handed to git in the caller's work tree. Instead:
//   1. the run's record is checked (completed, patch.diff matches the digest that was verified);
//   2. every path is checked as a string (no .git component in any spelling a case-insensitive
//      or NTFS/HFS+ file system would treat as .git, no "..", no absolute path, no symlinked
//      .gitattributes/.gitignore/.gitmodules/.mailmap, no gitlinks);
//   3. the patch is applied to an index in a scratch git dir of cagent's own (objects borrowed from
//      the run's trusted git dir, no work tree, no config but cagent's), and git's view of what it
//      changes (diff-tree of base and result) must agree with result.json's changed_files and with
//      the patch's own file list (git apply --numstat -z);
//   4. the caller's repository must be clean (git status with every filter driver its config
//      defines emptied) and at the base commit (or --branch creates a branch there);
//   5. every touched path is resolved from a directory fd on the work tree's root, one component at
//      a time with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): a parent that is a symlink, a
//      non-directory or a nested repository, and anything already at an added path (an ignored file
//      or link), refuse the whole apply before anything is written;
//   6. the blobs go into the caller's object store with git hash-object --no-filters;
//   7. each file is written by cagent itself through parent fds resolved again at write time
//      (temporary file, O_NOFOLLOW|O_EXCL, renameat; symlinkat for mode 120000; unlinkat), never
//      opening an existing file for writing (a hard link's other name is never written through);
//   8. the index is updated with git update-index --cacheinfo / --force-remove (no file read, no
//      filter, no hook).
// So no hook, filter, textconv or attribute-driven conversion of the caller's repository runs, and
// nothing is written outside the work tree or below its .git.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace cagent::launcher::run {

struct ApplyRequest {
  std::string run_dir;  // the run's directory (session::StateDirectory()/runs/<id>)
  std::string repo;     // "" = the repository recorded in result.json
  std::string branch;   // "" = apply on HEAD, which must be the run's base commit
  // Test seam: called once, after every check has passed and before the first write to the
  // caller's work tree (a test swaps a directory for a symlink here). Empty in production.
  std::function<void()> before_write;
};

struct ApplyReport {
  std::string run_id;
  std::string repo_root;
  std::string branch;              // created (empty: none)
  std::vector<std::string> paths;  // changed in the work tree and the index
  bool unverified = false;         // the run completed with no verify commands
  bool nothing_to_apply = false;   // the run's patch was empty
};

// Applies the run at request.run_dir to the caller's repository as described above. Runs in
// cagent, on the calling thread; starts git several times (bounded by RunGit). An error Result
// says what was refused, which path and why, and whether anything was written (only a failure of
// the file system in step 7 can leave a partial apply, and the message then lists what was
// written). The work tree's files are written with cagent's umask; the index, not HEAD, is changed.
Result<ApplyReport> ApplyRun(const ApplyRequest& request);

// Why a patch may not touch `path` (a path relative to the work tree, as git prints it with -z),
// or nothing when it may. Pure; exposed for tests.
Refusal RefusedPatchPath(std::string_view path, std::string_view new_mode);

// True when `component` (one path component) is .git as some file system would see it: any case,
// trailing dots or spaces (NTFS, Win32), an NTFS stream suffix (".git::$INDEX_ALLOCATION"), the
// 8.3 short name GIT~1, or with code points HFS+ ignores (zero-width joiners, bidi marks). Pure.
bool IsDotGitComponent(std::string_view component);

}  // namespace cagent::launcher::run
