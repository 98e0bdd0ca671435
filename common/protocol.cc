#include "common/protocol.h"

#include <array>
#include <charconv>
#include <utility>

#include "common/json_text.h"

namespace cagent::protocol {

nlohmann::json UsageJson(const Usage& u) {
  nlohmann::json out{{"input_tokens", u.input_tokens}, {"output_tokens", u.output_tokens}};
  if (u.cache_read_tokens != 0) out["cache_read_tokens"] = u.cache_read_tokens;
  if (u.cache_write_tokens != 0) out["cache_write_tokens"] = u.cache_write_tokens;
  if (u.reasoning_tokens != 0) out["reasoning_tokens"] = u.reasoning_tokens;
  return out;
}

namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 16> kKindNames = {
    "hello",  "model_call", "tool_request", "tool_result", "progress", "next_call",
    "finish", "welcome",    "model_result", "decision",    "approval", "result_ack",
    "ack",    "error",      "shutdown",     "cancel"};

constexpr std::array<std::string_view, 12> kErrorNames = {
    "malformed",      "too_large",     "unknown_type",     "bad_version",
    "out_of_order",   "duplicate_id",  "budget_exhausted", "loop_detected",
    "provider_error", "provider_auth", "unavailable",      "internal"};

constexpr std::array<std::string_view, 3> kRoleNames = {"user", "assistant", "tool"};
constexpr std::array<std::string_view, 5> kStopNames = {"end", "tool_calls", "max_tokens",
                                                        "refused", "other"};

constexpr int kMaxDepth = 128;
// Upper bound of a protocol version number on the wire.
constexpr std::uint64_t kMaxSmallInt = 1000;
// Longest prefix of a peer's unknown "type" echoed back in the error message.
constexpr std::size_t kMaxEchoBytes = 64;

// `text` cut to at most `limit` bytes without splitting a UTF-8 sequence (the input came from the
// JSON parser, so it is valid UTF-8; a cut in the middle of a character would make the error
// reply and the audit entry carry invalid UTF-8).
std::string Truncated(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) return std::string(text);
  std::size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

constexpr std::array<std::string_view, 3> kVerdictNames = {"allow", "ask", "deny"};

// Field readers: each records the first problem in `error` and returns a default. Values are
// moved out of `object` (a model call's body can be megabytes; the parsed object is discarded
// after its fields are read), so read each key once.
class Reader {
 public:
  explicit Reader(json& object) : object_(object) {}

  std::string String(const char* key, bool required = true) {
    json* v = Find(key, required);
    if (v == nullptr) return {};
    if (!v->is_string()) return Fail<std::string>(key, "a string");
    return std::move(v->get_ref<std::string&>());
  }
  std::uint64_t Unsigned(const char* key, bool required = true) {
    const json* v = Find(key, required);
    if (v == nullptr) return 0;
    if (!v->is_number_unsigned()) return Fail<std::uint64_t>(key, "a non-negative integer");
    return v->get<std::uint64_t>();
  }
  bool Bool(const char* key, bool required = true) {
    const json* v = Find(key, required);
    if (v == nullptr) return false;
    if (!v->is_boolean()) return Fail<bool>(key, "true or false");
    return v->get<bool>();
  }
  json Object(const char* key, bool required = true) {
    json* v = Find(key, required);
    if (v == nullptr) return json::object();
    if (!v->is_object()) return Fail<json>(key, "an object");
    return std::move(*v);
  }
  // An array, moved out; an empty one when absent (and not required).
  json Array(const char* key, bool required = true) {
    json* v = Find(key, required);
    if (v == nullptr) return json::array();
    if (!v->is_array()) return Fail<json>(key, "an array");
    return std::move(*v);
  }
  // Records `message` as the problem when there is none yet (for checks across fields).
  void Problem(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }
  std::vector<std::string> Strings(const char* key, bool required = true) {
    json* v = Find(key, required);
    std::vector<std::string> out;
    if (v == nullptr) return out;
    if (!v->is_array()) return Fail<std::vector<std::string>>(key, "an array of strings");
    out.reserve(v->size());
    for (json& item : *v) {
      if (!item.is_string()) return Fail<std::vector<std::string>>(key, "an array of strings");
      out.push_back(std::move(item.get_ref<std::string&>()));
    }
    return out;
  }
  // A protocol version: a non-negative integer no larger than kMaxSmallInt (so it fits an int
  // and re-encodes to the same value).
  int SmallInt(const char* key, bool required = true) {
    const json* v = Find(key, required);
    if (v == nullptr) return 0;
    if (!v->is_number_unsigned() || v->get<std::uint64_t>() > kMaxSmallInt) {
      return Fail<int>(key, "a small non-negative integer");
    }
    return v->get<int>();
  }
  std::vector<int> Ints(const char* key) {
    const json* v = Find(key, true);
    std::vector<int> out;
    if (v == nullptr) return out;
    if (!v->is_array()) return Fail<std::vector<int>>(key, "an array of integers");
    for (const json& item : *v) {
      if (!item.is_number_unsigned() || item.get<std::uint64_t>() > kMaxSmallInt) {
        return Fail<std::vector<int>>(key, "an array of small integers");
      }
      out.push_back(item.get<int>());
    }
    return out;
  }
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  json* Find(const char* key, bool required) {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) {
      if (required && error_.empty()) error_ = std::string("missing field \"") + key + "\"";
      return nullptr;
    }
    return &*it;
  }
  template <typename T>
  T Fail(const char* key, const char* expected) {
    if (error_.empty()) error_ = std::string("field \"") + key + "\" must be " + expected;
    return T{};
  }
  json& object_;
  std::string error_;
};

json ToolCallsJson(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& c : calls) {
    out.push_back({{"id", c.id},
                   {"name", c.name},
                   {"arguments", c.arguments},
                   {"arguments_error", c.arguments_error}});
  }
  return out;
}

json MessagesJson(const std::vector<ChatMessage>& messages) {
  json out = json::array();
  for (const ChatMessage& m : messages) {
    json item = {{"role", RoleName(m.role)}, {"text", m.text}};
    switch (m.role) {
      case Role::kAssistant:
        item["tool_calls"] = ToolCallsJson(m.tool_calls);
        break;
      case Role::kTool:
        item["call_id"] = m.call_id;
        item["is_error"] = m.is_error;
        break;
      case Role::kUser:
        break;
    }
    out.push_back(std::move(item));
  }
  return out;
}

// "tool_calls[3]: field \"id\" must be a string"-style problems; empty when `list` is good.
// Reads at most kMaxToolCallsPerTurn calls; ids and names are non-empty, at most kMaxIdBytes, and
// ids are unique within the list.
std::string ParseToolCalls(json& list, std::vector<ToolCall>& out) {
  if (!list.is_array()) return "must be an array";
  if (list.size() > kMaxToolCallsPerTurn) {
    return "has " + std::to_string(list.size()) + " calls (at most " +
           std::to_string(kMaxToolCallsPerTurn) + ")";
  }
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = "[" + std::to_string(i) + "]";
    if (!list[i].is_object()) return where + " must be an object";
    Reader r(list[i]);
    ToolCall c;
    c.id = r.String("id");
    c.name = r.String("name");
    c.arguments = r.Object("arguments", false);
    c.arguments_error = r.String("arguments_error", false);
    if (!r.error().empty()) return where + ": " + r.error();
    if (c.id.empty() || c.id.size() > kMaxIdBytes) {
      return where + ": \"id\" must be 1 to " + std::to_string(kMaxIdBytes) + " bytes";
    }
    if (c.name.empty() || c.name.size() > kMaxIdBytes) {
      return where + ": \"name\" must be 1 to " + std::to_string(kMaxIdBytes) + " bytes";
    }
    for (const ToolCall& seen : out) {
      if (seen.id == c.id) {
        return where + ": the id \"" + Truncated(c.id, kMaxEchoBytes) +
               "\" is used twice in one turn";
      }
    }
    out.push_back(std::move(c));
  }
  return {};
}

// The messages of a model_call; empty string when they are well-formed.
std::string ParseMessages(json& list, std::vector<ChatMessage>& out) {
  if (list.size() > kMaxMessages) {
    return "has " + std::to_string(list.size()) + " messages (at most " +
           std::to_string(kMaxMessages) + ")";
  }
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = "[" + std::to_string(i) + "]";
    if (!list[i].is_object()) return where + " must be an object";
    Reader r(list[i]);
    ChatMessage m;
    const std::string role = r.String("role");
    m.text = r.String("text", false);
    if (!r.error().empty()) return where + ": " + r.error();
    const auto parsed = ParseRole(role);
    if (!parsed) return where + ": \"role\" must be user, assistant or tool";
    m.role = *parsed;
    switch (m.role) {
      case Role::kUser:
        break;
      case Role::kAssistant: {
        json calls = r.Array("tool_calls", false);
        if (!r.error().empty()) return where + ": " + r.error();
        if (std::string why = ParseToolCalls(calls, m.tool_calls); !why.empty()) {
          return where + ".tool_calls" + why;
        }
        break;
      }
      case Role::kTool:
        m.call_id = r.String("call_id");
        m.is_error = r.Bool("is_error", false);
        if (!r.error().empty()) return where + ": " + r.error();
        if (m.call_id.empty() || m.call_id.size() > kMaxIdBytes) {
          return where + ": \"call_id\" must be 1 to " + std::to_string(kMaxIdBytes) + " bytes";
        }
        break;
    }
    out.push_back(std::move(m));
  }
  return {};
}

struct BodyToJson {
  json& out;
  void operator()(const Hello& m) const {
    out["agent"] = m.agent;
    out["protocols"] = m.protocols;
  }
  void operator()(const ModelCall& m) const {
    out["system"] = m.system;
    out["messages"] = MessagesJson(m.messages);
  }
  void operator()(const ToolRequest& m) const {
    out["call_id"] = m.call_id;
    out["tool"] = m.tool;
    out["args"] = m.args;
    out["paths"] = m.paths;
  }
  void operator()(const ToolResult& m) const {
    out["request"] = m.request;
    out["call_id"] = m.call_id;
    out["ok"] = m.ok;
    out["error_code"] = m.error_code;
    out["output"] = m.output;
    out["changed_paths"] = m.changed_paths;
  }
  void operator()(const Progress& m) const {
    out["state"] = m.state;
    out["text"] = m.text;
  }
  void operator()(const NextCall&) const {}
  void operator()(const Finish& m) const {
    out["outcome"] = m.outcome;
    out["summary"] = m.summary;
  }
  void operator()(const Welcome& m) const {
    out["protocol"] = m.protocol;
    out["run_id"] = m.run_id;
    out["workspace"] = m.workspace;
    out["home"] = m.home;
    out["task"] = m.task;
    out["mode"] = m.mode;
    out["policy_name"] = m.policy_name;
    out["policy_digest"] = m.policy_digest;
    out["policy_summary"] = m.policy_summary;
    out["policy_source"] = m.policy_source;
    out["tools"] = m.tools;
    out["model"] = json{{"provider", m.model.provider},
                        {"name", m.model.name},
                        {"context_window", m.model.context_window},
                        {"max_output_tokens", m.model.max_output_tokens}};
    out["max_turns"] = m.max_turns;
    out["command_timeout_ms"] = m.command_timeout_ms;
    out["command_output_bytes"] = m.command_output_bytes;
  }
  void operator()(const ModelResult& m) const {
    out["text"] = m.answer.text;
    out["tool_calls"] = ToolCallsJson(m.answer.tool_calls);
    out["stop_reason"] = StopReasonName(m.answer.stop_reason);
    out["usage"] = UsageJson(m.usage);
    out["turn"] = m.turn;
    out["max_turns"] = m.max_turns;
    out["max_tokens"] = m.max_tokens;
  }
  void operator()(const Decision& m) const {
    out["verdict"] = VerdictName(m.verdict);
    out["pending"] = m.pending;
    out["rule"] = m.rule;
    out["location"] = m.location;
    out["reason"] = m.reason;
    out["message"] = m.message;
  }
  void operator()(const Approval& m) const {
    out["verdict"] = VerdictName(m.verdict);
    out["scope"] = m.scope;
    out["message"] = m.message;
  }
  void operator()(const ResultAck& m) const {
    out["output"] = m.output;
    out["truncated"] = m.truncated;
  }
  void operator()(const Ack&) const {}
  void operator()(const ErrorReply& m) const {
    out["code"] = ErrorCodeName(m.code);
    out["message"] = m.message;
  }
  void operator()(const Shutdown& m) const {
    out["status"] = m.status;
    out["reason"] = m.reason;
  }
  void operator()(const Cancel& m) const { out["reason"] = m.reason; }
};

// ---- the direct encoder ----
//
// Writes the text json::dump gives for ToJson(message), without building the json value: an
// object's keys in the order nlohmann's std::map keeps them (byte order), no spaces, strings
// through AppendJsonString (the same escapes and the same U+FFFD replacement), numbers in
// decimal. Each kind lists its keys, the header's "id", "type" and "v" included, already sorted;
// the protocol tests compare every kind's output with the json path.
class TextObject {
 public:
  explicit TextObject(std::string& out) : out_(out) { out_ += '{'; }
  TextObject(const TextObject&) = delete;
  TextObject& operator=(const TextObject&) = delete;
  ~TextObject() { out_ += '}'; }

  TextObject& Str(std::string_view key, std::string_view value) {
    Key(key);
    AppendJsonString(out_, value);
    return *this;
  }
  TextObject& Uint(std::string_view key, std::uint64_t value) {
    Key(key);
    Number(value);
    return *this;
  }
  TextObject& Int(std::string_view key, int value) {
    Key(key);
    Number(value);
    return *this;
  }
  TextObject& Bool(std::string_view key, bool value) {
    Key(key);
    out_ += value ? "true" : "false";
    return *this;
  }
  TextObject& Strings(std::string_view key, const std::vector<std::string>& values) {
    Key(key);
    out_ += '[';
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out_ += ',';
      AppendJsonString(out_, values[i]);
    }
    out_ += ']';
    return *this;
  }
  TextObject& Value(std::string_view key, const json& value) {
    Key(key);
    out_ += JsonText(value);
    return *this;
  }

 private:
  // Keys are this file's literals: plain ASCII, nothing to escape.
  void Key(std::string_view key) {
    if (!first_) out_ += ',';
    first_ = false;
    out_ += '"';
    out_ += key;
    out_ += "\":";
  }
  template <typename T>
  void Number(T value) {
    std::array<char, 24> digits{};
    const auto end = std::to_chars(digits.data(), digits.data() + digits.size(), value).ptr;
    out_.append(digits.data(), end);
  }
  std::string& out_;
  bool first_ = true;
};

// Writes the payload of one message; false for the kinds left to ToJson.
struct BodyToText {
  const Header& h;
  std::string& out;

  [[nodiscard]] std::string_view Type() const { return KindName(h.kind); }

  bool operator()(const ToolRequest& m) const {
    TextObject(out)
        .Value("args", m.args)
        .Str("call_id", m.call_id)
        .Uint("id", h.id)
        .Strings("paths", m.paths)
        .Str("tool", m.tool)
        .Str("type", Type())
        .Int("v", h.version);
    return true;
  }
  bool operator()(const ToolResult& m) const {
    TextObject(out)
        .Str("call_id", m.call_id)
        .Strings("changed_paths", m.changed_paths)
        .Str("error_code", m.error_code)
        .Uint("id", h.id)
        .Bool("ok", m.ok)
        .Str("output", m.output)
        .Uint("request", m.request)
        .Str("type", Type())
        .Int("v", h.version);
    return true;
  }
  bool operator()(const Progress& m) const {
    TextObject(out)
        .Uint("id", h.id)
        .Str("state", m.state)
        .Str("text", m.text)
        .Str("type", Type())
        .Int("v", h.version);
    return true;
  }
  bool operator()(const NextCall&) const { return Bare(); }
  bool operator()(const Finish& m) const {
    TextObject(out)
        .Uint("id", h.id)
        .Str("outcome", m.outcome)
        .Str("summary", m.summary)
        .Str("type", Type())
        .Int("v", h.version);
    return true;
  }
  bool operator()(const Decision& m) const {
    TextObject(out)
        .Uint("id", h.id)
        .Str("location", m.location)
        .Str("message", m.message)
        .Bool("pending", m.pending)
        .Str("reason", m.reason)
        .Str("rule", m.rule)
        .Str("type", Type())
        .Int("v", h.version)
        .Str("verdict", VerdictName(m.verdict));
    return true;
  }
  bool operator()(const Approval& m) const {
    TextObject(out)
        .Uint("id", h.id)
        .Str("message", m.message)
        .Str("scope", m.scope)
        .Str("type", Type())
        .Int("v", h.version)
        .Str("verdict", VerdictName(m.verdict));
    return true;
  }
  bool operator()(const ResultAck& m) const {
    TextObject(out)
        .Uint("id", h.id)
        .Str("output", m.output)
        .Bool("truncated", m.truncated)
        .Str("type", Type())
        .Int("v", h.version);
    return true;
  }
  bool operator()(const Ack&) const { return Bare(); }
  bool operator()(const ErrorReply& m) const {
    TextObject(out)
        .Str("code", ErrorCodeName(m.code))
        .Uint("id", h.id)
        .Str("message", m.message)
        .Str("type", Type())
        .Int("v", h.version);
    return true;
  }
  bool operator()(const Shutdown& m) const {
    TextObject(out)
        .Uint("id", h.id)
        .Str("reason", m.reason)
        .Str("status", m.status)
        .Str("type", Type())
        .Int("v", h.version);
    return true;
  }
  bool operator()(const Cancel& m) const {
    TextObject(out)
        .Uint("id", h.id)
        .Str("reason", m.reason)
        .Str("type", Type())
        .Int("v", h.version);
    return true;
  }
  // Large or rare: hello, model_call, welcome, model_result.
  template <typename Other>
  bool operator()(const Other&) const {
    return false;
  }

 private:
  bool Bare() const {
    TextObject(out).Uint("id", h.id).Str("type", Type()).Int("v", h.version);
    return true;
  }
};

Error FrameTooLarge(std::size_t payload_bytes) {
  return PlainError("encode frame", "payload of " + std::to_string(payload_bytes) +
                                        " bytes is above the " + std::to_string(kMaxFrameBytes) +
                                        "-byte frame limit")
      .WithCode(Error::Code::kTooLarge);
}

// Parses the body of `kind` from `object`; an empty error means success.
std::pair<Body, std::string> ParseBody(Kind kind, json& object) {
  Reader r(object);
  Body body;
  switch (kind) {
    case Kind::kHello: {
      Hello m;
      m.agent = r.String("agent");
      m.protocols = r.Ints("protocols");
      body = std::move(m);
      break;
    }
    case Kind::kModelCall: {
      ModelCall m;
      m.system = r.String("system", false);
      json messages = r.Array("messages");
      if (!r.error().empty()) break;
      if (std::string why = ParseMessages(messages, m.messages); !why.empty()) {
        return {Body{}, "messages" + why};
      }
      body = std::move(m);
      break;
    }
    case Kind::kToolRequest: {
      ToolRequest m;
      m.call_id = r.String("call_id");
      m.tool = r.String("tool");
      m.args = r.Object("args");
      m.paths = r.Strings("paths", false);
      body = std::move(m);
      break;
    }
    case Kind::kToolResult: {
      ToolResult m;
      m.request = r.Unsigned("request");
      m.call_id = r.String("call_id", false);
      m.ok = r.Bool("ok");
      m.error_code = r.String("error_code", false);
      m.output = r.String("output");
      m.changed_paths = r.Strings("changed_paths", false);
      body = std::move(m);
      break;
    }
    case Kind::kProgress:
      body = Progress{r.String("state"), r.String("text", false)};
      break;
    case Kind::kNextCall:
      body = NextCall{};
      break;
    case Kind::kFinish:
      body = Finish{r.String("outcome"), r.String("summary", false)};
      break;
    case Kind::kWelcome: {
      Welcome m;
      m.protocol = r.SmallInt("protocol");
      m.run_id = r.String("run_id");
      m.workspace = r.String("workspace");
      m.home = r.String("home", false);
      m.task = r.String("task");
      m.mode = r.String("mode", false);
      m.policy_name = r.String("policy_name");
      m.policy_digest = r.String("policy_digest");
      m.policy_summary = r.String("policy_summary", false);
      m.policy_source = r.String("policy_source", false);
      m.tools = r.Strings("tools");
      json model = r.Object("model");
      Reader mr(model);
      m.model.provider = mr.String("provider");
      m.model.name = mr.String("name", false);
      m.model.context_window = mr.Unsigned("context_window", false);
      m.model.max_output_tokens = mr.Unsigned("max_output_tokens", false);
      m.max_turns = r.Unsigned("max_turns", false);
      m.command_timeout_ms = r.Unsigned("command_timeout_ms", false);
      m.command_output_bytes = r.Unsigned("command_output_bytes", false);
      if (r.error().empty() && !mr.error().empty()) return {Body{}, "model: " + mr.error()};
      body = std::move(m);
      break;
    }
    case Kind::kModelResult: {
      ModelResult m;
      m.answer.text = r.String("text", false);
      json calls = r.Array("tool_calls", false);
      const std::string stop = r.String("stop_reason");
      if (!r.error().empty()) break;
      if (std::string why = ParseToolCalls(calls, m.answer.tool_calls); !why.empty()) {
        return {Body{}, "tool_calls" + why};
      }
      const auto reason = ParseStopReason(stop);
      if (!reason) {
        return {Body{},
                "field \"stop_reason\" must be end, tool_calls, max_tokens, refused or other"};
      }
      m.answer.stop_reason = *reason;
      m.max_tokens = r.Unsigned("max_tokens", false);
      json usage = r.Object("usage", false);
      Reader ur(usage);
      m.usage.input_tokens = ur.Unsigned("input_tokens", false);
      m.usage.output_tokens = ur.Unsigned("output_tokens", false);
      m.usage.cache_read_tokens = ur.Unsigned("cache_read_tokens", false);
      m.usage.cache_write_tokens = ur.Unsigned("cache_write_tokens", false);
      m.usage.reasoning_tokens = ur.Unsigned("reasoning_tokens", false);
      m.turn = r.Unsigned("turn");
      m.max_turns = r.Unsigned("max_turns", false);
      if (r.error().empty() && !ur.error().empty()) return {Body{}, "usage: " + ur.error()};
      body = std::move(m);
      break;
    }
    case Kind::kDecision: {
      Decision m;
      auto verdict = ParseVerdict(r.String("verdict"));
      m.pending = r.Bool("pending", false);
      m.rule = r.String("rule", false);
      m.location = r.String("location", false);
      m.reason = r.String("reason", false);
      m.message = r.String("message", false);
      if (r.error().empty() && !verdict) {
        return {Body{}, "field \"verdict\" must be allow, ask or deny"};
      }
      if (verdict) m.verdict = *verdict;
      body = std::move(m);
      break;
    }
    case Kind::kApproval: {
      Approval m;
      auto verdict = ParseVerdict(r.String("verdict"));
      m.scope = r.String("scope");
      m.message = r.String("message", false);
      if (r.error().empty() && (!verdict || *verdict == Verdict::kAsk)) {
        return {Body{}, "field \"verdict\" must be allow or deny"};
      }
      if (verdict) m.verdict = *verdict;
      body = std::move(m);
      break;
    }
    case Kind::kResultAck:
      body = ResultAck{r.String("output"), r.Bool("truncated", false)};
      break;
    case Kind::kAck:
      body = Ack{};
      break;
    case Kind::kError: {
      ErrorReply m;
      auto code = ParseErrorCode(r.String("code"));
      m.message = r.String("message", false);
      // An unknown code from a newer peer is still an error; keep it readable.
      m.code = code.value_or(ErrorCode::kInternal);
      body = std::move(m);
      break;
    }
    case Kind::kShutdown:
      body = Shutdown{r.String("status"), r.String("reason", false)};
      break;
    case Kind::kCancel:
      body = Cancel{r.String("reason", false)};
      break;
  }
  return {std::move(body), r.error()};
}

}  // namespace

std::string_view KindName(Kind kind) { return kKindNames[static_cast<std::size_t>(kind)]; }

std::optional<Kind> ParseKind(std::string_view name) {
  for (std::size_t i = 0; i < kKindNames.size(); ++i) {
    if (kKindNames[i] == name) return static_cast<Kind>(i);
  }
  return std::nullopt;
}

bool IsAgentKind(Kind kind) { return kind <= Kind::kFinish; }

std::string_view ErrorCodeName(ErrorCode code) {
  return kErrorNames[static_cast<std::size_t>(code)];
}

std::optional<ErrorCode> ParseErrorCode(std::string_view name) {
  for (std::size_t i = 0; i < kErrorNames.size(); ++i) {
    if (kErrorNames[i] == name) return static_cast<ErrorCode>(i);
  }
  return std::nullopt;
}

std::string_view RoleName(Role role) { return kRoleNames[static_cast<std::size_t>(role)]; }

std::optional<Role> ParseRole(std::string_view name) {
  for (std::size_t i = 0; i < kRoleNames.size(); ++i) {
    if (kRoleNames[i] == name) return static_cast<Role>(i);
  }
  return std::nullopt;
}

std::string_view StopReasonName(StopReason reason) {
  return kStopNames[static_cast<std::size_t>(reason)];
}

std::optional<StopReason> ParseStopReason(std::string_view name) {
  for (std::size_t i = 0; i < kStopNames.size(); ++i) {
    if (kStopNames[i] == name) return static_cast<StopReason>(i);
  }
  return std::nullopt;
}

std::string_view VerdictName(Verdict v) { return kVerdictNames[static_cast<std::size_t>(v)]; }

std::optional<Verdict> ParseVerdict(std::string_view name) {
  for (std::size_t i = 0; i < kVerdictNames.size(); ++i) {
    if (kVerdictNames[i] == name) return static_cast<Verdict>(i);
  }
  return std::nullopt;
}

Result<std::string> EncodeFrame(std::string_view payload) {
  if (payload.size() > kMaxFrameBytes) return FrameTooLarge(payload.size());
  const auto n = static_cast<std::uint32_t>(payload.size());
  std::string frame;
  frame.reserve(kHeaderBytes + payload.size());
  frame.push_back(static_cast<char>((n >> 24) & 0xff));
  frame.push_back(static_cast<char>((n >> 16) & 0xff));
  frame.push_back(static_cast<char>((n >> 8) & 0xff));
  frame.push_back(static_cast<char>(n & 0xff));
  frame.append(payload);
  return frame;
}

Result<std::string> EncodeJsonFrame(const nlohmann::json& message) {
  // Invalid UTF-8 in a string (e.g. a binary tool output) is replaced, not thrown on: the peer
  // must always get a well-formed object.
  return EncodeFrame(JsonText(message));
}

Status FrameDecoder::CheckHeader() {
  if (Pending() < kHeaderBytes) return Ok{};
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + start_);
  const std::uint32_t n = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
                          (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
  if (n == 0) {
    failed_ = true;
    return PlainError("read frame", "zero-length frame").WithCode(Error::Code::kMalformed);
  }
  if (n > max_) {
    failed_ = true;
    return PlainError("read frame", "frame of " + std::to_string(n) + " bytes is above the " +
                                        std::to_string(max_) + "-byte limit")
        .WithCode(Error::Code::kTooLarge);
  }
  return Ok{};
}

Status FrameDecoder::Feed(std::string_view bytes) {
  if (failed_) return PlainError("read frame", "stream already failed");
  // Compact before growing so a long-lived connection does not keep consumed bytes around.
  if (start_ > 0 && start_ >= buffer_.size() / 2) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  buffer_.append(bytes);
  return CheckHeader();
}

std::optional<std::string> FrameDecoder::Next() {
  if (failed_ || Pending() < kHeaderBytes) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + start_);
  const std::uint32_t n = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
                          (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
  if (Pending() < kHeaderBytes + n) return std::nullopt;
  std::string payload = buffer_.substr(start_ + kHeaderBytes, n);
  start_ += kHeaderBytes + n;
  if (start_ == buffer_.size()) {
    buffer_.clear();
    start_ = 0;
  }
  // The next header may already be here; validate it now so an oversized one fails early.
  if (!CheckHeader().ok()) return payload;  // failed_ is set; this payload is still whole
  return payload;
}

Result<std::string> EncodeMessage(const Message& message) {
  std::string frame;
  if (Status s = EncodeMessageInto(message, frame); !s.ok()) return std::move(s.error());
  return frame;
}

Status EncodeMessageInto(const Message& message, std::string& frame) {
  frame.assign(kHeaderBytes, '\0');  // the length is filled in below
  if (!std::visit(BodyToText{message.header, frame}, message.body)) {
    frame += JsonText(ToJson(message));
  }
  const std::size_t n = frame.size() - kHeaderBytes;
  if (n > kMaxFrameBytes) {
    frame.clear();
    return FrameTooLarge(n);
  }
  const auto n32 = static_cast<std::uint32_t>(n);
  frame[0] = static_cast<char>((n32 >> 24) & 0xff);
  frame[1] = static_cast<char>((n32 >> 16) & 0xff);
  frame[2] = static_cast<char>((n32 >> 8) & 0xff);
  frame[3] = static_cast<char>(n32 & 0xff);
  return Ok{};
}

json ToJson(const Message& message) {
  json out = json::object();
  out["v"] = message.header.version;
  out["type"] = KindName(message.header.kind);
  out["id"] = message.header.id;
  std::visit(BodyToJson{out}, message.body);
  return out;
}

Message Make(Kind kind, std::uint64_t id, Body body) {
  return Message{Header{kVersion, kind, id}, std::move(body)};
}

std::variant<Message, DecodeError> Decode(std::string_view payload, bool from_agent) {
  // nlohmann's parser is iterative, but dumping and destroying are recursive: refuse deep nesting
  // before building anything (a hostile 16 MiB "[[[[..." would otherwise exhaust the stack).
  if (JsonDepth(payload, kMaxDepth) > static_cast<std::size_t>(kMaxDepth)) {
    return DecodeError{ErrorCode::kMalformed,
                       "payload nests deeper than " + std::to_string(kMaxDepth) + " levels",
                       {}};
  }
  json object = ParseJsonText(payload);
  if (object.is_discarded()) {
    return DecodeError{ErrorCode::kMalformed, "payload is not valid JSON", {}};
  }
  if (!object.is_object()) {
    return DecodeError{ErrorCode::kMalformed, "payload is not a JSON object", {}};
  }

  std::optional<std::uint64_t> id;
  if (auto it = object.find("id"); it != object.end() && it->is_number_unsigned()) {
    id = it->get<std::uint64_t>();
  }
  auto v = object.find("v");
  if (v == object.end() || !v->is_number_unsigned()) {
    return DecodeError{ErrorCode::kMalformed,
                       "protocol version \"v\" is missing or not a non-negative integer", id};
  }
  if (v->get<std::uint64_t>() != static_cast<std::uint64_t>(kVersion)) {
    return DecodeError{ErrorCode::kBadVersion,
                       "protocol version " + v->dump() + " is not spoken here (this side speaks " +
                           std::to_string(kVersion) + ")",
                       id};
  }
  auto type = object.find("type");
  if (type == object.end() || !type->is_string()) {
    return DecodeError{ErrorCode::kMalformed, "missing message \"type\"", id};
  }
  const auto kind = ParseKind(type->get_ref<const std::string&>());
  if (!kind || IsAgentKind(*kind) != from_agent) {
    const std::string name = Truncated(type->get_ref<const std::string&>(), kMaxEchoBytes);
    return DecodeError{ErrorCode::kUnknownType, "unknown message type \"" + name + "\"", id};
  }
  if (!id) {
    return DecodeError{ErrorCode::kMalformed, "missing or invalid request \"id\"", std::nullopt};
  }

  auto [body, error] = ParseBody(*kind, object);
  if (!error.empty()) {
    return DecodeError{ErrorCode::kMalformed, std::string(KindName(*kind)) + ": " + error, id};
  }
  return Message{Header{kVersion, *kind, *id}, std::move(body)};
}

}  // namespace cagent::protocol
