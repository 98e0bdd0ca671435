#include "launcher/profile/init.h"

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

#include "common/json_text.h"
#include "common/terminal_text.h"
#include "common/unique_fd.h"
#include "launcher/profile/repo_profiles.h"
#include "launcher/profile/spec.h"
#include "policy/language/engine.h"
#include "policy/language/ir.h"

namespace cagent::launcher {
namespace {

constexpr std::size_t kMaxReadBytes = 1 << 20;
// A package.json nests a few levels; a hostile one deeper is read as no scripts.
constexpr std::size_t kMaxPackageJsonDepth = 64;

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

  // The names in the directory `rel` (the top level by default), sorted.
  [[nodiscard]] std::vector<std::string> List(const std::string& rel = ".") const {
    std::vector<std::string> names;
    const int dfd = Open(rel, O_RDONLY | O_DIRECTORY);
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

// A file or directory of the repository's top level that says what it is: recorded as a marker.
bool Mark(const RepoReader& repo, RepoFacts& f, const std::string& name) {
  if (!repo.Exists(name)) return false;
  f.markers.push_back(name);
  return true;
}

// package.json: the runner its lockfile names, its test script, whether it has dependencies.
void InspectNode(const RepoReader& repo, RepoFacts& f) {
  auto has = [&](const std::string& name) { return repo.Exists(name); };
  if (Mark(repo, f, "package.json")) {
    f.node = true;
    // The repository's: bounded in size (ReadSmall) and in nesting.
    auto json = ParseJsonWithin(repo.ReadSmall("package.json"), kMaxPackageJsonDepth);
    f.node_runner = has("pnpm-lock.yaml") ? "pnpm" : has("yarn.lock") ? "yarn" : "npm";
    f.node_lockfile = has("pnpm-lock.yaml") || has("yarn.lock") || has("package-lock.json") ||
                      has("npm-shrinkwrap.json");
    if (json.is_object() && json.contains("scripts") && json["scripts"].is_object()) {
      const auto& scripts = json["scripts"];
      // npm init's placeholder fails on purpose; it is not a test suite.
      if (scripts.contains("test") && scripts["test"].is_string() &&
          scripts["test"].get<std::string>().find("no test specified") == std::string::npos) {
        f.node_test = f.node_runner + " test";
      }
    }
    if (json.is_object()) {
      for (const char* key : {"dependencies", "devDependencies", "optionalDependencies"}) {
        if (json.contains(key) && json[key].is_object() && !json[key].empty()) f.node_deps = true;
      }
    }
  }
}

// Python: requirements files, pyproject.toml, setup.py/setup.cfg, pytest, the tests' layout and
// whether dependencies are declared; `top` is the top level's listing.
void InspectPython(const RepoReader& repo, RepoFacts& f, const std::vector<std::string>& top) {
  auto has = [&](const std::string& name) { return repo.Exists(name); };
  auto mark = [&](const std::string& name) { return Mark(repo, f, name); };
  bool pyproject = mark("pyproject.toml");
  bool setup_py = mark("setup.py");
  bool setup_cfg = mark("setup.cfg");
  std::string python_text;
  for (const auto& n : top) {
    if (n.starts_with("requirements") && n.ends_with(".txt")) {
      f.markers.push_back(n);
      f.python = true;
      const std::string text = repo.ReadSmall(n);
      python_text += text;
      // A requirement is a line that is neither empty nor a comment (options such as -r count).
      std::istringstream lines(text);
      std::string line;
      bool any = false;
      while (std::getline(lines, line)) {
        const auto first = line.find_first_not_of(" \t\r");
        if (first != std::string::npos && line[first] != '#') any = true;
      }
      // Only plain names: a file name with a quote or a space would have to be quoted in setup.
      if (any && n.find_first_of(" '\"\\$`") == std::string::npos) f.requirements.push_back(n);
    }
  }
  if (pyproject || setup_py || setup_cfg) f.python = true;
  std::string pyproject_text = pyproject ? repo.ReadSmall("pyproject.toml") : std::string();
  std::string setup_text = (setup_cfg ? repo.ReadSmall("setup.cfg") : std::string()) +
                           (setup_py ? repo.ReadSmall("setup.py") : std::string());
  python_text += pyproject_text + setup_text;
  f.pytest = python_text.find("pytest") != std::string::npos || has("pytest.ini") ||
             has("conftest.py") || has("tests/conftest.py");
  f.python_tests_dir = repo.IsDir("tests") ? "tests" : repo.IsDir("test") ? "test" : "";
  f.python_tests_package =
      !f.python_tests_dir.empty() && repo.IsFile(f.python_tests_dir + "/__init__.py");
  f.python_tests =
      !f.python_tests_dir.empty() || std::any_of(top.begin(), top.end(), [](const std::string& n) {
        return (n.starts_with("test_") || n.ends_with("_test.py")) && n.ends_with(".py");
      });
  f.python_src_layout = f.python && repo.IsDir("src") && !repo.IsFile("src/__init__.py");
  // Declared dependencies: a requirements file with a requirement, install_requires, or a
  // non-empty `dependencies = [...]` in pyproject.toml.
  bool declared =
      !f.requirements.empty() || setup_text.find("install_requires") != std::string::npos;
  for (std::size_t at = pyproject_text.find("dependencies"); !declared && at != std::string::npos;
       at = pyproject_text.find("dependencies", at + 1)) {
    const auto eq = pyproject_text.find_first_not_of(" \t", at + 12);
    if (eq == std::string::npos || pyproject_text[eq] != '=') continue;
    const auto open = pyproject_text.find_first_not_of(" \t", eq + 1);
    if (open == std::string::npos || pyproject_text[open] != '[') continue;
    const auto next = pyproject_text.find_first_not_of(" \t\r\n", open + 1);
    declared = next != std::string::npos && pyproject_text[next] != ']';
  }
  f.python_deps = declared;
  f.python_installable =
      setup_py || (pyproject && (pyproject_text.find("[project]") != std::string::npos ||
                                 pyproject_text.find("[build-system]") != std::string::npos));
}

RepoFacts InspectRepository(const std::string& dir) {
  RepoFacts f;
  const RepoReader repo(dir);
  auto has = [&](const std::string& name) { return repo.Exists(name); };
  auto mark = [&](const std::string& name) {
    if (has(name)) f.markers.push_back(name);
    return has(name);
  };

  InspectNode(repo, f);
  std::vector<std::string> top = repo.List();
  InspectPython(repo, f, top);

  f.rust = mark("Cargo.toml");
  f.rust_lockfile = f.rust && has("Cargo.lock");
  f.go = mark("go.mod");
  if (f.go) {
    const std::string gomod = repo.ReadSmall("go.mod");
    std::istringstream lines(gomod);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.starts_with("require")) f.go_requires = true;
    }
  }
  f.cmake = mark("CMakeLists.txt");
  f.meson = mark("meson.build");
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

  for (const char* d : {"test", "tests"}) {
    if (!repo.IsDir(d)) continue;
    for (const auto& n : repo.List(d)) {
      if (n.ends_with(".bats")) f.bats = true;
    }
  }
  f.shell_scripts =
      std::any_of(top.begin(), top.end(), [](const std::string& n) { return n.ends_with(".sh"); });
  f.shell = (f.bats || f.shell_scripts) && !f.node && !f.python && !f.rust && !f.go && !f.cmake &&
            !f.meson && !f.java;

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
      // bin/ of an install root; shims/ of a version manager (pyenv, rbenv, nodenv, asdf): its
      // shims are scripts that run ROOT/libexec and ROOT/versions, so the root is the toolchain.
      std::string root = Basename(bin) == "bin" || Basename(bin) == "shims" ? Dirname(bin) : bin;
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

namespace {

// One ecosystem's part of a profile (issue 32): what installs its dependencies on a clean
// checkout, what the package manager and the build keep between runs, what the build leaves in the
// tree, and the command that runs the tests.
struct Recipe {
  std::string what;        // "Python", "Node", ...: for the comments
  std::string verify;      // "" = none recognised
  std::string verify_why;  // where it comes from
  std::string timeout = "10m";
  std::vector<std::string> setup;    // commands, in order
  std::vector<std::string> hosts;    // setup's hosts (HOST:443)
  std::vector<std::string> caches;   // ~/PATH
  std::vector<std::string> outputs;  // workspace globs
  std::vector<std::string> notes;    // one line each: why the setup is what it is
};

bool OnPath(const std::string& path_env, const std::string& name) {
  std::istringstream dirs(path_env);
  std::string d;
  while (std::getline(dirs, d, ':')) {
    if (!d.empty() && d[0] == '/' && IsExecutableFile(d + "/" + name)) return true;
  }
  return false;
}

const std::vector<std::string> kPyPi = {"pypi.org:443", "files.pythonhosted.org:443"};
const std::vector<std::string> kNpm = {"registry.npmjs.org:443"};
const std::vector<std::string> kMaven = {"repo.maven.apache.org:443", "repo1.maven.org:443"};

Recipe Python(const RepoFacts& f) {
  Recipe r;
  r.what = "Python";
  const bool venv = f.python_deps;
  const std::string py = venv ? ".venv/bin/python" : "python3";
  // An editable install puts src/ on the virtualenv's path; otherwise the tests need it on theirs.
  const bool editable = venv && f.python_installable;
  const std::string env = f.python_src_layout && !editable ? "PYTHONPATH=src " : "";
  if (venv) {
    std::string install = "python3 -m venv .venv";
    if (editable) install += " && .venv/bin/pip install -q -e .";
    for (const auto& req : f.requirements) install += " && .venv/bin/pip install -q -r " + req;
    if (f.pytest) install += " && .venv/bin/pip install -q pytest";
    r.setup.push_back(install);
    r.hosts = kPyPi;
    r.caches.emplace_back("~/.cache/pip");
    r.outputs.emplace_back(".venv");
    r.notes.push_back(
        "dependencies are declared: setup makes a virtualenv (.venv) and installs "
        "them from PyPI" +
        std::string(editable ? " (the project itself editable, so src/ is found)" : ""));
  } else {
    r.notes.push_back("no dependencies are declared: no setup; the tests run with python3" +
                      std::string(f.pytest ? " (pytest must be installed on this machine)" : ""));
  }
  if (f.python_src_layout && !editable) {
    r.notes.push_back("src/ layout: the tests run with PYTHONPATH=src");
  }
  if (f.pytest) {
    r.verify = env + py + " -m pytest -q";
    r.verify_why = "pytest is configured or required";
    r.outputs.emplace_back(".pytest_cache");
  } else if (!f.python_tests_dir.empty()) {
    // unittest imports the tests from the start directory; with -t . as the package
    // tests.test_x, which needs tests/__init__.py.
    r.verify = env + py + " -m unittest discover -s " + f.python_tests_dir +
               (f.python_tests_package ? " -t ." : "");
    r.verify_why = "a " + f.python_tests_dir + "/ directory without pytest (unittest)";
  } else if (f.python_tests) {
    r.verify = env + py + " -m unittest discover";
    r.verify_why = "test_*.py at the top without pytest (unittest)";
  }
  r.outputs.emplace_back("**/__pycache__");
  if (f.python_installable) {
    for (const char* o : {"**/*.egg-info", "build", "dist"}) r.outputs.emplace_back(o);
  }
  return r;
}

Recipe Node(const RepoFacts& f) {
  Recipe r;
  r.what = "Node";
  if (f.node_deps || f.node_lockfile) {
    if (f.node_runner == "pnpm") {
      r.setup.emplace_back("pnpm install --frozen-lockfile");
      r.caches.emplace_back("~/.local/share/pnpm/store");
    } else if (f.node_runner == "yarn") {
      r.setup.emplace_back("yarn install --frozen-lockfile --non-interactive");
      r.caches.emplace_back("~/.cache/yarn");
    } else if (f.node_lockfile) {
      r.setup.emplace_back("npm ci --no-audit --no-fund");
      r.caches.emplace_back("~/.npm");
    } else {
      // Without a lockfile npm would write one, a file git does not ignore, which setup must not
      // leave behind (the run would fail before the agent).
      r.setup.emplace_back("npm install --no-audit --no-fund --no-package-lock");
      r.caches.emplace_back("~/.npm");
      r.notes.push_back("no lockfile: npm install resolves the versions anew on every run");
    }
    r.hosts = kNpm;
    if (f.node_runner == "yarn") r.hosts.emplace_back("registry.yarnpkg.com:443");
    r.notes.push_back(f.node_runner + " was chosen by " +
                      (f.node_lockfile ? "the lockfile" : "the absence of a lockfile"));
  } else {
    r.notes.push_back(
        "package.json declares no dependencies and there is no lockfile: no setup "
        "(there is nothing to install)");
  }
  r.verify = f.node_test;
  r.verify_why = "the test script in package.json";
  for (const char* o : {"node_modules", "dist", "coverage"}) r.outputs.emplace_back(o);
  return r;
}

Recipe Go(const RepoFacts& f) {
  Recipe r;
  r.what = "Go";
  if (f.go_requires) {
    r.setup.emplace_back("go mod download");
    r.hosts = {"proxy.golang.org:443", "sum.golang.org:443"};
    r.caches.emplace_back("~/go/pkg/mod");
    r.notes.push_back("go.mod requires modules: setup downloads them through the Go proxy");
  } else {
    r.notes.push_back("go.mod requires no modules: no setup");
  }
  // Without it every verification compiles everything again (issue 32: 14 s against 3.5 s).
  r.caches.emplace_back("~/.cache/go-build");
  r.verify = "go test ./...";
  r.verify_why = "go.mod";
  return r;
}

Recipe Rust(const RepoFacts& f) {
  Recipe r;
  r.what = "Rust";
  r.setup.emplace_back("cargo fetch");
  r.hosts = {"index.crates.io:443", "static.crates.io:443", "crates.io:443"};
  r.caches = {"~/.cargo/registry", "~/.cargo/git"};
  r.verify = "cargo test --offline";
  r.verify_why = "Cargo.toml";
  r.timeout = "20m";
  r.outputs.emplace_back("target");
  // cargo fetch writes a Cargo.lock the repository does not have.
  if (!f.rust_lockfile) r.outputs.emplace_back("Cargo.lock");
  r.notes.push_back("setup fetches the crates; the tests then run offline");
  return r;
}

Recipe CMake() {
  Recipe r;
  r.what = "CMake";
  r.verify =
      "cmake -S . -B build && cmake --build build && ctest --test-dir build --output-on-failure";
  r.verify_why = "CMakeLists.txt (CTest)";
  r.timeout = "20m";
  r.outputs.emplace_back("build");
  return r;
}

Recipe Meson() {
  Recipe r;
  r.what = "Meson";
  r.verify = "meson setup build && meson test -C build";
  r.verify_why = "meson.build";
  r.timeout = "20m";
  r.outputs.emplace_back("build");
  return r;
}

Recipe Make(const RepoFacts& f) {
  Recipe r;
  r.what = "Make";
  r.verify = f.make_target.empty() ? "make" : "make " + f.make_target;
  r.verify_why = f.make_target.empty() ? "the Makefile (no test or check target: a build)"
                                       : "the Makefile's " + f.make_target + " target";
  for (const char* o : {"**/*.o", "**/*.a"}) r.outputs.emplace_back(o);
  return r;
}

Recipe Java(const RepoFacts& f) {
  Recipe r;
  r.what = "Java";
  r.timeout = "20m";
  if (f.maven) {
    r.setup.emplace_back("mvn -q -B dependency:go-offline");
    r.hosts = kMaven;
    r.caches.emplace_back("~/.m2/repository");
    r.verify = "mvn -o -q test";
    r.verify_why = "pom.xml";
    r.outputs.emplace_back("target");
    r.notes.push_back(
        "setup fetches the dependencies (dependency:go-offline); the tests then run "
        "offline");
    return r;
  }
  const std::string gradle = f.gradle_wrapper ? "./gradlew" : "gradle";
  r.setup.push_back(gradle + " --no-daemon -q dependencies");
  r.hosts = {"services.gradle.org:443", "downloads.gradle.org:443", "plugins.gradle.org:443",
             "plugins-artifacts.gradle.org:443"};
  r.hosts.insert(r.hosts.end(), kMaven.begin(), kMaven.end());
  r.caches = {"~/.gradle/caches", "~/.gradle/wrapper"};
  r.verify = gradle + " --offline --no-daemon test";
  r.verify_why = f.gradle_wrapper ? "the Gradle wrapper" : "build.gradle";
  r.outputs = {"build", ".gradle"};
  r.notes.push_back("setup fetches " + std::string(f.gradle_wrapper ? "Gradle and " : "") +
                    "the dependencies; the tests then run offline");
  return r;
}

Recipe Shell(const RepoFacts& f, const std::string& path_env, const std::string& dir) {
  Recipe r;
  r.what = "shell";
  const RepoReader repo(dir);
  std::vector<std::string> parts;
  if (f.bats) {
    const std::string tests = repo.IsDir("test") ? "test" : "tests";
    if (OnPath(path_env, "bats")) {
      parts.push_back("bats " + tests);
    } else {
      r.notes.push_back("bats is not on PATH: the " + tests + "/*.bats tests are not run");
    }
  }
  if (f.shell_scripts) {
    if (OnPath(path_env, "shellcheck")) {
      parts.emplace_back("shellcheck *.sh");
    } else {
      r.notes.push_back("shellcheck is not on PATH: the scripts are not checked");
    }
  }
  for (std::size_t i = 0; i < parts.size(); ++i) r.verify += (i ? " && " : "") + parts[i];
  r.verify_why = "the shell scripts and tests";
  return r;
}

void AddUnique(std::vector<std::string>& to, const std::vector<std::string>& from) {
  for (const auto& x : from) {
    if (std::find(to.begin(), to.end(), x) == to.end()) to.push_back(x);
  }
}

bool ValidName(std::string_view s) {
  return !s.empty() && s.size() <= 64 && s[0] != '.' && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

}  // namespace

namespace {

// The checks on the options before anything is inspected: a valid name that shadows no built-in
// profile, and somewhere to write it.
Status CheckInitOptions(const InitOptions& o, const std::string& name) {
  if (!ValidName(name)) {
    return PlainError("invalid profile name '" + name + "'",
                      "names are letters, digits, '-', '_' and '.', not starting with '.'")
        .WithCode(Error::Code::kInvalidInput);
  }
  for (const auto& b : policy::BuiltinProfiles()) {
    if (b.name == name) {
      return PlainError("the name '" + name + "' is a built-in profile's",
                        "a repository profile of that name would shadow the built-in one for "
                        "everyone working in it; choose another --name")
          .WithCode(Error::Code::kInvalidInput);
    }
  }
  if (!o.in_repository && o.config_dir.empty()) {
    return PlainError("no configuration directory to write the profile to",
                      "set HOME (or XDG_CONFIG_HOME, CAGENT_CONFIG_DIR), or pass --in-repo to "
                      "write it into the repository's .cagent/")
        .WithCode(Error::Code::kInvalidInput);
  }
  return Ok{};
}

// What was recognised, for the comment at the top and for the command's report.
std::vector<std::string> FoundInRepository(const RepoFacts& f, const std::string& parent) {
  std::vector<std::string> found;
  if (f.python) {
    found.push_back(std::string("Python project") + (f.python_src_layout ? " (src/ layout)" : ""));
  }
  if (f.rust) found.push_back("Rust crate (Cargo.toml)");
  if (f.go) found.push_back("Go module (go.mod)");
  if (f.cmake) found.push_back("CMake project (CMakeLists.txt)");
  if (f.meson) found.push_back("Meson project (meson.build)");
  if (f.make) {
    found.push_back("Makefile" + (f.make_target.empty()
                                      ? std::string()
                                      : " with a '" + f.make_target + "' target"));
  }
  if (f.java) found.push_back(f.maven ? "Maven project (pom.xml)" : "Gradle project");
  if (f.node) found.push_back("Node project (package.json, " + f.node_runner + ")");
  if (f.shell) found.push_back("shell scripts");
  if (f.docs && parent == "docs") {
    found.push_back(f.mkdocs   ? "MkDocs site (mkdocs.yml)"
                    : f.sphinx ? "Sphinx documentation (conf.py)"
                               : "documentation files");
  }
  if (found.empty()) found.push_back("no known build files");
  return found;
}

// Every recognised ecosystem's recipe; the first in this order decides setup, caches and the
// verify command (the project's own entry point first: a Makefile's test target runs the tests
// however the project builds, with the dependencies the language's setup installed). Fills the
// plan's verify, setup, hosts, caches, outputs and notes; `verify_why` and `timeout` are for the
// verify block's comment and limit.
void ChooseRecipe(InitPlan& plan, const RepoFacts& f, const InitOptions& o, const std::string& dir,
                  std::string& verify_why, std::string& timeout) {
  std::vector<Recipe> recipes;
  if (plan.parent != "docs") {
    if (f.rust) recipes.push_back(Rust(f));
    if (f.go) recipes.push_back(Go(f));
    if (f.python) recipes.push_back(Python(f));
    if (f.java) recipes.push_back(Java(f));
    if (f.node) recipes.push_back(Node(f));
    if (f.cmake) recipes.push_back(CMake());
    if (f.meson) recipes.push_back(Meson());
    if (f.make) recipes.push_back(Make(f));
    if (f.shell) recipes.push_back(Shell(f, o.path_env, dir));
  }
  Recipe chosen;
  if (plan.parent == "frontend") {
    chosen = Node(f);
  } else if (plan.parent == "backend") {
    for (const Recipe& r : recipes) {
      if (!r.verify.empty()) {
        chosen = r;
        break;
      }
    }
    if (chosen.what.empty() && !recipes.empty()) chosen = recipes.front();
    if (!f.make_target.empty() && chosen.what != "Make") {
      // The Makefile's target is the entry point; the language's setup still installs what it
      // needs.
      const Recipe make = Make(f);
      chosen.notes.push_back("the verify command is the Makefile's; setup is the " + chosen.what +
                             " project's");
      chosen.verify = make.verify;
      chosen.verify_why = make.verify_why;
    }
  }
  verify_why = chosen.verify_why;
  timeout = chosen.timeout;
  plan.verify = chosen.verify;
  plan.setup = chosen.setup;
  plan.setup_hosts = chosen.hosts;
  plan.caches = chosen.caches;
  plan.notes = chosen.notes;
  AddUnique(plan.outputs, chosen.outputs);
  for (const Recipe& r : recipes) AddUnique(plan.outputs, r.outputs);
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
  }
}

// The search path the parent is compiled with, as this profile will see it: from DIR/.cagent/ a
// copy of it there wins, as it will later; from CONFIG/repos/KEY/ the repository's .cagent/ is
// never a parent. Outside the repository the parent is looked up after the profile's own
// directory only. The loader knows that order by the directory's inode, and CONFIG/repos/KEY may
// not exist yet (it is made when the profile is written): without its entries before that
// directory the search path says the same now.
policy::SearchPath ParentSearchPath(const InitOptions& o, const InitPlan& plan,
                                    const std::string& dir) {
  policy::SearchPath search = o.search;
  if (!o.in_repository) {
    const std::string own = Dirname(plan.path);
    const auto at = std::find(search.dirs.begin(), search.dirs.end(), own);
    if (at != search.dirs.end()) {
      search.dirs.erase(search.dirs.begin(), at);
    } else {
      std::erase_if(search.dirs, [&](const std::string& d) {
        const std::string real = Absolute(d);
        return Under(real, dir) || Under(Absolute(Dirname(d)), dir);
      });
    }
  }
  return search;
}

// The toolchains found on this machine: the ones the parent already shows, and the ones the
// profile must show read-only (never the repository's own content, nor a link into it).
void PlaceToolchains(InitPlan& plan, const RepoFacts& f, const InitOptions& o,
                     const std::string& dir, const policy::Policy* parent_policy) {
  const std::string& workspace = dir;
  std::string home_abs = o.home.empty() ? "" : Absolute(o.home);
  for (auto& t : FindToolchains(f, o.home, o.path_env, dir)) {
    std::string abs = t.path.starts_with("~/") ? home_abs + t.path.substr(1) : t.path;
    if (Under(abs, workspace) || HostResolutionEnters(abs, workspace)) continue;
    if (ParentShows(parent_policy, workspace, home_abs, abs)) {
      plan.already.push_back(t.path);
    } else {
      plan.exposed.push_back(std::move(t));
    }
  }
}

// The profile's text: the comment saying what was found and how to review it, then the sections.
std::string ProfileText(const InitPlan& plan, const InitOptions& o, const RepositoryIdentity& id,
                        const std::string& dir, const RepoFacts& f, const std::string& verify_why,
                        const std::string& timeout) {
  const std::string& name = plan.name;
  const bool node_in_backend = f.node && plan.parent == "backend";
  std::string s;
  // Comment text comes from the directory's name and the host's PATH: one line each, escaped, so
  // a name holding a newline cannot add rules to the profile below the comment.
  const std::string shown_dir = TerminalSafe(Basename(dir), TerminalLines::kOne);
  s += "# " + name + ": written by `cagent profile init` for " + shown_dir + ".\n";
  if (!o.in_repository) {
    s += "# Kept outside the repository (nothing to commit; it never enters a run's patch):\n";
    s += "# `--profile " + name + "` finds it from " + TerminalSafe(id.root, TerminalLines::kOne) +
         ".\n";
  }
  s += "# Review it: it is a starting point, guessed from the repository's build files and the\n";
  s += "# toolchains on this machine. Then: cagent policy check " + name +
       "; cagent policy audit " + name + "\n";
  s += "#\n# Found:";
  for (std::size_t i = 0; i < plan.found.size(); ++i) s += (i ? ", " : " ") + plan.found[i];
  s += ".\n";
  s += "# Rules add to the parent's; a parent's deny always stands. `cagent policy show " + name +
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

  if (!plan.setup.empty() || !plan.notes.empty()) s += "\n";
  for (const auto& n : plan.notes) s += "# " + TerminalSafe(n, TerminalLines::kOne) + ".\n";
  if (!plan.setup.empty()) {
    s += "# Setup runs before the agent, on a clean checkout of the base (and again on the\n";
    s += "# verification tree), and reaches only these hosts; the agent stays offline.\n";
    s += "setup {\n";
    for (const auto& c : plan.setup) s += "  run " + policy::QuoteString(c) + " timeout 10m\n";
    if (!plan.setup_hosts.empty()) {
      s += "  hosts {\n    allow";
      for (const auto& h : plan.setup_hosts) s += " " + h;
      s += "\n  }\n";
    }
    s += "}\n";
  }
  if (!plan.caches.empty()) {
    s +=
        "# Kept between runs of this profile on this repository (`cagent cache ls`); setup fills\n";
    s += "# them, the agent and verification read them through a private writable layer.\n";
    s += "cache";
    for (const auto& c : plan.caches) s += " " + policy::QuoteWord(c);
    s += "\n";
  }
  if (!plan.outputs.empty()) {
    s += "# What builds leave in the tree: left out of the agent's patch when git does not track\n";
    s += "# it (each run says what it left out).\n";
    s += "outputs";
    for (const auto& c : plan.outputs) s += " " + policy::QuoteWord(c);
    s += "\n";
  }

  s += "\n";
  if (plan.verify.empty()) {
    s += "# No test command was recognised. cagent runs these after the agent stops, in a fresh\n";
    s += "# sandbox over the workspace; a failure marks the run as failed. For example:\n";
    s += "# verify {\n#   run \"make test\" timeout 10m\n# }\n";
  } else {
    s += "verify {\n";
    s += "  # Guessed from " + verify_why + ". cagent runs it after the agent stops, in a fresh\n";
    s += "  # sandbox over a clean checkout of base + patch; a failure marks the run as failed.\n";
    s += "  run " + policy::QuoteString(plan.verify) + " timeout " + timeout + "\n";
    s += "}\n";
  }
  return s;
}

}  // namespace

Result<InitPlan> PlanProfile(const InitOptions& o) {
  if (!IsDir(o.dir)) {
    return PlainError("'" + o.dir + "' is not a directory", "pass the repository's root directory")
        .WithCode(Error::Code::kInvalidInput);
  }
  const auto id = IdentifyRepository(o.dir);
  if (!id) {
    return PlainError("'" + o.dir + "' cannot be resolved", "pass the repository's root directory")
        .WithCode(Error::Code::kInvalidInput);
  }
  const std::string name = o.name.empty() ? id->name : o.name;
  if (auto s = CheckInitOptions(o, name); !s) return s.error();

  const std::string dir = Absolute(o.dir);
  InitPlan plan;
  plan.name = name;
  plan.in_repository = o.in_repository;
  plan.repository = id->root;
  plan.repository_key = id->key;
  plan.path = o.in_repository ? dir + "/.cagent/" + name + ".cagent"
                              : RepositoryProfileDir(o.config_dir, *id) + "/" + name + ".cagent";
  const RepoFacts f = InspectRepository(dir);
  bool code = f.python || f.rust || f.go || f.cmake || f.meson || f.java;
  // A Makefile alone means C or similar, unless it only drives a docs build or npm.
  const bool backend = code || f.shell || (f.make && !f.node && !f.mkdocs && !f.sphinx);
  plan.parent = !backend && f.node ? "frontend" : !backend && f.docs ? "docs" : "backend";
  plan.found = FoundInRepository(f, plan.parent);
  std::string verify_why;
  std::string timeout;
  ChooseRecipe(plan, f, o, dir, verify_why, timeout);

  // The parent, compiled through a one-line child so that it resolves exactly like the profile
  // written below.
  const policy::SearchPath search = ParentSearchPath(o, plan, dir);
  policy::Compiled parent = policy::CompileText(plan.path, "extends " + plan.parent + "\n", search);
  PlaceToolchains(plan, f, o, dir, parent.ok() ? parent.policy.get() : nullptr);
  plan.text = ProfileText(plan, o, *id, dir, f, verify_why, timeout);

  // Refuse to hand over a profile that `cagent policy check` would reject.
  policy::Compiled check = policy::CompileText(plan.path, plan.text, search);
  if (!check.ok()) {
    return PlainError(
               "the generated profile does not compile (" + plan.path + "); nothing was written",
               policy::RenderAll(*check.sources, check.diags))
        .WithCode(Error::Code::kFailed);
  }
  return plan;
}

namespace {

// Writes plan.text as `name` in the directory `dir_fd` (plan.path for the messages).
Status WriteFileIn(int dir_fd, const std::string& name, const InitPlan& plan, bool force) {
  int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (force ? O_TRUNC : O_EXCL);
  int fd = ::openat(dir_fd, name.c_str(), flags, 0644);
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

// CONFIG/repos/KEY/NAME.cagent: the caller's own configuration directory, nothing of the
// repository's. The missing levels are made 0700; the file is never written through a link.
Status WriteOutsideRepository(const InitPlan& plan, bool force) {
  const std::string dir = Dirname(plan.path);
  std::string at;
  std::size_t from = 1;
  while (from <= dir.size()) {
    const std::size_t slash = dir.find('/', from);
    at = dir.substr(0, slash);
    if (::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoError("mkdir " + at);
    if (slash == std::string::npos) break;
    from = slash + 1;
  }
  UniqueFd dir_fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_fd.valid()) return ErrnoError("open " + dir);
  return WriteFileIn(dir_fd.get(), Basename(plan.path), plan, force);
}

}  // namespace

Status WriteProfile(const InitPlan& plan, bool force) {
  if (!plan.in_repository) return WriteOutsideRepository(plan, force);
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
  return WriteFileIn(dir.get(), name, plan, force);
}

}  // namespace cagent::launcher
