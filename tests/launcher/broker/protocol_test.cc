// Tests of the wire protocol (common/protocol.h): every kind round-trips in its direction, the
// decoder refuses each kind of hostile payload with the exact error code the broker replies with,
// and the frame splitter handles every way a byte stream can arrive (and fail).
#include "common/protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

namespace cagent::protocol {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// ---- helpers ----

// The 4-byte big-endian header for `n`.
std::string Header4(std::uint32_t n) {
  std::string h;
  h.push_back(static_cast<char>((n >> 24) & 0xff));
  h.push_back(static_cast<char>((n >> 16) & 0xff));
  h.push_back(static_cast<char>((n >> 8) & 0xff));
  h.push_back(static_cast<char>(n & 0xff));
  return h;
}

std::string Frame(std::string_view payload) {
  return Header4(static_cast<std::uint32_t>(payload.size())) + std::string(payload);
}

// Decodes and expects a failure; returns it (a default DecodeError after a failed expectation).
DecodeError ExpectError(const std::string& payload, bool from_agent) {
  auto decoded = Decode(payload, from_agent);
  if (!std::holds_alternative<DecodeError>(decoded)) {
    ADD_FAILURE() << "decoded without error: " << payload;
    return DecodeError{ErrorCode::kInternal, "", std::nullopt};
  }
  return std::get<DecodeError>(std::move(decoded));
}

Message ExpectMessage(const std::string& payload, bool from_agent) {
  auto decoded = Decode(payload, from_agent);
  if (!std::holds_alternative<Message>(decoded)) {
    ADD_FAILURE() << "refused: " << std::get<DecodeError>(decoded).message << "\n  " << payload;
    return Make(Kind::kAck, 0, Ack{});
  }
  return std::get<Message>(std::move(decoded));
}

// Field-by-field equality of the bodies (not via ToJson, so a field ToJson forgot would show).
bool BodyEq(const Hello& a, const Hello& b) {
  return std::tie(a.agent, a.protocols) == std::tie(b.agent, b.protocols);
}
bool CallsEq(const std::vector<ToolCall>& a, const std::vector<ToolCall>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tie(a[i].id, a[i].name, a[i].arguments, a[i].arguments_error) !=
        std::tie(b[i].id, b[i].name, b[i].arguments, b[i].arguments_error)) {
      return false;
    }
  }
  return true;
}
bool BodyEq(const ModelCall& a, const ModelCall& b) {
  if (a.system != b.system || a.messages.size() != b.messages.size()) return false;
  for (std::size_t i = 0; i < a.messages.size(); ++i) {
    const ChatMessage& x = a.messages[i];
    const ChatMessage& y = b.messages[i];
    if (std::tie(x.role, x.text, x.call_id, x.is_error) !=
            std::tie(y.role, y.text, y.call_id, y.is_error) ||
        !CallsEq(x.tool_calls, y.tool_calls)) {
      return false;
    }
  }
  return true;
}
bool BodyEq(const ToolRequest& a, const ToolRequest& b) {
  return std::tie(a.call_id, a.tool, a.args, a.paths) ==
         std::tie(b.call_id, b.tool, b.args, b.paths);
}
bool BodyEq(const ToolResult& a, const ToolResult& b) {
  return std::tie(a.request, a.ok, a.error_code, a.output, a.changed_paths, a.call_id) ==
         std::tie(b.request, b.ok, b.error_code, b.output, b.changed_paths, b.call_id);
}
bool BodyEq(const Progress& a, const Progress& b) {
  return std::tie(a.state, a.text) == std::tie(b.state, b.text);
}
bool BodyEq(const NextCall&, const NextCall&) { return true; }
bool BodyEq(const Cancel& a, const Cancel& b) { return a.reason == b.reason; }
bool BodyEq(const Finish& a, const Finish& b) {
  return std::tie(a.outcome, a.summary) == std::tie(b.outcome, b.summary);
}
bool BodyEq(const Welcome& a, const Welcome& b) {
  return std::tie(a.protocol, a.run_id, a.workspace, a.task, a.mode, a.policy_name, a.policy_digest,
                  a.policy_summary, a.policy_source, a.tools, a.model.provider, a.model.name,
                  a.model.context_window, a.model.max_output_tokens, a.max_turns,
                  a.command_timeout_ms, a.command_output_bytes) ==
         std::tie(b.protocol, b.run_id, b.workspace, b.task, b.mode, b.policy_name, b.policy_digest,
                  b.policy_summary, b.policy_source, b.tools, b.model.provider, b.model.name,
                  b.model.context_window, b.model.max_output_tokens, b.max_turns,
                  b.command_timeout_ms, b.command_output_bytes);
}
bool BodyEq(const ModelResult& a, const ModelResult& b) {
  return a.answer.text == b.answer.text && CallsEq(a.answer.tool_calls, b.answer.tool_calls) &&
         a.answer.stop_reason == b.answer.stop_reason &&
         std::tie(a.usage.input_tokens, a.usage.output_tokens, a.turn, a.max_turns, a.max_tokens) ==
             std::tie(b.usage.input_tokens, b.usage.output_tokens, b.turn, b.max_turns,
                      b.max_tokens);
}
bool BodyEq(const Decision& a, const Decision& b) {
  return std::tie(a.verdict, a.pending, a.rule, a.location, a.reason, a.message) ==
         std::tie(b.verdict, b.pending, b.rule, b.location, b.reason, b.message);
}
bool BodyEq(const Approval& a, const Approval& b) {
  return std::tie(a.verdict, a.scope, a.message) == std::tie(b.verdict, b.scope, b.message);
}
bool BodyEq(const ResultAck& a, const ResultAck& b) {
  return std::tie(a.output, a.truncated) == std::tie(b.output, b.truncated);
}
bool BodyEq(const Ack&, const Ack&) { return true; }
bool BodyEq(const ErrorReply& a, const ErrorReply& b) {
  return std::tie(a.code, a.message) == std::tie(b.code, b.message);
}
bool BodyEq(const Shutdown& a, const Shutdown& b) {
  return std::tie(a.status, a.reason) == std::tie(b.status, b.reason);
}

bool BodiesEqual(const Body& a, const Body& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&b](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        return BodyEq(x, std::get<T>(b));
      },
      a);
}

// One message of every kind, every field set to a non-default value.
std::vector<Message> SampleMessages() {
  std::vector<Message> out;
  out.push_back(Make(Kind::kHello, 1, Hello{"cagent-agent/0.1.0", {2, 3}}));
  ModelCall call;
  call.system = "You are a careful engineer.";
  call.messages.push_back(ChatMessage{Role::kUser, "héllo ✓", {}, "", false});
  call.messages.push_back(ChatMessage{
      Role::kAssistant,
      "reading",
      {ToolCall{"call_1", "read_file", json{{"path", "a.py"}}, ""},
       ToolCall{"call_2", "grep", json::object(), "the arguments are not valid JSON: {"}},
      "",
      false});
  call.messages.push_back(ChatMessage{Role::kTool, "1\tprint()\n", {}, "call_1", false});
  call.messages.push_back(ChatMessage{Role::kTool, "error [bad_arguments]", {}, "call_2", true});
  out.push_back(Make(Kind::kModelCall, 2, call));
  out.push_back(Make(Kind::kToolRequest, 3,
                     ToolRequest{"call_7",
                                 "read_file",
                                 json{{"path", "src/main.cc"}, {"offset", 10}, {"limit", 20}},
                                 {"src/main.cc", "src/other.cc"}}));
  out.push_back(
      Make(Kind::kToolResult, 4,
           ToolResult{3, false, "not_found", "no such file: src/x.cc\n", {"a.txt", "b/c"}, ""}));
  out.push_back(Make(Kind::kProgress, 5, Progress{"tool", "run_command: pytest -q"}));
  out.push_back(Make(Kind::kNextCall, 7, NextCall{}));
  out.push_back(Make(Kind::kFinish, 6, Finish{"done", "fixed the off-by-one"}));
  Welcome w;
  w.protocol = 2;
  w.run_id = "run-20240101-abcdef";
  w.workspace = "/work/repo";
  w.task = "Fix the bug in parse()\n\nDetails: \"quoted\"";
  w.mode = "task";
  w.policy_name = "backend";
  w.policy_digest = std::string(64, 'a');
  w.policy_summary = "read: workspace\nwrite: src/**";
  w.policy_source = "profile backend {\n}\n";
  w.tools = {"read_file", "write_file", "run_command"};
  w.model = ModelInfo{"anthropic", "claude-x", 200000, 8192};
  w.max_turns = 40;
  w.command_timeout_ms = 600000;
  w.command_output_bytes = 65536;
  out.push_back(Make(Kind::kWelcome, 1, w));
  ModelResult result;
  result.answer.text = "I will run the tests.";
  result.answer.tool_calls = {
      ToolCall{"call_9", "run_command", json{{"command", "pytest -q"}}, ""}};
  result.answer.stop_reason = StopReason::kToolCalls;
  result.usage = Usage{.input_tokens = 1234, .output_tokens = 56};
  result.turn = 3;
  result.max_turns = 40;
  result.max_tokens = 2048;
  out.push_back(Make(Kind::kModelResult, 2, result));
  out.push_back(Make(Kind::kDecision, 3,
                     Decision{Verdict::kAsk, true, "ask write src/**", "backend.cagent:12:5",
                              "writes need approval", "waiting for the operator"}));
  out.push_back(Make(Kind::kApproval, 3, Approval{Verdict::kAllow, "once", "approved"}));
  out.push_back(Make(Kind::kResultAck, 4, ResultAck{"redacted [REDACTED] output", true}));
  out.push_back(Make(Kind::kAck, 5, Ack{}));
  out.push_back(Make(Kind::kError, 9, ErrorReply{ErrorCode::kLoopDetected, "same call 3 times"}));
  out.push_back(Make(Kind::kShutdown, 0, Shutdown{"failed", "tool-call budget (200) reached"}));
  out.push_back(Make(Kind::kCancel, 4, Cancel{"the client cancelled the call"}));
  return out;
}

// A valid agent message of `kind` as a JSON object, for mutation by the field tests.
json ValidAgentJson(Kind kind) {
  for (const Message& m : SampleMessages()) {
    if (m.header.kind == kind) return ToJson(m);
  }
  ADD_FAILURE() << "no sample for " << KindName(kind);
  return json::object();
}

// ---- names ----

TEST(ProtocolNames, KindsErrorCodesAndVerdictsRoundTripThroughTheirNames) {
  for (int i = 0; i <= static_cast<int>(Kind::kCancel); ++i) {
    const auto kind = static_cast<Kind>(i);
    EXPECT_EQ(ParseKind(KindName(kind)), kind) << KindName(kind);
    EXPECT_EQ(IsAgentKind(kind), i <= static_cast<int>(Kind::kFinish)) << KindName(kind);
  }
  for (int i = 0; i <= static_cast<int>(ErrorCode::kInternal); ++i) {
    const auto code = static_cast<ErrorCode>(i);
    EXPECT_EQ(ParseErrorCode(ErrorCodeName(code)), code) << ErrorCodeName(code);
  }
  for (Verdict v : {Verdict::kAllow, Verdict::kAsk, Verdict::kDeny}) {
    EXPECT_EQ(ParseVerdict(VerdictName(v)), v);
  }
  EXPECT_FALSE(ParseKind("Hello").has_value());
  EXPECT_FALSE(ParseErrorCode("").has_value());
  EXPECT_FALSE(ParseVerdict("maybe").has_value());
}

TEST(ProtocolNames, WireNamesAreTheDocumentedOnes) {
  EXPECT_EQ(KindName(Kind::kToolRequest), "tool_request");
  EXPECT_EQ(KindName(Kind::kResultAck), "result_ack");
  EXPECT_EQ(KindName(Kind::kError), "error");
  EXPECT_EQ(ErrorCodeName(ErrorCode::kTooLarge), "too_large");
  EXPECT_EQ(ErrorCodeName(ErrorCode::kDuplicateId), "duplicate_id");
  EXPECT_EQ(ErrorCodeName(ErrorCode::kProviderAuth), "provider_auth");
}

// ---- round trips ----

TEST(ProtocolRoundTrip, EveryKindEncodesAndDecodesBackEqualInItsDirection) {
  const std::vector<Message> samples = SampleMessages();
  ASSERT_EQ(samples.size(), 16U);  // one per kind
  for (const Message& m : samples) {
    SCOPED_TRACE(std::string(KindName(m.header.kind)));
    auto frame = EncodeMessage(m);
    ASSERT_TRUE(frame.ok()) << frame.error().Message();
    FrameDecoder decoder;
    ASSERT_TRUE(decoder.Feed(*frame).ok());
    auto payload = decoder.Next();
    ASSERT_TRUE(payload.has_value());
    EXPECT_EQ(decoder.Pending(), 0U);
    const Message back = ExpectMessage(*payload, IsAgentKind(m.header.kind));
    EXPECT_EQ(back.header.version, kVersion);
    EXPECT_EQ(back.header.kind, m.header.kind);
    EXPECT_EQ(back.header.id, m.header.id);
    EXPECT_TRUE(BodiesEqual(back.body, m.body)) << *payload;
    EXPECT_EQ(ToJson(back), ToJson(m));
  }
}

TEST(ProtocolRoundTrip, TheWireFormIsTheDocumentedObject) {
  const Message m = Make(Kind::kToolRequest, 42,
                         ToolRequest{"c1", "read_file", json{{"path", "a.txt"}}, {"a.txt"}});
  EXPECT_EQ(ToJson(m), json::parse(R"({"v":2,"type":"tool_request","id":42,"call_id":"c1",
      "tool":"read_file","args":{"path":"a.txt"},"paths":["a.txt"]})"));
  auto frame = EncodeMessage(m);
  ASSERT_TRUE(frame.ok());
  // 4-byte big-endian length, then the compact JSON.
  const std::string payload = frame->substr(kHeaderBytes);
  EXPECT_EQ(frame->substr(0, kHeaderBytes), Header4(static_cast<std::uint32_t>(payload.size())));
  EXPECT_EQ(json::parse(payload), ToJson(m));
  EXPECT_EQ(payload.find('\n'), std::string::npos);
}

TEST(ProtocolRoundTrip, AgentKindsAreUnknownToTheAgentsDecoder) {
  for (const Message& m : SampleMessages()) {
    SCOPED_TRACE(std::string(KindName(m.header.kind)));
    const bool agent_kind = IsAgentKind(m.header.kind);
    // Decoded as if it came from the other side.
    const DecodeError e = ExpectError(ToJson(m).dump(), /*from_agent=*/!agent_kind);
    EXPECT_EQ(e.code, ErrorCode::kUnknownType);
    EXPECT_EQ(e.id, m.header.id);
    EXPECT_THAT(e.message, HasSubstr(std::string(KindName(m.header.kind))));
  }
}

TEST(ProtocolRoundTrip, OptionalFieldsMissingOrNullDecodeToDefaults) {
  const Message tr = ExpectMessage(
      R"({"v":2,"type":"tool_request","id":1,"tool":"list_dir","args":{},"call_id":"c",
          "paths":null})",
      true);
  const auto& req = std::get<ToolRequest>(tr.body);
  EXPECT_EQ(req.call_id, "c");
  EXPECT_TRUE(req.paths.empty());
  const Message mc =
      ExpectMessage(R"({"v":2,"type":"model_call","id":1,"messages":[{"role":"user"}]})", true);
  EXPECT_EQ(std::get<ModelCall>(mc.body).system, "");
  EXPECT_EQ(std::get<ModelCall>(mc.body).messages.at(0).text, "");
  const Message res = ExpectMessage(
      R"({"v":2,"type":"tool_result","id":2,"request":1,"ok":true,"output":""})", true);
  const auto& r = std::get<ToolResult>(res.body);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.error_code, "");
  EXPECT_TRUE(r.changed_paths.empty());
  const Message dec = ExpectMessage(R"({"v":2,"type":"decision","id":3,"verdict":"deny"})", false);
  EXPECT_EQ(std::get<Decision>(dec.body).verdict, Verdict::kDeny);
  EXPECT_FALSE(std::get<Decision>(dec.body).pending);
  const Message ack = ExpectMessage(R"({"v":2,"type":"ack","id":4})", false);
  EXPECT_TRUE(std::holds_alternative<Ack>(ack.body));
}

TEST(ProtocolRoundTrip, LargestIdRoundTrips) {
  const Message m = Make(Kind::kProgress, UINT64_MAX, Progress{"thinking", ""});
  const Message back = ExpectMessage(ToJson(m).dump(), true);
  EXPECT_EQ(back.header.id, UINT64_MAX);
}

// ---- header fields ----

TEST(ProtocolHeader, VersionMissingOrNotAnUnsignedIntegerIsMalformed) {
  for (const char* payload : {
           R"({"type":"progress","id":7,"state":"x"})",
           R"({"v":"1","type":"progress","id":7,"state":"x"})",
           R"({"v":-1,"type":"progress","id":7,"state":"x"})",
           R"({"v":1.0,"type":"progress","id":7,"state":"x"})",
           R"({"v":null,"type":"progress","id":7,"state":"x"})",
           R"({"v":[1],"type":"progress","id":7,"state":"x"})",
       }) {
    SCOPED_TRACE(payload);
    const DecodeError e = ExpectError(payload, true);
    EXPECT_EQ(e.code, ErrorCode::kMalformed);
    EXPECT_EQ(e.id, 7U);  // readable, so the error reply can carry it
    EXPECT_THAT(e.message, HasSubstr("\"v\""));
  }
}

TEST(ProtocolHeader, AnotherVersionIsBadVersion) {
  for (const char* payload : {
           R"({"v":1,"type":"hello","id":1,"agent":"a","protocols":[1]})",
           R"({"v":3,"type":"hello","id":1,"agent":"a","protocols":[3]})",
           R"({"v":0,"type":"hello","id":1,"agent":"a","protocols":[1]})",
           R"({"v":18446744073709551615,"type":"hello","id":1})",
       }) {
    SCOPED_TRACE(payload);
    const DecodeError e = ExpectError(payload, true);
    EXPECT_EQ(e.code, ErrorCode::kBadVersion);
    EXPECT_EQ(e.id, 1U);
    EXPECT_THAT(e.message, HasSubstr("speaks 2"));
  }
}

TEST(ProtocolHeader, TypeMissingOrNotAStringIsMalformed) {
  for (const char* payload :
       {R"({"v":2,"id":1,"state":"x"})", R"({"v":2,"type":3,"id":1})",
        R"({"v":2,"type":null,"id":1})", R"({"v":2,"type":["hello"],"id":1})"}) {
    SCOPED_TRACE(payload);
    const DecodeError e = ExpectError(payload, true);
    EXPECT_EQ(e.code, ErrorCode::kMalformed);
    EXPECT_THAT(e.message, HasSubstr("\"type\""));
  }
}

TEST(ProtocolHeader, UnknownTypeIsUnknownTypeAndTheEchoIsBoundedValidUtf8) {
  DecodeError e = ExpectError(R"({"v":2,"type":"exec","id":5})", true);
  EXPECT_EQ(e.code, ErrorCode::kUnknownType);
  EXPECT_EQ(e.id, 5U);
  EXPECT_THAT(e.message, HasSubstr("\"exec\""));

  // Case matters: the set is closed and exact.
  EXPECT_EQ(ExpectError(R"({"v":2,"type":"Hello","id":5})", true).code, ErrorCode::kUnknownType);

  // A long name made of 3-byte characters: cut at a character boundary, never inside one.
  std::string name;
  for (int i = 0; i < 40; ++i) name += "\xE2\x9C\x93";  // U+2713, 3 bytes
  e = ExpectError(json{{"v", 2}, {"type", name}, {"id", 5}}.dump(), true);
  EXPECT_EQ(e.code, ErrorCode::kUnknownType);
  EXPECT_LT(e.message.size(), 120U);
  EXPECT_THAT(e.message, HasSubstr("..."));
  // Strict dump throws on invalid UTF-8; it must not.
  const json reply = ToJson(Make(Kind::kError, 5, ErrorReply{e.code, e.message}));
  std::string dumped;
  EXPECT_NO_THROW(dumped = reply.dump());
  EXPECT_THAT(dumped, HasSubstr("\xE2\x9C\x93..."));
}

TEST(ProtocolHeader, IdMissingNegativeFloatOrStringIsMalformed) {
  for (const char* payload : {
           R"({"v":2,"type":"progress","state":"x"})",
           R"({"v":2,"type":"progress","id":-1,"state":"x"})",
           R"({"v":2,"type":"progress","id":1.5,"state":"x"})",
           R"({"v":2,"type":"progress","id":1.0,"state":"x"})",
           R"({"v":2,"type":"progress","id":"1","state":"x"})",
           R"({"v":2,"type":"progress","id":null,"state":"x"})",
           R"({"v":2,"type":"progress","id":18446744073709551616,"state":"x"})",
       }) {
    SCOPED_TRACE(payload);
    const DecodeError e = ExpectError(payload, true);
    EXPECT_EQ(e.code, ErrorCode::kMalformed);
    EXPECT_FALSE(e.id.has_value());
    EXPECT_THAT(e.message, HasSubstr("\"id\""));
  }
  EXPECT_EQ(ExpectMessage(R"({"v":2,"type":"progress","id":0,"state":"x"})", true).header.id, 0U);
}

// ---- body fields of the agent's kinds ----

struct FieldCase {
  Kind kind;
  const char* field;
  bool required;
  std::vector<json> wrong;  // values of the wrong type
};

std::vector<FieldCase> AgentFieldCases() {
  const json str = "text";
  const json num = 5;
  const json neg = -5;
  const json flt = 1.5;
  const json obj = json::object();
  const json arr = json::array();
  const json tru = true;
  return {
      {Kind::kHello, "agent", true, {num, obj, arr, tru}},
      {Kind::kHello,
       "protocols",
       true,
       {str, num, obj, json::array({"1"}), json::array({-1}), json::array({1.5}),
        json::array({1001}), json::array({json::array({1})})}},
      {Kind::kModelCall, "messages", true, {str, num, obj, tru}},
      {Kind::kModelCall, "system", false, {num, obj, arr, tru}},
      {Kind::kToolRequest, "tool", true, {num, obj, arr, tru}},
      {Kind::kToolRequest, "args", true, {str, num, arr, tru}},
      {Kind::kToolRequest, "call_id", true, {num, obj, arr, tru}},
      {Kind::kToolRequest, "paths", false, {str, num, obj, json::array({1}), json::array({obj})}},
      {Kind::kToolResult, "request", true, {str, neg, flt, obj, arr, tru}},
      {Kind::kToolResult, "ok", true, {str, num, obj, arr, json(0)}},
      {Kind::kToolResult, "output", true, {num, obj, arr, tru}},
      {Kind::kToolResult, "error_code", false, {num, obj, arr, tru}},
      {Kind::kToolResult, "changed_paths", false, {str, obj, json::array({tru})}},
      {Kind::kProgress, "state", true, {num, obj, arr, tru}},
      {Kind::kProgress, "text", false, {num, obj, arr, tru}},
      {Kind::kFinish, "outcome", true, {num, obj, arr, tru}},
      {Kind::kFinish, "summary", false, {num, obj, arr, tru}},
  };
}

TEST(ProtocolAgentFields, EveryRequiredFieldMissingOrNullIsMalformedNamingIt) {
  int required = 0;
  for (const FieldCase& c : AgentFieldCases()) {
    json j = ValidAgentJson(c.kind);
    ASSERT_TRUE(j.contains(c.field)) << c.field;
    SCOPED_TRACE(std::string(KindName(c.kind)) + "." + c.field);
    for (bool as_null : {false, true}) {
      json mutated = j;
      if (as_null) {
        mutated[c.field] = nullptr;
      } else {
        mutated.erase(c.field);
      }
      auto decoded = Decode(mutated.dump(), true);
      if (c.required) {
        ASSERT_TRUE(std::holds_alternative<DecodeError>(decoded)) << mutated.dump();
        const auto& e = std::get<DecodeError>(decoded);
        EXPECT_EQ(e.code, ErrorCode::kMalformed);
        EXPECT_EQ(e.id, j["id"].get<std::uint64_t>());
        EXPECT_EQ(e.message, std::string(KindName(c.kind)) + ": missing field \"" + c.field + "\"");
      } else {
        EXPECT_TRUE(std::holds_alternative<Message>(decoded)) << mutated.dump();
      }
    }
    if (c.required) ++required;
  }
  EXPECT_EQ(required,
            11);  // hello 2, model_call 1, tool_request 3, tool_result 3, progress 1, finish 1
}

TEST(ProtocolAgentFields, EveryFieldOfTheWrongTypeIsMalformedNamingIt) {
  for (const FieldCase& c : AgentFieldCases()) {
    const json j = ValidAgentJson(c.kind);
    for (const json& wrong : c.wrong) {
      json mutated = j;
      mutated[c.field] = wrong;
      SCOPED_TRACE(mutated.dump());
      const DecodeError e = ExpectError(mutated.dump(), true);
      EXPECT_EQ(e.code, ErrorCode::kMalformed);
      EXPECT_EQ(e.id, j["id"].get<std::uint64_t>());
      EXPECT_THAT(e.message, HasSubstr(std::string("field \"") + c.field + "\" must be"));
      EXPECT_THAT(e.message, ::testing::StartsWith(std::string(KindName(c.kind)) + ": "));
    }
  }
}

TEST(ProtocolAgentFields, TheFirstProblemIsReported) {
  const DecodeError e =
      ExpectError(R"({"v":2,"type":"tool_result","id":1,"ok":"yes","output":3})", true);
  EXPECT_EQ(e.message, "tool_result: missing field \"request\"");
}

TEST(ProtocolAgentFields, UnknownFieldsAreIgnored) {
  const Message m = ExpectMessage(
      R"({"v":2,"type":"tool_request","id":9,"tool":"grep","args":{"pattern":"x"},"call_id":"c",
          "future_field":{"deep":[1,2,3]},"also":"ignored","paths":[]})",
      true);
  EXPECT_EQ(std::get<ToolRequest>(m.body).tool, "grep");
  EXPECT_EQ(ToJson(m).count("future_field"), 0U);
  const Message w = ExpectMessage(
      R"({"v":2,"type":"welcome","id":1,"protocol":1,"run_id":"r","workspace":"/w","task":"t",
          "policy_name":"p","policy_digest":"d","tools":[],"model":{"provider":"replay","x":1},
          "extra":null})",
      false);
  EXPECT_EQ(std::get<Welcome>(w.body).model.provider, "replay");
}

TEST(ProtocolAgentFields, ModelCallMessagesAreCheckedOneByOneNamingTheMessage) {
  struct Case {
    const char* messages;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {R"([1])", "model_call: messages[0] must be an object"},
           {R"([{"text":"x"}])", "model_call: messages[0]: missing field \"role\""},
           {R"([{"role":"system","text":"x"}])",
            "model_call: messages[0]: \"role\" must be user, assistant or tool"},
           {R"([{"role":"user","text":5}])",
            "model_call: messages[0]: field \"text\" must be a string"},
           {R"([{"role":"user"},{"role":"tool","text":"x"}])",
            "model_call: messages[1]: missing field \"call_id\""},
           {R"([{"role":"tool","call_id":"","text":"x"}])",
            "model_call: messages[0]: \"call_id\" must be 1 to 256 bytes"},
           {R"([{"role":"assistant","tool_calls":{}}])",
            "model_call: messages[0]: field \"tool_calls\" must be an array"},
           {R"([{"role":"assistant","tool_calls":[{"id":"a"}]}])",
            "model_call: messages[0].tool_calls[0]: missing field \"name\""},
       }) {
    SCOPED_TRACE(c.messages);
    const DecodeError e = ExpectError(
        std::string(R"({"v":2,"type":"model_call","id":1,"messages":)") + c.messages + "}", true);
    EXPECT_EQ(e.code, ErrorCode::kMalformed);
    EXPECT_EQ(e.message, c.message);
  }
  // The count is bounded: a conversation of more than kMaxMessages is refused whole.
  std::string many = R"({"v":2,"type":"model_call","id":1,"messages":[)";
  for (std::size_t i = 0; i <= kMaxMessages; ++i) many += i == 0 ? "{}" : ",{}";
  many += "]}";
  EXPECT_THAT(ExpectError(many, true).message, HasSubstr("65537 messages (at most 65536)"));
}

TEST(ProtocolAgentFields, AModelCallCarriesNoProviderFields) {
  // A v1-style provider body, a model, max_tokens, n or tools next to the messages are not part
  // of the message: the decoded call has only the system text and the messages.
  const Message m = ExpectMessage(
      R"({"v":2,"type":"model_call","id":1,"system":"s","messages":[{"role":"user","text":"t"}],
          "body":{"n":5},"model":"gpt-5-pro","max_tokens":1000000,"n":8,"tools":[{"type":"web_search"}],
          "stream":true})",
      true);
  const json back = ToJson(m);
  std::set<std::string> keys;
  for (const auto& [k, v] : back.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"v", "type", "id", "system", "messages"}));
}

// ---- body fields of the broker's kinds (the agent's decoder) ----

TEST(ProtocolBrokerFields, BrokerKindsAreCheckedToo) {
  struct Case {
    const char* payload;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"v":2,"type":"decision","id":1,"verdict":"maybe"})",
            "decision: field \"verdict\" must be allow, ask or deny"},
           {R"({"v":2,"type":"decision","id":1})", "decision: missing field \"verdict\""},
           {R"({"v":2,"type":"approval","id":1,"verdict":"ask","scope":"once"})",
            "approval: field \"verdict\" must be allow or deny"},
           {R"({"v":2,"type":"welcome","id":1,"protocol":1,"run_id":"r","workspace":"/w",
               "task":"t","policy_name":"p","policy_digest":"d","tools":[],"model":{}})",
            "welcome: model: missing field \"provider\""},
           {R"({"v":2,"type":"welcome","id":1,"protocol":2147483648,"run_id":"r",
               "workspace":"/w","task":"t","policy_name":"p","policy_digest":"d","tools":[],
               "model":{"provider":"replay"}})",
            "welcome: field \"protocol\" must be a small non-negative integer"},
           {R"({"v":2,"type":"model_result","id":1,"stop_reason":"end","turn":1,
               "usage":{"input_tokens":-1}})",
            "model_result: usage: field \"input_tokens\" must be a non-negative integer"},
           {R"({"v":2,"type":"model_result","id":1,"stop_reason":"end"})",
            "model_result: missing field \"turn\""},
           {R"({"v":2,"type":"model_result","id":1,"turn":1})",
            "model_result: missing field \"stop_reason\""},
           {R"({"v":2,"type":"model_result","id":1,"turn":1,"stop_reason":"stop"})",
            "model_result: field \"stop_reason\" must be end, tool_calls, max_tokens, refused or "
            "other"},
           {R"({"v":2,"type":"model_result","id":1,"turn":1,"stop_reason":"tool_calls",
               "tool_calls":[{"id":"a","name":"x","arguments":{}},{"id":"a","name":"y"}]})",
            "model_result: tool_calls[1]: the id \"a\" is used twice in one turn"},
           {R"({"v":2,"type":"model_result","id":1,"turn":1,"stop_reason":"tool_calls",
               "tool_calls":[{"id":"","name":"x"}]})",
            "model_result: tool_calls[0]: \"id\" must be 1 to 256 bytes"},
           {R"({"v":2,"type":"model_result","id":1,"turn":1,"stop_reason":"tool_calls",
               "tool_calls":[{"id":"a","name":"x","arguments":[]}]})",
            "model_result: tool_calls[0]: field \"arguments\" must be an object"},
           {R"({"v":2,"type":"result_ack","id":1,"output":"x","truncated":"no"})",
            "result_ack: field \"truncated\" must be true or false"},
           {R"({"v":2,"type":"error","id":1})", "error: missing field \"code\""},
           {R"({"v":2,"type":"shutdown","id":0,"reason":"x"})",
            "shutdown: missing field \"status\""},
       }) {
    SCOPED_TRACE(c.payload);
    const DecodeError e = ExpectError(c.payload, false);
    EXPECT_EQ(e.code, ErrorCode::kMalformed);
    EXPECT_EQ(e.message, c.message);
  }
}

TEST(ProtocolBrokerFields, AnUnknownErrorCodeFromANewerPeerIsStillAnError) {
  const Message m = ExpectMessage(
      R"({"v":2,"type":"error","id":3,"code":"quota_exceeded","message":"m"})", false);
  EXPECT_EQ(std::get<ErrorReply>(m.body).code, ErrorCode::kInternal);
  EXPECT_EQ(std::get<ErrorReply>(m.body).message, "m");
}

// ---- payloads that are not a message ----

TEST(ProtocolPayload, NonObjectPayloadsAreMalformed) {
  for (const char* payload : {"[]", R"(["hello"])", R"("hello")", "1", "null", "true"}) {
    SCOPED_TRACE(payload);
    const DecodeError e = ExpectError(payload, true);
    EXPECT_EQ(e.code, ErrorCode::kMalformed);
    EXPECT_EQ(e.message, "payload is not a JSON object");
    EXPECT_FALSE(e.id.has_value());
  }
}

TEST(ProtocolPayload, InvalidJsonIsMalformed) {
  for (const char* payload :
       {"", " ", "{", R"({"v":2,)", R"({"v":1} x)", R"({"v":1}{"v":1})", "{'v':1}",
        R"({"v":01,"type":"ack","id":1})", R"({"v":2,"type":"ack","id":1,})", R"({"v":NaN})",
        R"({"v":1e400,"type":"ack","id":1})"}) {
    SCOPED_TRACE(payload);
    const DecodeError e = ExpectError(payload, true);
    EXPECT_EQ(e.code, ErrorCode::kMalformed);
    EXPECT_EQ(e.message, "payload is not valid JSON");
  }
}

// nlohmann's lexer ends the input at a NUL: the twin shows it accepts a valid message followed
// by NUL and anything; the decoder refuses the payload (found by the json_depth fuzz target).
TEST(ProtocolPayload, ANulByteAnywhereIsMalformed) {
  const std::string payload = std::string(R"({"v":2,"type":"ack","id":1})") + '\0' + "{junk";
  EXPECT_FALSE(json::parse(payload, nullptr, false).is_discarded());  // the twin
  const DecodeError e = ExpectError(payload, true);
  EXPECT_EQ(e.code, ErrorCode::kMalformed);
  EXPECT_EQ(e.message, "payload is not valid JSON");
}

TEST(ProtocolPayload, InvalidUtf8InsideAStringIsMalformed) {
  for (const std::string& bad : {
           std::string("\xFF"),              // never valid
           std::string("\xC3"),              // truncated 2-byte sequence
           std::string("\xC0\xAF"),          // overlong '/'
           std::string("\xED\xA0\x80"),      // UTF-16 surrogate encoded in UTF-8
           std::string("\xF4\x90\x80\x80"),  // above U+10FFFF
       }) {
    const std::string payload =
        R"({"v":2,"type":"progress","id":1,"state":"tool","text":"a)" + bad + R"(b"})";
    const DecodeError e = ExpectError(payload, true);
    EXPECT_EQ(e.code, ErrorCode::kMalformed);
    EXPECT_EQ(e.message, "payload is not valid JSON");
  }
  // A lone surrogate escape is invalid too; a pair is fine.
  EXPECT_EQ(ExpectError(R"({"v":2,"type":"progress","id":1,"state":"\ud800"})", true).code,
            ErrorCode::kMalformed);
  const Message m =
      ExpectMessage(R"({"v":2,"type":"progress","id":1,"state":"\ud83d\ude00"})", true);
  EXPECT_EQ(std::get<Progress>(m.body).state, "\xF0\x9F\x98\x80");
}

// A model_call whose body nests so that the deepest bracket is at `levels`, counting the
// message object itself (levels >= 3).
std::string NestedArrays(int levels) {
  return R"({"v":2,"type":"model_call","id":1,"messages":[],"body":{"a":)" +
         std::string(levels - 2, '[') + std::string(levels - 2, ']') + "}}";
}

TEST(ProtocolPayload, NestingDeeperThan128IsRefusedBeforeParsing) {
  const DecodeError e = ExpectError(NestedArrays(129), true);
  EXPECT_EQ(e.code, ErrorCode::kMalformed);
  EXPECT_EQ(e.message, "payload nests deeper than 128 levels");
  // Refused before parsing, so even an unterminated hostile prefix is answered the same way.
  EXPECT_EQ(ExpectError(std::string(100000, '['), true).message,
            "payload nests deeper than 128 levels");
}

TEST(ProtocolPayload, NestingUpTo128IsAccepted) {
  for (int levels : {100, 128}) {
    SCOPED_TRACE(levels);
    const Message m = ExpectMessage(NestedArrays(levels), true);
    // Re-encodes (dump is recursive; the limit keeps it safe).
    auto frame = EncodeMessage(m);
    EXPECT_TRUE(frame.ok());
  }
  ExpectMessage(
      R"({"v":2,"type":"model_call","id":1,"messages":[],"body":{"a":{"b":[[{"c":[]}]]}}})", true);
}

TEST(ProtocolPayload, BracketsInsideStringsDoNotCountAsNesting) {
  const std::string deep_text(300, '[');
  const std::string payload =
      json{{"v", 2}, {"type", "progress"}, {"id", 1}, {"state", deep_text + "\\\"{{{" + deep_text}}
          .dump();
  const Message m = ExpectMessage(payload, true);
  EXPECT_EQ(std::get<Progress>(m.body).state.size(), 2 * deep_text.size() + 5);
}

// ---- framing ----

TEST(FrameDecoder, ByteAtATimeFeedingYieldsEachFrameOnce) {
  const std::string a = R"({"v":2,"type":"ack","id":1})";
  const std::string b = R"({"v":2,"type":"ack","id":2})";
  const std::string stream = Frame(a) + Frame(b);
  FrameDecoder d;
  std::vector<std::string> got;
  for (char c : stream) {
    ASSERT_TRUE(d.Feed(std::string_view(&c, 1)).ok());
    while (auto p = d.Next()) got.push_back(*p);
  }
  EXPECT_EQ(got, (std::vector<std::string>{a, b}));
  EXPECT_EQ(d.Pending(), 0U);
  EXPECT_FALSE(d.failed());
}

TEST(FrameDecoder, TwoFramesInOneFeed) {
  FrameDecoder d;
  ASSERT_TRUE(d.Feed(Frame("first") + Frame("second!")).ok());
  EXPECT_EQ(d.Next(), "first");
  EXPECT_EQ(d.Next(), "second!");
  EXPECT_EQ(d.Next(), std::nullopt);
  EXPECT_EQ(d.Pending(), 0U);
}

TEST(FrameDecoder, FrameSplitAcrossFeedsIncludingTheHeader) {
  const std::string stream = Frame("hello world") + Frame("x");
  FrameDecoder d;
  ASSERT_TRUE(d.Feed(stream.substr(0, 2)).ok());  // half a header
  EXPECT_EQ(d.Next(), std::nullopt);
  EXPECT_EQ(d.Pending(), 2U);
  ASSERT_TRUE(d.Feed(stream.substr(2, 7)).ok());  // rest of header + 5 payload bytes
  EXPECT_EQ(d.Next(), std::nullopt);
  EXPECT_EQ(d.Pending(), 9U);
  ASSERT_TRUE(d.Feed(stream.substr(9, 8)).ok());  // rest of frame 1 + 2 bytes of header 2
  EXPECT_EQ(d.Next(), "hello world");
  EXPECT_EQ(d.Next(), std::nullopt);
  EXPECT_EQ(d.Pending(), 2U);
  ASSERT_TRUE(d.Feed(stream.substr(17)).ok());
  EXPECT_EQ(d.Next(), "x");
  EXPECT_EQ(d.Pending(), 0U);
}

TEST(FrameDecoder, PendingCountsAHalfFrame) {
  FrameDecoder d;
  const std::string f = Frame("0123456789");
  ASSERT_TRUE(d.Feed(f.substr(0, 9)).ok());
  EXPECT_EQ(d.Pending(), 9U);  // what a caller at EOF reports as a truncated frame
  EXPECT_EQ(d.Next(), std::nullopt);
  EXPECT_EQ(d.Pending(), 9U);  // Next() without a whole frame consumes nothing
  EXPECT_FALSE(d.failed());
}

TEST(FrameDecoder, ZeroLengthHeaderFails) {
  FrameDecoder d;
  const Status s = d.Feed(Header4(0));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().Message(), HasSubstr("zero-length frame"));
  EXPECT_TRUE(d.failed());
  EXPECT_EQ(d.Next(), std::nullopt);
}

TEST(FrameDecoder, HeaderAboveTheLimitFailsAtOnceWithoutBufferingThePayload) {
  FrameDecoder d;
  // Only the 4 header bytes arrive: the decoder must refuse now, not wait for 16 MiB + 1.
  const Status s = d.Feed(Header4(kMaxFrameBytes + 1));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().Message(), HasSubstr("16777217 bytes is above the 16777216-byte limit"));
  EXPECT_TRUE(d.failed());
  EXPECT_LE(d.Pending(), kHeaderBytes);

  FrameDecoder max_header;
  EXPECT_FALSE(max_header.Feed(Header4(0xFFFFFFFFU)).ok());

  // The header arriving one byte at a time fails on its 4th byte.
  FrameDecoder slow(16);
  const std::string h = Header4(17);
  ASSERT_TRUE(slow.Feed(h.substr(0, 3)).ok());
  EXPECT_FALSE(slow.Feed(h.substr(3)).ok());
  EXPECT_TRUE(slow.failed());
}

TEST(FrameDecoder, AnOversizedHeaderAfterAGoodFrameFailsWhenReached) {
  FrameDecoder d(16);
  ASSERT_TRUE(d.Feed(Frame("good") + Header4(17)).ok());  // only the first header is checked here
  EXPECT_EQ(d.Next(), "good");  // the whole frame before the bad header is still delivered
  EXPECT_TRUE(d.failed());      // ... and the bad header is seen as soon as it is at the front
  EXPECT_EQ(d.Next(), std::nullopt);
}

TEST(FrameDecoder, ExactlyAtTheLimitIsAccepted) {
  FrameDecoder small(16);
  const std::string p16(16, 'x');
  ASSERT_TRUE(small.Feed(Frame(p16)).ok());
  EXPECT_EQ(small.Next(), p16);

  FrameDecoder d;
  const std::string big(kMaxFrameBytes, 'y');
  auto frame = EncodeFrame(big);
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(frame->size(), kHeaderBytes + kMaxFrameBytes);
  ASSERT_TRUE(d.Feed(*frame).ok());
  auto p = d.Next();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->size(), kMaxFrameBytes);
  EXPECT_FALSE(d.failed());
}

TEST(FrameDecoder, TheFailedStateSticks) {
  FrameDecoder d(8);
  ASSERT_FALSE(d.Feed(Header4(9)).ok());
  // A perfectly good frame afterwards is refused: the stream cannot be resynchronised.
  const Status again = d.Feed(Frame("ok"));
  EXPECT_FALSE(again.ok());
  EXPECT_THAT(again.error().Message(), HasSubstr("already failed"));
  EXPECT_EQ(d.Next(), std::nullopt);
  EXPECT_TRUE(d.failed());
}

// The broker tells a zero-length frame (malformed) from an oversized one (too large) by the
// error's code, never by its text: each failure carries its own code.
TEST(FrameDecoder, EachFramingFailureHasItsOwnCode) {
  FrameDecoder zero;
  const Status z = zero.Feed(Header4(0));
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.error().code, Error::Code::kMalformed) << CodeName(z.error().code);

  FrameDecoder big(16);
  const Status b = big.Feed(Header4(17));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, Error::Code::kTooLarge) << CodeName(b.error().code);

  // Split across feeds, the header is judged on its last byte, with the same codes.
  FrameDecoder slow_zero;
  ASSERT_TRUE(slow_zero.Feed(std::string(3, '\0')).ok());
  const Status sz = slow_zero.Feed(std::string(1, '\0'));
  ASSERT_FALSE(sz.ok());
  EXPECT_EQ(sz.error().code, Error::Code::kMalformed);

  // Once failed, a feed is refused as an operation on a dead stream, not as a new frame problem.
  const Status again = big.Feed(Frame("ok"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, Error::Code::kFailed);
}

TEST(FrameEncoder, APayloadAboveTheLimitIsTooLarge) {
  const auto frame = EncodeFrame(std::string(kMaxFrameBytes + 1, 'x'));
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.error().code, Error::Code::kTooLarge);
}

TEST(FrameDecoder, ManyFramesThroughOneDecoderKeepBufferBounded) {
  // Consumed bytes are compacted away; a long-lived connection does not accumulate them.
  FrameDecoder d;
  const std::string f = Frame(std::string(1000, 'z'));
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(d.Feed(f.substr(0, 700)).ok());
    ASSERT_TRUE(d.Feed(f.substr(700)).ok());
    auto p = d.Next();
    ASSERT_TRUE(p.has_value());
    ASSERT_EQ(p->size(), 1000U);
    ASSERT_EQ(d.Pending(), 0U);
  }
}

TEST(EncodeFrame, AboveTheLimitIsRefused) {
  const std::string too_big(kMaxFrameBytes + 1, 'x');
  auto frame = EncodeFrame(too_big);
  ASSERT_FALSE(frame.ok());
  EXPECT_THAT(frame.error().Message(), HasSubstr("above the 16777216-byte frame limit"));
  auto json_frame = EncodeJsonFrame(json{{"output", too_big}});
  EXPECT_FALSE(json_frame.ok());
}

TEST(EncodeFrame, InvalidUtf8InAStringStillMakesADecodableFrame) {
  // A binary tool output that slipped through: replaced with U+FFFD, never thrown on.
  const Message m =
      Make(Kind::kToolResult, 8, ToolResult{7, true, "", "bin\xFF\xFE\xC3(end", {}, ""});
  auto frame = EncodeMessage(m);
  ASSERT_TRUE(frame.ok());
  FrameDecoder d;
  ASSERT_TRUE(d.Feed(*frame).ok());
  auto payload = d.Next();
  ASSERT_TRUE(payload.has_value());
  const Message back = ExpectMessage(*payload, true);
  const std::string& out = std::get<ToolResult>(back.body).output;
  EXPECT_THAT(out, ::testing::StartsWith("bin\xEF\xBF\xBD"));
  EXPECT_THAT(out, ::testing::EndsWith("(end"));
  EXPECT_EQ(back.header.id, 8U);
}

}  // namespace
}  // namespace cagent::protocol
