// Comparing two compiled policies: what becomes more or less permissive, rule by rule.
//
// Diff(from, to) walks both Policies key by key (they are normalised and sorted, so equal meaning
// gives no entries) and classifies every difference by what it does to the agent's reach:
//   wider     `to` permits something `from` did not (network on, a mount added or made writable, an
//             allow rule added, a deny removed, the egress proxy on, an allow or ask host added,
//             a limit raised or unbounded, a variable passed in, a requirement dropped or made
//             best-effort, asks that now run unattended);
//   narrower  the reverse;
//   neutral   a change that neither grants nor removes reach by itself (an `ask` rule under an
//             approval mode that asks a person, a changed `set` value, the verify commands).
// Pure: no I/O. `cagent policy diff` prints the entries; `cagent policy audit` reports the wider
// entries between a profile and its parent as "a child weakens its parent".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "policy/language/ir.h"

namespace cagent::policy {

enum class Direction : std::uint8_t { kWider, kNarrower, kNeutral };
std::string_view DirectionName(Direction d);  // "wider", "narrower", "neutral"

enum class Change : std::uint8_t { kAdded, kRemoved, kChanged };

// Which policy an entry's location points into.
enum class DiffSide : std::uint8_t { kFrom, kTo };

struct DiffEntry {
  Direction direction = Direction::kNeutral;
  Change change = Change::kChanged;  // a rule or path added or removed, or a value changed
  // "network", "approval", "workspace", "mounts", "filesystem", "commands", "tools", "hosts",
  // "limits", "environment", "requirements", "verify", "setup", "cache", "carry", "git-identity",
  // "outputs".
  std::string area;
  // One line, in the language where possible: "network none -> loopback",
  // "added: allow (python | python3)", "memory 8G -> unlimited (now unbounded)".
  std::string text;
  // The statement responsible: in `to` for what `to` adds or changes, in `from` for what it
  // removes. Invalid when neither policy writes it (a default).
  Location loc;
  DiffSide side = DiffSide::kTo;
};

// Every difference from `from` to `to`, grouped by area in the order above; within an area in the
// policies' sort order. Entries hold copies; neither policy needs to outlive them.
std::vector<DiffEntry> Diff(const Policy& from, const Policy& to);

// "file:line:col" of an entry's location, resolved in the policy it points into, or "" when it has
// none.
std::string DiffWhere(const DiffEntry& entry, const Policy& from, const Policy& to);

}  // namespace cagent::policy
