// `cagent profile init`: a starting profile for a repository, guessed from its build files and
// from the toolchains installed on this machine.
//
// Runs in cagent (the caller's process, outside any sandbox). It only reads: the repository's
// top-level build files (never executes them) and the existence of toolchain directories and of
// binaries on PATH. The profile it writes `extends` the closest built-in (backend, frontend or
// docs), and per ecosystem (issue 32) adds the setup that installs the dependencies on a clean
// checkout (with the package registries' hosts), the caches the package manager and the build
// keep, the `outputs` the build leaves in the tree, and the verify command that passes on a clean
// checkout of the base; it exposes read-only the toolchain directories the parent does not already
// show. The text is compiled with the policy compiler before anything is written: a profile that
// would not pass `cagent policy check` is never written. It is written outside the repository
// (CONFIG/repos/KEY/NAME.cagent, launcher/profile/repo_profiles.h) unless asked for DIR/.cagent/.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "policy/language/loader.h"

namespace cagent::launcher {

// What the repository's top level shows. Only file names and a few well-known contents are read.
struct RepoFacts {
  std::vector<std::string> markers;  // build files found, in a fixed order ("Cargo.toml", ...)
  bool node = false;                 // package.json
  bool python = false;               // pyproject.toml, setup.py, setup.cfg, requirements*.txt
  bool rust = false;                 // Cargo.toml
  bool go = false;                   // go.mod
  bool cmake = false;                // CMakeLists.txt
  bool meson = false;                // meson.build
  bool make = false;                 // Makefile / GNUmakefile
  bool java = false;                 // pom.xml, build.gradle(.kts)
  bool shell = false;                // *.sh at the top, or test/*.bats (and nothing above)
  bool docs = false;                 // Markdown / reST / AsciiDoc, docs/, mkdocs.yml
  // Details that choose the verify command.
  std::string node_test;       // "npm test", "yarn test", "pnpm test", or "" without a test script
  std::string node_runner;     // "npm", "pnpm" or "yarn", chosen by the lockfile
  bool node_lockfile = false;  // package-lock.json / npm-shrinkwrap.json, pnpm-lock.yaml, yarn.lock
  bool node_deps = false;      // dependencies or devDependencies name at least one package
  bool pytest = false;         // pytest is configured or required
  bool python_tests = false;   // a tests/ or test/ directory, or test_*.py at the top
  std::string python_tests_dir;       // "tests" or "test" when that directory exists
  bool python_tests_package = false;  // it has an __init__.py
  bool python_src_layout = false;     // a src/ directory holding the code (no src/__init__.py)
  bool python_deps = false;  // dependencies declared (requirements lines, install_requires, ...)
  bool python_installable = false;  // pyproject.toml with a [project] or [build-system], setup.py
  std::vector<std::string> requirements;  // requirements*.txt with at least one requirement
  bool go_requires = false;               // go.mod has require directives
  bool rust_lockfile = false;             // Cargo.lock is in the repository
  std::string make_target;                // "test" or "check" when the Makefile has one
  bool gradle_wrapper = false;
  bool maven = false;          // pom.xml (else gradle)
  bool bats = false;           // test/*.bats or tests/*.bats
  bool shell_scripts = false;  // *.sh at the top
  bool mkdocs = false;
  bool sphinx = false;  // docs/conf.py or conf.py
};

// Reads the top level of `dir` (and package.json, pyproject.toml, requirements*.txt, setup.cfg,
// the Makefile: each at most 1 MiB, regular files only). The repository is hostile input: every
// name is opened beneath `dir` with openat2(RESOLVE_BENEATH), so a symlink leading out of it
// counts as absent and is never read; nothing it names becomes a host path in the plan.
RepoFacts InspectRepository(const std::string& dir);

// A toolchain directory found on this machine.
struct Toolchain {
  std::string path;  // as written in a profile: "~/.rustup", "/opt/node-v20"
  std::string why;   // "rustup toolchains", "node on PATH (/opt/node-v20/bin/node)"
};

// Looks for the per-user toolchain directories (~/.rustup, ~/.cargo, ~/.pyenv, ~/.nvm, ~/go, ...)
// relevant to `facts`, and for node/python3/cargo/go on `path_env`, returning the install roots.
// `home` empty: no per-user directories. Never returns "~" or "/" themselves. A binary on PATH
// whose host resolution passes through `repo` (a PATH entry inside the repository, a link into
// it) is ignored: the repository could point it at any host tree.
std::vector<Toolchain> FindToolchains(const RepoFacts& facts, const std::string& home,
                                      const std::string& path_env, const std::string& repo = "");

struct InitOptions {
  std::string dir;  // the repository root (must exist)
  // The profile's name; "" = the repository's (RepositoryProfileName: its directory's name,
  // sanitised, never a built-in's).
  std::string name;
  bool force = false;  // overwrite an existing file
  // false (the default since issue 32): write CONFIG/repos/KEY/NAME.cagent (launcher/
  // repo_profiles.h), found by `--profile NAME` from the repository and never part of it. true:
  // write DIR/.cagent/NAME.cagent, to commit with the repository.
  bool in_repository = false;
  std::string config_dir;  // policy::ConfigDir(home); needed unless in_repository
  std::string home;        // the caller's home ("" = unknown)
  std::string path_env;    // the caller's $PATH
  // How `extends` resolves, as `cagent policy` will resolve it from DIR: DIR/.cagent first, then
  // (for a profile outside the repository) its CONFIG/repos/KEY, the user's and installed
  // profiles. A profile's parent is looked up only after its own directory
  // (policy/language/loader.h), so a profile written outside the repository never takes a parent
  // from DIR/.cagent.
  policy::SearchPath search;
};

struct InitPlan {
  std::string path;                      // where the profile is written
  std::string name;                      // its name (the file's stem)
  bool in_repository = false;            // path is DIR/.cagent/NAME.cagent
  std::string repository;                // the repository's canonical top level
  std::string repository_key;            // its key (CONFIG/repos/KEY, the caches' key)
  std::string parent;                    // "backend", "frontend" or "docs"
  std::string verify;                    // the guessed verification command, or ""
  std::vector<std::string> setup;        // setup commands, in order ("" none)
  std::vector<std::string> setup_hosts;  // the hosts setup may reach (the package registries)
  std::vector<std::string> caches;       // "~/.npm", ...
  std::vector<std::string> outputs;      // outputs globs ("build", "**/__pycache__", ...)
  std::vector<std::string> notes;        // what was decided and why, one line each (also comments)
  std::vector<std::string> found;        // what was recognised, one line each
  std::vector<Toolchain> exposed;        // toolchains added read-only (not in the parent)
  std::vector<std::string> already;      // toolchains found that the parent already shows
  std::string text;                      // the profile
};

// Inspects and writes the profile text, then compiles it as the file it will be. Fails with
// Error::Code::kInvalidInput when DIR is not a directory, when NAME is not a valid profile name or
// names a built-in profile (the repository's copy would shadow it), or when there is no
// configuration directory to write to (and not in_repository); with kFailed, the rendered
// diagnostics in the error's detail, when the generated text does not compile.
Result<InitPlan> PlanProfile(const InitOptions& options);

// Writes plan.text to plan.path. Refuses to replace an existing file unless `force`; never follows
// a symlink at the file's path. In the repository (plan.in_repository): DIR/.cagent is created and
// opened beneath DIR with no symlink followed (the repository is hostile). Outside it: the
// directories up to CONFIG/repos/KEY are created (0700) where missing.
Status WriteProfile(const InitPlan& plan, bool force);

}  // namespace cagent::launcher
