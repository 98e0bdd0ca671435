#include "launcher/profile_init.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/terminal_text.h"
#include "common/unique_fd.h"
#include "launcher/profile_spec.h"
#include "policy/engine.h"
#include "policy/ir.h"

namespace cagent::launcher {
namespace {

constexpr std::size_t kMaxReadBytes = 1 << 20;

// Host paths outside the repository (toolchain directories, binaries on PATH): the caller's own.
bool IsDir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool IsFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool IsExecutableFile(const std::string& path) {
  return IsFile(path) && ::access(path.c_str(), X_OK) == 0;
}

// The repository, read as hostile input. Every name is opened beneath a directory fd of its root
// with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS): a symlink that stays inside the
// repository is followed (a Cargo.toml -> crates/main/Cargo.toml is still a Rust project), one
// that leads out of it (package.json -> /etc/shadow, tests -> /) is refused by the kernel and the
// name counts as absent. Files are opened O_NONBLOCK | O_NOCTTY and read only when regular, so a
// FIFO or a device swapped in after the check cannot block or be read.
class RepoReader {
 public:
  explicit RepoReader(const std::string& dir)
      : fd_(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) {}

  [[nodiscard]] bool Exists(const std::string& rel) const {
    struct stat st {};
    return Stat(rel, &st);
  }
  [[nodiscard]] bool IsDir(const std::string& rel) const {
    struct stat st {};
    return Stat(rel, &st) && S_ISDIR(st.st_mode);
  }
  [[nodiscard]] bool IsFile(const std::string& rel) const {
    struct stat st {};
    return Stat(rel, &st) && S_ISREG(st.st_mode);
  }

  // The file's text, or "" when it is missing, outside the repository, not a regular file or
  // larger than kMaxReadBytes.
  [[nodiscard]] std::string ReadSmall(const std::string& rel) const {
    UniqueFd f(Open(rel, O_RDONLY | O_NONBLOCK | O_NOCTTY));
    struct stat st {};
    if (!f.valid() || ::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<std::size_t>(st.st_size) > kMaxReadBytes) {
      return "";
    }
    std::string out;
    std::array<char, 65536> buf{};
    while (out.size() <= kMaxReadBytes) {
      const ssize_t n = ::read(f.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out.append(buf.data(), static_cast<std::size_t>(n));
    }
    return out.size() > kMaxReadBytes ? std::string() : out;  // grew after the fstat
  }

  // The names at the top level, sorted.
  [[nodiscard]] std::vector<std::string> List() const {
    std::vector<std::string> names;
    const int dfd = Open(".", O_RDONLY | O_DIRECTORY);
    if (dfd < 0) return names;
    DIR* d = ::fdopendir(dfd);
    if (d == nullptr) {
      ::close(dfd);
      return names;
    }
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(std::move(n));
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  [[nodiscard]] int Open(const std::string& rel, int flags) const {
    if (!fd_.valid()) return -1;
    open_how how{};
    how.flags = static_cast<std::uint64_t>(flags) | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    for (int attempt = 0; attempt < 16; ++attempt) {
      const auto fd = ::syscall(SYS_openat2, fd_.get(), rel.c_str(), &how, sizeof(how));
      if (fd >= 0) return static_cast<int>(fd);
      if (errno != EAGAIN && errno != EINTR) return -1;
    }
    return -1;
  }
  bool Stat(const std::string& rel, struct stat* st) const {
    UniqueFd f(Open(rel, O_PATH));
    return f.valid() && ::fstat(f.get(), st) == 0;
  }

  UniqueFd fd_;
};

std::string Dirname(const std::string& p) {
  auto slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}
std::string Basename(const std::string& p) {
  auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

bool Under(const std::string& path, const std::string& base) {
  if (base == "/") return true;
  return path.starts_with(base) && (path.size() == base.size() || path[base.size()] == '/');
}

std::string Absolute(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) != nullptr) return buf;
  return p;
}

// A Makefile rule for `target` at the start of a line ("test:", "test check:", not "test :=").
bool MakefileHasTarget(const std::string& text, std::string_view target) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '\t' || line[0] == '#' || line[0] == '.') continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (colon + 1 < line.size() && line[colon + 1] == '=') continue;  // NAME := value
    std::istringstream targets(line.substr(0, colon));
    std::string t;
    while (targets >> t) {
      if (t == target) return true;
    }
  }
  return false;
}

bool HasPathChars(std::string_view p) {
  return p.find_first_of("*?[]\\\"\n\t") != std::string_view::npos;
}

// Whether `abs` is readable in `parent` with these bindings: the parent already shows it.
bool ParentShows(const policy::Policy* parent, const std::string& workspace,
                 const std::string& home, const std::string& abs) {
  if (parent == nullptr) return false;
  policy::Engine engine(*parent, {workspace, home.empty() ? policy::PortableBinding().home : home});
  policy::Decision d = engine.Path(policy::Access::kRead, abs);
  // Only a profile's own mount counts: the built-in views (/tmp, /proc, /dev/...) are the
  // sandbox's private copies, not the host's trees.
  return d.verdict == policy::Verdict::kAllow && d.loc.valid();
}

}  // namespace

RepoFacts InspectRepository(const std::string& dir) {
  RepoFacts f;
  const RepoReader repo(dir);
  auto has = [&](const std::string& name) { return repo.Exists(name); };
  auto mark = [&](const std::string& name) {
    if (has(name)) f.markers.push_back(name);
    return has(name);
  };

  if (mark("package.json")) {
    f.node = true;
    auto json = nlohmann::json::parse(repo.ReadSmall("package.json"), nullptr, false);
    std::string runner = has("pnpm-lock.yaml") ? "pnpm" : has("yarn.lock") ? "yarn" : "npm";
    if (json.is_object() && json.contains("scripts") && json["scripts"].is_object()) {
      const auto& scripts = json["scripts"];
      // npm init's placeholder fails on purpose; it is not a test suite.
      if (scripts.contains("test") && scripts["test"].is_string() &&
          scripts["test"].get<std::string>().find("no test specified") == std::string::npos) {
        f.node_test = runner + " test";
      }
    }
  }
  bool pyproject = mark("pyproject.toml");
  bool setup_py = mark("setup.py");
  bool setup_cfg = mark("setup.cfg");
  std::vector<std::string> top = repo.List();
  std::string python_text;
  for (const auto& n : top) {
    if (n.starts_with("requirements") && n.ends_with(".txt")) {
      f.markers.push_back(n);
      f.python = true;
      python_text += repo.ReadSmall(n);
    }
  }
  if (pyproject || setup_py || setup_cfg) f.python = true;
  if (pyproject) python_text += repo.ReadSmall("pyproject.toml");
  if (setup_cfg) python_text += repo.ReadSmall("setup.cfg");
  if (setup_py) python_text += repo.ReadSmall("setup.py");
  f.pytest = python_text.find("pytest") != std::string::npos || has("pytest.ini") ||
             has("conftest.py") || has("tests/conftest.py");
  f.python_tests =
      repo.IsDir("tests") || repo.IsDir("test") ||
      std::any_of(top.begin(), top.end(), [](const std::string& n) {
        return (n.starts_with("test_") || n.ends_with("_test.py")) && n.ends_with(".py");
      });

  f.rust = mark("Cargo.toml");
  f.go = mark("go.mod");
  f.cmake = mark("CMakeLists.txt");
  for (const char* m : {"Makefile", "GNUmakefile", "makefile"}) {
    if (!mark(m)) continue;
    f.make = true;
    std::string text = repo.ReadSmall(m);
    if (MakefileHasTarget(text, "test")) {
      f.make_target = "test";
    } else if (MakefileHasTarget(text, "check")) {
      f.make_target = "check";
    }
    break;
  }
  f.maven = mark("pom.xml");
  bool gradle = mark("build.gradle") || mark("build.gradle.kts");
  f.java = f.maven || gradle;
  f.gradle_wrapper = has("gradlew");

  f.mkdocs = mark("mkdocs.yml");
  f.sphinx = repo.IsFile("docs/conf.py") || repo.IsFile("doc/conf.py") || repo.IsFile("conf.py");
  bool doc_files = std::any_of(top.begin(), top.end(), [](const std::string& n) {
    return n.ends_with(".md") || n.ends_with(".rst") || n.ends_with(".adoc") ||
           n.ends_with(".markdown");
  });
  f.docs = doc_files || f.mkdocs || f.sphinx || repo.IsDir("docs") || repo.IsDir("doc");
  return f;
}

std::vector<Toolchain> FindToolchains(const RepoFacts& facts, const std::string& home,
                                      const std::string& path_env, const std::string& repo) {
  std::vector<Toolchain> out;
  auto add = [&](std::string path, std::string why) {
    for (const auto& t : out) {
      if (t.path == path) return;
    }
    out.push_back({std::move(path), std::move(why)});
  };
  if (!home.empty()) {
    struct Dir {
      const char* rel;
      const char* why;
      bool RepoFacts::*kind;
    };
    static const Dir kDirs[] = {
        {".rustup", "rustup toolchains", &RepoFacts::rust},
        {".cargo", "cargo and installed crates", &RepoFacts::rust},
        {".pyenv", "pyenv Python versions", &RepoFacts::python},
        {".local/bin", "pip --user scripts", &RepoFacts::python},
        {".local/lib", "pip --user packages", &RepoFacts::python},
        {"go", "Go module cache and tools", &RepoFacts::go},
        {"sdk", "Go toolchains (golang.org/dl)", &RepoFacts::go},
        {".nvm", "nvm node versions", &RepoFacts::node},
        {".volta", "volta node versions", &RepoFacts::node},
        {".fnm", "fnm node versions", &RepoFacts::node},
        {".bun", "bun", &RepoFacts::node},
        {".local/share/pnpm", "pnpm", &RepoFacts::node},
        {".sdkman", "SDKMAN JDKs", &RepoFacts::java},
        {".m2", "the Maven repository", &RepoFacts::java},
        {".gradle", "Gradle caches", &RepoFacts::java},
    };
    for (const auto& d : kDirs) {
      if (facts.*(d.kind) && IsDir(home + "/" + d.rel)) add(std::string("~/") + d.rel, d.why);
    }
  }
  // Binaries on PATH installed outside the per-user directories (e.g. /srv/node-v20/bin/node):
  // expose the install root (the parent of bin/), never "/" or the home directory itself.
  struct Bin {
    const char* name;
    bool RepoFacts::*kind;
  };
  static const Bin kBins[] = {{"node", &RepoFacts::node},
                              {"python3", &RepoFacts::python},
                              {"cargo", &RepoFacts::rust},
                              {"go", &RepoFacts::go},
                              {"java", &RepoFacts::java}};
  std::string home_abs = home.empty() ? "" : Absolute(home);
  const std::string repo_abs = repo.empty() ? "" : Absolute(repo);
  for (const auto& b : kBins) {
    if (!(facts.*(b.kind))) continue;
    std::istringstream dirs(path_env);
    std::string d;
    while (std::getline(dirs, d, ':')) {
      if (d.empty() || d[0] != '/') continue;
      std::string candidate = d + "/" + b.name;
      // A PATH entry inside the repository, or a binary whose links pass through it, is the
      // repository's to point anywhere (bin/node -> /opt/secret/bin/node): never a toolchain.
      if (!repo_abs.empty() && HostResolutionEnters(candidate, repo_abs)) continue;
      if (!IsExecutableFile(candidate)) continue;
      std::string real = Absolute(candidate);
      std::string bin = Dirname(real);
      std::string root = Basename(bin) == "bin" ? Dirname(bin) : bin;
      if (root == "/" || (!home_abs.empty() && root == home_abs)) root = bin;
      if (root == "/" || (!home_abs.empty() && (root == home_abs || Under(home_abs, root)))) break;
      if (HasPathChars(root)) break;
      std::string as_written = root;
      if (!home_abs.empty() && Under(root, home_abs)) {
        as_written = "~/" + root.substr(home_abs.size() + 1);
      }
      add(as_written, std::string(b.name) + " on PATH (" + real + ")");
      break;
    }
  }
  return out;
}

Result<InitPlan> PlanProfile(const InitOptions& o) {
  if (!IsDir(o.dir)) {
    return PlainError("'" + o.dir + "' is not a directory", "pass the repository's root directory")
        .WithCode(Error::Code::kInvalidInput);
  }
  auto valid = [](std::string_view s) {
    return !s.empty() && s.size() <= 64 && s[0] != '.' &&
           std::all_of(s.begin(), s.end(), [](char c) {
             return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
           });
  };
  if (!valid(o.name)) {
    return PlainError("invalid profile name '" + o.name + "'",
                      "names are letters, digits, '-', '_' and '.', not starting with '.'")
        .WithCode(Error::Code::kInvalidInput);
  }
  for (const auto& b : policy::BuiltinProfiles()) {
    if (b.name == o.name) {
      return PlainError("the name '" + o.name + "' is a built-in profile's",
                        "a repository profile of that name would shadow the built-in one for "
                        "everyone working in it; choose another --name")
          .WithCode(Error::Code::kInvalidInput);
    }
  }

  const std::string dir = Absolute(o.dir);
  InitPlan plan;
  plan.path = dir + "/.cagent/" + o.name + ".cagent";
  const RepoFacts f = InspectRepository(dir);

  bool code = f.python || f.rust || f.go || f.cmake || f.java;
  // A Makefile alone means C or similar, unless it only drives a docs build or npm.
  const bool backend = code || (f.make && !f.node && !f.mkdocs && !f.sphinx);
  plan.parent = !backend && f.node ? "frontend" : !backend && f.docs ? "docs" : "backend";

  // What was recognised, for the comment at the top and for the command's report.
  if (f.python) plan.found.push_back("Python project");
  if (f.rust) plan.found.push_back("Rust crate (Cargo.toml)");
  if (f.go) plan.found.push_back("Go module (go.mod)");
  if (f.cmake) plan.found.push_back("CMake project (CMakeLists.txt)");
  if (f.make) {
    plan.found.push_back("Makefile" + (f.make_target.empty()
                                           ? std::string()
                                           : " with a '" + f.make_target + "' target"));
  }
  if (f.java) plan.found.push_back(f.maven ? "Maven project (pom.xml)" : "Gradle project");
  if (f.node) plan.found.push_back("Node project (package.json)");
  if (f.docs && plan.parent == "docs") {
    plan.found.push_back(f.mkdocs   ? "MkDocs site (mkdocs.yml)"
                         : f.sphinx ? "Sphinx documentation (conf.py)"
                                    : "documentation files");
  }
  if (plan.found.empty()) plan.found.push_back("no known build files");

  // The verification command: the project's own entry point first.
  std::string verify_why;
  std::string timeout = "10m";
  if (plan.parent == "docs") {
    if (f.mkdocs) {
      plan.verify = "mkdocs build --strict --site-dir /tmp/cagent-site";
      verify_why = "mkdocs.yml";
    } else if (f.sphinx) {
      const RepoReader repo(dir);
      std::string src = repo.IsFile("docs/conf.py")  ? "docs"
                        : repo.IsFile("doc/conf.py") ? "doc"
                                                     : ".";
      plan.verify = "python3 -m sphinx -W -q -b html " + src + " /tmp/cagent-html";
      verify_why = "Sphinx conf.py";
    }
  } else if (plan.parent == "frontend") {  // NOLINT(bugprone-branch-clone): as the node test below
    plan.verify = f.node_test;
    verify_why = "the test script in package.json";
  } else if (!f.make_target.empty()) {
    plan.verify = "make " + f.make_target;
    verify_why = "the Makefile's " + f.make_target + " target";
  } else if (f.rust) {
    plan.verify = "cargo test --offline";
    verify_why = "Cargo.toml";
  } else if (f.go) {
    plan.verify = "go test ./...";
    verify_why = "go.mod";
  } else if (f.python && f.pytest) {
    plan.verify = "python3 -m pytest -q";
    verify_why = "pytest is configured or required";
  } else if (f.python && f.python_tests) {
    plan.verify = "python3 -m unittest discover";
    verify_why = "a tests directory without pytest";
  } else if (f.node && !f.node_test.empty()) {
    plan.verify = f.node_test;
    verify_why = "the test script in package.json";
  } else if (f.cmake) {
    plan.verify =
        "cmake -S . -B build-verify && cmake --build build-verify -j && ctest --test-dir "
        "build-verify --output-on-failure";
    verify_why = "CMakeLists.txt";
    timeout = "20m";
  } else if (f.java) {
    plan.verify = f.maven            ? "mvn -o -q test"
                  : f.gradle_wrapper ? "./gradlew test --offline"
                                     : "gradle test --offline";
    verify_why = f.maven ? "pom.xml" : "build.gradle";
    timeout = "20m";
  }

  // The parent as this repository will see it (a DIR/.cagent/ copy of it wins, as it will later).
  // Compiled through a one-line child so that it resolves exactly like the profile written below.
  const std::string& workspace = dir;
  policy::Compiled parent =
      policy::CompileText(plan.path, "extends " + plan.parent + "\n", o.search);
  const policy::Policy* parent_policy = parent.ok() ? parent.policy.get() : nullptr;
  std::string home_abs = o.home.empty() ? "" : Absolute(o.home);
  for (auto& t : FindToolchains(f, o.home, o.path_env, dir)) {
    std::string abs = t.path.starts_with("~/") ? home_abs + t.path.substr(1) : t.path;
    // Inside the repository, or reached through a link into it: the repository's content, which
    // a profile never mounts on its say-so.
    if (Under(abs, workspace) || HostResolutionEnters(abs, workspace)) continue;
    if (ParentShows(parent_policy, workspace, home_abs, abs)) {
      plan.already.push_back(t.path);
    } else {
      plan.exposed.push_back(std::move(t));
    }
  }
  bool node_in_backend = f.node && plan.parent == "backend";

  std::string& s = plan.text;
  // Comment text comes from the directory's name and the host's PATH: one line each, escaped, so
  // a name holding a newline cannot add rules to the profile below the comment.
  const std::string shown_dir = TerminalSafe(Basename(dir), TerminalLines::kOne);
  s += "# " + o.name + ": written by `cagent profile init` for " + shown_dir + ".\n";
  s += "# Review it: it is a starting point, guessed from the repository's build files and the\n";
  s += "# toolchains on this machine. Then: cagent policy check " + o.name +
       "; cagent policy audit " + o.name + "\n";
  s += "#\n# Found:";
  for (std::size_t i = 0; i < plan.found.size(); ++i) s += (i ? ", " : " ") + plan.found[i];
  s += ".\n";
  s += "# Rules add to the parent's; a parent's deny always stands. `cagent policy show " + o.name +
       "` prints\n# the result.\n";
  s += "description " +
       policy::QuoteString(Basename(dir) + ": " + plan.parent +
                           " plus this repository's toolchains and tests") +
       "\n";
  s += "extends " + plan.parent + "\n";

  if (!plan.exposed.empty() || !plan.already.empty()) {
    s += "\nfilesystem {\n";
    if (!plan.already.empty()) {
      s += "  # Already read-only in " + plan.parent + ":";
      for (const auto& a : plan.already) s += " " + a;
      s += "\n";
    }
    if (!plan.exposed.empty()) {
      s += "  # Toolchains found on this machine that " + plan.parent +
           " does not show; read-only.\n";
      for (const auto& t : plan.exposed) {
        s += "  read-only " + policy::QuoteWord(t.path) + "  # " +
             TerminalSafe(t.why, TerminalLines::kOne) + "\n";
      }
    }
    s += "}\n";
  }

  if (node_in_backend) {
    s += "\ncommands {\n";
    s += "  # package.json: node tooling, as in the built-in frontend profile. node runs any\n";
    s += "  # JavaScript, so the sandbox, not this list, is the boundary.\n";
    s += "  allow (node | npm | npx)\n";
    s += "  ask npm (install | i | add | remove | uninstall | update | upgrade) *\n";
    s +=
        "  deny npm (publish | login | logout | adduser | token | owner | unpublish | deprecate)\n";
    s += "}\n";
    s += "\nenvironment {\n  pass NODE_ENV NODE_OPTIONS NVM_DIR NVM_BIN\n}\n";
  }

  s += "\n";
  if (plan.verify.empty()) {
    s += "# No test command was recognised. cagent runs these after the agent stops, in a fresh\n";
    s += "# sandbox over the workspace; a failure marks the run as failed. For example:\n";
    s += "# verify {\n#   run \"make test\" timeout 10m\n# }\n";
  } else {
    s += "verify {\n";
    s += "  # Guessed from " + verify_why + ". cagent runs it after the agent stops, in a fresh\n";
    s += "  # sandbox over the workspace; a failure marks the run as failed.\n";
    s += "  run " + policy::QuoteString(plan.verify) + " timeout " + timeout + "\n";
    s += "}\n";
  }

  // Refuse to hand over a profile that `cagent policy check` would reject.
  policy::Compiled check = policy::CompileText(plan.path, plan.text, o.search);
  if (!check.ok()) {
    return PlainError(
               "the generated profile does not compile (" + plan.path + "); nothing was written",
               policy::RenderAll(*check.sources, check.diags))
        .WithCode(Error::Code::kFailed);
  }
  return plan;
}

Status WriteProfile(const InitPlan& plan, bool force) {
  // DIR/.cagent/NAME.cagent, where DIR is the repository: hostile content. A .cagent that is a
  // symlink (-> ~/.config/cagent/profiles, -> /etc) would make the write land outside it; every
  // step is taken beneath DIR's fd with no symlink followed.
  const std::string cagent_dir = Dirname(plan.path);
  const std::string repo = Dirname(cagent_dir);
  const std::string name = Basename(plan.path);
  UniqueFd repo_fd(::open(repo.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!repo_fd.valid()) return ErrnoError("open " + repo);
  if (::mkdirat(repo_fd.get(), ".cagent", 0755) != 0 && errno != EEXIST) {
    return ErrnoError("mkdir " + cagent_dir);
  }
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  UniqueFd dir(
      static_cast<int>(::syscall(SYS_openat2, repo_fd.get(), ".cagent", &how, sizeof(how))));
  if (!dir.valid()) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return PlainError("'" + TerminalSafe(cagent_dir) + "' is a symlink or not a directory",
                        "cagent writes a repository's profile only into a real .cagent directory "
                        "inside it; remove or replace it and run again");
    }
    return ErrnoError("open " + cagent_dir);
  }
  int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (force ? O_TRUNC : O_EXCL);
  int fd = ::openat(dir.get(), name.c_str(), flags, 0644);
  if (fd < 0) {
    if (errno == EEXIST) {
      return PlainError("'" + plan.path + "' already exists",
                        "pass --force to replace it, or --name to write another profile");
    }
    if (errno == ELOOP) {
      return PlainError("'" + TerminalSafe(plan.path) + "' is a symlink; nothing was written",
                        "remove the link, then run again");
    }
    return ErrnoError("open " + plan.path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return PlainError("'" + TerminalSafe(plan.path) +
                      "' is not a regular file; nothing was written");
  }
  std::size_t done = 0;
  while (done < plan.text.size()) {
    ssize_t n = ::write(fd, plan.text.data() + done, plan.text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoError("write " + plan.path, err);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) return ErrnoError("close " + plan.path);
  return Ok{};
}

}  // namespace cagent::launcher
