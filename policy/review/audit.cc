#include "policy/review/audit.h"

#include <algorithm>
#include <array>
#include <tuple>

#include "policy/language/coherence.h"
#include "policy/language/engine.h"
#include "policy/match/hosts.h"
#include "policy/review/diff.h"

namespace cagent::policy {
namespace {

constexpr std::array<AuditRule, 17> kRules = {{
    {"CAGENT001", "network", "The sandbox has network access (network is not 'none')", Risk::kLow,
     "Use `network none` unless the tools need sockets; `network loopback` keeps traffic on the "
     "sandbox's own interface, and a `hosts` section lets out only the hosts it names, through "
     "cagent's proxy."},
    {"CAGENT002", "writable", "A read-write mount outside the workspace", Risk::kHigh,
     "Mount host paths read-only, or give the tools a directory of their own; whatever is "
     "writable outside the workspace outlives the run and is seen by the host."},
    {"CAGENT003", "secrets", "Host paths that hold credentials are readable in the sandbox",
     Risk::kHigh,
     "Hide the credential paths (`hide ~/.aws`), or mount only the files the tools need; the "
     "agent can copy whatever it can read into the workspace or its output."},
    {"CAGENT004", "workspace-secrets",
     "Secret files in the workspace (.env, *.pem, *.key, ...) are not denied", Risk::kMedium,
     "Add `filesystem { deny **/.env **/.env.* **/*.pem **/*.key **/id_rsa* **/.netrc }`, or "
     "extend base, which has it."},
    {"CAGENT005", "interpreter",
     "A shell, interpreter or command runner is allowed: equivalent to allowing everything the "
     "sandbox allows",
     Risk::kLow,
     "Treat the allow-list as a convenience, not the boundary: a runner runs whatever it is given. "
     "Keep the sandbox's filesystem, network and limits tight, and allow runners only where the "
     "task needs them."},
    {"CAGENT006", "silent-ask", "An 'ask' rule under approval never-ask is a silent denial",
     Risk::kInfo,
     "Use `approval on-request` so that asks reach a person, or write `deny` where no person will "
     "be asked."},
    {"CAGENT007", "auto-approval", "approval auto turns every ask into an allow", Risk::kHigh,
     "Use `approval on-request` (a person answers) or `never-ask` (asks are refused); `auto` "
     "turns every ask rule into an allow rule."},
    {"CAGENT008", "unbounded", "A limit is unset or unlimited", Risk::kMedium,
     "Set the limit (`limits { memory 4G; processes 512; wall-time 30m }`), or extend base, "
     "which bounds them all."},
    {"CAGENT009", "best-effort", "A confinement layer is best-effort: the run may go without it",
     Risk::kLow,
     "Write `require LAYER` so that a run refuses to start without it; best-effort runs go "
     "ahead without the layer and report the downgrade."},
    {"CAGENT010", "not-required", "Landlock or seccomp is not required", Risk::kMedium,
     "Add `require landlock` and `require seccomp` (base has both), so that a kernel without "
     "them refuses the run instead of running it with less confinement."},
    {"CAGENT011", "weakens-parent", "A child profile widens what its parent allows", Risk::kMedium,
     "Review each widening against what the task needs; `cagent policy diff PARENT CHILD` lists "
     "them."},
    {"CAGENT012", "any-host", "A hosts rule allows or asks for every host ('*')", Risk::kHigh,
     "Name the hosts the tools need (`allow registry.npmjs.org`); `*` lets the sandbox send what "
     "it can read anywhere."},
    {"CAGENT013", "shared-hosting",
     "A hosts wildcard covers a shared-hosting domain where anyone can publish content",
     Risk::kMedium,
     "Name the exact host (`allow myproject.github.io`), not a wildcard over a domain where "
     "anyone can publish content or receive data."},
    {"CAGENT014", "internal-address",
     "A hosts rule allows an address in loopback, private, link-local or cloud-metadata space",
     Risk::kHigh,
     "Remove the rule, or name the one internal service the tools need; internal addresses reach "
     "services (cloud metadata, admin interfaces) that trust whoever connects."},
    {"CAGENT015", "any-mcp-tool",
     "A tools rule allows every tool of a wrapped MCP server ('mcp:*'), including tools it adds "
     "later",
     Risk::kLow,
     "Allow the server's tools by name (`allow mcp:read_file`), so that a tool the server adds "
     "later is asked about or refused."},
    {"CAGENT016", "env-secrets",
     "An environment pass pattern lets a variable that usually holds a credential into the "
     "sandbox",
     Risk::kMedium,
     "Pass only the variables the tools need by name, and keep base's scrub patterns; the agent "
     "can read every variable it is given."},
    // issue 32
    {"CAGENT017", "outputs",
     "An outputs glob leaves the files git does not track below it out of the agent's patch",
     Risk::kInfo,
     "Name only what builds write (build/, target/, dist/, **/__pycache__/); a new source file "
     "below an outputs glob is left out of the patch (the run names it with a warning)."},
}};

constexpr std::string_view kNetwork = "CAGENT001";
constexpr std::string_view kWritable = "CAGENT002";
constexpr std::string_view kSecrets = "CAGENT003";
constexpr std::string_view kWorkspaceSecrets = "CAGENT004";
constexpr std::string_view kInterpreter = "CAGENT005";
constexpr std::string_view kSilentAsk = "CAGENT006";
constexpr std::string_view kAutoApproval = "CAGENT007";
constexpr std::string_view kUnbounded = "CAGENT008";
constexpr std::string_view kBestEffort = "CAGENT009";
constexpr std::string_view kNotRequired = "CAGENT010";
constexpr std::string_view kWeakensParent = "CAGENT011";
constexpr std::string_view kAnyHost = "CAGENT012";
constexpr std::string_view kSharedHosting = "CAGENT013";
constexpr std::string_view kInternalAddress = "CAGENT014";
constexpr std::string_view kAnyMcpTool = "CAGENT015";
constexpr std::string_view kEnvSecrets = "CAGENT016";
constexpr std::string_view kOutputs = "CAGENT017";  // issue 32

// Host paths whose contents are credentials (or, for ~, contain them and the shell's start-up
// files). Probed through the engine, so a `hide` or `deny` that covers one clears it.
struct SecretPath {
  std::string_view path;
  Risk risk;
};
constexpr SecretPath kSecretPaths[] = {
    {"~/.ssh", Risk::kHigh},
    {"~/.aws", Risk::kHigh},
    {"~/.gnupg", Risk::kHigh},
    {"~/.docker", Risk::kHigh},
    {"~/.kube", Risk::kHigh},
    {"~/.netrc", Risk::kHigh},
    {"~/.git-credentials", Risk::kHigh},
    {"~/.config", Risk::kHigh},
    {"~/.azure", Risk::kHigh},
    {"~/.npmrc", Risk::kHigh},
    {"~/.pypirc", Risk::kHigh},
    // Toolchain directories the built-in profiles expose, holding registry tokens and repository
    // passwords when the user has logged in.
    {"~/.cargo/credentials.toml", Risk::kMedium},
    {"~/.cargo/credentials", Risk::kMedium},
    {"~/.m2/settings.xml", Risk::kMedium},
    {"~/.gradle/gradle.properties", Risk::kMedium},
};

// Files in a project that usually hold secrets.
constexpr std::string_view kWorkspaceSecretProbes[] = {
    ".env", "config/.env.production", "server.pem", "certs/server.key", "id_rsa", ".netrc",
};

// Environment variables that usually hold a credential or lead to one (a token, a password, a
// connection string with its password, an agent socket, a credentials file).
constexpr std::string_view kSecretVariables[] = {
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITLAB_TOKEN",
    "NPM_TOKEN",
    "PYPI_TOKEN",
    "CARGO_REGISTRY_TOKEN",
    "TWINE_PASSWORD",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "HF_TOKEN",
    "VAULT_TOKEN",
    "DATABASE_URL",
    "REDIS_URL",
    "SENTRY_DSN",
    "PGPASSWORD",
    "MYSQL_PWD",
    "KUBECONFIG",
    "DOCKER_AUTH_CONFIG",
    "SSH_AUTH_SOCK",
};

// Commands that run arbitrary code given as an argument or found in the workspace.
struct Runner {
  std::string_view name;
  std::string_view kind;
  Risk risk;
};
constexpr Runner kRunners[] = {
    {"sh", "shell", Risk::kMedium},
    {"bash", "shell", Risk::kMedium},
    {"dash", "shell", Risk::kMedium},
    {"zsh", "shell", Risk::kMedium},
    {"fish", "shell", Risk::kMedium},
    {"ksh", "shell", Risk::kMedium},
    {"csh", "shell", Risk::kMedium},
    {"busybox", "shell", Risk::kMedium},
    {"python", "interpreter", Risk::kLow},
    {"python3", "interpreter", Risk::kLow},
    {"python2", "interpreter", Risk::kLow},
    {"node", "interpreter", Risk::kLow},
    {"deno", "interpreter", Risk::kLow},
    {"bun", "interpreter", Risk::kLow},
    {"perl", "interpreter", Risk::kLow},
    {"ruby", "interpreter", Risk::kLow},
    {"php", "interpreter", Risk::kLow},
    {"lua", "interpreter", Risk::kLow},
    {"tclsh", "interpreter", Risk::kLow},
    {"Rscript", "interpreter", Risk::kLow},
    {"awk", "runner: system()", Risk::kLow},
    {"gawk", "runner: system()", Risk::kLow},
    // env, timeout, nice, nohup, stdbuf, time, ionice, command, exec, xargs and find -exec are not
    // here: in a shell line the engine judges the command they run (policy/match/shell.h), as it
    // does for sh -c.
    {"setsid", "runner", Risk::kLow},
    {"make", "runner: Makefile recipes", Risk::kLow},
    {"npm", "runner: package.json scripts", Risk::kLow},
    {"npx", "runner", Risk::kLow},
};

// Budgets that mean something only when the egress proxy is on.
bool IsEgressBudget(Limit l) { return l == Limit::kEgressBytes || l == Limit::kEgressConnections; }

// Limits whose absence lets one run exhaust the machine; the others are budgets.
bool IsResourceLimit(Limit l) {
  return l == Limit::kWallTime || l == Limit::kCpuTime || l == Limit::kCommandTimeout ||
         l == Limit::kMemory || l == Limit::kProcesses;
}

Risk Stronger(Risk a, Risk b) { return std::min(a, b); }  // kHigh is 0

class Auditor {
 public:
  Auditor(const Policy& policy, const Policy* parent)
      : p_(policy), parent_(parent), engine_(policy, PortableBinding()) {
    if (p_.sources && p_.sources->size() > 0) top_ = Location{0, 1, 1};
  }

  std::vector<Finding> Run() {
    Network();
    Hosts();
    McpTools();
    Writable();
    Secrets();
    WorkspaceSecrets();
    Interpreters();
    EnvSecrets();
    Approval();
    Limits();
    Layers();
    if (parent_ != nullptr) WeakensParent();
    Outputs();  // issue 32
    std::stable_sort(out_.begin(), out_.end(), [](const Finding& a, const Finding& b) {
      return std::tie(a.risk, a.rule_id) < std::tie(b.risk, b.rule_id);
    });
    return std::move(out_);
  }

 private:
  const Policy& p_;
  const Policy* parent_;
  Engine engine_;
  Location top_;  // the profile's own file, for findings about something missing
  std::vector<Finding> out_;

  void Add(std::string_view id, Risk risk, std::string message, Location loc) {
    out_.push_back({id, risk, std::move(message), loc.valid() ? loc : top_});
  }
  bool Allowed(const Decision& d) const { return engine_.Effective(d.verdict) == Verdict::kAllow; }

  void Network() {
    if (p_.network.value == NetworkMode::kNone) return;
    if (p_.egress.value) {
      Add(kNetwork, Risk::kLow,
          "network " + std::string(NetworkName(p_.network.value)) +
              " with a hosts section: connections its rules allow leave the sandbox through "
              "cagent's egress proxy, and an allowed host can receive whatever the sandbox can "
              "read (a host allow-list does not stop exfiltration to an allowed host)",
          p_.egress.loc);
      return;
    }
    Add(kNetwork, Risk::kLow,
        "network " + std::string(NetworkName(p_.network.value)) +
            ": commands can open sockets on the sandbox's own loopback interface (local test "
            "servers); nothing reaches other machines, but anything listening inside is reachable "
            "by every process of the run",
        p_.network.loc);
  }

  // `allow mcp:*` is the usual way to say "the wrapped server's tools are fine, the sandbox
  // confines them", so it is low (allowed) or info (asked): the reviewer should know that the
  // server decides which tools exist, and a tool it adds later is allowed too. An ask that nobody
  // is asked is CAGENT006's.
  void McpTools() {
    for (const ToolRule& r : p_.tools) {
      const Verdict effective = engine_.Effective(r.verdict);
      if (r.verdict == Verdict::kDeny || effective == Verdict::kDeny) continue;
      // Names have at least one character, so `*`, `?*` and `*?*` all match every name.
      const bool every = std::any_of(r.mcp_tools.begin(), r.mcp_tools.end(), [](const WordGlob& g) {
        const std::string& t = g.pattern();
        return t.find_first_not_of("*?") == std::string::npos &&
               std::count(t.begin(), t.end(), '?') <= 1;
      });
      if (!every) continue;
      const std::string rule = "tools: " + std::string(VerdictName(r.verdict)) + " " + r.text;
      Add(kAnyMcpTool, effective == Verdict::kAllow ? Risk::kLow : Risk::kInfo,
          "'" + rule + "' " + (effective == Verdict::kAllow ? "allows" : "asks a person for") +
              " every tool of a wrapped MCP server, including any the server adds later: only "
              "the sandbox confines what they do; list the tools you use (allow mcp:NAME) or deny "
              "the ones you do not",
          r.loc);
    }
  }

  void Hosts() {
    HostsOf(p_.hosts, "hosts: ", /*setup=*/false);
    // The setup block's own hosts reach the same internet, from a sandbox that also writes the
    // caches; nobody is asked during setup, so only its allows open anything.
    HostsOf(p_.setup.hosts, "setup hosts: ", /*setup=*/true);
  }

  void HostsOf(const std::vector<HostRule>& rules, const std::string& prefix, bool setup) {
    for (const HostRule& r : rules) {
      if (r.verdict == Verdict::kDeny || (setup && r.verdict == Verdict::kAsk)) continue;
      const std::string rule = prefix + std::string(VerdictName(r.verdict)) + " " + r.text;
      const bool allow = setup || engine_.Effective(r.verdict) == Verdict::kAllow;
      switch (r.pattern.kind) {
        case HostPattern::Kind::kAny:
          Add(kAnyHost, allow ? Risk::kHigh : Risk::kMedium,
              "'" + rule +
                  "' reaches every host on the internet: the allow-list no longer restricts "
                  "where data goes or where code comes from; name the hosts the task needs",
              r.loc);
          break;
        case HostPattern::Kind::kSuffix: {
          const std::string_view shared = SharedHostingSuffix(r.pattern.host);
          if (shared.empty()) break;
          Add(kSharedHosting, allow ? Risk::kMedium : Risk::kLow,
              "'" + rule + "' covers " + std::string(shared) +
                  ", where anyone can publish content: the sandbox can send data to, and fetch "
                  "code from, anyone's subdomain; name the exact hosts (e.g. "
                  "raw.githubusercontent.com) instead of a wildcard",
              r.loc);
          break;
        }
        case HostPattern::Kind::kAddress: {
          const std::string_view range = RestrictedRange(r.pattern.host);
          if (range.empty()) break;
          const bool host_services = range == "loopback" || range == "cloud metadata" ||
                                     range == "link-local" || range == "unspecified";
          Add(kInternalAddress, host_services ? Risk::kHigh : Risk::kMedium,
              "'" + rule + "' names a " + std::string(range) +
                  " address: the proxy runs outside the sandbox, so this reaches " +
                  (range == "cloud metadata" ? "the cloud's instance metadata (credentials)"
                   : host_services           ? "services of the host cagent runs on"
                                             : "machines of the local network") +
                  "; name a server the task needs, or run it inside the sandbox",
              r.loc);
          break;
        }
        case HostPattern::Kind::kName:
          break;
      }
    }
  }

  void Writable() {
    // One finding per statement (`read-write ~/.claude ~/.codex` is one decision), at its risk.
    struct Group {
      Risk risk = Risk::kInfo;
      Location loc;
      std::vector<std::string> paths;
    };
    std::vector<Group> groups;
    for (const MountRule& m : p_.mounts) {
      if (m.mode != MountMode::kReadWrite || m.path.base == PathBase::kWorkspace) continue;
      // The home directory and system trees hold what runs next time the user logs in or builds
      // (shell start-up files, git hooks, toolchains): writing there outlives the sandbox.
      bool home = m.path.base == PathBase::kHome;
      bool system = m.path.base == PathBase::kAbsolute;
      bool dot = home && (m.path.rel.empty() || m.path.rel.starts_with('.'));
      Risk risk = (home && m.path.rel.empty()) || dot || system ? Risk::kHigh : Risk::kMedium;
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const Group& g) { return SameStatement(g.loc, m.loc); });
      if (it == groups.end()) {
        groups.push_back({risk, m.loc, {}});
        it = groups.end() - 1;
      }
      it->risk = Stronger(it->risk, risk);
      it->paths.push_back(m.path.Text());
    }
    for (const Group& g : groups) {
      std::string list;
      for (const auto& path : g.paths) list += (list.empty() ? "" : " ") + path;
      Add(kWritable, g.risk,
          "read-write " + list +
              ": the agent can change files outside the workspace, and the changes outlive the "
              "run; mount them read-only, or copy what the task needs into the workspace",
          g.loc);
    }
  }

  // Two locations in the same statement line of the same file (the words of one statement).
  static bool SameStatement(const Location& a, const Location& b) {
    return a.valid() && b.valid() && a.file == b.file && a.line == b.line;
  }

  void Secrets() {
    struct Group {
      Risk risk = Risk::kInfo;
      std::string rule;
      Location loc;
      std::vector<std::string> paths;
    };
    std::vector<Group> groups;
    for (const auto& s : kSecretPaths) {
      Decision d = engine_.Path(Access::kRead, s.path);
      if (!Allowed(d)) continue;
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const Group& g) { return g.rule == d.rule && g.loc == d.loc; });
      if (it == groups.end()) {
        groups.push_back({s.risk, d.rule, d.loc, {}});
        it = groups.end() - 1;
      }
      it->risk = Stronger(it->risk, s.risk);
      it->paths.emplace_back(s.path);
    }
    for (const auto& g : groups) {
      std::string list;
      for (const auto& path : g.paths) list += (list.empty() ? "" : ", ") + path;
      Add(kSecrets, g.risk,
          "'" + g.rule + "' makes credentials readable inside the sandbox: " + list +
              " (the agent can copy them into the workspace or its output); hide them (e.g. "
              "`hide " +
              g.paths.front() + "`) or mount only what the tools need",
          g.loc);
    }
  }

  // Each pass pattern that lets a usual credential variable through (none of the scrub patterns
  // removing it). A pattern that passes any name at all (`pass *`) says so: the scrub list then
  // decides alone, and a credential under a name nobody listed (a connection string, a config
  // path) goes in.
  void EnvSecrets() {
    auto scrubbed = [&](std::string_view name) {
      return std::any_of(p_.env_scrub.begin(), p_.env_scrub.end(),
                         [&](const EnvPattern& e) { return e.name.Match(name); });
    };
    // One finding per `pass` statement, naming each of its patterns that lets credentials in.
    struct Group {
      Location loc;
      bool any = false;
      std::vector<std::string> patterns;
      std::vector<std::string> names;
    };
    std::vector<Group> groups;
    for (const EnvPattern& pass : p_.env_pass) {
      std::vector<std::string> names;
      for (std::string_view name : kSecretVariables) {
        if (pass.name.Match(name) && !scrubbed(name)) names.emplace_back(name);
      }
      const bool any = pass.name.Match("CAGENT_AUDIT_ANY_VARIABLE") && pass.name.Match("x");
      if (names.empty() && !any) continue;
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const Group& g) { return SameStatement(g.loc, pass.loc); });
      if (it == groups.end()) {
        groups.push_back({pass.loc, false, {}, {}});
        it = groups.end() - 1;
      }
      it->any = it->any || any;
      it->patterns.push_back(pass.name.pattern());
      for (auto& n : names) {
        if (std::find(it->names.begin(), it->names.end(), n) == it->names.end()) {
          it->names.push_back(std::move(n));
        }
      }
    }
    for (const Group& g : groups) {
      std::string patterns;
      for (const auto& p : g.patterns) patterns += (patterns.empty() ? "" : " ") + p;
      std::string list;
      for (const auto& n : g.names) list += (list.empty() ? "" : ", ") + n;
      std::string message = "'pass " + patterns + "' ";
      message += g.any ? "passes every variable of the caller's environment that no scrub "
                         "pattern removes"
                       : "passes credential variables";
      if (!list.empty()) message += "; not scrubbed: " + list;
      message +=
          "; the agent can read them and copy them into the workspace or its output. Pass only "
          "the names the tools need, or add `scrub` patterns (base scrubs *_TOKEN, *_KEY, "
          "*SECRET*, *PASSWORD*, ...)";
      Add(kEnvSecrets, Risk::kMedium, std::move(message), g.loc);
    }
  }

  // ---- outputs (issue 32) ----

  // Each outputs glob, info; low when it also covers where a project keeps its sources (a new
  // file the agent writes there would be left out of the patch).
  void Outputs() {
    static constexpr std::string_view kSourceProbes[] = {
        "src/main.c", "src/lib.rs", "main.go", "app.py", "lib/index.js", "src/Main.java",
    };
    for (const OutputRule& o : p_.outputs) {
      std::string covered;
      for (std::string_view probe : kSourceProbes) {
        if (UnderOutputs({o}, probe)) covered += (covered.empty() ? "" : ", ") + std::string(probe);
      }
      if (covered.empty()) {
        Add(kOutputs, Risk::kInfo,
            "'outputs " + o.pattern +
                "': files git does not track at or below it are left out of the agent's patch; "
                "each run reports how many and where (result.json: left_out)",
            o.loc);
      } else {
        Add(kOutputs, Risk::kLow,
            "'outputs " + o.pattern + "' also covers source files (" + covered +
                "): a new file the agent writes there is left out of the patch (the run names "
                "it with a warning); name only the directories builds write",
            o.loc);
      }
    }
  }

  void WorkspaceSecrets() {
    std::string list;
    for (auto probe : kWorkspaceSecretProbes) {
      if (Allowed(engine_.Path(Access::kRead, probe))) {
        list += (list.empty() ? "" : ", ") + std::string(probe);
      }
    }
    if (list.empty()) return;
    Add(kWorkspaceSecrets, Risk::kMedium,
        "no filesystem rule denies secret files in the workspace; readable: " + list +
            "; add `filesystem { deny **/.env **/.env.* **/*.pem **/*.key **/id_rsa* **/.netrc }` "
            "or extend base",
        p_.workspace_writable.loc);
  }

  void Interpreters() {
    const std::vector<std::string> any = {"cagent-audit-any-command"};
    Decision d_any = engine_.Command(any);
    if (Allowed(d_any) && p_.command_default.value == Verdict::kAllow &&
        d_any.loc == p_.command_default.loc) {
      // Deliberate and documented (docs/policy-language.md, `commands`): said once, plainly.
      Add(kInterpreter, Risk::kLow,
          "'commands: default allow' lets every program no rule names run: the sandbox (its "
          "filesystem view, network and limits), not the command list, is the boundary; the deny "
          "rules name intents, which a program the agent writes itself can still carry out",
          d_any.loc);
    } else if (Allowed(d_any)) {
      Add(kInterpreter, Risk::kMedium,
          "'" + d_any.rule +
              "' allows every command: the command list no longer restricts anything, only the "
              "sandbox does",
          d_any.loc);
    }
    struct Group {
      Risk risk = Risk::kInfo;
      std::string rule;
      Location loc;
      std::vector<std::string> names;
    };
    std::vector<Group> groups;
    for (const auto& r : kRunners) {
      const std::vector<std::string> argv = {std::string(r.name), "-c", "true"};
      Decision d = engine_.Command(argv);
      if (!Allowed(d) || (d.rule == d_any.rule && d.loc == d_any.loc)) continue;
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const Group& g) { return g.rule == d.rule && g.loc == d.loc; });
      if (it == groups.end()) {
        groups.push_back({r.risk, d.rule, d.loc, {}});
        it = groups.end() - 1;
      }
      it->risk = Stronger(it->risk, r.risk);
      it->names.push_back(std::string(r.name) + " [" + std::string(r.kind) + "]");
    }
    // `allow workspace:*` runs whatever the agent writes or builds in the workspace.
    const std::vector<std::string> program = {"./cagent-audit-workspace-program"};
    if (Decision d = engine_.Command(program); Allowed(d) && d.rule != d_any.rule) {
      groups.push_back({Risk::kLow, d.rule, d.loc, {"programs in the workspace [runner]"}});
    }
    for (const auto& g : groups) {
      std::string list;
      for (const auto& n : g.names) list += (list.empty() ? "" : ", ") + n;
      Add(kInterpreter, g.risk,
          "'" + g.rule + "' allows " + list +
              ": running code it is given is equivalent to allowing everything the sandbox "
              "allows; the sandbox, not the command list, is the boundary",
          g.loc);
    }
  }

  void Approval() {
    // The same list `cagent policy check` warns about (policy/language/coherence.h).
    const std::vector<AskRule> asks = AskRules(p_);
    switch (p_.approval.value) {
      case ApprovalMode::kNeverAsk:
        for (const AskRule& ask : asks) {
          Add(kSilentAsk, Risk::kInfo,
              "'" + ask.rule +
                  "' is a silent denial under approval never-ask: nobody is asked and the request "
                  "is denied; use approval on-request to be asked, or write deny to say so",
              ask.loc);
        }
        break;
      case ApprovalMode::kAuto:
        Add(kAutoApproval, asks.empty() ? Risk::kMedium : Risk::kHigh,
            "approval auto: every ask is allowed without a person deciding" +
                (asks.empty()
                     ? std::string(" (this profile has no ask rules yet; a child's will "
                                   "be allowed too)")
                     : " (" + std::to_string(asks.size()) + " ask rules here become allows)") +
                "; use on-request, or never-ask for unattended runs",
            p_.approval.loc);
        break;
      case ApprovalMode::kOnRequest:
        break;
    }
  }

  void Limits() {
    for (std::size_t i = 0; i < p_.limits.size(); ++i) {
      const auto l = static_cast<Limit>(i);
      const LimitValue& v = p_.limits[i];
      if (v.bounded()) continue;
      // A money budget needs the user's prices (models.toml), which a profile cannot know; the
      // model-token budget bounds what a run spends without them.
      if (l == Limit::kModelCost) continue;
      std::string name(LimitName(l));
      if (IsEgressBudget(l)) {
        // Without the proxy there is nothing to count; with it, the allow-list bounds where
        // traffic goes, and a budget only how much.
        if (!p_.egress.value || !HasHostAllows()) continue;
        Add(kUnbounded, Risk::kInfo,
            (v.unlimited ? name + " is unlimited" : "no " + name + " budget is set") +
                ": traffic to the allowed hosts is bounded only by the run's time; set `limits { " +
                name + " ... }`",
            v.loc);
        continue;
      }
      Risk risk = IsResourceLimit(l) ? Risk::kMedium : Risk::kLow;
      Add(kUnbounded, risk,
          (v.unlimited ? name + " is unlimited" : "no " + name + " limit is set") +
              ": a run (or a runaway command) is bounded only by the caller's patience; set "
              "`limits { " +
              name + " ... }`",
          v.loc);
    }
  }

  bool HasHostAllows() const {
    return std::any_of(p_.hosts.begin(), p_.hosts.end(),
                       [](const HostRule& r) { return r.verdict != Verdict::kDeny; });
  }

  void Layers() {
    for (const auto& be : p_.best_effort) {
      std::string consequence =
          be.value == Requirement::kLandlock
              ? "without Landlock only the mount view confines file access"
              : "without a delegated cgroup v2 the memory and pids limits are not enforced";
      Add(kBestEffort, be.value == Requirement::kLandlock ? Risk::kMedium : Risk::kLow,
          "best-effort " + std::string(RequirementName(be.value)) + ": " + consequence +
              " (the run reports the downgrade and goes ahead); `require " +
              std::string(RequirementName(be.value)) + "` refuses to run instead",
          be.loc);
    }
    for (Requirement r : {Requirement::kLandlock, Requirement::kSeccomp}) {
      if (p_.Requires(r) || p_.IsBestEffort(r)) continue;
      std::string name(RequirementName(r));
      Add(kNotRequired, Risk::kMedium,
          "no `require " + name + "`: the profile does not say the run must fail when " + name +
              " cannot be applied; add `require " + name + "` (base has it)",
          {});
    }
  }

  // Additions are what a child is for; overriding a value its parent set is what reviewers should
  // see first.
  void WeakensParent() {
    const std::string parent = parent_->name;
    // One finding per statement: the words a rule adds (`allow (make | cmake | ninja)`) are one
    // widening written once, not one each.
    struct Group {
      Risk risk;
      std::string area;
      Location loc;
      std::vector<std::string> texts;
    };
    std::vector<Group> groups;
    for (const DiffEntry& e : Diff(*parent_, p_)) {
      if (e.direction != Direction::kWider) continue;
      bool addition = e.change == Change::kAdded &&
                      (e.area == "mounts" || e.area == "commands" || e.area == "tools" ||
                       e.area == "environment" || e.area == "hosts");
      const Risk risk = addition ? Risk::kInfo : Risk::kMedium;
      const Location loc = e.side == DiffSide::kTo ? e.loc : Location{};
      auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
        return SameStatement(g.loc, loc) && g.area == e.area && g.risk == risk;
      });
      if (it == groups.end()) {
        groups.push_back({risk, e.area, loc, {}});
        it = groups.end() - 1;
      }
      it->texts.push_back(e.text);
      // The statement's first word, not whichever word's change came first.
      if (loc.valid() && loc.col < it->loc.col) it->loc = loc;
    }
    for (const Group& g : groups) {
      std::string list;
      for (const std::string& t : g.texts) list += (list.empty() ? "" : "; ") + t;
      Add(kWeakensParent, g.risk,
          "'" + p_.name + "' widens its parent '" + parent + "': " + g.area + ": " + list, g.loc);
    }
  }
};

}  // namespace

std::string_view RiskName(Risk r) {
  switch (r) {
    case Risk::kHigh:
      return "high";
    case Risk::kMedium:
      return "medium";
    case Risk::kLow:
      return "low";
    case Risk::kInfo:
      return "info";
  }
  return "info";
}

std::span<const AuditRule> AuditRules() { return kRules; }

std::vector<Finding> Audit(const Policy& policy, const Policy* parent) {
  return Auditor(policy, parent).Run();
}

}  // namespace cagent::policy
