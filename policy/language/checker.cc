#include "policy/language/checker.h"

#include <algorithm>
#include <map>
#include <span>

#include "common/duration.h"
#include "common/money.h"
#include "policy/match/hosts.h"
#include "policy/match/shell.h"

namespace cagent::policy {
namespace {

constexpr std::string_view kTopLevelKeys[] = {
    "description", "workspace", "filesystem", "network", "commands",    "tools",        "limits",
    "environment", "approval",  "verify",     "require", "best-effort", "examples",     "extends",
    "include",     "hosts",     "setup",      "cache",   "carry",       "git-identity",
    "outputs",      // issue 32
    "credentials",  // issue 36
};
constexpr std::string_view kFilesystemKeys[] = {"read-only", "read-write", "hide",
                                                "deny",      "ask",        "allow"};
constexpr std::string_view kRuleKeys[] = {"allow", "ask", "deny"};
constexpr std::string_view kCommandKeys[] = {"allow", "ask", "deny", "default"};
constexpr std::string_view kEnvironmentKeys[] = {"pass", "scrub", "set"};
constexpr std::string_view kExampleKeys[] = {"match", "not_match"};
constexpr std::string_view kCommandBlockKeys[] = {"match", "not_match", "reason"};
// A tools rule word naming an MCP tool of a wrapped server: mcp:GLOB.
constexpr std::string_view kMcpPrefix = "mcp:";

std::vector<std::string_view> Names(std::span<const std::string_view> keys) {
  return {keys.begin(), keys.end()};
}

std::string Describe(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kWord:
      return "'" + v.text + "'";
    case Value::Kind::kString:
      return "\"" + v.text + "\"";
    case Value::Kind::kGroup:
      return "a group";
  }
  return "a value";
}

std::optional<Verdict> ParseVerdict(std::string_view w) {
  if (w == "allow") return Verdict::kAllow;
  if (w == "ask") return Verdict::kAsk;
  if (w == "deny") return Verdict::kDeny;
  return std::nullopt;
}

bool IsEnvName(std::string_view n) {
  if (n.empty() || (n[0] >= '0' && n[0] <= '9')) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

class Checker {
 public:
  explicit Checker(Diagnostics& diags) : diags_(diags) {}

  CheckedProfile Run(const std::vector<const Statement*>& statements) {
    for (const Statement* st : statements) TopLevel(*st);
    return std::move(out_);
  }

 private:
  Diagnostics& diags_;
  CheckedProfile out_;
  // First location of each mount path in this profile (conflict and duplicate detection).
  std::map<PathRef, std::pair<MountMode, Location>> mounts_seen_;
  std::map<std::string, Location> scalars_seen_;
  // Each hosts rule (verdict, pattern text) of this profile, where first written.
  std::map<std::pair<Verdict, std::string>, Location> hosts_seen_;
  std::map<std::pair<Verdict, std::string>, Location> setup_hosts_seen_;

  void Err(const Location& loc, std::uint32_t len, std::string msg, std::string hint = {}) {
    diags_.Error(loc, len, std::move(msg), std::move(hint));
  }
  void ErrAt(const Statement& st, std::string msg, std::string hint = {}) {
    Err(st.loc, st.keyword_length, std::move(msg), std::move(hint));
  }
  void ErrAt(const Value& v, std::string msg, std::string hint = {}) {
    Err(v.loc, v.length, std::move(msg), std::move(hint));
  }

  void Unknown(const Statement& st, std::string_view where,
               std::span<const std::string_view> keys) {
    std::string hint;
    std::string guess = DidYouMean(st.keyword, Names(keys));
    if (!guess.empty()) {
      hint = "did you mean '" + guess + "'?";
    } else {
      hint = "valid keys here:";
      for (auto k : keys) hint += " " + std::string(k);
    }
    ErrAt(st, "unknown key '" + st.keyword + "' " + std::string(where), hint);
  }

  // A scalar key may be written once per profile.
  bool FirstTime(const Statement& st, const std::string& key) {
    auto [it, inserted] = scalars_seen_.emplace(key, st.loc);
    if (!inserted) {
      ErrAt(st, "'" + key + "' is set twice in this profile",
            "the first is at line " + std::to_string(it->second.line) + "; keep one");
    }
    return inserted;
  }

  bool NoBlock(const Statement& st) {
    if (!st.has_block) return true;
    Err(st.block_loc, 1, "'" + st.keyword + "' does not take a block");
    return false;
  }
  bool NeedBlock(const Statement& st) {
    if (st.has_block && st.args.empty()) return true;
    if (!st.has_block) {
      ErrAt(st, "'" + st.keyword + "' needs a block", "write: " + st.keyword + " { ... }");
    } else {
      ErrAt(st.args.front(), "'" + st.keyword + "' takes no arguments before its block");
    }
    return false;
  }
  // Exactly `n` plain (non-group) arguments.
  bool Args(const Statement& st, std::size_t n, std::string_view what) {
    if (st.args.size() != n) {
      ErrAt(st.args.size() > n ? st.args[n]
                               : Value{Value::Kind::kWord, "", {}, st.loc, st.keyword_length},
            "'" + st.keyword + "' takes " + std::string(what) + ", found " +
                std::to_string(st.args.size()) + " argument" + (st.args.size() == 1 ? "" : "s"));
      return false;
    }
    return NoGroups(st);
  }
  bool AtLeastOne(const Statement& st, std::string_view what) {
    if (st.args.empty()) {
      ErrAt(st, "'" + st.keyword + "' needs " + std::string(what));
      return false;
    }
    return true;
  }
  bool NoGroups(const Statement& st, std::size_t from = 0) {
    bool ok = true;
    for (std::size_t i = from; i < st.args.size(); ++i) {
      if (st.args[i].kind == Value::Kind::kGroup) {
        ErrAt(st.args[i], "alternatives '( | )' are only allowed in command patterns");
        ok = false;
      }
    }
    return ok;
  }

  // ---- top level ----

  void TopLevel(const Statement& st) {
    const std::string& k = st.keyword;
    if (k == "description") {
      if (NoBlock(st) && Args(st, 1, "one quoted string") && FirstTime(st, k)) {
        out_.layer.description = st.args[0].text;
        out_.description_loc = st.loc;
      }
    } else if (k == "workspace") {
      if (NoBlock(st) && Args(st, 1, "read-write or read-only") && FirstTime(st, k)) {
        const Value& v = st.args[0];
        if (v.text == "read-write" || v.text == "read-only") {
          out_.layer.workspace_writable = {v.text == "read-write", true, st.loc};
        } else {
          ErrAt(v, "unknown workspace mode " + Describe(v), "use read-write or read-only");
        }
      }
    } else if (k == "network") {
      Network(st);
    } else if (k == "approval") {
      if (NoBlock(st) && Args(st, 1, "a mode") && FirstTime(st, k)) {
        const Value& v = st.args[0];
        if (v.text == "never-ask") {
          out_.layer.approval = {ApprovalMode::kNeverAsk, true, st.loc};
        } else if (v.text == "on-request") {
          out_.layer.approval = {ApprovalMode::kOnRequest, true, st.loc};
        } else if (v.text == "auto") {
          out_.layer.approval = {ApprovalMode::kAuto, true, st.loc};
        } else {
          std::string guess = DidYouMean(v.text, {"never-ask", "on-request", "auto"});
          ErrAt(v, "unknown approval mode " + Describe(v),
                guess.empty() ? "use never-ask, on-request or auto"
                              : "did you mean '" + guess + "'?");
        }
      }
    } else if (k == "require" || k == "best-effort") {
      Requirements(st);
    } else if (k == "filesystem") {
      if (NeedBlock(st)) {
        for (const auto& s : st.block) Filesystem(s);
      }
    } else if (k == "commands") {
      if (NeedBlock(st)) {
        for (const auto& s : st.block) CommandStatement(s);
      }
    } else if (k == "tools") {
      if (NeedBlock(st)) {
        for (const auto& s : st.block) ToolStatement(s);
      }
    } else if (k == "hosts") {
      if (NeedBlock(st)) {
        // Even an empty section turns the egress proxy on: the first section says where.
        if (!out_.layer.egress.set) out_.layer.egress = {true, true, st.loc};
        for (const auto& s : st.block) HostStatement(s);
      }
    } else if (k == "limits") {
      if (NeedBlock(st)) {
        for (const auto& s : st.block) LimitStatement(s);
      }
    } else if (k == "environment") {
      if (NeedBlock(st)) {
        for (const auto& s : st.block) EnvironmentStatement(s);
      }
    } else if (k == "verify") {
      if (NeedBlock(st)) {
        for (const auto& s : st.block) VerifyStatement(s);
      }
    } else if (k == "setup") {
      if (NeedBlock(st) && FirstTime(st, k)) {
        out_.layer.setup.loc = st.loc;
        for (const auto& s : st.block) SetupStatement(s);
        if (out_.layer.setup.commands.empty()) {
          ErrAt(st, "'setup' has no run command", "e.g.: setup { run \"npm ci\" timeout 10m }");
        }
      }
    } else if (k == "cache") {
      CacheStatement(st);
    } else if (k == "carry") {
      CarryStatement(st);
    } else if (k == "git-identity") {
      if (NoBlock(st) && Args(st, 1, "caller or none") && FirstTime(st, k)) {
        const Value& v = st.args[0];
        if (v.text == "caller" || v.text == "none") {
          out_.layer.git_identity = {v.text == "caller", true, st.loc};
        } else {
          ErrAt(v, "unknown git identity " + Describe(v),
                "use caller (git inside sees your user.name and user.email) or none");
        }
      }
    } else if (k == "examples") {
      if (NeedBlock(st)) {
        for (const auto& s : st.block) ExampleStatement(s);
      }
    } else if (k == "outputs") {  // issue 32
      OutputsStatement(st);
    } else if (k == "credentials") {  // issue 36
      if (NeedBlock(st)) {
        for (const auto& s : st.block) CredentialStatement(s);
      }
    } else if (k == "extends" || k == "include") {
      // The loader consumes these at the top level of a file; reaching here means an included
      // fragment used one where the loader does not allow it (it reports that itself).
    } else {
      Unknown(st, "at the top level", kTopLevelKeys);
    }
  }

  void Network(const Statement& st) {
    if (!NoBlock(st) || !AtLeastOne(st, "a mode: none or loopback") || !NoGroups(st)) return;
    const Value& v = st.args[0];
    if (v.text == "hosts") {
      ErrAt(v, "'network hosts' is not a mode",
            "write 'network loopback' and a hosts { allow pypi.org } section: a hosts section "
            "turns cagent's egress proxy on");
      return;
    }
    if (!Args(st, 1, "one mode") || !FirstTime(st, "network")) return;
    if (v.text == "none") {
      out_.layer.network = {NetworkMode::kNone, true, st.loc};
    } else if (v.text == "loopback") {
      out_.layer.network = {NetworkMode::kLoopback, true, st.loc};
    } else {
      ErrAt(v, "unknown network mode " + Describe(v),
            "use none (no IP sockets) or loopback (lo only)");
    }
  }

  void Requirements(const Statement& st) {
    if (!NoBlock(st) || !AtLeastOne(st, "one or more layer names") || !NoGroups(st)) return;
    bool best_effort = st.keyword == "best-effort";
    for (const Value& v : st.args) {
      auto r = ParseRequirement(v.text);
      if (!r) {
        std::vector<std::string_view> names;
        names.reserve(static_cast<std::size_t>(Requirement::kCount));
        for (int i = 0; i < static_cast<int>(Requirement::kCount); ++i) {
          names.push_back(RequirementName(static_cast<Requirement>(i)));
        }
        std::string guess = DidYouMean(v.text, names);
        std::string all;
        for (auto n : names) all += (all.empty() ? "" : ", ") + std::string(n);
        ErrAt(v, "unknown layer " + Describe(v),
              guess.empty() ? "known: " + all : "did you mean '" + guess + "'?");
        continue;
      }
      if (best_effort && *r != Requirement::kLandlock && *r != Requirement::kCgroup) {
        ErrAt(v, "'" + v.text + "' cannot be best-effort",
              "only landlock and cgroup may be missing; everything else always fails closed");
        continue;
      }
      (best_effort ? out_.layer.best_effort : out_.layer.requirements).push_back({*r, true, v.loc});
    }
  }

  // ---- filesystem ----

  void Filesystem(const Statement& st) {
    const std::string& k = st.keyword;
    if (k == "read-only" || k == "read-write" || k == "hide") {
      if (!NoBlock(st) || !AtLeastOne(st, "one or more paths") || !NoGroups(st)) return;
      MountMode mode = k == "read-only"    ? MountMode::kReadOnly
                       : k == "read-write" ? MountMode::kReadWrite
                                           : MountMode::kHidden;
      for (const Value& v : st.args) Mount(v, mode);
    } else if (k == "deny" || k == "ask") {
      PathRuleStatement(st, *ParseVerdict(k));
    } else if (k == "allow") {
      ErrAt(st, "filesystem rules can only restrict",
            "paths are made visible with read-only or read-write; use deny or ask here");
    } else {
      Unknown(st, "in filesystem", kFilesystemKeys);
    }
  }

  void Mount(const Value& v, MountMode mode) {
    auto ref = ParsePathRef(v.text);
    if (!ref) {
      ErrAt(v, "invalid path " + Describe(v) + ": " + ref.error().op, ref.error().detail);
      return;
    }
    if (ref->base == PathBase::kAbsolute && ref->rel.empty()) {
      ErrAt(v, "'/' cannot be mounted whole", "name the trees the sandbox needs, e.g. /usr /etc");
      return;
    }
    if (ref->base == PathBase::kWorkspace && ref->rel.empty()) {
      ErrAt(v, "the workspace is not set here",
            "use 'workspace read-only' or 'workspace read-write' at the top level");
      return;
    }
    auto [it, inserted] = mounts_seen_.emplace(*ref, std::make_pair(mode, v.loc));
    if (!inserted) {
      if (it->second.first == mode) {
        diags_.Warning(v.loc, v.length, "path " + ref->Text() + " is listed twice",
                       "the first is at line " + std::to_string(it->second.second.line));
      } else {
        ErrAt(v,
              "path " + ref->Text() + " is both " + std::string(MountModeName(it->second.first)) +
                  " (line " + std::to_string(it->second.second.line) + ") and " +
                  std::string(MountModeName(mode)),
              "keep one; a subdirectory may differ from its parent, the same path may not");
      }
      return;
    }
    out_.layer.mounts.push_back({std::move(*ref), mode, v.loc});
  }

  // `deny [read|write] GLOB...` / `ask [read|write] GLOB...` [ { match P; not_match P } ]
  void PathRuleStatement(const Statement& st, Verdict verdict) {
    if (!AtLeastOne(st, "one or more path globs") || !NoGroups(st)) return;
    std::size_t i = 0;
    Access access = Access::kReadWrite;
    if (st.args[0].kind == Value::Kind::kWord &&
        (st.args[0].text == "read" || st.args[0].text == "write")) {
      access = st.args[0].text == "read" ? Access::kReadWrite : Access::kWrite;
      // "deny read" hides the path from reading, which also means no writing: a path that cannot
      // be read but can be overwritten is not hidden.
      i = 1;
      if (st.args.size() == 1) {
        ErrAt(st.args[0], "'" + st.keyword + " " + st.args[0].text + "' needs one or more globs");
        return;
      }
    }
    std::vector<PathRule> rules;
    for (; i < st.args.size(); ++i) {
      const Value& v = st.args[i];
      PathRule r;
      r.verdict = verdict;
      r.access = access;
      r.loc = v.loc;
      std::string text = v.text;
      std::string_view g = text;
      if (g == "~" || g.starts_with("~/")) {
        r.base = PathBase::kHome;
        g.remove_prefix(std::min<std::size_t>(2, g.size()));
      } else if (g.starts_with("~")) {
        ErrAt(v, "'~user' paths are not supported", "write ~/ for the caller's home");
        continue;
      } else if (g.starts_with("/")) {
        r.base = PathBase::kAbsolute;
      } else {
        r.base = PathBase::kWorkspace;
        if (g.starts_with("./")) g.remove_prefix(2);
      }
      std::string pattern(g);
      if (pattern.empty()) {
        ErrAt(v, "empty glob");
        continue;
      }
      auto glob = PathGlob::Compile(pattern);
      if (!glob) {
        ErrAt(v, "invalid glob " + Describe(v) + ": " + glob.error().op, glob.error().detail);
        continue;
      }
      r.glob = std::move(*glob);
      r.text = v.text;
      rules.push_back(std::move(r));
    }
    if (st.has_block) {
      for (const Statement& ex : st.block) {
        PathExample(ex, rules);
      }
    }
    for (auto& r : rules) out_.layer.path_rules.push_back(std::move(r));
  }

  void PathExample(const Statement& ex, const std::vector<PathRule>& rules) {
    bool want = ex.keyword == "match";
    if (!want && ex.keyword != "not_match") {
      Unknown(ex, "in a rule's examples", kExampleKeys);
      return;
    }
    if (!NoBlock(ex) || !Args(ex, 1, "one path")) return;
    const std::string& p = ex.args[0].text;
    bool matched = false;
    for (const auto& r : rules) {
      std::string_view path = p;
      if (r.base == PathBase::kHome) {
        if (!path.starts_with("~/")) continue;
        path.remove_prefix(2);
      } else if (r.base == PathBase::kWorkspace && path.starts_with("./")) {
        path.remove_prefix(2);
      }
      if (r.glob.Match(path)) matched = true;
    }
    if (matched != want) {
      ErrAt(ex.args[0],
            std::string("example failed: the rule ") + (want ? "does not match " : "matches ") +
                Describe(ex.args[0]),
            want ? "globs match the whole path: '*' stays within one directory, '**' spans "
                   "directories"
                 : "");
    }
  }

  // ---- commands ----

  void CommandStatement(const Statement& st) {
    if (st.keyword == "default") {
      CommandDefault(st);
      return;
    }
    auto verdict = ParseVerdict(st.keyword);
    if (!verdict) {
      Unknown(st, "in commands", kCommandKeys);
      return;
    }
    if (!AtLeastOne(st, "a command pattern, e.g. 'git status'")) return;
    CommandRule rule;
    rule.verdict = *verdict;
    rule.loc = st.args[0].loc;
    bool ok = true;
    for (std::size_t pos = 0; pos < st.args.size(); ++pos) {
      const Value& v = st.args[pos];
      if (IsAnyRun(v)) {
        if (pos == 0 || IsAnyRun(st.args[pos - 1]) || pos + 1 == st.args.size()) {
          ErrAt(v,
                pos == 0                    ? "a command pattern starts with the program's name"
                : pos + 1 == st.args.size() ? "'...' at the end of a pattern adds nothing"
                                            : "'...' written twice in a row",
                pos == 0 ? "write the name first: 'deny find ... -delete'"
                         : "patterns match by prefix: extra arguments are allowed anyway; '...' "
                           "stands for any run of arguments before the next element");
          ok = false;
          continue;
        }
        rule.text += " ...";
        ArgPattern gap;
        gap.any_run = true;
        rule.pattern.push_back(std::move(gap));
        continue;
      }
      if (IsWorkspaceProgram(v)) {
        auto el = CompileWorkspaceProgram(v, pos);
        if (!el) {
          ErrAt(v, el.error().op, el.error().detail);
          ok = false;
          continue;
        }
        if (!rule.text.empty()) rule.text += ' ';
        rule.text += QuoteWord(v.text);
        rule.pattern.push_back(std::move(*el));
        continue;
      }
      auto el = CompileArgPattern(v);
      if (!el) {
        ErrAt(v, el.error().op, el.error().detail);
        ok = false;
        continue;
      }
      if (!rule.text.empty()) rule.text += ' ';
      if (v.kind == Value::Kind::kGroup) {
        std::vector<std::string> alts;
        for (const auto& a : v.alternatives) alts.push_back(QuoteWord(a.text));
        std::sort(alts.begin(), alts.end());
        alts.erase(std::unique(alts.begin(), alts.end()), alts.end());
        rule.text += "(";
        for (std::size_t i = 0; i < alts.size(); ++i) rule.text += (i ? " | " : "") + alts[i];
        rule.text += ")";
      } else if (v.text == kAnyRun) {
        rule.text += "\"...\"";  // the literal word, quoted so that it reads back as one
      } else {
        rule.text += QuoteWord(v.text);
      }
      rule.pattern.push_back(std::move(*el));
    }
    if (!ok) return;
    if (st.has_block) {
      for (const Statement& ex : st.block) {
        if (ex.keyword == "reason") {
          CommandReason(ex, rule);
        } else {
          CommandExample(ex, rule);
        }
      }
    }
    out_.layer.commands.push_back(std::move(rule));
  }

  // `reason "TEXT"` in a command rule's block: what the decision tells the agent.
  void CommandReason(const Statement& st, CommandRule& rule) {
    if (!NoBlock(st) || !Args(st, 1, "one quoted string")) return;
    const Value& v = st.args[0];
    if (v.kind != Value::Kind::kString || v.text.empty()) {
      ErrAt(v, "a reason is a non-empty quoted string",
            "e.g.: reason \"pushing is your decision: cagent captures a patch you apply\"");
      return;
    }
    if (!rule.reason.empty()) {
      ErrAt(st, "'reason' is given twice for this rule", "keep one");
      return;
    }
    constexpr std::size_t kMaxReason = 400;
    if (v.text.size() > kMaxReason || v.text.find('\n') != std::string::npos) {
      ErrAt(v, "a reason is one line of at most " + std::to_string(kMaxReason) + " bytes", "");
      return;
    }
    rule.reason = v.text;
  }

  // `default allow | ask | deny`: the verdict for a command that no rule matches.
  void CommandDefault(const Statement& st) {
    if (!NoBlock(st) || !Args(st, 1, "allow, ask or deny") || !FirstTime(st, "commands default")) {
      return;
    }
    const Value& v = st.args[0];
    auto verdict = v.kind == Value::Kind::kWord ? ParseVerdict(v.text) : std::nullopt;
    if (!verdict) {
      std::string guess = DidYouMean(v.text, {"allow", "ask", "deny"});
      ErrAt(v, "unknown default verdict " + Describe(v),
            guess.empty() ? "use allow (the sandbox is the boundary), ask or deny (an allow-list)"
                          : "did you mean '" + guess + "'?");
      return;
    }
    out_.layer.command_default = {*verdict, true, st.loc};
  }

  void CommandExample(const Statement& ex, const CommandRule& rule) {
    bool want = ex.keyword == "match";
    if (!want && ex.keyword != "not_match") {
      Unknown(ex, "in a command rule's block", kCommandBlockKeys);
      return;
    }
    if (!NoBlock(ex) || !Args(ex, 1, "one quoted command line")) return;
    ShellParse parsed = ParseShell(ex.args[0].text);
    // Commands another command runs (find -exec, a wrapper's, a $( )'s: run_by set) come with
    // it; the example is the one command of the line itself.
    const auto own = std::count_if(parsed.commands.begin(), parsed.commands.end(),
                                   [](const SimpleCommand& c) { return c.run_by.empty(); });
    if (parsed.opaque || own != 1) {
      ErrAt(ex.args[0], "an example must be one simple command",
            parsed.opaque ? parsed.opaque_reason : "write one command without ; && || |");
      return;
    }
    bool matched = rule.Matches(parsed.commands[0].argv);
    if (matched != want) {
      ErrAt(ex.args[0],
            std::string("example failed: the rule ") + (want ? "does not match " : "matches ") +
                Describe(ex.args[0]),
            want ? "patterns match argv elements from the start; '*' matches within one argument"
                 : "");
    }
  }

  // ---- tools ----

  void ToolStatement(const Statement& st) {
    auto verdict = ParseVerdict(st.keyword);
    if (!verdict) {
      Unknown(st, "in tools", kRuleKeys);
      return;
    }
    if (!AtLeastOne(st, "one or more tool names") || !NoGroups(st) || !NoBlock(st)) return;
    ToolRule rule;
    rule.verdict = *verdict;
    rule.loc = st.args[0].loc;
    std::size_t i = 0;
    bool ok = true;
    bool has_mcp = false;
    for (; i < st.args.size() && st.args[i].text != "on"; ++i) {
      const Value& v = st.args[i];
      if (v.text.starts_with(kMcpPrefix)) {
        has_mcp = true;
        if (auto glob = McpToolGlob(v)) {
          rule.mcp_tools.push_back(std::move(*glob));
        } else {
          ok = false;
        }
        continue;
      }
      auto t = ParseTool(v.text);
      if (!t) {
        std::vector<std::string_view> names;
        names.reserve(static_cast<std::size_t>(Tool::kCount));
        for (int j = 0; j < static_cast<int>(Tool::kCount); ++j) {
          names.push_back(ToolName(static_cast<Tool>(j)));
        }
        std::string guess = DidYouMean(v.text, names);
        std::string all;
        for (auto n : names) all += (all.empty() ? "" : " ") + std::string(n);
        ErrAt(v, "unknown tool " + Describe(v),
              guess.empty() ? "tools: " + all + "; a wrapped MCP server's tool is mcp:NAME"
                            : "did you mean '" + guess + "'?");
        ok = false;
        continue;
      }
      rule.tools.push_back(*t);
    }
    if (rule.tools.empty() && rule.mcp_tools.empty() && ok) {
      ErrAt(st.args[0], "'" + st.keyword + "' needs a tool name before 'on'");
      return;
    }
    if (i < st.args.size() && has_mcp) {
      // An MCP tool's arguments are the wrapped server's business: cagent cannot tell which of
      // them, if any, is a path, so a path condition on it could not be kept.
      ErrAt(st.args[i], "'on' does not apply to MCP tools: cagent cannot judge their arguments",
            "write the mcp: words in a rule of their own, without 'on'; the sandbox confines "
            "what a wrapped server's tools can reach");
      return;
    }
    if (i < st.args.size()) {
      const Value& on = st.args[i];
      ++i;
      if (i == st.args.size()) {
        ErrAt(on, "'on' needs one or more workspace path globs");
        return;
      }
      for (; i < st.args.size(); ++i) {
        const Value& v = st.args[i];
        if (v.text.starts_with("/") || v.text.starts_with("~")) {
          ErrAt(v, "tool paths are relative to the workspace",
                "the agent's file tools only reach the workspace");
          ok = false;
          continue;
        }
        std::string_view g = v.text;
        if (g.starts_with("./")) g.remove_prefix(2);
        auto glob = PathGlob::Compile(g);
        if (!glob) {
          ErrAt(v, "invalid glob " + Describe(v) + ": " + glob.error().op, glob.error().detail);
          ok = false;
          continue;
        }
        rule.paths.push_back(std::move(*glob));
      }
    }
    if (!ok) return;
    std::sort(rule.tools.begin(), rule.tools.end());
    rule.tools.erase(std::unique(rule.tools.begin(), rule.tools.end()), rule.tools.end());
    std::sort(rule.mcp_tools.begin(), rule.mcp_tools.end(),
              [](const WordGlob& a, const WordGlob& b) { return a.pattern() < b.pattern(); });
    rule.mcp_tools.erase(std::unique(rule.mcp_tools.begin(), rule.mcp_tools.end(),
                                     [](const WordGlob& a, const WordGlob& b) {
                                       return a.pattern() == b.pattern();
                                     }),
                         rule.mcp_tools.end());
    for (std::size_t j = 0; j < rule.tools.size(); ++j) {
      rule.text += (j ? " " : "") + std::string(ToolName(rule.tools[j]));
    }
    for (const WordGlob& g : rule.mcp_tools) {
      rule.text +=
          (rule.text.empty() ? "" : " ") + QuoteWord(std::string(kMcpPrefix) + g.pattern());
    }
    if (!rule.paths.empty()) {
      rule.text += " on";
      for (const auto& p : rule.paths) rule.text += " " + QuoteWord(p.pattern());
    }
    out_.layer.tools.push_back(std::move(rule));
  }

  // A `mcp:GLOB` word of a tools rule: GLOB is a word glob over MCP tool names, so besides the
  // name characters (IsMcpToolNameChar) only * ? and sets [...] ([!...], [^...], ranges) may
  // appear. Anything else could never match a valid name and is most likely a mistake (a client's
  // "server/tool" or "server:tool" spelling, a space); '\' is refused because no name character
  // needs escaping. The caret points at the character at fault.
  std::optional<WordGlob> McpToolGlob(const Value& v) {
    std::string_view glob = v.text;
    glob.remove_prefix(kMcpPrefix.size());
    const std::uint32_t skip =
        (v.kind == Value::Kind::kString ? 1 : 0) + static_cast<std::uint32_t>(kMcpPrefix.size());
    auto at = [&](std::size_t offset) {
      Location loc = v.loc;
      loc.col += skip + static_cast<std::uint32_t>(offset);
      return loc;
    };
    const std::string kAlphabet =
        "MCP tool names are 1 to 128 characters of A-Z a-z 0-9 _ - . (a glob adds * ? and "
        "[...])";
    if (glob.empty()) {
      ErrAt(v, "'mcp:' needs an MCP tool name or glob",
            "write mcp:NAME as the wrapped server's tools/list names it, or mcp:* for all of them");
      return std::nullopt;
    }
    auto bad_char = [&](std::size_t k) {
      Err(at(k), 1,
          "invalid MCP tool glob " + Describe(v) + ": '" + std::string(1, glob[k]) +
              "' cannot be in an MCP tool name",
          kAlphabet);
      return std::nullopt;
    };
    std::size_t min_length = 0;  // the length of the shortest name the glob matches
    for (std::size_t k = 0; k < glob.size(); ++k) {
      const char c = glob[k];
      if (c == '*') continue;
      if (c == '?' || IsMcpToolNameChar(c)) {
        ++min_length;
        continue;
      }
      if (c != '[') return bad_char(k);
      // set := '[' ['!' | '^'] namechar+ ']', a '-' between two name characters a range.
      const std::size_t open = k;
      ++k;
      if (k < glob.size() && (glob[k] == '!' || glob[k] == '^')) ++k;
      const std::size_t first = k;
      while (k < glob.size() && IsMcpToolNameChar(glob[k])) ++k;
      if (k == glob.size()) {
        Err(at(open), 1, "invalid MCP tool glob " + Describe(v) + ": unterminated '['",
            "close the set with ']': mcp:get-[a-z]*");
        return std::nullopt;
      }
      if (glob[k] != ']' || k == first) return bad_char(k);
      ++min_length;
    }
    if (min_length > kMaxMcpToolName) {
      ErrAt(v,
            "invalid MCP tool glob " + Describe(v) + ": it matches only names longer than " +
                std::to_string(kMaxMcpToolName) + " characters",
            kAlphabet);
      return std::nullopt;
    }
    auto compiled = WordGlob::Compile(glob);
    if (!compiled) {
      ErrAt(v, "invalid MCP tool glob " + Describe(v) + ": " + compiled.error().op,
            compiled.error().detail);
      return std::nullopt;
    }
    return std::move(*compiled);
  }

  // ---- hosts ----

  // `allow|ask|deny PATTERN...`: one rule per pattern. `allow|ask|deny PATTERN METHOD PATH`: a
  // method and path rule (issue 36).
  void HostStatement(const Statement& st) {
    HostStatementInto(st, out_.layer.hosts, hosts_seen_, /*setup=*/false);
  }

  // A word a rule writes where a method goes: uppercase token characters (no '.', so an uppercase
  // host name stays a host), or a lowercase word followed by a path.
  static bool LooksLikeMethod(const Value& v) {
    return v.kind == Value::Kind::kWord && v.text.find('.') == std::string::npos &&
           IsRuleMethod(v.text);
  }
  static bool LooksLikePath(const Value& v) { return v.text.starts_with('/'); }

  // Whether the statement is written as a method and path rule: a path or an uppercase method
  // after the first pattern, or `* *` as the second and third words. Host names are written in
  // lowercase, so `deny a.org b.org DELETE *` is a (malformed) method rule, never four patterns
  // of which `*` would refuse every host.
  static bool IsMethodForm(const Statement& st) {
    if (st.args.size() < 2) return false;
    for (std::size_t i = 1; i < st.args.size(); ++i) {
      if (LooksLikePath(st.args[i]) || LooksLikeMethod(st.args[i])) return true;
    }
    return st.args[1].text == "*" && st.args.size() == 3 && st.args[2].text == "*";
  }

  // Parses one host pattern, reporting a malformed one at the bytes at fault.
  std::optional<HostPattern> HostPatternAt(const Value& v) {
    auto parsed = ParseHostPattern(v.text);
    if (const auto* bad = std::get_if<HostPatternError>(&parsed)) {
      // Point at the bytes at fault; a quoted value starts one byte later.
      const std::uint32_t skip = v.kind == Value::Kind::kString ? 1 : 0;
      const bool inline_caret = v.kind == Value::Kind::kWord || !v.text.empty();
      Location at = v.loc;
      std::uint32_t len = v.length;
      if (inline_caret) {
        at.col += skip + static_cast<std::uint32_t>(bad->offset);
        len = static_cast<std::uint32_t>(bad->length);
      }
      Err(at, len, "invalid host pattern " + Describe(v) + ": " + bad->message, bad->hint);
      return std::nullopt;
    }
    return std::get<HostPattern>(std::move(parsed));
  }

  // The METHOD and PATH of a method and path rule, checked; false after reporting a mistake.
  bool MethodAndPath(const Value& method, const Value& path) {
    bool ok = true;
    if (method.text != "*" && !IsRuleMethod(method.text)) {
      std::string upper = method.text;
      for (char& c : upper) {
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      }
      if (IsRuleMethod(upper)) {
        ErrAt(method, "HTTP methods are written in uppercase: " + Describe(method),
              "write " + upper);
      } else {
        ErrAt(method, "invalid HTTP method " + Describe(method),
              "a method is an uppercase token (GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS), or "
              "* for any method");
      }
      ok = false;
    }
    if (path.text != "*" && !path.text.starts_with('/')) {
      ErrAt(path, "a path in a hosts rule starts with '/' or is '*': " + Describe(path),
            path.text.empty() ? "write * for any path"
                              : "write /" + path.text +
                                    " (a '*' in it matches any characters, "
                                    "'/' included)");
      return false;
    }
    const std::uint32_t skip = path.kind == Value::Kind::kString ? 1 : 0;
    for (std::size_t i = 0; i < path.text.size(); ++i) {
      const auto c = static_cast<unsigned char>(path.text[i]);
      std::string message;
      std::string hint;
      if (c == '?' || c == '#') {
        message = "a path in a hosts rule has no query or fragment: " + Describe(path);
        hint =
            "rules match the request's path without its query string (cagent never shows a "
            "query to the policy: it may hold a credential); drop what follows the '" +
            std::string(1, static_cast<char>(c)) + "'";
      } else if (c <= 0x20 || c == 0x7f) {
        message = "a path in a hosts rule has no blanks or control characters: " + Describe(path);
        hint = "write a space as %20, as the request does";
      } else {
        continue;
      }
      Location at = path.loc;
      at.col += skip + static_cast<std::uint32_t>(i);
      Err(at, 1, std::move(message), std::move(hint));
      return false;
    }
    return ok;
  }

  void HostStatementInto(const Statement& st, std::vector<HostRule>& into,
                         std::map<std::pair<Verdict, std::string>, Location>& seen, bool setup) {
    auto verdict = ParseVerdict(st.keyword);
    if (!verdict) {
      Unknown(st, "in hosts", kRuleKeys);
      return;
    }
    if (!NoBlock(st) || !AtLeastOne(st, "one or more host patterns, e.g. 'pypi.org'") ||
        !NoGroups(st)) {
      return;
    }
    if (IsMethodForm(st)) {
      MethodRule(st, *verdict, into, seen, setup);
      return;
    }
    for (const Value& v : st.args) {
      std::optional<HostPattern> pattern = HostPatternAt(v);
      if (!pattern) continue;
      HostRule rule;
      rule.verdict = *verdict;
      rule.pattern = std::move(*pattern);
      rule.text = rule.pattern.Text();
      rule.loc = v.loc;
      AddHostRule(std::move(rule), v, into, seen);
    }
  }

  // `allow|ask|deny PATTERN METHOD PATH`.
  void MethodRule(const Statement& st, Verdict verdict, std::vector<HostRule>& into,
                  std::map<std::pair<Verdict, std::string>, Location>& seen, bool setup) {
    constexpr const char* kShape =
        "write: allow HOST METHOD PATH, e.g. allow github.com GET /org/repo.git/* (* for any "
        "method or any path)";
    const std::string verdict_word(VerdictName(verdict));
    if (LooksLikePath(st.args[1])) {
      ErrAt(st.args[1], "a method and path rule needs a method before its path", kShape);
      return;
    }
    if (st.args.size() == 2) {
      ErrAt(st.args[1], "method " + Describe(st.args[1]) + " needs a path after it", kShape);
      return;
    }
    if (st.args.size() > 3) {
      const bool method_second = LooksLikeMethod(st.args[1]) || st.args[1].text == "*";
      if (method_second) {
        ErrAt(st.args[3],
              "a method and path rule ends with its path; found " + Describe(st.args[3]) +
                  " after it",
              kShape);
      } else {
        ErrAt(st.args[1],
              "a method and path rule names exactly one host; " + Describe(st.args[1]) +
                  " is a second",
              "write one rule per host: " + verdict_word + " " + st.args[0].text +
                  " METHOD PATH, "
                  "then " +
                  verdict_word + " " + st.args[1].text + " METHOD PATH");
      }
      return;
    }
    const Value& host = st.args[0];
    const Value& method = st.args[1];
    const Value& path = st.args[2];
    std::optional<HostPattern> pattern = HostPatternAt(host);
    const bool method_ok = MethodAndPath(method, path);
    if (!pattern || !method_ok) return;
    if (setup) {
      ErrAt(method, "setup's hosts take no method and path rules",
            "cagent reads requests only for hosts a credential is bound to, and setup connects "
            "without credentials; write '" +
                verdict_word + " " + host.text +
                "' in setup, or move the rule to the profile's "
                "hosts section");
      return;
    }
    HostRule rule;
    rule.verdict = verdict;
    rule.pattern = std::move(*pattern);
    rule.method = method.text;
    rule.path = path.text;
    rule.text = rule.pattern.Text() + " " + rule.method + " " + QuoteWord(rule.path);
    rule.loc = host.loc;
    AddHostRule(std::move(rule), host, into, seen);
  }

  void AddHostRule(HostRule rule, const Value& at, std::vector<HostRule>& into,
                   std::map<std::pair<Verdict, std::string>, Location>& seen) {
    auto [it, inserted] = seen.emplace(std::make_pair(rule.verdict, rule.text), at.loc);
    if (!inserted) {
      diags_.Warning(at.loc, at.length,
                     "hosts rule '" + std::string(VerdictName(rule.verdict)) + " " + rule.text +
                         "' is written twice",
                     "the first is at line " + std::to_string(it->second.line));
      return;
    }
    into.push_back(std::move(rule));
  }

  // ---- limits ----

  void LimitStatement(const Statement& st) {
    auto limit = ParseLimit(st.keyword);
    if (!limit) {
      std::vector<std::string_view> names;
      names.reserve(static_cast<std::size_t>(Limit::kCount));
      for (int i = 0; i < static_cast<int>(Limit::kCount); ++i) {
        names.push_back(LimitName(static_cast<Limit>(i)));
      }
      Unknown(st, "in limits", names);
      return;
    }
    if (!NoBlock(st)) return;
    LimitKind kind = LimitKindOf(*limit);
    if (kind == LimitKind::kMoney) {
      MoneyLimit(st, *limit);
      return;
    }
    const char* what = kind == LimitKind::kDuration ? "one duration (90s, 10m, 2h) or unlimited"
                       : kind == LimitKind::kSize   ? "one size (512K, 64M, 4G) or unlimited"
                                                    : "one number or unlimited";
    if (!Args(st, 1, what) || !FirstTime(st, "limits." + st.keyword)) return;
    const Value& v = st.args[0];
    LimitValue lv;
    lv.set = true;
    lv.loc = st.loc;
    if (v.text == "unlimited") {
      lv.unlimited = true;
    } else if (kind == LimitKind::kDuration) {
      auto d = ParseDuration(v.text);
      if (!d) {
        ErrAt(v, "invalid duration " + Describe(v), "write digits and a unit: 500ms, 90s, 10m, 2h");
        return;
      }
      if (d->count() == 0) {
        ErrAt(v, "a zero " + st.keyword + " would stop everything at once",
              "write a positive duration, or unlimited");
        return;
      }
      lv.value = static_cast<std::uint64_t>(d->count());
    } else if (kind == LimitKind::kSize) {
      auto s = ParseSize(v.text);
      if (!s) {
        ErrAt(v, "invalid size " + Describe(v), "write digits and a unit: 512K, 64M, 4G, 1T");
        return;
      }
      lv.value = *s;
      if (lv.value == 0 && *limit == Limit::kMemory) {
        ErrAt(v, "a zero memory limit would stop every process at once",
              "write a size such as 4G, or unlimited");
        return;
      }
    } else {
      std::uint64_t n = 0;
      bool digits = !v.text.empty() && v.text.size() <= 18;
      for (char c : v.text) {
        if (c < '0' || c > '9') digits = false;
        n = n * 10 + static_cast<std::uint64_t>(c - '0');
      }
      if (!digits) {
        ErrAt(v, "invalid number " + Describe(v), "write a whole number, e.g. 256, or unlimited");
        return;
      }
      lv.value = n;
      if (n == 0 && (*limit == Limit::kProcesses || *limit == Limit::kOpenFiles)) {
        ErrAt(v, "a zero " + st.keyword + " limit would stop every command at once",
              "write a positive number, or unlimited");
        return;
      }
    }
    out_.layer.limits[static_cast<std::size_t>(*limit)] = lv;
  }

  // `model-cost 2.50 USD` or `model-cost unlimited`.
  void MoneyLimit(const Statement& st, Limit limit) {
    if (!NoGroups(st) || !FirstTime(st, "limits." + st.keyword)) return;
    LimitValue lv;
    lv.set = true;
    lv.loc = st.loc;
    if (st.args.size() == 1 && st.args[0].text == "unlimited") {
      lv.unlimited = true;
    } else if (st.args.size() != 2) {
      ErrAt(st.args.size() > 2 ? st.args[2]
                               : Value{Value::Kind::kWord, "", {}, st.loc, st.keyword_length},
            "'" + st.keyword + "' takes an amount and a currency, or unlimited",
            "write e.g. " + st.keyword + " 2.50 USD");
      return;
    } else {
      auto money = ParseMoney(st.args[0].text, st.args[1].text);
      if (!money) {
        ErrAt(st.args[IsCurrencyCode(st.args[1].text) ? 0 : 1],
              "invalid amount '" + st.args[0].text + " " + st.args[1].text + "'",
              money.error().detail);
        return;
      }
      lv.value = money->micros;
      lv.currency = money->currency;
    }
    out_.layer.limits[static_cast<std::size_t>(limit)] = lv;
  }

  // ---- environment ----

  void EnvironmentStatement(const Statement& st) {
    const std::string& k = st.keyword;
    if (k == "pass" || k == "scrub") {
      if (!NoBlock(st) || !AtLeastOne(st, "one or more variable names or patterns") ||
          !NoGroups(st)) {
        return;
      }
      for (const Value& v : st.args) {
        std::string probe = v.text;
        for (char& c : probe) {
          if (c == '*' || c == '?') c = 'X';
        }
        auto glob = WordGlob::Compile(v.text);
        if (!glob || !IsEnvName(probe)) {
          ErrAt(v, "invalid variable name pattern " + Describe(v),
                "names are letters, digits and '_', with * or ? wildcards: AWS_*, *_TOKEN");
          continue;
        }
        (k == "pass" ? out_.layer.env_pass : out_.layer.env_scrub)
            .push_back({std::move(*glob), v.loc});
      }
    } else if (k == "set") {
      if (!NoBlock(st) || !Args(st, 2, "a name and a value")) return;
      if (!IsEnvName(st.args[0].text)) {
        ErrAt(st.args[0], "invalid variable name " + Describe(st.args[0]),
              "names are letters, digits and '_', not starting with a digit");
        return;
      }
      for (const auto& e : out_.layer.env_set) {
        if (e.name == st.args[0].text) {
          ErrAt(st.args[0], "'" + e.name + "' is set twice in this profile",
                "the first is at line " + std::to_string(e.loc.line));
          return;
        }
      }
      out_.layer.env_set.push_back({st.args[0].text, st.args[1].text, st.args[0].loc});
    } else {
      Unknown(st, "in environment", kEnvironmentKeys);
    }
  }

  // ---- verify ----

  void VerifyStatement(const Statement& st) {
    if (st.keyword != "run") {
      constexpr std::string_view kKeys[] = {"run"};
      Unknown(st, "in verify", kKeys);
      return;
    }
    if (auto vc = RunCommand(st, "verification")) out_.layer.verify.push_back(std::move(*vc));
  }

  // ---- setup, cache, carry ----

  void SetupStatement(const Statement& st) {
    if (st.keyword == "run") {
      if (auto c = RunCommand(st, "setup")) out_.layer.setup.commands.push_back(std::move(*c));
    } else if (st.keyword == "hosts") {
      if (!NeedBlock(st)) return;
      if (out_.layer.setup.egress.set) {
        ErrAt(st, "'hosts' is written twice in this setup block",
              "the first is at line " + std::to_string(out_.layer.setup.egress.loc.line));
        return;
      }
      out_.layer.setup.egress = {true, true, st.loc};
      for (const auto& s : st.block) {
        HostStatementInto(s, out_.layer.setup.hosts, setup_hosts_seen_, /*setup=*/true);
      }
      for (const HostRule& r : out_.layer.setup.hosts) {
        if (r.verdict != Verdict::kAsk) continue;
        diags_.Warning(r.loc, static_cast<std::uint32_t>(r.text.size()),
                       "'ask " + r.text +
                           "' in setup never asks: nobody is asked while setup runs, so it "
                           "refuses every connection",
                       "write 'allow " + r.text + "' if setup needs it, or drop it");
      }
    } else {
      constexpr std::string_view kKeys[] = {"run", "hosts"};
      Unknown(st, "in setup", kKeys);
    }
  }

  // `cache [read-write] ~/PATH...`
  void CacheStatement(const Statement& st) {
    if (!NoBlock(st) || !AtLeastOne(st, "one or more ~/ paths") || !NoGroups(st)) return;
    std::size_t first = 0;
    bool writable = false;
    if (st.args[0].text == "read-write" || st.args[0].text == "read-only") {
      writable = st.args[0].text == "read-write";
      first = 1;
      if (st.args.size() == 1) {
        ErrAt(st.args[0], "'cache " + st.args[0].text + "' needs one or more ~/ paths");
        return;
      }
    }
    for (std::size_t i = first; i < st.args.size(); ++i) {
      const Value& v = st.args[i];
      auto ref = ParsePathRef(v.text);
      if (!ref) {
        ErrAt(v, "invalid path " + Describe(v) + ": " + ref.error().op, ref.error().detail);
        continue;
      }
      if (ref->base != PathBase::kHome || ref->rel.empty()) {
        ErrAt(v, "a cache is a directory of the sandbox's HOME: write it as ~/PATH",
              "e.g. cache ~/.npm ~/.cache/pip; cagent keeps it under $XDG_CACHE_HOME/cagent/");
        continue;
      }
      if (std::any_of(out_.layer.caches.begin(), out_.layer.caches.end(),
                      [&](const CacheRule& c) { return c.rel == ref->rel; })) {
        ErrAt(v, "cache ~/" + ref->rel + " is listed twice in this profile");
        continue;
      }
      out_.layer.caches.push_back({ref->rel, writable, v.loc});
    }
  }

  // `carry PATH...`: workspace-relative paths of the caller's checkout.
  void CarryStatement(const Statement& st) {
    if (!NoBlock(st) || !AtLeastOne(st, "one or more workspace paths, e.g. node_modules") ||
        !NoGroups(st)) {
      return;
    }
    for (const Value& v : st.args) {
      auto ref = ParsePathRef(v.text);
      if (!ref) {
        ErrAt(v, "invalid path " + Describe(v) + ": " + ref.error().op, ref.error().detail);
        continue;
      }
      if (ref->base != PathBase::kWorkspace || ref->rel.empty()) {
        ErrAt(v, "carry names a path of the repository's checkout, relative to its top level",
              "e.g. carry node_modules .venv");
        continue;
      }
      if (ref->rel == ".git" || ref->rel.starts_with(".git/")) {
        ErrAt(v, "git's own directory cannot be carried");
        continue;
      }
      if (std::any_of(out_.layer.carry.begin(), out_.layer.carry.end(),
                      [&](const CarryRule& c) { return c.rel == ref->rel; })) {
        ErrAt(v, "carry " + ref->rel + " is listed twice in this profile");
        continue;
      }
      out_.layer.carry.push_back({ref->rel, v.loc});
    }
  }

  // ---- credentials (issue 36) ----

  static bool CredentialName(std::string_view name) {
    if (name.empty() || name.size() > 64) return false;
    if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9'))) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
  }

  static bool VariableName(std::string_view name) {
    if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
  }

  // `NAME [optional] env VAR for HOST...` or `NAME [optional] file PATH for HOST...`.
  void CredentialStatement(const Statement& st) {
    constexpr const char* kShape =
        "write: NAME env VARIABLE for HOST... (or NAME file PATH for HOST...)";
    if (!NoBlock(st) || !NoGroups(st)) return;
    if (!CredentialName(st.keyword)) {
      ErrAt(st, "invalid credential name '" + st.keyword + "'",
            "a name is lowercase letters, digits, '_' and '-', starting with a letter or digit");
      return;
    }
    CredentialRule rule;
    rule.name = st.keyword;
    rule.loc = st.loc;
    std::size_t i = 0;
    if (i < st.args.size() && st.args[i].text == "optional") {
      rule.optional = true;
      ++i;
    }
    if (i + 1 >= st.args.size() || (st.args[i].text != "env" && st.args[i].text != "file")) {
      ErrAt(i < st.args.size() ? st.args[i]
                               : Value{Value::Kind::kWord, "", {}, st.loc, st.keyword_length},
            "credential '" + rule.name + "' needs where its value comes from", kShape);
      return;
    }
    rule.source = st.args[i].text == "env" ? CredentialSource::kEnv : CredentialSource::kFile;
    const Value& from = st.args[i + 1];
    rule.from = from.text;
    if (rule.source == CredentialSource::kEnv && !VariableName(rule.from)) {
      ErrAt(from, "invalid variable name " + Describe(from),
            "names are letters, digits and '_', not starting with a digit");
      return;
    }
    if (rule.source == CredentialSource::kFile &&
        !(rule.from.starts_with('/') || rule.from.starts_with("~/"))) {
      ErrAt(from, "a credential file is an absolute path or starts with ~/",
            "e.g. file ~/.config/tea/token");
      return;
    }
    i += 2;
    if (i >= st.args.size() || st.args[i].text != "for") {
      ErrAt(i < st.args.size() ? st.args[i] : from,
            "credential '" + rule.name + "' needs the hosts it is for", kShape);
      return;
    }
    ++i;
    if (i >= st.args.size()) {
      ErrAt(st.args[i - 1], "credential '" + rule.name + "' is for no host",
            "name one or more hosts after 'for', e.g. for github.com api.github.com");
      return;
    }
    for (; i < st.args.size(); ++i) {
      const Value& v = st.args[i];
      auto parsed = ParseHostPattern(v.text);
      if (const auto* bad = std::get_if<HostPatternError>(&parsed)) {
        ErrAt(v, "invalid host pattern " + Describe(v) + ": " + bad->message, bad->hint);
        return;
      }
      rule.hosts.push_back(std::get<HostPattern>(std::move(parsed)));
    }
    rule.text = rule.name + (rule.optional ? " optional" : "") +
                (rule.source == CredentialSource::kEnv ? " env " : " file ") + rule.from + " for";
    for (const HostPattern& h : rule.hosts) rule.text += " " + h.Text();
    for (const CredentialRule& c : out_.layer.credentials) {
      if (c.name == rule.name) {
        ErrAt(st, "credential '" + rule.name + "' is defined twice in this profile",
              "the first is at line " + std::to_string(c.loc.line));
        return;
      }
    }
    out_.layer.credentials.push_back(std::move(rule));
  }

  // ---- outputs (issue 32) ----

  // `outputs GLOB...`: workspace-relative path globs of what builds leave behind.
  void OutputsStatement(const Statement& st) {
    if (!NoBlock(st) ||
        !AtLeastOne(st, "one or more workspace path globs, e.g. build/ target/ **/__pycache__/") ||
        !NoGroups(st)) {
      return;
    }
    for (const Value& v : st.args) {
      if (v.text.starts_with('/') || v.text.starts_with('~')) {
        ErrAt(v, "outputs are paths of the workspace, relative to its top level",
              "e.g. outputs build/ dist/ **/__pycache__/");
        continue;
      }
      // "build/" and "build" mean the same: the path and everything below it.
      std::string pattern = v.text;
      if (pattern.size() > 1 && pattern.ends_with('/')) pattern.pop_back();
      auto glob = PathGlob::Compile(pattern);
      if (!glob) {
        ErrAt(v, "invalid glob " + Describe(v) + ": " + glob.error().op, glob.error().detail);
        continue;
      }
      if (pattern == ".git" || pattern.starts_with(".git/")) {
        ErrAt(v, "git's own directory is never part of a change set; it needs no outputs rule");
        continue;
      }
      if (std::any_of(out_.layer.outputs.begin(), out_.layer.outputs.end(),
                      [&](const OutputRule& o) { return o.pattern == pattern; })) {
        ErrAt(v, "outputs " + pattern + " is listed twice in this profile");
        continue;
      }
      out_.layer.outputs.push_back({pattern, std::move(*glob), v.loc});
    }
  }

  // `run "COMMAND" [timeout DURATION]` in verify and setup.
  std::optional<VerifyCommand> RunCommand(const Statement& st, std::string_view what) {
    if (!NoBlock(st) || !NoGroups(st)) return std::nullopt;
    if (st.args.size() != 1 && st.args.size() != 3) {
      ErrAt(st, "'run' takes a quoted command and optionally 'timeout DURATION'",
            "e.g.: run \"make test\" timeout 10m");
      return std::nullopt;
    }
    VerifyCommand vc;
    vc.command = st.args[0].text;
    vc.loc = st.args[0].loc;
    if (vc.command.empty()) {
      ErrAt(st.args[0], "empty " + std::string(what) + " command");
      return std::nullopt;
    }
    if (st.args.size() == 3) {
      if (st.args[1].text != "timeout") {
        ErrAt(st.args[1], "expected 'timeout', found " + Describe(st.args[1]));
        return std::nullopt;
      }
      auto d = ParseDuration(st.args[2].text);
      if (!d || d->count() == 0) {
        ErrAt(st.args[2], "invalid duration " + Describe(st.args[2]),
              "write digits and a unit: 90s, 10m");
        return std::nullopt;
      }
      vc.timeout_ms = static_cast<std::uint64_t>(d->count());
    }
    return vc;
  }

  // ---- examples ----

  void ExampleStatement(const Statement& st) {
    auto verdict = ParseVerdict(st.keyword);
    if (!verdict) {
      Unknown(st, "in examples", kRuleKeys);
      return;
    }
    if (!NoBlock(st) || !NoGroups(st)) return;
    if (st.args.empty()) {
      ErrAt(st, "an example needs a request", std::string(RequestUsage()));
      return;
    }
    // The same reader as a `policy test` cases file (request.h): one meaning for each form.
    std::vector<std::string> words;
    words.reserve(st.args.size());
    for (const Value& v : st.args) words.push_back(v.text);
    auto parsed = ParseRequestWords(words);
    if (const auto* bad = std::get_if<RequestWordsError>(&parsed)) {
      ErrAt(st.args[std::min(bad->word, st.args.size() - 1)], bad->message, bad->hint);
      return;
    }
    Example ex;
    ex.request = std::get<Request>(std::move(parsed));
    ex.expect = *verdict;
    ex.loc = st.args[0].loc;
    ex.length = st.args[0].length;
    out_.examples.push_back(std::move(ex));
  }
};

}  // namespace

bool IsAnyRun(const Value& v) { return v.kind == Value::Kind::kWord && v.text == kAnyRun; }

bool IsWorkspaceProgram(const Value& v) {
  if (v.kind == Value::Kind::kGroup) {
    return std::any_of(v.alternatives.begin(), v.alternatives.end(), IsWorkspaceProgram);
  }
  return v.text.starts_with(kWorkspacePrefix);
}

Result<ArgPattern> CompileWorkspaceProgram(const Value& v, std::size_t position) {
  if (position != 0) {
    return PlainError("'" + std::string(kWorkspacePrefix) +
                          "' names a program, so it can only be a pattern's first element",
                      "to match an argument that is a path, write the path as a word glob");
  }
  if (v.kind == Value::Kind::kGroup) {
    return PlainError("'" + std::string(kWorkspacePrefix) + "' cannot be an alternative in a group",
                      "write it as a rule of its own: allow workspace:build/*");
  }
  const std::string_view glob = std::string_view{v.text}.substr(kWorkspacePrefix.size());
  if (glob.empty()) {
    return PlainError("'" + std::string(kWorkspacePrefix) + "' needs a path glob",
                      "write workspace:* for any program in the workspace, workspace:build/* "
                      "for those under build/");
  }
  if (glob.starts_with('/') || glob.starts_with("./") || glob.starts_with('~')) {
    return PlainError("the path after '" + std::string(kWorkspacePrefix) +
                          "' is relative to the workspace, without a leading '/', './' or '~'",
                      "workspace:build/app matches ./build/app and build/app");
  }
  for (std::size_t i = 0; i <= glob.size();) {
    std::size_t j = glob.find('/', i);
    if (j == std::string_view::npos) j = glob.size();
    const std::string_view comp = glob.substr(i, j - i);
    if (comp.empty() || comp == "." || comp == "..") {
      return PlainError("the path after '" + std::string(kWorkspacePrefix) +
                            "' has an empty, '.' or '..' component",
                        "programs are matched by their normalised path inside the workspace");
    }
    i = j + 1;
  }
  auto g = WordGlob::Compile(glob);
  if (!g) {
    return PlainError("invalid pattern " + Describe(v) + ": " + g.error().op, g.error().detail);
  }
  ArgPattern out;
  out.workspace = true;
  out.alternatives.push_back(std::move(*g));
  return out;
}

Result<ArgPattern> CompileArgPattern(const Value& value) {
  ArgPattern out;
  auto add = [&](const Value& v) -> Status {
    if (v.text.empty()) return PlainError("empty word in a command pattern");
    auto g = WordGlob::Compile(v.text);
    if (!g) {
      return PlainError("invalid pattern " + Describe(v) + ": " + g.error().op, g.error().detail);
    }
    out.alternatives.push_back(std::move(*g));
    return Ok{};
  };
  if (value.kind == Value::Kind::kGroup) {
    for (const auto& a : value.alternatives) {
      if (auto st = add(a); !st) return st.error();
    }
    std::sort(out.alternatives.begin(), out.alternatives.end(),
              [](const WordGlob& a, const WordGlob& b) { return a.pattern() < b.pattern(); });
  } else if (auto st = add(value); !st) {
    return st.error();
  }
  // A byte every alternative needs lets a word be rejected with one memchr; the rarer in
  // command lines the better, so these are tried first.
  if (out.alternatives.size() > 1 || !out.alternatives.front().IsLiteral()) {
    constexpr std::string_view kCandidates = "$~@/.=_-:";
    for (const char c : kCandidates) {
      const auto b = static_cast<unsigned char>(c);
      if (std::all_of(out.alternatives.begin(), out.alternatives.end(),
                      [b](const WordGlob& g) { return g.RequiresByte(b); })) {
        out.required = b;
        break;
      }
    }
  }
  return out;
}

Result<PathRef> ParsePathRef(std::string_view text) {
  PathRef ref;
  std::string_view rest = text;
  if (text.find('\0') != std::string_view::npos) return PlainError("it contains a NUL byte");
  if (text.empty()) return PlainError("it is empty");
  if (text == "~" || text.starts_with("~/")) {
    ref.base = PathBase::kHome;
    rest.remove_prefix(std::min<std::size_t>(2, text.size()));
  } else if (text.starts_with("~")) {
    return PlainError("'~user' paths are not supported", "write ~/ for the caller's home");
  } else if (text.starts_with("/")) {
    ref.base = PathBase::kAbsolute;
    rest.remove_prefix(1);
  } else {
    ref.base = PathBase::kWorkspace;
    if (rest == ".") rest = "";
    if (rest.starts_with("./")) rest.remove_prefix(2);
  }
  if (rest.find_first_of("*?[") != std::string_view::npos) {
    return PlainError("mount paths cannot contain wildcards",
                      "use a deny rule with a glob to hide matching files");
  }
  while (rest.ends_with('/')) rest.remove_suffix(1);
  std::size_t start = 0;
  while (start < rest.size()) {
    std::size_t end = rest.find('/', start);
    if (end == std::string_view::npos) end = rest.size();
    std::string_view comp = rest.substr(start, end - start);
    if (comp.empty()) return PlainError("it has an empty component ('//')");
    if (comp == "." || comp == "..") {
      return PlainError("'" + std::string(comp) + "' components are not allowed",
                        "write the path without . or ..");
    }
    start = end + 1;
  }
  ref.rel = std::string(rest);
  return ref;
}

std::string DidYouMean(std::string_view word, const std::vector<std::string_view>& candidates) {
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      }
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  std::size_t best = word.size() >= 8 ? 3 : 2;
  std::string out;
  for (auto c : candidates) {
    std::size_t d = distance(word, c);
    if (d <= best && d < std::max(word.size(), c.size())) {
      if (out.empty() || d < best) out = std::string(c);
      best = d;
    }
  }
  return out;
}

CheckedProfile Check(const std::vector<const Statement*>& statements, Diagnostics& diags) {
  return Checker(diags).Run(statements);
}

}  // namespace cagent::policy
