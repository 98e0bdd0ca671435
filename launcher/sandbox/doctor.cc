#include "launcher/sandbox/doctor.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "launcher/sandbox/cgroup.h"
#include "launcher/sandbox/landlock.h"
#include "launcher/sandbox/launch_spec.h"
#include "launcher/sandbox/sandbox.h"

namespace cagent::launcher {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return line;
}

bool FileHasWord(const std::string& path, const std::string& word) {
  std::ifstream in(path);
  std::string w;
  while (in >> w) {
    if (w == word) return true;
  }
  return false;
}

// Runs `fn` in a forked child and returns its exit status (the child's errno on failure).
template <typename Fn>
int InChild(Fn fn) {
  const pid_t pid = ::fork();
  if (pid < 0) return errno;
  if (pid == 0) ::_exit(fn());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

Probe UserNamespaces() {
  const std::string max = ReadFirstLine("/proc/sys/user/max_user_namespaces");
  const int err = InChild([] { return ::unshare(CLONE_NEWUSER) == 0 ? 0 : errno; });
  if (err == 0) return {"user namespaces", "ok", "unprivileged creation works (max " + max + ")"};
  std::string detail = std::string("unshare(CLONE_NEWUSER): ") + std::strerror(err) +
                       "; cagent cannot build a sandbox. Check user.max_user_namespaces";
  const std::string legacy = ReadFirstLine("/proc/sys/kernel/unprivileged_userns_clone");
  if (legacy == "0") detail += ", kernel.unprivileged_userns_clone=0 (set it to 1)";
  const std::string apparmor =
      ReadFirstLine("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  if (apparmor == "1") detail += ", kernel.apparmor_restrict_unprivileged_userns=1";
  return {"user namespaces", "missing", detail};
}

Probe Landlock() {
  const int abi = LandlockAbi();
  if (abi <= 0) {
    return {"landlock", "missing",
            "needs Linux >= 5.13 with landlock in the lsm= boot parameter; cagent refuses to run "
            "without it unless --best-effort landlock"};
  }
  std::string features = "filesystem";
  if (abi >= 2) features += ", refer";
  if (abi >= 3) features += ", truncate";
  if (abi >= 4) features += ", TCP bind/connect";
  if (abi >= 5) features += ", device ioctl";
  if (abi >= 6) features += ", abstract-socket and signal scopes";
  if (abi < 6) {
    return {"landlock", "degraded",
            "ABI " + std::to_string(abi) + ": " + features +
                "; newer rules (scopes: ABI 6, Linux 6.12) are reported as downgrades"};
  }
  return {"landlock", "ok", "ABI " + std::to_string(abi) + ": " + features};
}

Probe Seccomp() {
  if (::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) {
    return {"seccomp", "missing", std::string("PR_GET_SECCOMP: ") + std::strerror(errno)};
  }
  const std::string actions = ReadFirstLine("/proc/sys/kernel/seccomp/actions_avail");
  const bool errno_action = actions.find("errno") != std::string::npos;
  return {"seccomp", errno_action ? "ok" : "degraded",
          "filter mode available; actions: " + (actions.empty() ? "unknown" : actions)};
}

Probe CgroupV2() {
  const CgroupDiscovery d = DiscoverCgroup(CgroupEnv::FromProcess());
  if (d.mount_point.empty()) {
    return {"cgroup v2", "missing",
            "no cgroup2 filesystem mounted; --memory/--pids/--cpus need --best-effort cgroup; "
            "the process count falls back to RLIMIT_NPROC (not for root callers)"};
  }
  std::string detail = "mounted at " + d.mount_point;
  if (!d.base.empty()) detail += ", sandboxes would go under " + d.base;
  detail += ", available: " + (d.available.empty() ? std::string("none") : d.available.ToString());
  if (d.available.Contains(ControllerSet::All())) return {"cgroup v2", "ok", detail};
  detail += "; " + d.reason +
            ". To delegate: systemd-run --user --scope -p Delegate=yes cagent ..., or set "
            "CAGENT_CGROUP to a delegated cgroup";
  return {"cgroup v2", "degraded", detail};
}

Probe Selinux() {
  if (!FileHasWord("/proc/filesystems", "selinuxfs")) {
    return {"selinux", "off",
            "not enabled on this kernel (no selinuxfs); the module in selinux/ "
            "is an optional extra layer on SELinux systems"};
  }
  const std::string enforce = ReadFirstLine("/sys/fs/selinux/enforce");
  if (enforce.empty()) return {"selinux", "off", "selinuxfs registered but not mounted"};
  return {"selinux", "ok", enforce == "1" ? "enforcing" : "permissive"};
}

Probe Overlayfs() {
  if (FileHasWord("/proc/filesystems", "overlay")) {
    return {"overlayfs", "ok", "available (mountable in a user namespace since Linux 5.11)"};
  }
  return {"overlayfs", "missing", "not in /proc/filesystems (modprobe overlay)"};
}

Probe PidfdAndMountApi() {
  const auto fd = ::syscall(SYS_pidfd_open, ::getpid(), 0);
  if (fd < 0) {
    return {"pidfd, mount_setattr", "missing",
            std::string("pidfd_open: ") + std::strerror(errno) + "; cagent needs Linux >= 5.12"};
  }
  ::close(static_cast<int>(fd));
  return {"pidfd, mount_setattr", "ok", "Linux >= 5.12 interfaces present"};
}

}  // namespace

Probe AppArmorUsernsProbe(const std::string& restrict_path, bool sandbox_ok,
                          const std::string& profile_path) {
  const std::string name = "apparmor userns";
  const std::string value = ReadFirstLine(restrict_path);
  if (value.empty()) {
    return {name, "ok", "no AppArmor restriction on user namespaces on this kernel"};
  }
  if (value == "0") {
    return {name, "ok", "kernel.apparmor_restrict_unprivileged_userns=0: not restricted"};
  }
  if (sandbox_ok) {
    return {name, "ok",
            "kernel.apparmor_restrict_unprivileged_userns=" + value +
                ", and cagent may create user namespaces (its AppArmor profile allows userns)"};
  }
  std::string detail = "kernel.apparmor_restrict_unprivileged_userns=" + value +
                       ": unprivileged user namespaces need an AppArmor profile allowing userns. ";
  if (::access(profile_path.c_str(), F_OK) == 0) {
    detail += profile_path +
              " is installed but does not cover this process: load it (sudo apparmor_parser -r " +
              profile_path +
              ") and run the cagent at the path it names (a build tree's cagent is not covered)";
  } else {
    detail +=
        "Fix: install the package's AppArmor profile (apt install ./cagent_*.deb puts it in " +
        profile_path +
        " and loads it; for another path adapt packaging/apparmor/cagent.in), or lift the "
        "restriction for every program: sudo sysctl "
        "kernel.apparmor_restrict_unprivileged_userns=0";
  }
  return {name, "missing", detail};
}

DoctorReport RunDoctor() {
  DoctorReport report;
  struct utsname u {};
  if (::uname(&u) == 0) report.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
  report.probes = {UserNamespaces(), PidfdAndMountApi(), Landlock(), Seccomp(),
                   CgroupV2(),       Overlayfs(),        Selinux()};

  // The decisive probe: build the default sandbox (pivot_root, proc, devpts and all) around
  // /bin/true, in a scratch workspace.
  char tmpl[] = "/tmp/cagent-doctor-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    report.sandbox_detail =
        std::string("cannot create a scratch workspace: ") + std::strerror(errno);
    return report;
  }
  const LaunchSpec spec = DefaultLaunchSpec(tmpl, {"/bin/true"});
  auto outcome = RunSandbox(spec);
  ::rmdir(tmpl);
  report.probes.push_back(AppArmorUsernsProbe(
      "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
      outcome && outcome->kind == SandboxOutcome::Kind::kExited && outcome->exit_code == 0,
      "/etc/apparmor.d/cagent"));
  if (!outcome) {
    report.sandbox_detail = outcome.error().Message();
  } else if (outcome->kind == SandboxOutcome::Kind::kExited && outcome->exit_code == 0) {
    report.sandbox_ok = true;
    report.sandbox_detail = "a default sandbox was built and ran /bin/true in " +
                            std::to_string(outcome->duration.count()) + " ms";
    report.layers = {"namespaces: user, mount, pid, net (lo only), ipc, uts, cgroup",
                     "filesystem view: fresh read-only root, workspace read-write",
                     "capabilities: none; no_new_privs",
                     "rlimits: " + outcome->rlimits,
                     "landlock: " + outcome->landlock,
                     "seccomp: " + outcome->seccomp,
                     "cgroup limits: used only when --memory/--pids/--cpus are given"};
    if (::geteuid() == 0) {
      report.layers.emplace_back(
          "note: run as root, the kernel exempts the sandbox from RLIMIT_NPROC (uid 0); the "
          "process cap then needs a cgroup pids controller");
    }
    for (const auto& d : outcome->downgrades) report.layers.push_back("downgrade: " + d);
  } else {
    report.sandbox_detail = DescribeOutcome(*outcome);
  }
  return report;
}

}  // namespace cagent::launcher
