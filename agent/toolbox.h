// Toolbox: the agent's tools, executed inside the sandbox (cagent-agent, untrusted side).
//
// A call runs in two steps so the broker can decide on what will really be touched:
//   Prepare(tool, args)  validates the arguments against the tool's schema (common/tool_schemas.h,
//                        the same schemas the broker offers the provider) and resolves every path
//                        beneath the workspace directory fd (openat2 RESOLVE_BENEATH |
//                        RESOLVE_NO_MAGICLINKS), keeping the descriptors it opened. It reports the
//                        resolved workspace-relative paths (symlinks followed) for the broker.
//   Execute()            acts on those same descriptors (no second path lookup, so a symlink
//                        swapped in after the decision changes nothing).
// Everything the model sends is hostile: "..", absolute paths, NUL bytes, symlinks out of the
// workspace, /proc/self/root — each refused with a distinct code and a hint.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "agent/ledger.h"
#include "common/result.h"
#include "common/unique_fd.h"

namespace cagent::agent {

// A structured tool result. Render() is what the model sees.
struct ToolOutcome {
  bool ok = true;
  std::string code;     // "" when ok; "not_found", "outside_workspace", "denied", "binary_file",
                        // "too_large", "no_match", "ambiguous_match", "stale_read", "not_read",
                        // "timeout", "bad_arguments", "exists", "is_directory", "io_error", ...
  std::string message;  // what happened, in words
  std::string hint;     // what the model can do next
  std::string output;   // the payload (file contents, listing, diff, command output)
  std::vector<std::string> changed_paths;   // workspace-relative files this call wrote
  bool workspace_may_have_changed = false;  // run_command: the ledger must treat reads as stale

  // "error [code]: message\nhint: ..." on failure, `output` (plus message when useful) on success.
  [[nodiscard]] std::string Render() const;
  static ToolOutcome Fail(std::string code, std::string message, std::string hint = {});
};

struct ToolLimits {
  std::uint64_t read_max_bytes = 256 * 1024;  // read_file beyond this asks for a line range
  std::uint64_t read_max_lines = 2000;        // default window when no range is given
  std::uint64_t list_max_entries = 1000;
  std::uint64_t glob_max_results = 1000;
  std::uint64_t grep_max_matches = 200;
  std::uint64_t grep_max_file_bytes = 4 * 1024 * 1024;   // larger files are skipped, and said so
  std::uint64_t grep_max_scan_bytes = 64 * 1024 * 1024;  // a grep stops after scanning this much
  std::uint64_t write_max_bytes = 4 * 1024 * 1024;
  std::chrono::milliseconds command_timeout{120000};
  std::chrono::milliseconds kill_grace{2000};
  std::uint64_t command_output_bytes = 64 * 1024;  // head and tail kept, middle cut
};

// Applied to every path a tool meets (including files grep/glob/list_dir walk into): a refusal
// names the rule. Given workspace-relative paths; returns nullopt when allowed. Built by the agent
// from the policy the broker sent (policy::Engine::Path); empty = everything allowed.
struct PathDenial {
  std::string rule;  // "deny **/.env"
  std::string reason;
};
enum class PathAccess { kRead, kWrite };
using PathFilter =
    std::function<std::optional<PathDenial>(std::string_view relative_path, PathAccess access)>;

namespace internal {
struct ToolEnv;  // the toolbox's state shared with its prepared calls (agent/tool_internal.h)
}  // namespace internal

class PreparedCall {
 public:
  virtual ~PreparedCall() = default;
  // Resolved workspace-relative paths the call will read or write ("." for the workspace itself).
  [[nodiscard]] const std::vector<std::string>& paths() const { return paths_; }
  // run_command's shell string ("" for other tools).
  [[nodiscard]] const std::string& command() const { return command_; }
  // Runs the call once. Never throws.
  virtual ToolOutcome Execute() = 0;

 protected:
  std::vector<std::string> paths_;
  std::string command_;
};

class Toolbox {
 public:
  // Opens `workspace` (absolute) as the directory fd every path is resolved beneath, and makes
  // this process a child subreaper (prctl PR_SET_CHILD_SUBREAPER) so that processes a command
  // left behind come back to it and run_command can kill and reap them.
  static Result<Toolbox> Open(const std::string& workspace, ToolLimits limits,
                              PathFilter filter = {});

  // Tool names this toolbox implements, in the order of cagent::ToolboxSchemas(): read_file,
  // list_dir, glob, grep, write_file, edit_file, run_command. (`finish` belongs to the loop.) The
  // schemas themselves are in common/tool_schemas.h; the agent sends none (the broker offers the
  // provider those of the tools the policy enables).
  static const std::vector<std::string>& Names();

  // Validates and resolves; a refusal comes back as a failed ToolOutcome. A PreparedCall shares
  // the toolbox's state (root fd, ledger) and stays usable even if the Toolbox is destroyed first.
  // Prepare never changes the workspace (write_file creates missing directories in Execute).
  std::variant<std::unique_ptr<PreparedCall>, ToolOutcome> Prepare(std::string_view tool,
                                                                   const nlohmann::json& args);

  // Makes run_command cancellable (a served session): while a command runs, `fd` is polled, and
  // when it is readable `interrupted()` says whether to stop the command (see CommandSpec). The
  // outcome is then a failure with code "cancelled". fd -1 = none. Not owned.
  void SetInterrupt(int fd, std::function<bool()> interrupted);

  // The read-before-edit ledger (the loop invalidates entries when compaction drops a file's
  // contents from the context).
  Ledger& ledger();
  [[nodiscard]] const ToolLimits& limits() const;
  // The workspace path as given to Open (lexically normalised).
  [[nodiscard]] const std::string& workspace() const;

 private:
  Toolbox() = default;
  std::shared_ptr<internal::ToolEnv> env_;
};

}  // namespace cagent::agent
