// The generator's own table: empty, so SeccompFilter::Prepare compiles every policy there.
#include "launcher/sandbox/seccomp_prebuilt.h"

namespace cagent::launcher {

std::span<const PrebuiltSeccomp> PrebuiltSeccompFilters() { return {}; }

}  // namespace cagent::launcher
