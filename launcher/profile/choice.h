// Which profile file a `--profile NAME` means, for the commands that launch something (exec,
// run, agent). Runs in cagent (trusted), before anything is built.
//
// The search path puts the repository's own ./.cagent/ first, so a repository can ship a
// profile for itself (the demo's fix-add). The same order would let a hostile repository replace
// a profile the caller trusts: `cagent exec --profile backend` in a clone whose
// ./.cagent/backend.cagent says `read-write ~` runs with the repository's rules, not backend's.
// ChooseProfile therefore refuses a repository profile that shadows a user or built-in profile of
// the same name unless the caller named the file by path or passed --trust-repo-profile, and
// reports the file it chose and the SHA-256 of its text for the run's record.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "policy/language/loader.h"

namespace cagent::launcher {

struct ProfileChoice {
  // What to hand to policy::LoadProfile: the chosen file's path ("<built-in>/NAME.cagent" for a
  // built-in), so the file recorded is the file compiled.
  std::string path;
  // The same, absolute where it is a file (for result.json and --json).
  std::string file;
  std::string sha256;                // of the file's text, as read now
  bool from_repository = false;      // the file is in the repository's ./.cagent/ (found or named)
  std::vector<std::string> shadows;  // same-named profiles it hides, in search order
};

// Resolves `requested` (a name, a path, or "<built-in>/NAME") the way LoadProfile does and
// applies the shadowing rule above. `repo_dir` is the search path entry that belongs to the
// repository; empty means the first entry of `search` (SearchPath::Default puts the repository's
// .cagent there). Fails with Error::Code::kInvalidInput and a message that names both files and
// says how to proceed (or the file that cannot be read).
Result<ProfileChoice> ChooseProfile(std::string_view requested, const policy::SearchPath& search,
                                    bool trust_repo_profile, std::string_view repo_dir = {});

// The help text of --trust-repo-profile, one place for exec, run and agent.
extern const char* const kTrustRepoProfileHelp;

}  // namespace cagent::launcher
