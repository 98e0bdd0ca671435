// The egress proxy's TLS (launcher/egress/tls.h) from OpenSSL: the sandbox's CA (sandbox_ca.h) and
// interception (intercept.h). A program that intercepts installs it at start:
//   egress::InstallTls(&egress::OpenSslTls());
#pragma once

#include "launcher/egress/tls.h"

namespace cagent::launcher::egress {

// One instance for the program's life.
const Tls& OpenSslTls();

}  // namespace cagent::launcher::egress
