// The one question the engine answers: a Request, and the one text that shows it.
//
// Every consumer of a profile asks through this type: the engine decides it
// (Engine::Decide(const Request&)), a profile's `examples` hold one each (checker.h, Example), a
// `policy test` cases file parses into them (cases.h), `policy explain` builds one from its flags
// and prints Describe(), and the broker's tool mapping fills one from a tool_request
// (launcher/broker/tool_mapping.h). Pure data; no I/O.
//
// Command strings mean one thing everywhere (docs/policy-language.md, "Requests"):
//   command "LINE"     a shell command line, as run_command passes it to /bin/sh -c; judged by
//                      the shell parser (every simple command and redirection must be allowed)
//   argv WORD...       an argv as executed, without a shell
//   read PATH | write PATH
//   tool TOOL [PATH | "LINE"]   a tool call; run_command's subject is a shell line
//   host HOST[:PORT]   a connection through the egress proxy (no port: 443); IPv6 in brackets
//   mcp-tool NAME      a tools/call of a server run by `cagent mcp wrap`, by its MCP tool name
//   http HOST[:PORT] METHOD PATH   one request on a connection cagent intercepts (a host a
//                      credential is bound to); PATH without its query
// ParseRequestWords() is the one reader of that grammar (used by the checker for `examples` and by
// the cases parser), and Describe() writes it back, so a request's text re-reads as the same
// request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/result.h"
#include "policy/language/ir.h"

namespace cagent::policy {

struct Request {
  enum class Kind : std::uint8_t {
    kCommand,  // `argv`: argv as executed, no shell
    kShell,    // `command`: a shell command line
    kPath,     // `read` / `write`: a path access
    kTool,     // `tool`: a tool call
    kHost,     // `host`: a connection to host:port through the egress proxy
    kMcpTool,  // `mcp-tool`: a tools/call of a wrapped MCP server, by tool name
    kHttp,     // `http`: one request on an intercepted connection (issue 36)
  };
  Kind kind = Kind::kShell;
  Access access = Access::kRead;  // kPath: kRead or kWrite
  Tool tool = Tool::kReadFile;    // kTool
  std::vector<std::string> argv;  // kCommand
  std::string script;             // kShell; kTool with run_command: the command line
  std::string path;  // kPath: absolute, "~/..." or workspace-relative; kTool: the tool's path
                     // ("" for none), judged relative to the workspace; kHttp: the request
                     // target's path without its query
  std::string host;  // kHost, kHttp: as given (the engine normalises it); IPv6 without brackets
  std::uint16_t port = 0;  // kHost, kHttp
  std::string method;      // kHttp: as the request sends it ("GET")
  std::string mcp_tool;    // kMcpTool: the MCP tool's name as the call gives it (not validated)

  // The constructors of each kind.
  static Request Argv(std::vector<std::string> argv);
  static Request Shell(std::string script);
  static Request Read(std::string path);
  static Request Write(std::string path);
  // `subject` is run_command's command line, or the path of any other tool ("" for none).
  static Request ToolCall(Tool tool, std::string subject = {});
  // A connection to `host` (a name or an IP literal; an IPv6 literal with or without brackets,
  // stored without) on `port`.
  static Request Host(std::string host, std::uint16_t port);
  // A tools/call of the MCP tool `name` on a server run by `cagent mcp wrap`. Judged only by the
  // tools section's mcp: words (Engine::McpTool); a name that is not a valid MCP tool name
  // (IsMcpToolName, ir.h) is denied.
  static Request McpTool(std::string name);
  // One request on an intercepted connection to `host` (as for Host) on `port`: its method and its
  // path without the query. Judged by Engine::Http.
  static Request Http(std::string host, std::uint16_t port, std::string method, std::string path);

  // run_command's command line or another tool's path: what follows the tool name in Describe().
  [[nodiscard]] const std::string& ToolSubject() const {
    return tool == Tool::kRunCommand ? script : path;
  }

  friend bool operator==(const Request&, const Request&) = default;
};

// The request kind as a word of the grammar: "argv", "command", "read", "write", "tool", "host",
// "mcp-tool" or "http".
[[nodiscard]] std::string_view KindName(const Request& request);

// The request in the grammar above: `argv git status`, `command "make test | tee log"`,
// `read .env`, `tool write_file "Cargo.lock"`, `host pypi.org:443`, `host [::1]:443`,
// `mcp-tool get-sum`, `http github.com:443 GET /org/repo.git/info/refs`. Command lines
// and tool subjects are always double-quoted, other words only when they must be (QuoteWord); \"
// \\ \n \t are escaped.
[[nodiscard]] std::string Describe(const Request& request);

// Why a request's words do not form a request: the index of the word at fault (into the span
// given to ParseRequestWords, so the caller can point at it), the message and a hint.
struct RequestWordsError {
  std::size_t word = 0;
  std::string message;
  std::string hint;
};

// Reads one request from its words, already unquoted: words[0] is the kind (`argv`, `command`,
// `read`, `write`, `tool`, `host`, `mcp-tool`, `http`; `shell` is read as `command`) and the rest
// its arguments. `mcp-tool` takes one word, any text (the engine denies one that is not a valid
// MCP tool name, so a cases file can show that it does). `http` takes HOST[:PORT] (no port: 443),
// a method and a path, neither checked beyond being non-empty (the engine denies a method that is
// no token). Used by the checker (examples) and the cases parser, so the two cannot disagree.
// `command` takes exactly one word (the quoted line); more words are refused with a hint to quote
// the line or write `argv` — the form a `policy test` file used for argv before there was `argv`.
[[nodiscard]] std::variant<Request, RequestWordsError> ParseRequestWords(
    std::span<const std::string> words);

// Splits HOST[:PORT] as a request writes it (`pypi.org:443`, `10.0.0.5`, `[::1]:8080`) into the
// host (IPv6 without brackets; not validated as a name: the engine denies a malformed one) and the
// port (443 when none is given). Fails on an empty host, a bad or zero port, an unbracketed IPv6
// literal. Shared by `host` requests and `cagent policy explain --host`.
[[nodiscard]] Result<std::pair<std::string, std::uint16_t>> ParseHostPort(std::string_view text);

// How to write each kind, for hints: `argv git status / command "make test | tee log" / ...`.
[[nodiscard]] std::string_view RequestUsage();

}  // namespace cagent::policy
