// --temperature and --max-output-tokens: parsed through CLI11 as `cagent run` and `cagent agent`
// do, checked by ResolveSessionFlags, and carried into the ModelSpec the broker builds requests
// from.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "launcher/cli/session_flags.h"

namespace cagent::launcher::cli {
namespace {

using ::testing::HasSubstr;

Result<SessionSettings> Resolve(std::vector<std::string> args) {
  ::unsetenv("CAGENT_MODEL");
  CLI::App app("test");
  SessionFlags flags;
  AddSessionFlags(&app, flags);
  args.insert(args.begin(), {"--model", "openai:gpt-4o-mini"});
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
  app.parse(args);
  return ResolveSessionFlags(flags);
}

TEST(SessionModelFlags, UnsetMeansNotSentAndTheDefaultCap) {
  auto s = Resolve({});
  ASSERT_TRUE(s.ok()) << s.error().Message();
  EXPECT_FALSE(s->model.temperature.has_value());
  EXPECT_EQ(s->model.max_output_tokens, 0U);  // 0 = the default (4096)
}

TEST(SessionModelFlags, TemperatureFromZeroToTwo) {
  for (const char* t : {"0", "0.2", "2"}) {
    auto s = Resolve({"--temperature", t});
    ASSERT_TRUE(s.ok()) << t << ": " << s.error().Message();
    ASSERT_TRUE(s->model.temperature.has_value());
    EXPECT_DOUBLE_EQ(*s->model.temperature, std::stod(t));
  }
  for (const char* t : {"-0.1", "2.5", "nan"}) {
    auto s = Resolve({"--temperature", t});
    ASSERT_FALSE(s.ok()) << t;
    EXPECT_THAT(s.error().Message(), HasSubstr("--temperature"));
    EXPECT_THAT(s.error().Message(), HasSubstr("must be a number from 0 to 2"));
  }
}

TEST(SessionModelFlags, MaxOutputTokensFeedsTheSpec) {
  auto s = Resolve({"--max-output-tokens", "1500"});
  ASSERT_TRUE(s.ok()) << s.error().Message();
  EXPECT_EQ(s->model.max_output_tokens, 1500U);
  auto zero = Resolve({"--max-output-tokens", "0"});
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.error().Message(), HasSubstr("--max-output-tokens 0: must be at least 1"));
}

}  // namespace
}  // namespace cagent::launcher::cli
