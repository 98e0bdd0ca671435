#include "policy/language/coherence.h"

#include <array>
#include <string_view>

#include "policy/language/binding.h"
#include "policy/language/engine.h"

namespace cagent::policy {
namespace {

// A package install as agents type it, and the registry hosts it needs (the ones
// backend-registries and frontend-registries allow). An ask rule that matches one of these argvs
// asks about that install.
struct InstallProbe {
  std::array<std::string_view, 5> argv;  // empty words at the end are dropped
  std::array<std::string_view, 3> hosts;
};
constexpr InstallProbe kInstalls[] = {
    {{"pip", "install", "pkg"}, {"pypi.org", "files.pythonhosted.org"}},
    {{"pip3", "install", "pkg"}, {"pypi.org", "files.pythonhosted.org"}},
    {{"python", "-m", "pip", "install", "pkg"}, {"pypi.org", "files.pythonhosted.org"}},
    {{"python3", "-m", "pip", "install", "pkg"}, {"pypi.org", "files.pythonhosted.org"}},
    {{"uv", "pip", "install", "pkg"}, {"pypi.org", "files.pythonhosted.org"}},
    {{"poetry", "add", "pkg"}, {"pypi.org", "files.pythonhosted.org"}},
    {{"npm", "install", "pkg"}, {"registry.npmjs.org"}},
    {{"npm", "i", "pkg"}, {"registry.npmjs.org"}},
    {{"npm", "ci"}, {"registry.npmjs.org"}},
    {{"pnpm", "add", "pkg"}, {"registry.npmjs.org"}},
    {{"yarn", "add", "pkg"}, {"registry.yarnpkg.com", "registry.npmjs.org"}},
    {{"bun", "add", "pkg"}, {"registry.npmjs.org"}},
    {{"cargo", "add", "pkg"}, {"index.crates.io", "crates.io", "static.crates.io"}},
    {{"cargo", "install", "pkg"}, {"index.crates.io", "crates.io", "static.crates.io"}},
    {{"go", "get", "pkg"}, {"proxy.golang.org"}},
    {{"go", "install", "pkg"}, {"proxy.golang.org"}},
    {{"gem", "install", "pkg"}, {"rubygems.org"}},
};

std::vector<std::string> ArgvOf(const InstallProbe& probe) {
  std::vector<std::string> out;
  for (std::string_view w : probe.argv) {
    if (!w.empty()) out.emplace_back(w);
  }
  return out;
}

std::string HostList(const InstallProbe& probe) {
  std::string out;
  for (std::string_view h : probe.hosts) {
    if (!h.empty()) out += (out.empty() ? "" : ", ") + std::string(h);
  }
  return out;
}

std::uint32_t Length(const std::string& text) {
  return static_cast<std::uint32_t>(text.empty() ? 1 : text.size());
}

}  // namespace

std::vector<AskRule> AskRules(const Policy& p) {
  std::vector<AskRule> out;
  for (const auto& r : p.commands) {
    if (r.verdict == Verdict::kAsk) {
      out.push_back({"commands: ask " + r.text, r.loc, Length(r.text)});
    }
  }
  for (const auto& r : p.tools) {
    if (r.verdict == Verdict::kAsk) out.push_back({"tools: ask " + r.text, r.loc, 1});
  }
  for (const auto& r : p.hosts) {
    if (r.verdict == Verdict::kAsk) out.push_back({"hosts: ask " + r.text, r.loc, Length(r.text)});
  }
  for (const auto& r : p.path_rules) {
    if (r.verdict == Verdict::kAsk) {
      out.push_back(
          {std::string("filesystem: ask ") + (r.access == Access::kWrite ? "write " : "") + r.text,
           r.loc, Length(r.text)});
    }
  }
  return out;
}

std::vector<IncoherentAsk> IncoherentAsks(const Policy& p) {
  std::vector<IncoherentAsk> out;
  if (p.approval.value == ApprovalMode::kNeverAsk) {
    const std::string where =
        p.approval.set ? " (set at " + p.Where(p.approval.loc) + ")" : " (the default)";
    for (const AskRule& a : AskRules(p)) {
      out.push_back({a.rule, a.loc, a.length,
                     "'" + a.rule + "' can never ask: approval never-ask" + where +
                         " turns every ask into a denial, and nobody is asked",
                     "write deny to say so, or set approval on-request so that a person decides"});
    }
  }
  // Installs: the engine says whether a registry host could be reached through the egress proxy.
  const Engine engine(p, PortableBinding());
  for (const CommandRule& r : p.commands) {
    if (r.verdict != Verdict::kAsk) continue;
    for (const InstallProbe& probe : kInstalls) {
      if (!r.Matches(ArgvOf(probe))) continue;
      bool reachable = false;
      for (std::string_view h : probe.hosts) {
        if (!h.empty() && engine.HostMayConnect(h)) reachable = true;
      }
      if (reachable) break;
      const std::string network =
          p.network.value == NetworkMode::kNone ? "network none"
          : p.egress.value                      ? "no hosts rule reaches " + HostList(probe)
                           : "network loopback without a hosts section (nothing leaves the "
                             "sandbox)";
      const std::string rule = "commands: ask " + r.text;
      out.push_back({rule, r.loc, Length(r.text),
                     "'" + rule + "' asks before a package install that cannot reach a registry: " +
                         network + ", so the install fails whatever the answer",
                     "deny it (or drop the rule), or allow " + HostList(probe) +
                         " in a hosts section (the -registries built-in profiles do)"});
      break;  // one warning per rule
    }
  }
  return out;
}

std::string AskDeniedReason(std::string_view setting, std::string_view rule,
                            std::string_view where) {
  return "denied: " + std::string(setting) + " (rule `" + std::string(rule) + "`" +
         (where.empty() ? std::string() : " at " + std::string(where)) + ")";
}

}  // namespace cagent::policy
