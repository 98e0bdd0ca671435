#include "policy/language/engine.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>

#include "policy/match/host_secrets.h"
#include "policy/match/hosts.h"
#include "policy/match/shell.h"

namespace cagent::policy {
namespace {

// Paths every sandbox has whatever the profile says (launcher/sandbox/mountns.cc builds them).
struct BuiltinMount {
  std::string_view path;
  MountMode mode;
  std::string_view rule;
};
constexpr BuiltinMount kBuiltinMounts[] = {
    {"/tmp", MountMode::kReadWrite, "built-in: private /tmp (a tmpfs, gone after the run)"},
    {"/proc", MountMode::kReadOnly, "built-in: /proc of the sandbox's own pid namespace"},
    {"/dev/null", MountMode::kReadWrite, "built-in: /dev/null"},
    {"/dev/zero", MountMode::kReadWrite, "built-in: /dev/zero"},
    {"/dev/full", MountMode::kReadWrite, "built-in: /dev/full"},
    {"/dev/random", MountMode::kReadOnly, "built-in: /dev/random"},
    {"/dev/urandom", MountMode::kReadOnly, "built-in: /dev/urandom"},
    {"/dev/tty", MountMode::kReadWrite, "built-in: /dev/tty"},
    {"/dev/stdin", MountMode::kReadWrite, "built-in: the command's standard streams"},
    {"/dev/stdout", MountMode::kReadWrite, "built-in: the command's standard streams"},
    {"/dev/stderr", MountMode::kReadWrite, "built-in: the command's standard streams"},
    {"/dev/fd", MountMode::kReadWrite, "built-in: the command's own descriptors"},
    // Host secrets that live in system trees are hidden whatever the profile mounts
    // (launcher/profile/spec.cc keeps them hidden too).
    {"/etc/shadow", MountMode::kHidden, "built-in: host secrets are always hidden"},
    {"/etc/gshadow", MountMode::kHidden, "built-in: host secrets are always hidden"},
    {"/etc/shadow-", MountMode::kHidden, "built-in: host secrets are always hidden"},
    {"/etc/gshadow-", MountMode::kHidden, "built-in: host secrets are always hidden"},
    {"/etc/sudoers", MountMode::kHidden, "built-in: host secrets are always hidden"},
    {"/etc/sudoers.d", MountMode::kHidden, "built-in: host secrets are always hidden"},
    {"/etc/ssh", MountMode::kHidden, "built-in: host secrets are always hidden"},
    {"/etc/ssl/private", MountMode::kHidden, "built-in: host secrets are always hidden"},
};

// Appends the components of `path` to `out`, lexically: "." and empty components are dropped,
// ".." removes the last component of `out` and cannot go above "/". `out` is an absolute
// normalised path without a trailing '/', or "" for the root.
void AppendComponents(std::string& out, std::string_view path) {
  std::size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view comp = path.substr(i, j - i);
    i = j;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") {
      std::size_t slash = out.rfind('/');
      out.resize(slash == std::string::npos ? 0 : slash);
      continue;
    }
    out += '/';
    out += comp;
  }
}

// Lexically normalises `path` (absolute): removes "." and empty components, resolves "..", which
// cannot go above "/". Returns "/" for the root.
std::string NormaliseAbsolute(std::string_view path) {
  std::string out;
  out.reserve(path.size());
  AppendComponents(out, path);
  if (out.empty()) out = "/";
  return out;
}

// NormaliseAbsolute(base + "/" + rel) for a normalised absolute `base`, without the join.
std::string NormaliseUnder(std::string_view base, std::string_view rel) {
  std::string out;
  out.reserve(base.size() + 1 + rel.size());
  if (base != "/") out = base;
  AppendComponents(out, rel);
  if (out.empty()) out = "/";
  return out;
}

// True if NormaliseAbsolute(path) == path: absolute, no empty, "." or ".." component, no trailing
// '/' (except the root itself). Lets an already normalised path be judged without a copy.
bool IsNormalisedAbsolute(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  if (path.size() == 1) return true;
  if (path.back() == '/') return false;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '/') continue;
    // path[i + 1] exists: the path does not end in '/'.
    std::size_t end = path.find('/', i + 1);
    std::string_view comp = path.substr(i + 1, end == std::string_view::npos ? end : end - i - 1);
    if (comp.empty() || comp == "." || comp == "..") return false;
  }
  return true;
}

// "a/b" is `base` itself or below it (component-wise), for absolute normalised paths.
bool Under(std::string_view path, std::string_view base) {
  if (base == "/") return true;
  return path.starts_with(base) && (path.size() == base.size() || path[base.size()] == '/');
}

std::string_view RelativeTo(std::string_view path, std::string_view base) {
  if (path.size() == base.size()) return {};
  return path.substr(base == "/" ? 1 : base.size() + 1);
}

// A rule about a directory covers what is inside it: the launcher hides or write-protects a
// matching directory as a whole, so the engine must judge everything below it the same way.
bool MatchesSelfOrAncestor(const PathGlob& glob, std::string_view path) {
  if (glob.Match(path)) return true;
  for (std::size_t slash = path.rfind('/'); slash != std::string_view::npos && slash > 0;
       slash = path.rfind('/', slash - 1)) {
    std::string_view ancestor = path.substr(0, slash);
    if (ancestor.empty() || ancestor == "/") break;
    if (glob.Match(ancestor)) return true;
  }
  return false;
}

// The text a literal word glob matches: its pattern without the escaping backslashes.
std::string Unescaped(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size());
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) ++i;
    out += pattern[i];
  }
  return out;
}

// False when `argv` may change the shell's directory to somewhere outside the workspace: a cd,
// pushd or popd, unless it is `cd DIR` with DIR a relative path without "..", "~", "-" or an
// expansion. True for every other command (it does not change the directory).
bool StaysInWorkspace(std::span<const std::string_view> argv) {
  const std::string_view name = argv[0];
  if (name == "pushd" || name == "popd") return false;
  if (name != "cd") return true;
  std::size_t k = 1;
  while (k < argv.size() && (argv[k] == "-L" || argv[k] == "-P" || argv[k] == "-e")) ++k;
  if (k < argv.size() && argv[k] == "--") ++k;
  if (k + 1 != argv.size()) return false;  // `cd` (home), or more operands than dash takes
  const std::string_view dir = argv[k];
  if (dir.empty() || dir == "-" || dir.starts_with('/') || dir.starts_with('~') ||
      dir.find('$') != std::string_view::npos) {
    return false;
  }
  for (std::size_t i = 0; i <= dir.size();) {
    std::size_t j = dir.find('/', i);
    if (j == std::string_view::npos) j = dir.size();
    if (dir.substr(i, j - i) == "..") return false;
    i = j + 1;
  }
  // CDPATH could send a relative cd elsewhere; the sandbox's environment has none unless a
  // profile passes or sets it (and then this is a name-level judgement, like every other).
  return true;
}

// The rule texts of decisions no profile rule made.
constexpr std::string_view kDefaultRule = "default";
constexpr std::string_view kShellRule = "shell";

// Variables that decide which program or which code an allowed command actually runs: an
// assignment to one makes "allow git" mean something else (PATH=./evil git, LD_PRELOAD=x.so git).
bool ChangesWhatRuns(std::string_view name) {
  // Interpreter option variables inject code into an allowed interpreter even when only a narrow
  // use of it is allowed (`allow python3 -m pytest`). Build variables (CC, MAKEFLAGS) are left
  // alone: builds run workspace code anyway, and `CC=clang make` is everyday work.
  constexpr std::string_view kExact[] = {
      "PATH",
      "IFS",
      "ENV",
      "BASH_ENV",
      "SHELLOPTS",
      "BASHOPTS",
      "PS4",
      "PROMPT_COMMAND",
      "GIT_EXEC_PATH",
      "GIT_SSH",
      "GIT_SSH_COMMAND",
      "GIT_CONFIG",
      "GIT_CONFIG_GLOBAL",
      "GIT_CONFIG_SYSTEM",
      "NODE_OPTIONS",
      "PYTHONSTARTUP",
      "PYTHONPATH",
      "PERL5OPT",
      "PERL5LIB",
      "RUBYOPT",
      "JAVA_TOOL_OPTIONS",
      "_JAVA_OPTIONS",
  };
  for (auto e : kExact) {
    if (name == e) return true;
  }
  return name.starts_with("LD_") || name.starts_with("GIT_CONFIG_") ||
         name.starts_with("BASH_FUNC_") || name.starts_with("DYLD_");
}

// `name` for a message: double-quoted, with bytes outside printable ASCII written as \xNN and at
// most 64 of them shown, so a hostile name cannot move a terminal's cursor or flood a log.
std::string PrintableName(std::string_view name) {
  constexpr std::size_t kShown = 64;
  std::string out = "\"";
  for (std::size_t i = 0; i < name.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      constexpr std::string_view kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (name.size() > kShown) out += "...";
  out += "\"";
  if (name.size() > kShown) out += " (" + std::to_string(name.size()) + " bytes)";
  return out;
}

// Programs that fetch a URL given as an argument (curl URL, wget URL, http GET URL).
bool IsUrlClient(std::string_view name) {
  // Asked of every command: most names are told apart by their first byte.
  if (name.size() < 2 || std::string_view("cwhxal").find(name[0]) == std::string_view::npos) {
    return false;
  }
  constexpr std::string_view kClients[] = {"curl", "wget",   "http",   "https", "xh",
                                           "xhs",  "httpie", "aria2c", "lynx",  "links"};
  return std::find(std::begin(kClients), std::end(kClients), name) != std::end(kClients);
}

// Programs that look a name up or probe a host given as an argument; a name they are given is a
// DNS query, which can carry data out by itself.
bool IsNameProbe(std::string_view name) {
  if (name.size() < 3 || std::string_view("ndhpt").find(name[0]) == std::string_view::npos) {
    return false;
  }
  constexpr std::string_view kProbes[] = {"nslookup", "dig",   "host",      "ping",
                                          "ping6",    "drill", "traceroute"};
  return std::find(std::begin(kProbes), std::end(kProbes), name) != std::end(kProbes);
}

// The host and port of an argument that is a URL ("https://u@h:8443/p", "--url=http://h/"),
// or nullopt when the argument is not one. `host` may hold an expansion ("$X.evil.example").
struct UrlTarget {
  std::string host;
  std::uint16_t port = 0;
};
std::optional<UrlTarget> UrlIn(std::string_view arg) {
  if (arg.starts_with("--url=")) arg.remove_prefix(6);
  const std::size_t sep = arg.find("://");
  if (sep == std::string_view::npos || sep == 0 || sep > 8) return std::nullopt;
  std::string scheme(arg.substr(0, sep));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme == "file" ||
      !std::all_of(scheme.begin(), scheme.end(), [](char c) { return std::isalpha(c) != 0; })) {
    return std::nullopt;  // a local file, or not a URL
  }
  // http and ws on 80, ftp on 21; every other scheme (https, wss, ...) is judged on 443.
  std::uint16_t port = 443;
  if (scheme == "http" || scheme == "ws") port = 80;
  if (scheme == "ftp") port = 21;
  std::string_view authority = arg.substr(sep + 3);
  authority = authority.substr(0, authority.find_first_of("/?#"));
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
    authority.remove_prefix(at + 1);
  }
  std::string_view host = authority;
  if (authority.starts_with('[')) {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return UrlTarget{std::string(authority), port};
    host = authority.substr(1, close - 1);
    authority.remove_prefix(close + 1);
  } else {
    const std::size_t colon = authority.rfind(':');
    host = authority.substr(0, colon);
    authority = colon == std::string_view::npos ? std::string_view{} : authority.substr(colon);
  }
  if (authority.starts_with(':')) {
    unsigned value = 0;
    const std::string_view digits = authority.substr(1);
    bool ok = !digits.empty() && digits.size() <= 5;
    for (char c : digits) {
      ok = ok && c >= '0' && c <= '9';
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (ok && value > 0 && value <= 65535) port = static_cast<std::uint16_t>(value);
  }
  return UrlTarget{std::string(host), port};
}

std::string_view BaseName(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// An interpreter that runs the program on its stdin: `python3`, `python3 -`, `node -`, `perl`,
// `ruby`, `php` with no script (options aside). Shells are marked by the parser
// (SimpleCommandView::stdin_is_code).
bool ReadsCodeFromStdin(std::span<const std::string_view> argv) {
  const std::string_view name = BaseName(argv[0]);
  constexpr std::string_view kInterpreters[] = {"python", "python2", "python3", "node", "nodejs",
                                                "perl",   "ruby",    "php",     "lua",  "deno",
                                                "bun",    "Rscript", "tclsh",   "pwsh"};
  const bool interpreter = std::find(std::begin(kInterpreters), std::end(kInterpreters), name) !=
                               std::end(kInterpreters) ||
                           (name.starts_with("python3.") && name.size() <= 10);
  if (!interpreter) return false;
  for (std::size_t k = 1; k < argv.size(); ++k) {
    const std::string_view a = argv[k];
    if (a == "-") return true;
    // Code given on the command line, or a module to run: not stdin.
    if (a == "-c" || a == "-e" || a == "-m" || a == "--eval" || a == "-p" || a == "--print" ||
        a == "-r" || a == "run" || a == "x") {
      return false;
    }
    if (!a.starts_with('-')) return false;  // a script file
  }
  return true;  // options only: the program is read from stdin
}

bool HasExpansion(std::string_view word) {
  return word.find('$') != std::string_view::npos || word.find('`') != std::string_view::npos;
}

}  // namespace

struct Engine::Outcome {
  Verdict verdict = Verdict::kDeny;
  // Point into the Engine's precomputed rule texts or into static strings.
  std::string_view rule;
  Location loc;
  std::string_view reason;  // a fixed text; ignored when `detail` is non-empty
  std::string detail;       // a reason built for this request (default denials, opaque shells)

  static Outcome Rule(Verdict v, std::string_view rule, Location loc, std::string_view reason) {
    return Outcome{v, rule, loc, reason, {}};
  }
  // The default deny, with a fixed reason or one built for this request.
  static Outcome Default(std::string_view reason) {
    return Outcome{Verdict::kDeny, kDefaultRule, {}, reason, {}};
  }
  static Outcome DefaultBecause(std::string detail) {
    return Outcome{Verdict::kDeny, kDefaultRule, {}, {}, std::move(detail)};
  }

  // Keeps the stronger of this and `other`; on a tie this one stands.
  void KeepStronger(Outcome&& other) {
    if (other.verdict > verdict) *this = std::move(other);
  }

  Decision ToDecision() && {
    return Decision{verdict, std::string(rule), loc,
                    detail.empty() ? std::string(reason) : std::move(detail)};
  }
};

Engine::Engine(const Policy& policy, Binding binding)
    : policy_(policy), bindings_(std::move(binding)) {
  bindings_.workspace = NormaliseAbsolute(bindings_.workspace);
  // No home (a caller without one): "~" names nothing, as in the sandbox's view, where ~ entries
  // are skipped. It must not become "/".
  if (!bindings_.home.empty()) bindings_.home = NormaliseAbsolute(bindings_.home);
  for (std::size_t i = 0; i < policy_.commands.size(); ++i) {
    const ArgPattern& first_element = policy_.commands[i].pattern.front();
    const auto& first = first_element.alternatives;
    // `workspace:` rules match paths, so they are checked for every command. A literal written
    // with an escape (`\[`) is indexed by the name it matches ("["), not by its text.
    bool literal_names =
        !first_element.workspace && std::all_of(first.begin(), first.end(), [](const WordGlob& g) {
          return g.IsLiteral() && Unescaped(g.pattern()).find('/') == std::string::npos;
        });
    if (literal_names) {
      for (const auto& g : first) by_name_.emplace_back(Unescaped(g.pattern()), i);
    } else {
      generic_.push_back(i);
    }
  }
  std::sort(by_name_.begin(), by_name_.end());
  {
    // by_name_ is sorted by bytes as unsigned char (std::string's order), so each first byte's
    // names are one run.
    const auto slot = [](const std::string& name) -> std::size_t {
      return name.empty() ? 0 : 1 + static_cast<unsigned char>(name[0]);
    };
    std::size_t k = 0;
    for (std::size_t s = 0; s < by_first_.size(); ++s) {
      while (k < by_name_.size() && slot(by_name_[k].first) < s) ++k;
      by_first_[s] = static_cast<std::uint32_t>(k);
    }
  }

  for (const auto& b : kBuiltinMounts) {
    views_.push_back({std::string(b.path), b.mode, std::string(b.rule), {}});
  }
  // The host secret set (policy/match/host_secrets.h) is hidden under the caller's home and at the
  // workspace's top level whatever the profile mounts (launcher/profile/spec.cc,
  // HideHostSecrets). A hidden view where the path is not shown anyway changes no verdict.
  for (std::string_view rel : HostSecretPaths()) {
    const std::string rule =
        "built-in: the host secret set is always hidden (" + std::string(rel) + ")";
    if (!bindings_.home.empty()) {
      views_.push_back({NormaliseUnder(bindings_.home, rel), MountMode::kHidden, rule, {}});
    }
    views_.push_back({NormaliseUnder(bindings_.workspace, rel), MountMode::kHidden, rule, {}});
  }
  for (const auto& m : policy_.mounts) {
    const std::string resolved = m.path.Resolve(bindings_.workspace, bindings_.home);
    if (resolved.empty()) continue;  // a ~ entry without a home: the view skips it too
    views_.push_back({NormaliseAbsolute(resolved), m.mode,
                      "filesystem: " + std::string(MountModeName(m.mode)) + " " + m.path.Text(),
                      m.loc});
  }
  // The workspace is bound last, over anything mounted at the same path.
  const auto& ws = policy_.workspace_writable;
  views_.push_back({bindings_.workspace, ws.value ? MountMode::kReadWrite : MountMode::kReadOnly,
                    ws.value ? "workspace read-write" : "workspace read-only", ws.loc});

  for (std::size_t i = 0; i < views_.size(); ++i) {
    ViewsAt& at = view_at_[views_[i].base];
    at.last = i;
    if (views_[i].mode == MountMode::kHidden) at.last_hidden = i;
    if (base_length_.size() <= views_[i].base.size()) {
      base_length_.resize(views_[i].base.size() + 1);
    }
    base_length_[views_[i].base.size()] = true;
  }

  for (const auto& r : policy_.commands) {
    command_rule_.push_back("commands: " + std::string(VerdictName(r.verdict)) + " " + r.text);
  }
  command_default_rule_ =
      "commands: default " + std::string(VerdictName(policy_.command_default.value));
  network_rule_ = "network " + std::string(NetworkName(policy_.network.value));
  for (const auto& r : policy_.path_rules) {
    path_rule_.push_back("filesystem: " + std::string(VerdictName(r.verdict)) +
                         (r.access == Access::kWrite ? " write " : " ") + r.text);
  }
  for (const auto& r : policy_.tools) {
    tool_rule_.push_back("tools: " + std::string(VerdictName(r.verdict)) + " " + r.text);
  }
  for (const auto& r : policy_.hosts) {
    host_rule_.push_back("hosts: " + std::string(VerdictName(r.verdict)) + " " + r.text);
  }
}

Verdict Engine::Effective(Verdict v) const {
  if (v != Verdict::kAsk) return v;
  switch (policy_.approval.value) {
    case ApprovalMode::kNeverAsk:
      return Verdict::kDeny;
    case ApprovalMode::kAuto:
      return Verdict::kAllow;
    case ApprovalMode::kOnRequest:
      return Verdict::kAsk;
  }
  return Verdict::kDeny;
}

Engine::Outcome Engine::DecideRequest(const Request& request) const {
  switch (request.kind) {
    case Request::Kind::kCommand:
      return DecideCommand(request.argv);
    case Request::Kind::kShell:
      return DecideShell(request.script);
    case Request::Kind::kPath:
      return DecidePath(request.access, request.path);
    case Request::Kind::kTool:
      return DecideTool(request.tool, request.path, request.script);
    case Request::Kind::kHost:
      return DecideHost(request.host, request.port);
    case Request::Kind::kMcpTool:
      return DecideMcpTool(request.mcp_tool);
    case Request::Kind::kHttp:
      return DecideHttp(request.host, request.port, request.method, request.path);
  }
  return Outcome::Default("unknown request kind");
}

Decision Engine::Decide(const Request& request) const {
  return DecideRequest(request).ToDecision();
}

Decision Engine::Decide(const Request& request, std::span<const std::string> resolved) const {
  Outcome best = DecideRequest(request);
  if (request.kind != Request::Kind::kTool) return std::move(best).ToDecision();
  for (const std::string& path : resolved) {
    if (best.verdict == Verdict::kDeny) break;
    Outcome d =
        DecideTool(request.tool, path.empty() ? std::string_view(".") : path, request.script);
    if (d.verdict > best.verdict) best = std::move(d);
  }
  return std::move(best).ToDecision();
}

Decision Engine::Command(std::span<const std::string> argv) const {
  return DecideCommand(argv).ToDecision();
}

Decision Engine::Shell(std::string_view script) const { return DecideShell(script).ToDecision(); }

std::vector<Engine::ShellPart> Engine::ShellParts(std::string_view script) const {
  std::vector<ShellPart> parts;
  (void)DecideShell(script, &parts);
  return parts;
}

Decision Engine::Path(Access access, std::string_view path) const {
  return DecidePath(access, path).ToDecision();
}

Decision Engine::Host(std::string_view host, std::uint16_t port) const {
  return DecideHost(host, port).ToDecision();
}

Decision Engine::McpTool(std::string_view name) const { return DecideMcpTool(name).ToDecision(); }

Engine::Outcome Engine::DecideMcpTool(std::string_view name) const {
  // Checked before the rules: `allow mcp:*` matches any string, and a name outside the MCP
  // alphabet is one no rule could single out (and would reach the audit log and terminals as it
  // came from the client).
  if (!IsMcpToolName(name)) {
    return Outcome::DefaultBecause(
        "the MCP tool name " + PrintableName(name) +
        " is not a valid MCP tool name (1 to 128 characters of A-Z a-z 0-9 _ - .), so no rule "
        "can name it; cagent refuses calls of such tools");
  }
  Outcome best;
  bool matched = false;
  for (std::size_t i = 0; i < policy_.tools.size(); ++i) {
    const ToolRule& r = policy_.tools[i];
    if (r.mcp_tools.empty() || (matched && r.verdict <= best.verdict)) continue;
    if (std::none_of(r.mcp_tools.begin(), r.mcp_tools.end(),
                     [&](const WordGlob& g) { return g.Match(name); })) {
      continue;
    }
    matched = true;
    std::string_view reason;
    switch (r.verdict) {
      case Verdict::kAllow:
        reason = "the profile allows this MCP tool";
        break;
      case Verdict::kAsk:
        reason = "the profile asks a person before this MCP tool call";
        break;
      case Verdict::kDeny:
        reason = "the profile forbids this MCP tool";
        break;
    }
    best = Outcome::Rule(r.verdict, tool_rule_[i], r.loc, reason);
    if (best.verdict == Verdict::kDeny) break;
  }
  if (matched) return best;
  std::string detail = "no tools rule allows MCP tool '" + std::string(name) +
                       "'; to allow it, write `allow mcp:" + std::string(name) +
                       "` in the profile's tools section";
  // A wrapped server may have a tool named like one of cagent's own (server-filesystem has
  // read_file); `allow read_file` is about cagent's tool only.
  if (ParseTool(name)) {
    detail += " (a bare '" + std::string(name) +
              "' in tools names cagent's own tool, not the wrapped server's)";
  }
  return Outcome::DefaultBecause(std::move(detail));
}

Engine::Outcome Engine::DecideHost(std::string_view host, std::uint16_t port) const {
  const std::optional<std::string> normalized = NormalizeHost(host);
  if (!normalized) {
    return Outcome::DefaultBecause("'" + std::string(host) +
                                   "' is not a valid host name or IP address");
  }
  return DecideNormalizedHost(*normalized, port);
}

Engine::Outcome Engine::DecideNormalizedHost(std::string_view host, std::uint16_t port) const {
  if (port == 0) return Outcome::Default("port 0 names no service");
  bool matched = false;
  Outcome best = DecideConnectionRules(host, port, &matched);
  if (matched) return best;
  // No rule without a method names the host: method and path rules that allow or ask make the
  // connection possible, and each of its requests is decided on its own (DecideHttp). Their deny
  // rules refuse requests, never the connection.
  for (std::size_t i = 0; i < policy_.hosts.size(); ++i) {
    const HostRule& r = policy_.hosts[i];
    if (!r.HasMethod() || r.verdict == Verdict::kDeny) continue;
    if (!r.pattern.MatchesPort(port) || !r.pattern.MatchesHost(host)) continue;
    return Outcome::Rule(Verdict::kAllow, host_rule_[i], r.loc,
                         "no hosts rule without a method names this host, but method and path "
                         "rules do: the connection is allowed, and each request on it is decided "
                         "by those rules (a request none of them matches is refused)");
  }
  if (!policy_.egress.value) {
    return Outcome::DefaultBecause(
        "the profile has no hosts section, so nothing leaves the sandbox (network " +
        std::string(NetworkName(policy_.network.value)) + "); a hosts { allow ... } section " +
        "turns the egress proxy on");
  }
  return Outcome::DefaultBecause("no hosts rule allows " + HostPortText(host, port));
}

Engine::Outcome Engine::DecideConnectionRules(std::string_view host, std::uint16_t port,
                                              bool* matched_out) const {
  Outcome best;
  bool matched = false;
  for (std::size_t i = 0; i < policy_.hosts.size(); ++i) {
    const HostRule& r = policy_.hosts[i];
    if (r.HasMethod() || (matched && r.verdict <= best.verdict)) continue;
    if (!r.pattern.MatchesPort(port) || !r.pattern.MatchesHost(host)) continue;
    matched = true;
    std::string_view reason;
    switch (r.verdict) {
      case Verdict::kAllow:
        reason = "the profile allows connections to this host";
        break;
      case Verdict::kAsk:
        reason = "the profile asks a person before connecting to this host";
        break;
      case Verdict::kDeny:
        reason = "the profile forbids connections to this host";
        break;
    }
    best = Outcome::Rule(r.verdict, host_rule_[i], r.loc, reason);
    if (best.verdict == Verdict::kDeny) break;
  }
  *matched_out = matched;
  return best;
}

namespace {

// Whether a request path has a "." or ".." segment, written plainly or percent-encoded ("%2e",
// "%2E."): the server resolves it, so "/org/repo.git/../other" would reach another repository
// through a rule for /org/repo.git/*. Such a path is refused wherever method and path rules apply.
bool HasDotSegment(std::string_view path) {
  std::size_t from = 0;
  while (from <= path.size()) {
    std::size_t end = path.find('/', from);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view segment = path.substr(from, end - from);
    std::size_t dots = 0;
    bool only_dots = !segment.empty();
    for (std::size_t i = 0; i < segment.size() && only_dots; ++i) {
      if (segment[i] == '.') {
        ++dots;
      } else if (segment[i] == '%' && i + 2 < segment.size() && segment[i + 1] == '2' &&
                 (segment[i + 2] == 'e' || segment[i + 2] == 'E')) {
        ++dots;
        i += 2;
      } else {
        only_dots = false;
      }
    }
    if (only_dots && dots <= 2) return true;
    from = end + 1;
  }
  return false;
}

}  // namespace

Decision Engine::Http(std::string_view host, std::uint16_t port, std::string_view method,
                      std::string_view path) const {
  return DecideHttp(host, port, method, path).ToDecision();
}

Engine::Outcome Engine::DecideHttp(std::string_view host, std::uint16_t port,
                                   std::string_view method, std::string_view path) const {
  const std::optional<std::string> normalized = NormalizeHost(host);
  if (!normalized) {
    return Outcome::DefaultBecause(PrintableName(host) + " is not a valid host name or IP address");
  }
  if (port == 0) return Outcome::Default("port 0 names no service");
  // Methods are case-sensitive (RFC 9110), but a server may take `delete` for DELETE: rules match
  // without regard to case, and messages show the method in uppercase.
  std::string upper(method);
  for (char& c : upper) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  bool connection_matched = false;
  Outcome connection = DecideConnectionRules(*normalized, port, &connection_matched);
  // A connection rule's deny refuses the connection, so no request on it is ever read.
  if (connection_matched && connection.verdict == Verdict::kDeny) return connection;
  bool has_method_rules = false;
  for (const HostRule& r : policy_.hosts) {
    if (r.HasMethod() && r.pattern.MatchesPort(port) && r.pattern.MatchesHost(*normalized)) {
      has_method_rules = true;
      break;
    }
  }
  if (has_method_rules) {
    if (!IsRuleMethod(upper)) {
      return Outcome::DefaultBecause("'" + PrintableName(method) + "' is not an HTTP method");
    }
    if (!path.starts_with('/')) {
      return Outcome::DefaultBecause(
          "the request's target " + PrintableName(path) +
          " is not a path starting with '/', so the method and path rules cannot judge it");
    }
    if (HasDotSegment(path)) {
      return Outcome::DefaultBecause(
          "the request's path " + PrintableName(path) +
          " has a '.' or '..' segment, which the server resolves to another path than the one "
          "the method and path rules would judge; send the path without it");
    }
  }
  Outcome best;
  bool matched = false;
  for (std::size_t i = 0; i < policy_.hosts.size(); ++i) {
    const HostRule& r = policy_.hosts[i];
    if (!r.HasMethod() || (matched && r.verdict <= best.verdict)) continue;
    if (!r.pattern.MatchesPort(port) || !r.pattern.MatchesHost(*normalized)) continue;
    if (!r.MatchesRequest(method, path)) continue;
    matched = true;
    std::string_view reason;
    switch (r.verdict) {
      case Verdict::kAllow:
        reason = "the profile allows this request";
        break;
      case Verdict::kAsk:
        reason = "the profile asks a person before this request";
        break;
      case Verdict::kDeny:
        reason = "the profile forbids this request";
        break;
    }
    best = Outcome::Rule(r.verdict, host_rule_[i], r.loc, reason);
    if (best.verdict == Verdict::kDeny) break;
  }
  if (matched) return best;
  if (connection_matched) {
    // The proxy reads requests only on a connection it opened: one allowed, or asked about and
    // approved. Either way the request has the connection's allow.
    connection.verdict = Verdict::kAllow;
    connection.reason =
        has_method_rules
            ? "no method and path rule matches the request, so the connection's rule decides: "
              "a request on an allowed (or approved) connection is allowed"
            : "the connection's rule decides: a request on an allowed (or approved) connection "
              "is allowed";
    return connection;
  }
  if (!has_method_rules) return DecideNormalizedHost(*normalized, port);
  return Outcome::DefaultBecause(
      "no method and path rule matches " + upper + " " + PrintableName(path) + " on " +
      HostPortText(*normalized, port) +
      ", and no hosts rule without a method allows the host; add a rule for the request, e.g. "
      "allow " +
      HostPortText(*normalized, port) + " " + upper + " " + QuoteWord(std::string(path)));
}

bool Engine::AddressNamed(std::string_view address_literal, std::uint16_t port) const {
  const std::optional<std::string> normalized = NormalizeHost(address_literal);
  if (!normalized || !IsAddressLiteral(*normalized)) return false;
  return std::any_of(policy_.hosts.begin(), policy_.hosts.end(), [&](const HostRule& r) {
    return r.verdict != Verdict::kDeny && r.pattern.kind == HostPattern::Kind::kAddress &&
           r.pattern.host == *normalized && r.pattern.MatchesPort(port);
  });
}

bool Engine::HostMayConnect(std::string_view host) const {
  const std::optional<std::string> normalized = NormalizeHost(host);
  if (!normalized) return false;
  constexpr std::array<std::uint16_t, 2> kDefaultPorts = {443, 80};
  for (const HostRule& r : policy_.hosts) {
    if (r.verdict == Verdict::kDeny || !r.pattern.MatchesHost(*normalized)) continue;
    if (r.pattern.port) {
      if (DecideNormalizedHost(*normalized, *r.pattern.port).verdict != Verdict::kDeny) return true;
      continue;
    }
    for (const std::uint16_t p : kDefaultPorts) {
      if (DecideNormalizedHost(*normalized, p).verdict != Verdict::kDeny) return true;
    }
  }
  return false;
}

template <typename Word>
Engine::Outcome Engine::DecideArgv(std::span<const Word> argv, bool in_workspace) const {
  if (argv.empty() || argv[0].empty()) return Outcome::Default("empty command");
  Outcome best;
  bool matched = false;
  bool skipped_workspace_rule = false;
  auto consider = [&](std::size_t index) {
    const CommandRule& rule = policy_.commands[index];
    if (!rule.Matches(argv)) return;
    // After a `cd` that may have left the workspace, ./t may be any program on the machine: an
    // allow rule for workspace programs no longer applies (deny and ask rules still do).
    if (!in_workspace && rule.verdict == Verdict::kAllow && rule.pattern.front().workspace) {
      skipped_workspace_rule = true;
      return;
    }
    if (matched && rule.verdict <= best.verdict) return;
    matched = true;
    std::string_view reason = rule.reason;
    if (reason.empty()) {
      switch (rule.verdict) {
        case Verdict::kAllow:
          reason = "the profile allows this command";
          break;
        case Verdict::kAsk:
          reason = "the profile asks a person before running this command";
          break;
        case Verdict::kDeny:
          reason = "the profile forbids this command";
          break;
      }
    }
    best = Outcome::Rule(rule.verdict, command_rule_[index], rule.loc, reason);
  };
  {
    // By name; a path in command position is looked up by its last component, and
    // CommandRule::Matches decides whether a name rule applies to a path (deny/ask only).
    std::string_view name = argv[0];
    if (auto slash = name.rfind('/'); slash != std::string_view::npos) {
      name.remove_prefix(slash + 1);
    }
    const std::size_t slot = name.empty() ? 0 : 1 + static_cast<unsigned char>(name[0]);
    const auto begin = by_name_.begin() + by_first_[slot];
    const auto end = by_name_.begin() + by_first_[slot + 1];
    auto range = std::equal_range(begin, end, name, [](const auto& a, const auto& b) {
      if constexpr (std::is_same_v<std::decay_t<decltype(a)>, std::string_view>) {
        return a < std::string_view{b.first};
      } else {
        return std::string_view{a.first} < b;
      }
    });
    for (auto it = range.first; it != range.second; ++it) consider(it->second);
  }
  for (std::size_t i : generic_) consider(i);
  if (!matched) {
    if (skipped_workspace_rule) {
      return Outcome::DefaultBecause(
          "'" + std::string(argv[0]) +
          "' is run after a cd that may leave the workspace, so it may not be a program in the "
          "workspace; run it from the workspace (without the cd, or with a path from the top)");
    }
    if (policy_.command_default.value != Verdict::kDeny) {
      // `commands { default allow | ask }`: the kernel sandbox is the boundary for programs no
      // rule names; the rules are spent on the intents that matter.
      return Outcome::Rule(policy_.command_default.value, command_default_rule_,
                           policy_.command_default.loc,
                           policy_.command_default.value == Verdict::kAllow
                               ? "no commands rule names it, and the profile allows what the "
                                 "sandbox confines (commands default allow)"
                               : "no commands rule names it, and the profile asks a person "
                                 "about such commands (commands default ask)");
    }
    return Outcome::DefaultBecause("no commands rule allows '" + std::string(argv[0]) + "'");
  }
  return best;
}

Engine::Outcome Engine::DecideCommand(std::span<const std::string> argv) const {
  Outcome o = DecideArgv(argv, true);
  if (o.verdict != Verdict::kDeny) o.KeepStronger(DecideTargets(argv));
  return o;
}

Engine::Outcome Engine::DecideCommand(std::span<const std::string_view> argv,
                                      bool in_workspace) const {
  Outcome o = DecideArgv(argv, in_workspace);
  if (o.verdict != Verdict::kDeny) o.KeepStronger(DecideTargets(argv));
  return o;
}

template <typename Word>
Engine::Outcome Engine::DecideTargets(std::span<const Word> argv) const {
  if (argv.empty()) return Outcome::Rule(Verdict::kAllow, {}, {}, {});
  std::string_view name = argv[0];
  if (auto slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  Outcome acc = Outcome::Rule(Verdict::kAllow, {}, {}, {});
  if (IsUrlClient(name)) {
    // Only a host built from an expansion is refused here: a literal host the sandbox cannot
    // reach fails at once in the sandbox (the DNS stub answers "no such name" and cagent says
    // which network the profile has), and the egress proxy decides the ones it can.
    for (std::size_t k = 1; k < argv.size(); ++k) {
      auto target = UrlIn(argv[k]);
      if (!target || !(target->host.empty() || HasExpansion(target->host))) continue;
      return DecideTarget(target->host, target->port);
    }
  } else if (IsNameProbe(name)) {
    for (std::size_t k = 1; k < argv.size(); ++k) {
      const std::string_view arg = argv[k];
      if (arg.starts_with('-') || !HasExpansion(arg)) continue;
      Outcome o = Outcome::Rule(Verdict::kDeny, network_rule_, policy_.network.loc, {});
      o.detail = "'" + std::string(name) +
                 "' of a name built from an expansion ($X, $( )): the name itself is a DNS query "
                 "that can carry data out; look up names written literally";
      return o;
    }
  }
  return acc;
}

Engine::Outcome Engine::DecideTarget(std::string_view host, std::uint16_t port) const {
  if (host.empty() || HasExpansion(host)) {
    Outcome o = Outcome::Rule(Verdict::kDeny, network_rule_, policy_.network.loc, {});
    o.detail =
        "a connection to a host built from an expansion ($X, $( )) cannot be checked, and the "
        "name itself can carry data out; write the host literally";
    return o;
  }
  const std::optional<std::string> normalized = NormalizeHost(host);
  if (!normalized) {
    return Outcome::DefaultBecause("'" + PrintableName(host) +
                                   "' is not a valid host name or IP address");
  }
  const bool local = *normalized == "localhost" || normalized->ends_with(".localhost") ||
                     RestrictedRange(*normalized) == "loopback" ||
                     RestrictedRange(*normalized) == "unspecified";
  if (local && policy_.network.value != NetworkMode::kNone) {
    return Outcome::Rule(Verdict::kAllow, {}, {}, {});  // the sandbox's own loopback
  }
  if (!local && policy_.egress.value) {
    Outcome o = DecideNormalizedHost(*normalized, port);
    if (o.verdict == Verdict::kDeny) {
      std::string why = o.detail.empty() ? std::string(o.reason) : std::move(o.detail);
      o.detail = "the command connects to " + HostPortText(*normalized, port) +
                 ", which cagent's "
                 "egress proxy refuses: " +
                 why;
    }
    return o;
  }
  Outcome o = Outcome::Rule(Verdict::kDeny, network_rule_, policy_.network.loc, {});
  o.detail = "the command connects to " + HostPortText(*normalized, port) +
             ", which this sandbox " +
             (policy_.network.value == NetworkMode::kNone
                  ? std::string("cannot reach: it has no network at all (network none)")
                  : std::string("cannot reach: its network is loopback only (servers started "
                                "inside it), with no route to other machines")) +
             "; the command would fail. Work offline, or use a profile with a hosts section "
             "(backend-registries, frontend-registries; `cagent exec --allow-host HOST`)";
  return o;
}

Engine::Outcome Engine::DecidePipelines(std::span<const SimpleCommandView> commands) const {
  constexpr std::string_view kPipeRule = "shell: piped";
  // Producers: a downloader, or a command that prints the environment.
  struct Producer {
    std::uint32_t pipeline;
    std::uint16_t stage;
    bool download;  // else: prints the environment
    std::string_view name;
  };
  std::vector<Producer> producers;
  for (const SimpleCommandView& cmd : commands) {
    if (cmd.pipeline == 0 || cmd.argv.empty()) continue;
    const std::string_view name = BaseName(cmd.argv[0]);
    const bool download = IsUrlClient(name) || name == "fetch";
    const bool environment =
        (name == "env" || name == "printenv") && cmd.argv.size() == 1 && cmd.run_by.empty();
    const bool shell_vars = (name == "set" || name == "export" || name == "declare") &&
                            (cmd.argv.size() == 1 || cmd.argv[1] == "-p");
    if (download || environment || shell_vars) {
      producers.push_back({cmd.pipeline, cmd.stage, download, name});
    }
  }
  // eval "$(CMD)" runs CMD's output as code, as `CMD | sh` does.
  const bool evals_output =
      std::any_of(commands.begin(), commands.end(),
                  [](const SimpleCommandView& c) { return c.code_from_output; });
  if (evals_output) {
    for (const SimpleCommandView& cmd : commands) {
      if (cmd.run_by != "$( )" || cmd.argv.empty()) continue;
      const std::string_view name = BaseName(cmd.argv[0]);
      if (!IsUrlClient(name) && name != "fetch") continue;
      Outcome o = Outcome::Rule(Verdict::kDeny, kPipeRule, {}, {});
      o.detail = "a download ('" + std::string(name) +
                 "') run as code by eval runs code nobody has read; download it to a file in "
                 "the workspace, read it, then run it";
      return o;
    }
  }
  if (producers.empty()) return Outcome::Rule(Verdict::kAllow, {}, {}, {});
  for (const SimpleCommandView& cmd : commands) {
    if (cmd.pipeline == 0 || cmd.stdin_from != StdinSource::kPipe || cmd.argv.empty()) continue;
    const std::string_view name = BaseName(cmd.argv[0]);
    const bool runs_stdin = cmd.stdin_is_code || ReadsCodeFromStdin(cmd.argv);
    const bool sends = IsUrlClient(name);
    for (const Producer& p : producers) {
      if (p.pipeline != cmd.pipeline || p.stage >= cmd.stage) continue;
      if (p.download && runs_stdin) {
        Outcome o = Outcome::Rule(Verdict::kDeny, kPipeRule, {}, {});
        o.detail = "a download ('" + std::string(p.name) + "') piped into '" + std::string(name) +
                   "' runs code nobody has read; download it to a file in the workspace, read "
                   "it, then run it";
        return o;
      }
      if (!p.download && sends) {
        Outcome o = Outcome::Rule(Verdict::kDeny, kPipeRule, {}, {});
        o.detail = "the environment ('" + std::string(p.name) + "') piped into '" +
                   std::string(name) +
                   "' sends variables to another machine; a task never needs that";
        return o;
      }
    }
  }
  return Outcome::Rule(Verdict::kAllow, {}, {}, {});
}

Engine::Outcome Engine::DecideShell(std::string_view script, std::vector<ShellPart>* parts) const {
  ShellParseView parsed = ParseShellView(script);
  if (parsed.opaque) {
    // What cannot be read before it runs is never allowed unseen: denied under an allow-list,
    // asked (a person reads it) when the profile lets unnamed programs run.
    const bool ask = policy_.command_default.value != Verdict::kDeny;
    Outcome o = Outcome::Rule(ask ? Verdict::kAsk : Verdict::kDeny, kShellRule, {}, {});
    o.detail = std::move(parsed.opaque_reason) +
               (ask ? "; a person must read it, or run the commands it contains directly"
                    : "; run the commands it contains directly instead");
    return o;
  }
  if (parsed.commands.empty()) return Outcome::Default("empty command");
  // Intents no profile allows, read from the pipelines: a download piped into a shell or an
  // interpreter, and the environment piped into a network client.
  if (Outcome piped = DecidePipelines(parsed.commands); piped.verdict == Verdict::kDeny) {
    if (parts != nullptr) {
      Outcome copy = piped;
      parts->push_back({"pipeline", std::string(script), {}, std::move(copy).ToDecision()});
    }
    if (parts == nullptr) return piped;
  }
  Outcome acc;
  bool first = true;
  // Whether the shell's directory is still the workspace (where run_command starts), as far as
  // the commands so far tell; once a cd may have left it, it stays "may have left" for the rest
  // of the line (an over-approximation: subshells and || branches are not told apart).
  bool in_workspace = true;
  for (const SimpleCommandView& cmd : parsed.commands) {
    // Under `commands { default allow }` a program no rule names runs anyway, so a variable that
    // changes which program or code runs gains nothing a workspace script would not: only an
    // allow-list (default deny or ask) needs the check.
    for (const std::string_view assignment : policy_.command_default.value == Verdict::kAllow
                                                 ? std::span<const std::string_view>{}
                                                 : std::span(cmd.assignments)) {
      std::string_view name = assignment.substr(0, assignment.find('='));
      if (ChangesWhatRuns(name)) {
        Outcome o = Outcome::Rule(Verdict::kDeny, kShellRule, {}, {});
        o.detail = "setting " + std::string(name) +
                   " changes which program or code a command runs, so the command cannot "
                   "be judged by its name; run it without the assignment";
        return o;
      }
    }
    Outcome d = DecideCommand(cmd.argv, in_workspace);
    if (cmd.code_from_output && policy_.command_default.value != Verdict::kAllow) {
      // Code produced at run time: an allow-list cannot judge it (under default allow it is what
      // `CMD | sh` is, and the pipeline check above refused a download).
      const bool ask = policy_.command_default.value == Verdict::kAsk;
      Outcome o = Outcome::Rule(ask ? Verdict::kAsk : Verdict::kDeny, kShellRule, {}, {});
      o.detail = std::string(
                     "eval of a command's output runs code that cannot be checked before "
                     "it runs; ") +
                 (ask ? "a person must read it" : "run the commands it prints directly instead");
      d.KeepStronger(std::move(o));
    }
    if (parts != nullptr) {
      std::string text;
      for (const std::string_view w : cmd.argv) {
        if (!text.empty()) text += ' ';
        text += w;
      }
      Outcome copy = d;
      parts->push_back(
          {"command", std::move(text), std::string(cmd.run_by), std::move(copy).ToDecision()});
    }
    if (first) {
      acc = std::move(d);
      first = false;
    } else if (!cmd.run_by.empty() && d.verdict >= acc.verdict) {
      // The command a wrapper runs explains the line better than the wrapper, which is judged
      // (and allowed) already: `timeout 60 make test` is allowed by `allow make`.
      std::string why = d.detail.empty() ? std::string(d.reason) : std::move(d.detail);
      d.detail = why + " (run by '" + std::string(cmd.run_by) +
                 "', which is looked through: the command it runs is judged too)";
      acc = std::move(d);
    } else {
      acc.KeepStronger(std::move(d));
    }
    if (in_workspace && !cmd.argv.empty() && !StaysInWorkspace(cmd.argv)) {
      in_workspace = false;
    }
    for (const auto& w : cmd.writes) {
      Outcome o = DecideRedirect(Access::kWrite, w);
      if (parts != nullptr) {
        Outcome copy = o;
        parts->push_back({"write", std::string(w), {}, std::move(copy).ToDecision()});
      }
      acc.KeepStronger(std::move(o));
    }
    for (const auto& r : cmd.reads) {
      Outcome o = DecideRedirect(Access::kRead, r);
      if (parts != nullptr) {
        Outcome copy = o;
        parts->push_back({"read", std::string(r), {}, std::move(copy).ToDecision()});
      }
      acc.KeepStronger(std::move(o));
    }
    // `policy explain` shows every part; a decision stops at the first denial.
    if (acc.verdict == Verdict::kDeny && parts == nullptr) break;
  }
  return acc;
}

Engine::Outcome Engine::DecideRedirect(Access access, std::string_view target) const {
  // bash (not dash) opens a socket for /dev/tcp/HOST/PORT and /dev/udp/HOST/PORT: a connection.
  for (const std::string_view prefix : {"/dev/tcp/", "/dev/udp/"}) {
    if (!target.starts_with(prefix)) continue;
    const std::string_view rest = target.substr(prefix.size());
    const std::size_t slash = rest.find('/');
    unsigned port = 0;
    if (slash != std::string_view::npos) {
      for (char c : rest.substr(slash + 1)) {
        port = (c >= '0' && c <= '9' && port < 65536) ? port * 10 + (c - '0') : 65536;
      }
    }
    if (port == 0 || port > 65535) {
      Outcome o = Outcome::Rule(Verdict::kDeny, network_rule_, policy_.network.loc, {});
      o.detail = "a redirection to " + std::string(prefix) +
                 " opens a network connection, and this one names no port cagent can check";
      return o;
    }
    return DecideTarget(rest.substr(0, slash), static_cast<std::uint16_t>(port));
  }
  return DecidePath(access, target);
}

Engine::Outcome Engine::DecidePath(Access access, std::string_view path) const {
  if (path.empty()) return Outcome::Default("empty path");
  if (path.find('\0') != std::string_view::npos) {
    return Outcome::Default("path contains a NUL byte");
  }
  // One absolute, normalised form of the request; an absolute path that is already normalised
  // (what Tool passes) is used as it is.
  std::string normalised;
  std::string_view abs;
  if (path == "~" || path.starts_with("~/")) {
    if (bindings_.home.empty()) {
      return Outcome::Default("'~' names no directory in this run: the caller has no home");
    }
    normalised = NormaliseUnder(bindings_.home, path.substr(1));
    abs = normalised;
  } else if (IsNormalisedAbsolute(path)) {
    abs = path;
  } else if (path.starts_with('/')) {
    normalised = NormaliseAbsolute(path);
    abs = normalised;
  } else {
    normalised = NormaliseUnder(bindings_.workspace, path);
    abs = normalised;
    if (!Under(abs, bindings_.workspace)) {
      return Outcome::DefaultBecause("'" + std::string(path) + "' escapes the workspace");
    }
  }
  return DecideAbsolutePath(access, abs);
}

Engine::Outcome Engine::DecideAbsolutePath(Access access, std::string_view abs) const {
  // 1. The mount view: the longest mount that contains the path decides visibility. The views
  // that contain it are those mounted at one of its ancestors (or at the path itself), so look
  // those up, from "/" down to the path.
  const View* winner = nullptr;
  const View* hidden = nullptr;
  auto visit = [&](std::string_view base) {
    if (base.size() >= base_length_.size() || !base_length_[base.size()]) return;
    auto it = view_at_.find(base);
    if (it == view_at_.end()) return;
    // Later views are mounted over earlier ones at the same path (the workspace last), and a
    // deeper mount over a shallower one.
    winner = &views_[it->second.last];
    // A hidden tree stays hidden whatever is mounted below it (the launcher skips such mounts).
    // (The outermost hidden tree decides; at equal depth the profile's own rule is named.)
    if (hidden == nullptr && it->second.last_hidden != kNone) {
      hidden = &views_[it->second.last_hidden];
    }
  };
  visit("/");
  if (abs.size() > 1) {
    for (std::size_t end = abs.find('/', 1); end != std::string_view::npos;
         end = abs.find('/', end + 1)) {
      visit(abs.substr(0, end));
    }
    visit(abs);
  }
  if (hidden != nullptr) winner = hidden;
  Outcome acc;
  if (winner) {
    Verdict v = Verdict::kAllow;
    std::string_view reason;
    if (winner->mode == MountMode::kHidden) {
      v = Verdict::kDeny;
      // Built-in views carry no location: /etc/shadow and the host secret set.
      reason = winner->loc.valid() ? "the profile hides this path"
                                   : "cagent hides this path in every sandbox";
    } else if (winner->mode == MountMode::kReadOnly && access != Access::kRead) {
      v = Verdict::kDeny;
      reason = "mounted read-only";
    } else {
      reason = winner->mode == MountMode::kReadOnly ? "visible read-only" : "visible read-write";
    }
    acc = Outcome::Rule(v, winner->rule, winner->loc, reason);
  } else {
    acc = Outcome::DefaultBecause("'" + std::string(abs) +
                                  "' is outside the sandbox's view: only the paths the profile "
                                  "mounts exist inside");
  }

  // 2. Filesystem rules restrict what the view allows.
  bool in_ws = Under(abs, bindings_.workspace);
  bool in_home = !bindings_.home.empty() && Under(abs, bindings_.home);
  for (std::size_t i = 0; i < policy_.path_rules.size(); ++i) {
    const PathRule& r = policy_.path_rules[i];
    if (!r.Covers(access) || r.verdict <= acc.verdict) continue;
    std::string_view subject;
    switch (r.base) {
      case PathBase::kAbsolute:
        subject = abs;
        break;
      case PathBase::kHome:
        if (!in_home) continue;
        subject = RelativeTo(abs, bindings_.home);
        break;
      case PathBase::kWorkspace:
        if (!in_ws) continue;
        subject = RelativeTo(abs, bindings_.workspace);
        break;
    }
    if (!MatchesSelfOrAncestor(r.glob, subject)) continue;
    acc = Outcome::Rule(r.verdict, path_rule_[i], r.loc,
                        r.verdict == Verdict::kDeny
                            ? (r.access == Access::kWrite ? "the profile forbids writing this path"
                                                          : "the profile forbids this path")
                            : "the profile asks a person before this access");
  }
  return acc;
}

Engine::Outcome Engine::DecideTool(Tool tool, std::string_view path,
                                   std::string_view command) const {
  const std::string_view name = ToolName(tool);
  // The file tools reach only the workspace; judge their paths relative to it.
  std::string abs_path;
  std::string_view rel;
  bool has_path = !path.empty();
  if (has_path) {
    abs_path =
        path.starts_with('/') ? NormaliseAbsolute(path) : NormaliseUnder(bindings_.workspace, path);
    if (!Under(abs_path, bindings_.workspace)) {
      return Outcome::DefaultBecause("the file tools work only inside the workspace; '" +
                                     std::string(path) + "' is outside it");
    }
    rel = RelativeTo(abs_path, bindings_.workspace);
  }

  Outcome acc;
  bool matched = false;
  for (std::size_t i = 0; i < policy_.tools.size(); ++i) {
    const ToolRule& r = policy_.tools[i];
    if (!std::binary_search(r.tools.begin(), r.tools.end(), tool)) continue;
    if (!r.paths.empty()) {
      if (!has_path) continue;
      bool any = std::any_of(r.paths.begin(), r.paths.end(),
                             [&](const PathGlob& g) { return g.Match(rel); });
      if (!any) continue;
    }
    if (matched && r.verdict <= acc.verdict) continue;
    matched = true;
    acc = Outcome::Rule(r.verdict, tool_rule_[i], r.loc,
                        r.verdict == Verdict::kAllow ? "the profile allows this tool here"
                        : r.verdict == Verdict::kAsk
                            ? "the profile asks a person before this tool call"
                            : "the profile forbids this tool here");
  }
  if (!matched) return Outcome::DefaultBecause("no tools rule allows " + std::string(name));
  if (acc.verdict == Verdict::kDeny) return acc;
  if (tool == Tool::kRunCommand) {
    Outcome d = DecideShell(command);
    if (d.verdict >= acc.verdict) acc = std::move(d);
  } else if (has_path) {
    // The absolute form: a relative path starting with '~' names a file in the workspace, not
    // the home directory. It is already normalised, so DecidePath does not copy it again.
    Outcome d = DecidePath(ToolAccess(tool), abs_path);
    if (d.verdict >= acc.verdict) acc = std::move(d);
  }
  return acc;
}

}  // namespace cagent::policy
