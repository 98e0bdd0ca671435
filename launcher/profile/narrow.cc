#include "launcher/profile/narrow.h"

#include <cstdlib>
#include <utility>

#include "common/duration.h"
#include "policy/language/lowering.h"

namespace cagent::launcher {
namespace {

Error Invalid(std::string op, std::string detail = {}) {
  return PlainError(std::move(op), std::move(detail)).WithCode(Error::Code::kInvalidInput);
}

// A malformed literal: "--cpu-time: <why>".
Error Unparsable(const std::string& flag, const Error& why) { return Invalid(flag, why.Message()); }

// A limit from the command line against the profile's (none without a profile).
Status Lowers(const policy::Policy* policy, policy::Limit limit, std::uint64_t requested,
              const char* flag) {
  if (policy == nullptr) return Ok{};
  return policy::CheckLowers(flag, policy::CeilingOf(*policy, limit), requested);
}

// The checks that need no parsing: with a profile, no extra binds, no switched-off layers, no
// variable the profile scrubs.
Status CheckNothingWidens(const ExecOverrides& o, const policy::Policy& p) {
  if (!o.ro_paths.empty() || !o.rw_paths.empty()) {
    return Invalid(std::string(o.rw_paths.empty() ? "--ro" : "--rw") +
                   " would widen the profile '" + p.name +
                   "'; add the path to a profile (read-only PATH / read-write PATH) instead");
  }
  if (!o.disable_layers.empty()) {
    return Invalid(
        "--disable-layer cannot be combined with --profile: a profile's sandbox is not switched "
        "off piecemeal; use it without --profile to debug a layer");
  }
  for (const auto& name : o.env_pass) {
    for (const auto& pattern : p.env_scrub) {
      if (pattern.name.Match(name)) {
        return Invalid("--pass-env " + name + ": the profile '" + p.name + "' scrubs it (scrub " +
                       pattern.name.pattern() + " at " + p.Where(pattern.loc) + ")");
      }
    }
  }
  return Ok{};
}

Status ApplyPathsAndEnvironment(LaunchSpec& spec, const ExecOverrides& o) {
  for (const auto& p : o.ro_paths) spec.read_only_paths.push_back(p);
  for (const auto& p : o.rw_paths) spec.read_write_paths.push_back(p);
  for (const auto& p : o.hide_paths) spec.hidden_paths.push_back(p);
  for (const auto& kv : o.env_set) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Invalid("--env expects NAME=VALUE, got '" + kv + "'");
    }
    // In front, so a later --env of the same name and the profile's `set` lose to it.
    spec.env_set.insert(spec.env_set.begin(), EnvVar{kv.substr(0, eq), kv.substr(eq + 1)});
  }
  for (const auto& name : o.env_pass) spec.env_pass.push_back(name);
  if (!o.hostname.empty()) spec.hostname = o.hostname;
  return Ok{};
}

Status ApplyNetwork(LaunchSpec& spec, const ExecOverrides& o, const policy::Policy* p) {
  if (o.network.empty()) return Ok{};
  auto network = ParseNetworkMode(o.network);
  if (!network) return Unparsable("--network", network.error());
  if (p != nullptr && *network == NetworkMode::kLoopback && spec.network == NetworkMode::kNone) {
    return Invalid("--network loopback would widen the profile '" + p->name +
                   "', which sets network none at " + p->Where(p->network.loc) +
                   "; the command line can only narrow a profile");
  }
  spec.network = *network;
  return Ok{};
}

Status ApplyLimits(LaunchSpec& spec, const ExecOverrides& o, const policy::Policy* p) {
  using policy::Limit;
  if (!o.cpu_time.empty()) {
    auto t = ParseDuration(o.cpu_time);
    if (!t) return Unparsable("--cpu-time", t.error());
    const auto ms = static_cast<std::uint64_t>(t->count());
    if (auto s = Lowers(p, Limit::kCpuTime, ms, "--cpu-time"); !s) return s;
    spec.limits.cpu_seconds = (ms + 999) / 1000;
  }
  if (!o.file_size.empty()) {
    auto n = ParseSize(o.file_size);
    if (!n) return Unparsable("--file-size", n.error());
    if (auto s = Lowers(p, Limit::kFileSize, *n, "--file-size"); !s) return s;
    spec.limits.file_size_bytes = *n;
  }
  if (o.open_files) {
    if (auto s = Lowers(p, Limit::kOpenFiles, *o.open_files, "--open-files"); !s) return s;
    spec.limits.open_files = *o.open_files;
  }
  if (o.processes) {
    if (auto s = Lowers(p, Limit::kProcesses, *o.processes, "--processes"); !s) return s;
    spec.limits.processes = *o.processes;
  }
  if (!o.memory.empty()) {
    auto n = ParseSize(o.memory);
    if (!n) return Unparsable("--memory", n.error());
    if (auto s = Lowers(p, Limit::kMemory, *n, "--memory"); !s) return s;
    spec.cgroup_limits.memory_max = *n;
    spec.cgroup_limits.swap_max = 0;
  }
  if (o.pids) {
    // pids.max bounds the same thing as the profile's `processes`.
    if (auto s = Lowers(p, Limit::kProcesses, *o.pids, "--pids"); !s) return s;
    spec.cgroup_limits.pids_max = *o.pids;
  }
  if (!o.cpus.empty()) {
    char* end = nullptr;
    const double cores = std::strtod(o.cpus.c_str(), &end);
    if (end == o.cpus.c_str() || *end != '\0' || !(cores > 0) || cores > 1024) {
      return Invalid("--cpus expects a positive number of cores, e.g. 0.5 or 2, got '" + o.cpus +
                     "'");
    }
    spec.cgroup_limits.cpu_period_us = 100000;
    spec.cgroup_limits.cpu_quota_us = static_cast<std::uint64_t>(cores * 100000);
  }
  return Ok{};
}

Status ApplyBestEffort(LaunchSpec& spec, const ExecOverrides& o, const policy::Policy* p) {
  for (const auto& name : o.best_effort) {
    auto l = ParseLayer(name);
    if (!l || (*l != Layer::kLandlock && *l != Layer::kCgroupLimits)) {
      return Invalid("--best-effort takes 'landlock' or 'cgroup', got '" + name + "'");
    }
    if (p != nullptr) {
      const auto req =
          *l == Layer::kLandlock ? policy::Requirement::kLandlock : policy::Requirement::kCgroup;
      const bool needs_cgroup = p->Requires(policy::Requirement::kMemoryLimit) ||
                                p->Requires(policy::Requirement::kPidsLimit);
      if (p->Requires(req) || (*l == Layer::kCgroupLimits && needs_cgroup)) {
        return Invalid("--best-effort " + name + " conflicts with the profile '" + p->name +
                       "', which requires it");
      }
    }
    spec.best_effort.Add(*l);
  }
  return Ok{};
}

Status ApplyTimeout(LaunchSpec& spec, const ExecOverrides& o, const policy::Policy* p) {
  if (o.timeout.empty()) return Ok{};
  auto t = ParseDuration(o.timeout);
  if (!t) return Unparsable("--timeout", t.error());
  const auto ms = static_cast<std::uint64_t>(t->count());
  if (auto s = Lowers(p, policy::Limit::kWallTime, ms, "--timeout"); !s) return s;
  spec.timeout = *t;
  return Ok{};
}

Status ApplyDisabledLayers(LaunchSpec& spec, const ExecOverrides& o, const policy::Policy* p) {
  for (const auto& name : o.disable_layers) {
    auto l = ParseLayer(name);
    if (!l) return Unparsable("--disable-layer", l.error());
    // Unreachable through Narrow while CheckNothingWidens refuses every --disable-layer with a
    // profile; kept so that loosening that rule cannot switch off a required layer.
    if (p != nullptr && ((*l == Layer::kLandlock && p->Requires(policy::Requirement::kLandlock)) ||
                         (*l == Layer::kSeccomp && p->Requires(policy::Requirement::kSeccomp)))) {
      return Invalid("--disable-layer " + name + " conflicts with the profile '" + p->name +
                     "', which requires it; use a profile without 'require " + name + "'");
    }
    spec.disabled.Add(*l);
  }
  return Ok{};
}

}  // namespace

Result<LaunchSpec> Narrow(LaunchSpec spec, const ExecOverrides& o, const policy::Policy* policy) {
  if (policy != nullptr) {
    if (auto s = CheckNothingWidens(o, *policy); !s) return s.error();
  }
  // In the order the flags were always checked, so the first refusal reported stays the same.
  if (auto s = ApplyPathsAndEnvironment(spec, o); !s) return s.error();
  if (auto s = ApplyNetwork(spec, o, policy); !s) return s.error();
  if (auto s = ApplyLimits(spec, o, policy); !s) return s.error();
  if (auto s = ApplyBestEffort(spec, o, policy); !s) return s.error();
  if (auto s = ApplyTimeout(spec, o, policy); !s) return s.error();
  if (auto s = ApplyDisabledLayers(spec, o, policy); !s) return s.error();
  return spec;
}

}  // namespace cagent::launcher
