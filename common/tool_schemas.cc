#include "common/tool_schemas.h"

#include <algorithm>

namespace cagent {
namespace {

nlohmann::json Prop(const char* type, const char* description) {
  return {{"type", type}, {"description", description}};
}

nlohmann::json Tool(const char* name, const char* description, nlohmann::json properties,
                    std::vector<std::string> required) {
  return {{"name", name},
          {"description", description},
          {"parameters",
           {{"type", "object"},
            {"properties", std::move(properties)},
            {"required", std::move(required)},
            {"additionalProperties", false}}}};
}

}  // namespace

const nlohmann::json& ToolboxSchemas() {
  static const nlohmann::json schemas = [] {
    nlohmann::json offset = Prop("integer", "1-based line number to start at (default 1)");
    offset["minimum"] = 1;
    nlohmann::json limit = Prop("integer", "number of lines to return (default 2000)");
    limit["minimum"] = 1;
    nlohmann::json timeout =
        Prop("integer", "timeout in milliseconds (default and maximum: the run's command timeout)");
    timeout["minimum"] = 1;
    nlohmann::json all = nlohmann::json::array();
    all.push_back(Tool(
        "read_file",
        "Read a text file of the workspace. Lines come numbered (\"  12\\tcode\"); the number and "
        "tab are not part of the file. Large files are read in windows with offset and limit. "
        "Binary files are refused. A file must be read before edit_file can change it.",
        {{"path", Prop("string", "workspace-relative path of the file")},
         {"offset", offset},
         {"limit", limit}},
        {"path"}));
    all.push_back(Tool("list_dir",
                       "List a directory of the workspace: directories end in '/', symlinks are "
                       "shown as \"name -> target\".",
                       {{"path", Prop("string", "workspace-relative directory (default \".\")")}},
                       {}));
    all.push_back(Tool(
        "glob",
        "Find files by path pattern: '*' and '?' within one path component, '**' for any number "
        "of directories (\"src/**/*.py\"). Patterns are relative to path. .git/ is not searched; "
        "symlinks are listed but not followed.",
        {{"pattern", Prop("string", "glob pattern, e.g. **/*.c")},
         {"path", Prop("string", "directory to search from (default \".\")")}},
        {"pattern"}));
    all.push_back(Tool(
        "grep",
        "Search file contents with a regular expression (RE2 syntax: Perl-like, no back-references "
        "or look-around). "
        "Prints \"path:line: text\" for each matching line. Binary and very large files are "
        "skipped; .git/ is not searched.",
        {{"pattern", Prop("string", "regular expression")},
         {"path", Prop("string", "file or directory to search (default \".\")")},
         {"include",
          Prop("string",
               "only files matching this glob: without '/' it is matched against the file name "
               "(\"*.py\"), with '/' against the path relative to path (\"src/**/*.py\")")},
         {"ignore_case", Prop("boolean", "case-insensitive matching (default false)")}},
        {"pattern"}));
    all.push_back(Tool(
        "write_file",
        "Create a file, or replace the whole content of one (an existing file must have been read "
        "first). Missing parent directories are created. Prefer edit_file for changes to an "
        "existing file.",
        {{"path", Prop("string", "workspace-relative path of the file")},
         {"content", Prop("string", "the complete new content")}},
        {"path", "content"}));
    all.push_back(Tool(
        "edit_file",
        "Replace an exact piece of text in a file that was read before. old_string must match the "
        "file exactly (whitespace included, without read_file's line-number prefixes) and exactly "
        "once unless replace_all is true. Returns the unified diff.",
        {{"path", Prop("string", "workspace-relative path of the file")},
         {"old_string", Prop("string", "the exact text to replace")},
         {"new_string", Prop("string", "the replacement text")},
         {"replace_all", Prop("boolean", "replace every occurrence (default false)")}},
        {"path", "old_string", "new_string"}));
    all.push_back(Tool(
        "run_command",
        "Run a shell command (/bin/sh -c) in the workspace directory. stdin is empty; stdout and "
        "stderr are merged. The command runs in its own process group; on timeout, and whenever "
        "the shell exits, every process it left behind is killed (no background servers survive "
        "a call). Long output is cut in the middle.",
        {{"command", Prop("string", "the shell command line")}, {"timeout_ms", timeout}},
        {"command"}));
    return all;
  }();
  return schemas;
}

const nlohmann::json& FinishSchema() {
  static const nlohmann::json schema = nlohmann::json{
      {"name", "finish"},
      {"description",
       "End the task. Call this once the task is done (or cannot be done), with a short "
       "summary for the human: what you changed, how you checked it, anything left open."},
      {"parameters",
       {{"type", "object"},
        {"properties",
         {{"summary",
           {{"type", "string"}, {"description", "What was done and how it was checked."}}}}},
        {"required", nlohmann::json::array({"summary"})},
        {"additionalProperties", false}}}};
  return schema;
}

const nlohmann::json* FindToolSchema(std::string_view name) {
  for (const auto& tool : ToolboxSchemas()) {
    if (tool["name"].get_ref<const std::string&>() == name) return &tool;
  }
  if (name == "finish") return &FinishSchema();
  return nullptr;
}

nlohmann::json ToolSchemasFor(const std::vector<std::string>& enabled) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& tool : ToolboxSchemas()) {
    const auto& name = tool["name"].get_ref<const std::string&>();
    if (std::find(enabled.begin(), enabled.end(), name) != enabled.end()) out.push_back(tool);
  }
  out.push_back(FinishSchema());
  return out;
}

}  // namespace cagent
