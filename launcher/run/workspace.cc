#include "launcher/run/workspace.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "common/sha256.h"
#include "common/terminal_text.h"
#include "common/unique_fd.h"
#include "launcher/guard/git.h"
#include "launcher/session/state_dir.h"
#include "policy/language/dump.h"

namespace cagent::launcher::run {
namespace {

namespace fs = std::filesystem;

GitInvocation InRepo(const std::string& root, std::vector<std::string> args) {
  GitInvocation g;
  g.cwd = root;
  g.args = std::move(args);
  return g;
}

GitInvocation Trusted(const WorkspaceLayout& l, std::vector<std::string> args) {
  GitInvocation g;
  g.git_dir = l.trusted_git;
  g.work_tree = l.workspace;
  g.cwd = l.workspace;
  g.home = l.git_home;
  g.args = std::move(args);
  return g;
}

// Copies one untracked file (regular file or symlink) from the caller's tree into the workspace.
Status CopyUntracked(const std::string& from_root, const std::string& to_root,
                     const std::string& rel) {
  const fs::path from = fs::path(from_root) / rel;
  const fs::path to = fs::path(to_root) / rel;
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  if (ec) return PlainError("create " + to.parent_path().string(), ec.message());
  const auto st = fs::symlink_status(from, ec);
  if (ec) return PlainError("stat " + from.string(), ec.message());
  if (fs::is_symlink(st)) {
    fs::copy_symlink(from, to, ec);
  } else if (fs::is_regular_file(st)) {
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  } else {
    return Ok{};  // sockets, fifos: not part of a change set
  }
  if (ec) return PlainError("copy " + rel, ec.message());
  return Ok{};
}

bool IsDotGit(const char* name) {
  // Any case: git itself refuses other spellings on the way in (core.protectNTFS/HFS), but a
  // case-insensitive filesystem mounted here would make ".GIT" a repository too.
  const char* want = ".git";
  for (; *want != '\0'; ++want, ++name) {
    if (std::tolower(static_cast<unsigned char>(*name)) != *want) return false;
  }
  return *name == '\0';
}

std::string Shown(const std::string& rel) {
  return "'" + TerminalSafe(rel, TerminalLines::kOne) + "'";
}

// One directory of ScanWorkspace, `fd` owned. Recursion depth is bounded by limits.max_depth.
class Scanner {
 public:
  Scanner(const ScanLimits& limits, WorkspaceScan& scan) : limits_(limits), scan_(scan) {}

  Status Walk(UniqueFd fd, const std::string& rel, unsigned depth) {
    if (depth > limits_.max_depth) {
      return PlainError(Shown(rel), "is nested more than " + std::to_string(limits_.max_depth) +
                                        " directories deep; cagent does not capture a workspace "
                                        "this deep (git and the patch would not handle it either)");
    }
    const int dir_fd = fd.get();
    DIR* dir = ::fdopendir(fd.Release());
    if (dir == nullptr) return ErrnoError("open directory " + Shown(rel.empty() ? "." : rel));
    std::vector<std::string> subdirs;
    Status status = Ok{};
    errno = 0;
    while (struct dirent* de = ::readdir(dir)) {
      const char* name = de->d_name;
      if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
      const std::string path = rel.empty() ? std::string(name) : rel + "/" + name;
      if (++scan_.entries > limits_.max_entries) {
        status =
            PlainError("the workspace", "has more than " + std::to_string(limits_.max_entries) +
                                            " entries; cagent does not capture it");
        break;
      }
      if (IsDotGit(name)) {
        if (depth == 0) continue;  // the agent's own repository: never read by cagent's git
        status = PlainError(
            Shown(path),
            "is a nested git entry below the workspace root; git would take its directory for "
            "another repository and read it (its refs and any 'gitdir:' link, possibly to another "
            "repository on this machine), so cagent does not capture this workspace. The run "
            "fails; ask for the change without a nested repository (plain files only)");
        break;
      }
      struct stat st {};
      if (::fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        status = ErrnoError("stat " + Shown(path));
        break;
      }
      if (S_ISDIR(st.st_mode)) {
        subdirs.push_back(name);
      } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
        status = PlainError(Shown(path), std::string("is a ") +
                                             (S_ISFIFO(st.st_mode) ? "FIFO" : "device node") +
                                             " left in the workspace; git could block on it, so "
                                             "cagent does not capture this workspace. The run "
                                             "fails; a change set holds files, symlinks and "
                                             "directories only");
        break;
      } else if (S_ISSOCK(st.st_mode)) {
        ++scan_.sockets;  // git skips sockets (an open() of one fails with ENXIO, never blocks)
      }
      errno = 0;
    }
    if (status.ok() && errno != 0) {
      status = ErrnoError("read directory " + Shown(rel.empty() ? "." : rel));
    }
    for (const auto& name : subdirs) {
      if (!status.ok()) break;
      const std::string path = rel.empty() ? name : rel + "/" + name;
      UniqueFd sub(::openat(dir_fd, name.c_str(),
                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
      if (!sub.valid()) {
        status = ErrnoError("open directory " + Shown(path));
        break;
      }
      status = Walk(std::move(sub), path, depth + 1);
    }
    ::closedir(dir);
    return status;
  }

 private:
  const ScanLimits& limits_;
  WorkspaceScan& scan_;
};

}  // namespace

Result<WorkspaceScan> ScanWorkspace(const std::string& workspace, const ScanLimits& limits) {
  WorkspaceScan scan;
  UniqueFd root(::open(workspace.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root.valid()) return ErrnoError("open the workspace " + workspace);
  Scanner scanner(limits, scan);
  if (auto s = scanner.Walk(std::move(root), "", 0); !s) return s.error();
  return scan;
}

Result<RepoInfo> InspectRepo(const std::string& dir, const std::string& rev) {
  RepoInfo info;
  auto root = GitOutput(InRepo(dir, {"rev-parse", "--show-toplevel"}));
  if (!root) {
    return PlainError(dir,
                      "not inside a git repository (cagent run works on a commit of a "
                      "repository; pass --repo DIR)");
  }
  info.root = TrimLine(*root);
  info.rev = rev.empty() ? "HEAD" : rev;
  auto commit = GitOutput(InRepo(
      info.root, {"rev-parse", "--verify", "--quiet", "--end-of-options", info.rev + "^{commit}"}));
  if (!commit) {
    return PlainError(info.rev,
                      "is not a commit of " + info.root +
                          (rev.empty() ? " (an empty repository has no commit yet)" : ""));
  }
  info.commit = TrimLine(*commit);
  auto status = GitOutput(InRepo(info.root, {"status", "--porcelain=v1", "-z",
                                             "--untracked-files=all", "--ignore-submodules=none"}));
  if (!status) return status.error();
  for (auto& entry : SplitNul(*status)) {
    if (!entry.empty()) info.dirty.push_back(std::move(entry));
  }
  return info;
}

WorkspaceLayout LayoutFor(const std::string& run_dir) {
  return WorkspaceLayout{run_dir, run_dir + "/git", run_dir + "/workspace", run_dir + "/githome",
                         run_dir + "/verify-tree"};
}

std::size_t LeaveOutUntrackedOutputs(RepoInfo& repo,
                                     const std::vector<policy::OutputRule>& outputs) {
  if (outputs.empty()) return 0;
  std::size_t moved = 0;
  std::erase_if(repo.dirty, [&](const std::string& entry) {
    // porcelain v1: "XY PATH"; "??" is untracked.
    if (!entry.starts_with("?? ")) return false;
    std::string rel = entry.substr(3);
    if (!policy::UnderOutputs(outputs, rel)) return false;
    repo.untracked_outputs.push_back(std::move(rel));
    ++moved;
    return true;
  });
  return moved;
}

Status CheckDirty(const RepoInfo& repo, bool allow_dirty) {
  if (!repo.dirty.empty() && !allow_dirty) {
    std::string list;
    for (std::size_t i = 0; i < repo.dirty.size() && i < 5; ++i) list += "\n  " + repo.dirty[i];
    if (repo.dirty.size() > 5) {
      list += "\n  ... and " + std::to_string(repo.dirty.size() - 5) + " more";
    }
    return PlainError(repo.root, "has uncommitted changes:" + list +
                                     "\ncommit or stash them, or pass --allow-dirty to carry them "
                                     "into the run's workspace (the run records that it did)")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (!repo.dirty.empty() && repo.rev != "HEAD") {
    return PlainError("--allow-dirty",
                      "carries changes made on top of HEAD; it cannot be "
                      "combined with --commit " +
                          repo.rev)
        .WithCode(Error::Code::kInvalidInput);
  }
  return Ok{};
}

Result<Materialized> MaterializeWorkspace(const RepoInfo& repo, const WorkspaceLayout& l,
                                          bool allow_dirty) {
  if (auto s = CheckDirty(repo, allow_dirty); !s) return s.error();
  std::error_code ec;
  fs::create_directories(l.git_home, ec);
  if (ec) return PlainError("create " + l.git_home, ec.message());

  GitInvocation clone;
  clone.cwd = l.run_dir;
  clone.home = l.git_home;
  clone.args = {"clone", "--bare", "--no-hardlinks", "--quiet", "--", repo.root, l.trusted_git};
  if (auto r = GitOutput(clone); !r) return std::move(r).Context("copy the repository").error();
  if (auto s = NeutraliseAttributes(l.trusted_git); !s) {
    return std::move(s).Context("write cagent's attributes").error();
  }
  GitInvocation has;
  has.git_dir = l.trusted_git;
  has.home = l.git_home;
  has.args = {"cat-file", "-e", repo.commit + "^{commit}"};
  if (auto r = RunGit(has); !r || r->exit_code != 0) {
    // Not on a branch or tag the clone copied (e.g. a detached HEAD): fetch it by id.
    GitInvocation fetch = has;
    fetch.args = {"fetch", "--quiet", "--no-tags", "--", repo.root, repo.commit};
    if (auto f = GitOutput(fetch); !f) return std::move(f).Context("fetch the base commit").error();
  }
  // The agent's own repository in the workspace, at the base commit, detached.
  GitInvocation work;
  work.cwd = l.run_dir;
  work.home = l.git_home;
  work.args = {"clone", "--no-hardlinks", "--quiet",  "--no-checkout",
               "--",    l.trusted_git,    l.workspace};
  if (auto r = GitOutput(work); !r) return std::move(r).Context("create the workspace").error();
  // The agent's checkout holds the base's bytes as committed, as capture and the verification
  // tree (both neutral) read them: an in-tree "* text eol=crlf" would otherwise make every file
  // look modified to the capture.
  if (auto s = NeutraliseAttributes(l.workspace + "/.git"); !s) {
    return std::move(s).Context("write the workspace's attributes").error();
  }
  GitInvocation checkout;
  checkout.cwd = l.workspace;
  checkout.home = l.git_home;
  checkout.args = {"checkout", "--quiet", "--detach", repo.commit};
  if (auto r = GitOutput(checkout); !r) return std::move(r).Context("check out the base").error();

  Materialized m;
  m.base_commit = repo.commit;
  if (repo.dirty.empty()) return m;

  // --allow-dirty: tracked changes as a binary patch against HEAD, then untracked files.
  m.carried_dirty = true;
  GitInvocation diff = InRepo(repo.root, {"diff", "--binary", "--full-index", "--no-ext-diff",
                                          "--no-textconv", "--no-color", "HEAD"});
  auto patch = GitOutput(diff);
  if (!patch) return std::move(patch).Context("read the uncommitted changes").error();
  if (!patch->empty()) {
    const std::string patch_file = l.run_dir + "/dirty.patch";
    {
      std::ofstream out(patch_file, std::ios::binary | std::ios::trunc);
      out << *patch;
      if (!out) return PlainError("write " + patch_file);
    }
    GitInvocation apply;
    apply.cwd = l.workspace;
    apply.home = l.git_home;
    apply.args = {"apply", "--binary", "--whitespace=nowarn", patch_file};
    if (auto r = GitOutput(apply); !r) return std::move(r).Context("carry the changes").error();
  }
  auto untracked =
      GitOutput(InRepo(repo.root, {"ls-files", "--others", "--exclude-standard", "-z"}));
  if (!untracked) return untracked.error();
  const std::set<std::string> outputs(repo.untracked_outputs.begin(), repo.untracked_outputs.end());
  for (const auto& rel : SplitNul(*untracked)) {
    if (rel.empty() || outputs.contains(rel)) continue;
    if (auto s = CopyUntracked(repo.root, l.workspace, rel); !s) return s.error();
  }
  for (const auto& d : repo.dirty) m.carried_paths.push_back(d);
  return m;
}

Result<std::vector<std::string>> PathsChangedBetween(const WorkspaceLayout& l,
                                                     const std::string& tree_a,
                                                     const std::string& tree_b) {
  auto out = GitOutput(Trusted(l, {"diff-tree", "-r", "-z", "--name-only", "--no-renames",
                                   "--ignore-submodules=none", tree_a, tree_b}));
  if (!out) return std::move(out).Context("compare the workspace's trees").error();
  std::vector<std::string> paths;
  for (auto& p : SplitNul(*out)) {
    if (!p.empty()) paths.push_back(std::move(p));
  }
  return paths;
}

bool LooksLikeSource(std::string_view rel) {
  static constexpr std::string_view kExtensions[] = {
      ".c",   ".h",    ".cc",   ".cpp", ".cxx",    ".hh",    ".hpp",   ".hxx", ".py",
      ".rs",  ".go",   ".js",   ".ts",  ".jsx",    ".tsx",   ".mjs",   ".cjs", ".java",
      ".kt",  ".kts",  ".rb",   ".php", ".cs",     ".swift", ".scala", ".m",   ".mm",
      ".sh",  ".bash", ".pl",   ".lua", ".zig",    ".hs",    ".ml",    ".ex",  ".exs",
      ".erl", ".clj",  ".dart", ".vue", ".svelte", ".sql",   ".proto",
  };
  const auto slash = rel.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? rel : rel.substr(slash + 1);
  const auto dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  const std::string_view ext = name.substr(dot);
  for (std::string_view e : kExtensions) {
    if (ext == e) return true;
  }
  return false;
}

namespace {

// The covered path nearest the top for `rel` (UnderOutputs said it is covered): "build" for
// "build/CMakeFiles/x.o".
std::string OutputRoot(const std::vector<policy::OutputRule>& outputs, const std::string& rel) {
  std::size_t from = 0;
  for (;;) {
    const std::size_t slash = rel.find('/', from);
    std::string prefix = rel.substr(0, slash);
    if (policy::UnderOutputs(outputs, prefix)) return prefix;
    if (slash == std::string::npos) return rel;
    from = slash + 1;
  }
}

// Stages the workspace into the trusted index (reset to `base` by the caller): every change git
// sees, except the untracked, not ignored paths `outputs` cover, which go into `left_out`. The
// untracked list comes from git itself (ls-files --others --exclude-standard: what `add --all`
// would take); the ones left out are handed back to git as ":(exclude,literal)" pathspecs through
// a NUL-separated file, so no name from the workspace is ever a glob, an option or a shell word.
Status StageWorkspace(const WorkspaceLayout& l, const std::vector<policy::OutputRule>& outputs,
                      LeftOut& left_out) {
  if (outputs.empty()) {
    if (auto r = GitOutput(Trusted(l, {"add", "--all", "--", "."})); !r) return r.error();
    return Ok{};
  }
  auto untracked = GitOutput(Trusted(l, {"ls-files", "-z", "--others", "--exclude-standard"}));
  if (!untracked) return std::move(untracked).Context("list the untracked files").error();
  std::string pathspecs = std::string(".") + '\0';
  std::map<std::string, std::size_t> roots;
  for (const std::string& rel : SplitNul(*untracked)) {
    if (rel.empty() || !policy::UnderOutputs(outputs, rel)) continue;
    ++left_out.files;
    ++roots[OutputRoot(outputs, rel)];
    if (LooksLikeSource(rel)) {
      ++left_out.sources_total;
      if (left_out.sources.size() < LeftOut::kMaxNamed) left_out.sources.push_back(rel);
    }
    pathspecs += ":(exclude,literal)" + rel + '\0';
  }
  for (auto& [path, files] : roots) left_out.roots.push_back({path, files});
  std::sort(left_out.sources.begin(), left_out.sources.end());
  if (left_out.files == 0) {
    if (auto r = GitOutput(Trusted(l, {"add", "--all", "--", "."})); !r) return r.error();
    return Ok{};
  }
  const std::string file = l.run_dir + "/capture-pathspecs";
  if (auto s = session::WriteFileAtomic(file, pathspecs); !s) return s;
  auto added = GitOutput(
      Trusted(l, {"add", "--all", "--pathspec-from-file=" + file, "--pathspec-file-nul"}));
  ::unlink(file.c_str());
  if (!added) return added.error();
  return Ok{};
}

}  // namespace

Result<std::string> CaptureTree(const WorkspaceLayout& l, const std::string& base,
                                const std::vector<policy::OutputRule>& outputs, LeftOut* left_out) {
  // Refused before any git looks at it: nested repositories and special files (see the contract).
  if (auto scan = ScanWorkspace(l.workspace); !scan) {
    return std::move(scan).Context("check the workspace before capture").error();
  }
  if (auto s = NeutraliseAttributes(l.trusted_git); !s) {
    return std::move(s).Context("write cagent's attributes").error();
  }
  // The trusted index starts from the base commit every time, so a capture never depends on what
  // the agent did to its own .git.
  if (auto r = GitOutput(Trusted(l, {"read-tree", base})); !r) {
    return std::move(r).Context("reset the capture index").error();
  }
  LeftOut ignored;
  if (auto s = StageWorkspace(l, outputs, left_out != nullptr ? *left_out : ignored); !s) {
    return std::move(s).Context("record the workspace's changes").error();
  }
  auto tree = GitOutput(Trusted(l, {"write-tree"}));
  if (!tree) return std::move(tree).Context("record the captured tree").error();
  return TrimLine(*tree);
}

Result<CapturedPatch> CapturePatch(const WorkspaceLayout& l, const std::string& base,
                                   const std::vector<policy::OutputRule>& outputs) {
  LeftOut left_out;
  auto tree = CaptureTree(l, base, outputs, &left_out);
  if (!tree) return tree.error();
  const std::string tree_id = std::move(*tree);
  const std::vector<std::string> diff_opts = {"--cached",      "--no-ext-diff",
                                              "--no-textconv", "--no-color",
                                              "--no-renames",  "--ignore-submodules=none"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"diff"};
    args.insert(args.end(), diff_opts.begin(), diff_opts.end());
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(base);
    args.push_back("--");
    return args;
  };
  CapturedPatch out;
  out.tree = tree_id;
  out.left_out = std::move(left_out);
  auto patch = GitOutput(Trusted(l, with({"--binary", "--full-index"})));
  if (!patch) return std::move(patch).Context("compute the patch").error();
  out.patch = std::move(*patch);
  out.sha256 = Sha256Hex(out.patch);

  auto raw = GitOutput(Trusted(l, with({"--raw", "-z"})));
  if (!raw) return std::move(raw).Context("list the changed files").error();
  // --raw -z: ":old_mode new_mode old_sha new_sha STATUS\0path\0"
  const auto fields = SplitNul(*raw);
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& meta = fields[i];
    ChangedFile f;
    f.path = fields[i + 1];
    if (meta.size() < 2 || meta[0] != ':') continue;
    const auto sp1 = meta.find(' ');
    const auto sp2 = meta.find(' ', sp1 + 1);
    f.old_mode = meta.substr(1, sp1 - 1);
    f.new_mode = meta.substr(sp1 + 1, sp2 - sp1 - 1);
    f.status = meta.back();
    f.submodule = f.old_mode == "160000" || f.new_mode == "160000";
    out.files.push_back(std::move(f));
  }
  auto numstat = GitOutput(Trusted(l, with({"--numstat", "-z"})));
  if (numstat) {
    // "added\tdeleted\tpath\0", "-\t-\tpath\0" for binary files.
    for (const auto& entry : SplitNul(*numstat)) {
      if (entry.rfind("-\t-\t", 0) != 0) continue;
      const std::string path = entry.substr(4);
      for (auto& f : out.files) {
        if (f.path == path) f.binary = true;
      }
    }
  }
  auto check = RunGit(Trusted(l, with({"--check"})));
  if (!check) return std::move(check).Context("check the patch").error();
  out.check_output = check->out;
  out.check_clean = check->exit_code == 0;
  return out;
}

std::vector<PatchViolation> CheckPatch(const CapturedPatch& patch, const policy::Policy& policy,
                                       const policy::Binding& bindings) {
  std::vector<PatchViolation> out;
  const policy::Engine engine(policy, bindings);
  for (const auto& f : patch.files) {
    const auto d = engine.Path(policy::Access::kWrite, f.path);
    if (d.verdict == policy::Verdict::kAllow) continue;
    std::string where = d.loc.valid() ? " at " + policy.Where(d.loc) : "";
    out.push_back({d.rule + where, f.path,
                   f.path + ": the change is not allowed by rule '" + d.rule + "'" + where +
                       (d.reason.empty() ? "" : " (" + d.reason + ")")});
  }
  const auto& files = policy.limit(policy::Limit::kChangedFiles);
  if (files.bounded() && patch.files.size() > files.value) {
    out.push_back({"changed-files " + std::to_string(files.value), "",
                   std::to_string(patch.files.size()) +
                       " files changed; the profile allows at most " + std::to_string(files.value) +
                       " (changed-files" +
                       (files.loc.valid() ? " at " + policy.Where(files.loc) : "") + ")"});
  }
  const auto& size = policy.limit(policy::Limit::kPatchSize);
  if (size.bounded() && patch.patch.size() > size.value) {
    out.push_back({"patch-size " + policy::FormatLimit(policy::Limit::kPatchSize, size), "",
                   "the patch is " + std::to_string(patch.patch.size()) +
                       " bytes; the profile allows at most " +
                       policy::FormatLimit(policy::Limit::kPatchSize, size)});
  }
  return out;
}

}  // namespace cagent::launcher::run
