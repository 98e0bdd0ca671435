#include "launcher/run/apply.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "common/sha256.h"
#include "common/terminal_text.h"
#include "common/unique_fd.h"
#include "launcher/guard/git.h"
#include "launcher/run/run_record.h"
#include "launcher/run/workspace.h"

namespace cagent::launcher::run {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kArgsPerCall = 200;

// One path of the patch as git (in cagent's scratch git dir) sees it.
struct Change {
  std::string path;
  char status = 'M';  // A added, M modified, D deleted, T type changed
  std::string old_mode, new_mode;
  std::string old_blob, new_blob;
  [[nodiscard]] bool removes() const { return status == 'D'; }
  [[nodiscard]] bool adds() const { return status == 'A'; }
};

std::string Shown(std::string_view text) { return "'" + TerminalSafe(text) + "'"; }

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= path.size()) {
    const auto end = path.find('/', start);
    out.push_back(path.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::string Basename(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string ReadFile(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  *ok = static_cast<bool>(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The nothing-was-written refusal: what, which path, why, what to do.
Error RefuseApply(const std::string& run_id, const std::string& what, const std::string& todo) {
  return PlainError("refusing to apply run " + run_id,
                    what + ". Nothing was written to your repository. " + todo);
}

bool IsDecimalModeOf(std::string_view mode) {
  return mode == "100644" || mode == "100755" || mode == "120000" || mode == "000000";
}

// ---- Kernel-resolved access beneath the work tree's root ----

// openat2 beneath `dirfd`, never through a symlink or a magic link. One component at a time is
// what callers pass, so the error names the component that caused it.
int OpenBeneath(int dirfd, const std::string& name, int flags) {
  struct open_how how {};
  how.flags = static_cast<std::uint64_t>(flags) | O_CLOEXEC | O_NOFOLLOW;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0;; ++attempt) {
    const int fd = static_cast<int>(::syscall(SYS_openat2, dirfd, name.c_str(), &how, sizeof(how)));
    // EAGAIN: a concurrent rename somewhere on the system made the kernel's check inconclusive.
    if (fd >= 0 || (errno != EAGAIN && errno != EINTR) || attempt >= 16) return fd;
  }
}

std::string KindOf(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "symbolic link";
  if (S_ISDIR(st.st_mode)) return "directory";
  if (S_ISREG(st.st_mode)) return "regular file";
  if (S_ISFIFO(st.st_mode)) return "named pipe";
  if (S_ISSOCK(st.st_mode)) return "socket";
  return "device or special file";
}

std::string KindOfMode(std::string_view mode) {
  if (mode == "120000") return "symbolic link";
  if (mode == "160000") return "submodule";
  return "regular file";
}

struct Identity {
  dev_t dev = 0;
  ino_t ino = 0;
  mode_t type = 0;
};

Identity IdentityOf(const struct stat& st) { return {st.st_dev, st.st_ino, st.st_mode & S_IFMT}; }
bool Same(const Identity& a, const Identity& b) {
  return a.dev == b.dev && a.ino == b.ino && a.type == b.type;
}

// The parents of one path walked from the root.
struct ParentWalk {
  UniqueFd fd;         // the innermost parent directory, when every parent exists
  std::string absent;  // else the first parent (a path) that does not exist (yet)
};

class WorkTree {
 public:
  static Result<WorkTree> Open(const std::string& root) {
    const int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoError("open " + root);
    WorkTree t;
    t.root_path_ = root;
    t.root_.Reset(fd);
    return t;
  }

  [[nodiscard]] int root() const { return root_.get(); }
  [[nodiscard]] const std::string& root_path() const { return root_path_; }

  // Resolves the parents of `path` one component at a time from the root fd with openat2.
  // `gone`: paths the patch removes (at check time a symlink or file there is not a refusal, the
  // rest of the path will be created after it is removed). `create`: make missing parents (write
  // time). A symlink, a non-directory or another repository's work tree on the way is an error
  // whose detail names the component.
  Result<ParentWalk> WalkParents(const std::string& path, const std::set<std::string>& gone,
                                 bool create) const {
    const std::vector<std::string> parts = SplitPath(path);
    ParentWalk walk;
    int cur = root_.get();
    std::string prefix;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      const std::string& name = parts[i];
      prefix += (prefix.empty() ? "" : "/") + name;
      struct stat st {};
      if (::fstatat(cur, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT) return ErrnoError("stat " + Shown(prefix));
        if (!create) {
          walk.absent = prefix;
          walk.fd.Reset();
          return walk;
        }
        // Created with 0777 less cagent's umask, as git does; an EEXIST race is resolved by the
        // openat2 below, which refuses whatever is not a real directory.
        if (::mkdirat(cur, name.c_str(), 0777) != 0 && errno != EEXIST) {
          return ErrnoError("create the directory " + Shown(prefix));
        }
      } else if (!S_ISDIR(st.st_mode)) {
        if (!create && gone.count(prefix) != 0) {
          walk.absent = prefix;
          walk.fd.Reset();
          return walk;
        }
        return PlainError(Shown(prefix), "is a " + KindOf(st) + ", not a directory");
      }
      UniqueFd next(OpenBeneath(cur, name, O_RDONLY | O_DIRECTORY));
      if (!next.valid()) {
        if (errno == ELOOP) return PlainError(Shown(prefix), "is a symbolic link");
        if (errno == ENOTDIR) return PlainError(Shown(prefix), "is not a directory");
        return ErrnoError("open " + Shown(prefix));
      }
      // A directory with a .git of its own is another repository's work tree (an ignored clone,
      // a submodule): this repository's index cannot track files there.
      struct stat git_st {};
      if (::fstatat(next.get(), ".git", &git_st, AT_SYMLINK_NOFOLLOW) == 0) {
        return PlainError(Shown(prefix), "is another git repository (it has a .git of its own)");
      }
      walk.fd = std::move(next);
      cur = walk.fd.get();
    }
    if (!walk.fd.valid()) {
      const int fd = ::fcntl(root_.get(), F_DUPFD_CLOEXEC, 0);
      if (fd < 0) return ErrnoError("dup");
      walk.fd.Reset(fd);
    }
    return walk;
  }

 private:
  std::string root_path_;
  UniqueFd root_;
};

// The first file below the directory `dir_fd` (at `prefix`) that is not in `gone`, or "".
Result<std::string> LeftoverBelow(int dir_fd, const std::string& prefix,
                                  const std::set<std::string>& gone, int depth = 0) {
  if (depth > 256) return PlainError(Shown(prefix), "is nested too deeply to inspect");
  const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open " + Shown(prefix));
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return ErrnoError("read " + Shown(prefix));
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    const std::string rel = prefix + "/" + name;
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(OpenBeneath(dir_fd, name, O_RDONLY | O_DIRECTORY));
      if (!sub.valid()) return rel;
      auto left = LeftoverBelow(sub.get(), rel, gone, depth + 1);
      if (!left || !left->empty()) return left;
    } else if (gone.count(rel) == 0) {
      return rel;
    }
  }
  return std::string();
}

// ---- git ----

struct GitEnv {
  std::string scratch_git;  // cagent's scratch git dir (objects borrowed from the run's git/)
  std::string home;         // an empty HOME
  std::string repo_root;    // the caller's work tree
  std::vector<std::string> filter_overrides;  // -c filter.<name>.<key>= for the caller's filters
};

GitInvocation InScratch(const GitEnv& env, std::vector<std::string> args) {
  GitInvocation g;
  g.git_dir = env.scratch_git;
  g.cwd = env.scratch_git;
  g.home = env.home;
  g.args = std::move(args);
  return g;
}

// git in the caller's repository, with every filter driver its configuration defines emptied.
GitInvocation InRepo(const GitEnv& env, std::vector<std::string> args) {
  GitInvocation g;
  g.cwd = env.repo_root;
  g.home = env.home;
  g.args = env.filter_overrides;
  g.args.insert(g.args.end(), args.begin(), args.end());
  return g;
}

// -c overrides that empty every filter driver the repository's configuration (local, worktree and
// whatever it includes; system and global are never read) defines: a committed .gitattributes can
// name such a driver for any path, and git status, hash-object and checkout would run it.
Result<std::vector<std::string>> FilterOverrides(const std::string& root, const std::string& home) {
  GitInvocation g;
  g.cwd = root;
  g.home = home;
  g.args = {"config", "-z", "--name-only", "--get-regexp", "^filter\\."};
  auto r = RunGit(g);
  if (!r) return std::move(r).Context("read the repository's filter drivers").error();
  if (r->exit_code != 0 && r->exit_code != 1) {
    return PlainError("git config --get-regexp filter",
                      "exit " + std::to_string(r->exit_code) + ": " + TrimLine(r->err));
  }
  std::set<std::string> names;
  for (const auto& key : SplitNul(r->out)) {
    if (key.size() < 8) continue;
    const auto last = key.rfind('.');
    if (last == std::string::npos || last <= 7) continue;
    names.insert(key.substr(7, last - 7));  // filter.<name>.<key>, <name> may contain dots
  }
  std::vector<std::string> out;
  for (const auto& name : names) {
    // "-c a=b" splits at the first '=': a name with one cannot be overridden, so refuse.
    if (name.find_first_of("=\n") != std::string::npos) {
      return PlainError("filter driver " + Shown(name),
                        "cannot be switched off for this apply (its name holds '=' or a newline); "
                        "remove it from the repository's configuration");
    }
    for (const char* k : {"clean", "smudge", "process"}) {
      out.push_back("-c");
      out.push_back("filter." + name + "." + k + "=");
    }
    out.push_back("-c");
    out.push_back("filter." + name + ".required=false");
  }
  return out;
}

// "added\tdeleted\tpath\0", or "added\tdeleted\t\0from\0to\0" for a rename or copy.
Result<std::set<std::string>> NumstatPaths(const std::string& out) {
  std::set<std::string> paths;
  const auto fields = SplitNul(out);
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const std::string& f = fields[i];
    if (f.empty()) continue;
    const auto t1 = f.find('\t');
    const auto t2 = t1 == std::string::npos ? t1 : f.find('\t', t1 + 1);
    if (t2 == std::string::npos) return PlainError("read the patch's file list", "malformed entry");
    const std::string path = f.substr(t2 + 1);
    if (path.empty()) {
      return PlainError("the patch", "renames or copies a file (" +
                                         Shown(i + 1 < fields.size() ? fields[i + 1] : "") +
                                         "); cagent's capture never makes such a patch");
    }
    paths.insert(path);
  }
  return paths;
}

// ":old_mode new_mode old_blob new_blob S\0path\0"
Result<std::vector<Change>> ParseRaw(const std::string& out) {
  std::vector<Change> changes;
  const auto fields = SplitNul(out);
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& meta = fields[i];
    std::istringstream in(meta);
    std::string old_mode, new_mode, old_blob, new_blob, status;
    in >> old_mode >> new_mode >> old_blob >> new_blob >> status;
    if (old_mode.size() != 7 || old_mode[0] != ':' || status.size() != 1) {
      return PlainError("read the patch's changes", "unexpected git diff-tree output");
    }
    Change c;
    c.old_mode = old_mode.substr(1);
    c.new_mode = new_mode;
    c.old_blob = old_blob;
    c.new_blob = new_blob;
    c.status = status[0];
    c.path = fields[i + 1];
    changes.push_back(std::move(c));
  }
  return changes;
}

// Writes `content` to a new file in `scratch` and returns its path.
Result<std::string> WriteScratchFile(const std::string& dir, std::size_t n,
                                     const std::string& content) {
  const std::string path = dir + "/" + std::to_string(n);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) return PlainError("write " + path);
  return path;
}

// The scratch directory under the run dir, removed when done.
class ScratchDir {
 public:
  static Result<ScratchDir> Make(const std::string& parent) {
    std::string tmpl = parent + "/apply.XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return ErrnoError("create a scratch directory in " + parent);
    }
    ScratchDir s;
    s.path_ = tmpl;
    return s;
  }
  ScratchDir() = default;
  ScratchDir(ScratchDir&& o) noexcept : path_(std::exchange(o.path_, {})) {}
  ScratchDir& operator=(ScratchDir&&) = delete;
  ScratchDir(const ScratchDir&) = delete;
  ~ScratchDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// What the file-system check learned about one path, to compare against at write time.
struct Checked {
  bool existed = false;
  Identity identity;
};

// Every check of step 5 (see apply.h), nothing written.
Result<std::map<std::string, Checked>> CheckWorkTree(const WorkTree& tree,
                                                     const std::vector<Change>& changes,
                                                     const std::string& run_id) {
  std::set<std::string> gone;
  for (const auto& c : changes) {
    if (c.removes()) gone.insert(c.path);
  }
  const std::string root = TerminalSafe(tree.root_path());
  std::map<std::string, Checked> checked;
  for (const auto& c : changes) {
    auto walk = tree.WalkParents(c.path, gone, /*create=*/false);
    if (!walk) {
      const Error& e = walk.error();
      if (e.err != 0) return e;
      return RefuseApply(run_id,
                         Shown(c.path) + " goes through " + e.op + ", which " + e.detail + " in " +
                             root +
                             "; cagent writes a patch only into real directories of your work "
                             "tree, never through a symlink, a file or another repository",
                         "Move " + e.op +
                             " out of the way (or apply to a fresh clone with --repo DIR) "
                             "and run cagent apply again.");
    }
    if (!walk->fd.valid()) {
      if (!c.adds()) {
        return RefuseApply(run_id,
                           Shown(c.path) + " is missing from " + root + " (" + Shown(walk->absent) +
                               " does not exist), but the patch changes it",
                           "Restore your work tree to the run's base commit and try again.");
      }
      checked[c.path] = {};
      continue;
    }
    const std::string name = Basename(c.path);
    struct stat st {};
    const bool exists = ::fstatat(walk->fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!exists && errno != ENOENT) return ErrnoError("stat " + Shown(c.path));
    Checked k;
    k.existed = exists;
    if (exists) k.identity = IdentityOf(st);
    if (c.adds()) {
      if (exists && S_ISDIR(st.st_mode)) {
        UniqueFd dir(OpenBeneath(walk->fd.get(), name, O_RDONLY | O_DIRECTORY));
        if (!dir.valid()) return ErrnoError("open " + Shown(c.path));
        auto left = LeftoverBelow(dir.get(), c.path, gone);
        if (!left) return left.error();
        if (!left->empty()) {
          return RefuseApply(run_id,
                             "the patch adds the file " + Shown(c.path) + ", but " + root +
                                 " has a directory there holding " + Shown(*left) +
                                 ", which git does not track (ignored or untracked)",
                             "Move it out of the way, then run cagent apply again.");
        }
      } else if (exists) {
        return RefuseApply(run_id,
                           "the patch adds " + Shown(c.path) + ", but " + root + " already has a " +
                               KindOf(st) +
                               " there that git does not track (ignored or untracked); "
                               "applying would replace it",
                           "Move it out of the way, then run cagent apply again.");
      }
    } else {
      const bool want_link = c.old_mode == "120000";
      if (!exists || (want_link ? !S_ISLNK(st.st_mode) : !S_ISREG(st.st_mode))) {
        return RefuseApply(
            run_id,
            Shown(c.path) + " is " + (exists ? "a " + KindOf(st) : std::string("missing")) +
                " in " + root + ", but a " + KindOfMode(c.old_mode) + " in the run's base commit",
            "Restore your work tree to the run's base commit and try again.");
      }
    }
    checked[c.path] = k;
  }
  return checked;
}

// Writes one file or symlink at `name` in `parent_fd`: a new temporary entry, then renameat over
// the name. An existing file is never opened for writing, so neither a symlink nor a hard link at
// the name is written through.
Status WriteEntry(int parent_fd, const std::string& name, const Change& c,
                  const std::string& content) {
  static unsigned counter = 0;
  const std::string tmp =
      ".cagent-apply." + std::to_string(::getpid()) + "." + std::to_string(++counter) + ".tmp";
  if (c.new_mode == "120000") {
    if (content.empty() || content.find('\0') != std::string::npos || content.size() >= 4096) {
      return PlainError(Shown(c.path), "the symlink's target is not a valid path");
    }
    if (::symlinkat(content.c_str(), parent_fd, tmp.c_str()) != 0) {
      return ErrnoError("create the symlink " + Shown(c.path));
    }
  } else {
    // 0666 / 0777 less the umask, as git checks files out; never a set-id bit.
    const mode_t mode = c.new_mode == "100755" ? 0777 : 0666;
    UniqueFd fd(::openat(parent_fd, tmp.c_str(),
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (!fd.valid()) return ErrnoError("create " + Shown(c.path));
    std::size_t off = 0;
    while (off < content.size()) {
      const ssize_t n = ::write(fd.get(), content.data() + off, content.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = errno;
        ::unlinkat(parent_fd, tmp.c_str(), 0);
        return ErrnoError("write " + Shown(c.path), err);
      }
      off += static_cast<std::size_t>(n);
    }
  }
  if (::renameat(parent_fd, tmp.c_str(), parent_fd, name.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(parent_fd, tmp.c_str(), 0);
    return ErrnoError("rename into place " + Shown(c.path), err);
  }
  return Ok{};
}

// Step 7: deletions (deepest first), directories they leave empty, then additions and changes.
// Every parent is resolved again from the root fd at this point; an entry that is not what the
// check saw stops the apply.
Status WriteWorkTree(const WorkTree& tree, const std::vector<Change>& changes,
                     const std::map<std::string, Checked>& checked,
                     const std::map<std::string, std::string>& blobs,
                     std::vector<std::string>* written) {
  const std::set<std::string> none;
  std::vector<const Change*> removals, writes;
  for (const auto& c : changes) (c.removes() ? removals : writes).push_back(&c);
  std::sort(removals.begin(), removals.end(),
            [](const Change* a, const Change* b) { return a->path > b->path; });
  std::sort(writes.begin(), writes.end(),
            [](const Change* a, const Change* b) { return a->path < b->path; });

  auto changed_since = [](const std::string& path) {
    return PlainError(Shown(path),
                      "changed in the work tree since it was checked (a moment ago); "
                      "stopped before writing it");
  };
  std::set<std::string> emptied;
  for (const Change* c : removals) {
    auto walk = tree.WalkParents(c->path, none, /*create=*/false);
    if (!walk) return std::move(walk).Context("resolve " + Shown(c->path)).error();
    if (!walk->fd.valid()) return changed_since(c->path);
    const std::string name = Basename(c->path);
    struct stat st {};
    if (::fstatat(walk->fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !Same(IdentityOf(st), checked.at(c->path).identity)) {
      return changed_since(c->path);
    }
    if (::unlinkat(walk->fd.get(), name.c_str(), 0) != 0) {
      return ErrnoError("remove " + Shown(c->path));
    }
    written->push_back(c->path);
    for (auto slash = c->path.rfind('/'); slash != std::string::npos && slash > 0;
         slash = c->path.rfind('/', slash - 1)) {
      emptied.insert(c->path.substr(0, slash));
    }
  }
  // Directories the removals emptied go too (as git does), deepest first; one that still holds
  // something (ENOTEMPTY) stays.
  for (auto it = emptied.rbegin(); it != emptied.rend(); ++it) {
    auto walk = tree.WalkParents(*it, none, /*create=*/false);
    if (!walk || !walk->fd.valid()) continue;
    (void)::unlinkat(walk->fd.get(), Basename(*it).c_str(), AT_REMOVEDIR);
  }
  for (const Change* c : writes) {
    auto walk = tree.WalkParents(c->path, none, /*create=*/true);
    if (!walk) return std::move(walk).Context("resolve " + Shown(c->path)).error();
    const std::string name = Basename(c->path);
    const Checked& k = checked.at(c->path);
    struct stat st {};
    const bool exists = ::fstatat(walk->fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (c->adds()) {
      if (exists && S_ISDIR(st.st_mode)) {
        // A directory whose tracked files were all removed above.
        if (::unlinkat(walk->fd.get(), name.c_str(), AT_REMOVEDIR) != 0) {
          return ErrnoError("replace the directory " + Shown(c->path));
        }
      } else if (exists) {
        return changed_since(c->path);
      }
    } else if (!exists || !k.existed || !Same(IdentityOf(st), k.identity)) {
      return changed_since(c->path);
    }
    if (auto s = WriteEntry(walk->fd.get(), name, *c, blobs.at(c->new_blob)); !s) return s;
    written->push_back(c->path);
  }
  return Ok{};
}

}  // namespace

bool IsDotGitComponent(std::string_view component) {
  // Drop the code points HFS+ ignores in names (U+200C..U+200F, U+202A..U+202E, U+206A..U+206F,
  // U+FEFF), fold ASCII case, then compare with what NTFS and Win32 treat as ".git".
  std::string folded;
  for (std::size_t i = 0; i < component.size();) {
    const auto b = static_cast<unsigned char>(component[i]);
    if (b == 0xE2 && i + 2 < component.size()) {
      const auto b1 = static_cast<unsigned char>(component[i + 1]);
      const auto b2 = static_cast<unsigned char>(component[i + 2]);
      const char32_t cp = ((b & 0x0Fu) << 12) | ((b1 & 0x3Fu) << 6) | (b2 & 0x3Fu);
      if ((cp >= 0x200C && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) ||
          (cp >= 0x206A && cp <= 0x206F)) {
        i += 3;
        continue;
      }
    }
    if (b == 0xEF && i + 2 < component.size() &&
        static_cast<unsigned char>(component[i + 1]) == 0xBB &&
        static_cast<unsigned char>(component[i + 2]) == 0xBF) {
      i += 3;
      continue;
    }
    folded.push_back(b >= 'A' && b <= 'Z' ? static_cast<char>(b - 'A' + 'a')
                                          : static_cast<char>(b));
    ++i;
  }
  if (folded == "git~1") return true;
  if (!folded.starts_with(".git")) return false;
  std::string_view rest = std::string_view{folded}.substr(4);
  if (rest.starts_with(":")) return true;  // an NTFS stream of .git
  return rest.find_first_not_of(". ") == std::string_view::npos;
}

Refusal RefusedPatchPath(std::string_view path, std::string_view new_mode) {
  if (path.empty()) return "the path is empty";
  if (path.front() == '/') return "the path is absolute";
  if (path.back() == '/') return "the path ends in '/'";
  if (path.find('\0') != std::string_view::npos) return "the path holds a NUL byte";
  const std::vector<std::string> parts = SplitPath(std::string(path));
  for (const auto& part : parts) {
    if (part.empty()) return "the path has an empty component";
    if (part == "." || part == "..") return "the path has a '" + part + "' component";
    if (IsDotGitComponent(part)) {
      return "the path goes into a git directory (" + Shown(part) +
             "): a patch never writes repository metadata";
    }
  }
  if (new_mode == "160000") return "the patch adds or changes a submodule (gitlink)";
  if (new_mode == "120000") {
    // git itself refuses to read these through a symlink; a patch must not make one.
    std::string base = parts.back();
    std::transform(base.begin(), base.end(), base.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    for (const char* special : {".gitattributes", ".gitignore", ".gitmodules", ".mailmap"}) {
      if (base == special) return "the patch makes " + std::string(special) + " a symbolic link";
    }
  }
  return std::nullopt;
}

namespace {

// What the phases of ApplyRun share, filled in phase by phase.
struct Apply {
  explicit Apply(const ApplyRequest& r) : req(r) {}
  const ApplyRequest& req;
  ApplyReport report;
  RunRecord record;  // result.json
  std::string id;
  std::string patch_file;
  std::string base;                             // the run's base commit
  std::map<std::string, ChangedFile> recorded;  // result.json's changed_files, by path
  std::optional<ScratchDir> scratch;
  GitEnv env;
  std::string blob_dir;
  std::vector<Change> changes;  // the patch applied to the base, as git sees it
  std::string head_commit;      // the caller's HEAD ("" = none)
  std::optional<WorkTree> work_tree;
  std::map<std::string, Checked> checked;
  std::map<std::string, std::string> blobs;  // blob id -> content
};

// 1. The run: completed, its patch the one recorded, a valid base commit. Sets nothing_to_apply
// for an empty patch.
Status CheckRun(Apply& a) {
  auto record = ReadRunResult(a.req.run_dir);
  if (!record) return record.error();
  a.record = std::move(*record);
  const RunRecord& r = a.record;
  a.report.run_id = r.run_id;
  if (a.report.run_id.empty()) a.report.run_id = fs::path(a.req.run_dir).filename().string();
  a.id = a.report.run_id;
  const std::string& id = a.id;
  if (r.unknown_status || r.state != RunState::kCompleted) {
    return PlainError("apply run " + id, "the run is " + Shown(r.status()) +
                                             ", not completed: only a completed run's patch "
                                             "is applied");
  }
  a.report.unverified = !r.recorded_verified.value_or(false);
  bool ok = false;
  a.patch_file = a.req.run_dir + "/patch.diff";
  const std::string patch = ReadFile(a.patch_file, &ok);
  if (!ok) return PlainError("apply run " + id, "cannot read " + a.patch_file);
  const std::string& expected = r.patch.sha256;
  if (Sha256Hex(patch) != expected) {
    return PlainError("apply run " + id, a.patch_file +
                                             " does not match the digest recorded for the run (" +
                                             expected.substr(0, 16) +
                                             "); refusing a patch that changed after the run");
  }
  a.base = r.base_commit;
  if (a.base.size() != 40 || a.base.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return PlainError("apply run " + id, "result.json records no valid base commit");
  }
  a.report.nothing_to_apply = patch.empty();
  return Ok{};
}

// 2. The paths, as strings, from result.json.
Status CheckRecordedPaths(Apply& a) {
  // A record without the list (damaged) lists nothing: a patch that changes anything then
  // disagrees with it (CheckPatchEffect).
  for (const ChangedFile& f : a.record.patch.files) {
    const std::string& path = f.path;
    if (const Refusal why = RefusedPatchPath(path, f.new_mode)) {
      return RefuseApply(a.id, "the patch touches " + Shown(path) + ": " + *why,
                         "Review it with cagent diff " + a.id + "; such a patch is never applied.");
    }
    a.recorded[path] = f;
  }
  return Ok{};
}

// 3a. cagent's scratch git dir: a bare repository borrowing the run's own objects, converting
// nothing.
Status MakeScratchGit(Apply& a) {
  const WorkspaceLayout layout = LayoutFor(a.req.run_dir);
  std::error_code ec;
  if (!fs::is_directory(layout.trusted_git + "/objects", ec)) {
    return PlainError("apply run " + a.id, "the run's own git directory " + layout.trusted_git +
                                               " is missing; the patch cannot be checked "
                                               "without it (run the task again)");
  }
  auto scratch = ScratchDir::Make(a.req.run_dir);
  if (!scratch) return scratch.error();
  a.scratch.emplace(std::move(*scratch));
  GitEnv& env = a.env;
  env.scratch_git = a.scratch->path() + "/git";
  env.home = a.scratch->path() + "/home";
  a.blob_dir = a.scratch->path() + "/blobs";
  fs::create_directories(env.home, ec);
  fs::create_directories(a.blob_dir, ec);
  GitInvocation init;
  init.cwd = a.scratch->path();
  init.home = env.home;
  init.args = {"init", "--quiet", "--bare", "--template=", "--", env.scratch_git};
  if (auto r = GitOutput(init); !r) return std::move(r).Context("prepare the check").error();
  fs::create_directories(env.scratch_git + "/objects/info", ec);
  fs::create_directories(env.scratch_git + "/info", ec);
  std::ofstream alt(env.scratch_git + "/objects/info/alternates", std::ios::trunc);
  alt << fs::absolute(layout.trusted_git + "/objects").string() << "\n";
  // Highest-precedence attributes: nothing converts content in the scratch index.
  std::ofstream attrs(env.scratch_git + "/info/attributes", std::ios::trunc);
  attrs << "* -text -eol -ident -filter -diff -merge -working-tree-encoding -whitespace\n";
  if (!alt || !attrs) return PlainError("prepare the check", "cannot write in " + env.scratch_git);
  return Ok{};
}

// 3b. The patch applied to the base in the scratch git dir; the three views of the change set
// (the patch's own list, its effect, result.json) must agree.
Status CheckPatchEffect(Apply& a) {
  const std::string& id = a.id;
  const GitEnv& env = a.env;
  if (auto r = GitOutput(InScratch(env, {"read-tree", a.base})); !r) {
    return std::move(r).Context("read the run's base commit " + a.base.substr(0, 12)).error();
  }
  auto numstat = GitOutput(InScratch(env, {"apply", "--numstat", "-z", "--", a.patch_file}));
  if (!numstat) return std::move(numstat).Context("read the patch's file list").error();
  auto listed = NumstatPaths(*numstat);
  if (!listed) return listed.error();
  for (const auto& path : *listed) {
    if (const Refusal why = RefusedPatchPath(path, "")) {
      return RefuseApply(id, "the patch touches " + Shown(path) + ": " + *why,
                         "Review it with cagent diff " + id + "; such a patch is never applied.");
    }
  }
  if (auto r = GitOutput(
          InScratch(env, {"apply", "--cached", "--whitespace=nowarn", "--", a.patch_file}));
      !r) {
    return std::move(r)
        .Context("apply the patch to the base commit (in cagent's own git dir)")
        .error();
  }
  auto tree = GitOutput(InScratch(env, {"write-tree"}));
  if (!tree) return std::move(tree).Context("record the patched tree").error();
  auto raw = GitOutput(InScratch(env, {"diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff",
                                       "--no-textconv", a.base, TrimLine(*tree)}));
  if (!raw) return std::move(raw).Context("list the patch's changes").error();
  auto changes = ParseRaw(*raw);
  if (!changes) return changes.error();
  a.changes = std::move(*changes);

  std::set<std::string> seen;
  for (const auto& c : a.changes) {
    seen.insert(c.path);
    if (const Refusal why = RefusedPatchPath(c.path, c.new_mode)) {
      return RefuseApply(id, "the patch touches " + Shown(c.path) + ": " + *why,
                         "Review it with cagent diff " + id + "; such a patch is never applied.");
    }
    if (c.old_mode == "160000" || !IsDecimalModeOf(c.old_mode) || !IsDecimalModeOf(c.new_mode) ||
        std::string("AMDT").find(c.status) == std::string::npos) {
      return RefuseApply(id,
                         "the patch changes " + Shown(c.path) +
                             " in a way cagent does not apply (" + c.status + " " + c.old_mode +
                             " -> " + c.new_mode + ")",
                         "Apply it by hand after reviewing it with cagent diff " + id + ".");
    }
    const auto rec = a.recorded.find(c.path);
    if (rec == a.recorded.end() || rec->second.status != c.status ||
        rec->second.new_mode != c.new_mode || rec->second.old_mode != c.old_mode) {
      return RefuseApply(id,
                         "the patch changes " + Shown(c.path) + " (" + c.status + " " + c.old_mode +
                             " -> " + c.new_mode +
                             "), which is not what result.json records for the run",
                         "The run directory was altered; run the task again.");
    }
  }
  for (const auto& [path, f] : a.recorded) {
    if (seen.count(path) == 0) {
      return RefuseApply(id,
                         "result.json lists " + Shown(path) +
                             " as changed, but the patch does not "
                             "change it",
                         "The run directory was altered; run the task again.");
    }
  }
  if (*listed != seen) {
    return RefuseApply(id,
                       "the patch's own file list (git apply --numstat) and its effect on the base "
                       "commit disagree",
                       "Review it with cagent diff " + id + "; such a patch is never applied.");
  }
  for (const auto& c : a.changes) {
    if (c.new_mode != "120000") continue;
    for (const auto& other : a.changes) {
      if (!other.removes() && other.path.starts_with(c.path + "/")) {
        return RefuseApply(id,
                           "the patch makes " + Shown(c.path) + " a symbolic link and writes " +
                               Shown(other.path) + " through it",
                           "Such a patch is never applied.");
      }
    }
  }
  return Ok{};
}

// The caller's uncommitted paths, untracked files under the profile's outputs left out (a
// build/ the caller's own build left is not an uncommitted change, issue 32; the patch never adds
// a path there, and one that adds a file where one exists is refused by the collision checks).
Result<std::vector<std::string>> DirtyPaths(const Apply& a) {
  const GitEnv& env = a.env;
  auto status = GitOutput(InRepo(
      env, {"status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all"}));
  if (!status) return std::move(status).Context("check " + env.repo_root + " is clean").error();
  std::vector<std::string> out;
  for (auto& e : SplitNul(*status)) {
    if (!e.empty()) out.push_back(std::move(e));
  }
  if (!a.record.outputs.empty()) {
    std::vector<policy::OutputRule> outputs;
    for (const std::string& o : a.record.outputs) {
      auto glob = policy::PathGlob::Compile(o);
      if (glob) outputs.push_back({o, std::move(*glob), {}});
    }
    RepoInfo info;
    info.dirty = std::move(out);
    LeaveOutUntrackedOutputs(info, outputs);
    out = std::move(info.dirty);
  }
  return out;
}

// The branch --branch names: a checkout of the base runs with every filter driver emptied (and
// no hook, as every git of cagent's).
Status MakeBranch(Apply& a) {
  auto r = GitOutput(InRepo(a.env, {"switch", "--quiet", "--no-guess", "--no-recurse-submodules",
                                    "--create", a.req.branch, a.base}));
  if (!r) return std::move(r).Context("create the branch " + Shown(a.req.branch)).error();
  a.report.branch = a.req.branch;
  return Ok{};
}

// 4. The caller's repository: clean, at the base (or a valid --branch to make there).
Status CheckRepository(Apply& a) {
  const std::string& id = a.id;
  GitEnv& env = a.env;
  const std::string repo_dir = a.req.repo.empty() ? a.record.repo : a.req.repo;
  if (repo_dir.empty()) return PlainError("apply run " + id, "no repository (pass --repo DIR)");
  GitInvocation g;
  g.cwd = repo_dir;
  g.home = env.home;
  g.args = {"rev-parse", "--show-toplevel"};
  auto root = GitOutput(g);
  if (!root) return PlainError(repo_dir, "is not a git work tree (pass --repo DIR)");
  env.repo_root = TrimLine(*root);
  a.report.repo_root = env.repo_root;
  auto overrides = FilterOverrides(env.repo_root, env.home);
  if (!overrides) return overrides.error();
  env.filter_overrides = std::move(*overrides);
  auto dirty = DirtyPaths(a);
  if (!dirty) return dirty.error();
  if (!dirty->empty()) {
    std::string list;
    for (std::size_t i = 0; i < dirty->size() && i < 5; ++i) list += " " + Shown((*dirty)[i]);
    return RefuseApply(id, env.repo_root + " has uncommitted changes:" + list,
                       "Commit or stash them before applying run " + id + ".");
  }
  auto head = GitOutput(InRepo(env, {"rev-parse", "--verify", "--quiet", "HEAD^{commit}"}));
  a.head_commit = head ? TrimLine(*head) : "";
  const std::string& branch = a.req.branch;
  if (!branch.empty()) {
    if (branch.starts_with("-")) {
      return PlainError("--branch " + Shown(branch), "is not a valid branch name");
    }
    auto valid = GitOutput(InRepo(env, {"check-ref-format", "--branch", branch}));
    if (!valid) return PlainError("--branch " + Shown(branch), "is not a valid branch name");
  } else if (a.head_commit != a.base) {
    return RefuseApply(id,
                       env.repo_root + " has moved: HEAD is " + a.head_commit.substr(0, 12) +
                           ", the run was made on " + a.base.substr(0, 12),
                       "Check out the base commit, or pass --branch NAME to apply on a new branch "
                       "created at it.");
  }
  // When HEAD is already the base nothing is checked out (the branch is made in phase 6).
  if (!branch.empty() && a.head_commit != a.base) {
    if (auto s = MakeBranch(a); !s) return s.error();
    auto again = DirtyPaths(a);
    if (!again) return again.error();
    if (!again->empty()) {
      return PlainError("apply run " + id, "the branch " + Shown(branch) +
                                               " was created at the base, but its "
                                               "checkout left changes in the work tree; nothing "
                                               "of the patch was written");
    }
  }
  return Ok{};
}

// 5. The work tree, kernel-resolved.
Status CheckTree(Apply& a) {
  auto work_tree = WorkTree::Open(a.env.repo_root);
  if (!work_tree) return work_tree.error();
  a.work_tree.emplace(std::move(*work_tree));
  auto checked = CheckWorkTree(*a.work_tree, a.changes, a.id);
  if (!checked) {
    Error e = checked.error();
    if (!a.report.branch.empty()) {
      e.detail += " (The branch " + TerminalSafe(a.req.branch) +
                  " was created and checked out at the base first.)";
    }
    return e;
  }
  a.checked = std::move(*checked);
  return Ok{};
}

// 6. The blobs, into the caller's object store, unfiltered; each must get the run's id.
Status StoreBlobs(Apply& a) {
  const GitEnv& env = a.env;
  std::vector<std::pair<std::string, std::string>> to_hash;  // (file, expected id)
  for (const auto& c : a.changes) {
    if (c.removes() || a.blobs.count(c.new_blob) != 0) continue;
    GitInvocation cat = InScratch(env, {"cat-file", "blob", c.new_blob});
    cat.max_output = 1ULL << 31;
    auto content = GitOutput(cat);
    if (!content) return std::move(content).Context("read " + Shown(c.path)).error();
    auto file = WriteScratchFile(a.blob_dir, to_hash.size(), *content);
    if (!file) return file.error();
    to_hash.emplace_back(*file, c.new_blob);
    a.blobs[c.new_blob] = std::move(*content);
  }
  for (std::size_t i = 0; i < to_hash.size(); i += kArgsPerCall) {
    std::vector<std::string> args = {"hash-object", "-w", "--no-filters", "--"};
    for (std::size_t k = i; k < std::min(to_hash.size(), i + kArgsPerCall); ++k) {
      args.push_back(to_hash[k].first);
    }
    auto ids = GitOutput(InRepo(env, args));
    if (!ids) return std::move(ids).Context("store the patch's files in " + env.repo_root).error();
    std::istringstream lines(*ids);
    std::string line;
    for (std::size_t k = i; k < std::min(to_hash.size(), i + kArgsPerCall); ++k) {
      if (!std::getline(lines, line) || line != to_hash[k].second) {
        return PlainError("apply run " + a.id,
                          "the repository stored a file under a different "
                          "id than the run's (another object format?); "
                          "nothing was written");
      }
    }
  }
  if (!a.req.branch.empty() && a.head_commit == a.base) return MakeBranch(a);
  return Ok{};
}

// 7. The files.
Status WriteFiles(Apply& a) {
  if (a.req.before_write) a.req.before_write();
  std::vector<std::string> written;
  if (auto s = WriteWorkTree(*a.work_tree, a.changes, a.checked, a.blobs, &written); !s) {
    Error e = s.error();
    std::string list;
    for (const auto& p : written) list += " " + Shown(p);
    e.context = "apply run " + a.id + " stopped: " + e.context;
    e.detail += written.empty()
                    ? std::string(" (nothing was written)")
                    : " (already changed in the work tree, not in the index:" + list +
                          "; inspect with git status and restore with git checkout -- PATH)";
    return e;
  }
  a.report.paths = std::move(written);
  return Ok{};
}

// 8. The index.
Status StageFiles(const Apply& a) {
  std::vector<std::string> removed;
  std::vector<std::string> entries;
  for (const auto& c : a.changes) {
    if (c.removes()) {
      removed.push_back(c.path);
    } else {
      entries.push_back(c.new_mode + "," + c.new_blob + "," + c.path);
    }
  }
  // `prefix` then, for each item, `flag` (if any) and the item, at most kArgsPerCall items a call.
  auto stage = [&](const std::vector<std::string>& prefix, const char* flag,
                   const std::vector<std::string>& items) -> Status {
    for (std::size_t i = 0; i < items.size(); i += kArgsPerCall) {
      std::vector<std::string> args = prefix;
      for (std::size_t k = i; k < std::min(items.size(), i + kArgsPerCall); ++k) {
        if (flag != nullptr) args.emplace_back(flag);
        args.push_back(items[k]);
      }
      if (auto r = GitOutput(InRepo(a.env, args)); !r) {
        return std::move(r)
            .Context("the files were written, but staging failed (stage them with git add)")
            .error();
      }
    }
    return Ok{};
  };
  if (auto st = stage({"update-index", "--force-remove", "--"}, nullptr, removed); !st) {
    return st.error();
  }
  return stage({"update-index", "--add", "--replace"}, "--cacheinfo", entries);
}

}  // namespace

Result<ApplyReport> ApplyRun(const ApplyRequest& req) {
  Apply a(req);
  if (auto s = CheckRun(a); !s) return s.error();
  if (a.report.nothing_to_apply) return a.report;
  for (Status (*phase)(Apply&) : {CheckRecordedPaths, MakeScratchGit, CheckPatchEffect,
                                  CheckRepository, CheckTree, StoreBlobs, WriteFiles}) {
    if (auto s = phase(a); !s) return s.error();
  }
  if (auto s = StageFiles(a); !s) return s.error();
  return a.report;
}

}  // namespace cagent::launcher::run
