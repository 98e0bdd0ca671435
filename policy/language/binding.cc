#include "policy/language/binding.h"

namespace cagent::policy {

Binding PortableBinding() { return Binding{"/workspace", "/home/user", "/home/cagent"}; }

}  // namespace cagent::policy
