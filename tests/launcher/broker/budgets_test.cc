// Budgets: read from the profile, lowered (never raised) from the command line, counted by the
// broker, and each one ending the run with a reason naming it when exhausted.
#include "launcher/broker/budgets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/json_text.h"
#include "common/tool_schemas.h"
#include "launcher/broker/model_turns.h"
#include "launcher/broker/tool_mapping.h"
#include "policy/language/lowering.h"
#include "tests/launcher/broker/broker_test_util.h"

namespace cagent::launcher::broker::testing {
namespace {

using ::testing::HasSubstr;

TEST(Budgets, FromPolicyLimits) {
  auto p = CompileProfile(R"(extends base
limits {
  model-turns 7
  model-tokens 5000
  tool-calls 9
  wall-time 90s
  total-output 1M
}
)");
  ASSERT_TRUE(p);
  const Budgets b = BudgetsFromPolicy(*p);
  EXPECT_EQ(b.model_turns, 7U);
  EXPECT_EQ(b.model_tokens, 5000U);
  EXPECT_EQ(b.tool_calls, 9U);
  EXPECT_EQ(b.wall_time, std::chrono::milliseconds(90000));
  EXPECT_EQ(b.output_bytes, 1U << 20);
  EXPECT_TRUE(b.tool_calls_by_kind.empty());
}

TEST(Budgets, UnlimitedInTheProfileIsUnbounded) {
  auto p = CompileProfile("extends base\nlimits {\n  model-turns unlimited\n}\n");
  ASSERT_TRUE(p);
  EXPECT_FALSE(BudgetsFromPolicy(*p).model_turns.has_value());
}

TEST(LowerBudgets, LowersButRefusesRaisingNamingTheBudgetAndTheProfileValue) {
  Budgets b;
  b.model_turns = 40;
  b.tool_calls = 100;
  b.wall_time = std::chrono::minutes(30);
  Budgets lower;
  lower.model_turns = 10;
  ASSERT_TRUE(LowerBudgets(b, lower).ok());
  EXPECT_EQ(b.model_turns, 10U);

  Budgets raise;
  raise.tool_calls = 50;                       // fine on its own
  raise.wall_time = std::chrono::minutes(45);  // above the profile's 30m
  const Status s = LowerBudgets(b, raise);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().Message(), HasSubstr("wall-time"));
  EXPECT_THAT(s.error().Message(), HasSubstr("45m"));
  EXPECT_THAT(s.error().Message(), HasSubstr("30m"));
  // Nothing changed, not even the budget that was lowered in the same request.
  EXPECT_EQ(b.tool_calls, 100U);
  EXPECT_EQ(b.wall_time, std::chrono::minutes(30));
}

TEST(LowerBudgets, RaisingTheTurnBudgetIsRefused) {
  Budgets b;
  b.model_turns = 40;
  Budgets raise;
  raise.model_turns = 41;
  const Status s = LowerBudgets(b, raise);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().Message(), HasSubstr("model-turns"));
  EXPECT_THAT(s.error().Message(), HasSubstr("40"));
  EXPECT_EQ(b.model_turns, 40U);
}

TEST(LowerBudgets, AnUnlimitedBudgetMayBeBounded) {
  Budgets b;  // all unlimited
  Budgets req;
  req.model_tokens = 1000;
  req.tool_calls_by_kind["run_command"] = 5;
  ASSERT_TRUE(LowerBudgets(b, req).ok());
  EXPECT_EQ(b.model_tokens, 1000U);
  EXPECT_EQ(b.tool_calls_by_kind.at("run_command"), 5U);
  Budgets raise;
  raise.tool_calls_by_kind["run_command"] = 6;
  EXPECT_FALSE(LowerBudgets(b, raise).ok());
}

TEST(LowerBudgets, TheRefusalIsTheUsersMistakeNamingTheFlagExactly) {
  Budgets b;
  b.model_turns = 40;
  b.output_bytes = 16U << 20;
  Budgets raise;
  raise.model_turns = 41;
  Status s = LowerBudgets(b, raise);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Error::Code::kInvalidInput);
  EXPECT_EQ(s.error().Message(),
            "--max-turns can only lower the profile's limit: 41 asked, but the profile sets "
            "model-turns 40; pass at most 40");
  Budgets output;
  output.output_bytes = 32U << 20;
  s = LowerBudgets(b, output);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().Message(),
            "--max-output can only lower the profile's limit: 32M asked, but the profile sets "
            "total-output 16M; pass at most 16M");
  // Equal is not a raise.
  Budgets same;
  same.model_turns = 40;
  EXPECT_TRUE(LowerBudgets(b, same).ok());
}

TEST(LowerBudgets, GoesThroughTheSameLoweringCheckAsExec) {
  // policy/language/lowering.h is the one "may only lower" rule: exec's limits (narrow_test.cc) and
  // these budgets give the same refusal for the same ceiling.
  Budgets b;
  b.wall_time = std::chrono::minutes(30);
  Budgets raise;
  raise.wall_time = std::chrono::minutes(45);
  const Status s = LowerBudgets(b, raise);
  ASSERT_FALSE(s.ok());
  const Status direct = policy::CheckLowers(
      "--wall-time",
      policy::Ceiling{"wall-time", 30 * 60 * 1000, policy::LimitKind::kDuration, "", ""},
      45 * 60 * 1000);
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(s.error().Message(), direct.error().Message());
  EXPECT_EQ(s.error().code, direct.error().code);
}

TEST(LowerBudgets, APerKindBudgetIsNamedAsTheProfileWritesIt) {
  Budgets b;
  b.tool_calls_by_kind["grep"] = 3;
  Budgets raise;
  raise.tool_calls_by_kind["grep"] = 4;
  const Status s = LowerBudgets(b, raise);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().Message(),
            "budget tool-calls[grep] can only lower the profile's limit: 4 asked, but the profile "
            "sets tool-calls[grep] 3; pass at most 3");
  EXPECT_EQ(b.tool_calls_by_kind.at("grep"), 3U);
}

TEST(BudgetCounter, CountsAndNamesTheBudget) {
  Budgets b;
  b.model_turns = 2;
  b.tool_calls_by_kind["grep"] = 1;
  BudgetCounter c(b);
  EXPECT_FALSE(c.CheckModelCall());
  EXPECT_EQ(c.CountModelTurn(), 1U);
  EXPECT_EQ(c.CountModelTurn(), 2U);
  EXPECT_EQ(c.CheckModelCall(), "model-turn budget (2) reached");
  EXPECT_FALSE(c.CheckToolCall("grep"));
  c.CountToolCall("grep");
  EXPECT_EQ(c.CheckToolCall("grep"), "grep call budget (1) reached");
  EXPECT_FALSE(c.CheckToolCall("read_file"));
  // Invented tool names are counted in the total, never as a kind.
  c.CountToolCall("no_such_tool");
  EXPECT_EQ(c.used().tool_calls, 2U);
  EXPECT_FALSE(c.used().tool_calls_by_kind.contains("no_such_tool"));
}

// ---- through the broker ----

// Expects the reply to be budget_exhausted naming `reason`, then shutdown{failed, reason}, then
// the end of the session with that reason and an audit "budget" entry.
void ExpectBudgetEnd(Harness& h, const std::optional<json>& reply, const std::string& reason) {
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["type"], "error") << reply->dump();
  EXPECT_EQ((*reply)["code"], "budget_exhausted") << reply->dump();
  EXPECT_THAT((*reply)["message"].get<std::string>(), HasSubstr(reason));
  auto shutdown = h.peer->Recv();
  ASSERT_TRUE(shutdown);
  EXPECT_EQ((*shutdown)["type"], "shutdown");
  EXPECT_EQ((*shutdown)["status"], "failed");
  EXPECT_THAT((*shutdown)["reason"].get<std::string>(), HasSubstr(reason));
  ASSERT_TRUE(h.WaitEnded());
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kFailed);
  EXPECT_THAT(h.ended->reason, HasSubstr(reason));
  bool audited = false;
  for (const json& e : h.AuditEntries()) audited = audited || e.value("event", "") == "budget";
  EXPECT_TRUE(audited);
}

HarnessOptions WithBudgets(const Budgets& b) {
  HarnessOptions o;
  o.budgets = b;
  o.loop = LoopLimits{1000, 1000};  // budgets, not loops, are under test
  return o;
}

TEST(BrokerBudgets, ModelTurns) {
  Budgets b;
  b.model_turns = 2;
  Harness h(WithBudgets(b));
  EXPECT_EQ(h.Hello()["max_turns"], 2);
  for (int i = 1; i <= 2; ++i) {
    auto r = h.Request(h.Msg("model_call", {{"system", "s"}, {"messages", json::array()}}));
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)["type"], "model_result");
    EXPECT_EQ((*r)["turn"], i);
    EXPECT_EQ((*r)["max_turns"], 2);
  }
  ExpectBudgetEnd(h, h.Request(h.Msg("model_call", {{"system", "s"}, {"messages", json::array()}})),
                  "model-turn budget (2) reached");
  EXPECT_EQ(h.model.requests.size(), 2U);  // the third call never reached the provider
}

TEST(BrokerBudgets, ModelTurnsFromTheProfile) {
  HarnessOptions o;
  o.profile = std::string(kTestProfile) + "limits {\n  model-turns 1\n}\n";
  Harness h(o);
  h.Hello();
  ASSERT_EQ(
      (*h.Request(h.Msg("model_call", {{"system", "s"}, {"messages", json::array()}})))["type"],
      "model_result");
  ExpectBudgetEnd(h, h.Request(h.Msg("model_call", {{"system", "s"}, {"messages", json::array()}})),
                  "model-turn budget (1) reached");
}

TEST(BrokerBudgets, ModelTokens) {
  // A provider may report more than the call was capped at (input is only estimated before the
  // call): the usage it reports is what counts, and the run ends once it is over the budget.
  const std::uint64_t estimate = EstimateInputTokens(
      protocol::ModelCall{"s", {}},
      JsonText(ToolSchemasFor(EnabledTools(*CompileProfile(kTestProfile)))).size());
  Budgets b;
  b.model_tokens = estimate + 20;
  Harness h(WithBudgets(b));
  h.Hello();
  h.model.Script(
      Turn("ok", {}, protocol::Usage{.input_tokens = estimate + 10, .output_tokens = 15}));
  ExpectBudgetEnd(h, h.Request(h.Msg("model_call", {{"system", "s"}, {"messages", json::array()}})),
                  "model-token budget (" + std::to_string(estimate + 20) + ") exceeded");
  EXPECT_EQ(h.model.requests.size(), 1U);
  EXPECT_EQ(h.model.requests[0].max_tokens, 20U);  // all that was left after the input
}

TEST(BrokerBudgets, ToolCalls) {
  Budgets b;
  b.tool_calls = 2;
  Harness h(WithBudgets(b));
  h.Hello();
  EXPECT_EQ(h.ToolRequest("read_file", {{"path", "a"}})["verdict"], "allow");
  EXPECT_EQ(h.ToolRequest("read_file", {{"path", ".env"}})["verdict"], "deny");  // counts too
  ExpectBudgetEnd(h, h.ToolRequest("list_dir", json::object()), "tool-call budget (2) reached");
}

TEST(BrokerBudgets, ToolCallsByKind) {
  Budgets b;
  b.tool_calls_by_kind["run_command"] = 1;
  Harness h(WithBudgets(b));
  h.Hello();
  EXPECT_EQ(h.ToolRequest("run_command", {{"command", "ls"}})["verdict"], "allow");
  EXPECT_EQ(h.ToolRequest("read_file", {{"path", "a"}})["verdict"], "allow");
  ExpectBudgetEnd(h, h.ToolRequest("run_command", {{"command", "pwd"}}),
                  "run_command call budget (1) reached");
}

TEST(BrokerBudgets, OutputBytes) {
  Budgets b;
  b.output_bytes = 10;
  Harness h(WithBudgets(b));
  h.Hello();
  const json first = h.ToolRequest("read_file", {{"path", "a"}});
  EXPECT_EQ(h.ToolResult(first["id"], true, "0123456789")["type"], "result_ack");  // exactly 10
  const json second = h.ToolRequest("read_file", {{"path", "b"}});
  ExpectBudgetEnd(
      h,
      h.Request(h.Msg("tool_result", {{"request", second["id"]}, {"ok", true}, {"output", "x"}})),
      "output budget (10) exceeded");
}

// Prices as a models.toml entry gives them: USD per million tokens.
TokenPrices Prices() {
  TokenPrices p;
  p.currency = "USD";
  p.input = 3.0;
  p.cached_input = 0.30;
  p.cache_write = 3.75;
  p.output = 15.0;
  return p;
}

TEST(Budgets, ModelCostFromTheProfileAndLoweredFromTheCommandLine) {
  auto p = CompileProfile("extends base\nlimits {\n  model-cost 2.50 USD\n}\n");
  ASSERT_TRUE(p);
  Budgets b = BudgetsFromPolicy(*p);
  ASSERT_TRUE(b.model_cost);
  EXPECT_EQ(b.model_cost->micros, 2500000U);
  EXPECT_EQ(b.model_cost->currency, "USD");

  Budgets lower;
  lower.model_cost = Money{500000, ""};  // --max-cost 0.50: the profile's currency
  ASSERT_TRUE(LowerBudgets(b, lower).ok());
  EXPECT_EQ(b.model_cost->micros, 500000U);
  EXPECT_EQ(b.model_cost->currency, "USD");

  Budgets raise;
  raise.model_cost = Money{3000000, "USD"};
  const Status s = LowerBudgets(b, raise);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().Message(), HasSubstr("--max-cost can only lower the profile's limit"));
  EXPECT_THAT(s.error().Message(), HasSubstr("3.00 USD asked"));
  EXPECT_THAT(s.error().Message(), HasSubstr("pass at most 0.50 USD"));

  Budgets other;
  other.model_cost = Money{100000, "EUR"};
  const Status eur = LowerBudgets(b, other);
  ASSERT_FALSE(eur.ok());
  EXPECT_THAT(eur.error().Message(), HasSubstr("is in USD"));
}

TEST(Budgets, ACostBudgetNeedsPricesInItsCurrency) {
  Budgets b;
  b.model_cost = Money{1000000, ""};
  const Status none = CheckCostBudget(b, std::nullopt, "openai:gpt-4.1");
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.error().Message(), HasSubstr("needs openai:gpt-4.1's prices"));
  EXPECT_THAT(none.error().Message(), HasSubstr("[model.\"openai:gpt-4.1\"]"));
  ASSERT_TRUE(CheckCostBudget(b, Prices(), "openai:gpt-4.1").ok());
  EXPECT_EQ(b.model_cost->currency, "USD");  // taken from the prices
  TokenPrices eur = Prices();
  eur.currency = "EUR";
  EXPECT_FALSE(CheckCostBudget(b, eur, "openai:gpt-4.1").ok());
  Budgets unbounded;
  EXPECT_TRUE(CheckCostBudget(unbounded, std::nullopt, "openai:gpt-4.1").ok());
}

TEST(BudgetCounter, CostsEachKindOfTokenAtItsPrice) {
  Budgets b;
  b.model_cost = Money{1000000, "USD"};
  BudgetCounter c(b, Prices());
  protocol::Usage u;
  u.input_tokens = 10000;  // of which 6000 read from the cache and 2000 written to it
  u.cache_read_tokens = 6000;
  u.cache_write_tokens = 2000;
  u.output_tokens = 1000;
  EXPECT_FALSE(c.AddTokens(u));
  // 2000 * 3 + 6000 * 0.30 + 2000 * 3.75 + 1000 * 15 micro-dollars.
  EXPECT_EQ(c.used().cost_micros, 6000U + 1800U + 7500U + 15000U);
  EXPECT_EQ(c.used().currency, "USD");
  EXPECT_EQ(c.used().cache_read_tokens, 6000U);
  EXPECT_EQ(c.used().cache_write_tokens, 2000U);
}

TEST(BudgetCounter, TheOutputCapKeepsTheWorstCaseWithinTheMoneyLeft) {
  Budgets b;
  b.model_cost = Money{10000, "USD"};  // 0.01 USD
  BudgetCounter c(b, Prices());
  std::string why;
  // 1000 tokens of input cost at most 1000 * 3.75 = 3750 micros; 6250 are left for output at 15
  // each: 416 tokens.
  EXPECT_EQ(c.OutputCap(4096, 1000, &why), 416U);
  // Input alone over what is left: the call is not made.
  const auto refused = c.OutputCap(4096, 3000, &why);
  EXPECT_FALSE(refused);
  EXPECT_THAT(why, HasSubstr("model-cost budget (0.01 USD) reached"));
  EXPECT_THAT(why, HasSubstr("0.01 USD left"));
  // Without prices there is nothing to count against (CheckCostBudget refuses such a run).
  BudgetCounter unpriced(Budgets{});
  EXPECT_EQ(unpriced.OutputCap(4096, 3000, &why), 4096U);
}

TEST(BrokerBudgets, ModelCostStopsTheRunBeforeTheCallThatWouldOverrunIt) {
  const std::uint64_t estimate = EstimateInputTokens(
      protocol::ModelCall{"s", {}},
      JsonText(ToolSchemasFor(EnabledTools(*CompileProfile(kTestProfile)))).size());
  Budgets b;
  b.model_cost = Money{10000, "USD"};  // 0.01 USD
  HarnessOptions o = WithBudgets(b);
  o.prices = Prices();
  Harness h(o);
  h.Hello();
  // The first call fits and spends 0.006 USD (2000 input tokens, no output).
  h.model.Script(Turn("ok", {}, protocol::Usage{.input_tokens = 2000, .output_tokens = 0}));
  auto first = h.Request(h.Msg("model_call", {{"system", "s"}, {"messages", json::array()}}));
  ASSERT_TRUE(first);
  EXPECT_EQ((*first)["type"], "model_result");
  ASSERT_EQ(h.model.requests.size(), 1U);
  const std::uint64_t left = 10000 - static_cast<std::uint64_t>(estimate * 3.75 + 0.999);
  EXPECT_EQ(h.model.requests[0].max_tokens, left / 15);
  // 0.004 USD left; the next call's input alone may cost more than that.
  std::string big(4 * 2000, 'x');
  ExpectBudgetEnd(
      h,
      h.Request(h.Msg("model_call",
                      {{"system", "s"}, {"messages", {{{"role", "user"}, {"text", big}}}}})),
      "model-cost budget (0.01 USD) reached");
  EXPECT_EQ(h.model.requests.size(), 1U);  // the second call never reached the provider
  bool costed = false;
  for (const json& e : h.AuditEntries()) {
    if (e.value("event", "") == "model_result") {
      costed = e["detail"].value("cost", "") == "0.006 USD";
    }
  }
  EXPECT_TRUE(costed);
}

TEST(BrokerBudgets, WallTime) {
  Budgets b;
  b.wall_time = std::chrono::milliseconds(200);
  Harness h(WithBudgets(b));
  h.Hello();
  auto shutdown = h.peer->Recv(std::chrono::milliseconds(10000));
  ASSERT_TRUE(shutdown);
  EXPECT_EQ((*shutdown)["type"], "shutdown");
  EXPECT_EQ((*shutdown)["status"], "failed");
  EXPECT_EQ((*shutdown)["reason"], "wall-time budget (200ms) reached");
  ASSERT_TRUE(h.WaitEnded());
  EXPECT_EQ(h.ended->status, BrokerOutcome::Status::kFailed);
  EXPECT_EQ(h.ended->reason, "wall-time budget (200ms) reached");
  bool audited = false;
  for (const json& e : h.AuditEntries()) audited = audited || e.value("event", "") == "budget";
  EXPECT_TRUE(audited);
}

}  // namespace
}  // namespace cagent::launcher::broker::testing
