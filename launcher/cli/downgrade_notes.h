// Downgrades the caller has acknowledged. A profile may accept a restriction as best-effort (base
// accepts a missing cgroup memory controller); on a machine that cannot give it, every command
// would otherwise print the same warning. `cagent doctor --acknowledge LAYER` records that the
// caller knows; the warning is then left off the terminal, and stays in --json, result.json and
// the session records, which always list every downgrade. Runs in cagent (trusted); the file is
// the caller's own configuration.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace cagent::launcher::cli {

// The layer a downgrade names: its text up to the first ':' ("cgroup", "landlock ABI 5 < 6"),
// trimmed; the whole text when it has no ':'.
[[nodiscard]] std::string DowngradeLayer(std::string_view downgrade);

// ConfigDir(home)/acknowledged-downgrades: one layer per line; '#' comments and blank lines are
// skipped. "" when there is no configuration directory.
[[nodiscard]] std::string AcknowledgedDowngradesFile(const std::string& home);

// The layers listed in that file; none when it is missing or unreadable (warnings then show).
[[nodiscard]] std::set<std::string> AcknowledgedDowngrades(const std::string& home);

// Adds `layers` to the file (created 0600 with its directory, written atomically).
[[nodiscard]] Status AcknowledgeDowngrades(const std::string& home,
                                           const std::vector<std::string>& layers);

// Prints "warning: downgrade: TEXT" for each downgrade whose layer is not acknowledged (each
// text once), with how to acknowledge it after the last; terminal-safe. Returns how many
// warnings were left off because they are acknowledged.
std::size_t WarnDowngrades(const std::vector<std::string>& downgrades, const std::string& home);

}  // namespace cagent::launcher::cli
