#include "policy/language/dump.h"

#include <nlohmann/json.hpp>

#include "common/money.h"

namespace cagent::policy {
namespace {

constexpr std::size_t kCommentColumn = 48;

class Writer {
 public:
  Writer(const Policy& p, bool locations) : p_(p), locations_(locations) {}

  void Line(int indent, const std::string& text, const Location& loc) {
    std::string line(static_cast<std::size_t>(indent) * 2, ' ');
    line += text;
    if (locations_) {
      if (line.size() < kCommentColumn) {
        line.resize(kCommentColumn, ' ');
      } else {
        line += "  ";
      }
      line += "# ";
      line += loc.valid() ? p_.Where(loc) : "default";
    }
    out_ += line;
    out_ += '\n';
  }
  void Plain(const std::string& text) {
    out_ += text;
    out_ += '\n';
  }
  std::string Take() { return std::move(out_); }

 private:
  const Policy& p_;
  bool locations_;
  std::string out_;
};

std::string PathRuleText(const PathRule& r) {
  return std::string(VerdictName(r.verdict)) + (r.access == Access::kWrite ? " write " : " ") +
         QuoteWord(r.text);
}

}  // namespace

std::string FormatDuration(std::uint64_t ms) {
  if (ms == 0) return "0s";
  if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

std::string FormatSize(std::uint64_t bytes) {
  if (bytes == 0) return "0";
  constexpr const char* kUnits[] = {"T", "G", "M", "K"};
  for (int i = 0; i < 4; ++i) {
    std::uint64_t unit = 1ULL << (10 * (4 - i));
    if (bytes % unit == 0) return std::to_string(bytes / unit) + kUnits[i];
  }
  return std::to_string(bytes);
}

std::string FormatLimit(Limit limit, const LimitValue& v) {
  if (!v.set) return "unset";
  if (v.unlimited) return "unlimited";
  switch (LimitKindOf(limit)) {
    case LimitKind::kDuration:
      return FormatDuration(v.value);
    case LimitKind::kSize:
      return FormatSize(v.value);
    case LimitKind::kCount:
      return std::to_string(v.value);
    case LimitKind::kMoney:
      return FormatMoney(v.value, v.currency);
  }
  return std::to_string(v.value);
}

std::string Dump(const Policy& p, bool with_locations) {
  Writer w(p, with_locations);
  w.Plain("# The effective profile '" + p.name + "' (" + p.ChainText() + "), as compiled.");
  w.Plain("# Rules are sorted; deny beats ask beats allow; what no rule matches is denied");
  w.Plain("# (a command no rule matches gets the commands default).");
  if (!p.description.empty()) w.Plain("description " + QuoteWord(p.description));
  w.Line(0, std::string("workspace ") + (p.workspace_writable.value ? "read-write" : "read-only"),
         p.workspace_writable.loc);
  w.Line(0, "network " + std::string(NetworkName(p.network.value)), p.network.loc);
  w.Line(0, "approval " + std::string(ApprovalName(p.approval.value)), p.approval.loc);
  if (!p.requirements.empty()) {
    for (const auto& r : p.requirements) {
      w.Line(0, "require " + std::string(RequirementName(r.value)), r.loc);
    }
  }
  for (const auto& r : p.best_effort) {
    w.Line(0, "best-effort " + std::string(RequirementName(r.value)), r.loc);
  }

  w.Plain("filesystem {");
  for (const auto& m : p.mounts) {
    w.Line(1, std::string(MountModeName(m.mode)) + " " + QuoteWord(m.path.Text()), m.loc);
  }
  for (const auto& r : p.path_rules) w.Line(1, PathRuleText(r), r.loc);
  w.Plain("}");

  w.Plain("commands {");
  if (p.command_default.set) {
    w.Line(1, "default " + std::string(VerdictName(p.command_default.value)),
           p.command_default.loc);
  }
  for (const auto& r : p.commands) {
    w.Line(1,
           std::string(VerdictName(r.verdict)) + " " + r.text +
               (r.reason.empty() ? "" : " { reason " + QuoteString(r.reason) + " }"),
           r.loc);
  }
  w.Plain("}");

  w.Plain("tools {");
  for (const auto& r : p.tools) {
    w.Line(1, std::string(VerdictName(r.verdict)) + " " + r.text, r.loc);
  }
  w.Plain("}");

  // Only a profile with the egress proxy on has a hosts section: writing an empty one would turn
  // it on when the dump is compiled back.
  if (p.egress.value) {
    w.Line(0, "hosts {", p.egress.loc);
    for (const auto& r : p.hosts) {
      // A method and path rule's text is already its words, each quoted as it must be.
      w.Line(
          1,
          std::string(VerdictName(r.verdict)) + " " + (r.HasMethod() ? r.text : QuoteWord(r.text)),
          r.loc);
    }
    w.Plain("}");
  }

  w.Plain("limits {");
  for (std::size_t i = 0; i < p.limits.size(); ++i) {
    auto l = static_cast<Limit>(i);
    if (!p.limits[i].set) continue;
    w.Line(1, std::string(LimitName(l)) + " " + FormatLimit(l, p.limits[i]), p.limits[i].loc);
  }
  w.Plain("}");

  w.Plain("environment {");
  for (const auto& e : p.env_pass) w.Line(1, "pass " + QuoteWord(e.name.pattern()), e.loc);
  for (const auto& e : p.env_scrub) w.Line(1, "scrub " + QuoteWord(e.name.pattern()), e.loc);
  for (const auto& e : p.env_set) w.Line(1, "set " + e.name + " " + QuoteWord(e.value), e.loc);
  w.Plain("}");

  w.Line(0, std::string("git-identity ") + (p.git_identity.value ? "caller" : "none"),
         p.git_identity.loc);
  for (const auto& c : p.caches) {
    w.Line(
        0,
        std::string("cache ") + (c.agent_writable ? "read-write " : "") + QuoteWord("~/" + c.rel),
        c.loc);
  }
  for (const auto& c : p.carry) w.Line(0, "carry " + QuoteWord(c.rel), c.loc);
  // outputs (issue 32)
  for (const auto& o : p.outputs) w.Line(0, "outputs " + QuoteWord(o.pattern), o.loc);
  // credentials (issue 36): where each value comes from and the hosts it is for, never a value.
  if (!p.credentials.empty()) {
    w.Plain("credentials {");
    for (const auto& c : p.credentials) {
      std::string line = c.name + (c.optional ? " optional" : "") +
                         (c.source == CredentialSource::kEnv ? " env " : " file ") +
                         QuoteWord(c.from) + " for";
      for (const HostPattern& h : c.hosts) line += " " + h.Text();
      w.Line(1, line, c.loc);
    }
    w.Plain("}");
  }
  if (!p.setup.commands.empty()) {
    w.Line(0, "setup {", p.setup.loc);
    for (const auto& v : p.setup.commands) {
      w.Line(1,
             "run " + QuoteWord(v.command) +
                 (v.timeout_ms ? " timeout " + FormatDuration(*v.timeout_ms) : ""),
             v.loc);
    }
    if (p.setup.egress.value) {
      w.Line(1, "hosts {", p.setup.egress.loc);
      for (const auto& r : p.setup.hosts) {
        w.Line(2, std::string(VerdictName(r.verdict)) + " " + QuoteWord(r.text), r.loc);
      }
      w.Plain("  }");
    }
    w.Plain("}");
  }

  if (!p.verify.empty()) {
    w.Plain("verify {");
    for (const auto& v : p.verify) {
      w.Line(1,
             "run " + QuoteWord(v.command) +
                 (v.timeout_ms ? " timeout " + FormatDuration(*v.timeout_ms) : ""),
             v.loc);
    }
    w.Plain("}");
  }
  return w.Take();
}

nlohmann::json ToJson(const Policy& p) {
  using nlohmann::json;
  auto where = [&](const Location& loc) -> json {
    return loc.valid() ? json(p.Where(loc)) : json(nullptr);
  };
  json j;
  j["name"] = p.name;
  j["description"] = p.description;
  j["chain"] = p.chain;
  j["files"] = p.files;
  j["workspace"] = {{"mode", p.workspace_writable.value ? "read-write" : "read-only"},
                    {"at", where(p.workspace_writable.loc)}};
  j["network"] = {{"mode", NetworkName(p.network.value)}, {"at", where(p.network.loc)}};
  j["approval"] = {{"mode", ApprovalName(p.approval.value)}, {"at", where(p.approval.loc)}};
  j["require"] = json::array();
  for (const auto& r : p.requirements) {
    j["require"].push_back({{"layer", RequirementName(r.value)}, {"at", where(r.loc)}});
  }
  j["best_effort"] = json::array();
  for (const auto& r : p.best_effort) {
    j["best_effort"].push_back({{"layer", RequirementName(r.value)}, {"at", where(r.loc)}});
  }
  j["mounts"] = json::array();
  for (const auto& m : p.mounts) {
    j["mounts"].push_back(
        {{"path", m.path.Text()}, {"mode", MountModeName(m.mode)}, {"at", where(m.loc)}});
  }
  j["path_rules"] = json::array();
  for (const auto& r : p.path_rules) {
    j["path_rules"].push_back({{"verdict", VerdictName(r.verdict)},
                               {"access", r.access == Access::kWrite ? "write" : "read-write"},
                               {"glob", r.text},
                               {"at", where(r.loc)}});
  }
  j["commands"] = json::array();
  for (const auto& r : p.commands) {
    j["commands"].push_back({{"verdict", VerdictName(r.verdict)},
                             {"pattern", r.text},
                             {"reason", r.reason.empty() ? json(nullptr) : json(r.reason)},
                             {"at", where(r.loc)}});
  }
  j["commands_default"] = {{"verdict", VerdictName(p.command_default.value)},
                           {"at", where(p.command_default.loc)}};
  j["tools"] = json::array();
  for (const auto& r : p.tools) {
    json tools = json::array();
    for (auto t : r.tools) tools.push_back(ToolName(t));
    json paths = json::array();
    for (const auto& g : r.paths) paths.push_back(g.pattern());
    // The globs after "mcp:": the tools of a server run by `cagent mcp wrap`.
    json mcp_tools = json::array();
    for (const auto& g : r.mcp_tools) mcp_tools.push_back(g.pattern());
    j["tools"].push_back({{"verdict", VerdictName(r.verdict)},
                          {"tools", tools},
                          {"mcp_tools", mcp_tools},
                          {"paths", paths},
                          {"at", where(r.loc)}});
  }
  j["egress"] = {{"on", p.egress.value}, {"at", where(p.egress.loc)}};
  j["hosts"] = json::array();
  for (const auto& r : p.hosts) {
    json port = r.pattern.port ? json(*r.pattern.port) : json(nullptr);
    j["hosts"].push_back({{"verdict", VerdictName(r.verdict)},
                          {"pattern", r.pattern.Text()},
                          {"port", port},
                          {"method", r.HasMethod() ? json(r.method) : json(nullptr)},
                          {"path", r.HasMethod() ? json(r.path) : json(nullptr)},
                          {"at", where(r.loc)}});
  }
  j["limits"] = json::object();
  for (std::size_t i = 0; i < p.limits.size(); ++i) {
    auto l = static_cast<Limit>(i);
    const auto& v = p.limits[i];
    json e = {{"set", v.set}, {"text", FormatLimit(l, v)}, {"at", where(v.loc)}};
    e["value"] = v.bounded() ? json(v.value) : json(nullptr);
    e["unit"] = LimitKindOf(l) == LimitKind::kDuration ? "ms"
                : LimitKindOf(l) == LimitKind::kSize   ? "bytes"
                : LimitKindOf(l) == LimitKind::kMoney
                    ? "micro-" + (v.currency.empty() ? std::string("unit") : v.currency)
                    : "count";
    j["limits"][std::string(LimitName(l))] = e;
  }
  json env = {{"pass", json::array()}, {"scrub", json::array()}, {"set", json::object()}};
  for (const auto& e : p.env_pass) env["pass"].push_back(e.name.pattern());
  for (const auto& e : p.env_scrub) env["scrub"].push_back(e.name.pattern());
  for (const auto& e : p.env_set) env["set"][e.name] = e.value;
  j["environment"] = env;
  j["git_identity"] = p.git_identity.value ? "caller" : "none";
  j["caches"] = json::array();
  for (const auto& c : p.caches) {
    j["caches"].push_back({{"path", "~/" + c.rel},
                           {"agent", c.agent_writable ? "read-write" : "read-only"},
                           {"at", where(c.loc)}});
  }
  j["carry"] = json::array();
  for (const auto& c : p.carry) j["carry"].push_back({{"path", c.rel}, {"at", where(c.loc)}});
  // outputs (issue 32)
  j["outputs"] = json::array();
  for (const auto& o : p.outputs) {
    j["outputs"].push_back({{"pattern", o.pattern}, {"at", where(o.loc)}});
  }
  // credentials (issue 36)
  j["credentials"] = json::array();
  for (const auto& c : p.credentials) {
    json hosts = json::array();
    for (const HostPattern& h : c.hosts) hosts.push_back(h.Text());
    j["credentials"].push_back({{"name", c.name},
                                {"source", c.source == CredentialSource::kEnv ? "env" : "file"},
                                {"from", c.from},
                                {"optional", c.optional},
                                {"hosts", std::move(hosts)},
                                {"at", where(c.loc)}});
  }
  json setup = {{"commands", json::array()}, {"hosts", nullptr}};
  for (const auto& v : p.setup.commands) {
    setup["commands"].push_back({{"command", v.command},
                                 {"timeout_ms", v.timeout_ms ? json(*v.timeout_ms) : json(nullptr)},
                                 {"at", where(v.loc)}});
  }
  if (p.setup.egress.value) {
    setup["hosts"] = json::array();
    for (const auto& r : p.setup.hosts) {
      setup["hosts"].push_back({{"verdict", VerdictName(r.verdict)}, {"pattern", r.text}});
    }
  }
  j["setup"] = setup;
  j["verify"] = json::array();
  for (const auto& v : p.verify) {
    j["verify"].push_back({{"command", v.command},
                           {"timeout_ms", v.timeout_ms ? json(*v.timeout_ms) : json(nullptr)},
                           {"at", where(v.loc)}});
  }
  return j;
}

}  // namespace cagent::policy
