// The decision engine: Decide(request) -> {verdict, rule, location, reason}.
//
// No I/O, default deny. On the common path a decision allocates only the two strings of the
// Decision it returns (and the absolute form of a relative path). Precedence, the same
// everywhere: of all the rules that match a request, the strongest verdict wins
// (deny > ask > allow); when nothing matches, the answer is deny. An Engine borrows the Policy it
// is built from; keep the Policy alive.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "policy/language/binding.h"
#include "policy/language/ir.h"
#include "policy/language/request.h"
#include "policy/match/shell.h"

namespace cagent::policy {

struct Decision {
  Verdict verdict = Verdict::kDeny;
  // The rule that decided, as dumped ("deny git push", "read-only /usr", "default"), and where it
  // is written (invalid for built-in rules and the default).
  std::string rule;
  Location loc;
  // Why, in words a person (or the model) can act on.
  std::string reason;
};

class Engine {
 public:
  // `binding` says where the profile's "~" and relative paths point (policy/language/binding.h):
  // the run's binding, or PortableBinding() where there is no run. The engine borrows `policy`.
  Engine(const Policy& policy, Binding binding);

  // The one decision path: what the profile says about `request` (request.h). Allocates only the
  // Decision's strings (and the absolute form of a relative tool path).
  [[nodiscard]] Decision Decide(const Request& request) const;
  // A tool request whose path the agent resolved (symlinks followed) to `resolved`: the request
  // and then each resolved path in its place are judged; the strongest verdict wins, on a tie the
  // first. An empty resolved path is judged as "." (the workspace). A link named src/x that
  // points at .env is the .env. For other kinds `resolved` is ignored.
  [[nodiscard]] Decision Decide(const Request& request,
                                std::span<const std::string> resolved) const;

  // The decisions Decide() makes for each kind, for callers holding only a view of the subject
  // (the audit's probes, profile init): the same code, no Request to build.
  //   Command: argv as executed (no shell). argv[0] without '/' is matched by name; with '/', by
  //     path.
  //   Shell: a shell command line: every simple command in it, and every redirection target,
  //     must be allowed; anything the shell parser cannot see through is denied.
  //   Path: a path access: the mount view first (hidden, read-only, outside the view), then the
  //     filesystem rules.
  [[nodiscard]] Decision Command(std::span<const std::string> argv) const;
  [[nodiscard]] Decision Shell(std::string_view script) const;
  //   ShellParts: how Shell() read `script`: one entry per simple command (its words, what ran it,
  //     the decision of that command alone) and per redirection target, in the order Shell()
  //     judges them. Empty when the line is opaque (Shell()'s decision says why). For `policy
  //     explain`; the same code path as Shell().
  struct ShellPart {
    std::string what;    // "command", "write" or "read"
    std::string text;    // the command's words joined with spaces, or the path
    std::string run_by;  // the wrapper, runner or construct that runs the command ("" for none)
    Decision decision;
  };
  [[nodiscard]] std::vector<ShellPart> ShellParts(std::string_view script) const;
  [[nodiscard]] Decision Path(Access access, std::string_view path) const;
  //   Host: a connection to `host` (a name or an IP literal, IPv6 with or without brackets) on
  //     `port` through the egress proxy. The host is normalised (policy/match/hosts.h: lowercase,
  //     one trailing dot stripped, IPv6 canonical); a host that is neither a valid name nor an IP
  //     literal is denied. An IP literal matches only address rules and `*`, never a name rule.
  //     No matching rule: denied ("no hosts rule allows H:P", or, for a profile without a hosts
  //     section, a reason saying the network is loopback/none). Method and path rules (issue 36)
  //     are not consulted when a rule without a method matches; when none does, an allow or ask
  //     method and path rule for the host allows the connection (its requests are decided one by
  //     one, Http), and deny method and path rules never refuse a connection.
  [[nodiscard]] Decision Host(std::string_view host, std::uint16_t port) const;
  //   McpTool: a tools/call of the MCP tool `name` on a server run by `cagent mcp wrap`, judged by
  //     the tools rules' mcp: words only (built-in tool names never match it, and mcp: words never
  //     match a call of cagent's own tools). Strongest matching verdict wins (deny > ask > allow);
  //     no matching rule: denied, with a reason saying how to allow it (`allow mcp:NAME` in
  //     tools). A name that is not a valid MCP tool name (IsMcpToolName, ir.h) is denied whatever
  //     the rules say, `mcp:*` included. Decide(Request::McpTool(name)) is the same decision.
  [[nodiscard]] Decision McpTool(std::string_view name) const;
  //   Http: one request cagent reads on an intercepted connection (issue 36), with `path` the
  //     request target without its query. Presupposes the connection is open, i.e. Host() allowed
  //     it or it was approved. A deny rule without a method that matches the host decides (the
  //     connection is refused). Otherwise the method and path rules matching host, port, method
  //     (without regard to case) and path decide, strongest verdict first (deny > ask > allow);
  //     when there are such rules for the host, a method that is no token, a target that does not
  //     start with '/' or a path with a "." or ".." segment (also percent-encoded) is denied. No
  //     method and path rule matches: the connection's rule without a method allows it (an `ask`
  //     connection was approved before any request was read); no such rule either: denied.
  //     Decide(Request::Http(...)) is the same decision.
  [[nodiscard]] Decision Http(std::string_view host, std::uint16_t port, std::string_view method,
                              std::string_view path) const;

  // Whether an allow or ask hosts rule names the IP literal `address_literal` itself (an address
  // rule, not `*` or a name) and matches `port`. The egress proxy refuses a name that resolves
  // into loopback, private, link-local or metadata space (policy/match/hosts.h, RestrictedRange)
  // unless this holds for the address it resolved to. Deny rules are not consulted: the proxy has
  // already decided the connection by its name.
  [[nodiscard]] bool AddressNamed(std::string_view address_literal, std::uint16_t port) const;
  // Whether a connection to `host` can be allowed or asked on some port: for each port an allow or
  // ask rule matching the host admits (its own, or 443 and 80 for a rule without one), the host's
  // decision on that port is computed, and any verdict other than deny answers true. Exact, not
  // approximate: a port-less deny covers only 443 and 80, so `deny x` with `allow x:22` is true.
  // The DNS stub answers NXDOMAIN for names where this is false.
  [[nodiscard]] bool HostMayConnect(std::string_view host) const;

  [[nodiscard]] const Policy& policy() const { return policy_; }
  // The verdict the approval mode turns an `ask` into when nobody is asked (never-ask: deny;
  // auto: allow; on-request: ask).
  [[nodiscard]] Verdict Effective(Verdict v) const;

 private:
  // A decision before its texts are copied out (defined in engine.cc): the private Decide*
  // functions judge, compare and combine these without allocating, and the public entry points
  // turn the final one into a Decision.
  struct Outcome;
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  // Where the views mounted at one absolute base are in views_.
  struct ViewsAt {
    std::size_t last = 0;             // mounted last at this base (what is visible there)
    std::size_t last_hidden = kNone;  // the last `hide` at this base, if any
  };
  // Hashes std::string and std::string_view alike, so view_at_ is searched without a copy.
  struct BaseHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  // argv as the request gave it, or as views into a parsed shell line: the same decision.
  // `in_workspace`: the shell's directory is still the workspace (no cd earlier on the line may
  // have left it); `workspace:` allow rules apply only then.
  [[nodiscard]] Outcome DecideCommand(std::span<const std::string> argv) const;
  [[nodiscard]] Outcome DecideCommand(std::span<const std::string_view> argv,
                                      bool in_workspace) const;
  template <typename Word>
  [[nodiscard]] Outcome DecideArgv(std::span<const Word> argv, bool in_workspace) const;
  // What a command's own arguments ask of the network: a URL given to curl or wget, a name given
  // to nslookup or ping, whose host is built from an expansion, is denied (the name itself is a
  // DNS query that can carry data out, and cannot be checked). Allowed (with no rule) otherwise:
  // the sandbox's network and the egress proxy decide literal hosts.
  template <typename Word>
  [[nodiscard]] Outcome DecideTargets(std::span<const Word> argv) const;
  // A connection to `host`:`port` named on a command line (not yet normalised): denied when it is
  // built from an expansion, or when this sandbox cannot make it (no network; no hosts rule, or
  // one that refuses it), with the profile's network statement or that hosts rule as the rule.
  // Used for /dev/tcp redirections, which bash turns into sockets.
  [[nodiscard]] Outcome DecideTarget(std::string_view host, std::uint16_t port) const;
  // The intents a pipeline shows and no profile allows: a download piped into a shell or an
  // interpreter that runs its stdin (`curl … | sh`, `wget -qO- … | python3 -`), and the
  // environment piped into a network client (`env | curl -d @- …`). Denied with rule
  // "shell: piped"; allowed (with no rule) otherwise.
  [[nodiscard]] Outcome DecidePipelines(std::span<const SimpleCommandView> commands) const;
  [[nodiscard]] Outcome DecideShell(std::string_view script,
                                    std::vector<ShellPart>* parts = nullptr) const;
  // A redirection target: a path, or (/dev/tcp/H/P, /dev/udp/H/P) a connection bash opens.
  [[nodiscard]] Outcome DecideRedirect(Access access, std::string_view target) const;
  [[nodiscard]] Outcome DecidePath(Access access, std::string_view path) const;
  // The view and the filesystem rules for `abs`, an absolute normalised path.
  [[nodiscard]] Outcome DecideAbsolutePath(Access access, std::string_view abs) const;
  // A tool call: the tools rules, combined with the path or command decision it implies.
  // `command` is run_command's line, `path` any other tool's path ("" for none).
  [[nodiscard]] Outcome DecideTool(Tool tool, std::string_view path,
                                   std::string_view command) const;
  [[nodiscard]] Outcome DecideRequest(const Request& request) const;
  [[nodiscard]] Outcome DecideMcpTool(std::string_view name) const;
  // A connection; `host` is not yet normalised.
  [[nodiscard]] Outcome DecideHost(std::string_view host, std::uint16_t port) const;
  // The same for a normalised host: the rules without a method, then (none matching) the allow
  // and ask method and path rules, which open the connection for their requests.
  [[nodiscard]] Outcome DecideNormalizedHost(std::string_view host, std::uint16_t port) const;
  // The rules without a method only, for a normalised host; `*matched` says whether any matched.
  [[nodiscard]] Outcome DecideConnectionRules(std::string_view host, std::uint16_t port,
                                              bool* matched) const;
  // A request on an intercepted connection (Http); `host` is not yet normalised.
  [[nodiscard]] Outcome DecideHttp(std::string_view host, std::uint16_t port,
                                   std::string_view method, std::string_view path) const;

  const Policy& policy_;
  Binding bindings_;
  // Command rules whose first element is a single literal name, indexed by it; the rest are
  // checked for every command.
  std::vector<std::pair<std::string, std::size_t>> by_name_;  // sorted by name
  // Where each first byte's names are in by_name_, so a lookup searches only the names that share
  // the first byte: [by_first_[k], by_first_[k + 1]) with k = 1 + the byte, or k = 0 for the
  // empty name (by_first_[0] is 0, by_first_[257] is by_name_.size()).
  std::array<std::uint32_t, 258> by_first_{};
  std::vector<std::size_t> generic_;
  // The mount view as absolute bases for these bindings (built-ins, the profile's mounts, the
  // workspace), in mount order, and each rule's text as a Decision shows it; precomputed so a
  // decision builds no strings it does not return.
  struct View {
    std::string base;
    MountMode mode;
    std::string rule;
    Location loc;
  };
  std::vector<View> views_;
  // The same views by base, so a path's view is found by looking up its ancestors (one lookup
  // per component) instead of comparing it with every view. base_length_[n] says whether some
  // base is n bytes long, which skips most lookups without hashing.
  std::unordered_map<std::string, ViewsAt, BaseHash, std::equal_to<>> view_at_;
  std::vector<bool> base_length_;
  std::vector<std::string> command_rule_;
  std::string command_default_rule_;  // "commands: default allow"
  std::string network_rule_;          // "network loopback"
  std::vector<std::string> path_rule_;
  std::vector<std::string> tool_rule_;
  std::vector<std::string> host_rule_;
};

}  // namespace cagent::policy
