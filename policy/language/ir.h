// The compiled policy (IR): what a profile means once its parents and includes are resolved.
//
// Pure data, normalised and sorted, so two profiles that mean the same thing compile to the same
// Policy and dump (dump.h) to the same text. The launcher turns it into mounts, Landlock and
// seccomp (launcher/profile/spec.h); the engine (engine.h) answers questions about it; the broker
// counts its budgets. Every rule keeps the location it was written at, for `explain` and
// diagnostics.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/language/source.h"
#include "policy/match/glob.h"
#include "policy/match/hosts.h"

namespace cagent::policy {

// Ordered by strength: when several rules match, the strongest verdict wins (deny > ask > allow).
enum class Verdict : std::uint8_t { kAllow = 0, kAsk = 1, kDeny = 2 };
std::string_view VerdictName(Verdict v);

// A word as it is written back in dumps and rule texts: bare when it lexes back as the same word,
// otherwise quoted with \" \\ \n \t escapes.
std::string QuoteWord(std::string_view word);
// `word` always in double quotes, with the same escapes: how a command line is written in a
// request's text (request.h) and in messages about it.
std::string QuoteString(std::string_view word);

// What a path is relative to. Profiles write "/abs", "~/rel" (the caller's home) or "rel" (the
// workspace; "." is the workspace itself).
enum class PathBase : std::uint8_t { kAbsolute, kHome, kWorkspace };

struct PathRef {
  PathBase base = PathBase::kAbsolute;
  std::string rel;  // normalised: no leading/trailing '/', no "." or ".."; "" = the base itself

  // As written in a profile: "/usr", "~/.cargo", "src", ".".
  [[nodiscard]] std::string Text() const;
  // The absolute path it names for a run with this workspace and home (both absolute); "" for a
  // home path when `home` is empty. Not normalised beyond joining.
  [[nodiscard]] std::string Resolve(std::string_view workspace, std::string_view home) const;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted operator<=>
  friend auto operator<=>(const PathRef&, const PathRef&) = default;
};

// How a tree appears inside the sandbox. Paths that do not exist on the host are skipped.
enum class MountMode : std::uint8_t { kReadOnly, kReadWrite, kHidden };
std::string_view MountModeName(MountMode m);  // "read-only", "read-write", "hide"

struct MountRule {
  PathRef path;
  MountMode mode = MountMode::kReadOnly;
  Location loc;
};

enum class Access : std::uint8_t { kRead = 1, kWrite = 2, kReadWrite = 3 };
std::string_view AccessName(Access a);  // "read", "write", "read-write"

// `deny [read|write] GLOB` / `ask write GLOB` in the filesystem section.
struct PathRule {
  Verdict verdict = Verdict::kDeny;
  Access access = Access::kReadWrite;
  PathBase base = PathBase::kWorkspace;  // what the glob is matched against
  PathGlob glob;                         // relative to `base` (absolute when kAbsolute)
  std::string text;                      // the glob as written ("**/.env", "~/.ssh/**")
  Location loc;

  [[nodiscard]] bool Covers(Access a) const {
    return (static_cast<unsigned>(access) & static_cast<unsigned>(a)) != 0;
  }
};

// One argv position of a command pattern: any of the alternatives (word globs) matches.
struct ArgPattern {
  std::vector<WordGlob> alternatives;
  // `...` (bare): any run of arguments, none included; `alternatives` is empty. Never the first
  // element, never the last, never two in a row (the checker refuses them). `deny find ... -delete`
  // matches find with -delete at any position after the name.
  bool any_run = false;
  // A byte every alternative requires ('/' for `(*/.ssh | */.aws/*)`), or 0: a word without it
  // cannot match, which one memchr tells before any glob runs. Set by CompileArgPattern.
  unsigned char required = 0;
  // `workspace:GLOB` as the first element: a program inside the workspace, run by a relative path
  // (it contains '/', does not start with '/' or '~', has no ".." component). The one alternative
  // matches that path normalised: "./build//t" is "build/t". The engine also requires that no
  // `cd` earlier on the line may have left the workspace before such an allow rule applies.
  bool workspace = false;
};

// Whether `argv0` names a program inside the workspace by a relative path (see
// ArgPattern::workspace), and if so the path normalised: "./t" -> "t", "build/./app" ->
// "build/app". nullopt for a bare name, an absolute or "~" path, or one with a ".." component.
std::optional<std::string> WorkspaceProgram(std::string_view argv0);

// `allow|ask|deny WORD...`: matches an argv whose leading elements match the pattern (a prefix
// match: `allow git status` allows `git status --short`).
struct CommandRule {
  Verdict verdict = Verdict::kDeny;
  std::vector<ArgPattern> pattern;
  std::string text;  // the pattern as it is dumped: git (diff | status) *
  Location loc;
  // `reason "…"` in the rule's block: why the rule exists, in words the agent can act on (what to
  // do instead). Shown in the decision's reason; "" for the generic text.
  std::string reason;

  // Prefix match. argv[0] containing '/' matches an allow rule only through a pattern element
  // containing '/' (a workspace script named ./git is not `git`); deny and ask rules match it by
  // its last component as well (/usr/bin/curl is `curl`).
  [[nodiscard]] bool Matches(std::span<const std::string> argv) const;
  // The same for argv as views (a parsed shell line).
  [[nodiscard]] bool Matches(std::span<const std::string_view> argv) const;
};

// The agent's tools: a closed set.
enum class Tool : std::uint8_t {
  kReadFile,
  kWriteFile,
  kEditFile,
  kListDir,
  kGlob,
  kGrep,
  kRunCommand,
  kFinish,
  kCount,
};
std::string_view ToolName(Tool t);
std::optional<Tool> ParseTool(std::string_view name);
// Whether the tool reads or writes the path it is given (kRead for list_dir/glob/grep/read_file).
Access ToolAccess(Tool t);

// MCP tool names (the 2025-11-25 MCP revision): 1 to 128 characters of A-Z a-z 0-9 _ - and '.',
// case-sensitive. `cagent mcp wrap` refuses a tools/call whose name is not one: a rule could not
// name it exactly, and it would reach logs and terminals unescaped.
inline constexpr std::size_t kMaxMcpToolName = 128;
[[nodiscard]] bool IsMcpToolNameChar(char c);
[[nodiscard]] bool IsMcpToolName(std::string_view name);

// `allow|ask|deny TOOL... [on GLOB...]` and `allow|ask|deny mcp:GLOB...`. Built-in tool names
// (`tools`) name cagent's own toolbox; `mcp:` words (`mcp_tools`) name the tools of an MCP server
// run by `cagent mcp wrap`, by their MCP name. The two never match each other's calls: a wrapped
// server's tool called read_file is matched by mcp:read_file, never by read_file. A rule may hold
// both; `paths` is then empty (the checker refuses `on` with mcp: words).
struct ToolRule {
  Verdict verdict = Verdict::kDeny;
  std::vector<Tool> tools;      // sorted, unique
  std::vector<PathGlob> paths;  // workspace-relative; empty = any path (and tools without a path)
  // Word globs over MCP tool names (the text after "mcp:"), sorted by pattern, unique. Every
  // character is an MCP name character or one of * ? [ ] ! ^ (checked by the checker).
  std::vector<WordGlob> mcp_tools;
  // The rule as dumped: the tool names in enum order, then the mcp: words, then `on GLOB...`:
  // "read_file grep mcp:echo mcp:get-*".
  std::string text;
  Location loc;
};

// `allow|ask|deny PATTERN...` in the hosts section: one rule per pattern, deciding connections.
// `allow|ask|deny PATTERN METHOD PATH` (issue 36): a method and path rule, deciding the requests
// cagent reads on a connection it intercepts (a host some credential is bound to); exactly one
// pattern. docs/policy-language.md, "hosts", has the semantics.
struct HostRule {
  Verdict verdict = Verdict::kDeny;
  HostPattern pattern;
  // A method and path rule: `method` is an uppercase HTTP method token or "*" (any method);
  // `path` starts with '/' or is "*", and each '*' in it matches any run of bytes, '/' included.
  // Both "" for a connection rule.
  std::string method;
  std::string path;
  std::string text;  // as dumped after the verdict: pattern.Text(), then " METHOD PATH" if any
  Location loc;      // the host pattern

  [[nodiscard]] bool HasMethod() const { return !method.empty(); }
  // Whether a method and path rule matches a request's method (compared without regard to case:
  // a server may treat `delete` as DELETE) and path (the request target without its query,
  // compared byte for byte). False for a connection rule.
  [[nodiscard]] bool MatchesRequest(std::string_view request_method,
                                    std::string_view request_path) const;
};

// Whether `method` is an HTTP method token as rules write it: RFC 9110 token characters without
// lowercase letters, at least one uppercase letter ("GET", "PROPFIND", "M-SEARCH").
[[nodiscard]] bool IsRuleMethod(std::string_view method);
// Whether `text` matches `pattern`, where each '*' matches any run of bytes ('/' included) and
// every other byte only itself: how a method and path rule's path is matched.
[[nodiscard]] bool PathPatternMatches(std::string_view pattern, std::string_view text);

enum class LimitKind : std::uint8_t { kDuration, kSize, kCount, kMoney };

// Limits and budgets. Durations in milliseconds, sizes in bytes, money in millionths of its
// currency (LimitValue::currency).
enum class Limit : std::uint8_t {
  kWallTime,
  kCpuTime,
  kCommandTimeout,
  kMemory,
  kFileSize,
  kCommandOutput,
  kTotalOutput,
  kPatchSize,
  kProcesses,
  kOpenFiles,
  kModelTurns,
  kModelTokens,
  kToolCalls,
  kChangedFiles,
  kEgressBytes,        // bytes both ways over all of a run's proxied connections
  kEgressConnections,  // proxied connections a run may open
  kModelCost,          // what the model calls may cost, at the user's prices (models.toml)
  kCount,
};
std::string_view LimitName(Limit l);  // the profile key: "wall-time", "memory", ...
LimitKind LimitKindOf(Limit l);
std::optional<Limit> ParseLimit(std::string_view key);

struct LimitValue {
  bool set = false;        // written somewhere in the chain
  bool unlimited = false;  // written as `unlimited`
  std::uint64_t value = 0;
  std::string currency;  // kMoney: "USD"
  Location loc;

  // Set and bounded.
  [[nodiscard]] bool bounded() const { return set && !unlimited; }
};

enum class NetworkMode : std::uint8_t { kNone, kLoopback };
std::string_view NetworkName(NetworkMode n);

// What happens to an `ask` verdict.
enum class ApprovalMode : std::uint8_t {
  kNeverAsk,   // every ask is denied without prompting (for unattended runs)
  kOnRequest,  // a human at cagent's terminal decides; no terminal = denied
  kAuto,       // asks are allowed without prompting, and recorded (audit flags this)
};
std::string_view ApprovalName(ApprovalMode a);

struct EnvPattern {
  WordGlob name;
  Location loc;
};
struct EnvSetting {
  std::string name;
  std::string value;
  Location loc;
};

// A trusted command run by cagent after the agent stops, in a fresh sandbox over the workspace.
struct VerifyCommand {
  std::string command;  // run with /bin/sh -c
  std::optional<std::uint64_t> timeout_ms;
  Location loc;
};

template <typename T>
struct Setting {
  T value{};
  bool set = false;
  Location loc;
};

// `setup { run "npm ci" … ; hosts { … } }`: trusted commands cagent runs in their own sandbox on
// a run's workspace before the agent starts (and again on the verification tree before the verify
// commands), with writable caches and their own network: when the setup block has a hosts section,
// setup connects through the egress proxy under those rules only (network loopback); otherwise
// setup has the profile's network and hosts.
struct Setup {
  std::vector<VerifyCommand>
      commands;                 // in the order written; a child's setup replaces its parent's
  std::vector<HostRule> hosts;  // sorted by (text, verdict)
  Setting<bool> egress{false, false, {}};  // the block has a hosts section (loc: that section)
  Location loc;                            // the setup block
};

// `cache [read-write] ~/PATH…`: a directory of the sandbox's HOME kept between runs, per profile,
// under $XDG_CACHE_HOME/cagent/caches/PROFILE/. Setup always writes it; the agent and verification
// see it read-only unless `agent_writable`.
struct CacheRule {
  std::string rel;  // below HOME: ".npm", ".cache/pip" (normalised like PathRef::rel, never "")
  bool agent_writable = false;
  Location loc;
};

// `carry PATH…`: a workspace-relative path of the caller's checkout (typically ignored:
// node_modules, .venv) shown read-only at the same place in the run's workspace and in the
// verification tree.
struct CarryRule {
  std::string rel;  // workspace-relative, normalised, never ""
  Location loc;
};

// `outputs GLOB…` (issue 32): what a build leaves in the workspace (build/, target/, dist/,
// node_modules/, __pycache__/). The capture leaves out the paths git does not track that are at or
// below a match (a tracked file there that changed stays the agent's change), and the run reports
// what it left out. Globs are workspace-relative path globs (glob.h); a child adds, never removes.
struct OutputRule {
  std::string pattern;  // as written, without a trailing '/'
  PathGlob glob;
  Location loc;
};

// `credentials { NAME [optional] env VAR|file PATH for HOST... }` (issue 36): a secret cagent reads
// from its own environment or a file when the sandbox starts and never lets into it. Inside, the
// variable (or a file at the same path) holds a per-sandbox placeholder; cagent's egress proxy puts
// the real value in place of the placeholder in requests to the bound hosts only. A child adds,
// never removes: a name is defined once in the chain.
enum class CredentialSource : std::uint8_t { kEnv, kFile };
struct CredentialRule {
  std::string name;  // [a-z0-9][a-z0-9_-]*, unique in the chain
  CredentialSource source = CredentialSource::kEnv;
  std::string from;       // the variable's name, or the file's path as written (~/ allowed)
  bool optional = false;  // a missing value is a reported skip, not an error
  std::vector<HostPattern> hosts;  // as written, at least one
  std::string text;                // as dumped: "gh env GITHUB_TOKEN for github.com api.github.com"
  Location loc;
};

// Whether `rel` (a workspace-relative path) is at or below a path some rule of `outputs` matches.
[[nodiscard]] bool UnderOutputs(const std::vector<OutputRule>& outputs, std::string_view rel);

// `require X`: refuse to run when X cannot be applied. `best-effort X`: accept its absence,
// reported as a downgrade.
enum class Requirement : std::uint8_t {
  kLandlock,
  kSeccomp,
  kCgroup,
  kMemoryLimit,
  kPidsLimit,
  kCount,
};
std::string_view RequirementName(Requirement r);  // "landlock", "memory-limit", ...
std::optional<Requirement> ParseRequirement(std::string_view name);

struct Policy {
  std::string name;                // the profile's name (file stem)
  std::string description;         // from the nearest profile in the chain that has one
  std::vector<std::string> chain;  // profile names, root parent first, this profile last
  std::vector<std::string> files;  // display names of every file read, in load order

  Setting<NetworkMode> network{NetworkMode::kNone, false, {}};
  Setting<ApprovalMode> approval{ApprovalMode::kNeverAsk, false, {}};
  Setting<bool> workspace_writable{true, false, {}};

  std::vector<MountRule> mounts;      // sorted by (base, path); one entry per path
  std::vector<PathRule> path_rules;   // sorted by (text, verdict, access)
  std::vector<CommandRule> commands;  // sorted by (text, verdict)
  // `commands { default allow | ask | deny }`: the verdict for a command no rule matches. Unset:
  // deny (a strict allow-list). The nearest profile of the chain that says it decides; `policy
  // diff` and `policy audit` report a child that widens it.
  Setting<Verdict> command_default{Verdict::kDeny, false, {}};
  std::vector<ToolRule> tools;  // sorted by (text, verdict)
  std::vector<HostRule> hosts;  // sorted by (text, verdict)
  // True when some profile of the chain has a `hosts` section (even an empty one): the run's
  // connections go through cagent's egress proxy, which the hosts rules decide. loc: the first
  // such section.
  Setting<bool> egress{false, false, {}};
  std::array<LimitValue, static_cast<std::size_t>(Limit::kCount)> limits{};

  std::vector<EnvPattern> env_pass;   // sorted by pattern
  std::vector<EnvPattern> env_scrub;  // sorted by pattern
  std::vector<EnvSetting> env_set;    // sorted by name; one per name

  std::vector<VerifyCommand> verify;  // in the order written (parents' first)
  Setup setup;                        // empty commands = no setup phase
  std::vector<CacheRule> caches;      // sorted by rel; one per rel (writable wins)
  std::vector<CarryRule> carry;       // sorted by rel, unique
  // `git-identity caller | none`: whether git inside sees the caller's user.name and user.email
  // (and nothing else of the caller's git configuration). Default caller.
  Setting<bool> git_identity{true, false, {}};
  std::vector<Setting<Requirement>> requirements;  // sorted, unique
  std::vector<Setting<Requirement>> best_effort;   // sorted, unique
  // `outputs`: sorted by pattern, unique (issue 32).
  std::vector<OutputRule> outputs;
  // `credentials` (issue 36): sorted by name, one per name in the chain.
  std::vector<CredentialRule> credentials;

  // The files the locations point into.
  std::shared_ptr<const SourceSet> sources;

  [[nodiscard]] const LimitValue& limit(Limit l) const {
    return limits[static_cast<std::size_t>(l)];
  }
  [[nodiscard]] bool Requires(Requirement r) const;
  [[nodiscard]] bool IsBestEffort(Requirement r) const;
  // "file:line:col" of a location in this policy's sources.
  [[nodiscard]] std::string Where(const Location& loc) const;
  // The chain of profiles as shown to people: "base -> backend -> project".
  [[nodiscard]] std::string ChainText() const;
};

// The ports the egress proxy must capture for `policy` (sorted, unique): every port an allow or
// ask hosts rule names, plus 80 and 443 when some allow or ask rule names no port. Empty when no
// rule allows or asks for anything.
[[nodiscard]] std::vector<std::uint16_t> HostPorts(const Policy& policy);

}  // namespace cagent::policy
