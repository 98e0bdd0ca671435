#include "launcher/egress/tls.h"

#include <atomic>

namespace cagent::launcher::egress {
namespace {

std::atomic<const Tls*> installed{nullptr};

}  // namespace

void InstallTls(const Tls* tls) { installed.store(tls, std::memory_order_release); }

const Tls* InstalledTls() { return installed.load(std::memory_order_acquire); }

}  // namespace cagent::launcher::egress
