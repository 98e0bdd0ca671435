// The tools' provider-neutral schemas: one list, used by both sides. The broker sends the schemas
// of the tools a policy enables to the model provider (the agent has no say in them); the agent
// checks the model's arguments against the same schemas before it runs a tool.
//
// A schema is {"name", "description", "parameters"}, where "parameters" is a JSON Schema object
// (type object, properties, required, additionalProperties false) that every provider accepts.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace cagent {

// The toolbox's tools in schema order: read_file, list_dir, glob, grep, write_file, edit_file,
// run_command (finish is separate: it is not a tool the agent runs).
const nlohmann::json& ToolboxSchemas();
// The `finish` tool: ends the task with a summary for the human.
const nlohmann::json& FinishSchema();
// The schema named `name` (a toolbox tool or finish), or null.
const nlohmann::json* FindToolSchema(std::string_view name);
// The schemas of `enabled` in schema order (unknown names ignored), then finish, which every run
// offers.
nlohmann::json ToolSchemasFor(const std::vector<std::string>& enabled);

}  // namespace cagent
