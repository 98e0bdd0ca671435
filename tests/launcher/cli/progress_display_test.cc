// When `cagent run` redraws its progress line in place (issue #20): on a terminal that can take
// "\r\033[K", never on a dumb one, a pipe or a file, nor when NO_COLOR asks for plain output.
#include <gtest/gtest.h>

#include "launcher/cli/run_command.h"

namespace cagent::launcher::cli {
namespace {

TEST(ProgressRedrawsTest, ATerminalWithATermTypeGetsTheRedrawnLine) {
  // The twin of the cases below: the same call with nothing asking for plain lines redraws.
  EXPECT_TRUE(ProgressRedraws(true, "xterm-256color", nullptr));
  EXPECT_TRUE(ProgressRedraws(true, "xterm", ""));  // NO_COLOR set but empty does not count
}

TEST(ProgressRedrawsTest, PlainLinesForADumbTerminalNoColorOrNoTerminal) {
  EXPECT_FALSE(ProgressRedraws(true, "dumb", nullptr));
  EXPECT_FALSE(ProgressRedraws(true, nullptr, nullptr));  // TERM unset
  EXPECT_FALSE(ProgressRedraws(true, "", nullptr));
  EXPECT_FALSE(ProgressRedraws(true, "xterm", "1"));
  EXPECT_FALSE(ProgressRedraws(false, "xterm", nullptr));  // stderr is a pipe or a file
}

}  // namespace
}  // namespace cagent::launcher::cli
