#include "policy/language/compiler.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "policy/language/engine.h"

namespace cagent::policy {
namespace {

template <typename T>
void Override(Setting<T>& into, const Setting<T>& from) {
  if (from.set) into = from;
}

// `required` cannot be met while `best_effort` is accepted as missing.
bool Conflicts(Requirement required, Requirement best_effort) {
  if (required == best_effort) return true;
  bool needs_cgroup = required == Requirement::kCgroup || required == Requirement::kMemoryLimit ||
                      required == Requirement::kPidsLimit;
  return best_effort == Requirement::kCgroup && needs_cgroup;
}

void RunExamples(const Policy& policy, const std::vector<Example>& examples, Diagnostics& diags) {
  Engine engine(policy, PortableBinding());
  for (const Example& ex : examples) {
    const Decision d = engine.Decide(ex.request);
    if (d.verdict == ex.expect) continue;
    std::string by = d.rule == "default" ? "because no rule matches"
                                         : "by rule '" + d.rule + "'" +
                                               (d.loc.valid() ? " at " + policy.Where(d.loc) : "");
    diags.Error(ex.loc, ex.length,
                "example failed: expected " + std::string(VerdictName(ex.expect)) + " for " +
                    Describe(ex.request) + ", got " + std::string(VerdictName(d.verdict)),
                "decided " + by + (d.reason.empty() ? "" : ": " + d.reason));
  }
}

// Whether the connections `rule` names are all intercepted: some credential's pattern is the same
// pattern, or the rule names one host (a name or an address) that a credential's pattern matches
// on every port the rule covers (443 and 80 for a rule without a port).
bool BoundByCredential(const HostPattern& rule, const std::vector<CredentialRule>& credentials) {
  const std::string text = rule.Text();
  const bool one_host =
      rule.kind == HostPattern::Kind::kName || rule.kind == HostPattern::Kind::kAddress;
  for (const CredentialRule& c : credentials) {
    for (const HostPattern& h : c.hosts) {
      if (h.Text() == text) return true;
      if (!one_host || !h.MatchesHost(rule.host)) continue;
      if (rule.port ? h.MatchesPort(*rule.port) : !h.port.has_value()) return true;
    }
  }
  return false;
}

}  // namespace

std::optional<Policy> Compile(std::vector<ChainLink> chain,
                              std::shared_ptr<const SourceSet> sources, Diagnostics& diags) {
  Policy out;
  out.sources = std::move(sources);
  std::map<PathRef, MountRule> mounts;
  std::map<std::string, EnvSetting> env_set;
  std::map<std::string, CacheRule> caches;
  std::map<std::string, CarryRule> carry;
  std::map<std::string, CredentialRule> credentials;
  const std::size_t errors_before = diags.ErrorCount();

  for (ChainLink& link : chain) {
    Policy& layer = link.profile.layer;
    out.chain.push_back(link.name);
    if (!layer.description.empty()) out.description = layer.description;
    Override(out.network, layer.network);
    Override(out.approval, layer.approval);
    Override(out.workspace_writable, layer.workspace_writable);
    // Once a profile of the chain turns the egress proxy on, it stays on (the first one says
    // where): a child adds hosts rules and cannot remove its parent's.
    if (layer.egress.set && !out.egress.set) out.egress = layer.egress;
    for (auto& r : layer.hosts) out.hosts.push_back(std::move(r));
    for (auto& m : layer.mounts) mounts[m.path] = m;
    for (auto& r : layer.path_rules) out.path_rules.push_back(std::move(r));
    for (auto& r : layer.commands) out.commands.push_back(std::move(r));
    Override(out.command_default, layer.command_default);
    for (auto& r : layer.tools) out.tools.push_back(std::move(r));
    for (std::size_t i = 0; i < out.limits.size(); ++i) {
      if (layer.limits[i].set) out.limits[i] = layer.limits[i];
    }
    for (auto& e : layer.env_pass) out.env_pass.push_back(std::move(e));
    for (auto& e : layer.env_scrub) out.env_scrub.push_back(std::move(e));
    for (auto& e : layer.env_set) env_set[e.name] = std::move(e);
    if (!layer.verify.empty()) out.verify = std::move(layer.verify);
    // A child's setup block replaces its parent's whole (commands and hosts), like verify.
    if (!layer.setup.commands.empty()) out.setup = std::move(layer.setup);
    for (auto& c : layer.caches) {
      auto it = caches.find(c.rel);
      // Named by several profiles of the chain: writable by the agent if any of them says so
      // (a cache is the agent's convenience, not a restriction), first location kept.
      if (it == caches.end()) {
        caches.emplace(c.rel, c);
      } else {
        it->second.agent_writable = it->second.agent_writable || c.agent_writable;
      }
    }
    for (auto& c : layer.carry) carry.emplace(c.rel, c);
    Override(out.git_identity, layer.git_identity);
    // A child that requires what a parent made best-effort tightens it: the parent's best-effort
    // goes (out.best_effort holds only the parents' entries here). The other way round (a child
    // relaxing a parent's requirement), and both in one profile, stay a conflict, reported below.
    for (const auto& r : layer.requirements) {
      std::erase_if(out.best_effort,
                    [&](const Setting<Requirement>& be) { return Conflicts(r.value, be.value); });
    }
    for (auto& r : layer.requirements) out.requirements.push_back(r);
    for (auto& r : layer.best_effort) out.best_effort.push_back(r);
    // outputs (issue 32): every profile of the chain adds; sorted and de-duplicated below.
    for (auto& o : layer.outputs) out.outputs.push_back(std::move(o));
    // credentials (issue 36): every profile adds; a name is defined once in the chain, so a child
    // can neither remove nor re-bind a parent's credential.
    for (auto& c : layer.credentials) {
      auto it = credentials.find(c.name);
      if (it != credentials.end()) {
        diags.Error(
            c.loc, static_cast<std::uint32_t>(c.name.size()),
            "credential '" + c.name + "' is already defined at " + out.Where(it->second.loc),
            "a profile adds credentials and never redefines its parents'; choose another "
            "name");
        continue;
      }
      credentials.emplace(c.name, std::move(c));
    }
  }
  for (auto& [name, c] : credentials) out.credentials.push_back(std::move(c));

  for (auto& [path, m] : mounts) out.mounts.push_back(std::move(m));
  for (auto& [name, e] : env_set) out.env_set.push_back(std::move(e));
  for (auto& [rel, c] : caches) out.caches.push_back(std::move(c));
  for (auto& [rel, c] : carry) out.carry.push_back(std::move(c));

  // Sort and de-duplicate; the first occurrence (the parent's) keeps its location.
  auto sort_unique = [](auto& v, auto key) {
    std::stable_sort(v.begin(), v.end(),
                     [&](const auto& a, const auto& b) { return key(a) < key(b); });
    v.erase(std::unique(v.begin(), v.end(),
                        [&](const auto& a, const auto& b) { return key(a) == key(b); }),
            v.end());
  };
  sort_unique(out.path_rules, [](const PathRule& r) {
    return std::make_tuple(r.base, r.text, r.access, r.verdict);
  });
  sort_unique(out.commands,
              [](const CommandRule& r) { return std::make_tuple(r.text, r.verdict); });
  sort_unique(out.tools, [](const ToolRule& r) { return std::make_tuple(r.text, r.verdict); });
  sort_unique(out.hosts, [](const HostRule& r) { return std::make_tuple(r.text, r.verdict); });
  sort_unique(out.setup.hosts,
              [](const HostRule& r) { return std::make_tuple(r.text, r.verdict); });
  sort_unique(out.outputs, [](const OutputRule& o) { return o.pattern; });  // issue 32

  // An allow or ask of exactly what a deny (of this profile or a parent) names never decides; nor
  // does a method and path rule for a pattern a deny without a method names (that deny refuses
  // the connection, so no request on it is read).
  for (const HostRule& r : out.hosts) {
    if (r.verdict == Verdict::kDeny) continue;
    for (const HostRule& d : out.hosts) {
      const bool covers =
          d.text == r.text || (r.HasMethod() && !d.HasMethod() && d.text == r.pattern.Text());
      if (d.verdict == Verdict::kDeny && covers) {
        diags.Warning(r.loc, static_cast<std::uint32_t>(r.text.size()),
                      "hosts rule '" + std::string(VerdictName(r.verdict)) + " " + r.text +
                          "' never decides: 'deny " + d.text + "' at " + out.Where(d.loc) + " wins",
                      "deny beats ask and allow, and a child cannot remove a parent's deny; drop "
                      "one of the two");
      }
    }
  }
  // Method and path rules (issue 36) decide requests cagent reads, which it does only on the
  // connections it intercepts: those to a host some credential is bound to. A rule for another
  // host would never decide anything, while reading as if it did.
  for (const HostRule& r : out.hosts) {
    if (!r.HasMethod() || BoundByCredential(r.pattern, out.credentials)) continue;
    diags.Error(r.loc, static_cast<std::uint32_t>(r.pattern.Text().size()),
                "hosts rule '" + std::string(VerdictName(r.verdict)) + " " + r.text +
                    "' decides requests to " + r.pattern.Text() +
                    ", but no credential is bound to it, so cagent never reads them",
                "bind a credential to " + r.pattern.Text() + ", or drop " + r.method + " " +
                    QuoteWord(r.path));
  }
  // The proxy listens on the sandbox's own loopback interface, which `network none` does not have.
  if (out.egress.value && out.network.value == NetworkMode::kNone) {
    diags.Error(out.egress.loc, 5,
                "a hosts section needs the sandbox's loopback interface, but the network is none" +
                    (out.network.loc.valid() ? " (set at " + out.Where(out.network.loc) + ")"
                                             : std::string()),
                "add 'network loopback': the egress proxy listens on the sandbox's loopback, and "
                "nothing else routes out");
  }
  sort_unique(out.env_pass, [](const EnvPattern& e) { return e.name.pattern(); });
  sort_unique(out.env_scrub, [](const EnvPattern& e) { return e.name.pattern(); });
  sort_unique(out.requirements, [](const Setting<Requirement>& r) { return r.value; });
  sort_unique(out.best_effort, [](const Setting<Requirement>& r) { return r.value; });

  // Cross-key conflicts, reported where the weaker statement is written.
  for (const auto& be : out.best_effort) {
    for (const auto& req : out.requirements) {
      if (Conflicts(req.value, be.value)) {
        diags.Error(be.loc, static_cast<std::uint32_t>(RequirementName(be.value).size()),
                    "'" + std::string(RequirementName(be.value)) +
                        "' is best-effort but 'require " + std::string(RequirementName(req.value)) +
                        "' needs it",
                    "a required layer cannot be optional; drop one of the two (the require is at "
                    "line " +
                        std::to_string(req.loc.line) + ")");
      }
    }
  }
  auto need_limit = [&](Requirement r, Limit l) {
    for (const auto& req : out.requirements) {
      if (req.value == r && !out.limit(l).bounded()) {
        diags.Error(req.loc, static_cast<std::uint32_t>(RequirementName(r).size()),
                    "'require " + std::string(RequirementName(r)) + "' but no " +
                        std::string(LimitName(l)) + " limit is set",
                    "add 'limits { " + std::string(LimitName(l)) + " ... }'");
      }
    }
  };
  need_limit(Requirement::kMemoryLimit, Limit::kMemory);
  need_limit(Requirement::kPidsLimit, Limit::kProcesses);

  if (diags.ErrorCount() != errors_before) return std::nullopt;
  if (!chain.empty()) RunExamples(out, chain.back().profile.examples, diags);
  if (diags.ErrorCount() != errors_before) return std::nullopt;
  return out;
}

}  // namespace cagent::policy
