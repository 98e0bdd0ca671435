#include "launcher/mcp/session.h"

#include <gtest/gtest.h>

namespace cagent::launcher::mcp {
namespace {

TEST(McpVersionsTest, NewestRevisionOfTheOfficialSdkComesFirst) {
  ASSERT_FALSE(SupportedProtocolVersions().empty());
  EXPECT_EQ(SupportedProtocolVersions().front(), "2025-11-25");
}

}  // namespace
}  // namespace cagent::launcher::mcp
