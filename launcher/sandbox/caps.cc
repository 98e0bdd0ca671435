#include "launcher/sandbox/caps.h"

#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include <utility>

namespace cagent::launcher {

Result<CapabilityDrop> CapabilityDrop::Prepare() {
  cap_t empty = cap_init();  // every flag of every capability clear
  if (empty == nullptr) return ErrnoError("cap_init");
  return CapabilityDrop(empty);
}

CapabilityDrop::CapabilityDrop(CapabilityDrop&& other) noexcept
    : empty_(std::exchange(other.empty_, nullptr)) {}

CapabilityDrop::~CapabilityDrop() {
  if (empty_ != nullptr) cap_free(empty_);
}

ChildResult CapabilityDrop::Apply() const {
  // Bounding set first: it caps what any later execve can grant. Needs CAP_SETPCAP, which we
  // still hold. cap_max_bits() is what this kernel knows, not what libcap was built with.
  const int max = static_cast<int>(cap_max_bits());
  for (int cap = 0; cap < max; ++cap) {
    if (cap_drop_bound(static_cast<cap_value_t>(cap)) != 0 && errno != EINVAL) {
      return ChildResult::Failure(ChildStep::kDropCapabilities, errno, cap);
    }
  }
  // Lock uid-0 semantics off: no capabilities for root on execve, none kept across setuid, and
  // ambient capabilities can never be raised again.
  const unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                        SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                        SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  if (cap_set_secbits(bits) != 0) {
    return ChildResult::Failure(ChildStep::kDropCapabilities, errno, -2);
  }
  if (cap_reset_ambient() != 0 && errno != EINVAL) {
    return ChildResult::Failure(ChildStep::kDropCapabilities, errno, -3);
  }
  if (cap_set_proc(static_cast<cap_t>(empty_)) != 0) {
    return ChildResult::Failure(ChildStep::kDropCapabilities, errno, -4);
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return ChildResult::Failure(ChildStep::kNoNewPrivs, errno);
  }
  return ChildResult::Success();
}

}  // namespace cagent::launcher
