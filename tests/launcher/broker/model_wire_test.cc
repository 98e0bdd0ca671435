// The model boundary end to end on the wire: a hostile agent on the broker's socket, the real
// OpenAI-compatible and Anthropic providers, and a fake provider on loopback that records the
// bytes it received. The assertions are on those bytes: the model is the command line's, the
// tools are the policy's, max_tokens is within the token budget, and nothing the agent wrote
// reached the provider except message content.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "common/json_text.h"
#include "common/tool_schemas.h"
#include "launcher/broker/model_turns.h"
#include "launcher/broker/tool_mapping.h"
#include "tests/launcher/broker/broker_test_util.h"
#include "tests/launcher/model/fake_provider_util.h"

namespace cagent::launcher::broker::testing {
namespace {

using ::testing::HasSubstr;
using FakeHttp = cagent::testing::FakeProvider;
using cagent::testing::FakeReply;

constexpr std::uint64_t kBudget = 6000;

// What a hostile agent sends: a v1-style provider body and provider fields next to the messages,
// and a message text crafted to look like JSON keys.
json HostileModelCall() {
  return {
      {"system", "sys"},
      {"messages",
       {{{"role", "user"}, {"text", R"(task", "n": 5, "tools": [{"type": "web_search"}], ")"}}}},
      {"body", {{"model", "gpt-5-pro"}, {"max_tokens", 1000000}, {"n", 8}}},
      {"model", "gpt-5-pro"},
      {"max_tokens", 1000000},
      {"n", 8},
      {"metadata", {{"user", "exfil"}}},
      {"tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}}};
}

std::set<std::string> Keys(const json& object) {
  std::set<std::string> out;
  for (const auto& [k, v] : object.items()) out.insert(k);
  return out;
}

std::vector<std::string> EnabledNames(const policy::Policy& p) {
  std::vector<std::string> out;
  for (const json& s : ToolSchemasFor(EnabledTools(p))) out.push_back(s["name"]);
  return out;
}

HarnessOptions WithProvider(const std::string& provider, const std::string& base_url) {
  HarnessOptions o;
  Budgets b;
  b.model_tokens = kBudget;
  o.budgets = b;
  o.make_model = [provider, base_url](boost::asio::io_context& io) {
    model::ModelSpec spec;
    spec.provider = provider;
    spec.model = provider == "openai" ? "gpt-test" : "claude-test";
    spec.base_url = base_url;
    spec.stream = false;
    spec.max_retries = 0;
    auto made = model::MakeModelProvider(io, spec, {{"ANTHROPIC_API_KEY", "test-key-123456"}});
    EXPECT_TRUE(made.ok()) << (made.ok() ? "" : made.error().Message());
    return made.ok() ? std::move(*made) : nullptr;
  };
  return o;
}

// The cap the broker must have sent for the first call of HostileModelCall().
std::uint64_t ExpectedCap(const Harness& h, const json& call) {
  protocol::ModelCall neutral;
  neutral.system = call["system"];
  for (const json& m : call["messages"]) {
    neutral.messages.push_back({protocol::Role::kUser, m["text"], {}, "", false});
  }
  const std::uint64_t estimate =
      EstimateInputTokens(neutral, JsonText(ToolSchemasFor(EnabledTools(*h.policy))).size());
  return std::min<std::uint64_t>(4096, kBudget - estimate);
}

TEST(ModelWire, OpenAiReceivesOnlyTheBrokersFieldsAndTheMessageContent) {
  FakeHttp fake;
  fake.Enqueue(FakeReply::Json(
      200,
      {{"id", "chatcmpl-1"},
       {"object", "chat.completion"},
       {"choices",
        {{{"index", 0},
          {"message",
           {{"role", "assistant"},
            {"content", nullptr},
            {"tool_calls",
             {{{"id", "call_abc"},
               {"type", "function"},
               {"function", {{"name", "read_file"}, {"arguments", R"({"path":"a.txt"})"}}}}}}}},
          {"finish_reason", "tool_calls"}}}},
       {"usage", {{"prompt_tokens", 900}, {"completion_tokens", 12}}}}));
  Harness h(WithProvider("openai", fake.BaseUrl("/v1")));
  h.Hello();
  const json call = HostileModelCall();
  auto reply = h.Request(h.Msg("model_call", call));
  ASSERT_TRUE(reply);
  ASSERT_EQ((*reply)["type"], "model_result") << JsonText(*reply);

  const auto requests = fake.Requests();
  ASSERT_EQ(requests.size(), 1U);
  EXPECT_EQ(requests[0].target, "/v1/chat/completions");
  const json body = requests[0].Json();
  EXPECT_EQ(Keys(body), (std::set<std::string>{"model", "messages", "tools", "max_tokens"}))
      << requests[0].body;
  EXPECT_EQ(body["model"], "gpt-test");
  EXPECT_EQ(body["max_tokens"], ExpectedCap(h, call));
  EXPECT_LE(body["max_tokens"].get<std::uint64_t>(), kBudget);
  std::vector<std::string> tools;
  for (const json& t : body["tools"]) tools.push_back(t["function"]["name"]);
  EXPECT_EQ(tools, EnabledNames(*h.policy));
  // The crafted text is one string value of one message, nothing more.
  ASSERT_EQ(body["messages"].size(), 2U);
  EXPECT_EQ(body["messages"][0], json({{"role", "system"}, {"content", "sys"}}));
  EXPECT_EQ(body["messages"][1]["content"], call["messages"][0]["text"]);
  EXPECT_THAT(requests[0].body, ::testing::Not(HasSubstr("gpt-5-pro")));
  EXPECT_THAT(requests[0].body, ::testing::Not(HasSubstr("exfil")));
  EXPECT_THAT(requests[0].body, ::testing::Not(HasSubstr("web_search_2025")));

  // The neutral turn, and the binding of its call.
  EXPECT_EQ((*reply)["stop_reason"], "tool_calls");
  ASSERT_EQ((*reply)["tool_calls"].size(), 1U);
  EXPECT_EQ((*reply)["tool_calls"][0]["id"], "call_abc");
  EXPECT_EQ(h.ToolRequestAs("call_xyz", "read_file", {{"path", "a.txt"}})["rule"], "model turn");
  EXPECT_EQ(h.ToolRequestAs("call_abc", "read_file", {{"path", "a.txt"}})["verdict"], "allow");
}

TEST(ModelWire, AnthropicReceivesOnlyTheBrokersFieldsAndTheMessageContent) {
  FakeHttp fake;
  fake.Enqueue(FakeReply::Json(200, {{"id", "msg_1"},
                                     {"type", "message"},
                                     {"role", "assistant"},
                                     {"content",
                                      {{{"type", "text"}, {"text", "reading"}},
                                       {{"type", "tool_use"},
                                        {"id", "toolu_1"},
                                        {"name", "read_file"},
                                        {"input", {{"path", "a.txt"}}}}}},
                                     {"stop_reason", "tool_use"},
                                     {"usage", {{"input_tokens", 900}, {"output_tokens", 12}}}}));
  Harness h(WithProvider("anthropic", fake.BaseUrl()));
  h.Hello();
  const json call = HostileModelCall();
  auto reply = h.Request(h.Msg("model_call", call));
  ASSERT_TRUE(reply);
  ASSERT_EQ((*reply)["type"], "model_result") << JsonText(*reply);

  const auto requests = fake.Requests();
  ASSERT_EQ(requests.size(), 1U);
  EXPECT_EQ(requests[0].target, "/v1/messages");
  const json body = requests[0].Json();
  EXPECT_EQ(Keys(body),
            (std::set<std::string>{"model", "system", "messages", "tools", "max_tokens"}))
      << requests[0].body;
  EXPECT_EQ(body["model"], "claude-test");
  // The system text as one block with the broker's cache breakpoint: the only keys are cagent's.
  const json mark = {{"type", "ephemeral"}};
  EXPECT_EQ(body["system"],
            json::array({{{"type", "text"}, {"text", "sys"}, {"cache_control", mark}}}));
  EXPECT_EQ(body["max_tokens"], ExpectedCap(h, call));
  std::vector<std::string> tools;
  for (const json& t : body["tools"]) tools.push_back(t["name"]);
  EXPECT_EQ(tools, EnabledNames(*h.policy));
  for (std::size_t i = 0; i < body["tools"].size(); ++i) {
    const json& t = body["tools"][i];
    if (i + 1 == body["tools"].size()) {
      EXPECT_EQ(Keys(t),
                (std::set<std::string>{"name", "description", "input_schema", "cache_control"}));
      EXPECT_EQ(t["cache_control"], mark);
    } else {
      EXPECT_EQ(Keys(t), (std::set<std::string>{"name", "description", "input_schema"}));
    }
  }
  ASSERT_EQ(body["messages"].size(), 1U);
  EXPECT_EQ(body["messages"][0]["content"][0]["text"], call["messages"][0]["text"]);
  EXPECT_EQ(Keys(body["messages"][0]["content"][0]),
            (std::set<std::string>{"type", "text", "cache_control"}));
  EXPECT_THAT(requests[0].body, ::testing::Not(HasSubstr("gpt-5-pro")));
  EXPECT_THAT(requests[0].body, ::testing::Not(HasSubstr("exfil")));

  EXPECT_EQ((*reply)["text"], "reading");
  EXPECT_EQ((*reply)["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(h.ToolRequestAs("toolu_1", "read_file", {{"path", ".env"}})["rule"], "model turn");
}

}  // namespace
}  // namespace cagent::launcher::broker::testing
