#include "policy/language/request.h"

#include <utility>

namespace cagent::policy {

Request Request::Argv(std::vector<std::string> argv) {
  Request r;
  r.kind = Kind::kCommand;
  r.argv = std::move(argv);
  return r;
}

Request Request::Shell(std::string script) {
  Request r;
  r.kind = Kind::kShell;
  r.script = std::move(script);
  return r;
}

Request Request::Read(std::string path) {
  Request r;
  r.kind = Kind::kPath;
  r.access = Access::kRead;
  r.path = std::move(path);
  return r;
}

Request Request::Write(std::string path) {
  Request r = Read(std::move(path));
  r.access = Access::kWrite;
  return r;
}

Request Request::ToolCall(Tool tool, std::string subject) {
  Request r;
  r.kind = Kind::kTool;
  r.tool = tool;
  if (tool == Tool::kRunCommand) {
    r.script = std::move(subject);
  } else {
    r.path = std::move(subject);
  }
  return r;
}

Request Request::Host(std::string host, std::uint16_t port) {
  Request r;
  r.kind = Kind::kHost;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  r.host = std::move(host);
  r.port = port;
  return r;
}

Request Request::McpTool(std::string name) {
  Request r;
  r.kind = Kind::kMcpTool;
  r.mcp_tool = std::move(name);
  return r;
}

Request Request::Http(std::string host, std::uint16_t port, std::string method, std::string path) {
  Request r = Host(std::move(host), port);
  r.kind = Kind::kHttp;
  r.method = std::move(method);
  r.path = std::move(path);
  return r;
}

std::string_view KindName(const Request& request) {
  switch (request.kind) {
    case Request::Kind::kCommand:
      return "argv";
    case Request::Kind::kShell:
      return "command";
    case Request::Kind::kPath:
      return request.access == Access::kWrite ? "write" : "read";
    case Request::Kind::kTool:
      return "tool";
    case Request::Kind::kHost:
      return "host";
    case Request::Kind::kMcpTool:
      return "mcp-tool";
    case Request::Kind::kHttp:
      return "http";
  }
  return "command";
}

std::string Describe(const Request& request) {
  std::string out(KindName(request));
  switch (request.kind) {
    case Request::Kind::kCommand:
      for (const auto& a : request.argv) out += " " + QuoteWord(a);
      break;
    case Request::Kind::kShell:
      out += " " + QuoteString(request.script);
      break;
    case Request::Kind::kPath:
      out += " " + QuoteWord(request.path);
      break;
    case Request::Kind::kTool:
      out += " ";
      out += ToolName(request.tool);
      if (!request.ToolSubject().empty()) out += " " + QuoteString(request.ToolSubject());
      break;
    case Request::Kind::kHost:
    case Request::Kind::kHttp: {
      const bool v6 = request.host.find(':') != std::string::npos;
      out += " " + QuoteWord((v6 ? "[" + request.host + "]" : request.host) + ":" +
                             std::to_string(request.port));
      if (request.kind == Request::Kind::kHttp) {
        out += " " + QuoteWord(request.method) + " " + QuoteWord(request.path);
      }
      break;
    }
    case Request::Kind::kMcpTool:
      out += " " + QuoteWord(request.mcp_tool);
      break;
  }
  return out;
}

std::string_view RequestUsage() {
  return "write: command \"git status\" (a shell line) / argv git status (no shell) / read .env / "
         "write src/main.c / tool write_file Cargo.lock / tool run_command \"make test\" / host "
         "pypi.org:443 / mcp-tool get-sum / http github.com GET /org/repo.git/info/refs";
}

namespace {

std::string ToolList() {
  std::string s;
  for (int i = 0; i < static_cast<int>(Tool::kCount); ++i) {
    s += (s.empty() ? "" : ", ") + std::string(ToolName(static_cast<Tool>(i)));
  }
  return s;
}

// `command` with several words: the words joined by blanks, for the hint that shows how to write
// them (each QuoteWord-ed for an argv).
std::string AsOneLine(std::span<const std::string> words, bool quote_each) {
  std::string line;
  for (const auto& w : words) line += (line.empty() ? "" : " ") + (quote_each ? QuoteWord(w) : w);
  return line;
}

}  // namespace

Result<std::pair<std::string, std::uint16_t>> ParseHostPort(std::string_view text) {
  std::string_view host = text;
  std::string_view port;
  bool has_port = false;
  if (text.starts_with('[')) {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return PlainError("unterminated '[' in '" + std::string(text) + "'",
                        "IPv6 addresses are written [fd00::5]:443");
    }
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') {
        return PlainError("expected ':PORT' after ']' in '" + std::string(text) + "'",
                          "write [fd00::5]:443");
      }
      port = text.substr(close + 2);
      has_port = true;
    }
  } else if (const std::size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    if (text.find(':') != colon) {
      return PlainError("IPv6 addresses are written in brackets: '" + std::string(text) + "'",
                        "write [" + std::string(text) + "]:443");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    has_port = true;
  }
  if (host.empty()) {
    return PlainError("missing host in '" + std::string(text) + "'", "write pypi.org:443");
  }
  std::uint32_t value = 443;
  if (has_port) {
    bool ok = !port.empty() && port.size() <= 5;
    value = 0;
    for (const char c : port) {
      if (c < '0' || c > '9') ok = false;
      value = value * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (!ok || value == 0 || value > 65535) {
      return PlainError("invalid port '" + std::string(port) + "' in '" + std::string(text) + "'",
                        "ports are 1..65535; no port means 443");
    }
  }
  return std::make_pair(std::string(host), static_cast<std::uint16_t>(value));
}

std::variant<Request, RequestWordsError> ParseRequestWords(std::span<const std::string> words) {
  auto fail = [](std::size_t word, std::string message,
                 std::string hint = std::string(RequestUsage())) {
    return RequestWordsError{word, std::move(message), std::move(hint)};
  };
  if (words.empty()) return fail(0, "a request needs a kind");
  const std::string& kind = words[0];
  const std::size_t args = words.size() - 1;
  // `shell` is the former cases-file spelling of `command`; both read a shell line.
  if (kind == "command" || kind == "shell") {
    if (args == 0) return fail(0, "'" + kind + "' needs a shell command line");
    if (args > 1) {
      const std::string line = AsOneLine(words.subspan(1), false);
      return fail(2,
                  "'" + kind + "' takes one shell command line, quoted; found " +
                      std::to_string(args) + " words",
                  "write command " + QuoteString(line) + " for the shell line, or argv " +
                      AsOneLine(words.subspan(1), true) + " for the argv without a shell");
    }
    return Request::Shell(words[1]);
  }
  if (kind == "argv") {
    if (args == 0) return fail(0, "'argv' needs the command's words");
    return Request::Argv(std::vector<std::string>(words.begin() + 1, words.end()));
  }
  if (kind == "read" || kind == "write") {
    if (args != 1) return fail(args == 0 ? 0 : 2, "'" + kind + "' takes one path");
    return kind == "read" ? Request::Read(words[1]) : Request::Write(words[1]);
  }
  if (kind == "tool") {
    if (args == 0 || args > 2) {
      return fail(args == 0 ? 0 : 3,
                  "'tool' takes a tool name and optionally one path or quoted command line");
    }
    auto tool = ParseTool(words[1]);
    if (!tool) return fail(1, "unknown tool '" + words[1] + "'", "the tools are: " + ToolList());
    return Request::ToolCall(*tool, args == 2 ? words[2] : std::string());
  }
  if (kind == "host") {
    if (args != 1) {
      return fail(args == 0 ? 0 : 2, "'host' takes one HOST[:PORT]",
                  "write host pypi.org:443, host 10.0.0.5:8080 or host [fd00::5]:443");
    }
    auto hp = ParseHostPort(words[1]);
    if (!hp) return fail(1, hp.error().op, hp.error().detail);
    return Request::Host(std::move(hp->first), hp->second);
  }
  if (kind == "mcp-tool") {
    if (args != 1) {
      return fail(args == 0 ? 0 : 2, "'mcp-tool' takes one MCP tool name",
                  "write mcp-tool NAME, the name a wrapped server's tools/list gives (mcp-tool "
                  "get-sum)");
    }
    return Request::McpTool(words[1]);
  }
  if (kind == "http") {
    if (args != 3) {
      return fail(args < 3 ? 0 : 4, "'http' takes HOST[:PORT], a method and a path",
                  "write http github.com GET /org/repo.git/info/refs (the path without its "
                  "query; no port means 443)");
    }
    auto hp = ParseHostPort(words[1]);
    if (!hp) return fail(1, hp.error().op, hp.error().detail);
    if (words[2].empty()) return fail(2, "'http' needs a method", "write GET, POST, ...");
    if (words[3].empty()) return fail(3, "'http' needs a path", "write /, or the path requested");
    return Request::Http(std::move(hp->first), hp->second, words[2], words[3]);
  }
  return fail(0, "unknown request kind '" + kind + "'",
              "use command (a shell line), argv (no shell), read, write, tool, host, mcp-tool or "
              "http");
}

}  // namespace cagent::policy
