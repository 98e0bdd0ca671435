// `cagent policy`: list, check, show, explain, test, diff and audit profiles.
//
// Runs in cagent (the caller's process); reads profile files and nothing else, starts no sandbox.
// Profiles are found as the rest of cagent finds them: ./.cagent/, ~/.config/cagent/profiles/, the
// installed profile directory, then the built-in profiles (policy/language/loader.h).
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace cagent::launcher::cli {

struct PolicyOptions {
  bool json = false;
  bool names = false;                 // list: names only, for completion scripts
  std::vector<std::string> profiles;  // check
  std::string profile;                // show, explain, test, audit
  // explain: exactly one request.
  std::vector<std::string> command;  // -- CMD...
  std::string shell, read_path, write_path, tool, tool_path, host, mcp_tool;
  std::vector<std::string> http;  // explain --http HOST[:PORT] METHOD PATH (issue 36)
  std::string workspace;          // explain: what relative paths are relative to (default: the cwd)
  std::string cases;              // test
  std::string from, to;           // diff
  std::string format = "text";    // audit: text, json, sarif
  std::string fail_on = "high";   // audit: high, medium, low, info, never

  // The subcommands, to tell which one was parsed.
  CLI::App* list_cmd = nullptr;
  CLI::App* check_cmd = nullptr;
  CLI::App* show_cmd = nullptr;
  CLI::App* explain_cmd = nullptr;
  CLI::App* test_cmd = nullptr;
  CLI::App* diff_cmd = nullptr;
  CLI::App* audit_cmd = nullptr;
};

// Adds `policy` and its subcommands to `app`; the options are written into `options`, which must
// outlive parsing.
CLI::App* AddPolicyCommand(CLI::App& app, PolicyOptions& options);

// Runs the parsed `cagent policy` subcommand; returns its exit status (each subcommand's --help
// lists them; 2 is always a usage error or a profile that does not compile).
int RunPolicyCommand(const PolicyOptions& options);

}  // namespace cagent::launcher::cli
