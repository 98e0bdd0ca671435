#include "policy/review/diff.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>

#include "policy/language/dump.h"

namespace cagent::policy {
namespace {

// Mount modes by the access they give: hidden < read-only < read-write.
int MountRank(MountMode m) {
  switch (m) {
    case MountMode::kHidden:
      return 0;
    case MountMode::kReadOnly:
      return 1;
    case MountMode::kReadWrite:
      return 2;
  }
  return 0;
}

// Approval modes by how much an `ask` lets through: never-ask (nothing) < on-request (what a
// person approves) < auto (everything).
int ApprovalRank(ApprovalMode a) {
  switch (a) {
    case ApprovalMode::kNeverAsk:
      return 0;
    case ApprovalMode::kOnRequest:
      return 1;
    case ApprovalMode::kAuto:
      return 2;
  }
  return 0;
}

Direction ByRank(int from, int to) {
  if (to > from) return Direction::kWider;
  if (to < from) return Direction::kNarrower;
  return Direction::kNeutral;
}

class Differ {
 public:
  Differ(const Policy& from, const Policy& to) : from_(from), to_(to) {}

  std::vector<DiffEntry> Run() {
    Scalars();
    Mounts();
    PathRules();
    Rules("commands", from_.commands, to_.commands);
    Rules("tools", from_.tools, to_.tools);
    Hosts();
    Limits();
    Environment();
    Requirements();
    Verify();
    Setup();
    return std::move(out_);
  }

 private:
  const Policy& from_;
  const Policy& to_;
  std::vector<DiffEntry> out_;

  void Add(Direction d, std::string_view area, std::string text, Location loc, DiffSide side) {
    Change c = text.starts_with("added: ")     ? Change::kAdded
               : text.starts_with("removed: ") ? Change::kRemoved
                                               : Change::kChanged;
    out_.push_back({d, c, std::string(area), std::move(text), loc, side});
  }

  void Scalars() {
    if (from_.network.value != to_.network.value) {
      Add(ByRank(static_cast<int>(from_.network.value), static_cast<int>(to_.network.value)),
          "network",
          "network " + std::string(NetworkName(from_.network.value)) + " -> " +
              std::string(NetworkName(to_.network.value)),
          to_.network.loc, DiffSide::kTo);
    }
    if (from_.approval.value != to_.approval.value) {
      std::string why;
      switch (to_.approval.value) {
        case ApprovalMode::kNeverAsk:
          why = " (every ask is now denied without prompting)";
          break;
        case ApprovalMode::kOnRequest:
          why = " (a person at the terminal decides each ask)";
          break;
        case ApprovalMode::kAuto:
          why = " (every ask is now allowed without prompting)";
          break;
      }
      Add(ByRank(ApprovalRank(from_.approval.value), ApprovalRank(to_.approval.value)), "approval",
          "approval " + std::string(ApprovalName(from_.approval.value)) + " -> " +
              std::string(ApprovalName(to_.approval.value)) + why,
          to_.approval.loc, DiffSide::kTo);
    }
    if (from_.command_default.value != to_.command_default.value) {
      // deny < ask < allow: what a command no rule names gets.
      Add(ByRank(static_cast<int>(Verdict::kDeny) - static_cast<int>(from_.command_default.value),
                 static_cast<int>(Verdict::kDeny) - static_cast<int>(to_.command_default.value)),
          "commands",
          "commands default " + std::string(VerdictName(from_.command_default.value)) + " -> " +
              std::string(VerdictName(to_.command_default.value)) +
              " (a command no rule names is now " +
              (to_.command_default.value == Verdict::kAllow ? "allowed"
               : to_.command_default.value == Verdict::kAsk ? "asked"
                                                            : "denied") +
              ")",
          to_.command_default.loc, DiffSide::kTo);
    }
    if (from_.workspace_writable.value != to_.workspace_writable.value) {
      auto name = [](bool w) { return w ? "read-write" : "read-only"; };
      Add(to_.workspace_writable.value ? Direction::kWider : Direction::kNarrower, "workspace",
          std::string("workspace ") + name(from_.workspace_writable.value) + " -> " +
              name(to_.workspace_writable.value),
          to_.workspace_writable.loc, DiffSide::kTo);
    }
  }

  // Whether `p`'s view shows `path`: the workspace always does; a host path (absolute or under
  // HOME, where the sandbox's own HOME is private) only inside a read-only or read-write mount.
  static bool Shows(const Policy& p, const PathRef& path) {
    if (path.base == PathBase::kWorkspace) return true;
    return std::any_of(p.mounts.begin(), p.mounts.end(), [&](const MountRule& m) {
      if (m.mode == MountMode::kHidden || m.path.base != path.base) return false;
      return m.path.rel.empty() || m.path.rel == path.rel ||
             (path.rel.size() > m.path.rel.size() && path.rel.starts_with(m.path.rel) &&
              path.rel[m.path.rel.size()] == '/');
    });
  }

  // Per path: added, removed, or its mode changed. Hiding a path is narrower; exposing one wider;
  // dropping a hide of what the other profile does not mount at all changes nothing.
  void Mounts() {
    std::map<PathRef, const MountRule*> a, b;
    for (const auto& m : from_.mounts) a[m.path] = &m;
    for (const auto& m : to_.mounts) b[m.path] = &m;
    std::map<PathRef, int> all;
    for (const auto& [p, m] : a) all[p] = 0;
    for (const auto& [p, m] : b) all[p] = 0;
    for (const auto& [path, unused] : all) {
      auto ia = a.find(path);
      auto ib = b.find(path);
      if (ia == a.end()) {
        const MountRule& m = *ib->second;
        Add(m.mode == MountMode::kHidden ? Direction::kNarrower : Direction::kWider, "mounts",
            "added: " + std::string(MountModeName(m.mode)) + " " + path.Text(), m.loc,
            DiffSide::kTo);
      } else if (ib == b.end()) {
        const MountRule& m = *ia->second;
        if (m.mode == MountMode::kHidden && !Shows(to_, path)) {
          // backend hides ~/.cargo/credentials inside its read-only ~/.cargo; frontend mounts no
          // ~/.cargo at all, so nothing of it is exposed there.
          Add(Direction::kNeutral, "mounts",
              "removed: hide " + path.Text() + " (nothing of it is mounted in '" + to_.name + "')",
              m.loc, DiffSide::kFrom);
          continue;
        }
        Add(m.mode == MountMode::kHidden ? Direction::kWider : Direction::kNarrower, "mounts",
            "removed: " + std::string(MountModeName(m.mode)) + " " + path.Text(), m.loc,
            DiffSide::kFrom);
      } else if (ia->second->mode != ib->second->mode) {
        Add(ByRank(MountRank(ia->second->mode), MountRank(ib->second->mode)), "mounts",
            path.Text() + ": " + std::string(MountModeName(ia->second->mode)) + " -> " +
                std::string(MountModeName(ib->second->mode)),
            ib->second->loc, DiffSide::kTo);
      }
    }
  }

  // Filesystem rules only restrict (deny, ask): adding one narrows, removing one widens.
  void PathRules() {
    auto key = [](const PathRule& r) {
      return std::make_tuple(r.base, r.text, r.access, r.verdict);
    };
    auto text = [](const PathRule& r) {
      return std::string(VerdictName(r.verdict)) + (r.access == Access::kWrite ? " write " : " ") +
             r.text;
    };
    SetDiff(
        from_.path_rules, to_.path_rules, key,
        [&](const PathRule& r) {
          Add(Direction::kNarrower, "filesystem", "added: " + text(r), r.loc, DiffSide::kTo);
        },
        [&](const PathRule& r) {
          Add(Direction::kWider, "filesystem", "removed: " + text(r), r.loc, DiffSide::kFrom);
        });
  }

  // Command and tool rules. An added allow or a removed deny widens; an added deny or a removed
  // allow narrows. An `ask` sits between: it widens what nothing allowed and narrows what an
  // allow let through, so by itself it is neutral — unless the approval mode decides it without a
  // person (auto: it is an allow).
  template <typename Rule>
  void Rules(std::string_view area, const std::vector<Rule>& a, const std::vector<Rule>& b) {
    auto key = [](const Rule& r) { return std::make_tuple(r.text, r.verdict); };
    auto text = [](const Rule& r) { return std::string(VerdictName(r.verdict)) + " " + r.text; };
    SetDiff(
        a, b, key,
        [&](const Rule& r) {
          Direction d = r.verdict == Verdict::kAllow                ? Direction::kWider
                        : r.verdict == Verdict::kDeny               ? Direction::kNarrower
                        : to_.approval.value == ApprovalMode::kAuto ? Direction::kWider
                                                                    : Direction::kNeutral;
          std::string note = r.verdict != Verdict::kAsk ? ""
                             : to_.approval.value == ApprovalMode::kAuto
                                 ? " (approval auto: allowed without asking)"
                                 : " (a person decides; wider than deny, narrower than allow)";
          if constexpr (std::is_same_v<Rule, CommandRule>) {
            // An allow rule added where `from` already allowed every unnamed command adds nothing.
            if (r.verdict == Verdict::kAllow && from_.command_default.value == Verdict::kAllow) {
              d = Direction::kNeutral;
              note = " (already allowed: commands default allow)";
            }
          }
          Add(d, area, "added: " + text(r) + note, r.loc, DiffSide::kTo);
        },
        [&](const Rule& r) {
          Direction d = r.verdict == Verdict::kAllow                  ? Direction::kNarrower
                        : r.verdict == Verdict::kDeny                 ? Direction::kWider
                        : from_.approval.value == ApprovalMode::kAuto ? Direction::kNarrower
                                                                      : Direction::kNeutral;
          std::string note;
          if constexpr (std::is_same_v<Rule, CommandRule>) {
            // An allow rule dropped where `to` allows every unnamed command takes nothing away.
            if (r.verdict == Verdict::kAllow && to_.command_default.value == Verdict::kAllow) {
              d = Direction::kNeutral;
              note = " (covered by commands default allow)";
            }
          }
          Add(d, area, "removed: " + text(r) + note, r.loc, DiffSide::kFrom);
        });
  }

  // The egress proxy turned on or off, and the hosts rules. Every connection is denied unless a
  // rule allows or asks, so an added allow or ask reaches further (an ask reaches what a person
  // approves) and an added deny less; removals the other way round.
  void Hosts() {
    if (from_.egress.value != to_.egress.value) {
      auto name = [](bool on) { return on ? "on" : "off"; };
      Add(to_.egress.value ? Direction::kWider : Direction::kNarrower, "hosts",
          std::string("egress proxy ") + name(from_.egress.value) + " -> " +
              name(to_.egress.value) +
              (to_.egress.value ? " (a hosts section: connections its rules allow leave the "
                                  "sandbox)"
                                : " (no hosts section: nothing leaves the sandbox)"),
          to_.egress.value ? to_.egress.loc : from_.egress.loc,
          to_.egress.value ? DiffSide::kTo : DiffSide::kFrom);
    }
    auto key = [](const HostRule& r) { return std::make_tuple(r.text, r.verdict); };
    auto text = [](const HostRule& r) {
      return std::string(VerdictName(r.verdict)) + " " + r.text;
    };
    SetDiff(
        from_.hosts, to_.hosts, key,
        [&](const HostRule& r) {
          Add(r.verdict == Verdict::kDeny ? Direction::kNarrower : Direction::kWider, "hosts",
              "added: " + text(r), r.loc, DiffSide::kTo);
        },
        [&](const HostRule& r) {
          Add(r.verdict == Verdict::kDeny ? Direction::kWider : Direction::kNarrower, "hosts",
              "removed: " + text(r), r.loc, DiffSide::kFrom);
        });
  }

  void Limits() {
    for (std::size_t i = 0; i < from_.limits.size(); ++i) {
      const auto l = static_cast<Limit>(i);
      const LimitValue& a = from_.limits[i];
      const LimitValue& b = to_.limits[i];
      const std::string fa = FormatLimit(l, a);
      const std::string fb = FormatLimit(l, b);
      if (fa == fb) continue;
      std::string line = std::string(LimitName(l)) + " " + fa + " -> " + fb;
      Direction d = Direction::kNeutral;
      std::string note;
      if (a.bounded() && b.bounded()) {
        d = b.value > a.value ? Direction::kWider : Direction::kNarrower;
        note = b.value > a.value ? " (raised)" : " (lowered)";
      } else if (a.bounded()) {
        d = Direction::kWider;
        note = " (now unbounded)";
      } else if (b.bounded()) {
        d = Direction::kNarrower;
        note = " (now bounded)";
      } else {
        note = " (unbounded either way)";
      }
      bool in_to = b.set;
      Add(d, "limits", line + note, in_to ? b.loc : a.loc, in_to ? DiffSide::kTo : DiffSide::kFrom);
    }
  }

  void Environment() {
    auto key = [](const EnvPattern& e) { return e.name.pattern(); };
    SetDiff(
        from_.env_pass, to_.env_pass, key,
        [&](const EnvPattern& e) {
          Add(Direction::kWider, "environment", "added: pass " + e.name.pattern(), e.loc,
              DiffSide::kTo);
        },
        [&](const EnvPattern& e) {
          Add(Direction::kNarrower, "environment", "removed: pass " + e.name.pattern(), e.loc,
              DiffSide::kFrom);
        });
    SetDiff(
        from_.env_scrub, to_.env_scrub, key,
        [&](const EnvPattern& e) {
          Add(Direction::kNarrower, "environment", "added: scrub " + e.name.pattern(), e.loc,
              DiffSide::kTo);
        },
        [&](const EnvPattern& e) {
          Add(Direction::kWider, "environment", "removed: scrub " + e.name.pattern(), e.loc,
              DiffSide::kFrom);
        });
    std::map<std::string, const EnvSetting*> a, b;
    for (const auto& e : from_.env_set) a[e.name] = &e;
    for (const auto& e : to_.env_set) b[e.name] = &e;
    for (const auto& [name, e] : b) {
      auto it = a.find(name);
      if (it == a.end()) {
        Add(Direction::kNeutral, "environment", "added: set " + name + " " + QuoteWord(e->value),
            e->loc, DiffSide::kTo);
      } else if (it->second->value != e->value) {
        Add(Direction::kNeutral, "environment",
            "set " + name + " " + QuoteWord(it->second->value) + " -> " + QuoteWord(e->value),
            e->loc, DiffSide::kTo);
      }
    }
    for (const auto& [name, e] : a) {
      if (!b.contains(name)) {
        Add(Direction::kNeutral, "environment", "removed: set " + name + " " + QuoteWord(e->value),
            e->loc, DiffSide::kFrom);
      }
    }
  }

  // `require X` refuses to run without X: adding one narrows. `best-effort X` accepts running
  // without X: adding one widens.
  void Requirements() {
    auto key = [](const Setting<Requirement>& r) { return r.value; };
    auto name = [](const Setting<Requirement>& r) { return std::string(RequirementName(r.value)); };
    SetDiff(
        from_.requirements, to_.requirements, key,
        [&](const auto& r) {
          Add(Direction::kNarrower, "requirements", "added: require " + name(r), r.loc,
              DiffSide::kTo);
        },
        [&](const auto& r) {
          Add(Direction::kWider, "requirements", "removed: require " + name(r), r.loc,
              DiffSide::kFrom);
        });
    SetDiff(
        from_.best_effort, to_.best_effort, key,
        [&](const auto& r) {
          Add(Direction::kWider, "requirements", "added: best-effort " + name(r), r.loc,
              DiffSide::kTo);
        },
        [&](const auto& r) {
          Add(Direction::kNarrower, "requirements", "removed: best-effort " + name(r), r.loc,
              DiffSide::kFrom);
        });
  }

  // Verification runs trusted, after the agent: a change alters what is checked, not what the
  // agent can reach.
  void Verify() {
    auto text = [](const VerifyCommand& v) {
      return "run " + QuoteWord(v.command) +
             (v.timeout_ms ? " timeout " + FormatDuration(*v.timeout_ms) : std::string());
    };
    std::vector<std::string> a, b;
    for (const auto& v : from_.verify) a.push_back(text(v));
    for (const auto& v : to_.verify) b.push_back(text(v));
    if (a == b) return;
    for (std::size_t i = 0; i < to_.verify.size(); ++i) {
      if (std::find(a.begin(), a.end(), b[i]) == a.end()) {
        Add(Direction::kNeutral, "verify", "added: " + b[i], to_.verify[i].loc, DiffSide::kTo);
      }
    }
    for (std::size_t i = 0; i < from_.verify.size(); ++i) {
      if (std::find(b.begin(), b.end(), a[i]) == b.end()) {
        Add(Direction::kNeutral, "verify", "removed: " + a[i], from_.verify[i].loc,
            DiffSide::kFrom);
      }
    }
  }

  // Setup runs trusted, before the agent, but with its own network and writable caches: new setup
  // hosts or caches widen what setup (and so the repository's install scripts) can reach; carried
  // paths and the git identity widen what the agent sees of the caller.
  void Setup() {
    auto text = [](const VerifyCommand& v) {
      return "setup run " + QuoteWord(v.command) +
             (v.timeout_ms ? " timeout " + FormatDuration(*v.timeout_ms) : std::string());
    };
    std::vector<std::string> a, b;
    for (const auto& v : from_.setup.commands) a.push_back(text(v));
    for (const auto& v : to_.setup.commands) b.push_back(text(v));
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (std::find(a.begin(), a.end(), b[i]) == a.end()) {
        Add(Direction::kNeutral, "setup", "added: " + b[i], to_.setup.commands[i].loc,
            DiffSide::kTo);
      }
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (std::find(b.begin(), b.end(), a[i]) == b.end()) {
        Add(Direction::kNeutral, "setup", "removed: " + a[i], from_.setup.commands[i].loc,
            DiffSide::kFrom);
      }
    }
    auto host = [](const HostRule& r) {
      return std::string(VerdictName(r.verdict)) + " " + r.text;
    };
    SetDiff(
        from_.setup.hosts, to_.setup.hosts, host,
        [&](const HostRule& r) {
          Add(r.verdict == Verdict::kDeny ? Direction::kNarrower : Direction::kWider, "setup",
              "added: setup hosts " + host(r), r.loc, DiffSide::kTo);
        },
        [&](const HostRule& r) {
          Add(r.verdict == Verdict::kDeny ? Direction::kWider : Direction::kNarrower, "setup",
              "removed: setup hosts " + host(r), r.loc, DiffSide::kFrom);
        });
    auto cache = [](const CacheRule& c) {
      return std::string(c.agent_writable ? "read-write " : "") + "~/" + c.rel;
    };
    SetDiff(
        from_.caches, to_.caches, cache,
        [&](const CacheRule& c) {
          Add(Direction::kWider, "cache", "added: cache " + cache(c), c.loc, DiffSide::kTo);
        },
        [&](const CacheRule& c) {
          Add(Direction::kNarrower, "cache", "removed: cache " + cache(c), c.loc, DiffSide::kFrom);
        });
    auto carried = [](const CarryRule& c) { return c.rel; };
    SetDiff(
        from_.carry, to_.carry, carried,
        [&](const CarryRule& c) {
          Add(Direction::kWider, "carry", "added: carry " + c.rel, c.loc, DiffSide::kTo);
        },
        [&](const CarryRule& c) {
          Add(Direction::kNarrower, "carry", "removed: carry " + c.rel, c.loc, DiffSide::kFrom);
        });
    if (from_.git_identity.value != to_.git_identity.value) {
      Add(to_.git_identity.value ? Direction::kWider : Direction::kNarrower, "git-identity",
          std::string("changed: git-identity ") + (from_.git_identity.value ? "caller" : "none") +
              " -> " + (to_.git_identity.value ? "caller" : "none"),
          to_.git_identity.loc, DiffSide::kTo);
    }
    // outputs (issue 32): what the capture leaves out of the patch, reported by every run; it
    // neither grants nor removes reach.
    auto output = [](const OutputRule& o) { return o.pattern; };
    SetDiff(
        from_.outputs, to_.outputs, output,
        [&](const OutputRule& o) {
          Add(Direction::kNeutral, "outputs", "added: outputs " + o.pattern, o.loc, DiffSide::kTo);
        },
        [&](const OutputRule& o) {
          Add(Direction::kNeutral, "outputs", "removed: outputs " + o.pattern, o.loc,
              DiffSide::kFrom);
        });
    // credentials (issue 36): a credential, or one bound to more hosts, lets the sandbox act with
    // the user's authority where it could not before: wider. Keyed by the whole rule, so a
    // re-bound credential shows as removed and added.
    auto credential = [](const CredentialRule& c) { return c.text; };
    SetDiff(
        from_.credentials, to_.credentials, credential,
        [&](const CredentialRule& c) {
          Add(Direction::kWider, "credentials", "added: credential " + c.text, c.loc,
              DiffSide::kTo);
        },
        [&](const CredentialRule& c) {
          Add(Direction::kNarrower, "credentials", "removed: credential " + c.text, c.loc,
              DiffSide::kFrom);
        });
  }

  // Calls `added` for each element of `b` whose key is not in `a` (in b's order), then `removed`
  // for each element of `a` whose key is not in `b`.
  template <typename T, typename Key, typename Added, typename Removed>
  static void SetDiff(const std::vector<T>& a, const std::vector<T>& b, Key key, Added added,
                      Removed removed) {
    using K = decltype(key(std::declval<const T&>()));
    std::vector<K> ka, kb;
    for (const auto& x : a) ka.push_back(key(x));
    for (const auto& x : b) kb.push_back(key(x));
    std::vector<K> sa = ka, sb = kb;
    std::sort(sa.begin(), sa.end());
    std::sort(sb.begin(), sb.end());
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (!std::binary_search(sa.begin(), sa.end(), kb[i])) added(b[i]);
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!std::binary_search(sb.begin(), sb.end(), ka[i])) removed(a[i]);
    }
  }
};

}  // namespace

std::string_view DirectionName(Direction d) {
  switch (d) {
    case Direction::kWider:
      return "wider";
    case Direction::kNarrower:
      return "narrower";
    case Direction::kNeutral:
      return "neutral";
  }
  return "neutral";
}

std::vector<DiffEntry> Diff(const Policy& from, const Policy& to) { return Differ(from, to).Run(); }

std::string DiffWhere(const DiffEntry& e, const Policy& from, const Policy& to) {
  if (!e.loc.valid()) return "";
  return (e.side == DiffSide::kFrom ? from : to).Where(e.loc);
}

}  // namespace cagent::policy
