#include "launcher/cli/mcp_command.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iostream>

#include "common/duration.h"
#include "common/exit_codes.h"
#include "common/terminal_text.h"
#include "common/unique_fd.h"
#include "launcher/egress/proxy.h"
#include "launcher/mcp/serve/serve.h"
#include "launcher/mcp/serve/wrap.h"
#include "launcher/profile/choice.h"
#include "launcher/profile/repo_profiles.h"
#include "launcher/profile/spec.h"
#include "launcher/profile/workspace_guard.h"
#include "launcher/sandbox/launch_spec.h"
#include "policy/language/diagnostics.h"
#include "policy/language/loader.h"

namespace cagent::launcher::cli {
namespace {

int Usage(const std::string& message) {
  spdlog::error("{}", message);
  return ToInt(ExitCode::kUsage);
}

// What every mcp subcommand needs: the profile, the workspace binding, the approval mode and the
// budget overrides.
struct Common {
  std::shared_ptr<const policy::Policy> policy;
  policy::Binding binding;
  broker::ApprovalMode approval = broker::ApprovalMode::kPolicy;
  broker::Budgets budgets;
  std::vector<egress::ResolveOverride> resolve;
  UniqueFd tty;
};

Result<Common> LoadCommon(const McpOptions& o) {
  Common c;
  std::string dir = o.workspace;
  if (dir.empty()) {
    std::error_code ec;
    dir = std::filesystem::current_path(ec).string();
    if (ec) return PlainError("the current directory", ec.message());
  }
  auto workspace = CanonicalDirectory(dir);
  if (!workspace) {
    return PlainError("--workspace " + dir, workspace.error().Message())
        .WithCode(Error::Code::kInvalidInput);
  }
  const std::string home = CallerHome();
  WorkspaceChoice named;
  named.named = !o.workspace.empty();
  named.allow_home = o.allow_home;
  if (auto s = CheckWorkspace(*workspace, named); !s) return s.error();
  c.binding = RunBinding(*workspace);

  const auto search = ProfileSearchPath(home, CAGENT_PROFILE_DIR, *workspace);
  auto choice = ChooseProfile(o.profile, search, o.trust_repo_profile);
  if (!choice) return std::move(choice.error()).WithCode(Error::Code::kInvalidInput);
  auto compiled = policy::LoadProfile(choice->path, search);
  if (!compiled.policy) {
    std::cerr << policy::RenderAll(*compiled.sources, compiled.diags);
    return PlainError("profile " + o.profile, "does not compile (see above)")
        .WithCode(Error::Code::kInvalidInput);
  }
  c.policy = compiled.policy;

  if (o.approve == "never") {
    c.approval = broker::ApprovalMode::kNever;
  } else if (o.approve == "stop") {
    c.approval = broker::ApprovalMode::kStop;
  } else {
    c.approval = broker::ApprovalMode::kPolicy;
    // The client owns stdin and stdout; the prompts go to cagent's own terminal, when it has one.
    c.tty.Reset(::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY));
  }
  c.budgets.tool_calls = o.max_tool_calls;
  c.budgets.output_bytes = o.max_output;
  if (!o.wall_time.empty()) {
    auto d = ParseDuration(o.wall_time);
    if (!d) {
      return PlainError("--wall-time " + o.wall_time, d.error().Message())
          .WithCode(Error::Code::kInvalidInput);
    }
    c.budgets.wall_time = *d;
  }
  for (const std::string& v : o.resolve) {
    auto r = egress::ParseResolveOverride(v);
    if (!r) {
      return PlainError("--resolve " + v, r.error().Message()).WithCode(Error::Code::kInvalidInput);
    }
    c.resolve.push_back(std::move(*r));
  }
  return c;
}

// The bearer token of an HTTP server: from the file when it exists (its first line), else made
// (256 random bits, hex) and written to it with mode 0600; without a file, $CAGENT_MCP_TOKEN, else
// made and printed once on stderr.
Result<std::string> BearerToken(const std::string& file, bool* printed) {
  auto make = []() -> Result<std::string> {
    std::array<unsigned char, 32> bytes{};
    if (::getrandom(bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
      return ErrnoError("getrandom");
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char b : bytes) {
      out.push_back(kHex[b >> 4]);
      out.push_back(kHex[b & 15]);
    }
    return out;
  };
  if (file.empty()) {
    if (const char* env = std::getenv("CAGENT_MCP_TOKEN"); env != nullptr && *env != '\0') {
      if (std::strlen(env) < 16) {
        return PlainError("CAGENT_MCP_TOKEN", "is shorter than 16 characters");
      }
      return std::string(env);
    }
    *printed = true;
    return make();
  }
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.valid()) {
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return ErrnoError("stat " + file);
    if ((st.st_mode & 077) != 0) {
      return PlainError("--token-file " + file, "is readable or writable by others (mode " +
                                                    std::to_string(st.st_mode & 0777) +
                                                    "); chmod 600 it");
    }
    std::string text(4096, '\0');
    const ssize_t n = ::read(fd.get(), text.data(), text.size());
    if (n < 0) return ErrnoError("read " + file);
    text.resize(static_cast<std::size_t>(n));
    text = text.substr(0, text.find_first_of("\r\n"));
    if (text.size() < 16) {
      return PlainError("--token-file " + file, "holds a token shorter than 16 characters");
    }
    return text;
  }
  if (errno != ENOENT) return ErrnoError("open " + file);
  auto token = make();
  if (!token) return token;
  UniqueFd out(::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out.valid()) return ErrnoError("create " + file);
  const std::string line = *token + "\n";
  if (::write(out.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    return ErrnoError("write " + file);
  }
  return token;
}

int RunServe(const McpOptions& o) {
  auto common = LoadCommon(o);
  if (!common) return Usage(common.error().Message());
  mcp::McpServeOptions s;
  s.policy = common->policy;
  s.binding = common->binding;
  s.approval = common->approval;
  s.tty_fd = common->tty.get();
  s.pre_approvals = o.pre_approve;
  s.pre_approval_file = o.pre_approve_file;
  s.budget_overrides = common->budgets;
  s.resolve = common->resolve;
  s.server_version = CAGENT_VERSION;
  s.max_sessions = o.max_sessions;
  const bool quiet = o.quiet;
  s.notice = [quiet](const std::string& line) {
    if (!quiet) std::cerr << TerminalSafe(line) << "\n";
  };
  if (!o.listen.empty()) {
    const auto colon = o.listen.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return Usage("--listen " + o.listen + ": expected ADDRESS:PORT, e.g. 127.0.0.1:8931");
    }
    s.listen_address = o.listen.substr(0, colon);
    if (s.listen_address.size() > 2 && s.listen_address.front() == '[') {
      s.listen_address = s.listen_address.substr(1, s.listen_address.size() - 2);
    }
    const std::string port = o.listen.substr(colon + 1);
    std::uint32_t p = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p == 0 ||
        p > 65535) {
      return Usage("--listen " + o.listen + ": the port must be 1 to 65535");
    }
    s.listen_port = static_cast<std::uint16_t>(p);
    bool printed = false;
    auto token = BearerToken(o.token_file, &printed);
    if (!token) return Usage(token.error().Message());
    s.bearer_token = *token;
    if (printed) {
      std::cerr << "cagent: bearer token (pass it as 'Authorization: Bearer TOKEN'; use "
                   "--token-file to keep one): "
                << *token << "\n";
    }
  } else if (!o.token_file.empty()) {
    return Usage("--token-file is for --listen (an HTTP server); stdio needs no token");
  }
  if (!quiet) {
    std::cerr << "cagent: serving the tools of profile " << TerminalSafe(s.policy->name) << " over "
              << (o.listen.empty() ? "stdio" : "HTTP") << ", workspace "
              << TerminalSafe(s.binding.workspace) << "\n";
  }
  auto result = mcp::RunMcpServe(s);
  if (!result) {
    spdlog::error("{}", result.error().Message());
    return ToInt(ExitCodeFor(result.error(), ExitCode::kSetupFailed));
  }
  int code = ToInt(ExitCode::kOk);
  for (const mcp::McpSessionSummary& session : result->sessions) {
    if (session.broker.status != broker::BrokerOutcome::Status::kFinished) {
      code = ToInt(broker::BrokerExitCode(session.broker.status));
    }
  }
  return code;
}

int RunWrap(const McpOptions& o) {
  if (o.command.empty()) return Usage("cagent mcp wrap: give the server's command after --");
  auto common = LoadCommon(o);
  if (!common) return Usage(common.error().Message());
  mcp::McpWrapOptions w;
  w.policy = common->policy;
  w.binding = common->binding;
  w.argv = o.command;
  w.approval = common->approval;
  w.tty_fd = common->tty.get();
  w.pre_approvals = o.pre_approve;
  w.pre_approval_file = o.pre_approve_file;
  w.budget_overrides = common->budgets;
  w.resolve = common->resolve;
  const bool quiet = o.quiet;
  w.on_started = [quiet](const std::string& log) {
    if (!quiet) std::cerr << "cagent: MCP wrap session (audit log: " << TerminalSafe(log) << ")\n";
  };
  auto result = mcp::RunMcpWrap(w);
  if (!result) {
    spdlog::error("{}", result.error().Message());
    return ToInt(ExitCodeFor(result.error(), ExitCode::kSetupFailed));
  }
  if (!quiet) {
    std::cerr << "cagent: the session ended (" << TerminalSafe(result->end_reason)
              << "): " << result->calls_allowed << " calls allowed, " << result->calls_denied
              << " denied; the server " << TerminalSafe(DescribeOutcome(result->sandbox)) << "\n";
    if (result->relay.methods_refused != 0 || result->relay.notifications_dropped != 0) {
      // Gated by method, not by id (issue #33): what never reached the server, said once.
      std::cerr << "cagent: not forwarded to the server: " << result->relay.methods_refused
                << " messages of methods cagent does not relay, "
                << result->relay.notifications_dropped
                << " messages without an id (denied id-less tools/call included)\n";
    }
  }
  if (!result->needs_approval.empty()) {
    spdlog::info("needs approval: {}", TerminalSafe(result->needs_approval));
    return ToInt(ExitCode::kNeedsApproval);
  }
  if (!result->budget_exhausted.empty()) {
    spdlog::error("{}", TerminalSafe(result->budget_exhausted));
    return ToInt(ExitCode::kRunFailed);
  }
  if (result->sandbox.kind == SandboxOutcome::Kind::kSetupFailed) {
    return ToInt(ExitCode::kSetupFailed);
  }
  return ToInt(ExitCode::kOk);
}

}  // namespace

CLI::App* AddMcpCommand(CLI::App& app, McpOptions& o) {
  CLI::App* mcp = app.add_subcommand(
      "mcp",
      "cagent and the Model Context Protocol: serve the sandboxed toolbox to an MCP client "
      "(serve), or run any stdio MCP server inside the sandbox (wrap).");
  mcp->require_subcommand(1);

  auto common = [&o](CLI::App* cmd) {
    cmd->add_option("--profile", o.profile,
                    "Profile (name or .cagent file); see 'cagent policy list'.")
        ->required();
    cmd->add_flag("--trust-repo-profile", o.trust_repo_profile, kTrustRepoProfileHelp);
    cmd->add_option("-w,--workspace", o.workspace,
                    "The directory the tools work in, read-write (default: the current "
                    "directory). Refused: a system directory (/usr, /etc, /tmp, ...), and your "
                    "home directory or one that contains it unless named here with "
                    "--allow-home.");
    cmd->add_flag("--allow-home", o.allow_home, kAllowHomeHelp);
    cmd->add_option("--approve", o.approve,
                    "What an 'ask' rule does when the client cannot be asked (it did not declare "
                    "MCP elicitation): terminal: a prompt on cagent's own terminal (/dev/tty; "
                    "none: denied); never: denied; stop: denied, and the session ends "
                    "needs-approval, naming the --pre-approve value that allows the action. The "
                    "profile's approval setting applies first (never-ask denies without asking).")
        ->check(CLI::IsMember({"terminal", "policy", "never", "stop"}));
    cmd->add_option("--pre-approve", o.pre_approve,
                    "Approve beforehand: 'TOOL: PATTERN' or 'sha256:DIGEST' (repeatable).");
    cmd->add_option("--pre-approve-file", o.pre_approve_file,
                    "A file of pre-approvals, one per line.");
    cmd->add_option("--max-tool-calls", o.max_tool_calls,
                    "Lower the tool-call budget (per session).");
    cmd->add_option("--max-output", o.max_output,
                    "Lower the tool-output budget in bytes (per session).");
    cmd->add_option("--wall-time", o.wall_time, "Lower the wall-time budget (e.g. 2h).");
    cmd->add_option("--resolve", o.resolve,
                    "HOST:PORT:ADDR for the egress proxy (a profile with a hosts section), as "
                    "curl's --resolve.");
    cmd->add_flag("-q,--quiet", o.quiet, "Print nothing on stderr but errors.");
  };

  o.serve = mcp->add_subcommand(
      "serve",
      "Serve the agent toolbox the profile enables (read_file, list_dir, glob, grep, write_file, "
      "edit_file, run_command) as MCP tools, over stdio (default) or Streamable HTTP on "
      "loopback (--listen). Each MCP session gets its own sandbox, kept warm for the session, and "
      "a broker that decides every call as in 'cagent run': the profile's rules, approvals "
      "(MCP elicitation when the client supports it), budgets, loop detection, redaction and "
      "the hash-chained audit log, in $XDG_STATE_HOME/cagent/mcp/SESSION/ ('cagent log DIR').");
  common(o.serve);
  o.serve->add_option("--listen", o.listen,
                      "Serve Streamable HTTP at http://ADDRESS:PORT/mcp instead of stdio; "
                      "loopback addresses only (127.0.0.1:8931, [::1]:8931). Every request "
                      "needs 'Authorization: Bearer TOKEN'.");
  o.serve->add_option("--token-file", o.token_file,
                      "HTTP: the bearer token's file (its first line); made with a new random "
                      "token (mode 0600) when it does not exist. Default: $CAGENT_MCP_TOKEN, "
                      "else a new token printed on stderr.");
  o.serve->add_option("--max-sessions", o.max_sessions,
                      "HTTP: sessions (each a sandbox) at once (default 4).");
  o.serve->footer(
      "Exit status: 0 the client ended the session; 3 a session failed (a budget, the sandbox); "
      "4 stopped for an approval (--approve stop); 130 cancelled (Ctrl-C); 2 usage; 125 could "
      "not start.\n\nClaude Code: claude mcp add cagent -- cagent mcp serve --profile backend "
      "--workspace \"$PWD\"   (docs/mcp.md has Codex, Cursor and VS Code).");

  o.wrap = mcp->add_subcommand(
      "wrap",
      "Run the stdio MCP server COMMAND inside the sandbox made from the profile (its view, "
      "network and hosts rules) and relay JSON-RPC between the client on cagent's stdin and "
      "stdout and it. Each tools/call is decided by the profile's 'mcp:' tool rules by tool name "
      "(allow|ask|deny mcp:GLOB): a denied call is answered by cagent and never reaches the "
      "server, and tools/list leaves out the tools the profile denies. Malformed or oversized "
      "messages from either side are refused without ending the session. Every call is in the "
      "session's audit log under $XDG_STATE_HOME/cagent/mcp/.");
  common(o.wrap);
  o.wrap->add_option("command", o.command, "The server's command line (after --).")->required();
  o.wrap->footer(
      "Exit status: 0 the session ended (the client or the server closed); 3 the tool-call "
      "budget ran out; 4 stopped for an approval (--approve stop); 2 usage; 125 the sandbox "
      "could not be built.\n\nExample: cagent mcp wrap --profile mcp-server -- npx "
      "@modelcontextprotocol/server-everything stdio");
  return mcp;
}

int RunMcpCommand(const McpOptions& o) {
  if (o.serve != nullptr && o.serve->parsed()) return RunServe(o);
  if (o.wrap != nullptr && o.wrap->parsed()) return RunWrap(o);
  return Usage("cagent mcp: choose serve or wrap (see cagent mcp --help)");
}

}  // namespace cagent::launcher::cli
