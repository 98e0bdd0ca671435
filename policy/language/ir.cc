#include "policy/language/ir.h"

#include <algorithm>
#include <array>

namespace cagent::policy {
namespace {

constexpr std::array<std::string_view, static_cast<std::size_t>(Tool::kCount)> kToolNames = {
    "read_file", "write_file", "edit_file", "list_dir", "glob", "grep", "run_command", "finish",
};
constexpr std::array<std::string_view, static_cast<std::size_t>(Limit::kCount)> kLimitNames = {
    "wall-time",          "cpu-time",     "command-timeout", "memory",        "file-size",
    "command-output",     "total-output", "patch-size",      "processes",     "open-files",
    "model-turns",        "model-tokens", "tool-calls",      "changed-files", "egress-bytes",
    "egress-connections", "model-cost",
};
constexpr std::array<std::string_view, static_cast<std::size_t>(Requirement::kCount)>
    kRequirementNames = {"landlock", "seccomp", "cgroup", "memory-limit", "pids-limit"};

bool ArgMatches(const ArgPattern& p, std::string_view arg) {
  if (p.required != 0 && arg.find(static_cast<char>(p.required)) == std::string_view::npos) {
    return false;
  }
  for (const auto& alt : p.alternatives) {
    if (alt.Match(arg)) return true;
  }
  return false;
}

// Whether argv[0] matches the first element of `rule`.
bool FirstMatches(const CommandRule& rule, std::string_view arg) {
  const ArgPattern& first = rule.pattern[0];
  if (first.workspace) {
    const std::optional<std::string> rel = WorkspaceProgram(arg);
    return rel && first.alternatives.size() == 1 && first.alternatives[0].Match(*rel);
  }
  if (arg.find('/') == std::string_view::npos) return ArgMatches(first, arg);
  // A path in command position: an allow rule must name a path (a workspace script called ./git
  // is not `git`). Deny and ask rules also match it by its last component, so `/usr/bin/curl`
  // and `./curl` cannot slip past `deny curl`.
  const std::string_view base = arg.substr(arg.rfind('/') + 1);
  for (const auto& alt : first.alternatives) {
    const bool names_path = alt.pattern().find('/') != std::string::npos;
    if (names_path ? alt.Match(arg) : (rule.verdict != Verdict::kAllow && alt.Match(base))) {
      return true;
    }
  }
  return false;
}

// Whether pattern[from, to) (no `...` in it) matches argv at `at`.
template <typename Word>
bool BlockMatches(const std::vector<ArgPattern>& pattern, std::size_t from, std::size_t to,
                  std::span<const Word> argv, std::size_t at) {
  if (at + (to - from) > argv.size()) return false;
  for (std::size_t i = from; i < to; ++i) {
    if (!ArgMatches(pattern[i], argv[at + (i - from)])) return false;
  }
  return true;
}

// CommandRule::Matches for argv of std::string or std::string_view. The pattern is a prefix
// pattern whose `...` elements skip any run of arguments. Between two `...` (or after the name),
// the elements form a block that must match consecutive arguments; placing each block at its
// earliest possible position is never worse for the blocks after it, so one left-to-right scan
// decides (O(pattern * argv), no backtracking).
template <typename Word>
bool CommandMatches(const CommandRule& rule, std::span<const Word> argv) {
  const std::vector<ArgPattern>& pattern = rule.pattern;
  if (pattern.empty() || argv.empty() || pattern[0].any_run) return false;
  if (!FirstMatches(rule, argv[0])) return false;
  std::size_t pos = 1;  // the next argument to match
  std::size_t i = 1;    // the next pattern element
  bool skip = false;    // a `...` precedes the block at i
  while (i < pattern.size()) {
    if (pattern[i].any_run) {
      skip = true;
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < pattern.size() && !pattern[end].any_run) ++end;
    if (!skip) {
      if (!BlockMatches(pattern, i, end, argv, pos)) return false;
      pos += end - i;
    } else {
      std::size_t at = pos;
      while (at + (end - i) <= argv.size() && !BlockMatches(pattern, i, end, argv, at)) ++at;
      if (at + (end - i) > argv.size()) return false;
      pos = at + (end - i);
    }
    skip = false;
    i = end;
  }
  return true;
}

}  // namespace

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kAllow:
      return "allow";
    case Verdict::kAsk:
      return "ask";
    case Verdict::kDeny:
      return "deny";
  }
  return "deny";
}

std::string QuoteWord(std::string_view w) {
  bool bare = !w.empty();
  for (char c : w) {
    if (c == ' ' || c == '\t' || c == '"' || c == '{' || c == '}' || c == '(' || c == ')' ||
        c == '|' || c == ';' || c == '\\' || static_cast<unsigned char>(c) < 0x20) {
      bare = false;
    }
  }
  if (!w.empty() && w[0] == '#') bare = false;
  return bare ? std::string(w) : QuoteString(w);
}

std::string QuoteString(std::string_view w) {
  std::string out = "\"";
  for (char c : w) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string PathRef::Text() const {
  switch (base) {
    case PathBase::kAbsolute:
      return "/" + rel;
    case PathBase::kHome:
      return rel.empty() ? "~" : "~/" + rel;
    case PathBase::kWorkspace:
      return rel.empty() ? "." : rel;
  }
  return rel;
}

std::string PathRef::Resolve(std::string_view workspace, std::string_view home) const {
  auto join = [this](std::string_view dir) {
    return rel.empty() ? std::string(dir) : std::string(dir) + "/" + rel;
  };
  switch (base) {
    case PathBase::kAbsolute:
      return "/" + rel;
    case PathBase::kHome:
      return home.empty() ? std::string() : join(home);
    case PathBase::kWorkspace:
      return join(workspace);
  }
  return {};
}

std::string_view MountModeName(MountMode m) {
  switch (m) {
    case MountMode::kReadOnly:
      return "read-only";
    case MountMode::kReadWrite:
      return "read-write";
    case MountMode::kHidden:
      return "hide";
  }
  return "hide";
}

std::string_view AccessName(Access a) {
  switch (a) {
    case Access::kRead:
      return "read";
    case Access::kWrite:
      return "write";
    case Access::kReadWrite:
      return "read-write";
  }
  return "read-write";
}

bool CommandRule::Matches(std::span<const std::string> argv) const {
  return CommandMatches(*this, argv);
}

bool CommandRule::Matches(std::span<const std::string_view> argv) const {
  return CommandMatches(*this, argv);
}

std::optional<std::string> WorkspaceProgram(std::string_view argv0) {
  if (argv0.find('/') == std::string_view::npos || argv0.starts_with('/') ||
      argv0.starts_with('~')) {
    return std::nullopt;
  }
  std::string rel;
  std::size_t i = 0;
  while (i <= argv0.size()) {
    std::size_t j = argv0.find('/', i);
    if (j == std::string_view::npos) j = argv0.size();
    const std::string_view comp = argv0.substr(i, j - i);
    i = j + 1;
    if (comp.empty() || comp == ".") continue;
    // ".." could climb out of the workspace; judged by name, "build/../t" is not worth a special
    // case, so any ".." makes the path not a workspace program.
    if (comp == "..") return std::nullopt;
    if (!rel.empty()) rel += '/';
    rel += comp;
  }
  // "./" or "dir/": a directory, not a program.
  if (rel.empty() || argv0.ends_with('/')) return std::nullopt;
  return rel;
}

std::string_view ToolName(Tool t) { return kToolNames.at(static_cast<std::size_t>(t)); }

std::optional<Tool> ParseTool(std::string_view name) {
  for (std::size_t i = 0; i < kToolNames.size(); ++i) {
    if (kToolNames[i] == name) return static_cast<Tool>(i);
  }
  return std::nullopt;
}

Access ToolAccess(Tool t) {
  return (t == Tool::kWriteFile || t == Tool::kEditFile) ? Access::kWrite : Access::kRead;
}

bool IsMcpToolNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

bool IsMcpToolName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxMcpToolName &&
         std::all_of(name.begin(), name.end(), IsMcpToolNameChar);
}

std::string_view LimitName(Limit l) { return kLimitNames.at(static_cast<std::size_t>(l)); }

LimitKind LimitKindOf(Limit l) {
  switch (l) {
    case Limit::kWallTime:
    case Limit::kCpuTime:
    case Limit::kCommandTimeout:
      return LimitKind::kDuration;
    case Limit::kMemory:
    case Limit::kFileSize:
    case Limit::kCommandOutput:
    case Limit::kTotalOutput:
    case Limit::kPatchSize:
    case Limit::kEgressBytes:
      return LimitKind::kSize;
    case Limit::kModelCost:
      return LimitKind::kMoney;
    default:
      return LimitKind::kCount;
  }
}

std::optional<Limit> ParseLimit(std::string_view key) {
  for (std::size_t i = 0; i < kLimitNames.size(); ++i) {
    if (kLimitNames[i] == key) return static_cast<Limit>(i);
  }
  return std::nullopt;
}

std::string_view NetworkName(NetworkMode n) {
  return n == NetworkMode::kLoopback ? "loopback" : "none";
}

std::string_view ApprovalName(ApprovalMode a) {
  switch (a) {
    case ApprovalMode::kNeverAsk:
      return "never-ask";
    case ApprovalMode::kOnRequest:
      return "on-request";
    case ApprovalMode::kAuto:
      return "auto";
  }
  return "never-ask";
}

std::string_view RequirementName(Requirement r) {
  return kRequirementNames.at(static_cast<std::size_t>(r));
}

std::optional<Requirement> ParseRequirement(std::string_view name) {
  for (std::size_t i = 0; i < kRequirementNames.size(); ++i) {
    if (kRequirementNames[i] == name) return static_cast<Requirement>(i);
  }
  return std::nullopt;
}

bool Policy::Requires(Requirement r) const {
  return std::any_of(requirements.begin(), requirements.end(),
                     [r](const auto& s) { return s.value == r; });
}

bool Policy::IsBestEffort(Requirement r) const {
  return std::any_of(best_effort.begin(), best_effort.end(),
                     [r](const auto& s) { return s.value == r; });
}

std::string Policy::Where(const Location& loc) const {
  if (!sources || !loc.valid()) return "<built-in>";
  return sources->Format(loc);
}

std::string Policy::ChainText() const {
  std::string s;
  for (const auto& link : chain) s += (s.empty() ? "" : " -> ") + link;
  return s;
}

// ---- outputs (issue 32) ----

bool UnderOutputs(const std::vector<OutputRule>& outputs, std::string_view rel) {
  if (outputs.empty() || rel.empty()) return false;
  // The path itself and each directory above it: a rule naming build matches build/a/b.o.
  std::size_t from = 0;
  for (;;) {
    const std::size_t slash = rel.find('/', from);
    const std::string_view prefix = rel.substr(0, slash);
    for (const OutputRule& o : outputs) {
      if (o.glob.Match(prefix)) return true;
    }
    if (slash == std::string_view::npos) return false;
    from = slash + 1;
  }
}

std::vector<std::uint16_t> HostPorts(const Policy& policy) {
  std::vector<std::uint16_t> out;
  for (const HostRule& r : policy.hosts) {
    if (r.verdict == Verdict::kDeny) continue;
    if (r.pattern.port) {
      out.push_back(*r.pattern.port);
    } else {
      out.push_back(80);  // a pattern without a port: 80 and 443 (HostPattern::MatchesPort)
      out.push_back(443);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace cagent::policy

namespace cagent::policy {

bool IsRuleMethod(std::string_view method) {
  // RFC 9110, 5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" /
  // "_" / "`" / "|" / "~" / DIGIT / ALPHA. Lowercase letters are left out: methods are
  // case-sensitive, and every registered one is uppercase.
  constexpr std::string_view kSymbols = "!#$%&'*+-.^_`|~";
  bool letter = false;
  for (const char c : method) {
    if (c >= 'A' && c <= 'Z') {
      letter = true;
    } else if (!(c >= '0' && c <= '9') && kSymbols.find(c) == std::string_view::npos) {
      return false;
    }
  }
  return letter;
}

bool PathPatternMatches(std::string_view pattern, std::string_view text) {
  // The usual two cursors with one backtrack point: the last '*' seen and where in `text` its run
  // ends so far. Linear in practice, O(|pattern| * |text|) at worst; no recursion.
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star = std::string_view::npos;
  std::size_t star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool HostRule::MatchesRequest(std::string_view request_method,
                              std::string_view request_path) const {
  if (!HasMethod()) return false;
  if (method != "*") {
    if (method.size() != request_method.size()) return false;
    for (std::size_t i = 0; i < method.size(); ++i) {
      char c = request_method[i];
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      if (c != method[i]) return false;
    }
  }
  return PathPatternMatches(path, request_path);
}

}  // namespace cagent::policy
