// Internals shared by the tool implementations (agent/file_tools.cc, search_tools.cc,
// command_tool.cc, toolbox.cc). Not part of the toolbox's public contract.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "agent/ledger.h"
#include "agent/toolbox.h"
#include "agent/workspace_fs.h"
#include "common/text.h"

namespace cagent::agent::internal {

// State a Toolbox shares with every call it prepared (so a PreparedCall never dangles).
struct ToolEnv {
  explicit ToolEnv(WorkspaceFs workspace_fs) : fs(std::move(workspace_fs)) {}
  WorkspaceFs fs;
  ToolLimits limits;
  PathFilter filter;
  Ledger ledger;
  bool subreaper = false;  // PR_SET_CHILD_SUBREAPER took effect
  int interrupt_fd = -1;   // Toolbox::SetInterrupt
  std::function<bool()> interrupted;
};

using EnvPtr = std::shared_ptr<ToolEnv>;
using Prepared = std::variant<std::unique_ptr<PreparedCall>, ToolOutcome>;

// One per tool; `args` already passed schema validation (types, required, no unknown keys; a null
// optional property was removed).
Prepared PrepareReadFile(const EnvPtr& env, const nlohmann::json& args);
Prepared PrepareWriteFile(const EnvPtr& env, const nlohmann::json& args);
Prepared PrepareEditFile(const EnvPtr& env, const nlohmann::json& args);
Prepared PrepareListDir(const EnvPtr& env, const nlohmann::json& args);
Prepared PrepareGlob(const EnvPtr& env, const nlohmann::json& args);
Prepared PrepareGrep(const EnvPtr& env, const nlohmann::json& args);
Prepared PrepareRunCommand(const EnvPtr& env, const nlohmann::json& args);

// An FsFailure as a tool result; guard refusals get a "<tool> refused: " prefix.
ToolOutcome FromFs(std::string_view tool, const FsFailure& failure);

// Applies the PathFilter to `path` (workspace-relative): a "denied" outcome naming the rule.
std::optional<ToolOutcome> CheckDenied(const ToolEnv& env, std::string_view tool,
                                       const std::string& path, PathAccess access);
// Same, for the resolved path and (when it differs) the lexical path the model gave.
std::optional<ToolOutcome> CheckDeniedBoth(const ToolEnv& env, std::string_view tool,
                                           const std::string& resolved,
                                           const std::string& relative_arg, PathAccess access);

// Utf8SequenceLength: common/text.h.
using ::cagent::Utf8SequenceLength;
// Invalid UTF-8 bytes replaced by U+FFFD (the text goes into JSON).
std::string SanitizeUtf8(std::string_view s);
// A file name for display: control characters escaped (\n, \t, \xNN), invalid UTF-8 replaced, so
// a hostile name cannot forge extra lines in a listing.
std::string DisplayName(std::string_view name);
// Binary heuristic over the first bytes of a file: a NUL byte, or more than 10% of the bytes in
// invalid UTF-8 sequences. `truncated`: the sample is a prefix (a sequence cut at its end is fine).
bool LooksBinary(std::string_view sample, bool truncated);
// "`path`" — how tool messages quote a path.
std::string Quoted(std::string_view path);
// Human size: "512 bytes", "3.4 KiB", "5.1 MiB".
std::string HumanBytes(std::uint64_t bytes);

}  // namespace cagent::agent::internal
