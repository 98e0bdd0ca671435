#include "launcher/mcp/session.h"

#include <string>
#include <utility>
#include <vector>

namespace cagent::launcher::mcp {

const std::vector<std::string>& SupportedProtocolVersions() {
  static const std::vector<std::string> kVersions = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                     "2024-11-05"};
  return kVersions;
}

ToolResult ToolResult::Text(std::string text, bool is_error) {
  ToolResult result;
  result.content.push_back({{"type", "text"}, {"text", std::move(text)}});
  result.is_error = is_error;
  return result;
}

}  // namespace cagent::launcher::mcp
