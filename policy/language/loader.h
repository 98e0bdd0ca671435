// Finding, reading and compiling profiles: the only stage that touches the filesystem (it reads
// files, nothing else).
//
// A profile is named by its file stem. Names are looked up, first match wins, in:
//   1. the directory of the profile that asks (for `extends`), then
//   2. the search path: the repository's .cagent/ (ProjectProfileDir), the user's profiles/ in
//      ConfigDir (~/.config/cagent/profiles/ by default), the installed profile directory —
//      for `extends`, only the directories after the child's own (a parent is never looked up in
//      a less trusted place than its child: a repository's ./.cagent/base.cagent cannot become
//      the parent of a user's or a built-in profile),
//   3. the built-in profiles embedded in the binary (a built-in's parent is always built in).
// A profile given as a path (it contains '/' or ends in ".cagent") is read from that path;
// "<built-in>/NAME.cagent" names a built-in profile explicitly, whatever shadows it.
//
// `extends NAME` (at most once, top level) makes NAME the parent; `include "FILE"` (top level,
// relative to the including file) splices a fragment's statements in place. Cycles in either are
// errors naming the whole cycle.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/language/diagnostics.h"
#include "policy/language/ir.h"

namespace cagent::policy {

// A profile compiled into the binary (generated from profiles/*.cagent at build time).
struct BuiltinProfile {
  std::string_view name;
  std::string_view text;
};
std::span<const BuiltinProfile> BuiltinProfiles();

struct SearchPath {
  std::vector<std::string> dirs;  // searched in order
  bool builtins = true;           // then the embedded profiles

  // ProjectProfileDir(), ConfigDir(home)/profiles (when that is non-empty), `installed_dir`.
  static SearchPath Default(const std::string& home, const std::string& installed_dir);
};

// cagent's configuration directory: $CAGENT_CONFIG_DIR, else $XDG_CONFIG_HOME/cagent, else
// HOME/.config/cagent; "" when none applies. A variable counts only when it is an absolute path
// (the XDG rule: a relative value is ignored).
std::string ConfigDir(const std::string& home);

// The repository's profile directory as seen from the current directory, so a name is found from
// anywhere in the repository: the nearest ".cagent" directory from "." up to the directory that
// holds ".git", never past it, as a relative path ("./.cagent", "../.cagent", "../../.cagent").
// "./.cagent" outside a repository (nothing above the current directory is looked at then) or
// when no directory on the way has one. Only lstat/stat: git is never run, its config never read.
std::string ProjectProfileDir();

struct ProfileEntry {
  std::string name;
  std::string path;                  // file path, or "<built-in>/NAME.cagent"
  std::string origin;                // the search directory it was found in, or "built-in"
  std::string description;           // its own `description`, if it parses that far
  std::vector<std::string> shadows;  // paths of same-named profiles later in the search order
};

// Every profile on the search path, sorted by name; for a name found in several places, the one
// that wins (with the others in `shadows`).
std::vector<ProfileEntry> ListProfiles(const SearchPath& search);

struct Compiled {
  std::shared_ptr<const Policy> policy;  // null when there were errors
  std::shared_ptr<SourceSet> sources;    // every file read, for rendering diagnostics
  Diagnostics diags;

  [[nodiscard]] bool ok() const { return policy != nullptr; }
};

// Loads `name_or_path` with its parents and includes, checks and compiles it, and runs its
// examples. All diagnostics are collected; `policy` is set only when there is no error.
Compiled LoadProfile(std::string_view name_or_path, const SearchPath& search);

// The same for profile text held in memory (tests, fuzzing); `display_name` names it in
// diagnostics and its stem is the profile's name. `extends` resolves through `search`.
Compiled CompileText(std::string_view display_name, std::string_view text,
                     const SearchPath& search);

}  // namespace cagent::policy
