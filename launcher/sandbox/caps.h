// Capabilities: every set emptied (effective, permitted, inheritable, ambient, bounding), the
// securebits that would let uid 0 regain them locked, and no_new_privs set so that no execve —
// including of a setuid or file-capability binary — can add privilege.
//
// Why all of this inside a user namespace: the sandbox's processes start with every capability
// over their own namespaces (mounts, network config, ptrace of each other, ...). When the caller
// is root the command is uid 0 inside, and a plain execve would hand it the full permitted set
// again; SECBIT_NOROOT plus an empty bounding set stop that.
#pragma once

#include "common/result.h"
#include "launcher/sandbox/child_report.h"

namespace cagent::launcher {

// Prepared in the parent: an all-clear capability state, allocated by libcap before clone.
class CapabilityDrop {
 public:
  static Result<CapabilityDrop> Prepare();
  CapabilityDrop(CapabilityDrop&&) noexcept;
  CapabilityDrop& operator=(CapabilityDrop&&) = delete;
  CapabilityDrop(const CapabilityDrop&) = delete;
  ~CapabilityDrop();

  // Apply-in-child: drops everything. Performs only prctl/capset syscalls on prepared data.
  [[nodiscard]] ChildResult Apply() const;

 private:
  explicit CapabilityDrop(void* empty) : empty_(empty) {}
  void* empty_;  // cap_t
};

}  // namespace cagent::launcher
