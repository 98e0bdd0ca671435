#include "launcher/doctor.h"

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

#include "launcher/launch_spec.h"
#include "launcher/sandbox.h"

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
  const std::string apparmor = ReadFirstLine("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  if (apparmor == "1") detail += ", kernel.apparmor_restrict_unprivileged_userns=1";
  return {"user namespaces", "missing", detail};
}

Probe Landlock() {
  constexpr unsigned kVersionFlag = 1U << 0;  // LANDLOCK_CREATE_RULESET_VERSION
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kVersionFlag);
  if (abi < 0) {
    return {"landlock", "missing",
            std::string(std::strerror(errno)) +
                "; needs Linux >= 5.13 with landlock in the lsm= boot parameter"};
  }
  std::string features = "filesystem";
  if (abi >= 2) features += ", refer";
  if (abi >= 3) features += ", truncate";
  if (abi >= 4) features += ", TCP bind/connect";
  if (abi >= 5) features += ", device ioctl";
  if (abi >= 6) features += ", abstract-socket and signal scopes";
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
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line, mount_point;
  while (std::getline(mountinfo, line)) {
    const size_t dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos) continue;
    std::istringstream fields(line);
    std::string f;
    for (int i = 0; i < 5 && fields >> f; ++i) {
    }
    mount_point = f;
    break;
  }
  if (mount_point.empty()) {
    return {"cgroup v2", "missing", "no cgroup2 filesystem mounted; limits fall back to rlimits"};
  }
  std::string own = ReadFirstLine("/proc/self/cgroup");
  std::ifstream all("/proc/self/cgroup");
  while (std::getline(all, line)) {
    if (line.rfind("0::", 0) == 0) own = line.substr(3);
  }
  const std::string dir = mount_point + own;
  const std::string controllers = ReadFirstLine(dir + "/cgroup.controllers");
  const bool writable = ::access(dir.c_str(), W_OK) == 0;
  std::string detail = "mounted at " + mount_point + ", this process in " + own + ", controllers: " +
                       (controllers.empty() ? "none" : controllers) +
                       (writable ? ", writable" : ", not writable");
  const bool all_present = controllers.find("memory") != std::string::npos &&
                           controllers.find("pids") != std::string::npos &&
                           controllers.find("cpu") != std::string::npos;
  if (!all_present || !writable) {
    detail +=
        "; memory/pids/cpu limits are not enforceable here (process count falls back to "
        "RLIMIT_NPROC). To delegate: systemd-run --user --scope -p Delegate=yes cagent ...";
    return {"cgroup v2", "degraded", detail};
  }
  return {"cgroup v2", "ok", detail};
}

Probe Selinux() {
  if (!FileHasWord("/proc/filesystems", "selinuxfs")) {
    return {"selinux", "off", "not enabled on this kernel (no selinuxfs); the module in selinux/ "
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
  const long fd = ::syscall(SYS_pidfd_open, ::getpid(), 0);
  if (fd < 0) {
    return {"pidfd, mount_setattr", "missing",
            std::string("pidfd_open: ") + std::strerror(errno) + "; cagent needs Linux >= 5.12"};
  }
  ::close(static_cast<int>(fd));
  return {"pidfd, mount_setattr", "ok", "Linux >= 5.12 interfaces present"};
}

}  // namespace

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
    report.sandbox_detail = std::string("cannot create a scratch workspace: ") + std::strerror(errno);
    return report;
  }
  const LaunchSpec spec = DefaultLaunchSpec(tmpl, {"/bin/true"});
  auto outcome = RunSandbox(spec);
  ::rmdir(tmpl);
  if (!outcome) {
    report.sandbox_detail = outcome.error().Message();
  } else if (outcome->kind == SandboxOutcome::Kind::kExited && outcome->exit_code == 0) {
    report.sandbox_ok = true;
    report.sandbox_detail = "a default sandbox was built and ran /bin/true in " +
                            std::to_string(outcome->duration.count()) + " ms";
  } else {
    report.sandbox_detail = DescribeOutcome(*outcome);
  }
  return report;
}

}  // namespace cagent::launcher
