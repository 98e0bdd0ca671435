// WorkspaceFs: path resolution beneath the workspace directory fd (cagent-agent, inside the
// sandbox). Every path the model names goes through here before any file is touched.
//
// The check is the kernel's, not a string prefix: openat2(2) with RESOLVE_BENEATH |
// RESOLVE_NO_MAGICLINKS (Linux 5.6) refuses, during the lookup itself, any ".." that would climb
// above the workspace fd, any absolute symlink, any symlink whose target leaves the workspace, and
// every /proc "magic link" (/proc/self/root, /proc/self/fd/N, /proc/self/cwd) — so a symlink the
// model planted with run_command cannot be used to read or write outside, and there is no window
// between a check and the use (the fd the lookup returns is the file acted on).
//
// Strings are refused before any syscall when they cannot be a workspace path: empty, NUL bytes,
// absolute paths outside the workspace path.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/unique_fd.h"

namespace cagent::agent {

// Why a path was refused or could not be opened, in the terms a tool result uses.
struct FsFailure {
  std::string code;     // "bad_arguments", "outside_workspace", "not_found", "not_a_directory",
                        // "permission_denied", "read_only", "io_error", ...
  std::string message;  // names the path and the guard that fired
  std::string hint;     // what the model can do instead
  int err = 0;          // errno behind it (0 when refused before any syscall)
};

template <typename T>
using FsResult = std::variant<T, FsFailure>;

// An open file or directory beneath the workspace.
struct OpenedPath {
  UniqueFd fd;
  std::string relative;  // resolved workspace-relative path (symlinks followed), "." for the root
  struct stat st {};     // fstat() of fd at open time
};

// The parent directory of a file to be created or replaced, opened beneath the root, plus the
// final name to create inside it (never contains '/', never "." or "..").
struct OpenedParent {
  UniqueFd dir;  // O_PATH | O_DIRECTORY
  std::string name;
  std::string relative;  // workspace-relative path of dir/name
};

class WorkspaceFs {
 public:
  // Opens `workspace` (must be absolute) as the root. Computes its canonical path (readlink of
  // /proc/self/fd/N, else realpath) for turning resolved fds back into relative paths.
  static FsResult<WorkspaceFs> Open(const std::string& workspace);

  // The root directory fd (O_RDONLY | O_DIRECTORY, close-on-exec). Owned by this object.
  [[nodiscard]] int root() const { return root_.get(); }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const std::string& canonical() const { return canonical_; }

  // Checks the model's string and makes it workspace-relative: refuses "" and NUL bytes; an
  // absolute path is accepted only when it lies beneath the workspace path (as given or
  // canonical) and is then made relative. No syscall. The result still may contain "..": the
  // kernel judges it when opening.
  [[nodiscard]] FsResult<std::string> Relativize(std::string_view path,
                                                 std::string_view what = "path") const;

  // openat2(root, relative, flags | O_CLOEXEC, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), retried
  // on EAGAIN (a concurrent rename during the lookup). Errors mapped to FsFailure codes.
  // `relative` must come from Relativize().
  [[nodiscard]] FsResult<OpenedPath> Open(const std::string& relative, int flags) const;

  // For writes: opens the parent directory of `relative` beneath the root. With `create_dirs`,
  // missing directories are created one component at a time (mkdirat in the parent already
  // opened beneath the root, then the new directory reopened beneath the root). Refuses a path
  // whose last component is "." or ".." or that ends in '/'.
  [[nodiscard]] FsResult<OpenedParent> OpenParent(const std::string& relative,
                                                  bool create_dirs) const;

  // The workspace-relative path of an fd opened beneath the root: readlink of /proc/self/fd/N
  // made relative to the canonical root. nullopt when /proc is unavailable or the link does not
  // lie beneath the root (the caller then falls back to the lexical path).
  [[nodiscard]] std::optional<std::string> RelativeOf(int fd) const;

 private:
  WorkspaceFs() = default;
  UniqueFd root_;
  std::string path_;       // as given (lexically normalised)
  std::string canonical_;  // symlinks resolved
};

// Lexical normalisation of a relative path: drops "." and empty components, folds "a/.." pairs
// (a leading ".." stays), "" -> ".". Only used for messages and as the fallback when /proc is not
// mounted; never for a security decision.
std::string NormalizeLexically(std::string_view relative);

// Splits "a/b/c" into {"a", "b", "c"} (empty components dropped).
std::vector<std::string> SplitComponents(std::string_view relative);

// Joins a workspace-relative directory and a name ("." + "x" -> "x").
std::string JoinRelative(std::string_view dir, std::string_view name);

// Reads the whole file from offset 0 with pread (does not move the fd offset). Fails with an
// errno-carrying FsFailure ("io_error") on a read error.
FsResult<std::string> ReadWholeFile(int fd, const std::string& relative);

}  // namespace cagent::agent
