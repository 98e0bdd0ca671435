#include "launcher/broker/tool_mapping.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "common/json_text.h"
#include "common/sha256.h"
#include "launcher/broker/audit_log.h"

namespace cagent::launcher::broker {
namespace {

// The order the agent's tool schema lists them in (and welcome.tools reports).
constexpr std::array<policy::Tool, 8> kSchemaOrder = {
    policy::Tool::kReadFile,   policy::Tool::kListDir,   policy::Tool::kGlob,
    policy::Tool::kGrep,       policy::Tool::kWriteFile, policy::Tool::kEditFile,
    policy::Tool::kRunCommand, policy::Tool::kFinish,
};

// The string value of args[key]; nullopt when absent, null, or not a string.
std::optional<std::string> StringArg(const nlohmann::json& args, const char* key) {
  if (!args.is_object()) return std::nullopt;
  auto it = args.find(key);
  if (it == args.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

bool HasArg(const nlohmann::json& args, const char* key) {
  if (!args.is_object()) return false;
  auto it = args.find(key);
  return it != args.end() && !it->is_null();
}

}  // namespace

std::optional<MappedTool> MapTool(const std::string& tool, const nlohmann::json& args) {
  const auto parsed = policy::ParseTool(tool);
  if (!parsed) return std::nullopt;
  MappedTool out;
  out.request = policy::Request::ToolCall(*parsed);
  policy::Request& req = out.request;
  switch (req.tool) {
    case policy::Tool::kReadFile:
    case policy::Tool::kWriteFile:
    case policy::Tool::kEditFile: {
      auto path = StringArg(args, "path");
      if (!path || path->empty()) {
        out.argument_error = tool + " needs a non-empty string \"path\" argument";
      } else {
        req.path = std::move(*path);
      }
      break;
    }
    case policy::Tool::kListDir:
    case policy::Tool::kGlob:
    case policy::Tool::kGrep: {
      auto path = StringArg(args, "path");
      if (HasArg(args, "path") && !path) {
        out.argument_error = tool + ": the \"path\" argument must be a string";
      }
      // A directory tool without a base directory searches the whole workspace.
      req.path = (path && !path->empty()) ? std::move(*path) : std::string(".");
      break;
    }
    case policy::Tool::kRunCommand: {
      auto command = StringArg(args, "command");
      if (!command || command->empty()) {
        out.argument_error = "run_command needs a non-empty string \"command\" argument";
      } else {
        req.script = std::move(*command);
      }
      break;
    }
    case policy::Tool::kFinish:
    case policy::Tool::kCount:
      break;
  }
  if (req.tool == policy::Tool::kRunCommand) {
    out.action = req.script;
  } else if (req.path.empty()) {
    out.action = tool;
  } else {
    out.action = tool + " " + req.path;
  }
  return out;
}

std::vector<std::string> ResolvedPaths(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  out.reserve(paths.size());
  for (const std::string& raw : paths) {
    const std::string_view path = raw;
    std::string norm = !path.empty() && path[0] == '/' ? "/" : "";
    bool climbs = false;
    std::size_t i = 0;
    while (i <= path.size() && !climbs) {
      std::size_t slash = path.find('/', i);
      if (slash == std::string_view::npos) slash = path.size();
      const std::string_view part = path.substr(i, slash - i);
      i = slash + 1;
      if (part.empty() || part == ".") continue;
      if (part == "..") climbs = true;
      if (!norm.empty() && norm.back() != '/') norm += '/';
      norm += part;
    }
    if (climbs) {
      out.push_back(raw);
      continue;
    }
    out.push_back(norm.empty() ? std::string(".") : std::move(norm));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string CallDigest(const std::string& tool, const nlohmann::json& args,
                       const std::vector<std::string>& resolved) {
  return CallDigestOfText(tool, JsonText(args), resolved);
}

std::string CallDigestOfText(std::string_view tool, std::string_view args_text,
                             const std::vector<std::string>& resolved) {
  // The canonical text of {"tool", "args"[, "paths"]} written directly: the keys in the order a
  // json object (a std::map) dumps them, "args" < "paths" < "tool", no whitespace, each string
  // escaped as JsonText escapes it, so the bytes are those CanonicalDigest of that object hashes.
  std::string text;
  text.reserve(args_text.size() + tool.size() + 32);
  text += "{\"args\":";
  text += args_text;
  if (!resolved.empty()) {
    text += ",\"paths\":[";
    for (std::size_t i = 0; i < resolved.size(); ++i) {
      if (i > 0) text += ',';
      AppendJsonString(text, resolved[i]);
    }
    text += ']';
  }
  text += ",\"tool\":";
  AppendJsonString(text, tool);
  text += '}';
  return Sha256Hex(text);
}

std::vector<std::string> EnabledTools(const policy::Policy& policy) {
  std::vector<std::string> out;
  for (policy::Tool t : kSchemaOrder) {
    bool granted = false;
    bool denied_everywhere = false;
    for (const policy::ToolRule& rule : policy.tools) {
      if (!std::binary_search(rule.tools.begin(), rule.tools.end(), t)) continue;
      if (rule.verdict == policy::Verdict::kDeny) {
        if (rule.paths.empty()) denied_everywhere = true;
      } else {
        granted = true;
      }
    }
    if (granted && !denied_everywhere) out.emplace_back(policy::ToolName(t));
  }
  return out;
}

}  // namespace cagent::launcher::broker
