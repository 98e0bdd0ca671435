// Tool mapping: from a protocol tool_request (the model's tool name and arguments) to the policy
// engine's question about it. Runs in cagent (trusted), on the broker's thread; pure (no I/O).
//
// The arguments are the model's and therefore hostile: a missing or mistyped argument is reported
// (the broker denies the call, naming it), never guessed around.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/language/ir.h"
#include "policy/language/request.h"

namespace cagent::launcher::broker {

// What the engine is asked for one call.
struct MappedTool {
  // The engine's question (policy/language/request.h), of kind kTool: request.tool, request.path
  // from args "path" ("." when a directory tool gives none; "" for none), request.script from
  // run_command's "command". Decided with Engine::Decide(request, resolved paths).
  policy::Request request = policy::Request::ToolCall(policy::Tool::kReadFile);
  // How the action is shown to a person and in the log: the exact command, or "TOOL PATH".
  std::string action;
  // CanonicalDigest of the arguments, for the audit log's `args` field (set by the broker).
  std::string args_digest;
  // The paths the agent resolved the call's path to (tool_request `paths`, symlinks followed),
  // as ResolvedPaths() gives them (set by the broker); empty when the agent sent none.
  std::vector<std::string> resolved_paths;
  // Set when the arguments are unusable (e.g. "write_file needs a string \"path\" argument").
  std::string argument_error;
};

// Maps `tool` and its `args` (an object). nullopt when the tool name is not one of the closed set.
//   read_file, write_file, edit_file: "path" (required)
//   list_dir, glob, grep:             "path" as the base directory, "." when absent
//   run_command:                      "command" (required)
//   finish:                           nothing
std::optional<MappedTool> MapTool(const std::string& tool, const nlohmann::json& args);

// `paths` (a tool_request's resolved paths, hostile) lexically normalised ("./a//b" -> "a/b", ""
// -> "."; a path with ".." is kept as it came, so it never looks like another path), sorted and
// without duplicates: the order or spelling the agent chose does not make the same resolution
// look different.
std::vector<std::string> ResolvedPaths(const std::vector<std::string>& paths);

// The identity of a call, binding approvals and keyed on by loop detection: CanonicalDigest of
// {"tool", "args"} when the agent resolved no paths (the digest before issue #13, so a
// "sha256:DIGEST" pre-approval of a command stays valid), else of {"tool", "args", "paths"} with
// `resolved` from ResolvedPaths(). Two calls with the same arguments whose paths resolve to
// different files are different actions.
std::string CallDigest(const std::string& tool, const nlohmann::json& args,
                       const std::vector<std::string>& resolved);
// The same digest from the arguments' canonical JSON text (JsonText(args), which the caller has
// already made for their own digest), without copying the arguments into a new json value.
std::string CallDigestOfText(std::string_view tool, std::string_view args_text,
                             const std::vector<std::string>& resolved);

// The tools `policy` enables, in schema order (read_file, list_dir, glob, grep, write_file,
// edit_file, run_command, finish): a tool is enabled when some tools rule allows or asks for it and
// no rule without a path restriction denies it.
std::vector<std::string> EnabledTools(const policy::Policy& policy);

}  // namespace cagent::launcher::broker
