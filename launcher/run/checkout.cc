#include "launcher/run/checkout.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "launcher/guard/git.h"

namespace cagent::launcher::run {
namespace {}  // namespace

Result<VerifyTree> MakeVerifyTree(const WorkspaceLayout& l, const std::string& base,
                                  const std::string& patch_file, const std::string& expected_tree) {
  if (auto s = NeutraliseAttributes(l.trusted_git); !s) {
    return std::move(s).Context("write cagent's attributes").error();
  }
  // A private index in the trusted git dir: the capture's index is left as it was.
  const std::string index = l.trusted_git + "/verify-index";
  if (::unlink(index.c_str()) != 0 && errno != ENOENT) return ErrnoError("remove " + index);
  auto git = [&](std::vector<std::string> args) {
    GitInvocation g;
    g.git_dir = l.trusted_git;
    g.index_file = index;
    g.home = l.git_home;
    g.cwd = l.trusted_git;
    g.args = std::move(args);
    return g;
  };
  if (auto r = GitOutput(git({"read-tree", base})); !r) {
    return std::move(r).Context("read the base commit").error();
  }
  struct stat st {};
  if (::stat(patch_file.c_str(), &st) != 0) return ErrnoError("stat " + patch_file);
  if (st.st_size > 0) {
    // --cached: the patch goes into the index only; no work tree, no file system path is
    // touched. git apply refuses paths with ".." or in .git, and (without --unsafe-paths) any
    // path outside the tree.
    if (auto r = GitOutput(
            git({"apply", "--cached", "--binary", "--whitespace=nowarn", "--", patch_file}));
        !r) {
      return std::move(r).Context("apply the captured patch to the base").error();
    }
  }
  auto tree = GitOutput(git({"write-tree"}));
  if (!tree) return std::move(tree).Context("record the patched tree").error();
  VerifyTree out;
  out.dir = l.verify_tree;
  out.tree = TrimLine(*tree);
  out.base_commit = base;
  if (!expected_tree.empty() && out.tree != expected_tree) {
    return PlainError("the captured patch",
                      "does not reproduce the captured tree (base + patch gives tree " + out.tree +
                          ", the capture recorded " + expected_tree +
                          "); nothing is verified. Report this as a cagent bug");
  }
  if (::mkdir(out.dir.c_str(), 0700) != 0) {
    Error e = ErrnoError("create " + out.dir);
    if (errno == EEXIST) e.detail = "a verification tree is made once per run, in a new directory";
    return e;
  }
  GitInvocation co = git({"checkout-index", "--all", "--force"});
  co.work_tree = out.dir;
  co.cwd = out.dir;
  if (auto r = GitOutput(co); !r) return std::move(r).Context("check out the patched tree").error();
  return out;
}

}  // namespace cagent::launcher::run
