// User namespace: the caller's uid and gid mapped to themselves, setgroups denied.
//
// Runs in the parent (cagent), after clone(CLONE_NEWUSER) and before the child is released:
// an unprivileged process may write a one-line map of its own ids into its child's namespace, and
// must write "deny" to setgroups first (since Linux 3.19, CVE-2014-8989), which also removes the
// child's ability to drop supplementary groups to escape group-based denials.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/result.h"

namespace cagent::launcher {

struct IdMaps {
  std::string uid_map;  // "<uid> <uid> 1\n"
  std::string gid_map;
};

// Prepare (parent, before clone): the maps for the calling process's effective ids.
IdMaps PrepareIdMaps();

// Setup-from-parent: writes setgroups=deny, uid_map and gid_map of `child`. The child must not
// proceed until this has returned successfully.
Status WriteIdMaps(pid_t child, const IdMaps& maps);

}  // namespace cagent::launcher
