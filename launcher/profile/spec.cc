#include "launcher/profile/spec.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <set>

#include "common/beneath.h"
#include "common/terminal_text.h"
#include "common/unique_fd.h"
#include "launcher/profile/caches.h"
#include "launcher/profile/repo_profiles.h"
#include "policy/match/host_secrets.h"

namespace cagent::launcher {
namespace {

using policy::Access;
using policy::Limit;
using policy::MountMode;
using policy::PathBase;
using policy::Verdict;

// Symlinks the kernel follows in one lookup before ELOOP (fs/namei.c MAXSYMLINKS).
constexpr int kMaxSymlinks = 40;

// Workspace paths are opened beneath a workspace directory fd with every symlink refused
// (common/beneath.h).
constexpr std::uint64_t kBeneathNoLinks = kResolveBeneathNoLinks;

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// `path` lies strictly below directory `dir` (both absolute and normalised).
bool IsUnder(std::string_view path, std::string_view dir) {
  if (dir == "/") return path.size() > 1 && path[0] == '/';
  return path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/';
}
bool AtOrUnder(std::string_view path, std::string_view dir) {
  return path == dir || IsUnder(path, dir);
}

std::string Dirname(const std::string& p) {
  const std::size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}
std::string Basename(const std::string& p) {
  const std::size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}
std::string JoinPath(const std::string& dir, const std::string& rel) {
  if (rel.empty()) return dir;
  return dir == "/" ? "/" + rel : dir + "/" + rel;
}

// `path` (at or below `ws`) relative to it; "." for the workspace itself.
std::string RelTo(const std::string& ws, const std::string& path) {
  return path == ws ? std::string(".") : path.substr(ws.size() + 1);
}

// A workspace-derived name for a note: one line, no control or invisible characters.
std::string Shown(std::string_view text) { return TerminalSafe(text, TerminalLines::kOne); }

// The destination mountns gives a host path: realpath() of its parent joined with its last
// component (a symlink there is re-created, not followed). "" when the parent does not resolve.
std::string HostDestination(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(Dirname(path).c_str(), nullptr),
                                                   &std::free);
  if (!real) return {};
  return JoinPath(real.get(), Basename(path));
}

std::vector<std::string> SplitPath(std::string_view text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('/', start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) parts.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

}  // namespace

bool HostResolutionEnters(const std::string& path, const std::string& ws) {
  if (AtOrUnder(path, ws)) return true;
  std::deque<std::string> todo;
  auto push_front = [&todo](const std::string& text) {
    const std::vector<std::string> parts = SplitPath(text);
    todo.insert(todo.begin(), parts.begin(), parts.end());
  };
  push_front(path);
  std::string cur = "/";
  int links = 0;
  while (!todo.empty()) {
    const std::string comp = todo.front();
    todo.pop_front();
    if (comp == ".") continue;
    if (comp == "..") {
      cur = Dirname(cur);
      continue;
    }
    const std::string next = JoinPath(cur, comp);
    if (AtOrUnder(next, ws)) return true;
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0) return false;
    if (!S_ISLNK(st.st_mode)) {
      cur = next;
      continue;
    }
    if (++links > kMaxSymlinks) return false;
    std::array<char, PATH_MAX> buf{};
    const ssize_t n = ::readlink(next.c_str(), buf.data(), buf.size() - 1);
    if (n <= 0) return false;
    const std::string target(buf.data(), static_cast<std::size_t>(n));
    if (target.starts_with('/')) cur = "/";
    push_front(target);
  }
  return false;
}

namespace {

// The sandbox's view as it is being built, for judging where a path leads *inside* the sandbox.
// Each region is a tree the view shows at its own path: host binds (read-only or read-write), the
// workspace, the private tmpfs and procfs trees, and hidden paths. What no region covers is not
// in the view, except the skeleton directories the view creates to hold mount points ("/",
// "/home" for "/home/cagent").
class View {
 public:
  enum class Part : std::uint8_t {
    kOutside,    // not in the view: reading there finds nothing
    kSkeleton,   // a directory of the read-only root that only holds mount points
    kPrivate,    // the sandbox's own /tmp, HOME, /dev, /proc: nothing of the host's to protect
    kHidden,     // already covered by a hide mount
    kReadOnly,   // a host tree (or workspace part) shown read-only
    kReadWrite,  // a host tree (or the workspace) shown read-write
  };

  // `ws_fd`: an O_PATH descriptor of the canonical workspace `ws`, owned by the caller.
  View(const LaunchSpec& spec, int ws_fd) : ws_(spec.workspace), ws_fd_(ws_fd) {
    // Ranks follow the order mountns lays the view down in, so that at one path the later mount
    // wins as it will in the sandbox: read-only binds, /tmp and HOME, read-write binds, the
    // workspace, /dev and /proc, hidden paths.
    for (const auto& p : spec.read_only_paths) AddHost(p, Part::kReadOnly, 0);
    Add("/tmp", Part::kPrivate, 1);
    Add(spec.home, Part::kPrivate, 1);
    for (const auto& p : spec.read_write_paths) AddHost(p, Part::kReadWrite, 2);
    Add(ws_, spec.workspace_writable ? Part::kReadWrite : Part::kReadOnly, 3);
    Add("/dev", Part::kPrivate, 4);
    Add("/proc", Part::kPrivate, 4);
    for (const auto& p : spec.hidden_paths) Add(p, Part::kHidden, 5);
  }

  // Records a mount SpecFromPolicy adds inside the view (a deny rule's re-bind or hide).
  void Add(const std::string& path, Part part, int rank) { regions_.push_back({path, part, rank}); }

  // A directory of the caller's checkout shown read-only at workspace path `target` (carry). Its
  // content is looked at beneath `fd` (borrowed, a directory), not at the empty mount point the
  // host's workspace has there.
  void AddCarried(const std::string& target, int fd) {
    carried_.push_back({target, fd});
    Add(target, Part::kReadOnly, 7);
  }

  [[nodiscard]] const std::string& workspace() const { return ws_; }

  [[nodiscard]] Part PartOf(const std::string& path) const {
    const Region* best = nullptr;
    for (const auto& r : regions_) {
      if (!AtOrUnder(path, r.path)) continue;
      if (best == nullptr || r.path.size() > best->path.size() ||
          (r.path.size() == best->path.size() && r.rank >= best->rank)) {
        best = &r;
      }
    }
    // A directory that holds mount points deeper down exists in the view as part of their
    // skeleton: the root, a private tmpfs's directories leading to a workspace in /tmp.
    const bool holds_mounts = std::any_of(regions_.begin(), regions_.end(),
                                          [&](const Region& r) { return IsUnder(r.path, path); });
    if (best != nullptr && best->part != Part::kPrivate) return best->part;
    if (holds_mounts || path == "/") return Part::kSkeleton;
    return best != nullptr ? best->part : Part::kOutside;
  }

  struct Resolution {
    Part part = Part::kOutside;
    std::string path;    // the view path reached (absolute, free of symlinks)
    bool exists = true;  // false: a component is missing, not a directory, or a loop
  };

  // Resolves `text` (a symlink's content, or a path) starting from view directory `dir` (absolute,
  // free of symlinks) the way a lookup inside the sandbox would: each component is examined in the
  // tree that shows it, and only there. Inside the workspace that is an openat2(RESOLVE_BENEATH |
  // RESOLVE_NO_SYMLINKS) open of the parent from the workspace fd and an fstatat/readlinkat of the
  // name; in host trees the view shows, an lstat/readlink of the host path (the same file). Nothing
  // outside the view is ever examined: the walk stops there.
  [[nodiscard]] Resolution Resolve(std::string dir, std::string_view text) const {
    std::deque<std::string> todo;
    auto push_front = [&todo](std::string_view t) {
      const std::vector<std::string> parts = SplitPath(t);
      todo.insert(todo.begin(), parts.begin(), parts.end());
    };
    std::string cur = text.starts_with('/') ? std::string("/") : std::move(dir);
    push_front(text);
    int links = 0;
    while (!todo.empty()) {
      const std::string comp = todo.front();
      todo.pop_front();
      if (comp == ".") continue;
      if (comp == "..") {
        cur = Dirname(cur);  // `cur` holds no symlink, so its lexical parent is the real one
        continue;
      }
      const std::string next = JoinPath(cur, comp);
      const Part part = PartOf(next);
      if (part == Part::kOutside || part == Part::kPrivate || part == Part::kHidden) {
        std::string rest = next;
        for (const auto& c : todo) rest += "/" + c;
        return {part, rest, true};
      }
      if (part == Part::kSkeleton) {
        cur = next;
        continue;
      }
      struct stat st {};
      std::string target;
      if (!Inspect(next, &st, &target)) return {part, next, false};
      if (S_ISLNK(st.st_mode)) {
        if (++links > kMaxSymlinks) return {part, next, false};
        if (target.starts_with('/')) cur = "/";
        push_front(target);
        continue;
      }
      if (!todo.empty() && !S_ISDIR(st.st_mode)) return {part, next, false};
      cur = next;
    }
    return {PartOf(cur), cur, true};
  }

 private:
  struct Region {
    std::string path;
    Part part;
    int rank;
  };

  void AddHost(const std::string& p, Part part, int rank) {
    if (AtOrUnder(p, ws_)) {
      Add(p, part, rank);  // checked beneath the workspace before it was added
      return;
    }
    std::string dest = HostDestination(p);
    if (!dest.empty()) Add(dest, part, rank);
  }

  // lstat of view path `path` (in a tree the view shows) and, for a symlink, its text.
  bool Inspect(const std::string& path, struct stat* st, std::string* target) const {
    const Carried* carried = nullptr;
    for (const Carried& c : carried_) {
      if (AtOrUnder(path, c.target) &&
          (carried == nullptr || c.target.size() > carried->target.size())) {
        carried = &c;
      }
    }
    if (carried != nullptr) return InspectBeneath(carried->fd, carried->target, path, st, target);
    if (AtOrUnder(path, ws_)) return InspectBeneath(ws_fd_, ws_, path, st, target);
    std::array<char, PATH_MAX> buf{};
    if (::lstat(path.c_str(), st) != 0) return false;
    if (!S_ISLNK(st->st_mode)) return true;
    const ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size() - 1);
    if (n < 0) return false;
    target->assign(buf.data(), static_cast<std::size_t>(n));
    return true;
  }

  // The same for `path` at or below `top`, a tree shown from directory fd `top_fd`: the parent is
  // opened beneath it with links refused.
  static bool InspectBeneath(int top_fd, const std::string& top, const std::string& path,
                             struct stat* st, std::string* target) {
    if (path == top) return ::fstat(top_fd, st) == 0;
    const std::string rel = RelTo(top, path);
    const std::string parent = rel.find('/') == std::string::npos ? "." : Dirname(rel);
    UniqueFd dir(Openat2(top_fd, parent, O_PATH | O_DIRECTORY, kBeneathNoLinks));
    if (!dir.valid()) return false;
    const std::string name = Basename(rel);
    if (::fstatat(dir.get(), name.c_str(), st, AT_SYMLINK_NOFOLLOW) != 0) return false;
    if (!S_ISLNK(st->st_mode)) return true;
    std::array<char, PATH_MAX> buf{};
    const ssize_t n = ::readlinkat(dir.get(), name.c_str(), buf.data(), buf.size() - 1);
    if (n < 0) return false;
    target->assign(buf.data(), static_cast<std::size_t>(n));
    return true;
  }

  struct Carried {
    std::string target;
    int fd;
  };
  std::string ws_;
  int ws_fd_;
  std::vector<Region> regions_;
  std::vector<Carried> carried_;
};

// Applies the outcome of a deny rule (`write_only`: deny write; else deny read and write) to what
// `what` (a symlink or a path with a symlinked component, shown as written) leads to in the view.
// Never adds a tree to the view: a target the view shows read-write is re-bound read-only onto
// itself or hidden; one it shows read-only needs nothing for a write denial, and is hidden for a
// read denial only when it is workspace content (a host tree the profile shows at its own path
// stays readable there anyway); one outside the view, in the sandbox's private trees or missing
// is left alone with a note. The link itself cannot carry a mount: the broker's path rules and the
// run's patch check judge writes to the link's name.
void CoverTarget(const View::Resolution& r, const std::string& what, bool write_only,
                 const std::string& rule, View& view, LaunchSpec& spec,
                 std::vector<std::string>& notes) {
  using Part = View::Part;
  const std::string& ws = view.workspace();
  const bool in_ws = AtOrUnder(r.path, ws);
  const std::string shown = Shown(in_ws ? RelTo(ws, r.path) : r.path);
  const std::string head = Shown(what) + " leads to " + shown + " (" + rule + ")";
  const std::string link_note =
      "; writes to the name itself are judged by the broker's path rules and the patch check";
  if (!r.exists) {
    notes.push_back(head + ": it does not exist in the sandbox's view, nothing mounted" +
                    link_note);
    return;
  }
  switch (r.part) {
    case Part::kOutside:
      notes.push_back(head +
                      ": outside the sandbox's view, not mounted (reading through it finds "
                      "nothing)" +
                      link_note);
      return;
    case Part::kSkeleton:
    case Part::kPrivate:
      notes.push_back(head +
                      ": the sandbox's own root, /tmp, HOME, /dev or /proc, nothing of the "
                      "host's to cover" +
                      link_note);
      return;
    case Part::kHidden:
      notes.push_back(head + ": already hidden");
      return;
    case Part::kReadOnly:
      if (write_only) {
        notes.push_back(head + ": already read-only");
        return;
      }
      if (!in_ws) {
        notes.push_back(head +
                        ": not hidden, the profile shows it read-only at its own path; "
                        "cagent hides only workspace content on a link's behalf");
        return;
      }
      break;
    case Part::kReadWrite:
      break;
  }
  if (write_only) {
    spec.read_only_paths.push_back(r.path);
    view.Add(r.path, Part::kReadOnly, 6);
    notes.push_back("read-only " + shown + " (target of " + Shown(what) + ", " + rule + ")");
  } else {
    spec.hidden_paths.push_back(r.path);
    view.Add(r.path, Part::kHidden, 6);
    notes.push_back("hidden " + shown + " (target of " + Shown(what) + ", " + rule + ")");
  }
}

// The canonical form of the caller's home for the view's paths ("" when there is none or it does
// not resolve: then nothing of it can be in the view either).
std::string CanonicalHome(const std::string& home) {
  if (home.empty() || home[0] != '/') return {};
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(home.c_str(), nullptr), &std::free);
  return real ? std::string(real.get()) : std::string();
}

// Hides the host secret set (policy/match/host_secrets.h) under the caller's home (`home`,
// canonical or
// "") and at the workspace's top level, in the view as `view` knows it. Each path is resolved the
// way the sandbox will resolve it (View::Resolve: workspace components beneath the workspace fd,
// no symlink followed on the host): a path the view shows is hidden; a path with a symlink on its
// way is judged like a deny rule on a link (CoverTarget: the link's target is hidden only where
// the view shows it, nothing is added). Binds the view would show inside the set (`--ro
// ~/.ssh/known_hosts`, `read-only ~/.aws/config`) are dropped, so no part of it shows through.
void HideSecretsIn(View& view, const std::string& home, LaunchSpec& spec,
                   std::vector<std::string>& notes) {
  const std::string& ws = view.workspace();
  std::vector<std::string> roots;
  if (!home.empty() && home != ws) roots.push_back(home);
  roots.push_back(ws);
  for (const std::string& root : roots) {
    const bool in_ws = AtOrUnder(root, ws);
    for (std::string_view secret : policy::HostSecretPaths()) {
      const std::string rel(secret);
      const std::string path = JoinPath(root, rel);
      const std::string shown = Shown(root == home ? "~/" + rel : (in_ws ? RelTo(ws, path) : path));
      for (auto* list : {&spec.read_only_paths, &spec.read_write_paths}) {
        std::erase_if(*list, [&](const std::string& bound) {
          if (!IsUnder(bound, path)) return false;
          notes.push_back("skipped " + Shown(bound) + ": inside " + shown +
                          ", part of the host secret set cagent always hides");
          return true;
        });
      }
      const View::Resolution r = view.Resolve(root, rel);
      if (!r.exists) continue;
      if (r.path == path) {
        if (r.part != View::Part::kReadOnly && r.part != View::Part::kReadWrite) continue;
        spec.hidden_paths.push_back(path);
        view.Add(path, View::Part::kHidden, 6);
        notes.push_back("hidden " + shown + " (the host secret set)");
        continue;
      }
      CoverTarget(r, shown, /*write_only=*/false, "the host secret set", view, spec, notes);
    }
  }
  // A hide below another one (base's `deny **/id_ed25519*` found ~/.ssh/id_ed25519 before ~/.ssh
  // was hidden) has nothing to mount on: the outer hide is an empty directory.
  const std::vector<std::string> hidden = spec.hidden_paths;
  std::erase_if(spec.hidden_paths, [&](const std::string& p) {
    return std::any_of(hidden.begin(), hidden.end(),
                       [&](const std::string& outer) { return IsUnder(p, outer); });
  });
}

// Walks a tree without following symlinks and applies deny globs to what exists. Every directory
// is opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) from the walk's root fd, so a
// directory swapped for a symlink during the walk fails the lookup instead of leading elsewhere,
// and no descriptor is held across the recursion (a deep tree cannot exhaust them).
class GlobWalker {
 public:
  enum class Kind : std::uint8_t { kDir, kLink, kOther };

  // Applies the deny rules written relative to `base_dir` (the workspace, the home directory, or
  // "/" for absolute globs) whose matches lie under base_dir/start_rel. Paths added to `spec` are
  // below `canonical_start` (base_dir/start_rel with host symlinks resolved; the walk root).
  GlobWalker(std::vector<const policy::PathRule*> rules, std::string base_dir, View& view,
             LaunchSpec& spec, std::vector<std::string>& notes, std::size_t& entries)
      : base_dir_(std::move(base_dir)),
        view_(view),
        spec_(spec),
        notes_(notes),
        rules_(std::move(rules)),
        entries_(entries) {}

  // `root`: a directory fd of `canonical_start` (borrowed), or -1 when the start is not a
  // directory. The start itself may match ("~/.ssh" for "~/.ssh/**", "~/.netrc") unless
  // `start_rel` is empty (the workspace root). `start_read_only`: the view shows the start
  // read-only already (a carried directory), so only hiding adds anything.
  Status Run(int root, const std::string& canonical_start, const std::string& start_rel,
             bool start_read_only = false) {
    if (rules_.empty()) return Ok{};
    root_ = root;
    canonical_start_ = canonical_start;
    start_rel_ = start_rel;
    bool read_only = start_read_only;
    if (!start_rel.empty()) {
      const Entry start{"", root >= 0 ? Kind::kDir : Kind::kOther, ""};
      if (Apply(start, start_rel, start_read_only, &read_only) || root < 0) return Ok{};
    }
    return Walk(start_rel, read_only);
  }

 private:
  struct Entry {
    std::string name;
    Kind kind;
    std::string link;  // a symlink's text
  };

  // The canonical path of walk entry `rel` (relative to base_dir_, at or below start_rel_).
  std::string Canonical(const std::string& rel) const {
    if (rel == start_rel_) return canonical_start_;
    return JoinPath(canonical_start_, start_rel_.empty() ? rel : rel.substr(start_rel_.size() + 1));
  }
  // The same entry relative to the walk's root fd ("." for the root).
  std::string FromRoot(const std::string& rel) const {
    if (rel == start_rel_) return ".";
    return start_rel_.empty() ? rel : rel.substr(start_rel_.size() + 1);
  }

  const std::string base_dir_;
  View& view_;
  LaunchSpec& spec_;
  std::vector<std::string>& notes_;
  std::vector<const policy::PathRule*> rules_;
  std::size_t& entries_;
  int root_ = -1;
  std::string canonical_start_;
  std::string start_rel_;

  // Hides or write-protects the entry at `rel` if a rule matches; true when nothing below needs
  // visiting.
  bool Apply(const Entry& e, const std::string& rel, bool under_read_only, bool* made_read_only) {
    const std::string abs = Canonical(rel);
    int m = Match(JoinPath(base_dir_, rel), rel);
    // Below a tree already bound read-only, write rules add nothing; only hiding does.
    if (m == 1 && under_read_only && e.kind != Kind::kLink) m = 0;
    if (m == 0) return false;
    if (e.kind == Kind::kLink) {
      if (e.link.empty()) {
        notes_.push_back(Shown(rel) + ": a symlink cagent could not read; nothing mounted");
        return true;
      }
      // A mount cannot cover the link; what it covers is what the link leads to *in the view*,
      // resolved the way the sandbox will resolve it, and only when the view shows it already.
      // (Before: realpath() on the host, and the target added to the view — a workspace link
      // `test_helpers.py -> ~` under `deny write test_*.py` mounted the caller's home.)
      const View::Resolution r = view_.Resolve(Dirname(abs), e.link);
      CoverTarget(r, rel, m == 1, m == 1 ? "deny write rule" : "deny rule", view_, spec_, notes_);
      return true;
    }
    if (m == 2) {
      spec_.hidden_paths.push_back(abs);
      view_.Add(abs, View::Part::kHidden, 6);
      notes_.push_back("hidden " + Shown(rel) + " (deny rule)");
      return true;  // nothing below a hidden path is visible
    }
    spec_.read_only_paths.push_back(abs);
    view_.Add(abs, View::Part::kReadOnly, 6);
    notes_.push_back("read-only " + Shown(rel) + " (deny write rule)");
    if (made_read_only != nullptr) *made_read_only = true;
    return false;  // a read-only tree may still hold files that must be hidden
  }

  // The strongest deny for the entry at `abs` (`rel` below the walk's base): 2 = read and write
  // (hide), 1 = write (read-only), 0 = none. Absolute globs match the absolute path.
  int Match(std::string_view abs, std::string_view rel) const {
    int best = 0;
    for (const auto* r : rules_) {
      if (!r->glob.Match(r->base == PathBase::kAbsolute ? abs : rel)) continue;
      best = std::max(best, r->access == Access::kWrite ? 1 : 2);
    }
    return best;
  }

  Status Walk(const std::string& dir_rel, bool under_read_only) {
    const std::string from_root = FromRoot(dir_rel);
    const int fd = Openat2(root_, from_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, kBeneathNoLinks);
    if (fd < 0) {
      // An unreadable directory cannot hold anything the sandbox could read either.
      if (errno == EACCES) return Ok{};
      if (errno == ELOOP || errno == EXDEV || errno == ENOTDIR) {
        return PlainError("'" + Shown(Canonical(dir_rel)) +
                              "' changed while cagent applied the "
                              "profile's deny rules (it is no longer a directory beneath " +
                              Shown(canonical_start_) + ")",
                          "something is modifying the tree; run again once it is quiet");
      }
      return ErrnoError("open directory '" + Shown(Canonical(dir_rel)) + "'");
    }
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
      const int err = errno;
      ::close(fd);
      return ErrnoError("read directory '" + Shown(Canonical(dir_rel)) + "'", err);
    }
    std::vector<Entry> children;
    while (dirent* e = ::readdir(d)) {
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      if (++entries_ > kMaxWorkspaceEntries) {
        ::closedir(d);
        return PlainError(
            "the workspace has more than " + std::to_string(kMaxWorkspaceEntries) + " entries",
            "cagent cannot apply the profile's deny globs to all of them; use a "
            "smaller workspace");
      }
      Kind kind = e->d_type == DT_DIR   ? Kind::kDir
                  : e->d_type == DT_LNK ? Kind::kLink
                                        : Kind::kOther;
      if (e->d_type == DT_UNKNOWN) {
        struct stat st {};
        if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
          kind = S_ISDIR(st.st_mode)   ? Kind::kDir
                 : S_ISLNK(st.st_mode) ? Kind::kLink
                                       : Kind::kOther;
        }
      }
      std::string link;
      if (kind == Kind::kLink) {
        std::array<char, PATH_MAX> buf{};
        const ssize_t n = ::readlinkat(::dirfd(d), e->d_name, buf.data(), buf.size() - 1);
        if (n > 0) link.assign(buf.data(), static_cast<std::size_t>(n));
      }
      children.push_back({std::string(name), kind, std::move(link)});
    }
    ::closedir(d);
    std::sort(children.begin(), children.end(),
              [](const Entry& a, const Entry& b) { return a.name < b.name; });
    for (const auto& child : children) {
      const std::string rel = dir_rel.empty() ? child.name : dir_rel + "/" + child.name;
      bool read_only = false;
      if (Apply(child, rel, under_read_only, &read_only)) continue;
      if (child.kind == Kind::kDir) {
        if (auto s = Walk(rel, under_read_only || read_only); !s) return s;
      }
    }
    return Ok{};
  }
};

// The deny rules written relative to the workspace.
std::vector<const policy::PathRule*> WorkspaceDenyRules(const policy::Policy& p) {
  std::vector<const policy::PathRule*> out;
  for (const auto& r : p.path_rules) {
    if (r.verdict == Verdict::kDeny && r.base == PathBase::kWorkspace) out.push_back(&r);
  }
  return out;
}

// Deny rules for the workspace walk the whole workspace; rules for the home directory or absolute
// paths walk only from their glob's literal prefix ("~/.ssh/**" walks ~/.ssh), and must have one:
// a glob like "/**/id_rsa" would mean walking the host. A start reached through the workspace
// (a home inside it, a host path whose resolution passes through a workspace link) is workspace
// content: it is opened beneath the workspace without symlinks, or skipped with a note.
Status ApplyDenyGlobs(const policy::Policy& p, const std::string& workspace, int ws_fd,
                      const std::string& home, View& view, LaunchSpec& spec,
                      std::vector<std::string>& notes) {
  std::size_t entries = 0;
  for (const auto& r : p.path_rules) {
    if (r.verdict != Verdict::kDeny || r.base == PathBase::kWorkspace) continue;
    if (r.base == PathBase::kHome && home.empty()) continue;
    std::string base_dir = r.base == PathBase::kHome ? home : "/";
    std::string prefix = r.glob.LiteralPrefix();
    if (r.base == PathBase::kAbsolute) {
      while (prefix.starts_with('/')) prefix.erase(0, 1);
    }
    if (prefix.empty()) {
      return PlainError("the rule 'deny " + r.text + "' (" + p.Where(r.loc) +
                            ") has no fixed directory to start from",
                        "outside the workspace, name a directory before any wildcard, e.g. "
                        "~/.config/**/token");
    }
    const std::string start = JoinPath(base_dir, prefix);
    UniqueFd root;
    std::string canonical;
    if (HostResolutionEnters(start, workspace)) {
      const std::string skipped = "skipped 'deny " + r.text + "' at " + Shown(start) + ": ";
      if (!AtOrUnder(start, workspace)) {
        notes.push_back(skipped +
                        "its path leads through the workspace, whose links cagent does "
                        "not follow");
        continue;
      }
      const std::string rel = RelTo(workspace, start);
      UniqueFd at(Openat2(ws_fd, rel, O_PATH | O_NOFOLLOW, kBeneathNoLinks));
      struct stat st {};
      if (!at.valid() || ::fstat(at.get(), &st) != 0) {
        if (errno != ENOENT && errno != ENOTDIR) {
          notes.push_back(skipped + "a symlink on its way inside the workspace");
        }
        continue;
      }
      if (S_ISLNK(st.st_mode)) {
        notes.push_back(skipped + "a symlink inside the workspace");
        continue;
      }
      canonical = start;
      if (S_ISDIR(st.st_mode)) {
        root.Reset(Openat2(ws_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, kBeneathNoLinks));
        if (!root.valid()) return ErrnoError("open directory '" + Shown(start) + "'");
      }
    } else {
      // A host path: its symlinks are the host's own (e.g. /lib64 -> usr/lib64) and resolve.
      std::unique_ptr<char, decltype(&std::free)> real(::realpath(start.c_str(), nullptr),
                                                       &std::free);
      if (!real) continue;  // absent: nothing to deny
      canonical = real.get();
      struct stat st {};
      if (::stat(canonical.c_str(), &st) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        root.Reset(::open(canonical.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!root.valid()) {
          if (errno == EACCES) continue;
          return ErrnoError("open directory '" + canonical + "'");
        }
      }
    }
    std::vector<const policy::PathRule*> one{&r};
    // Absolute globs walk with "/" as the base; Match() puts the leading '/' back.
    GlobWalker walker(std::move(one), base_dir, view, spec, notes, entries);
    if (auto s = walker.Run(root.get(), canonical, prefix); !s) return s;
  }
  UniqueFd root(Openat2(ws_fd, ".", O_RDONLY | O_DIRECTORY, kBeneathNoLinks));
  if (!root.valid()) return ErrnoError("open the workspace '" + workspace + "'");
  return GlobWalker(WorkspaceDenyRules(p), workspace, view, spec, notes, entries)
      .Run(root.get(), workspace, "");
}

// The workspace's deny rules over what `carry` shows in it: a carried directory is workspace
// content to the agent (`cat node_modules/pkg/.env`), but the host's workspace has only an empty
// mount point there, so its walk found nothing. Each carried tree is walked beneath its own
// descriptor, and the hides land inside the carry bind (mountns resolves a hidden path below a
// DirBind's target beneath its source).
Status ApplyDenyGlobsToCarried(const policy::Policy& p, const std::string& workspace,
                               const std::vector<std::pair<std::string, UniqueFd>>& carried,
                               View& view, LaunchSpec& spec, std::vector<std::string>& notes) {
  const std::vector<const policy::PathRule*> rules = WorkspaceDenyRules(p);
  std::size_t entries = 0;
  for (const auto& [target, fd] : carried) view.AddCarried(target, fd.get());
  if (rules.empty()) return Ok{};
  for (const auto& [target, fd] : carried) {
    GlobWalker walker(rules, workspace, view, spec, notes, entries);
    if (auto s = walker.Run(fd.get(), target, RelTo(workspace, target), /*start_read_only=*/true);
        !s) {
      return std::move(s.error()).Context("carry " + Shown(RelTo(workspace, target)));
    }
  }
  return Ok{};
}

bool Matches(const std::vector<policy::EnvPattern>& patterns, std::string_view name) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const policy::EnvPattern& p) { return p.name.Match(name); });
}

// Removes repeated paths, keeping the first of each.
void Dedupe(std::vector<std::string>& paths) {
  std::set<std::string> seen;
  std::erase_if(paths, [&](const std::string& p) { return !seen.insert(p).second; });
}

// The view's mounts from the profile's read-only / read-write / hide entries. A path at or below
// the workspace is workspace content: it is opened beneath the workspace fd with every symlink
// refused, and a read-only or read-write entry with a symlinked component is skipped (binding it
// would bind whatever the link names on the host: `read-only vendor/x` with vendor -> /etc bound
// /etc/x). Hide entries there are judged like deny rules on a link, after the view is known.
// Absolute and ~ entries are host paths and do not depend on workspace content, unless resolving
// them passes through the workspace; those are skipped.
Status AddMounts(const policy::Policy& p, const std::string& workspace, int ws_fd,
                 const ProfileContext& ctx, LaunchSpec& spec, std::vector<std::string>& notes,
                 std::vector<const policy::MountRule*>& workspace_hides) {
  for (const auto& m : p.mounts) {
    std::string path = m.path.Resolve(workspace, ctx.binding.home);
    if (path.empty()) {
      notes.push_back("skipped " + m.path.Text() + ": no home directory");
      continue;
    }
    if (path == workspace) continue;  // the checker refuses this; never remount the workspace
    const bool in_workspace = IsUnder(path, workspace);
    if (!in_workspace && HostResolutionEnters(path, workspace)) {
      notes.push_back("skipped " + m.path.Text() + ": its path leads through the workspace (" +
                      workspace + "), whose links cagent does not follow on the host");
      continue;
    }
    if (in_workspace) {
      if (m.mode == MountMode::kHidden) {
        workspace_hides.push_back(&m);
        continue;
      }
      UniqueFd at(Openat2(ws_fd, RelTo(workspace, path), O_PATH | O_NOFOLLOW, kBeneathNoLinks));
      struct stat st {};
      const bool opened = at.valid() && ::fstat(at.get(), &st) == 0;
      if (!opened && (errno == ENOENT || errno == ENOTDIR)) {
        notes.push_back("skipped " + m.path.Text() + ": absent");
        continue;
      }
      if (!opened || S_ISLNK(st.st_mode)) {
        notes.push_back("skipped " + m.path.Text() + ": " +
                        (opened || errno == ELOOP || errno == EXDEV
                             ? std::string("a symlink in the workspace is on its way; cagent never "
                                           "binds what a workspace link points at")
                             : std::string("cannot be opened beneath the workspace (") +
                                   std::strerror(errno) + ")"));
        continue;
      }
    } else if (!Exists(path)) {
      if (m.mode != MountMode::kHidden) notes.push_back("skipped " + m.path.Text() + ": absent");
      continue;
    }
    switch (m.mode) {
      case MountMode::kReadOnly:
        spec.read_only_paths.push_back(path);
        break;
      case MountMode::kReadWrite:
        spec.read_write_paths.push_back(path);
        break;
      case MountMode::kHidden:
        spec.hidden_paths.push_back(path);
        break;
    }
  }
  return Ok{};
}

// The mount point of a carried path in the workspace: every component opened beneath the
// workspace with links refused, made when absent. An existing directory must be empty (a carried
// path is one the repository does not track; an earlier launch of the same run left it empty).
Status CarryMountPoint(int ws_fd, const std::string& rel, const std::string& shown) {
  UniqueFd at(::fcntl(ws_fd, F_DUPFD_CLOEXEC, 0));
  if (!at.valid()) return ErrnoError("duplicate the workspace descriptor");
  std::size_t start = 0;
  while (start < rel.size()) {
    const std::size_t slash = rel.find('/', start);
    const std::string part =
        rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    start = slash == std::string::npos ? rel.size() : slash + 1;
    UniqueFd next(Openat2(at.get(), part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, kBeneathNoLinks));
    if (!next.valid() && errno == ENOENT) {
      if (::mkdirat(at.get(), part.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoError("create the mount point of carry " + shown);
      }
      next =
          UniqueFd(Openat2(at.get(), part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, kBeneathNoLinks));
    }
    if (!next.valid()) {
      return PlainError("carry " + shown,
                        errno == ELOOP || errno == ENOTDIR || errno == EXDEV
                            ? "the workspace has a link or a file on its way (carry is for paths "
                              "the repository does not track)"
                            : std::string("cannot open its mount point: ") + std::strerror(errno));
    }
    at = std::move(next);
  }
  const int dup = ::fcntl(at.get(), F_DUPFD_CLOEXEC, 0);
  DIR* d = dup < 0 ? nullptr : ::fdopendir(dup);
  if (d == nullptr) {
    if (dup >= 0) ::close(dup);
    return ErrnoError("read the mount point of carry " + shown);
  }
  bool empty = true;
  while (dirent* ent = ::readdir(d)) {
    const std::string name = ent->d_name;
    if (name != "." && name != "..") empty = false;
  }
  ::closedir(d);
  if (!empty) {
    return PlainError("carry " + shown,
                      "the repository already has " + shown +
                          " (tracked files); carry only paths the repository ignores");
  }
  return Ok{};
}

// Whether overlayfs can be mounted in the sandbox's user namespace (Linux 5.11 and later, with
// the filesystem available): the private writable layer over read-only caches (issue 32).
bool OverlayLayersWork() {
  static const bool works = [] {
    utsname u{};
    if (::uname(&u) != 0) return false;
    unsigned major = 0, minor = 0;
    if (std::sscanf(u.release, "%u.%u", &major, &minor) != 2) return false;
    if (major < 5 || (major == 5 && minor < 11)) return false;
    std::ifstream in("/proc/filesystems");
    std::string line;
    while (std::getline(in, line)) {
      if (line.ends_with("\toverlay")) return true;
    }
    return false;
  }();
  return works;
}

// `cache` and `carry`: host directories bound into the view at paths of HOME and the workspace.
Status AddCachesAndCarry(const policy::Policy& p, const ProfileContext& ctx, int ws_fd,
                         LaunchSpec& spec, std::vector<std::string>& notes,
                         std::vector<std::pair<std::string, UniqueFd>>& carried) {
  const std::string scope = ctx.cache_scope.empty() && !p.caches.empty()
                                ? CacheScope(ctx.binding.workspace)
                                : ctx.cache_scope;
  for (const policy::CacheRule& c : p.caches) {
    if (ctx.cache_root.empty()) {
      notes.push_back("skipped cache ~/" + c.rel + ": no cache directory");
      continue;
    }
    auto dir = EnsureCacheDir(ctx.cache_root, p.name, scope, c.rel);
    if (!dir) return std::move(dir.error()).Context("cache ~/" + c.rel);
    const bool writable = ctx.caches_writable || c.agent_writable;
    // Read-only to this sandbox (the agent, verification and its setup: what they write must not
    // reach the next run), yet writable to the tools that run in it: npm writes _cacache/tmp and
    // its logs into ~/.npm on every command and fails with EROFS on a read-only cache; Go refuses
    // a read-only build cache. A private layer over the cache takes their writes and is thrown
    // away with the sandbox (issue 32). Without overlayfs the cache stays plainly read-only.
    const bool scratch = !writable && OverlayLayersWork();
    if (!writable && !scratch) {
      notes.push_back("cache ~/" + c.rel +
                      " is read-only without a private writable layer (no overlayfs in a user "
                      "namespace on this kernel: Linux 5.11 or later, `overlay` in "
                      "/proc/filesystems); tools that write into it fail");
    }
    spec.dir_binds.push_back({*dir, spec.home + "/" + c.rel, writable, scratch});
  }
  for (const policy::CarryRule& c : p.carry) {
    const std::string shown = Shown(c.rel);
    if (ctx.carry_from.empty()) {
      notes.push_back("skipped carry " + shown + ": no checkout to carry from");
      continue;
    }
    UniqueFd from(::open(ctx.carry_from.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!from.valid()) return ErrnoError("open the checkout " + ctx.carry_from);
    UniqueFd src(Openat2(from.get(), c.rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, kBeneathNoLinks));
    if (!src.valid()) {
      const int err = errno;
      return PlainError(
          "carry " + shown,
          err == ENOENT ? "there is no " + shown + " in " + Shown(ctx.carry_from) +
                              "; install the dependencies there first (e.g. npm ci), or drop it "
                              "from the profile"
          : err == ELOOP || err == EXDEV || err == ENOTDIR
              ? Shown(ctx.carry_from) + "/" + shown +
                    " is not a directory reached without links; cagent never carries what a link "
                    "points at"
              : std::string("cannot open it: ") + std::strerror(err));
    }
    if (auto s = CarryMountPoint(ws_fd, c.rel, shown); !s) return s;
    spec.dir_binds.push_back({ctx.carry_from + "/" + c.rel, spec.workspace + "/" + c.rel, false});
    carried.emplace_back(spec.workspace + "/" + c.rel, std::move(src));
  }
  return Ok{};
}

}  // namespace

Status HideHostSecrets(LaunchSpec& spec, const std::string& home, std::vector<std::string>& notes) {
  UniqueFd ws_fd(::open(spec.workspace.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!ws_fd.valid()) return ErrnoError("open the workspace '" + spec.workspace + "'");
  View view(spec, ws_fd.get());
  HideSecretsIn(view, CanonicalHome(home), spec, notes);
  Dedupe(spec.hidden_paths);
  return Ok{};
}

std::vector<std::string> CallerEnviron() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

std::string CallerHome() {
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/') return h;
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr) {
    return pw->pw_dir;
  }
  return {};
}

std::string ExpandHomeInValue(const std::string& value, const std::string& home) {
  if (home.empty()) return value;
  std::string out;
  std::size_t start = 0;
  while (true) {
    std::size_t end = value.find(':', start);
    std::string elem = value.substr(start, end == std::string::npos ? end : end - start);
    if (elem == "~") {
      elem = home;
    } else if (elem.starts_with("~/")) {
      elem = home + elem.substr(1);
    }
    out += elem;
    if (end == std::string::npos) break;
    out += ':';
    start = end + 1;
  }
  return out;
}

policy::Binding RunBinding(const std::string& workspace) {
  policy::Binding b;
  b.workspace = workspace;
  b.home = CallerHome();
  b.sandbox_home = LaunchSpec{}.home;
  return b;
}

Result<ProfileLaunch> SpecFromPolicy(const policy::Policy& p, std::vector<std::string> argv,
                                     const ProfileContext& ctx) {
  const std::string& workspace = ctx.binding.workspace;
  const std::string& home = ctx.binding.home;
  ProfileLaunch out;
  // Start from the launcher's defaults for what profiles do not describe (HOME, TMPDIR, /tmp and
  // HOME sizes, hostname), then replace the view, environment, network and limits.
  out.spec = DefaultLaunchSpec(workspace, std::move(argv));
  LaunchSpec& spec = out.spec;
  if (!ctx.binding.sandbox_home.empty() && ctx.binding.sandbox_home != spec.home) {
    spec.home = ctx.binding.sandbox_home;
    for (EnvVar& v : spec.env_set) {
      if (v.name == "HOME") v.value = spec.home;
    }
  }
  spec.read_only_paths.clear();
  // The launcher's hidden host secrets (/etc/shadow, /etc/ssh, ...) stay hidden whatever the
  // profile mounts; the engine's built-in views say the same.
  spec.env_pass.clear();
  spec.workspace_writable = p.workspace_writable.value;

  // Every workspace path below is opened beneath this descriptor, never by its string.
  UniqueFd ws_fd(::open(workspace.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!ws_fd.valid()) return ErrnoError("open the workspace '" + workspace + "'");
  std::vector<const policy::MountRule*> workspace_hides;
  if (auto s = AddMounts(p, workspace, ws_fd.get(), ctx, spec, out.notes, workspace_hides); !s) {
    return std::move(s.error()).Context("apply the profile's mounts");
  }
  // From here on, what a workspace link leads to is judged against this view; nothing is added
  // to it but re-binds and hides of what it already shows.
  View view(spec, ws_fd.get());
  for (const policy::MountRule* m : workspace_hides) {
    const std::string path = m->path.Resolve(workspace, home);
    const View::Resolution r = view.Resolve(workspace, RelTo(workspace, path));
    if (!r.exists) continue;  // nothing to hide
    if (r.path == path) {
      spec.hidden_paths.push_back(path);
      view.Add(path, View::Part::kHidden, 6);
      continue;
    }
    CoverTarget(r, m->path.Text(), /*write_only=*/false, "hide entry", view, spec, out.notes);
  }
  if (auto s = ApplyDenyGlobs(p, workspace, ws_fd.get(), home, view, spec, out.notes); !s) {
    return std::move(s.error()).Context("apply the profile's deny rules");
  }
  std::vector<std::pair<std::string, UniqueFd>> carried;
  if (auto s = AddCachesAndCarry(p, ctx, ws_fd.get(), spec, out.notes, carried); !s) {
    return s.error();
  }
  if (auto s = ApplyDenyGlobsToCarried(p, workspace, carried, view, spec, out.notes); !s) {
    return std::move(s.error()).Context("apply the profile's deny rules");
  }
  HideSecretsIn(view, CanonicalHome(home), spec, out.notes);
  Dedupe(spec.read_only_paths);
  Dedupe(spec.read_write_paths);
  Dedupe(spec.hidden_paths);
  // Mounts below a hidden tree would make part of it visible again: hidden wins (the engine judges
  // the same way).
  auto under_hidden = [&](const std::string& path) {
    return std::any_of(
        spec.hidden_paths.begin(), spec.hidden_paths.end(), [&](const std::string& h) {
          return path.size() > h.size() && path.starts_with(h) && path[h.size()] == '/';
        });
  };
  for (auto* list : {&spec.read_only_paths, &spec.read_write_paths}) {
    std::erase_if(*list, [&](const std::string& path) {
      if (!under_hidden(path)) return false;
      out.notes.push_back("skipped " + path + ": inside a hidden path");
      return true;
    });
  }

  spec.network = p.network.value == policy::NetworkMode::kLoopback ? NetworkMode::kLoopback
                                                                   : NetworkMode::kNone;

  // Environment: the profile's `set` over the launcher's defaults; `pass` patterns matched against
  // the caller's environment; `scrub` removes names even when a pattern passes them.
  for (const auto& e : p.env_set) {
    std::string value = ExpandHomeInValue(e.value, home);
    auto it = std::find_if(spec.env_set.begin(), spec.env_set.end(),
                           [&](const EnvVar& v) { return v.name == e.name; });
    if (it != spec.env_set.end()) {
      it->value = value;
    } else {
      spec.env_set.push_back({e.name, value});
    }
  }
  std::set<std::string> passed;
  for (const auto& kv : ctx.environ) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = kv.substr(0, eq);
    if (!Matches(p.env_pass, name) || Matches(p.env_scrub, name)) continue;
    bool set_by_profile = std::any_of(p.env_set.begin(), p.env_set.end(),
                                      [&](const policy::EnvSetting& s) { return s.name == name; });
    if (set_by_profile) continue;
    // A passed variable replaces a launcher default of the same name (e.g. PATH).
    std::erase_if(spec.env_set, [&](const EnvVar& v) { return v.name == name; });
    passed.insert(name);
  }
  spec.env_pass.assign(passed.begin(), passed.end());
  std::erase_if(spec.env_set, [&](const EnvVar& v) {
    return Matches(p.env_scrub, v.name) &&
           std::none_of(p.env_set.begin(), p.env_set.end(),
                        [&](const policy::EnvSetting& s) { return s.name == v.name; });
  });
  // The caller's git identity (ProfileContext::git_identity), unless the profile says
  // `git-identity none`. Added after the scrub: cagent sets these, they are not the caller's
  // environment passing, so no scrub pattern applies; a variable of the same name that the profile
  // sets or passes wins.
  if (p.git_identity.value) {
    for (const EnvVar& v : ctx.git_identity) {
      const bool taken = std::any_of(spec.env_set.begin(), spec.env_set.end(),
                                     [&](const EnvVar& e) { return e.name == v.name; }) ||
                         passed.contains(v.name);
      if (!taken) spec.env_set.push_back(v);
    }
  }

  // Limits. Unset or unlimited keep the launcher's defaults (audit reports unbounded limits).
  auto bounded = [&](Limit l) -> const policy::LimitValue* {
    const auto& v = p.limit(l);
    return v.bounded() ? &v : nullptr;
  };
  if (const auto* v = bounded(Limit::kCpuTime)) spec.limits.cpu_seconds = (v->value + 999) / 1000;
  if (const auto* v = bounded(Limit::kFileSize)) spec.limits.file_size_bytes = v->value;
  if (const auto* v = bounded(Limit::kOpenFiles)) spec.limits.open_files = v->value;
  if (const auto* v = bounded(Limit::kProcesses)) {
    spec.limits.processes = v->value;
    // RLIMIT_NPROC does not bind a root caller; pids.max does, where a cgroup is delegated. It is
    // asked for when the profile requires it (then a missing cgroup refuses the run) or accepts
    // the cgroup as best-effort (then a missing one is a reported downgrade); otherwise the
    // rlimit alone bounds processes, so a machine without delegation can still run the profile.
    if (p.Requires(policy::Requirement::kPidsLimit) ||
        p.IsBestEffort(policy::Requirement::kCgroup)) {
      spec.cgroup_limits.pids_max = v->value;
    }
  }
  if (const auto* v = bounded(Limit::kMemory)) {
    spec.cgroup_limits.memory_max = v->value;
    spec.cgroup_limits.swap_max = 0;
  }
  if (const auto* v = bounded(Limit::kWallTime)) {
    spec.timeout = std::chrono::milliseconds(v->value);
  }

  if (p.IsBestEffort(policy::Requirement::kLandlock)) spec.best_effort.Add(Layer::kLandlock);
  if (p.IsBestEffort(policy::Requirement::kCgroup)) spec.best_effort.Add(Layer::kCgroupLimits);
  if (p.Requires(policy::Requirement::kCgroup) && spec.cgroup_limits.Controllers().empty()) {
    // `require cgroup` without limits still means "run inside a delegated cgroup"; ask for pids,
    // the cheapest controller, so the launch fails closed without one.
    spec.cgroup_limits.pids_max = spec.limits.processes.value_or(4096);
  }
  return out;
}

}  // namespace cagent::launcher
