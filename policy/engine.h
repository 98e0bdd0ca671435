// The decision engine: Decide(request) -> {verdict, rule, location, reason}.
//
// No I/O, no allocation on the common path, default deny. Precedence, the same everywhere: of all
// the rules that match a request, the strongest verdict wins (deny > ask > allow); when nothing
// matches, the answer is deny. An Engine borrows the Policy it is built from; keep the Policy alive.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "policy/ir.h"

namespace cagent::policy {

struct Decision {
  Verdict verdict = Verdict::kDeny;
  // The rule that decided, as dumped ("deny git push", "read-only /usr", "default"), and where it is
  // written (invalid for built-in rules and the default).
  std::string rule;
  Location loc;
  // Why, in words a person (or the model) can act on.
  std::string reason;
};

// Requests, one per kind of question.
struct CommandRequest {
  std::span<const std::string> argv;
};
struct ShellRequest {
  std::string_view script;  // what run_command would pass to /bin/sh -c
};
struct PathRequest {
  Access access = Access::kRead;
  std::string_view path;  // absolute, "~/..." or workspace-relative
};
struct ToolRequest {
  Tool tool = Tool::kReadFile;
  std::string_view path;     // for path-taking tools; empty when none
  std::string_view command;  // for run_command
};
using Request = std::variant<CommandRequest, ShellRequest, PathRequest, ToolRequest>;

class Engine {
 public:
  // Where the profile's "~" and relative paths point for this run (absolute, normalised). The
  // defaults let a profile be explained without a run: "/workspace" and "/home/user".
  struct Bindings {
    std::string workspace = "/workspace";
    std::string home = "/home/user";
  };

  explicit Engine(const Policy& policy) : Engine(policy, Bindings{}) {}
  Engine(const Policy& policy, Bindings bindings);

  [[nodiscard]] Decision Decide(const Request& request) const;

  // argv as executed (no shell). argv[0] without '/' is matched by name; with '/', by path.
  [[nodiscard]] Decision Command(std::span<const std::string> argv) const;
  // A shell command line: every simple command in it, and every redirection target, must be
  // allowed; anything the shell parser cannot see through is denied.
  [[nodiscard]] Decision Shell(std::string_view script) const;
  // A path access: the mount view first (hidden, read-only, outside the view), then the
  // filesystem rules.
  [[nodiscard]] Decision Path(Access access, std::string_view path) const;
  // A tool call: the tools rules, combined with the path or command decision it implies.
  [[nodiscard]] Decision Tool(ToolRequest request) const;

  [[nodiscard]] const Policy& policy() const { return policy_; }
  // The verdict the approval mode turns an `ask` into when nobody is asked (never-ask: deny;
  // auto: allow; on-request: ask).
  [[nodiscard]] Verdict Effective(Verdict v) const;

 private:
  const Policy& policy_;
  Bindings bindings_;
  // Command rules whose first element is a single literal name, indexed by it; the rest are
  // checked for every command.
  std::vector<std::pair<std::string, std::size_t>> by_name_;  // sorted by name
  std::vector<std::size_t> generic_;
  // The mount view as absolute bases for these bindings (built-ins, the profile's mounts, the
  // workspace), and each rule's text as a Decision shows it; precomputed so a decision builds no
  // strings it does not return.
  struct View {
    std::string base;
    MountMode mode;
    std::string rule;
    Location loc;
  };
  std::vector<View> views_;
  std::vector<std::string> command_rule_;
  std::vector<std::string> path_rule_;
  std::vector<std::string> tool_rule_;
};

}  // namespace cagent::policy
