// `cagent profile init`: a starting profile for a repository, guessed from its build files and
// from the toolchains installed on this machine.
//
// Runs in cagent (the caller's process, outside any sandbox). It only reads: the repository's
// top-level build files (never executes them) and the existence of toolchain directories and of
// binaries on PATH. The profile it writes `extends` the closest built-in (backend, frontend or
// docs), adds a `verify` command guessed from the project, and exposes read-only the toolchain
// directories the parent does not already show. The text is compiled with the policy compiler
// before anything is written: a profile that would not pass `cagent policy check` is never written.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "policy/loader.h"

namespace cagent::launcher {

// What the repository's top level shows. Only file names and a few well-known contents are read.
struct RepoFacts {
  std::vector<std::string> markers;  // build files found, in a fixed order ("Cargo.toml", ...)
  bool node = false;                 // package.json
  bool python = false;               // pyproject.toml, setup.py, setup.cfg, requirements*.txt
  bool rust = false;                 // Cargo.toml
  bool go = false;                   // go.mod
  bool cmake = false;                // CMakeLists.txt
  bool make = false;                 // Makefile / GNUmakefile
  bool java = false;                 // pom.xml, build.gradle(.kts)
  bool docs = false;                 // Markdown / reST / AsciiDoc, docs/, mkdocs.yml
  // Details that choose the verify command.
  std::string node_test;      // "npm test", "yarn test", "pnpm test", or "" without a test script
  bool pytest = false;        // pytest is configured or required
  bool python_tests = false;  // a tests/ or test/ directory, or test_*.py at the top
  std::string make_target;    // "test" or "check" when the Makefile has one
  bool gradle_wrapper = false;
  bool maven = false;  // pom.xml (else gradle)
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
  std::string dir;               // the repository root (must exist)
  std::string name = "project";  // the profile's name: DIR/.cagent/NAME.cagent
  bool force = false;            // overwrite an existing file
  std::string home;              // the caller's home ("" = unknown)
  std::string path_env;          // the caller's $PATH
  // How `extends` resolves, as `cagent policy` will resolve it from DIR (DIR/.cagent first).
  policy::SearchPath search;
};

struct InitPlan {
  std::string path;                  // DIR/.cagent/NAME.cagent
  std::string parent;                // "backend", "frontend" or "docs"
  std::string verify;                // the guessed verification command, or ""
  std::vector<std::string> found;    // what was recognised, one line each
  std::vector<Toolchain> exposed;    // toolchains added read-only (not in the parent)
  std::vector<std::string> already;  // toolchains found that the parent already shows
  std::string text;                  // the profile
};

// Inspects and writes the profile text, then compiles it as DIR/.cagent/NAME.cagent. Fails with
// Error::Code::kInvalidInput when DIR is not a directory, when NAME is not a valid profile name or
// names a built-in profile (the repository's copy would shadow it); with kFailed, the rendered
// diagnostics in the error's detail, when the generated text does not compile.
Result<InitPlan> PlanProfile(const InitOptions& options);

// Writes plan.text to plan.path, creating DIR/.cagent. Refuses to replace an existing file unless
// `force`; never follows a symlink at the file's path or at DIR/.cagent (both are opened beneath
// DIR with no symlink followed).
Status WriteProfile(const InitPlan& plan, bool force);

}  // namespace cagent::launcher
