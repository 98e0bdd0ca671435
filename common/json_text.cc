#include "common/json_text.h"

namespace cagent {

std::string JsonText(const nlohmann::json& value, int indent) noexcept {
  try {
    return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception&) {
    // With error_handler_t::replace dump() has nothing left to throw on; should a future version
    // find something, the caller still gets valid JSON rather than an abort.
    return "null";
  }
}

}  // namespace cagent
