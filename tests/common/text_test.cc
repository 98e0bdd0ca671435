#include "common/text.h"

#include <gtest/gtest.h>

namespace cagent {
namespace {

TEST(TrimSpace, RemovesAsciiWhitespaceAtBothEndsOnly) {
  EXPECT_EQ(TrimSpace("  max 100\n"), "max 100");
  EXPECT_EQ(TrimSpace("\r\n\tyes\r\n"), "yes");  // a terminal answer typed with CR LF
  EXPECT_EQ(TrimSpace("a \t b"), "a \t b");      // inner whitespace is kept
  EXPECT_EQ(TrimSpace(" \t\r\n"), "");
  EXPECT_EQ(TrimSpace(""), "");
  EXPECT_EQ(TrimSpace("\vx\f"), "\vx\f");  // only space, tab, CR and LF count
}

}  // namespace
}  // namespace cagent
