// Git, run by cagent (trusted) with configuration that cannot execute anything chosen by a
// repository or a workspace.
//
// After the agent has run, the workspace is hostile: its .git/config, hooks, attributes, filters
// and pager settings are attacker-controlled. cagent therefore never runs git *in* the workspace's
// repository: it keeps its own git directory outside the sandbox (the run's "trusted" git dir) and
// points it at the workspace with --work-tree. On top of that every invocation gets:
//   - no system or global config (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null), an empty HOME,
//     no terminal prompts, no optional locks (so reading the caller's repo never rewrites its index);
//   - -c overrides for everything that can run a program: core.hooksPath=/dev/null,
//     core.fsmonitor=false, core.pager=cat, core.editor=false, core.sshCommand=false,
//     core.attributesFile=/dev/null, core.excludesFile=/dev/null, diff.external=, protocol
//     restrictions, credential.helper=;
//   - diff commands with --no-ext-diff --no-textconv --no-color.
// Filter drivers (clean/smudge/process) come only from config, and no config cagent did not write
// is read for the trusted git dir: an attribute naming a filter in the workspace selects nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace cagent::launcher::run {

struct GitInvocation {
  std::vector<std::string> args;  // after "git" and the hardening options
  std::string git_dir;            // --git-dir (empty: none)
  std::string work_tree;          // --work-tree (empty: none)
  std::string cwd;                // working directory (empty: "/")
  std::string home;               // an empty directory used as HOME (empty: "/nonexistent")
  std::uint64_t max_output = 256ULL << 20;  // stdout beyond this fails the call
  std::chrono::milliseconds timeout{600000};
};

struct GitResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs git to completion. An error Result when git could not be run, timed out or flooded;
// a non-zero exit is a GitResult (callers decide).
Result<GitResult> RunGit(const GitInvocation& invocation);
// RunGit, and a non-zero exit becomes an error naming the command and git's stderr.
Result<std::string> GitOutput(const GitInvocation& invocation);

// The options RunGit puts before the caller's arguments (exposed for tests and the docs).
std::vector<std::string> HardeningOptions();

}  // namespace cagent::launcher::run
