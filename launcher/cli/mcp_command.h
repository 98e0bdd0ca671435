// cagent mcp serve | wrap: cagent as an MCP server of sandboxed, policy-checked tools, and a
// sandbox for any stdio MCP server. Flags, loading the profile, and the operator's messages; the
// work is launcher/mcp/serve/serve.h and launcher/mcp/serve/wrap.h. Runs in cagent (trusted).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace cagent::launcher::cli {

struct McpOptions {
  // shared
  std::string profile;
  bool trust_repo_profile = false;
  std::string workspace;    // default: the current directory (launcher/profile/workspace_guard.h)
  bool allow_home = false;  // --allow-home: accept a named home directory
  std::string approve = "terminal";  // terminal | never | stop
  std::vector<std::string> pre_approve;
  std::string pre_approve_file;
  std::optional<std::uint64_t> max_tool_calls;
  std::optional<std::uint64_t> max_output;
  std::string wall_time;
  std::vector<std::string> resolve;
  bool quiet = false;
  // serve
  std::string listen;      // ADDR:PORT (loopback) for Streamable HTTP; "" = stdio
  std::string token_file;  // HTTP: the bearer token (read, or made 0600 when absent)
  std::size_t max_sessions = 4;
  // wrap
  std::vector<std::string> command;

  CLI::App* serve = nullptr;
  CLI::App* wrap = nullptr;
};

CLI::App* AddMcpCommand(CLI::App& app, McpOptions& options);
int RunMcpCommand(const McpOptions& options);

}  // namespace cagent::launcher::cli
