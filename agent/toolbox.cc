#include "agent/toolbox.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "agent/tool_internal.h"
#include "common/json_text.h"
#include "common/tool_schemas.h"

namespace cagent::agent {

using internal::EnvPtr;
using internal::ToolEnv;

// ---------------------------------------------------------------------------------------------
// ToolOutcome

std::string ToolOutcome::Render() const {
  if (ok) {
    if (message.empty()) return output;
    if (output.empty()) return message;
    return message + "\n" + output;
  }
  std::string out = "error [" + code + "]: " + message;
  if (!hint.empty()) out += "\nhint: " + hint;
  if (!output.empty()) out += "\n" + output;
  return out;
}

ToolOutcome ToolOutcome::Fail(std::string code, std::string message, std::string hint) {
  ToolOutcome out;
  out.ok = false;
  out.code = std::move(code);
  out.message = std::move(message);
  out.hint = std::move(hint);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Argument validation (against the shared schemas of common/tool_schemas.h, the same the broker
// offers the provider)

namespace {

const char* JsonTypeName(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

// Checks `args` against the tool's schema; returns the arguments to use (null optional
// properties dropped: several providers send null for an omitted optional parameter).
std::variant<nlohmann::json, ToolOutcome> Validate(std::string_view tool,
                                                   const nlohmann::json& schema,
                                                   const nlohmann::json& args) {
  const std::string t(tool);
  const auto& params = schema["parameters"];
  const auto& props = params["properties"];
  std::string allowed;
  for (const auto& [key, _] : props.items()) allowed += (allowed.empty() ? "" : ", ") + key;
  if (allowed.empty()) allowed = "none";
  nlohmann::json out = nlohmann::json::object();
  if (args.is_null()) {
    // Treated as {}: the required check below still applies.
  } else if (!args.is_object()) {
    return ToolOutcome::Fail("bad_arguments",
                             t + ": arguments must be a JSON object, got " + JsonTypeName(args),
                             "pass an object with the properties: " + allowed);
  } else {
    for (const auto& [key, value] : args.items()) {
      if (!props.contains(key)) {
        return ToolOutcome::Fail("bad_arguments",
                                 t + ": unknown property `" + internal::DisplayName(key) + "`",
                                 "the properties of " + t + " are: " + allowed);
      }
      const auto& prop = props[key];
      const std::string& type = prop["type"].get_ref<const std::string&>();
      bool required = std::find(params["required"].begin(), params["required"].end(), key) !=
                      params["required"].end();
      if (value.is_null() && !required) continue;
      bool type_ok = (type == "string" && value.is_string()) ||
                     (type == "integer" && value.is_number_integer()) ||
                     (type == "boolean" && value.is_boolean());
      if (!type_ok) {
        return ToolOutcome::Fail(
            "bad_arguments",
            t + ": property `" + key + "` must be " + (type == "integer" ? "an " : "a ") + type +
                ", got " + JsonTypeName(value),
            std::string("`") + key + "`: " + prop["description"].get<std::string>());
      }
      if (type == "integer" && prop.contains("minimum")) {
        const auto min = prop["minimum"].get<std::int64_t>();
        const bool below = value.is_number_unsigned() ? false : value.get<std::int64_t>() < min;
        if (below) {
          return ToolOutcome::Fail(
              "bad_arguments",
              t + ": property `" + key + "` must be at least " + std::to_string(min) + ", got " +
                  JsonText(value),
              std::string("`") + key + "`: " + prop["description"].get<std::string>());
        }
      }
      out[key] = value;
    }
  }
  for (const auto& req : params["required"]) {
    const auto& key = req.get_ref<const std::string&>();
    if (!out.contains(key)) {
      return ToolOutcome::Fail("bad_arguments", t + ": missing required property `" + key + "`",
                               "`" + key + "`: " + props[key]["description"].get<std::string>());
    }
  }
  return out;
}

}  // namespace

const std::vector<std::string>& Toolbox::Names() {
  static const std::vector<std::string> names = {"read_file",  "list_dir",  "glob",       "grep",
                                                 "write_file", "edit_file", "run_command"};
  return names;
}

// ---------------------------------------------------------------------------------------------
// Toolbox

Result<Toolbox> Toolbox::Open(const std::string& workspace, ToolLimits limits, PathFilter filter) {
  auto fs = WorkspaceFs::Open(workspace);
  if (auto* f = std::get_if<FsFailure>(&fs)) {
    return Error{"open workspace " + workspace, f->err, f->message, ""};
  }
  auto env = std::make_shared<ToolEnv>(std::get<WorkspaceFs>(std::move(fs)));
  env->limits = limits;
  env->filter = std::move(filter);
  // Orphans of a command (a daemon that double-forked or called setsid) are re-parented to the
  // nearest subreaper instead of init, so run_command can find, kill and reap them. Without it
  // (prctl refused by some seccomp policy) only the command's process group is killed.
  env->subreaper = ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0;
  Toolbox box;
  box.env_ = std::move(env);
  return box;
}

void Toolbox::SetInterrupt(int fd, std::function<bool()> interrupted) {
  env_->interrupt_fd = fd;
  env_->interrupted = std::move(interrupted);
}

Ledger& Toolbox::ledger() { return env_->ledger; }
const ToolLimits& Toolbox::limits() const { return env_->limits; }
const std::string& Toolbox::workspace() const { return env_->fs.path(); }

std::variant<std::unique_ptr<PreparedCall>, ToolOutcome> Toolbox::Prepare(
    std::string_view tool, const nlohmann::json& args) {
  // Only the toolbox's own tools: FindToolSchema also knows `finish`, which is the loop's.
  const auto& names = Names();
  const nlohmann::json* schema =
      std::find(names.begin(), names.end(), tool) != names.end() ? FindToolSchema(tool) : nullptr;
  if (schema == nullptr) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    return ToolOutcome::Fail("unknown_tool",
                             "there is no tool named `" + internal::SanitizeUtf8(tool) + "`",
                             "available tools: " + list);
  }
  auto validated = Validate(tool, *schema, args);
  if (auto* fail = std::get_if<ToolOutcome>(&validated)) return std::move(*fail);
  const auto& a = std::get<nlohmann::json>(validated);
  if (tool == "read_file") return internal::PrepareReadFile(env_, a);
  if (tool == "list_dir") return internal::PrepareListDir(env_, a);
  if (tool == "glob") return internal::PrepareGlob(env_, a);
  if (tool == "grep") return internal::PrepareGrep(env_, a);
  if (tool == "write_file") return internal::PrepareWriteFile(env_, a);
  if (tool == "edit_file") return internal::PrepareEditFile(env_, a);
  return internal::PrepareRunCommand(env_, a);
}

// ---------------------------------------------------------------------------------------------
// Shared helpers

namespace internal {

ToolOutcome FromFs(std::string_view tool, const FsFailure& failure) {
  const bool guard = failure.code == "outside_workspace" || failure.code == "denied" ||
                     failure.code == "permission_denied" || failure.code == "bad_arguments";
  std::string message =
      guard ? std::string(tool) + " refused: " + failure.message : failure.message;
  return ToolOutcome::Fail(failure.code, std::move(message), failure.hint);
}

std::optional<ToolOutcome> CheckDenied(const ToolEnv& env, std::string_view tool,
                                       const std::string& path, PathAccess access) {
  if (!env.filter) return std::nullopt;
  auto denial = env.filter(path, access);
  if (!denial) return std::nullopt;
  std::string message =
      std::string(tool) + " refused: " + path + " is denied by rule `" + denial->rule + "`";
  if (!denial->reason.empty()) message += " (" + denial->reason + ")";
  return ToolOutcome::Fail("denied", std::move(message),
                           "this path is off limits by policy; do not try to reach it another "
                           "way, work without it or ask in your final answer");
}

std::optional<ToolOutcome> CheckDeniedBoth(const ToolEnv& env, std::string_view tool,
                                           const std::string& resolved,
                                           const std::string& relative_arg, PathAccess access) {
  if (auto d = CheckDenied(env, tool, resolved, access)) return d;
  std::string lexical = NormalizeLexically(relative_arg);
  if (lexical != resolved) return CheckDenied(env, tool, lexical, access);
  return std::nullopt;
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t len = Utf8SequenceLength(s, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string DisplayName(std::string_view name) {
  std::string out;
  for (unsigned char c : name) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return SanitizeUtf8(out);
}

bool LooksBinary(std::string_view sample, bool truncated) {
  if (sample.find('\0') != std::string_view::npos) return true;
  std::size_t invalid = 0;
  std::size_t i = 0;
  while (i < sample.size()) {
    std::size_t len = Utf8SequenceLength(sample, i);
    if (len == 0) {
      // A multi-byte sequence cut by the end of a truncated sample is not evidence.
      if (truncated && sample.size() - i < 4) break;
      ++invalid;
      ++i;
    } else {
      i += len;
    }
  }
  return invalid * 10 > sample.size();
}

std::string Quoted(std::string_view path) { return "`" + DisplayName(path) + "`"; }

std::string HumanBytes(std::uint64_t bytes) {
  char buf[64];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof(buf), "%llu bytes", static_cast<unsigned long long>(bytes));
  } else if (bytes < 1024ULL * 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  } else if (bytes < 1024ULL * 1024 * 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f GiB",
                  static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  }
  return buf;
}

}  // namespace internal
}  // namespace cagent::agent
