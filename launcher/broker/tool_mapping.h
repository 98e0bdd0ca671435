// Tool mapping: from a protocol tool_request (the model's tool name and arguments) to the policy
// engine's question about it. Runs in cagent (trusted), on the broker's thread; pure (no I/O).
//
// The arguments are the model's and therefore hostile: a missing or mistyped argument is reported
// (the broker denies the call, naming it), never guessed around.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "policy/ir.h"

namespace cagent::launcher::broker {

// What the engine is asked for one call.
struct MappedTool {
  policy::Tool tool = policy::Tool::kReadFile;
  std::string path;     // from args: "path" ("." when a directory tool gives none); "" for none
  std::string command;  // run_command's "command"
  // How the action is shown to a person and in the log: the exact command, or "TOOL PATH".
  std::string action;
  // CanonicalDigest of the arguments, for the audit log's `args` field (set by the broker).
  std::string args_digest;
  // Set when the arguments are unusable (e.g. "write_file needs a string \"path\" argument").
  std::string argument_error;
};

// Maps `tool` and its `args` (an object). nullopt when the tool name is not one of the closed set.
//   read_file, write_file, edit_file: "path" (required)
//   list_dir, glob, grep:             "path" as the base directory, "." when absent
//   run_command:                      "command" (required)
//   finish:                           nothing
std::optional<MappedTool> MapTool(const std::string& tool, const nlohmann::json& args);

// The tools `policy` enables, in schema order (read_file, list_dir, glob, grep, write_file,
// edit_file, run_command, finish): a tool is enabled when some tools rule allows or asks for it and
// no rule without a path restriction denies it.
std::vector<std::string> EnabledTools(const policy::Policy& policy);

}  // namespace cagent::launcher::broker
