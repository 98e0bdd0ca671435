// Probes of what this kernel and machine support, for `cagent doctor` and for the layer report of
// a run. Runs in cagent (the parent); each probe that needs to change process state does so in a
// short-lived child.
#pragma once

#include <string>
#include <vector>

namespace cagent::launcher {

// One line of the report.
struct Probe {
  std::string name;    // "user namespaces"
  std::string status;  // "ok", "missing", "degraded", "off"
  std::string detail;  // what was found, and what to do when it is not ok
};

struct DoctorReport {
  std::string kernel;  // uname -r and machine
  std::vector<Probe> probes;
  // Whether a default sandbox could be built right now (a real trial run of /bin/true).
  bool sandbox_ok = false;
  std::string sandbox_detail;
  // What that sandbox got, one line per layer, downgrades included.
  std::vector<std::string> layers;
};

// Runs every probe. Takes a few milliseconds; starts one trial sandbox.
DoctorReport RunDoctor();

// The AppArmor restriction on unprivileged user namespaces (Ubuntu 23.10 and later): read from
// `restrict_path` (/proc/sys/kernel/apparmor_restrict_unprivileged_userns; absent where the kernel
// has no such restriction, Debian 12's among them). `sandbox_ok` is whether a trial sandbox was
// built (under the restriction, unshare itself succeeds and what follows fails), `profile_path`
// where the package installs cagent's AppArmor profile (/etc/apparmor.d/cagent). When restricted
// and no sandbox could be built, the detail says which fix applies.
Probe AppArmorUsernsProbe(const std::string& restrict_path, bool sandbox_ok,
                          const std::string& profile_path);

}  // namespace cagent::launcher
