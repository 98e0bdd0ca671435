#include "policy/language/loader.h"

#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "policy/language/checker.h"
#include "policy/language/compiler.h"
#include "policy/language/parser.h"

namespace cagent::policy {
namespace {

constexpr std::string_view kBuiltinPrefix = "<built-in>/";
constexpr std::string_view kSuffix = ".cagent";
// Profiles are small; a bigger file is a mistake (or an attack on the loader), not a profile.
constexpr std::size_t kMaxProfileBytes = 1 << 20;
constexpr int kMaxDepth = 16;

bool IsPath(std::string_view s) {
  return s.find('/') != std::string_view::npos || s.ends_with(kSuffix);
}

bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                              (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
                     }) &&
         s[0] != '.';
}

std::string Dirname(std::string_view path) {
  auto slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string Stem(std::string_view path) {
  auto slash = path.rfind('/');
  std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (base.ends_with(kSuffix)) base.remove_suffix(kSuffix.size());
  return std::string(base);
}

// Whether two host paths name the same file or directory. False when either does not exist,
// which includes "" and "<built-in>/..." names.
bool SameInode(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

bool IsRegularFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

const BuiltinProfile* FindBuiltin(std::string_view name) {
  for (const auto& b : BuiltinProfiles()) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

// Reads a profile file. Fails with a message fit for a diagnostic.
Result<std::string> ReadProfileFile(const std::string& path) {
  if (path.starts_with(kBuiltinPrefix)) {
    std::string_view name = std::string_view{path}.substr(kBuiltinPrefix.size());
    if (name.ends_with(kSuffix)) name.remove_suffix(kSuffix.size());
    if (const auto* b = FindBuiltin(name)) return std::string(b->text);
    return PlainError("no built-in profile named '" + std::string(name) + "'");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoError("cannot read '" + path + "'");
  if (!S_ISREG(st.st_mode)) return PlainError("'" + path + "' is not a regular file");
  if (static_cast<std::size_t>(st.st_size) > kMaxProfileBytes) {
    return PlainError("'" + path + "' is larger than 1 MiB; profiles are small text files");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxProfileBytes) {
    return PlainError("'" + path + "' is larger than 1 MiB; profiles are small text files");
  }
  return text.str();
}

class Loader {
 public:
  Loader(const SearchPath& search, Compiled& out) : search_(search), out_(out) {}

  // Loads the profile in `path` (already resolved) and its ancestors into chain_, root first.
  // `from`/`from_len` locate the statement that asked for it (invalid for the top profile).
  void LoadChain(const std::string& path, std::string_view text_or_empty, bool have_text,
                 Location from, std::uint32_t from_len) {
    if (std::find(extends_stack_.begin(), extends_stack_.end(), path) != extends_stack_.end()) {
      std::string cycle;
      for (const auto& p : extends_stack_) cycle += Stem(p) + " -> ";
      out_.diags.Error(from, from_len,
                       "profiles extend each other in a cycle: " + cycle + Stem(path),
                       "one of them must stop extending the other");
      return;
    }
    if (extends_stack_.size() >= kMaxDepth) {
      out_.diags.Error(from, from_len, "profiles extend each other more than 16 levels deep");
      return;
    }
    std::string text;
    if (have_text) {
      text = std::string(text_or_empty);
    } else {
      auto read = ReadProfileFile(path);
      if (!read) {
        out_.diags.Error(from, from_len, read.error().Message());
        return;
      }
      text = std::move(*read);
    }
    std::uint32_t index = out_.sources->Add(path, std::move(text));
    files_.push_back(path);
    extends_stack_.push_back(path);

    std::vector<const Statement*> statements;
    const Statement* extends = nullptr;
    include_stack_.clear();
    Splice(index, path, statements, &extends, 0);

    if (extends != nullptr) {
      const Statement& st = *extends;
      if (st.args.size() != 1 || st.args[0].kind == Value::Kind::kGroup || st.has_block) {
        out_.diags.Error(st.loc, st.keyword_length, "'extends' takes one profile name",
                         "e.g.: extends base");
      } else {
        auto parent = Resolve(st.args[0].text, Dirname(path), path);
        if (!parent) {
          out_.diags.Error(st.args[0].loc, st.args[0].length, parent.error().op,
                           parent.error().detail);
        } else {
          LoadChain(*parent, {}, false, st.args[0].loc, st.args[0].length);
        }
      }
    }
    extends_stack_.pop_back();
    chain_.push_back({Stem(path), Check(statements, out_.diags)});
  }

  std::vector<ChainLink> TakeChain() { return std::move(chain_); }
  const std::vector<std::string>& files() const { return files_; }

  // A profile name (or path) to the file that holds it.
  // A profile name (or path) to the file that holds it. For `extends`, `near_dir` is the
  // directory of the child: the parent is looked up there and then only in the search directories
  // that come after it (equally or more trusted), never before it. So a repository's ./.cagent/
  // cannot slip a `base` under a profile from ~/.config or the built-ins, and a built-in profile's
  // parent is always built in.
  //
  // A profile that extends its own name (./.cagent/backend.cagent: `extends backend`) means the
  // next one of that name down the search order, not itself.
  Result<std::string> Resolve(std::string_view name, const std::string& near_dir,
                              const std::string& child = {}) {
    if (name.starts_with(kBuiltinPrefix)) {
      std::string_view n = name.substr(kBuiltinPrefix.size());
      if (n.ends_with(kSuffix)) n.remove_suffix(kSuffix.size());
      if (FindBuiltin(n)) {
        return std::string(kBuiltinPrefix) + std::string(n) + std::string(kSuffix);
      }
      return PlainError("no built-in profile named '" + std::string(n) + "'",
                        "`cagent policy list` shows what exists");
    }
    const bool from_builtin = near_dir.starts_with('<');
    if (IsPath(name)) {
      if (from_builtin) {
        // A built-in profile naming a file: only other built-ins are reachable.
        return std::string(kBuiltinPrefix) + Stem(name) + std::string(kSuffix);
      }
      std::string p = name.starts_with('/') || near_dir.empty()
                          ? std::string(name)
                          : near_dir + "/" + std::string(name);
      if (!IsRegularFile(p)) return PlainError("profile file '" + p + "' not found");
      return p;
    }
    if (!ValidName(name)) {
      return PlainError("invalid profile name '" + std::string(name) + "'",
                        "names are letters, digits, '-', '_' and '.'");
    }
    std::string file = std::string(name) + std::string(kSuffix);
    std::size_t first_dir = 0;
    if (from_builtin) {
      first_dir = search_.dirs.size();
    } else if (!near_dir.empty()) {
      std::string p = near_dir + "/" + file;
      if (IsRegularFile(p) && !SameInode(p, child)) return p;
      for (std::size_t i = 0; i < search_.dirs.size(); ++i) {
        if (SameInode(search_.dirs[i], near_dir)) first_dir = i + 1;
      }
    }
    for (std::size_t i = first_dir; i < search_.dirs.size(); ++i) {
      std::string p = search_.dirs[i] + "/" + file;
      if (IsRegularFile(p) && !SameInode(p, child)) return p;
    }
    if ((search_.builtins || from_builtin) && FindBuiltin(name)) {
      return std::string(kBuiltinPrefix) + file;
    }
    std::string where = from_builtin || near_dir.empty() ? "" : near_dir;
    for (std::size_t i = first_dir; i < search_.dirs.size(); ++i) {
      if (SameInode(search_.dirs[i], near_dir)) continue;
      where += (where.empty() ? "" : ", ") + search_.dirs[i];
    }
    if (search_.builtins) {
      where += where.empty() ? "the built-in profiles" : " and the built-in profiles";
    }
    if (where.empty()) where = "nowhere (no search directories)";
    if (!child.empty() && Stem(child) == name) {
      return PlainError("no profile named '" + std::string(name) + "' other than this one",
                        "a profile cannot extend itself; it extends the next profile of its name "
                        "down the search order, and there is none (looked in " +
                            where + ")");
    }
    return PlainError("no profile named '" + std::string(name) + "'",
                      "looked in " + where + "; `cagent policy list` shows what exists");
  }

 private:
  const SearchPath& search_;
  Compiled& out_;
  std::vector<ChainLink> chain_;
  std::vector<std::string> files_;
  std::vector<std::string> extends_stack_;
  std::vector<std::string> include_stack_;
  // Parsed files stay alive here: the statements point into them.
  std::vector<std::unique_ptr<File>> asts_;

  // Parses file `index` and appends its top-level statements to `out`, splicing includes in place.
  void Splice(std::uint32_t index, const std::string& path, std::vector<const Statement*>& out,
              const Statement** extends, int depth) {
    include_stack_.push_back(path);
    asts_.push_back(std::make_unique<File>(Parse(*out_.sources, index, out_.diags)));
    const File& file = *asts_.back();
    for (const Statement& st : file.statements) {
      if (st.keyword == "extends") {
        if (depth > 0) {
          out_.diags.Error(st.loc, st.keyword_length,
                           "'extends' is not allowed in an included file",
                           "put it in the profile that includes this file");
        } else if (*extends != nullptr) {
          out_.diags.Error(
              st.loc, st.keyword_length, "a profile can extend only one parent",
              "the first 'extends' is at line " + std::to_string((*extends)->loc.line));
        } else {
          *extends = &st;
        }
        continue;
      }
      if (st.keyword != "include") {
        out.push_back(&st);
        continue;
      }
      if (st.args.size() != 1 || st.args[0].kind == Value::Kind::kGroup || st.has_block) {
        out_.diags.Error(st.loc, st.keyword_length, "'include' takes one file name",
                         "e.g.: include \"toolchains.cagent\"");
        continue;
      }
      const Value& v = st.args[0];
      std::string dir = Dirname(path);
      std::string target;
      if (path.starts_with(kBuiltinPrefix)) {
        target = std::string(kBuiltinPrefix) + Stem(v.text) + std::string(kSuffix);
      } else {
        target = v.text.starts_with('/') ? v.text : dir + "/" + v.text;
      }
      if (std::find(include_stack_.begin(), include_stack_.end(), target) != include_stack_.end()) {
        std::string cycle;
        for (const auto& p : include_stack_) cycle += p + " -> ";
        out_.diags.Error(v.loc, v.length, "files include each other in a cycle: " + cycle + target);
        continue;
      }
      if (depth + 1 >= kMaxDepth) {
        out_.diags.Error(v.loc, v.length, "includes nested more than 16 levels deep");
        continue;
      }
      auto text = ReadProfileFile(target);
      if (!text) {
        out_.diags.Error(v.loc, v.length,
                         "cannot include " + v.text + ": " + text.error().Message());
        continue;
      }
      std::uint32_t child = out_.sources->Add(target, std::move(*text));
      files_.push_back(target);
      Splice(child, target, out, extends, depth + 1);
    }
    include_stack_.pop_back();
  }
};

Compiled Finish(Loader& loader, Compiled out, std::string name) {
  auto chain = loader.TakeChain();
  if (out.diags.HasErrors()) return out;
  auto policy = Compile(std::move(chain), out.sources, out.diags);
  if (!policy || out.diags.HasErrors()) return out;
  policy->name = std::move(name);
  policy->files = loader.files();
  policy->sources = out.sources;
  out.policy = std::make_shared<const Policy>(std::move(*policy));
  return out;
}

}  // namespace

std::string ConfigDir(const std::string& home) {
  auto absolute = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr && v[0] == '/' ? std::string(v) : std::string();
  };
  if (std::string dir = absolute("CAGENT_CONFIG_DIR"); !dir.empty()) return dir;
  if (std::string xdg = absolute("XDG_CONFIG_HOME"); !xdg.empty()) return xdg + "/cagent";
  return home.empty() ? std::string() : home + "/.config/cagent";
}

std::string ProjectProfileDir() {
  std::array<char, PATH_MAX> buf{};
  if (::getcwd(buf.data(), buf.size()) == nullptr) return "./.cagent";
  std::string dir(buf.data());
  // The directories from "." up to the repository's top (the one holding .git, a directory or a
  // worktree's file); none when no .git is found on the way to "/".
  std::vector<std::string> chain;
  bool in_repository = false;
  for (;;) {
    chain.push_back(dir);
    struct stat st {};
    if (::lstat((dir == "/" ? std::string("/.git") : dir + "/.git").c_str(), &st) == 0) {
      in_repository = true;
      break;
    }
    if (dir == "/") break;
    const auto slash = dir.rfind('/');
    dir = slash == 0 ? std::string("/") : dir.substr(0, slash);
  }
  if (!in_repository) return "./.cagent";
  std::string up;
  for (const std::string& d : chain) {
    struct stat st {};
    const std::string candidate = (d == "/" ? std::string() : d) + "/.cagent";
    if (::stat(candidate.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return up.empty() ? "./.cagent" : up + ".cagent";
    }
    up += "../";
  }
  return "./.cagent";
}

SearchPath SearchPath::Default(const std::string& home, const std::string& installed_dir) {
  SearchPath s;
  s.dirs.push_back(ProjectProfileDir());
  if (const std::string config = ConfigDir(home); !config.empty()) {
    s.dirs.push_back(config + "/profiles");
  }
  if (!installed_dir.empty()) s.dirs.push_back(installed_dir);
  return s;
}

Compiled LoadProfile(std::string_view name_or_path, const SearchPath& search) {
  Compiled out;
  out.sources = std::make_shared<SourceSet>();
  Loader loader(search, out);
  auto path = loader.Resolve(name_or_path, "");
  if (!path) {
    out.diags.Error({}, 1, path.error().op, path.error().detail);
    return out;
  }
  loader.LoadChain(*path, {}, false, {}, 1);
  return Finish(loader, std::move(out), Stem(*path));
}

Compiled CompileText(std::string_view display_name, std::string_view text,
                     const SearchPath& search) {
  Compiled out;
  out.sources = std::make_shared<SourceSet>();
  Loader loader(search, out);
  loader.LoadChain(std::string(display_name), text, true, {}, 1);
  return Finish(loader, std::move(out), Stem(display_name));
}

std::vector<ProfileEntry> ListProfiles(const SearchPath& search) {
  std::map<std::string, ProfileEntry> found;
  auto add = [&](const std::string& name, const std::string& path, const std::string& origin,
                 std::string_view text) {
    auto it = found.find(name);
    if (it != found.end()) {
      it->second.shadows.push_back(path);
      return;
    }
    ProfileEntry e{name, path, origin, {}, {}};
    // The description is the first `description "..."` line; parse just enough to find it.
    SourceSet sources;
    auto index = sources.Add(path, std::string(text));
    Diagnostics ignored;
    File file = Parse(sources, index, ignored);
    for (const auto& st : file.statements) {
      if (st.keyword == "description" && !st.args.empty()) {
        e.description = st.args[0].text;
        break;
      }
    }
    found.emplace(name, std::move(e));
  };
  for (const auto& dir : search.dirs) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    std::vector<std::string> names;
    while (dirent* ent = ::readdir(d)) {
      std::string_view n = ent->d_name;
      if (n.ends_with(kSuffix) && n.size() > kSuffix.size()) names.emplace_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      std::string path = dir + "/" + n;
      if (!IsRegularFile(path)) continue;
      auto text = ReadProfileFile(path);
      add(Stem(n), path, dir, text ? std::string_view{*text} : std::string_view{});
    }
  }
  if (search.builtins) {
    for (const auto& b : BuiltinProfiles()) {
      add(std::string(b.name),
          std::string(kBuiltinPrefix) + std::string(b.name) + std::string(kSuffix), "built-in",
          b.text);
    }
  }
  std::vector<ProfileEntry> out;
  out.reserve(found.size());
  for (auto& [name, e] : found) out.push_back(std::move(e));
  return out;
}

}  // namespace cagent::policy
