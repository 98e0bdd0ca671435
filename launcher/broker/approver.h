// Approvals: what happens when the policy says `ask`. Runs in cagent (trusted, outside the
// sandbox), on the broker's io_context thread.
//
// An approval binds to the digest of the exact action (tool + canonical arguments + the paths the
// agent resolved them to, tool_mapping.h CallDigest): a different action, or the same arguments
// resolving to different files (a.py turned into a symlink to .env), is a different approval. The
// operator can approve once, for the rest of the run (the exact action, or a narrower pattern shown
// verbatim), or deny. Headless (no terminal, or `--approve never`) denies what would ask unless
// pre-approved on the command line or in a file.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace cagent::launcher::broker {

struct ApprovalRequest {
  std::string tool;    // "run_command"
  std::string action;  // exactly what would run / be touched: "npm install left-pad"
  // The paths the call really touches (symlinks followed, as the agent resolved them beneath the
  // workspace; tool_mapping.h ResolvedPaths); empty for a command or when none were sent. Shown
  // in the prompt and required to match a path pattern, as the action's path is.
  std::vector<std::string> resolved_paths;
  std::string digest;    // CallDigest of {tool, args, resolved paths}
  std::string rule;      // the rule that asked ("ask npm install *")
  std::string location;  // "backend.cagent:31:5"
  std::string reason;
  // A pattern narrower than the rule that the operator may approve for the run instead of the
  // exact action (e.g. "npm install left-pad*"); empty when none is offered. Matched as an
  // argv/word glob for commands and a path glob for paths.
  std::string narrower_pattern;
  // The call this approval is for (the model's or, in a served session, the client's call id);
  // "" when it is not a tool call (a host). Lets an approver ask on that call's own channel (MCP
  // elicitation).
  std::string call_id;
};

enum class ApprovalScope { kOnce, kRunExact, kRunPattern, kDenied, kHeadless, kPreApproved };
std::string_view ApprovalScopeName(ApprovalScope scope);  // "once", "run", "pattern", ...

struct ApprovalOutcome {
  bool approved = false;
  ApprovalScope scope = ApprovalScope::kDenied;
  std::string by;  // "terminal", "pre-approval <source>", "headless"
};

// Asks a human (or refuses to). Call `done` exactly once, on the io_context's thread.
class Approver {
 public:
  virtual ~Approver() = default;
  virtual void Ask(const ApprovalRequest& request, std::function<void(ApprovalOutcome)> done) = 0;
  virtual void Cancel() = 0;  // run ending: pending asks complete as denied
};

// What a person is shown about one request, on every channel that asks one (the terminal prompt,
// an MCP client's elicitation form in `cagent mcp serve`): the tool, the exact action, the paths it
// resolves to (marked when they differ from the path it names), the rule and its location, and the
// reason, one field per line ("  tool:    run_command\n", "  action:  ...\n", ...). Every field
// that came from the agent, a client or the profile goes through TerminalSafe
// (common/terminal_text.h) on one line: newlines, control characters, ESC, C1, bidirectional
// overrides and invisible code points are shown as escapes, so an action cannot forge a "rule:"
// line, redraw a screen or read differently from what it is. The one rendering every approver
// uses, so the channels cannot drift apart. Pure.
std::string ApprovalDetails(const ApprovalRequest& request);

// Why a session stopped at `request` (--approve stop, nobody asked): "TOOL ACTION needs approval
// (rule RULE at LOCATION)", every field through TerminalSafe on one line and the action cut to
// 200 bytes, as ApprovalDetails shows them, so the reason a person reads (the terminal's last
// line, an MCP client's notice, session.json) cannot forge a line or read differently from what
// the action is. Pure.
std::string NeedsApprovalReason(const ApprovalRequest& request);

// The terminal approver's whole prompt for `request` with `waiting` more queued after it: a
// header line, ApprovalDetails(request), the queue, the choices and "> ". Pure; exposed for tests.
std::string TerminalPrompt(const ApprovalRequest& request, std::size_t waiting);

// Prompts on a terminal fd (cagent's /dev/tty, outside the sandbox): shows the tool, the exact
// action, the paths it resolves to (marked when they differ from the path it names), the rule and
// its location, the reason, and reads one of o(nce) / r(un: this exact action) / p(attern, when
// offered) / d(eny) per line, case-insensitive, with y / yes meaning once and n / no deny; anything
// else re-prompts, end of input or a hung-up terminal denies.
// Asks one at a time, queueing the rest; the first prompt is drawn from the io_context (never
// inside Ask), and `done` always runs from it. Everything shown that came from the agent or the
// profile goes through TerminalSafe (common/terminal_text.h): control characters, ESC, C1,
// bidirectional overrides and invisible code points are shown as escapes, so an action cannot
// redraw the screen, fake a prompt, or read differently from what it is.
// Typeahead is discarded (tcflush) before each new question, so keys pressed earlier never answer
// it. Does not close or reconfigure `tty_fd`: it reopens the terminal through /proc/self/fd (its
// own file description, so Asio's O_NONBLOCK stays off the caller's fd; dup() when /proc is
// missing) and falls back to the headless approver if that fails. Cancel() and destruction
// complete every pending ask as denied.
std::unique_ptr<Approver> MakeTerminalApprover(boost::asio::io_context& io, int tty_fd);
// Denies everything it is asked (headless / --approve never).
std::unique_ptr<Approver> MakeHeadlessApprover();

// Remembers run-scope approvals and holds pre-approvals. Pre-approval syntax, one per line in a
// file (# comments) or per --pre-approve option: "TOOL: PATTERN", e.g. "run_command: npm install
// *", "write_file: docs/**", or "sha256:<digest>" for one exact action.
//
// Command patterns are words as in the policy language (bare, or "..." quoted), each a word glob,
// matched against the argv of the action word for word: unlike profile rules, NOT a prefix match
// ("npm install *" covers "npm install left-pad", not "npm install left-pad evil"). Only an action
// that is one plain simple command can match a pattern (no ; && | or sh -c, no VAR=value prefix,
// no redirection, nothing opaque), and a command name containing '/' needs a pattern word with a
// '/'. Path patterns are path globs matched against the path of a path tool's action ("TOOL PATH",
// as tool_mapping.h builds it), lexically normalised ("./a" is "a"; ".." never matches), and every
// one of the request's resolved paths must match the same pattern too (a pre-approved docs/**
// does not cover docs/a.md when it resolves through a symlink to src/main.c). Digest
// entries match the request's digest whatever the tool. Not thread-safe: the broker's thread.
class ApprovalBook {
 public:
  // Adds one entry; `source` names where it came from ("file:line", "--pre-approve") and
  // prefixes the error ("approvals.txt:3: unknown tool \"bogus\" ...").
  Status AddPreApproval(const std::string& line, const std::string& source);
  // Adds every line of `file`; blank lines and lines starting with '#' are skipped. Fails with
  // every bad line (file:line: what), one per line of the error's detail; good lines are added.
  Status LoadPreApprovals(const std::string& file);
  // A standing approval covering `request`, if any.
  [[nodiscard]] std::optional<ApprovalOutcome> Lookup(const ApprovalRequest& request) const;
  // Records a run-scope outcome so later requests pass: kRunExact binds the request's digest;
  // kRunPattern binds `narrower_pattern` for the tool (the exact digest when none was offered or
  // it does not compile). Other scopes and denials are not recorded.
  void Record(const ApprovalRequest& request, const ApprovalOutcome& outcome);

 private:
  struct Entry {
    std::string tool;
    std::string pattern;  // glob; empty when `digest` is used
    std::string digest;
    std::string source;
    ApprovalScope scope;
  };
  std::vector<Entry> entries_;
};

}  // namespace cagent::launcher::broker
