// LaunchSpec: the immutable description of one sandbox.
//
// This is the boundary between "what the sandbox should be" and "how it is built": the launcher
// fills it from the compiled profile (SpecFromPolicy, launcher/profile/spec.h) or, without a
// profile, from DefaultLaunchSpec, then narrows it by the command line; the launch modules only
// read it. Pass it around as `const LaunchSpec&`.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "launcher/sandbox/cgroup.h"
#include "launcher/sandbox/rlimits.h"

namespace cagent::launcher {

// A layer of confinement that can be switched off explicitly (for debugging and for the tests that
// show each guard failing when absent). Every switched-off layer is reported loudly on stderr and
// in
// `--json`. There is no way to switch off the user namespace: without it nothing else can be built
// unprivileged.
enum class Layer : std::uint8_t {
  kMountView,        // fresh root with only the named paths; off = the host's whole filesystem
  kPidNamespace,     // own pid namespace; off = host processes visible and signalable
  kNetNamespace,     // own network namespace with only lo; off = the host's network
  kIpcNamespace,     // own SysV IPC / POSIX message queues
  kUtsNamespace,     // own hostname
  kCgroupNamespace,  // "cgroupns"
  kNewSession,       // setsid(): no controlling terminal (TIOCSTI into the caller's terminal)
  kDieWithParent,    // PR_SET_PDEATHSIG: the sandbox dies when cagent dies
  kEnvScrub,         // only the spec's environment; off = the caller's whole environment
  kCloseFds,         // close inherited descriptors; off = the command inherits cagent's fds
  kCapabilities,     // drop every capability, lock securebits, no_new_privs
  kRlimits,          // CPU, file size, open files, processes, core dumps
  kCgroupLimits,     // memory/pids/cpu through a delegated cgroup v2 ("cgroup")
  kLandlock,         // filesystem, TCP and scope rules enforced by the kernel per inode
  kSeccomp,          // the syscall filter
  // Host-side guards (LaunchSpec::guard_git_metadata / guard_privileged_files): switched off only
  // to show in tests what they stop.
  kGitGuard,     // the workspace's git metadata read-only inside ("git-guard")
  kSetuidGuard,  // no setuid/setgid modes inside, and the sweep after exit ("setuid-guard")
  kGitConfig,    // the git config guard's check after exit ("git-config"); git-guard off = off too
  kCount,
};

// Stable, lowercase name used on the command line and in JSON ("net", "pid", ...).
std::string_view LayerName(Layer layer);
// Inverse of LayerName; fails (Error::Code::kInvalidInput) with the list of valid names.
Result<Layer> ParseLayer(std::string_view name);

// A small bitset of layers.
class LayerSet {
 public:
  void Add(Layer l) { bits_ |= Bit(l); }
  [[nodiscard]] bool Has(Layer l) const { return (bits_ & Bit(l)) != 0; }
  [[nodiscard]] bool Empty() const { return bits_ == 0; }

 private:
  static std::uint32_t Bit(Layer l) { return 1U << static_cast<unsigned>(l); }
  std::uint32_t bits_ = 0;
};

// What networking the sandbox gets. Both modes have their own network namespace (unless the net
// layer is switched off) whose only interface is lo.
enum class NetworkMode : std::uint8_t {
  kLoopback,  // TCP/UDP over lo works (local test servers); nothing reaches the host's network
  kNone,      // no IP sockets at all: seccomp refuses AF_INET/AF_INET6 and Landlock every TCP
              // bind/connect, so even a switched-off network namespace leaks nothing over TCP
};

std::string_view NetworkModeName(NetworkMode mode);
// Inverse of NetworkModeName; fails with Error::Code::kInvalidInput.
Result<NetworkMode> ParseNetworkMode(std::string_view name);

struct EnvVar {
  std::string name;
  std::string value;
};

// A socket made inside the sandbox's network namespace, before the command starts, and handed
// to cagent (SandboxControl::on_listeners): how cagent serves the egress proxy from outside the
// sandbox without running anything inside it (a socket keeps the namespace it was made in).
struct NetListener {
  enum class Kind : std::uint8_t { kTcp, kUdp };
  Kind kind = Kind::kTcp;
  std::string address;  // an IPv4 or IPv6 literal, e.g. "127.0.0.1", "0.0.0.0"
  std::uint16_t port = 0;
};

// A host file shown read-only at another path of the view (cagent's resolv.conf over
// /etc/resolv.conf). Applied only where the view shows the target (inside a bound tree); a target
// that is a symlink is followed to its canonical path, and skipped when that is not in the view.
struct FileBind {
  std::string source;  // absolute host path of a regular file
  std::string target;  // absolute path in the view
  // Set when the file must be shown: a target the view does not show (or that is not a regular
  // file there) fails the launch instead of being skipped (a credential's placeholder file,
  // issue 36: the tool reading it would otherwise find nothing, or the real file).
  bool required = false;
};

// A file made in the sandbox's private HOME before the command starts (HOME is a fresh tmpfs,
// so nothing else can put a file there): a credential's placeholder at `~/...`, the CA bundle a
// sandbox with credentials trusts (issue 36). The missing directories on the way are made (mode
// 0755); nothing on the way is followed if it is a symlink; a file already there (two entries
// for one path) fails the launch. Needs the mount view (the fs layer): without it HOME is the
// caller's own.
struct HomeFile {
  std::string path;  // absolute, normalised, strictly below LaunchSpec::home
  std::string content;
  unsigned mode = 0600;  // permission bits only (no setuid/setgid/sticky)
};

// A host directory shown at another path of the view: a profile's cache (its directory under
// $XDG_CACHE_HOME/cagent/caches/ at a path of the sandbox's HOME) or a carried path (the caller's
// node_modules at the same place in the run's workspace). The source is cagent's own or the
// caller's directory, never workspace content; the target must be below HOME or the workspace.
// Below the workspace the target must already be a directory there (cagent makes it), and it is
// bound only if it is still that directory when the sandbox mounts it.
struct DirBind {
  std::string source;  // absolute host path of a directory (not a symlink)
  std::string target;  // absolute, normalised path in the view, below `home` or `workspace`
  bool writable = false;
  // Not writable, but with a private writable layer (issue 32): overlayfs with `source` as its
  // read-only lower layer and a tmpfs of the sandbox's own as the upper one, so tools that write
  // into their cache on every run (npm's _cacache/tmp, Go's build cache) work while nothing they
  // write reaches `source`; the layer dies with the sandbox. Ignored when `writable`.
  bool scratch = false;
};

struct LaunchSpec {
  // The command; argv[0] is looked up in the sandbox's PATH when it has no '/'.
  std::vector<std::string> argv;
  // Canonical absolute path of the workspace; bound at the same path inside, read-write unless
  // `workspace_writable` is false.
  std::string workspace;
  bool workspace_writable = true;
  // Working directory inside the sandbox (absolute); the workspace by default.
  std::string cwd;
  // Host paths bound read-only at the same path if they exist (paths inside the workspace are bound
  // over it, so they stay read-only within a writable workspace). A path that is a symlink on the
  // host (e.g. /bin -> usr/bin on merged-/usr systems) is re-created as the same symlink.
  std::vector<std::string> read_only_paths;
  // Extra host paths bound read-write (nosuid, nodev) if they exist.
  std::vector<std::string> read_write_paths;
  // Paths hidden inside the view: an empty read-only directory or an empty file is mounted over
  // them. Must be absolute.
  std::vector<std::string> hidden_paths;
  // Private HOME (a tmpfs) and its size; /tmp is a private tmpfs too.
  std::string home = "/home/cagent";
  std::uint64_t home_size_bytes = 512ULL << 20;
  std::uint64_t tmp_size_bytes = 1ULL << 30;
  std::string hostname = "cagent";
  // The environment inside is exactly: `env_set`, plus each variable named in `env_pass` that is
  // set in the caller's environment. Nothing else crosses.
  std::vector<EnvVar> env_set;
  std::vector<std::string> env_pass;
  // Set last, over `env_set` and every passed variable, and also with the env-scrub layer off
  // (the caller's whole environment): a credential's placeholder (issue 36), which a pass
  // pattern or a --pass-env of the same name must never replace with the real value; and the CA
  // bundle variables the credential proxy needs the sandbox to use.
  std::vector<EnvVar> env_override;
  // Descriptors passed on purpose (kept at the same number); every other fd >= 3 is closed.
  std::vector<int> keep_fds;
  // Wall-clock limit for the whole sandbox; zero means none. On expiry the command gets SIGTERM,
  // then after `kill_grace` the whole sandbox gets SIGKILL.
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds kill_grace{2000};
  // Layers explicitly switched off (see Layer).
  LayerSet disabled;

  NetworkMode network = NetworkMode::kLoopback;
  // Sockets to make in the sandbox's network namespace (needs kLoopback and the net layer on),
  // bound and listening before the command starts; handed to SandboxControl::on_listeners in this
  // order. TCP listeners set SO_REUSEADDR; ports below 1024 work (the child holds
  // CAP_NET_BIND_SERVICE over its namespace while it makes them).
  std::vector<NetListener> net_listeners;
  std::vector<FileBind> file_binds;
  std::vector<DirBind> dir_binds;
  std::vector<HomeFile> home_files;
  // Ceilings set with setrlimit in the sandbox (RLIMIT_NPROC counts per user namespace, so it caps
  // this sandbox only).
  ResourceLimits limits;
  // memory/pids/cpu limits for a cgroup v2 child; applied only when some are set.
  CgroupLimits cgroup_limits;
  // Host-side guards of what the sandbox leaves behind for the host (issue #13), both on by default
  // for every sandbox (exec, the agent's, verification). They are not layers: they act on the host,
  // before the launch and after the exit, not on the sandbox's kernel view.
  //
  // guard_git_metadata (launcher/guard/git_guard.h): in each writable tree, the git metadata
  // through which a later host git finds its repository and configuration (commondir,
  // config.worktree, info/, hooks/, worktrees/, modules/, objects/info/alternates; `.git` files) is
  // a read-only mount point inside, placeholders created where the names are absent; `.git` entries
  // the command created or replaced are reported (SandboxOutcome::planted_repositories). The mounts
  // need the mount view: with the fs layer off there is nothing to mount into. Each git dir's
  // `config` stays writable (git rewrites it for `git config`, `git branch -D`, `git remote add`)
  // and is checked after the exit instead (launcher/guard/git_config_guard.h; layer kGitConfig),
  // for every git dir in the writable trees, planted ones included; that needs no mount.
  bool guard_git_metadata = true;
  // guard_privileged_files (launcher/guard/leftovers.h): regular files in the writable trees that
  // gained S_ISUID/S_ISGID or a security.capability attribute while the sandbox ran lose them after
  // it exits, and each is reported (SandboxOutcome::cleared_files). The seccomp layer refuses the
  // bits where it can see them; this catches every other route (openat2, a disabled layer).
  bool guard_privileged_files = true;

  // Layers whose absence is accepted (reported as a downgrade) instead of refusing to run:
  // kLandlock (a kernel without Landlock, or without its newer rights), kCgroupLimits (no delegated
  // cgroup with the controllers `cgroup_limits` needs). Everything else always fails closed.
  LayerSet best_effort;
};

// The built-in defaults: system directories read-only, the workspace read-write, host secrets that
// live in system directories hidden, a minimal environment.
//
// `workspace` must already be canonical (see CanonicalDirectory).
LaunchSpec DefaultLaunchSpec(std::string workspace, std::vector<std::string> argv);

// realpath() of `path`, which must be an existing directory.
Result<std::string> CanonicalDirectory(const std::string& path);

// Checks the invariants the launch relies on (absolute paths, non-empty argv, cwd set, no path
// equal to "/"), so a malformed spec fails (Error::Code::kInvalidInput) before anything is cloned.
Status ValidateLaunchSpec(const LaunchSpec& spec);

}  // namespace cagent::launcher
