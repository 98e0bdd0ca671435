// The default seccomp programs, compiled by libseccomp at build time (SeccompFilter::Prepare).
//
// The build compiles launcher/sandbox/seccomp.cc a second time into cagent_seccomp_gen
// (launcher/sandbox/seccomp_gen/), which runs SeccompFilter::Compile on every default policy and
// writes the programs, with the names and the rule summary the filter reports, as the source file
// that defines PrebuiltSeccompFilters() for the launcher. The generator itself links
// seccomp_gen/none.cc, an empty table, so what it writes is always libseccomp's output. The tests
// (seccomp_test.cc, "Prebuilt") compare every entry with what libseccomp compiles at test time.
#pragma once

#include <linux/filter.h>

#include <span>

namespace cagent::launcher {

struct PrebuiltSyscall {
  const char* name;
  int nr;
};

// DefaultSeccompPolicy(allow_inet) with deny_privileged_modes set as given, compiled.
struct PrebuiltSeccomp {
  bool allow_inet;
  bool deny_privileged_modes;
  std::span<const sock_filter> program;
  std::span<const PrebuiltSyscall> denied;  // sorted by name, as SeccompFilter::DeniedSyscalls
  std::span<const char* const> skipped;
  std::span<const char* const> summary;
};

// The table (empty in the generator itself).
std::span<const PrebuiltSeccomp> PrebuiltSeccompFilters();

}  // namespace cagent::launcher
