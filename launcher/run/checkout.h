// The verification tree: a fresh checkout of the base commit plus the captured patch, made by
// cagent's own hardened git from the run's trusted git dir (run_dir/git) into run_dir/verify-tree.
// Runs in cagent (trusted), outside any sandbox, after the patch is captured.
//
// Verification never runs over the agent's workspace: whatever the agent left there that git did
// not capture (ignored files, a .gitignore that hides itself, a package shadowing a module,
// bytecode caches, a planted .git) would otherwise decide whether a patch "passes", and cagent
// apply would then bring in a patch that fails the same command on a clean checkout. The tree is
// built from objects only: read-tree of the base into a private index, `git apply --cached` of
// the patch text, write-tree, checkout-index into an empty directory. Attributes are neutralised
// in the trusted git dir (NeutraliseAttributes), so no in-tree .gitattributes converts content;
// no hook, filter or config of anyone but cagent takes part.
#pragma once

#include <string>

#include "common/result.h"
#include "launcher/run/workspace.h"

namespace cagent::launcher::run {

struct VerifyTree {
  std::string dir;          // the checkout (layout.verify_tree); no .git in it
  std::string tree;         // the tree id checked out (base + patch)
  std::string base_commit;  // the commit the patch was applied to
};

// Builds layout.verify_tree from `base_commit` + the patch in `patch_file` (as CapturePatch wrote
// it; empty = no change). `expected_tree` (CapturedPatch::tree; "" = not checked) must equal the
// tree the patch produces, else the capture and the patch disagree and this is an error. The
// directory must not exist yet (it is created 0700). Errors name the git step that failed.
Result<VerifyTree> MakeVerifyTree(const WorkspaceLayout& layout, const std::string& base_commit,
                                  const std::string& patch_file, const std::string& expected_tree);

}  // namespace cagent::launcher::run
