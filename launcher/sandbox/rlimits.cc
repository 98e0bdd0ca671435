#include "launcher/sandbox/rlimits.h"

#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace cagent::launcher {
namespace {

// The caller's hard limit for `resource`; RLIM_INFINITY if it cannot be read (getrlimit fails
// only for an unknown resource, and every resource used here exists since Linux 2.6).
rlim_t CallerHardLimit(int resource) {
  struct rlimit current {};
  if (::getrlimit(resource, &current) != 0) return RLIM_INFINITY;
  return current.rlim_max;
}

// A request as an rlim_t, saturating: a value that does not fit means "as high as possible",
// which the clamp below turns into the caller's hard limit.
rlim_t ToRlim(std::uint64_t value) {
  return value >= static_cast<std::uint64_t>(RLIM_INFINITY) ? RLIM_INFINITY
                                                            : static_cast<rlim_t>(value);
}

void Add(PreparedRlimits& out, int resource, rlim_t soft, rlim_t hard) {
  out.settings[out.count++] = RlimitSetting{resource, soft, hard};
}

// soft = hard = min(request, caller's hard): only ever lowers.
void AddClamped(PreparedRlimits& out, int resource, const std::optional<std::uint64_t>& request) {
  if (!request) return;
  const rlim_t value = std::min(ToRlim(*request), CallerHardLimit(resource));
  Add(out, resource, value, value);
}

}  // namespace

const RlimitSetting* PreparedRlimits::Find(int resource) const {
  for (std::size_t i = 0; i < count; ++i) {
    if (settings[i].resource == resource) return &settings[i];
  }
  return nullptr;
}

PreparedRlimits PrepareRlimits(const ResourceLimits& limits) {
  PreparedRlimits out;
  if (limits.cpu_seconds) {
    // Soft one second below hard: SIGXCPU at the soft limit (catchable, and the signal the run
    // record explains), SIGKILL one CPU-second later if the command ignores it. Both are clamped
    // to the caller's hard limit.
    const rlim_t caller_hard = CallerHardLimit(RLIMIT_CPU);
    const rlim_t soft_wanted = ToRlim(*limits.cpu_seconds);
    const rlim_t hard_wanted = soft_wanted == RLIM_INFINITY ? RLIM_INFINITY : soft_wanted + 1;
    const rlim_t hard = std::min(hard_wanted, caller_hard);
    Add(out, RLIMIT_CPU, std::min(soft_wanted, hard), hard);
  }
  AddClamped(out, RLIMIT_FSIZE, limits.file_size_bytes);
  AddClamped(out, RLIMIT_NOFILE, limits.open_files);
  // Counted per user namespace (see rlimits.h): bounds the sandbox's processes, init included.
  AddClamped(out, RLIMIT_NPROC, limits.processes);
  AddClamped(out, RLIMIT_DATA, limits.data_bytes);
  AddClamped(out, RLIMIT_AS, limits.address_space_bytes);
  // A core file of a sandboxed process would be written by the kernel outside the sandbox's view
  // when core_pattern is a pipe, and can hold secrets the command read; off unless asked for.
  if (!limits.core_dumps) Add(out, RLIMIT_CORE, 0, 0);
  return out;
}

ChildResult ApplyRlimits(const PreparedRlimits& prepared) {
  for (std::size_t i = 0; i < prepared.count; ++i) {
    const RlimitSetting& s = prepared.settings[i];
    const struct rlimit value { s.soft, s.hard };
    if (::setrlimit(s.resource, &value) != 0) {
      return ChildResult::Failure(kRlimitStep, errno, s.resource);
    }
  }
  return ChildResult::Success();
}

std::string HumanReadableSize(std::uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  // Switch units before rounding would print "1024.0".
  while (value >= 1023.95 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  (void)std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  return buf;
}

std::string ExplainLimitSignal(int sig, const ResourceLimits& limits) {
  switch (sig) {
    case SIGXCPU:
      if (limits.cpu_seconds) {
        return "CPU time limit of " + std::to_string(*limits.cpu_seconds) + "s reached (SIGXCPU)";
      }
      return "CPU time limit reached (SIGXCPU)";
    case SIGXFSZ:
      if (limits.file_size_bytes) {
        return "file size limit of " + HumanReadableSize(*limits.file_size_bytes) +
               " reached (SIGXFSZ)";
      }
      return "file size limit reached (SIGXFSZ)";
    default:
      return "";
  }
}

}  // namespace cagent::launcher
