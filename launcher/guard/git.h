// Git, run by cagent (trusted) with configuration that cannot execute anything chosen by a
// repository or a workspace.
//
// After the agent has run, the workspace is hostile: its .git/config, hooks, attributes, filters
// and pager settings are attacker-controlled. cagent therefore never runs git *in* the workspace's
// repository: it keeps its own git directory outside the sandbox (the run's "trusted" git dir) and
// points it at the workspace with --work-tree. On top of that every invocation gets:
//   - no system or global config (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null), an empty HOME,
//     no terminal prompts, no optional locks (so reading the caller's repo never rewrites its
//     index);
//   - -c overrides for everything that can run a program: core.hooksPath=/dev/null,
//     core.fsmonitor=false, core.pager=cat, core.editor=false, core.sshCommand=false,
//     core.attributesFile=/dev/null, core.excludesFile=/dev/null, diff.external=, protocol
//     restrictions, credential.helper=;
//   - diff commands with --no-ext-diff --no-textconv --no-color.
// Filter drivers (clean/smudge/process) come only from config, and no config cagent did not write
// is read for the trusted git dir: an attribute naming a filter in the workspace selects nothing.
// Attributes that need no driver (text, eol, ident, working-tree-encoding, whitespace, diff) would
// still change what git records or checks out; NeutraliseAttributes() writes the trusted git dir's
// info/attributes, which outranks every in-tree .gitattributes (git 2.39 has no GIT_ATTR_SOURCE).
//
// Every git is also bounded, whatever it is pointed at: it runs in its own process group with
// RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE and RLIMIT_CORE=0 set in the child before exec, a wall-clock
// timeout after which the whole group is killed, a cap on the output kept, and SIGKILL when cagent
// dies (PR_SET_PDEATHSIG). A planted ref that is a symlink to /dev/zero makes git read until it
// runs out of memory (seen with git 2.39: "fatal: Out of memory, realloc failed"); the limit turns
// that into a failed call instead of a host out of memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace cagent::launcher {

struct GitInvocation {
  std::vector<std::string> args;  // after "git" and the hardening options
  std::string git_dir;            // --git-dir (empty: none)
  std::string work_tree;          // --work-tree (empty: none)
  std::string cwd;                // working directory (empty: "/")
  std::string home;               // an empty directory used as HOME (empty: "/nonexistent")
  std::string index_file;         // GIT_INDEX_FILE (empty: git's default for git_dir)
  std::uint64_t max_output = 256ULL << 20;    // stdout beyond this fails the call
  std::chrono::milliseconds timeout{600000};  // wall clock; then the process group is killed
  std::uint64_t max_memory = 4ULL << 30;      // RLIMIT_AS of git (and what it starts)
  std::uint64_t max_cpu_seconds = 600;        // RLIMIT_CPU soft limit (SIGXCPU; hard = soft + 5)
  std::uint64_t max_file_size = 4ULL << 30;   // RLIMIT_FSIZE: the largest file git may write
};

struct GitResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs git to completion. Runs in cagent (any thread; it blocks that thread until git and its
// process group are done or killed). git is started with fork+execve: everything it needs (argv,
// environment, the resolved path of git, the fds) is prepared before fork, and the child runs only
// async-signal-safe calls. The child gets /dev/null as stdin and pipes as stdout/stderr; no other
// descriptor of cagent's (all are O_CLOEXEC). An error Result when git could not be run, timed out
// or flooded; a non-zero exit (also death by a limit's signal, as 128+N) is a GitResult.
Result<GitResult> RunGit(const GitInvocation& invocation);
// RunGit, and a non-zero exit becomes an error naming the command and git's stderr.
Result<std::string> GitOutput(const GitInvocation& invocation);

// git's -z output split at its NUL bytes (a trailing NUL ends the last field, no empty field
// after it).
std::vector<std::string> SplitNul(const std::string& out);
// A one-line answer (rev-parse, write-tree) without its trailing newline, CR or spaces.
std::string TrimLine(std::string out);

// The options RunGit puts before the caller's arguments (exposed for tests and the docs).
std::vector<std::string> HardeningOptions();

// The fixed environment RunGit gives git: nothing of the caller's git configuration, hooks,
// prompts or locale; HOME = `home` ("" = /nonexistent); PATH from the caller, so its git is found.
// For a git cagent starts itself (the batch clone) with the same isolation.
std::vector<std::string> GitEnvironment(const std::string& home = "");

// The line NeutraliseAttributes writes: every attribute that changes content, checkout or the
// patch check, set to "unspecified" (git's defaults, core.autocrlf is not set).
std::string_view NeutralAttributesLine();

// Writes <git_dir>/info/attributes = NeutralAttributesLine() (replacing what is there). Runs in
// cagent, on cagent's own git dir only: $GIT_DIR/info/attributes has the highest precedence, so no
// .gitattributes in a work tree or in a tree git reads can select a conversion.
Status NeutraliseAttributes(const std::string& git_dir);

}  // namespace cagent::launcher
