// The options `cagent run` and `cagent agent` share, parsed through CLI11 as the commands do.
#include "launcher/cli/session_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

namespace cagent::launcher::cli {
namespace {

using ::testing::HasSubstr;

// Parses `args` (after the program name) with the session flags registered.
SessionFlags Parse(std::vector<std::string> args) {
  CLI::App app("test");
  SessionFlags flags;
  AddSessionFlags(&app, flags);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
  app.parse(args);
  return flags;
}

class SessionFlagsTest : public ::testing::Test {
 protected:
  // The caller's own models.toml must not change what these tests see.
  void SetUp() override {
    ::unsetenv("CAGENT_MODEL");
    ::setenv("CAGENT_MODELS_CONFIG", "/dev/null", 1);
  }
  void TearDown() override {
    ::unsetenv("CAGENT_MODEL");
    ::unsetenv("CAGENT_MODELS_CONFIG");
  }
};

TEST_F(SessionFlagsTest, ReasoningEffortModelsConfigAndMaxCost) {
  char path[] = "/tmp/cagent-models-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text =
      "[model.\"openai:house-reasoner\"]\nfamily = \"openai-reasoning\"\ncurrency = \"EUR\"\n"
      "input_per_mtok = 1\noutput_per_mtok = 4\n";
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  auto s = ResolveSessionFlags(Parse({"--model", "openai:house-reasoner", "--models-config", path,
                                      "--reasoning-effort", "low", "--max-cost", "0.75EUR"}));
  ASSERT_TRUE(s.ok()) << s.error().Message();
  EXPECT_EQ(s->model.family, model::ModelFamily::kOpenAiReasoning);
  EXPECT_EQ(s->model.reasoning_effort, "low");
  ASSERT_TRUE(s->model.prices);
  EXPECT_EQ(s->model.prices->currency, "EUR");
  ASSERT_TRUE(s->budget_overrides.model_cost);
  EXPECT_EQ(s->budget_overrides.model_cost->micros, 750000U);
  EXPECT_EQ(s->budget_overrides.model_cost->currency, "EUR");
  // The config file's mistakes and a bad amount name what is wrong.
  auto bad = ResolveSessionFlags(Parse({"--model", "openai:x", "--max-cost", "lots"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().Message(), HasSubstr("--max-cost lots"));
  auto chat =
      ResolveSessionFlags(Parse({"--model", "openai:gpt-4.1", "--reasoning-effort", "high"}));
  ASSERT_FALSE(chat.ok());
  EXPECT_THAT(chat.error().Message(), HasSubstr("takes no reasoning effort"));
  auto missing = ResolveSessionFlags(
      Parse({"--model", "openai:x", "--models-config", std::string(path) + ".missing"}));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().Message(), HasSubstr(".missing"));
  ::unlink(path);
}

TEST_F(SessionFlagsTest, AModelIsRequiredAndTheErrorSaysHowToGiveOne) {
  auto s = ResolveSessionFlags(Parse({}));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().Message(), HasSubstr("--model PROVIDER:MODEL"));
  EXPECT_THAT(s.error().Message(), HasSubstr("CAGENT_MODEL"));
}

TEST_F(SessionFlagsTest, TheEnvironmentSuppliesTheModelAndTheFlagWins) {
  ::setenv("CAGENT_MODEL", "openai:from-env", 1);
  auto from_env = ResolveSessionFlags(Parse({}));
  ASSERT_TRUE(from_env.ok()) << from_env.error().Message();
  EXPECT_EQ(from_env->model.provider, "openai");
  EXPECT_EQ(from_env->model_label, "openai:from-env");
  auto flag =
      ResolveSessionFlags(Parse({"--model", "anthropic:m", "--model-url", "http://127.0.0.1:9"}));
  ASSERT_TRUE(flag.ok()) << flag.error().Message();
  EXPECT_EQ(flag->model.provider, "anthropic");
  EXPECT_EQ(flag->model.base_url, "http://127.0.0.1:9");
}

TEST_F(SessionFlagsTest, ApprovalModes) {
  EXPECT_EQ(ResolveSessionFlags(Parse({"--model", "replay:x"}))->approval,
            broker::ApprovalMode::kPolicy);
  EXPECT_EQ(ResolveSessionFlags(Parse({"--model", "replay:x", "--approve", "never"}))->approval,
            broker::ApprovalMode::kNever);
  EXPECT_EQ(ResolveSessionFlags(Parse({"--model", "replay:x", "--approve", "stop"}))->approval,
            broker::ApprovalMode::kStop);
  EXPECT_THROW(Parse({"--approve", "sometimes"}), CLI::ValidationError);
}

TEST_F(SessionFlagsTest, BudgetsAndABadWallTimeNamesTheFlag) {
  auto s = ResolveSessionFlags(Parse(
      {"--model", "replay:x", "--max-turns", "7", "--max-output", "1000", "--wall-time", "90s"}));
  ASSERT_TRUE(s.ok()) << s.error().Message();
  EXPECT_EQ(s->budget_overrides.model_turns, 7U);
  EXPECT_EQ(s->budget_overrides.output_bytes, 1000U);
  EXPECT_EQ(s->budget_overrides.wall_time, std::chrono::milliseconds(90000));
  EXPECT_FALSE(s->budget_overrides.tool_calls.has_value());
  auto bad = ResolveSessionFlags(Parse({"--model", "replay:x", "--wall-time", "soon"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().Message(), HasSubstr("--wall-time soon"));
}

TEST_F(SessionFlagsTest, EveryRefusalIsTheUsersMistake) {
  // The commands turn the code, not the text, into exit status 2 (common/exit_codes.h).
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"--model", "no-such-provider:x"},
      {"--model", "replay:x", "--temperature", "3"},
      {"--model", "replay:x", "--max-output-tokens", "0"},
      {"--model", "replay:x", "--wall-time", "soon"},
  };
  for (const auto& args : bad) {
    auto s = ResolveSessionFlags(Parse(args));
    ASSERT_FALSE(s.ok()) << ::testing::PrintToString(args);
    EXPECT_EQ(s.error().code, Error::Code::kInvalidInput) << s.error().Message();
  }
}

TEST_F(SessionFlagsTest, OnlyPolicyModeOpensTheTerminal) {
  // Whatever stdin is here, never and stop are headless by definition.
  EXPECT_FALSE(OpenApprovalTerminal(broker::ApprovalMode::kNever).valid());
  EXPECT_FALSE(OpenApprovalTerminal(broker::ApprovalMode::kStop).valid());
}

}  // namespace
}  // namespace cagent::launcher::cli
