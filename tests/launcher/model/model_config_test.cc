// models.toml: the subset of TOML cagent reads (every mistake an error with its line and column),
// how an entry is found for --model, and what it does to the model's spec.
#include "launcher/model/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace cagent::launcher::model {
namespace {

using ::testing::HasSubstr;

constexpr const char* kExample = R"(# prices as of the user's contract
[model."anthropic:claude-sonnet-4-5"]
family = "anthropic"
context_window = 200000
max_output_tokens = 16000   # per answer
thinking_budget = 8000
currency = "USD"
input_per_mtok = 3.00
cached_input_per_mtok = 0.30
cache_write_per_mtok = 3.75
output_per_mtok = 15

[model."openai:my-reasoner-*"]
family = "openai-reasoning"
reasoning_effort = "low"

[model."openai:*"]
prompt_caching = false
)";

ModelSpec Spec(const std::string& label) {
  auto spec = ParseModelSpec(label);
  EXPECT_TRUE(spec.ok());
  return *spec;
}

TEST(ModelConfig, ReadsTablesOfKeysAndValues) {
  auto config = ParseModelConfig(kExample, "models.toml");
  ASSERT_TRUE(config.ok()) << config.error().Message();
  ASSERT_EQ(config->entries.size(), 3U);
  const ModelEntry& e = config->entries[0];
  EXPECT_EQ(e.name, "anthropic:claude-sonnet-4-5");
  EXPECT_EQ(e.where, "models.toml:2");
  EXPECT_EQ(e.family, ModelFamily::kAnthropic);
  EXPECT_EQ(e.context_window, 200000U);
  EXPECT_EQ(e.max_output_tokens, 16000U);
  EXPECT_EQ(e.input_per_mtok, 3.0);
  EXPECT_EQ(e.cached_input_per_mtok, 0.30);
  EXPECT_EQ(e.output_per_mtok, 15.0);  // a whole number is a price too
  EXPECT_EQ(config->entries[2].prompt_caching, false);
}

TEST(ModelConfig, TheExactNameBeatsPatternsAndTheLongestPatternWins) {
  auto config = ParseModelConfig(kExample, "models.toml");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->Find("anthropic:claude-sonnet-4-5")->where, "models.toml:2");
  EXPECT_EQ(config->Find("openai:my-reasoner-2")->name, "openai:my-reasoner-*");
  EXPECT_EQ(config->Find("openai:gpt-4.1")->name, "openai:*");
  EXPECT_EQ(config->Find("anthropic:claude-opus-4"), nullptr);
}

TEST(ModelConfig, EveryMistakeIsAnErrorWithItsLineAndColumn) {
  const struct {
    const char* text;
    const char* where;
    const char* says;
  } cases[] = {
      {"input_per_mtok = 3\n", "f:1:", "before any table"},
      {"[model.\"a:b\"]\ninput_per_mtok = \"3\"\n", "f:2:", "must be a number"},
      {"[model.\"a:b\"]\ninput_per_mtk = 3\n", "f:2:", "unknown key input_per_mtk"},
      {"[model.\"a:b\"]\ninput_per_mtok = 3\ninput_per_mtok = 4\n", "f:3:", "set twice"},
      {"[model.\"a:b\"]\n[model.\"a:b\"]\n", "f:2:", "described twice"},
      {"[models.\"a:b\"]\n", "f:1:", "expected a table"},
      {"[model.\"a:b\"\n", "f:1:", "expected ']'"},
      {"[model.\"a:b]\n", "f:1:", "closing quote"},
      {"[model.\"a:b\"]\nfamily = \"gpt\"\n", "f:2:", "is not one of"},
      {"[model.\"a:b\"]\ncurrency = \"usd\"\n", "f:2:", "three capital letters"},
      {"[model.\"a:b\"]\ncontext_window = 1.5\n", "f:2:", "whole number"},
      {"[model.\"a:b\"]\noutput_per_mtok = 1e3\n", "f:2:", "expected a value"},
      {"[model.\"a:b\"]\nprompt_caching = yes\n", "f:2:", "expected a value"},
      {"[model.\"a:b\"]\noutput_per_mtok = 3 4\n", "f:2:", "end of the line"},
      {"[model.\"a:b\"]\nreasoning_effort = \"max\"\n", "f:2:", "minimal, low, medium, high"},
      {"[model.\"a:b\"]\nfamily = \"a\\qb\"\n", "f:2:", "escape"},
  };
  for (const auto& c : cases) {
    auto config = ParseModelConfig(c.text, "f");
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_THAT(config.error().Message(), HasSubstr(c.where)) << c.text;
    EXPECT_THAT(config.error().Message(), HasSubstr(c.says)) << c.text;
  }
}

TEST(ModelConfig, AnEntrySetsTheSpecAndTheCommandLineEffortBeatsIt) {
  auto config = ParseModelConfig(kExample, "models.toml");
  ASSERT_TRUE(config.ok());
  ModelSpec s = Spec("anthropic:claude-sonnet-4-5");
  ASSERT_TRUE(ApplyModelConfig(s, "anthropic:claude-sonnet-4-5", *config, "").ok());
  EXPECT_EQ(s.context_window, 200000U);
  EXPECT_EQ(s.max_output_tokens, 16000U);
  EXPECT_EQ(s.thinking_budget, 8000U);
  ASSERT_TRUE(s.prices);
  EXPECT_EQ(s.prices->currency, "USD");
  EXPECT_EQ(s.prices->cache_write, 3.75);
  EXPECT_EQ(s.config_entry, "models.toml:2");
  ModelSpec high = Spec("anthropic:claude-sonnet-4-5");
  ASSERT_TRUE(ApplyModelConfig(high, "anthropic:claude-sonnet-4-5", *config, "high").ok());
  EXPECT_EQ(high.thinking_budget, 24576U);

  ModelSpec r = Spec("openai:my-reasoner-2");
  EXPECT_EQ(r.family, ModelFamily::kOpenAiChat);  // its name says nothing
  ASSERT_TRUE(ApplyModelConfig(r, "openai:my-reasoner-2", *config, "").ok());
  EXPECT_EQ(r.family, ModelFamily::kOpenAiReasoning);
  EXPECT_EQ(r.reasoning_effort, "low");
  EXPECT_FALSE(r.prices);
}

TEST(ModelConfig, CombinationsTheProviderWouldRefuseAreRefusedFirst) {
  const ModelConfig none;
  ModelSpec chat = Spec("openai:gpt-4.1");
  auto st = ApplyModelConfig(chat, "openai:gpt-4.1", none, "high");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().Message(), HasSubstr("takes no reasoning effort"));

  ModelSpec o3 = Spec("openai:o3");
  o3.temperature = 0.2;
  st = ApplyModelConfig(o3, "openai:o3", none, "");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().Message(), HasSubstr("take no temperature"));

  ModelSpec claude = Spec("anthropic:claude-x");
  claude.temperature = 0.2;
  EXPECT_FALSE(ApplyModelConfig(claude, "anthropic:claude-x", none, "low").ok());

  auto half = ParseModelConfig("[model.\"openai:x\"]\ninput_per_mtok = 1\n", "m");
  ASSERT_TRUE(half.ok());
  ModelSpec x = Spec("openai:x");
  st = ApplyModelConfig(x, "openai:x", *half, "");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().Message(),
              HasSubstr("needs currency, input_per_mtok and output_per_mtok"));

  auto wrong = ParseModelConfig("[model.\"anthropic:x\"]\nfamily = \"openai-chat\"\n", "m");
  ASSERT_TRUE(wrong.ok());
  ModelSpec ax = Spec("anthropic:x");
  EXPECT_FALSE(ApplyModelConfig(ax, "anthropic:x", *wrong, "").ok());
}

TEST(ModelConfig, DefaultFamiliesFollowTheDocumentedList) {
  EXPECT_EQ(DefaultFamily("openai", "o3-mini"), ModelFamily::kOpenAiReasoning);
  EXPECT_EQ(DefaultFamily("openai", "gpt-5-codex"), ModelFamily::kOpenAiReasoning);
  EXPECT_EQ(DefaultFamily("openai", "gpt-4o"), ModelFamily::kOpenAiChat);
  EXPECT_EQ(DefaultFamily("anthropic", "o3"), ModelFamily::kAnthropic);
  EXPECT_EQ(DefaultFamily("replay", "x.jsonl"), ModelFamily::kReplay);
}

TEST(ModelConfig, TheDefaultFileIsOptionalButANamedOneMustExist) {
  char dir[] = "/tmp/cagent-models-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string home = dir;
  auto empty = LoadModelConfig("", {{"HOME", home}});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->entries.empty());
  auto named = LoadModelConfig(home + "/nope.toml", {{"HOME", home}});
  ASSERT_FALSE(named.ok());
  EXPECT_THAT(named.error().Message(), HasSubstr("nope.toml"));
  auto from_env = LoadModelConfig("", {{"CAGENT_MODELS_CONFIG", home + "/missing.toml"}});
  EXPECT_FALSE(from_env.ok());
  auto null = LoadModelConfig("/dev/null", {});
  ASSERT_TRUE(null.ok()) << null.error().Message();
  EXPECT_TRUE(null->entries.empty());
  EXPECT_FALSE(LoadModelConfig("/dev/zero", {}).ok());
  auto directory = LoadModelConfig(home, {});
  ASSERT_FALSE(directory.ok());
  EXPECT_THAT(directory.error().Message(), HasSubstr("not a regular file"));
  ASSERT_EQ(::mkdir((home + "/.config").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((home + "/.config/cagent").c_str(), 0700), 0);
  std::ofstream(home + "/.config/cagent/models.toml") << kExample;
  auto found = LoadModelConfig("", {{"HOME", home}});
  ASSERT_TRUE(found.ok()) << found.error().Message();
  EXPECT_EQ(found->entries.size(), 3U);
  EXPECT_EQ(found->path, home + "/.config/cagent/models.toml");
  std::filesystem::remove_all(home);
}

}  // namespace
}  // namespace cagent::launcher::model
