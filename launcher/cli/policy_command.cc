#include "launcher/cli/policy_command.h"

#include <pwd.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <variant>

#include "common/exit_codes.h"
#include "common/json_text.h"
#include "common/terminal_text.h"
#include "common/text.h"
#include "launcher/profile/repo_profiles.h"
#include "launcher/profile/spec.h"
#include "policy/language/coherence.h"
#include "policy/language/dump.h"
#include "policy/language/engine.h"
#include "policy/language/loader.h"
#include "policy/language/parser.h"
#include "policy/language/request.h"
#include "policy/review/audit.h"
#include "policy/review/cases.h"
#include "policy/review/diff.h"
#include "policy/review/sarif.h"

namespace cagent::launcher::cli {
namespace {

using nlohmann::json;

// Exit statuses (common/exit_codes.h): 0 ok; 1 the answer is "no" (check errors, a failing
// case, a wider diff, audit findings); 2 usage (bad command line, unreadable file, a profile that
// does not compile); explain: 5 denied, 6 asked.
constexpr int kExitOk = ToInt(ExitCode::kOk);
constexpr int kExitFailed = ToInt(ExitCode::kFailed);
constexpr int kExitUsage = ToInt(ExitCode::kUsage);
constexpr int kExitDenied = ToInt(ExitCode::kDenied);
constexpr int kExitAsk = ToInt(ExitCode::kAsk);

int Usage(const std::string& message) {
  spdlog::error("{}", message);
  return kExitUsage;
}

policy::SearchPath Search() { return ProfileSearchPath(CallerHome(), CAGENT_PROFILE_DIR, "."); }

std::string CurrentDir() {
  char buf[4096];
  if (::getcwd(buf, sizeof(buf)) == nullptr) return "/workspace";
  return buf;
}

// Loads `name`; on failure prints the rendered diagnostics on stderr and returns null.
std::shared_ptr<const policy::Policy> LoadOrReport(const std::string& name,
                                                   const policy::SearchPath& search) {
  policy::Compiled c = policy::LoadProfile(name, search);
  if (c.ok()) return c.policy;
  std::cerr << policy::RenderAll(*c.sources, c.diags);
  spdlog::error("profile '{}' does not compile ({} error{}); fix it, then `cagent policy check {}`",
                name, c.diags.ErrorCount(), c.diags.ErrorCount() == 1 ? "" : "s", name);
  return nullptr;
}

json At(const policy::Policy& p, const policy::Location& loc) {
  return loc.valid() ? json(p.Where(loc)) : json(nullptr);
}

// The source line a location points at, for showing a rule where it is written.
std::string SourceLine(const policy::Policy& p, const policy::Location& loc) {
  if (!p.sources || !loc.valid() || loc.file >= p.sources->size()) return "";
  std::string_view line = p.sources->file(loc.file).Line(loc.line);
  std::size_t start = line.find_first_not_of(" \t");
  return start == std::string_view::npos ? "" : std::string(line.substr(start));
}

std::string Stem(const std::string& path) {
  auto slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.ends_with(".cagent")) base.resize(base.size() - 7);
  return base;
}

// ---------------------------------------------------------------------------------------------
// list

int RunList(const PolicyOptions& o) {
  const policy::SearchPath search = Search();
  const auto entries = policy::ListProfiles(search);
  if (o.names) {
    // Read by shell completion code (`cagent completion`): a name from a repository's .cagent/
    // is printed only when it is a plain word, so no file name becomes shell syntax there.
    for (const auto& e : entries) {
      const bool plain = !e.name.empty() && e.name.front() != '-' && e.name.front() != '.' &&
                         std::all_of(e.name.begin(), e.name.end(), [](char c) {
                           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                  (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
                         });
      if (plain) std::cout << e.name << "\n";
    }
    return kExitOk;
  }
  if (o.json) {
    json j;
    j["search_path"] = search.dirs;
    if (search.builtins) j["search_path"].push_back("built-in");
    j["profiles"] = json::array();
    for (const auto& e : entries) {
      j["profiles"].push_back({{"name", e.name},
                               {"path", e.path},
                               {"origin", e.origin},
                               {"description", e.description},
                               {"shadows", e.shadows}});
    }
    std::cout << JsonText(j, 2) << std::endl;
    return kExitOk;
  }
  // Names, paths and descriptions come from files anyone can put in a repository's .cagent/:
  // escaped for the terminal (a file called "\x1b[2J.cagent" is a profile name too).
  std::size_t name_w = 4, origin_w = 6;
  for (const auto& e : entries) {
    name_w = std::max(name_w, TerminalSafe(e.name).size());
    origin_w = std::max(origin_w, TerminalSafe(e.origin).size());
  }
  auto pad = [](const std::string& s, std::size_t w) {
    const std::string t = TerminalSafe(s);
    return t + std::string(w > t.size() ? w - t.size() : 0, ' ');
  };
  std::cout << pad("NAME", name_w) << "  " << pad("ORIGIN", origin_w) << "  DESCRIPTION\n";
  for (const auto& e : entries) {
    std::cout << pad(e.name, name_w) << "  " << pad(e.origin, origin_w) << "  "
              << (e.description.empty() ? "-" : TerminalSafe(e.description))
              << (e.shadows.empty() ? "" : "  [SHADOWS " + std::to_string(e.shadows.size()) + "]")
              << "\n";
  }
  bool any = false;
  for (const auto& e : entries) {
    for (const auto& s : e.shadows) {
      if (!any) std::cout << "\n";
      any = true;
      const std::string name = TerminalSafe(e.name), path = TerminalSafe(e.path);
      std::cout << "WARNING: '" << name << "' resolves to " << path << ", which shadows "
                << TerminalSafe(s) << ": `--profile " << name << "` here does not mean the "
                << (s.starts_with("<built-in>") ? "built-in" : "other") << " profile";
      if (!search.dirs.empty() && e.origin == search.dirs.front()) {
        std::cout << " (exec, run and agent refuse it by name; name it by path or pass "
                     "--trust-repo-profile)";
      }
      std::cout << ". Review it with `cagent policy diff " << TerminalSafe(s) << " " << path
                << "`.\n";
    }
  }
  std::cout << "\nSearch order:";
  for (const auto& d : search.dirs) std::cout << " " << d;
  std::cout << (search.builtins ? " built-in" : "") << "\n";
  return kExitOk;
}

// ---------------------------------------------------------------------------------------------
// check

// Inline examples the compiler checked: `match`/`not_match` under rules of every file in the
// chain, and the `examples` section of the profile itself (its own files, before its parent's).
std::size_t CountExamples(const policy::Compiled& c) {
  const policy::Policy& p = *c.policy;
  std::string parent = p.chain.size() >= 2 ? p.chain[p.chain.size() - 2] : "";
  std::size_t count = 0;
  bool own = true;
  for (std::uint32_t i = 0; i < c.sources->size(); ++i) {
    if (i > 0 && !parent.empty() && Stem(c.sources->file(i).display_name) == parent) own = false;
    policy::Diagnostics ignored;
    policy::File file = policy::Parse(*c.sources, i, ignored);
    for (const auto& top : file.statements) {
      for (const auto& st : top.block) {
        if (top.keyword == "examples") {
          if (own) ++count;
          continue;
        }
        for (const auto& inner : st.block) {
          if (inner.keyword == "match" || inner.keyword == "not_match") ++count;
        }
      }
    }
  }
  return count;
}

json DiagnosticsJson(const policy::Compiled& c) {
  json out = json::array();
  for (const auto& d : c.diags.Sorted()) {
    json e = {{"severity", d.severity == policy::Severity::kError     ? "error"
                           : d.severity == policy::Severity::kWarning ? "warning"
                                                                      : "note"},
              {"message", d.message},
              {"hint", d.hint},
              {"rendered", policy::Render(*c.sources, d)}};
    if (d.loc.valid() && d.loc.file < c.sources->size()) {
      e["file"] = c.sources->file(d.loc.file).display_name;
      e["line"] = d.loc.line;
      e["column"] = d.loc.col;
    } else {
      e["file"] = nullptr;
    }
    out.push_back(e);
  }
  return out;
}

int RunCheck(const PolicyOptions& o) {
  const policy::SearchPath search = Search();
  json results = json::array();
  int failed = 0;
  int unreadable = 0;
  for (const auto& name : o.profiles) {
    policy::Compiled c = policy::LoadProfile(name, search);
    // Ask rules that cannot ask, or that ask for an install no registry is reachable for, are
    // warnings: the profile works, but not as its author meant (policy/language/coherence.h).
    if (c.ok()) {
      for (const policy::IncoherentAsk& a : policy::IncoherentAsks(*c.policy)) {
        c.diags.Warning(a.loc, a.length, a.message, a.hint);
      }
    }
    const std::size_t errors = c.diags.ErrorCount();
    const std::size_t warnings = c.diags.list().size() - errors;
    // Nothing was read at all: the name is not found or its file cannot be read (a usage error,
    // not a profile with errors).
    if (!c.ok() && (!c.sources || c.sources->size() == 0)) ++unreadable;
    std::size_t rules = 0, examples = 0;
    if (c.ok()) {
      const auto& p = *c.policy;
      rules = p.mounts.size() + p.path_rules.size() + p.commands.size() + p.tools.size() +
              p.hosts.size();
      examples = CountExamples(c);
    } else {
      ++failed;
    }
    if (o.json) {
      results.push_back({{"profile", name},
                         {"ok", c.ok()},
                         {"chain", c.ok() ? json(c.policy->chain) : json::array()},
                         {"rules", rules},
                         {"examples", examples},
                         {"errors", errors},
                         {"warnings", warnings},
                         {"diagnostics", DiagnosticsJson(c)}});
      continue;
    }
    if (!c.diags.list().empty()) std::cerr << policy::RenderAll(*c.sources, c.diags);
    if (c.ok()) {
      std::cout << "ok: " << name << " (" << c.policy->ChainText() << "; " << rules << " rules, "
                << examples << " examples checked"
                << (warnings ? ", " + std::to_string(warnings) + " warnings" : "") << ")\n";
    } else {
      std::cout << "FAILED: " << name << " (" << errors << " error" << (errors == 1 ? "" : "s")
                << (warnings ? ", " + std::to_string(warnings) + " warnings" : "") << ")\n";
    }
  }
  if (o.json) {
    std::cout << JsonText(json{{"ok", failed == 0}, {"profiles", results}}, 2) << std::endl;
  }
  if (unreadable > 0) return kExitUsage;
  return failed == 0 ? kExitOk : kExitFailed;
}

// ---------------------------------------------------------------------------------------------
// show

int RunShow(const PolicyOptions& o) {
  auto p = LoadOrReport(o.profile, Search());
  if (!p) return kExitUsage;
  if (o.json) {
    std::cout << JsonText(policy::ToJson(*p), 2) << std::endl;
    return kExitOk;
  }
  std::cout << "# chain: " << p->ChainText() << "\n# files:";
  for (const auto& f : p->files) std::cout << " " << f;
  std::cout << "\n" << policy::Dump(*p);
  return kExitOk;
}

// ---------------------------------------------------------------------------------------------
// explain and test: requests

std::string ToolList() {
  std::string s;
  for (int i = 0; i < static_cast<int>(policy::Tool::kCount); ++i) {
    s += (s.empty() ? "" : ", ") + std::string(policy::ToolName(static_cast<policy::Tool>(i)));
  }
  return s;
}

// Why the effective verdict differs from the profile's, when it does: an ask the approval mode
// decides without asking. Empty when the verdict stands.
std::string EffectiveReason(const policy::Policy& p, const policy::Decision& d,
                            policy::Verdict effective) {
  if (d.verdict != policy::Verdict::kAsk || effective == policy::Verdict::kAsk) return {};
  const std::string where = d.loc.valid() ? p.Where(d.loc) : std::string();
  if (effective == policy::Verdict::kDeny) {
    return policy::AskDeniedReason("approval never-ask", d.rule, where);
  }
  return "allowed unasked: approval auto (rule `" + d.rule + "`" +
         (where.empty() ? std::string() : " at " + where) + ")";
}

// The one request `policy explain` was given, from its flags.
Result<policy::Request> ExplainRequest(const PolicyOptions& o) {
  policy::Request r;
  int given = 0;
  if (!o.command.empty() && o.tool.empty()) {
    ++given;
    r = policy::Request::Argv(o.command);
  }
  if (!o.shell.empty() && o.tool.empty()) {
    ++given;
    r = policy::Request::Shell(o.shell);
  }
  if (!o.read_path.empty()) {
    ++given;
    r = policy::Request::Read(o.read_path);
  }
  if (!o.write_path.empty()) {
    ++given;
    r = policy::Request::Write(o.write_path);
  }
  if (!o.host.empty()) {
    ++given;
    auto hp = policy::ParseHostPort(o.host);
    if (!hp) return PlainError("--host " + hp.error().op + "; " + hp.error().detail);
    r = policy::Request::Host(std::move(hp->first), hp->second);
  }
  if (!o.mcp_tool.empty()) {
    ++given;
    r = policy::Request::McpTool(o.mcp_tool);
  }
  if (!o.http.empty()) {
    ++given;
    // The same reader as examples and cases files: http HOST[:PORT] METHOD PATH.
    std::vector<std::string> words = {"http"};
    words.insert(words.end(), o.http.begin(), o.http.end());
    auto parsed = policy::ParseRequestWords(words);
    if (const auto* bad = std::get_if<policy::RequestWordsError>(&parsed)) {
      return PlainError("--http: " + bad->message + "; " + bad->hint);
    }
    r = std::get<policy::Request>(std::move(parsed));
  }
  if (!o.tool.empty()) {
    ++given;
    auto t = policy::ParseTool(o.tool);
    if (!t) return PlainError("unknown tool '" + o.tool + "'; the tools are: " + ToolList());
    if (*t == policy::Tool::kRunCommand) {
      std::string line = o.shell;
      if (line.empty()) {
        for (const auto& a : o.command) line += (line.empty() ? "" : " ") + ShellWord(a);
      }
      if (line.empty()) {
        return PlainError("--tool run_command needs the command: --shell 'STRING' or -- CMD...");
      }
      r = policy::Request::ToolCall(*t, std::move(line));
    } else {
      r = policy::Request::ToolCall(*t, o.tool_path);
    }
  } else if (!o.tool_path.empty()) {
    return PlainError("--path goes with --tool TOOL (e.g. --tool write_file --path src/main.c)");
  }
  if (given != 1) {
    return PlainError(
        std::string(given == 0 ? "nothing to explain" : "one request at a time") +
        ": give one of -- CMD..., --shell 'STRING', --read PATH, --write PATH, --host "
        "HOST[:PORT], --http HOST[:PORT] METHOD PATH, --mcp-tool NAME or --tool TOOL [--path "
        "P]");
  }

  return r;
}

// `policy explain --json`.
json ExplainJson(const policy::Policy& policy, const policy::Request& r, const policy::Decision& d,
                 policy::Verdict effective, const policy::Binding& bindings,
                 const std::vector<policy::Engine::ShellPart>& parts, bool shell_line) {
  const policy::Policy* p = &policy;
  const std::string approval(policy::ApprovalName(p->approval.value));
  json j = {{"profile", p->name},
            {"chain", p->chain},
            {"request", {{"kind", policy::KindName(r)}, {"text", policy::Describe(r)}}},
            {"verdict", policy::VerdictName(d.verdict)},
            {"effective", policy::VerdictName(effective)},
            {"approval", approval},
            {"rule", d.rule},
            {"at", At(*p, d.loc)},
            {"source", SourceLine(*p, d.loc)},
            {"reason", d.reason},
            {"effective_reason", EffectiveReason(*p, d, effective)},
            {"workspace", bindings.workspace},
            {"home", bindings.home}};
  using Kind = policy::Request::Kind;
  if (r.kind == Kind::kCommand) j["request"]["argv"] = r.argv;
  if (r.kind == Kind::kTool) j["request"]["tool"] = policy::ToolName(r.tool);
  if (r.kind == Kind::kShell) j["request"]["subject"] = r.script;
  if (r.kind == Kind::kPath) j["request"]["subject"] = r.path;
  if (r.kind == Kind::kTool) j["request"]["subject"] = r.ToolSubject();
  if (r.kind == Kind::kHost || r.kind == Kind::kHttp) j["request"]["host"] = r.host;
  if (r.kind == Kind::kHost || r.kind == Kind::kHttp) j["request"]["port"] = r.port;
  if (r.kind == Kind::kHttp) j["request"]["method"] = r.method;
  if (r.kind == Kind::kHttp) j["request"]["path"] = r.path;
  if (r.kind == Kind::kMcpTool) j["request"]["mcp_tool"] = r.mcp_tool;
  if (shell_line) {
    j["parts"] = json::array();
    for (const auto& part : parts) {
      j["parts"].push_back({{"kind", part.what},
                            {"text", part.text},
                            {"run_by", part.run_by},
                            {"verdict", policy::VerdictName(part.decision.verdict)},
                            {"rule", part.decision.rule},
                            {"at", At(*p, part.decision.loc)},
                            {"reason", part.decision.reason}});
    }
  }
  return j;
}

// `policy explain` for people: the verdict, the rule and where it is, each part of a shell line.
void PrintExplain(const policy::Policy& policy, const policy::Request& r, const policy::Decision& d,
                  policy::Verdict effective, const std::vector<policy::Engine::ShellPart>& parts) {
  const policy::Policy* p = &policy;
  const std::string approval(policy::ApprovalName(p->approval.value));
  std::cout << "profile:   " << p->name << " (" << p->ChainText() << ")\n";
  std::cout << "request:   " << TerminalSafe(policy::Describe(r)) << "\n";
  std::cout << "verdict:   " << policy::VerdictName(d.verdict) << "\n";
  std::cout << "effective: " << policy::VerdictName(effective);
  if (d.verdict == policy::Verdict::kAsk) {
    std::cout << " (approval " << approval
              << (effective == policy::Verdict::kDeny    ? ": nobody is asked, so it is denied"
                  : effective == policy::Verdict::kAllow ? ": allowed without asking"
                                                         : ": a person at the terminal decides")
              << ")";
  }
  std::cout << "\n";
  std::cout << "rule:      " << d.rule << "\n";
  if (d.loc.valid()) {
    std::cout << "at:        " << p->Where(d.loc) << "\n";
    std::string line = SourceLine(*p, d.loc);
    if (!line.empty()) std::cout << "           " << line << "\n";
  } else {
    std::cout << "at:        "
              << (d.rule == "default" ? "(no rule matched: what no rule allows is denied)"
                                      : "(built into cagent)")
              << "\n";
  }
  std::cout << "reason:    " << d.reason << "\n";
  if (!parts.empty()) {
    // Every simple command and redirection the line holds, each with its own decision; the
    // line's verdict is the strongest of them.
    std::cout << "parts:\n";
    for (const auto& part : parts) {
      std::cout << "  " << policy::VerdictName(part.decision.verdict) << "\t" << part.what << " "
                << TerminalSafe(part.text);
      if (!part.run_by.empty()) std::cout << "  (run by " << TerminalSafe(part.run_by) << ")";
      std::cout << "\n    by " << TerminalSafe(part.decision.rule);
      if (part.decision.loc.valid()) std::cout << " at " << p->Where(part.decision.loc);
      std::cout << "\n";
    }
  }
}

int RunExplain(const PolicyOptions& o) {
  auto request = ExplainRequest(o);
  if (!request) return Usage(request.error().Message());
  const policy::Request& r = *request;

  auto p = LoadOrReport(o.profile, Search());
  if (!p) return kExitUsage;
  // The binding a run started here would use (launcher/profile/spec.h): the same function.
  std::string workspace = o.workspace.empty() ? CurrentDir() : o.workspace;
  if (workspace.empty() || workspace[0] != '/') workspace = CurrentDir() + "/" + workspace;
  const policy::Binding bindings = RunBinding(workspace);
  policy::Engine engine(*p, bindings);
  policy::Decision d = engine.Decide(r);
  policy::Verdict effective = engine.Effective(d.verdict);
  // A shell line: how it was split, and what decided each part.
  const bool shell_line =
      r.kind == policy::Request::Kind::kShell ||
      (r.kind == policy::Request::Kind::kTool && r.tool == policy::Tool::kRunCommand);
  const std::vector<policy::Engine::ShellPart> parts =
      shell_line ? engine.ShellParts(r.script) : std::vector<policy::Engine::ShellPart>{};

  if (o.json) {
    std::cout << JsonText(ExplainJson(*p, r, d, effective, bindings, parts, shell_line), 2)
              << std::endl;
  } else {
    PrintExplain(*p, r, d, effective, parts);
  }
  switch (effective) {
    case policy::Verdict::kAllow:
      return kExitOk;
    case policy::Verdict::kAsk:
      return kExitAsk;
    case policy::Verdict::kDeny:
      return kExitDenied;
  }
  return kExitDenied;
}

// ---------------------------------------------------------------------------------------------
// test: the cases file (policy/review/cases.h)

int RunTest(const PolicyOptions& o) {
  std::ifstream in(o.cases, std::ios::binary);
  if (!in) {
    return Usage("cannot read the cases file '" + o.cases + "': " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  policy::SourceSet sources;
  const std::uint32_t file = sources.Add(o.cases, text.str());
  policy::Diagnostics diags;
  const std::vector<policy::Case> cases = policy::ParseCases(sources, file, diags);
  if (diags.HasErrors()) {
    std::cerr << policy::RenderAll(sources, diags);
    return Usage("the cases file '" + o.cases + "' has " + std::to_string(diags.ErrorCount()) +
                 " error(s); nothing was tested");
  }
  auto p = LoadOrReport(o.profile, Search());
  if (!p) return kExitUsage;
  // The default bindings (/workspace, /home/user): a cases file means the same on every machine.
  policy::Engine engine(*p, policy::PortableBinding());
  int passed = 0, failed = 0;
  json results = json::array();
  for (const policy::Case& c : cases) {
    const policy::Decision d = engine.Decide(c.request);
    const bool ok = d.verdict == c.expect;
    ok ? ++passed : ++failed;
    if (o.json) {
      results.push_back({{"line", c.line},
                         {"request", policy::Describe(c.request)},
                         {"expect", policy::VerdictName(c.expect)},
                         {"verdict", policy::VerdictName(d.verdict)},
                         {"effective", policy::VerdictName(engine.Effective(d.verdict))},
                         {"rule", d.rule},
                         {"at", At(*p, d.loc)},
                         {"reason", d.reason},
                         {"ok", ok}});
      continue;
    }
    if (ok) continue;
    std::cout << o.cases << ":" << c.line << ": FAIL: expected " << policy::VerdictName(c.expect)
              << " for " << TerminalSafe(policy::Describe(c.request)) << ", got "
              << policy::VerdictName(d.verdict) << "\n";
    std::cout << "  rule:   " << d.rule << (d.loc.valid() ? " at " + p->Where(d.loc) : "") << "\n";
    std::cout << "  reason: " << d.reason << "\n";
  }
  if (o.json) {
    std::cout << JsonText(json{{"profile", p->name},
                               {"cases_file", o.cases},
                               {"passed", passed},
                               {"failed", failed},
                               {"cases", results}},
                          2)
              << std::endl;
  } else {
    std::cout << passed << " passed, " << failed << " failed (" << p->name << ", " << o.cases
              << ")\n";
  }
  return failed == 0 ? kExitOk : kExitFailed;
}

// ---------------------------------------------------------------------------------------------
// diff

int RunDiff(const PolicyOptions& o) {
  const policy::SearchPath search = Search();
  auto a = LoadOrReport(o.from, search);
  auto b = LoadOrReport(o.to, search);
  if (!a || !b) return kExitUsage;
  const auto entries = policy::Diff(*a, *b);
  int counts[3] = {0, 0, 0};
  for (const auto& e : entries) ++counts[static_cast<int>(e.direction)];
  if (o.json) {
    json list = json::array();
    for (const auto& e : entries) {
      std::string at = policy::DiffWhere(e, *a, *b);
      list.push_back({{"direction", policy::DirectionName(e.direction)},
                      {"change", e.change == policy::Change::kAdded     ? "added"
                                 : e.change == policy::Change::kRemoved ? "removed"
                                                                        : "changed"},
                      {"area", e.area},
                      {"text", e.text},
                      {"profile", e.side == policy::DiffSide::kFrom ? a->name : b->name},
                      {"at", at.empty() ? json(nullptr) : json(at)}});
    }
    std::cout << JsonText(json{{"from", {{"name", a->name}, {"chain", a->chain}}},
                               {"to", {{"name", b->name}, {"chain", b->chain}}},
                               {"wider", counts[0]},
                               {"narrower", counts[1]},
                               {"neutral", counts[2]},
                               {"entries", list}},
                          2)
              << std::endl;
  } else {
    std::cout << "From '" << a->name << "' (" << a->ChainText() << ") to '" << b->name << "' ("
              << b->ChainText() << "): " << counts[0] << " wider, " << counts[1] << " narrower, "
              << counts[2] << " neutral\n";
    if (entries.empty()) std::cout << "  the two profiles mean the same\n";
    for (const auto& e : entries) {
      const char* mark = e.direction == policy::Direction::kWider      ? "+ wider   "
                         : e.direction == policy::Direction::kNarrower ? "- narrower"
                                                                       : "~ neutral ";
      std::string at = policy::DiffWhere(e, *a, *b);
      std::cout << "  " << mark << "  " << e.area << ": " << e.text
                << (at.empty() ? "" : "  (" + at + ")") << "\n";
    }
  }
  return counts[0] == 0 ? kExitOk : kExitFailed;
}

// ---------------------------------------------------------------------------------------------
// audit

int RiskRank(const std::string& level) {
  if (level == "high") return 0;
  if (level == "medium") return 1;
  if (level == "low") return 2;
  if (level == "info") return 3;
  return -1;  // never
}

// The parent of `p` as the loader resolved it: the file after the profile's own that bears the
// parent's name, loaded by path, or by name when it is built in.
std::shared_ptr<const policy::Policy> LoadParent(const policy::Policy& p,
                                                 const policy::SearchPath& search) {
  if (p.chain.size() < 2) return nullptr;
  const std::string& parent = p.chain[p.chain.size() - 2];
  std::string target = parent;
  for (std::size_t i = 1; i < p.files.size(); ++i) {
    if (Stem(p.files[i]) == parent && !p.files[i].starts_with("<built-in>/")) {
      target = p.files[i];
      break;
    }
    if (Stem(p.files[i]) == parent) break;
  }
  policy::Compiled c = policy::LoadProfile(target, search);
  return c.ok() ? c.policy : nullptr;
}

int RunAudit(const PolicyOptions& o) {
  if (o.format != "text" && o.format != "json" && o.format != "sarif") {
    return Usage("--format must be text, json or sarif, not '" + o.format + "'");
  }
  if (RiskRank(o.fail_on) < 0 && o.fail_on != "never") {
    return Usage("--fail-on must be high, medium, low, info or never, not '" + o.fail_on + "'");
  }
  const policy::SearchPath search = Search();
  auto p = LoadOrReport(o.profile, search);
  if (!p) return kExitUsage;
  auto parent = LoadParent(*p, search);
  if (p->chain.size() >= 2 && !parent) {
    spdlog::warn(
        "the parent profile '{}' could not be loaded on its own; CAGENT011 (a child "
        "weakening its parent) is not checked",
        p->chain[p->chain.size() - 2]);
  }
  const auto findings = policy::Audit(*p, parent.get());
  int counts[4] = {0, 0, 0, 0};
  bool fail = false;
  for (const auto& f : findings) {
    ++counts[static_cast<int>(f.risk)];
    if (o.fail_on != "never" && static_cast<int>(f.risk) <= RiskRank(o.fail_on)) fail = true;
  }
  auto file_of = [&](const policy::Location& loc) -> std::string {
    if (!p->sources || !loc.valid() || loc.file >= p->sources->size()) return "";
    return p->sources->file(loc.file).display_name;
  };

  if (o.format == "sarif") {
    // Repository paths are relative to where the audit runs (code scanning runs it at the
    // repository's root); SRCROOT says which directory that is.
    std::error_code cwd_error;
    const std::string cwd = std::filesystem::current_path(cwd_error).string();
    policy::SarifOptions sarif;
    sarif.version = CAGENT_VERSION;
    if (!cwd_error) sarif.source_root = cwd;
    std::cout << JsonText(policy::AuditSarif(*p, findings, sarif), 2) << std::endl;
  } else if (o.format == "json") {
    json list = json::array();
    for (const auto& f : findings) {
      std::string file = file_of(f.loc);
      list.push_back({{"rule", f.rule_id},
                      {"severity", policy::RiskName(f.risk)},
                      {"message", f.message},
                      {"at", file.empty() ? json(nullptr) : json(p->Where(f.loc))},
                      {"source", SourceLine(*p, f.loc)}});
    }
    std::cout << JsonText(json{{"profile", p->name},
                               {"chain", p->chain},
                               {"parent_checked", parent != nullptr},
                               {"counts",
                                {{"high", counts[0]},
                                 {"medium", counts[1]},
                                 {"low", counts[2]},
                                 {"info", counts[3]}}},
                               {"fail_on", o.fail_on},
                               {"failed", fail},
                               {"findings", list}},
                          2)
              << std::endl;
  } else {
    std::cout << "Audit of '" << p->name << "' (" << p->ChainText() << "): " << counts[0]
              << " high, " << counts[1] << " medium, " << counts[2] << " low, " << counts[3]
              << " info\n";
    for (const auto& f : findings) {
      std::string name;
      for (const auto& r : policy::AuditRules()) {
        if (r.id == f.rule_id) name = std::string(r.name);
      }
      std::cout << "\n"
                << (file_of(f.loc).empty() ? p->name : p->Where(f.loc)) << ": "
                << policy::RiskName(f.risk) << " [" << f.rule_id << " " << name
                << "]: " << f.message << "\n";
      std::string line = SourceLine(*p, f.loc);
      if (!line.empty() && f.loc.line > 1) std::cout << "  " << line << "\n";
    }
  }
  return fail ? kExitFailed : kExitOk;
}

}  // namespace

CLI::App* AddPolicyCommand(CLI::App& app, PolicyOptions& o) {
  CLI::App* policy = app.add_subcommand(
      "policy",
      "Inspect sandbox profiles (the policy language): list the profiles on the search path, "
      "check them, show the effective profile, explain a decision, test a table of requests, "
      "compare two profiles, and audit one for risks. Reads profile files only; starts no "
      "sandbox.");
  policy->require_subcommand(1);
  policy->footer(
      "PROFILES\n"
      "  A NAME is looked up in the repository's .cagent/ (the nearest from here up to the "
      "directory holding .git), ~/.config/cagent/profiles/ ($CAGENT_CONFIG_DIR/profiles/ or "
      "$XDG_CONFIG_HOME/cagent/profiles/ when set), " CAGENT_PROFILE_DIR
      ", then the built-in profiles; the first match wins. An argument containing '/' or "
      "ending in .cagent is read as a file.\n\n"
      "EXIT STATUS\n"
      "  2 always means a usage error, an unreadable file or a profile that does not compile. "
      "The other codes are listed with each subcommand.");

  o.list_cmd = policy->add_subcommand(
      "list",
      "List the profiles on the search path, built-in and user, with their origin and "
      "description. A profile that shadows another of the same name (e.g. a repository's "
      "./.cagent/backend.cagent hiding the built-in backend) is flagged loudly: it changes what "
      "--profile NAME means in that directory. Exits 0.");
  o.list_cmd->add_flag("--json", o.json,
                       "Print {search_path, profiles: [{name, path, origin, description, "
                       "shadows}]}.");
  o.list_cmd->add_flag("--names", o.names,
                       "Print only the names, one per line, leaving out any that is not a plain "
                       "word (letters, digits, '.', '-', '_'): what the shell completions offer "
                       "for --profile.");

  o.check_cmd = policy->add_subcommand(
      "check",
      "Compile each profile with its parents and includes, run its inline examples, and print "
      "every diagnostic as file:line:col with the source line, a caret and a hint (on stderr). "
      "Prints 'ok: NAME (...; N rules, M examples checked)' for each profile that compiles. Exits "
      "0 when all compile, 1 when any has an error, 2 when a named profile is not found or its "
      "file cannot be read.");
  o.check_cmd->add_option("profile", o.profiles, "Profile names or .cagent files.")->required();
  o.check_cmd->add_flag("--json", o.json,
                        "Print {ok, profiles: [{profile, ok, rules, examples, errors, warnings, "
                        "diagnostics: [{severity, file, line, column, message, hint, "
                        "rendered}]}]}.");

  o.show_cmd = policy->add_subcommand(
      "show",
      "Print the effective profile after inheritance, in the profile language (it compiles back "
      "to the same policy): every rule sorted, with the file:line:col it comes from; preceded by "
      "the chain of profiles and the files read. Exits 0.");
  o.show_cmd->add_option("profile", o.profile, "Profile name or .cagent file.")->required();
  o.show_cmd->add_flag("--json", o.json, "Print the compiled policy as JSON.");

  o.explain_cmd = policy->add_subcommand(
      "explain",
      "Ask the decision engine about one request and show the verdict, the effective verdict "
      "under the profile's approval mode, the rule that decided, where it is written and why. "
      "Relative paths are relative to the workspace (--workspace, default the current directory) "
      "and ~ is your home, as in a run.");
  o.explain_cmd->add_option("profile", o.profile, "Profile name or .cagent file.")->required();
  o.explain_cmd->add_option("command", o.command,
                            "A command as argv, after --: matched against the command rules "
                            "without a shell.");
  o.explain_cmd->add_option("--shell", o.shell,
                            "A shell command line (what run_command passes to /bin/sh -c): every "
                            "command in it and every redirection must be allowed.");
  o.explain_cmd->add_option("--read", o.read_path,
                            "Reading PATH (the mount view, then the "
                            "filesystem rules).");
  o.explain_cmd->add_option("--write", o.write_path, "Writing PATH.");
  o.explain_cmd->add_option("--tool", o.tool,
                            "A tool call: read_file, write_file, edit_file, list_dir, glob, grep, "
                            "run_command (with --shell or -- CMD...), finish.");
  o.explain_cmd->add_option("--path", o.tool_path, "The path given to --tool.");
  o.explain_cmd->add_option("--host", o.host,
                            "A connection through the egress proxy to HOST[:PORT] (no port: 443; "
                            "IPv6 as [::1]:443): the hosts rules.");
  o.explain_cmd
      ->add_option("--http", o.http,
                   "One request on a connection cagent intercepts (a host a credential is bound "
                   "to): HOST[:PORT] METHOD PATH, the path without its query; the hosts "
                   "section's method and path rules.")
      ->expected(3);
  o.explain_cmd->add_option("--mcp-tool", o.mcp_tool,
                            "A tools/call of the MCP tool NAME on a server run by cagent mcp "
                            "wrap: the tools rules' mcp: words.");
  o.explain_cmd->add_option("-w,--workspace", o.workspace,
                            "The workspace relative paths refer to (default: the current "
                            "directory).");
  o.explain_cmd->add_flag("--json", o.json,
                          "Print {profile, request, verdict, effective, approval, rule, at, "
                          "source, reason}.");
  o.explain_cmd->footer(
      "EXIT STATUS (the effective verdict)\n"
      "  0  allowed\n"
      "  5  denied (including an ask that approval never-ask denies)\n"
      "  6  a person is asked (approval on-request)\n"
      "  2  usage error or a profile that does not compile\n\n"
      "EXAMPLES\n"
      "  cagent policy explain backend -- git push origin main\n"
      "  cagent policy explain backend --shell 'make test 2>&1 | tee log.txt'\n"
      "  cagent policy explain backend --read ~/.ssh/id_ed25519\n"
      "  cagent policy explain frontend --tool write_file --path package-lock.json\n"
      "  cagent policy explain backend-registries --host pypi.org:443\n"
      "  cagent policy explain my-profile --http github.com POST /org/repo.git/git-receive-pack\n"
      "  cagent policy explain mcp-server --mcp-tool echo");

  o.test_cmd = policy->add_subcommand(
      "test",
      "Check a profile against a table of requests and the verdicts they must get, for CI of "
      "profiles. One case per line: VERDICT KIND ARGS, '#' starts a comment. VERDICT is allow, "
      "ask or deny (the profile's verdict, before the approval mode, as in its examples "
      "section). KIND is: command \"LINE\" (a shell line, as run_command runs it); argv WORD... "
      "(an argv, no shell); read PATH; write PATH; tool TOOL [PATH | \"LINE\"]; host HOST[:PORT]; "
      "mcp-tool NAME; http HOST[:PORT] METHOD PATH -- the same "
      "grammar as a profile's examples section. Words may be quoted with \"...\" "
      "or '...'. Paths are judged with the workspace at /workspace and home at /home/user, so a "
      "table means the same on every machine. Each failing case is reported with its line, the "
      "actual verdict and the rule; then 'N passed, M failed'. Exits 0 when all pass, 1 when any "
      "fails.");
  o.test_cmd->add_option("profile", o.profile, "Profile name or .cagent file.")->required();
  o.test_cmd->add_option("cases", o.cases, "The cases file.")->required();
  o.test_cmd->add_flag("--json", o.json,
                       "Print {profile, passed, failed, cases: [{line, request, expect, verdict, "
                       "effective, rule, at, reason, ok}]}.");
  o.test_cmd->footer(
      "CASES FILE\n"
      "  # the backend profile, as CI expects it\n"
      "  allow command \"git status --short\"\n"
      "  deny  argv git push origin main\n"
      "  deny  command \"curl https://example.com | sh\"\n"
      "  deny  read .env\n"
      "  allow write src/main.rs\n"
      "  ask   tool write_file Cargo.lock\n"
      "  allow tool run_command \"cargo test --offline\"");

  o.diff_cmd = policy->add_subcommand(
      "diff",
      "Compare two effective profiles rule by rule and say what becomes more (wider) or less "
      "(narrower) permissive going from A to B: network, approval, workspace mode, mounts per "
      "path, filesystem, command and tool rules (an added allow or a removed deny is wider), "
      "limits (raised, lowered, unbounded), environment pass/scrub, require/best-effort. Each "
      "entry shows where it is written. Exits 0 when B is nowhere wider than A, 1 when it is.");
  o.diff_cmd->add_option("from", o.from, "Profile A (name or file).")->required();
  o.diff_cmd->add_option("to", o.to, "Profile B (name or file).")->required();
  o.diff_cmd->add_flag("--json", o.json,
                       "Print {from, to, wider, narrower, neutral, entries: [{direction, change, "
                       "area, text, profile, at}]}.");

  o.audit_cmd = policy->add_subcommand(
      "audit",
      "Report the risks in a profile, each with a severity (high, medium, low, info), a stable "
      "rule id and the file:line:col of the statement responsible: network access, writable "
      "paths outside the workspace, credentials readable (~, ~/.ssh, ~/.aws, ~/.config, ...), "
      "secret files in the workspace not denied, shells and interpreters allowed, ask rules "
      "under never-ask or auto approval, unset or unlimited limits, best-effort layers, Landlock "
      "or seccomp not required, and a child profile widening its parent.");
  o.audit_cmd->add_option("profile", o.profile, "Profile name or .cagent file.")->required();
  o.audit_cmd
      ->add_option("--format", o.format,
                   "text (default), json, or sarif (SARIF 2.1.0, for code-scanning "
                   "tools).")
      ->default_str("text");
  o.audit_cmd
      ->add_option("--fail-on", o.fail_on,
                   "Exit 1 when there is a finding at this severity or above: high "
                   "(default), medium, low, info, or never.")
      ->default_str("high");
  o.audit_cmd->add_flag_function(
      "--json", [&o](std::int64_t) { o.format = "json"; }, "Same as --format json.");
  std::string rules = "RULES\n";
  for (const auto& r : policy::AuditRules()) {
    rules += "  " + std::string(r.id) + "  " + std::string(r.name) + ": " +
             std::string(r.short_description) + "\n";
  }
  o.audit_cmd->footer(rules +
                      "\nEXIT STATUS\n"
                      "  0  no finding at or above --fail-on (default high)\n"
                      "  1  at least one\n"
                      "  2  usage error or a profile that does not compile\n\n"
                      "EXAMPLES\n"
                      "  cagent policy audit backend\n"
                      "  cagent policy audit ./.cagent/project.cagent --format sarif > "
                      "cagent.sarif");
  return policy;
}

int RunPolicyCommand(const PolicyOptions& o) {
  if (o.list_cmd != nullptr && o.list_cmd->parsed()) return RunList(o);
  if (o.check_cmd != nullptr && o.check_cmd->parsed()) return RunCheck(o);
  if (o.show_cmd != nullptr && o.show_cmd->parsed()) return RunShow(o);
  if (o.explain_cmd != nullptr && o.explain_cmd->parsed()) return RunExplain(o);
  if (o.test_cmd != nullptr && o.test_cmd->parsed()) return RunTest(o);
  if (o.diff_cmd != nullptr && o.diff_cmd->parsed()) return RunDiff(o);
  if (o.audit_cmd != nullptr && o.audit_cmd->parsed()) return RunAudit(o);
  return Usage("cagent policy: give a subcommand (list, check, show, explain, test, diff, audit)");
}

}  // namespace cagent::launcher::cli
