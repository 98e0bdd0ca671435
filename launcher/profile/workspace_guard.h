// The workspace guard: which directories may become a sandbox's read-write workspace.
//
// The workspace is bound read-write at its own path, so choosing it chooses what the sandboxed
// command may read and change. `cagent exec` takes it from the current directory by default, so a
// `cd ~ && cagent exec -- CMD` used to hand CMD the whole home (~/.ssh, ~/.aws and every other
// credential included, read-write). Every command that binds a workspace chosen by the caller
// (exec, agent, mcp serve, mcp wrap) checks it here first; `cagent run` works on a disposable
// checkout it makes itself and needs no check.
//
// Classes, compared on canonical paths (symlinks resolved first: a link ~/ws -> ~ is the home):
//   - system: "/", /usr, /etc, /bin, /sbin, /lib*, /boot, /run, /var, /opt, /srv, /mnt, /media,
//     /tmp, /var/tmp, /root (unless it is the caller's home), and their canonical forms (/bin ->
//     /usr/bin on merged-/usr systems); /dev, /proc and /sys with everything below them. Always
//     refused: nothing in them is a project, and writing them is writing the host (/etc for a root
//     caller) or sharing the host's sockets (/tmp and /run hold agent and bus sockets). Their
//     subdirectories (/opt/app, /srv/site, /usr/local/src/x) are ordinary.
//   - host secret: a directory at or below one of the host secret set under the home (~/.ssh,
//     ~/.gnupg, ~/.config/gh, ...; policy/match/host_secrets.h). Always refused: the set is hidden
//     in every sandbox, which cannot be done to the workspace itself.
//   - home: the caller's home, an ancestor of it other than "/" (/home), or /home itself. Refused
//     unless the caller names it with --workspace and passes --allow-home; the host secret set is
//     hidden inside it even then (launcher/profile/spec.h, HideHostSecrets).
//   - ordinary: everything else.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace cagent::launcher {

enum class WorkspaceClass : std::uint8_t {
  kOrdinary,
  kHome,          // the caller's home
  kHomeAncestor,  // a directory holding the caller's home (/home), or /home
  kHostSecret,    // at or below a path of the host secret set under the home
  kSystem,        // a system directory (see above)
};

// What the classification compares against: the caller's home and the system directories, all
// canonical and normalised.
struct WorkspaceGuardContext {
  std::string home;                       // canonical; "" when the caller has none
  std::vector<std::string> system_dirs;   // refused as themselves
  std::vector<std::string> system_trees;  // refused with everything below them
};

// The context of this process: CallerHome() and the system directories, each with its canonical
// form added when it differs (realpath; entries that do not exist are kept as written). Runs in
// cagent; reads only the host's own paths (lstat/realpath), never the workspace's content.
WorkspaceGuardContext HostGuardContext();

// Pure: the class of canonical, normalised absolute path `workspace` under `ctx`.
WorkspaceClass ClassifyWorkspace(std::string_view workspace, const WorkspaceGuardContext& ctx);

// How the caller chose the workspace, for the check.
struct WorkspaceChoice {
  bool named = false;       // given with --workspace (not taken from the current directory)
  bool allow_home = false;  // --allow-home
  std::string flag = "--workspace";  // the option's name, for messages
};

// Refuses `workspace` (canonical) when its class is not allowed for `choice`
// (Error::Code::kInvalidInput, a message saying why and what to do). --allow-home without a named
// workspace is refused too, whatever the class: it must name what it allows.
Status CheckWorkspace(const std::string& workspace, const WorkspaceChoice& choice,
                      const WorkspaceGuardContext& ctx);
// CheckWorkspace under HostGuardContext().
Status CheckWorkspace(const std::string& workspace, const WorkspaceChoice& choice);

// The help text of --allow-home, shared by the commands that have it.
extern const char* const kAllowHomeHelp;

}  // namespace cagent::launcher
