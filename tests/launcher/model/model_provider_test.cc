// The model module against a local fake provider: both wire formats, streamed and not, the
// request bodies built from the broker's ModelRequest (asserted on the bytes the fake recorded),
// the neutral turns parsed from the answers, retries, failures, credentials, TLS, and the replay
// provider.

#include "launcher/model/model_provider.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/json_text.h"
#include "launcher/model/anthropic_provider.h"
#include "launcher/model/http_model_provider.h"
#include "launcher/model/openai_provider.h"
#include "launcher/model/replay_provider.h"
#include "tests/launcher/model/fake_provider_util.h"

namespace cagent::launcher::model {
namespace {

using cagent::testing::AnthropicStream;
using cagent::testing::FakeProvider;
using cagent::testing::FakeReply;
using cagent::testing::MakeTestPki;
using cagent::testing::OpenAiStream;
using cagent::testing::SplitPieces;
using cagent::testing::TestPki;
using nlohmann::json;
using protocol::ErrorCode;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kOpenAiKey = "sk-test-OPENAI-SECRET-0123456789";
constexpr const char* kAnthropicKey = "sk-ant-test-ANTHROPIC-SECRET-9876543210";

// Collects every formatted log line.
class CaptureSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> lines;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    lines.emplace_back(buf.data(), buf.size());
  }
  void flush_() override {}
};

class ModelProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_logger_ = spdlog::default_logger();
    sink_ = std::make_shared<CaptureSink>();
    auto logger = std::make_shared<spdlog::logger>("capture", sink_);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
    env_ = {{"OPENAI_API_KEY", kOpenAiKey}, {"ANTHROPIC_API_KEY", kAnthropicKey}};
  }

  void TearDown() override {
    // No log line ever carries a credential.
    for (const std::string& line : sink_->lines) {
      EXPECT_THAT(line, Not(HasSubstr(kOpenAiKey)));
      EXPECT_THAT(line, Not(HasSubstr(kAnthropicKey)));
      EXPECT_THAT(line, Not(HasSubstr("SECRET")));
    }
    spdlog::set_default_logger(previous_logger_);
  }

  ModelSpec OpenAiSpec(const std::string& model = "gpt-4o-mini") const {
    ModelSpec spec;
    spec.provider = "openai";
    spec.model = model;
    spec.base_url = server_.BaseUrl("/v1");
    spec.retry_initial_backoff = std::chrono::milliseconds(1);
    spec.request_timeout = std::chrono::seconds(10);
    return spec;
  }

  ModelSpec AnthropicSpec(const std::string& model = "claude-sonnet-4-5") const {
    ModelSpec spec = OpenAiSpec(model);
    spec.provider = "anthropic";
    spec.base_url = server_.BaseUrl();
    return spec;
  }

  std::unique_ptr<ModelProvider> Make(const ModelSpec& spec) {
    auto p = MakeModelProvider(io_, spec, env_);
    EXPECT_TRUE(p.ok()) << p.error().Message();
    return p.ok() ? std::move(*p) : nullptr;
  }

  // One call, run to completion on the test's io_context.
  std::optional<ModelOutcome> CallOnce(ModelProvider& provider, ModelRequest request) {
    std::optional<ModelOutcome> out;
    int calls = 0;
    provider.Call(std::move(request), [&](ModelOutcome o) {
      ++calls;
      out = std::move(o);
    });
    io_.restart();
    io_.run_for(std::chrono::seconds(30));
    EXPECT_LE(calls, 1);
    return out;
  }

  ModelResponse ExpectResponse(const std::optional<ModelOutcome>& out) {
    if (!out) {
      ADD_FAILURE() << "no outcome";
      return {};
    }
    if (const auto* err = std::get_if<ModelError>(&*out)) {
      ADD_FAILURE() << "model error: " << err->message;
      return {};
    }
    return std::get<ModelResponse>(*out);
  }

  ModelError ExpectError(const std::optional<ModelOutcome>& out) {
    if (!out) {
      ADD_FAILURE() << "no outcome";
      return {};
    }
    if (const auto* err = std::get_if<ModelError>(&*out)) {
      EXPECT_THAT(err->message, Not(HasSubstr(kOpenAiKey)));
      EXPECT_THAT(err->message, Not(HasSubstr(kAnthropicKey)));
      return *err;
    }
    ADD_FAILURE() << "expected an error, got " << JsonText(std::get<ModelResponse>(*out).raw);
    return {};
  }

  // What the broker would ask: a system text, the task, one tool, an output cap.
  static ModelRequest SimpleRequest() {
    ModelRequest r;
    r.system = "be careful";
    r.messages.push_back(
        protocol::ChatMessage{protocol::Role::kUser, "fix the test", {}, "", false});
    r.tools = json::array({{{"name", "read_file"},
                            {"description", "Read a file"},
                            {"parameters", {{"type", "object"}}}}});
    r.max_tokens = 1000;
    return r;
  }

  bool LogsContain(const std::string& needle) const {
    for (const auto& l : sink_->lines) {
      if (l.find(needle) != std::string::npos) return true;
    }
    return false;
  }

  FakeProvider server_;
  boost::asio::io_context io_;
  Environment env_;
  std::shared_ptr<CaptureSink> sink_;
  std::shared_ptr<spdlog::logger> previous_logger_;
};

json OpenAiChunk(const json& delta, const json& finish_reason = nullptr) {
  return {{"id", "chatcmpl-42"},
          {"object", "chat.completion.chunk"},
          {"created", 1700000000},
          {"model", "gpt-4o-mini-2024-07-18"},
          {"choices", {{{"index", 0}, {"delta", delta}, {"finish_reason", finish_reason}}}}};
}

json OpenAiUsageChunk(int prompt, int completion) {
  return {{"id", "chatcmpl-42"},
          {"object", "chat.completion.chunk"},
          {"model", "gpt-4o-mini-2024-07-18"},
          {"choices", json::array()},
          {"usage",
           {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion}}}};
}

json ToolFragment(int index, const std::string& args, const std::string& id = "",
                  const std::string& name = "") {
  json call = {{"index", index}, {"function", {{"arguments", args}}}};
  if (!id.empty()) {
    call["id"] = id;
    call["type"] = "function";
    call["function"]["name"] = name;
  }
  return call;
}

// ---- OpenAI-compatible ----

TEST_F(ModelProviderTest, OpenAiStreamedTextIsAssembledAndTheRequestCompleted) {
  server_.Enqueue(OpenAiStream(
      {OpenAiChunk({{"role", "assistant"}, {"content", ""}}), OpenAiChunk({{"content", "Hello"}}),
       OpenAiChunk({{"content", ", wor"}}), OpenAiChunk({{"content", "ld"}}),
       OpenAiChunk(json::object(), "stop"), OpenAiUsageChunk(120, 3)}));
  auto provider = Make(OpenAiSpec());
  ASSERT_TRUE(provider);
  const ModelResponse r = ExpectResponse(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(r.raw["object"], "chat.completion");
  EXPECT_EQ(r.raw["id"], "chatcmpl-42");
  EXPECT_EQ(r.raw["model"], "gpt-4o-mini-2024-07-18");
  ASSERT_EQ(r.raw["choices"].size(), 1U);
  EXPECT_EQ(r.raw["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r.raw["choices"][0]["message"]["content"], "Hello, world");
  EXPECT_FALSE(r.raw["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(r.raw["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r.raw["usage"],
            json({{"prompt_tokens", 120}, {"completion_tokens", 3}, {"total_tokens", 123}}));
  EXPECT_EQ(r.usage.input_tokens, 120U);
  EXPECT_EQ(r.usage.output_tokens, 3U);
  EXPECT_EQ(r.turn.text, "Hello, world");
  EXPECT_TRUE(r.turn.tool_calls.empty());
  EXPECT_EQ(r.turn.stop_reason, protocol::StopReason::kEnd);
  EXPECT_EQ(r.provider_stop_reason, "stop");

  const auto requests = server_.Requests();
  ASSERT_EQ(requests.size(), 1U);
  const auto& req = requests[0];
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.target, "/v1/chat/completions");
  EXPECT_EQ(req.Header("authorization"), std::string("Bearer ") + kOpenAiKey);
  EXPECT_EQ(req.Header("content-type"), "application/json");
  EXPECT_EQ(req.Header("accept"), "text/event-stream");
  const json sent = req.Json();
  EXPECT_EQ(sent["model"], "gpt-4o-mini");  // the broker's choice, not the agent's
  EXPECT_EQ(sent["stream"], true);
  EXPECT_EQ(sent["stream_options"], json({{"include_usage", true}}));
  EXPECT_EQ(sent["messages"], json::parse(R"([{"role": "system", "content": "be careful"},
                                                {"role": "user", "content": "fix the test"}])"));
  EXPECT_EQ(sent["max_tokens"], 1000);
  ASSERT_EQ(sent["tools"].size(), 1U);
  EXPECT_EQ(sent["tools"][0]["function"]["name"], "read_file");
}

TEST_F(ModelProviderTest, OpenAiToolCallFragmentsAreJoinedByIndex) {
  // Two calls whose pieces interleave; each chunk is also split into 7-byte writes.
  server_.Enqueue(SplitPieces(
      OpenAiStream({
          OpenAiChunk({{"role", "assistant"}, {"content", nullptr}}),
          OpenAiChunk({{"tool_calls", {ToolFragment(0, "", "call_a", "read_file")}}}),
          OpenAiChunk({{"tool_calls", {ToolFragment(1, "", "call_b", "run_command")}}}),
          OpenAiChunk({{"tool_calls", {ToolFragment(0, "{\"pa")}}}),
          OpenAiChunk({{"tool_calls", {ToolFragment(1, "{\"command\": \"pyt")}}}),
          OpenAiChunk({{"tool_calls", {ToolFragment(0, "th\": \"calc.py\"}")}}}),
          OpenAiChunk({{"tool_calls", {ToolFragment(1, "est -q\"}"), ToolFragment(0, "")}}}),
          OpenAiChunk(json::object(), "tool_calls"),
          OpenAiUsageChunk(50, 20),
      }),
      7));
  auto provider = Make(OpenAiSpec());
  const ModelResponse r = ExpectResponse(CallOnce(*provider, SimpleRequest()));
  const json& message = r.raw["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  ASSERT_EQ(message["tool_calls"].size(), 2U);
  const json& a = message["tool_calls"][0];
  const json& b = message["tool_calls"][1];
  EXPECT_EQ(a["id"], "call_a");
  EXPECT_EQ(a["type"], "function");
  EXPECT_EQ(a["function"]["name"], "read_file");
  EXPECT_EQ(a["function"]["arguments"], "{\"path\": \"calc.py\"}");
  EXPECT_EQ(json::parse(a["function"]["arguments"].get<std::string>()),
            json({{"path", "calc.py"}}));
  EXPECT_EQ(b["id"], "call_b");
  EXPECT_EQ(b["function"]["name"], "run_command");
  EXPECT_EQ(json::parse(b["function"]["arguments"].get<std::string>()),
            json({{"command", "pytest -q"}}));
  EXPECT_EQ(r.raw["choices"][0]["finish_reason"], "tool_calls");
  // The neutral turn the agent gets.
  ASSERT_EQ(r.turn.tool_calls.size(), 2U);
  EXPECT_EQ(r.turn.tool_calls[0].id, "call_a");
  EXPECT_EQ(r.turn.tool_calls[0].name, "read_file");
  EXPECT_EQ(r.turn.tool_calls[0].arguments, json({{"path", "calc.py"}}));
  EXPECT_EQ(r.turn.tool_calls[1].arguments, json({{"command", "pytest -q"}}));
  EXPECT_EQ(r.turn.stop_reason, protocol::StopReason::kToolCalls);
  EXPECT_EQ(r.usage.input_tokens, 50U);
  EXPECT_EQ(r.usage.output_tokens, 20U);
}

TEST_F(ModelProviderTest, OpenAiNonStreamingReturnsTheBodyAsReceived) {
  const json answer = {
      {"id", "chatcmpl-9"},
      {"object", "chat.completion"},
      {"model", "gpt-4o-mini"},
      {"choices",
       {{{"index", 0},
         {"message",
          {{"role", "assistant"},
           {"content", nullptr},
           {"tool_calls",
            {{{"id", "c1"},
              {"type", "function"},
              {"function", {{"name", "list_dir"}, {"arguments", "{\"path\":\".\"}"}}}}}}}},
         {"finish_reason", "tool_calls"}}}},
      {"usage", {{"prompt_tokens", 11}, {"completion_tokens", 2}, {"total_tokens", 13}}},
      {"system_fingerprint", "fp_x"}};
  server_.Enqueue(FakeReply::Json(200, answer));
  ModelSpec spec = OpenAiSpec();
  spec.stream = false;
  auto provider = Make(spec);
  const ModelResponse r = ExpectResponse(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(r.raw, answer);
  ASSERT_EQ(r.turn.tool_calls.size(), 1U);
  EXPECT_EQ(r.turn.tool_calls[0].id, "c1");
  EXPECT_EQ(r.turn.tool_calls[0].arguments, json({{"path", "."}}));
  EXPECT_EQ(r.usage.input_tokens, 11U);
  EXPECT_EQ(r.usage.output_tokens, 2U);
  const json sent = server_.Requests().at(0).Json();
  EXPECT_FALSE(sent.contains("stream"));
  EXPECT_FALSE(sent.contains("stream_options"));
  EXPECT_EQ(server_.Requests().at(0).Header("accept"), "application/json");
}

TEST_F(ModelProviderTest, OpenAiStreamRequestAnsweredWithPlainJsonIsAccepted) {
  // Some local servers ignore "stream": they answer application/json.
  auto provider = Make(OpenAiSpec());
  server_.Enqueue(FakeReply::Json(
      200, {{"choices", {{{"message", {{"role", "assistant"}, {"content", "plain"}}}}}}}));
  const ModelResponse r = ExpectResponse(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(r.raw["choices"][0]["message"]["content"], "plain");
}

TEST_F(ModelProviderTest, OpenAiDefaultAnswerOfTheFakeRoundTripsBothModes) {
  for (const bool stream : {true, false}) {
    ModelSpec spec = OpenAiSpec();
    spec.stream = stream;
    auto provider = Make(spec);
    const ModelResponse r = ExpectResponse(CallOnce(*provider, SimpleRequest()));
    EXPECT_EQ(r.raw["choices"][0]["message"]["content"], "Hello from the fake") << stream;
    EXPECT_EQ(r.usage.input_tokens, 7U);
    EXPECT_EQ(r.usage.output_tokens, 4U);
  }
}

// Ids bind the agent's tool requests to the model's calls: a provider that omits or repeats them
// still yields ids unique in the turn, and generated ones never repeat across a provider's calls.
TEST_F(ModelProviderTest, OpenAiCallsWithoutUsableIdsGetGeneratedOnesAcrossCalls) {
  const json no_ids = OpenAiChunk(
      {{"tool_calls",
        {{{"index", 0}, {"function", {{"name", "glob"}, {"arguments", "{}"}}}},
         {{"index", 1}, {"id", "dup"}, {"function", {{"name", "glob"}, {"arguments", "{}"}}}},
         {{"index", 2}, {"id", "dup"}, {"function", {{"name", "grep"}, {"arguments", "{}"}}}},
         {{"index", 3},
          {"id", std::string(300, 'x')},
          {"function", {{"name", "list_dir"}, {"arguments", "{}"}}}}}}});
  server_.Enqueue(OpenAiStream({no_ids, OpenAiChunk(json::object(), "tool_calls")}));
  server_.Enqueue(OpenAiStream({no_ids, OpenAiChunk(json::object(), "tool_calls")}));
  auto provider = Make(OpenAiSpec());
  std::set<std::string> all;
  for (int call = 0; call < 2; ++call) {
    const ModelResponse r = ExpectResponse(CallOnce(*provider, SimpleRequest()));
    ASSERT_EQ(r.turn.tool_calls.size(), 4U);
    EXPECT_EQ(r.turn.tool_calls[1].id, "dup");
    std::set<std::string> in_turn;
    for (const auto& c : r.turn.tool_calls) {
      EXPECT_FALSE(c.id.empty());
      EXPECT_LE(c.id.size(), protocol::kMaxIdBytes);
      in_turn.insert(c.id);
      if (c.id != "dup") {
        EXPECT_TRUE(all.insert(c.id).second) << c.id << " was generated twice";
      }
    }
    EXPECT_EQ(in_turn.size(), 4U);
  }
}

TEST_F(ModelProviderTest, TooManyToolCallsIsAProviderErrorNotRetried) {
  json calls = json::array();
  for (std::size_t i = 0; i <= protocol::kMaxToolCallsPerTurn; ++i) {
    calls.push_back({{"id", "c" + std::to_string(i)},
                     {"type", "function"},
                     {"function", {{"name", "glob"}, {"arguments", "{}"}}}});
  }
  server_.Enqueue(
      FakeReply::Json(200, {{"choices",
                             {{{"message", {{"role", "assistant"}, {"tool_calls", calls}}},
                               {"finish_reason", "tool_calls"}}}}}));
  ModelSpec spec = OpenAiSpec();
  spec.stream = false;
  auto provider = Make(spec);
  const ModelError e = ExpectError(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(e.code, ErrorCode::kProviderError);
  EXPECT_THAT(e.message, HasSubstr("513 tool calls (at most 512"));
  EXPECT_EQ(server_.Requests().size(), 1U);

  json blocks = json::array();
  for (std::size_t i = 0; i <= protocol::kMaxToolCallsPerTurn; ++i) {
    blocks.push_back({{"type", "tool_use"},
                      {"id", "t" + std::to_string(i)},
                      {"name", "glob"},
                      {"input", json::object()}});
  }
  server_.Enqueue(FakeReply::Json(
      200, {{"type", "message"}, {"content", blocks}, {"stop_reason", "tool_use"}}));
  ModelSpec a = AnthropicSpec();
  a.stream = false;
  auto anthropic = Make(a);
  EXPECT_THAT(ExpectError(CallOnce(*anthropic, SimpleRequest())).message,
              HasSubstr("more than 512 tool calls"));
}

TEST_F(ModelProviderTest, OpenAiKeyIsRequiredExceptForLoopbackHttp) {
  env_.erase("OPENAI_API_KEY");
  ModelSpec remote = OpenAiSpec();
  remote.base_url = "";  // the default, https://api.openai.com/v1
  auto missing = MakeModelProvider(io_, remote, env_);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().Message(), HasSubstr("OPENAI_API_KEY is not set"));

  env_["OPENAI_API_KEY"] = "";
  EXPECT_FALSE(MakeModelProvider(io_, remote, env_).ok());

  // A local server (http://127.0.0.1) needs no key; no Authorization header is sent.
  auto local = Make(OpenAiSpec());
  ASSERT_TRUE(local);
  ExpectResponse(CallOnce(*local, SimpleRequest()));
  EXPECT_EQ(server_.Requests().at(0).Header("authorization"), "");
}

TEST_F(ModelProviderTest, OpenAiBaseUrlComesFromTheEnvironmentWhenTheSpecHasNone) {
  ModelSpec spec = OpenAiSpec();
  spec.base_url.clear();
  env_["OPENAI_BASE_URL"] = server_.BaseUrl("/custom/v1/");
  auto provider = Make(spec);
  ExpectResponse(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(server_.Requests().at(0).target, "/custom/v1/chat/completions");

  env_["OPENAI_BASE_URL"] = "ftp://nope";
  auto bad = MakeModelProvider(io_, spec, env_);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().Message(), HasSubstr("OPENAI_BASE_URL"));
}

// ---- Anthropic ----

TEST_F(ModelProviderTest, AnthropicStreamedTextAndToolUseAreAssembled) {
  server_.Enqueue(SplitPieces(
      AnthropicStream({
          {{"type", "message_start"},
           {"message",
            {{"id", "msg_01"},
             {"type", "message"},
             {"role", "assistant"},
             {"model", "claude-sonnet-4-5-20250929"},
             {"content", json::array()},
             {"stop_reason", nullptr},
             {"usage", {{"input_tokens", 812}, {"output_tokens", 1}}}}}},
          {{"type", "content_block_start"},
           {"index", 0},
           {"content_block", {{"type", "text"}, {"text", ""}}}},
          {{"type", "ping"}},
          {{"type", "content_block_delta"},
           {"index", 0},
           {"delta", {{"type", "text_delta"}, {"text", "I will read "}}}},
          {{"type", "content_block_delta"},
           {"index", 0},
           {"delta", {{"type", "text_delta"}, {"text", "the test first."}}}},
          {{"type", "content_block_stop"}, {"index", 0}},
          {{"type", "content_block_start"},
           {"index", 1},
           {"content_block",
            {{"type", "tool_use"},
             {"id", "toolu_1"},
             {"name", "read_file"},
             {"input", json::object()}}}},
          {{"type", "content_block_start"},
           {"index", 2},
           {"content_block",
            {{"type", "tool_use"},
             {"id", "toolu_2"},
             {"name", "grep"},
             {"input", json::object()}}}},
          {{"type", "content_block_delta"},
           {"index", 1},
           {"delta", {{"type", "input_json_delta"}, {"partial_json", ""}}}},
          {{"type", "content_block_delta"},
           {"index", 2},
           {"delta", {{"type", "input_json_delta"}, {"partial_json", "{\"pattern\": \"de"}}}},
          {{"type", "content_block_delta"},
           {"index", 1},
           {"delta", {{"type", "input_json_delta"}, {"partial_json", "{\"path\": \"test_"}}}},
          {{"type", "content_block_delta"},
           {"index", 2},
           {"delta", {{"type", "input_json_delta"}, {"partial_json", "f add\"}"}}}},
          {{"type", "content_block_delta"},
           {"index", 1},
           {"delta", {{"type", "input_json_delta"}, {"partial_json", "calc.py\"}"}}}},
          {{"type", "content_block_stop"}, {"index", 2}},
          {{"type", "content_block_stop"}, {"index", 1}},
          {{"type", "message_delta"},
           {"delta", {{"stop_reason", "tool_use"}, {"stop_sequence", nullptr}}},
           {"usage", {{"output_tokens", 40}}}},
          {{"type", "message_stop"}},
      }),
      5));
  ModelSpec spec = AnthropicSpec();
  spec.max_output_tokens = 2000;
  auto provider = Make(spec);
  const ModelResponse r = ExpectResponse(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(r.raw["id"], "msg_01");
  EXPECT_EQ(r.raw["type"], "message");
  EXPECT_EQ(r.raw["role"], "assistant");
  EXPECT_EQ(r.raw["model"], "claude-sonnet-4-5-20250929");
  EXPECT_EQ(r.raw["stop_reason"], "tool_use");
  ASSERT_EQ(r.raw["content"].size(), 3U);
  EXPECT_EQ(r.raw["content"][0], json({{"type", "text"}, {"text", "I will read the test first."}}));
  EXPECT_EQ(r.raw["content"][1], json({{"type", "tool_use"},
                                       {"id", "toolu_1"},
                                       {"name", "read_file"},
                                       {"input", {{"path", "test_calc.py"}}}}));
  EXPECT_EQ(r.raw["content"][2]["input"], json({{"pattern", "def add"}}));
  EXPECT_EQ(r.raw["usage"]["input_tokens"], 812);
  EXPECT_EQ(r.raw["usage"]["output_tokens"], 40);
  EXPECT_EQ(r.usage.input_tokens, 812U);
  EXPECT_EQ(r.usage.output_tokens, 40U);
  EXPECT_EQ(r.turn.text, "I will read the test first.");
  ASSERT_EQ(r.turn.tool_calls.size(), 2U);
  EXPECT_EQ(r.turn.tool_calls[0].id, "toolu_1");
  EXPECT_EQ(r.turn.tool_calls[0].arguments, json({{"path", "test_calc.py"}}));
  EXPECT_EQ(r.turn.tool_calls[1].id, "toolu_2");
  EXPECT_EQ(r.turn.tool_calls[1].name, "grep");
  EXPECT_EQ(r.turn.stop_reason, protocol::StopReason::kToolCalls);
  EXPECT_EQ(r.provider_stop_reason, "tool_use");

  const auto req = server_.Requests().at(0);
  EXPECT_EQ(req.target, "/v1/messages");
  EXPECT_EQ(req.Header("x-api-key"), kAnthropicKey);
  EXPECT_EQ(req.Header("anthropic-version"), "2023-06-01");
  EXPECT_EQ(req.Header("content-type"), "application/json");
  EXPECT_EQ(req.Header("authorization"), "");
  const json sent = req.Json();
  EXPECT_EQ(sent["model"], "claude-sonnet-4-5");
  EXPECT_EQ(sent["stream"], true);
  EXPECT_EQ(sent["max_tokens"], 1000);  // the request's, not the spec's 2000
  // The system text as one block carrying a cache breakpoint (prompt caching is on by default).
  EXPECT_EQ(sent["system"], json::array({{{"type", "text"},
                                          {"text", "be careful"},
                                          {"cache_control", {{"type", "ephemeral"}}}}}));
}

TEST_F(ModelProviderTest, AnthropicNonStreamingSendsTheRequestsMaxTokens) {
  ModelSpec spec = AnthropicSpec();
  spec.stream = false;
  auto provider = Make(spec);
  ModelRequest request = SimpleRequest();
  request.max_tokens = 321;
  const ModelResponse r = ExpectResponse(CallOnce(*provider, request));
  EXPECT_EQ(r.turn.text, "Hello from the fake");
  EXPECT_EQ(r.raw["content"][0]["text"], "Hello from the fake");  // the fake's default answer
  EXPECT_EQ(r.usage.input_tokens, 9U);
  EXPECT_EQ(r.usage.output_tokens, 5U);
  const json sent = server_.Requests().at(0).Json();
  EXPECT_EQ(sent["max_tokens"], 321);
  EXPECT_FALSE(sent.contains("stream"));
}

TEST_F(ModelProviderTest, AnthropicErrorEventFailsTheAttemptAndOverloadIsRetried) {
  const json start = {{"type", "message_start"},
                      {"message", {{"id", "m"}, {"usage", {{"input_tokens", 1}}}}}};
  const json error = {{"type", "error"},
                      {"error", {{"type", "overloaded_error"}, {"message", "Overloaded"}}}};
  server_.Enqueue(AnthropicStream({start, error}));
  ModelSpec spec = AnthropicSpec();
  spec.max_retries = 0;
  auto once = Make(spec);
  const ModelError e = ExpectError(CallOnce(*once, SimpleRequest()));
  EXPECT_EQ(e.code, ErrorCode::kProviderError);
  EXPECT_THAT(e.message, HasSubstr("overloaded_error"));
  EXPECT_THAT(e.message, HasSubstr("Overloaded"));

  // With a retry allowed, the second attempt (the fake's default answer) succeeds.
  server_.Enqueue(AnthropicStream({start, error}));
  spec.max_retries = 1;
  auto retried = Make(spec);
  const ModelResponse r = ExpectResponse(CallOnce(*retried, SimpleRequest()));
  EXPECT_EQ(r.raw["content"][0]["text"], "Hello from the fake");
  EXPECT_EQ(server_.Requests().size(), 3U);
}

// A tool input cut off at max_tokens: that call is unusable (arguments_error), the turn is not.
TEST_F(ModelProviderTest, AnthropicMalformedToolInputIsACallError) {
  server_.Enqueue(AnthropicStream({
      {{"type", "message_start"}, {"message", {{"id", "m"}}}},
      {{"type", "content_block_start"},
       {"index", 0},
       {"content_block",
        {{"type", "tool_use"}, {"id", "t"}, {"name", "x"}, {"input", json::object()}}}},
      {{"type", "content_block_delta"},
       {"index", 0},
       {"delta", {{"type", "input_json_delta"}, {"partial_json", "{\"broken"}}}},
      {{"type", "content_block_stop"}, {"index", 0}},
      {{"type", "message_delta"}, {"delta", {{"stop_reason", "max_tokens"}}}},
      {{"type", "message_stop"}},
  }));
  auto provider = Make(AnthropicSpec());
  const ModelResponse r = ExpectResponse(CallOnce(*provider, SimpleRequest()));
  ASSERT_EQ(r.turn.tool_calls.size(), 1U);
  EXPECT_EQ(r.turn.tool_calls[0].id, "t");
  EXPECT_EQ(r.turn.tool_calls[0].arguments, json::object());
  EXPECT_THAT(r.turn.tool_calls[0].arguments_error,
              HasSubstr("the arguments are not valid JSON: {\"broken"));
  EXPECT_EQ(r.turn.stop_reason, protocol::StopReason::kMaxTokens);
  EXPECT_EQ(server_.Requests().size(), 1U);
}

TEST_F(ModelProviderTest, AnthropicKeyIsRequired) {
  env_.erase("ANTHROPIC_API_KEY");
  auto p = MakeModelProvider(io_, AnthropicSpec(), env_);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.error().Message(), HasSubstr("ANTHROPIC_API_KEY is not set"));
}

// ---- retries and failures ----

TEST_F(ModelProviderTest, RetriesOn429And503ThenSucceeds) {
  server_.Enqueue(
      FakeReply::Json(429, {{"error", {{"message", "slow down"}}}}, {{"Retry-After", "0"}}));
  server_.Enqueue(FakeReply::Json(503, {{"error", {{"message", "unavailable"}}}}));
  server_.Enqueue(FakeReply::Text(502, "<html>bad gateway</html>", "text/html"));
  auto provider = Make(OpenAiSpec());
  const ModelResponse r = ExpectResponse(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(r.raw["choices"][0]["message"]["content"], "Hello from the fake");
  EXPECT_EQ(server_.Requests().size(), 4U);
  EXPECT_TRUE(LogsContain("HTTP 429; retry 1 of 4"));
  EXPECT_TRUE(LogsContain("HTTP 503; retry 2 of 4"));
  EXPECT_TRUE(LogsContain("HTTP 502; retry 3 of 4"));
}

TEST_F(ModelProviderTest, RetryAfterIsHonoured) {
  server_.Enqueue(
      FakeReply::Json(429, {{"error", {{"message", "later"}}}}, {{"Retry-After", "1"}}));
  ModelSpec spec = OpenAiSpec();
  spec.retry_max_backoff = std::chrono::seconds(10);
  auto provider = Make(spec);
  const auto start = std::chrono::steady_clock::now();
  ExpectResponse(CallOnce(*provider, SimpleRequest()));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(950));
  EXPECT_TRUE(LogsContain("retry 1 of 4 in 1 s"));
}

TEST_F(ModelProviderTest, RetryAfterIsCapped) {
  server_.Enqueue(
      FakeReply::Json(503, {{"error", {{"message", "later"}}}}, {{"Retry-After", "3600"}}));
  ModelSpec spec = OpenAiSpec();
  spec.retry_max_backoff = std::chrono::milliseconds(50);
  auto provider = Make(spec);
  // Completes within CallOnce's 30 s run, so the hour was not waited.
  ExpectResponse(CallOnce(*provider, SimpleRequest()));
  EXPECT_TRUE(LogsContain("retry 1 of 4 in 0.1 s"));
}

TEST_F(ModelProviderTest, GivesUpAfterMaxRetries) {
  for (int i = 0; i < 3; ++i) {
    server_.Enqueue(FakeReply::Json(500, {{"error", {{"message", "internal oops"}}}}));
  }
  server_.Enqueue(FakeReply::Json(200, {{"unused", true}}));
  ModelSpec spec = OpenAiSpec();
  spec.max_retries = 2;
  auto provider = Make(spec);
  const ModelError e = ExpectError(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(e.code, ErrorCode::kProviderError);
  EXPECT_THAT(e.message, HasSubstr("HTTP 500: internal oops"));
  EXPECT_THAT(e.message, HasSubstr("gave up after 3 attempts"));
  EXPECT_EQ(server_.Requests().size(), 3U);
}

TEST_F(ModelProviderTest, NoRetryOn400Or404) {
  server_.Enqueue(FakeReply::Json(
      400, {{"error", {{"message", "messages[0].content is required"}, {"type", "invalid"}}}}));
  auto provider = Make(OpenAiSpec());
  const ModelError e = ExpectError(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(e.code, ErrorCode::kProviderError);
  EXPECT_THAT(e.message,
              HasSubstr("refused the request (HTTP 400: messages[0].content is required)"));
  EXPECT_EQ(server_.Requests().size(), 1U);

  server_.Enqueue(FakeReply::Json(404, {{"error", {{"message", "model not found"}}}}));
  const ModelError nf = ExpectError(CallOnce(*provider, SimpleRequest()));
  EXPECT_THAT(nf.message, HasSubstr("HTTP 404: model not found"));
  EXPECT_THAT(nf.message, HasSubstr("check the model name \"gpt-4o-mini\""));
  EXPECT_EQ(server_.Requests().size(), 2U);
}

TEST_F(ModelProviderTest, Unauthorized401NamesTheVariableAndNeverTheKey) {
  // Providers echo (parts of) the key they rejected; the whole key must not come back.
  server_.Enqueue(FakeReply::Json(
      401, {{"error",
             {{"message", std::string("Incorrect API key provided: ") + kOpenAiKey + "."},
              {"code", "invalid_api_key"}}}}));
  auto provider = Make(OpenAiSpec());
  const ModelError e = ExpectError(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(e.code, ErrorCode::kProviderAuth);
  EXPECT_THAT(e.message, HasSubstr("rejected the credential: check OPENAI_API_KEY (HTTP 401: "
                                   "Incorrect API key provided: [redacted].)"));
  EXPECT_THAT(e.message, Not(HasSubstr("SECRET")));
  EXPECT_EQ(server_.Requests().size(), 1U);  // no retry
  // The log says the URL and the status, nothing of the provider's text.
  EXPECT_TRUE(LogsContain("HTTP 401"));
  EXPECT_FALSE(LogsContain("Incorrect API key"));
}

TEST_F(ModelProviderTest, Forbidden403OnAnthropicNamesItsVariable) {
  server_.Enqueue(FakeReply::Json(
      403,
      {{"type", "error"}, {"error", {{"type", "permission_error"}, {"message", "not allowed"}}}}));
  auto provider = Make(AnthropicSpec());
  const ModelError e = ExpectError(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(e.code, ErrorCode::kProviderAuth);
  EXPECT_THAT(e.message, HasSubstr("check ANTHROPIC_API_KEY (HTTP 403: not allowed)"));
}

TEST_F(ModelProviderTest, ProviderErrorTextIsCutToAbout300Bytes) {
  server_.Enqueue(FakeReply::Json(400, {{"error", {{"message", std::string(5000, 'z')}}}}));
  auto provider = Make(OpenAiSpec());
  const ModelError e = ExpectError(CallOnce(*provider, SimpleRequest()));
  EXPECT_THAT(e.message, HasSubstr(std::string(300, 'z') + "..."));
  EXPECT_THAT(e.message, Not(HasSubstr(std::string(301, 'z'))));
}

// A model server shapes how deep its JSON nests. Parsing is iterative, but dump() (so JsonText,
// and with it the turn's encoding for the agent and the audit log) recurses per level: arguments of
// 200 000 levels took the trusted process's stack. They are now an arguments_error for that call,
// and a whole answer nested too deep is a provider error, in both wire formats.
TEST_F(ModelProviderTest, DeeplyNestedAnswersAndArgumentsAreRefusedNotRecursedInto) {
  constexpr std::size_t kLevels = 200'000;
  const std::string deep = std::string(kLevels, '[') + std::string(kLevels, ']');
  // The twin: the same text through the old steps (parse, then serialise) dies.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        const json parsed = json::parse(deep, nullptr, false);
        std::fprintf(stderr, "%zu\n", JsonText(parsed).size());
      },
      "");
  // OpenAI, streamed: the arguments text of one call.
  server_.Enqueue(OpenAiStream({
      OpenAiChunk({{"tool_calls", {ToolFragment(0, "", "call_a", "read_file")}}}),
      OpenAiChunk({{"tool_calls", {ToolFragment(0, "{\"path\":" + deep + "}")}}}),
      OpenAiChunk(json::object(), "tool_calls"),
  }));
  auto provider = Make(OpenAiSpec());
  const ModelResponse r = ExpectResponse(CallOnce(*provider, SimpleRequest()));
  ASSERT_EQ(r.turn.tool_calls.size(), 1U);
  EXPECT_EQ(r.turn.tool_calls[0].arguments, json::object());
  EXPECT_THAT(r.turn.tool_calls[0].arguments_error, HasSubstr("nest deeper than 64 levels"));
  // A whole answer (not streamed) nested deeper than the answer limit.
  server_.Enqueue(FakeReply::Text(200, "{\"choices\":" + deep + "}", "application/json"));
  ModelSpec plain = OpenAiSpec();
  plain.stream = false;
  auto whole = Make(plain);
  const ModelError e = ExpectError(CallOnce(*whole, SimpleRequest()));
  EXPECT_EQ(e.code, ErrorCode::kProviderError);
  EXPECT_THAT(e.message, HasSubstr("nested deeper than 100 levels"));
  // Anthropic: a tool_use block's input_json_delta pieces.
  server_.Enqueue(AnthropicStream({
      {{"type", "message_start"},
       {"message", {{"id", "msg_1"}, {"model", "claude-test"}, {"usage", {{"input_tokens", 1}}}}}},
      {{"type", "content_block_start"},
       {"index", 0},
       {"content_block",
        {{"type", "tool_use"},
         {"id", "toolu_1"},
         {"name", "read_file"},
         {"input", json::object()}}}},
      {{"type", "content_block_delta"},
       {"index", 0},
       {"delta", {{"type", "input_json_delta"}, {"partial_json", "{\"path\":" + deep + "}"}}}},
      {{"type", "content_block_stop"}, {"index", 0}},
      {{"type", "message_delta"},
       {"delta", {{"stop_reason", "tool_use"}}},
       {"usage", {{"output_tokens", 1}}}},
      {{"type", "message_stop"}},
  }));
  auto anthropic = Make(AnthropicSpec());
  const ModelResponse a = ExpectResponse(CallOnce(*anthropic, SimpleRequest()));
  ASSERT_EQ(a.turn.tool_calls.size(), 1U);
  EXPECT_EQ(a.turn.tool_calls[0].arguments, json::object());
  EXPECT_THAT(a.turn.tool_calls[0].arguments_error, HasSubstr("nest deeper than 64 levels"));
  // And the turns serialise.
  EXPECT_FALSE(JsonText(r.raw).empty());
  EXPECT_FALSE(JsonText(a.raw).empty());
}

TEST_F(ModelProviderTest, MalformedJsonIsAProviderError) {
  server_.Enqueue(FakeReply::Text(200, "{\"choices\": [", "application/json"));
  ModelSpec spec = OpenAiSpec();
  spec.stream = false;
  auto provider = Make(spec);
  const ModelError e = ExpectError(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(e.code, ErrorCode::kProviderError);
  EXPECT_THAT(e.message, HasSubstr("not valid JSON"));

  server_.Enqueue(FakeReply::Json(200, {{"no", "choices"}}));
  const ModelError shape = ExpectError(CallOnce(*provider, SimpleRequest()));
  EXPECT_THAT(shape.message, HasSubstr("without choices[0].message"));

  server_.Enqueue(FakeReply::Sse({"data: {\"choices\": [{\"delta\": \n\n"}));
  auto streaming = Make(OpenAiSpec());
  const ModelError chunk = ExpectError(CallOnce(*streaming, SimpleRequest()));
  EXPECT_THAT(chunk.message, HasSubstr("a stream chunk that is not a JSON object"));
  EXPECT_EQ(server_.Requests().size(), 3U);  // none retried
}

TEST_F(ModelProviderTest, ResetMidStreamIsAProviderErrorAndIsRetried) {
  FakeReply cut = OpenAiStream({OpenAiChunk({{"content", "partial"}})});
  cut.pieces.pop_back();  // no [DONE]
  cut.reset_after_pieces = true;
  server_.Enqueue(cut);
  ModelSpec spec = OpenAiSpec();
  spec.max_retries = 0;
  auto once = Make(spec);
  const ModelError e = ExpectError(CallOnce(*once, SimpleRequest()));
  EXPECT_EQ(e.code, ErrorCode::kProviderError);
  EXPECT_THAT(e.message, HasSubstr("was cut off"));

  // A stream that ends cleanly but early (no finish_reason, no [DONE]) is incomplete too.
  FakeReply early = OpenAiStream({OpenAiChunk({{"content", "partial"}})});
  early.pieces.pop_back();
  server_.Enqueue(early);
  const ModelError e2 = ExpectError(CallOnce(*once, SimpleRequest()));
  EXPECT_THAT(e2.message, HasSubstr("ended before it was complete"));

  // With a retry allowed, the next attempt succeeds.
  server_.Enqueue(cut);
  spec.max_retries = 1;
  auto retried = Make(spec);
  ExpectResponse(CallOnce(*retried, SimpleRequest()));
  EXPECT_EQ(server_.Requests().size(), 4U);
}

TEST_F(ModelProviderTest, EachAttemptTimesOut) {
  for (int i = 0; i < 2; ++i) {
    FakeReply slow = FakeReply::Json(200, {{"late", true}});
    slow.delay = std::chrono::seconds(3);
    server_.Enqueue(slow);
  }
  ModelSpec spec = OpenAiSpec();
  spec.request_timeout = std::chrono::milliseconds(300);
  spec.max_retries = 1;
  auto provider = Make(spec);
  const ModelError e = ExpectError(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(e.code, ErrorCode::kProviderError);
  EXPECT_THAT(e.message, HasSubstr("timed out after 0.3 s"));
  EXPECT_THAT(e.message, HasSubstr("gave up after 2 attempts"));
  EXPECT_TRUE(LogsContain("timed out"));
}

// A port on 127.0.0.1 that nothing listens on: a socket bound to an ephemeral port, then closed.
int ClosedLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// How many log lines contain `needle`.
int CountLines(const std::vector<std::string>& lines, const std::string& needle) {
  int n = 0;
  for (const auto& l : lines) n += l.find(needle) != std::string::npos ? 1 : 0;
  return n;
}

// Nothing listening on a loopback provider's port (the local server is not running): one attempt,
// no backoff, and an error that says so. It used to be retried with backoff (about 11 s with the
// default spec) before failing with the same cause.
TEST_F(ModelProviderTest, RefusedLoopbackProviderFailsAtOnce) {
  const int port = ClosedLoopbackPort();
  ASSERT_NE(port, 0) << "could not get an ephemeral port: " << std::strerror(errno);
  ModelSpec spec = OpenAiSpec();
  spec.base_url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  spec.max_retries = 4;
  auto provider = Make(spec);
  const ModelError e = ExpectError(CallOnce(*provider, SimpleRequest()));
  EXPECT_EQ(e.code, ErrorCode::kProviderError);
  EXPECT_THAT(e.message, HasSubstr("nothing is listening at http://127.0.0.1:" +
                                   std::to_string(port) + "/v1/chat/completions"));
  EXPECT_THAT(e.message, HasSubstr("start the local model server"));
  EXPECT_THAT(e.message, Not(HasSubstr("gave up after")));
  // One connection attempt ("connection failed" is logged once per attempt) and no retry.
  EXPECT_EQ(CountLines(sink_->lines, "connection failed"), 1);
  EXPECT_FALSE(LogsContain("retry 1 of"));
}

// Retries stay where they can help: 429 and 5xx (RetriesOn429And503ThenSucceeds), a reset after
// the connection was made (ResetMidStreamIsAProviderErrorAndIsRetried), a timeout
// (EachAttemptTimesOut).

TEST_F(ModelProviderTest, CancelAbandonsTheCall) {
  FakeReply slow = FakeReply::Json(200, {{"late", true}});
  slow.delay = std::chrono::seconds(2);
  server_.Enqueue(slow);
  auto provider = Make(OpenAiSpec());
  bool called = false;
  provider->Call(SimpleRequest(), [&](ModelOutcome) { called = true; });
  io_.run_for(std::chrono::milliseconds(100));
  provider->Cancel();
  const auto start = std::chrono::steady_clock::now();
  io_.restart();
  io_.run_for(std::chrono::seconds(10));  // returns as soon as nothing is pending
  EXPECT_FALSE(called);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST_F(ModelProviderTest, CancelDuringABackoffStopsTheRetry) {
  server_.Enqueue(FakeReply::Json(503, json::object(), {{"Retry-After", "5"}}));
  ModelSpec spec = OpenAiSpec();
  spec.retry_max_backoff = std::chrono::seconds(10);
  auto provider = Make(spec);
  bool called = false;
  provider->Call(SimpleRequest(), [&](ModelOutcome) { called = true; });
  for (int i = 0; i < 200 && !LogsContain("retry 1 of 4"); ++i) {
    io_.run_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(LogsContain("retry 1 of 4"));
  provider->Cancel();
  io_.restart();
  io_.run_for(std::chrono::seconds(10));
  EXPECT_FALSE(called);
  EXPECT_EQ(server_.Requests().size(), 1U);
}

TEST_F(ModelProviderTest, DestroyingTheProviderWithACallOutstandingIsSafe) {
  FakeReply slow = FakeReply::Json(200, {{"late", true}});
  slow.delay = std::chrono::milliseconds(500);
  server_.Enqueue(slow);
  bool called = false;
  {
    auto provider = Make(OpenAiSpec());
    provider->Call(SimpleRequest(), [&](ModelOutcome) { called = true; });
    io_.run_for(std::chrono::milliseconds(50));
  }
  io_.restart();
  io_.run_for(std::chrono::seconds(5));
  EXPECT_FALSE(called);
}

TEST_F(ModelProviderTest, AnUnusableRequestIsRefusedWithoutSending) {
  for (ModelSpec spec : {OpenAiSpec(), AnthropicSpec()}) {
    auto provider = Make(spec);
    ModelRequest zero = SimpleRequest();
    zero.max_tokens = 0;
    const ModelError e = ExpectError(CallOnce(*provider, zero));
    EXPECT_EQ(e.code, ErrorCode::kProviderError);
    EXPECT_THAT(e.message, HasSubstr("max_tokens is 0"));
    ModelRequest bad_tool = SimpleRequest();
    bad_tool.tools.push_back({{"description", "no name"}});
    EXPECT_THAT(ExpectError(CallOnce(*provider, bad_tool)).message,
                HasSubstr("tool schema 1 has no name"));
    bad_tool.tools = json::array({{{"name", "x"}, {"parameters", "evil"}}});
    EXPECT_THAT(ExpectError(CallOnce(*provider, bad_tool)).message,
                HasSubstr("tool schema 0 (x) has parameters that are not an object"));
  }
  EXPECT_TRUE(server_.Requests().empty());
}

TEST_F(ModelProviderTest, DoneIsNeverCalledInlineFromCall) {
  auto provider = Make(OpenAiSpec());
  bool called = false;
  ModelRequest zero = SimpleRequest();
  zero.max_tokens = 0;  // fails before anything is sent
  provider->Call(zero, [&](ModelOutcome) { called = true; });
  EXPECT_FALSE(called);
  io_.run_for(std::chrono::seconds(5));
  EXPECT_TRUE(called);
}

// ---- TLS through the provider ----

TEST_F(ModelProviderTest, TlsProviderNeedsATrustedCertificate) {
  std::string why;
  const auto pki = MakeTestPki(&why);
  if (!pki) GTEST_SKIP() << "needs test certificates: " << why;
  FakeProvider tls_server({.tls = true, .cert_file = pki->cert_file, .key_file = pki->key_file});
  ModelSpec spec = OpenAiSpec();
  spec.base_url = tls_server.BaseUrl("/v1");
  spec.max_retries = 3;
  auto untrusted = Make(spec);
  const ModelError e = ExpectError(CallOnce(*untrusted, SimpleRequest()));
  EXPECT_EQ(e.code, ErrorCode::kProviderError);
  EXPECT_THAT(e.message, HasSubstr("certificate verification failed"));
  EXPECT_THAT(e.message, Not(HasSubstr("gave up")));  // a bad certificate is not retried
  EXPECT_TRUE(tls_server.Requests().empty());

  spec.ca_file = pki->ca_file;
  auto trusted = Make(spec);
  const ModelResponse r = ExpectResponse(CallOnce(*trusted, SimpleRequest()));
  EXPECT_EQ(r.raw["choices"][0]["message"]["content"], "Hello from the fake");
  ASSERT_EQ(tls_server.Requests().size(), 1U);
  EXPECT_EQ(tls_server.Requests()[0].Header("authorization"), std::string("Bearer ") + kOpenAiKey);
  std::system(("rm -rf " + pki->dir).c_str());
}

// ---- info ----

TEST_F(ModelProviderTest, InfoReportsKnownContextWindows) {
  struct Case {
    const char* provider;
    const char* model;
    std::uint64_t window;
  };
  for (const Case& c :
       {Case{"openai", "gpt-4o-mini", 128000}, Case{"openai", "gpt-4.1", 1047576},
        Case{"openai", "gpt-4.1-mini", 1047576}, Case{"anthropic", "claude-sonnet-4-5", 200000},
        Case{"openai", "llama3.1:8b", 32768}}) {
    ModelSpec spec =
        std::string(c.provider) == "openai" ? OpenAiSpec(c.model) : AnthropicSpec(c.model);
    auto p = Make(spec);
    ASSERT_TRUE(p);
    const auto info = p->Info();
    EXPECT_EQ(info.provider, c.provider);
    EXPECT_EQ(info.name, c.model);
    EXPECT_EQ(info.context_window, c.window) << c.model;
    EXPECT_EQ(info.max_output_tokens, 4096U);
  }
  ModelSpec spec = OpenAiSpec("llama3.1:8b");
  spec.context_window = 8192;
  spec.max_output_tokens = 1024;
  const auto info = Make(spec)->Info();
  EXPECT_EQ(info.context_window, 8192U);
  EXPECT_EQ(info.max_output_tokens, 1024U);
}

TEST(ParseModelSpec, SplitsAtTheFirstColon) {
  auto spec = ParseModelSpec("openai:llama3.1:8b");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->provider, "openai");
  EXPECT_EQ(spec->model, "llama3.1:8b");
  EXPECT_FALSE(ParseModelSpec("gpt-4o").ok());
  EXPECT_FALSE(ParseModelSpec("openai:").ok());
  EXPECT_FALSE(ParseModelSpec("bedrock:claude").ok());
}

// ---- replay ----

class ReplayProviderTest : public ::testing::Test {
 protected:
  std::string WriteFile(const std::string& text) {
    char path[] = "/tmp/cagent-replay-XXXXXX";
    const int fd = ::mkstemp(path);
    EXPECT_GE(fd, 0);
    ::close(fd);
    std::ofstream(path) << text;
    files_.emplace_back(path);
    return path;
  }
  void TearDown() override {
    for (const auto& f : files_) std::remove(f.c_str());
  }
  std::vector<std::string> files_;
  boost::asio::io_context io_;
};

TEST_F(ReplayProviderTest, PlaysTurnsInOrderThenFailsPastTheEnd) {
  const json t1 = {
      {"text", "I will read the test first."},
      {"tool_calls",
       {{{"id", "call_1"}, {"name", "read_file"}, {"arguments", {{"path", "test_calc.py"}}}}}},
      {"usage", {{"input_tokens", 812}, {"output_tokens", 40}}}};
  const json t2 = {{"text", "Done."}};
  const std::string path = WriteFile(t1.dump() + "\n\n   \n" + t2.dump() + "\n");
  ModelSpec spec;
  spec.provider = "replay";
  spec.model = path;
  auto provider = MakeModelProvider(io_, spec, {});
  ASSERT_TRUE(provider.ok()) << provider.error().Message();
  const auto info = (*provider)->Info();
  EXPECT_EQ(info.provider, "replay");
  EXPECT_EQ(info.name, path.substr(path.rfind('/') + 1));
  EXPECT_EQ(info.context_window, 32768U);

  std::vector<ModelOutcome> outcomes;
  for (int i = 0; i < 3; ++i) {
    (*provider)->Call(ModelRequest{}, [&](ModelOutcome o) { outcomes.push_back(std::move(o)); });
  }
  EXPECT_TRUE(outcomes.empty());  // never inline
  io_.run();
  ASSERT_EQ(outcomes.size(), 3U);
  const auto& r1 = std::get<ModelResponse>(outcomes[0]);
  EXPECT_EQ(r1.raw, t1);
  EXPECT_EQ(r1.turn.text, "I will read the test first.");
  ASSERT_EQ(r1.turn.tool_calls.size(), 1U);
  EXPECT_EQ(r1.turn.tool_calls[0].id, "call_1");
  EXPECT_EQ(r1.turn.tool_calls[0].name, "read_file");
  EXPECT_EQ(r1.turn.tool_calls[0].arguments, json({{"path", "test_calc.py"}}));
  EXPECT_EQ(r1.turn.stop_reason, protocol::StopReason::kToolCalls);
  EXPECT_EQ(r1.provider_stop_reason, "tool_calls");
  EXPECT_EQ(r1.usage.input_tokens, 812U);
  EXPECT_EQ(r1.usage.output_tokens, 40U);
  const auto& r2 = std::get<ModelResponse>(outcomes[1]);
  EXPECT_EQ(r2.raw, t2);
  EXPECT_EQ(r2.turn.text, "Done.");
  EXPECT_EQ(r2.turn.stop_reason, protocol::StopReason::kEnd);
  EXPECT_EQ(r2.usage.input_tokens, 0U);
  const auto& end = std::get<ModelError>(outcomes[2]);
  EXPECT_EQ(end.code, ErrorCode::kProviderError);
  EXPECT_THAT(end.message, HasSubstr("the replay file " + path + " has 2 turns"));
  EXPECT_THAT(end.message, HasSubstr("turn 3"));
}

TEST_F(ReplayProviderTest, BadLinesAreReportedWithTheirNumber) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"{\"text\":\"ok\"}\n\n{not json}\n", ":3: not valid JSON"},
      {"[1,2]\n", ":1: a turn must be a JSON object"},
      {"{\"usage\":{}}\n", ":1: a turn needs \"text\", \"tool_calls\" or both"},
      {"{\"text\": 5}\n", ":1: \"text\" must be a string"},
      {"{\"tool_calls\": [{\"id\":\"a\",\"arguments\":{}}]}\n",
       ":1: tool_calls[0] needs a \"name\": a string of 1 to 256 bytes"},
      {"{\"tool_calls\": [{\"id\":\"a\",\"name\":\"x\"},{\"id\":\"a\",\"name\":\"y\"}]}\n",
       ":1: tool_calls[1]: the id \"a\" is used twice in the turn"},
      {"{\"tool_calls\": [{\"id\":\"" + std::string(257, 'i') + "\",\"name\":\"x\"}]}\n",
       ":1: tool_calls[0]: \"id\" must be a string of at most 256 bytes"},
      {"{\"tool_calls\": [{\"id\":7,\"name\":\"x\"}]}\n",
       ":1: tool_calls[0]: \"id\" must be a string of at most 256 bytes"},
      {"{\"text\":\"a\",\"stop_reason\":\"end_turn\"}\n",
       ":1: \"stop_reason\" must be end, tool_calls, max_tokens, refused or other"},
      {"{\"tool_calls\": {}}\n", ":1: \"tool_calls\" must be a list"},
      {"{\"text\":\"a\",\"usage\":{\"input_tokens\":-1}}\n",
       ":1: usage.input_tokens must be a non-negative integer"},
      {"\n  \n", "the replay file has no turns"},
  };
  for (const auto& c : cases) {
    const std::string path = WriteFile(c.text);
    ModelSpec spec;
    spec.provider = "replay";
    spec.model = path;
    auto provider = MakeModelProvider(io_, spec, {});
    ASSERT_FALSE(provider.ok()) << c.text;
    EXPECT_THAT(provider.error().Message(), HasSubstr(c.expected)) << c.text;
    EXPECT_THAT(provider.error().Message(), HasSubstr(path));
  }
}

TEST_F(ReplayProviderTest, MissingFileIsAnError) {
  ModelSpec spec;
  spec.provider = "replay";
  spec.model = "/nonexistent/session.jsonl";
  auto provider = MakeModelProvider(io_, spec, {});
  ASSERT_FALSE(provider.ok());
  EXPECT_THAT(provider.error().Message(),
              HasSubstr("cannot read the replay file /nonexistent/session.jsonl"));
}

TEST_F(ReplayProviderTest, CancelDropsAPendingAnswer) {
  const std::string path = WriteFile("{\"text\":\"hi\"}\n");
  ModelSpec spec;
  spec.provider = "replay";
  spec.model = path;
  auto provider = MakeModelProvider(io_, spec, {});
  ASSERT_TRUE(provider.ok());
  bool called = false;
  (*provider)->Call(ModelRequest{}, [&](ModelOutcome) { called = true; });
  (*provider)->Cancel();
  io_.run();
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace cagent::launcher::model
