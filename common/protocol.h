// The agent <-> broker wire protocol, version 2 (docs/protocol.md is the prose reference).
//
// Both sides link this: the broker (launcher/broker/, trusted) and cagent-agent (agent/, confined).
// Each side treats what it receives as hostile: DecodeFrame() and Parse*() validate every field's
// presence and type and never throw; the caller turns a failure into an `error` reply.
//
// Transport: a SOCK_STREAM socketpair; the agent's end is inherited by the agent (fd number in
// CAGENT_BROKER_FD), with no path on disk. A frame is a 4-byte big-endian payload length followed
// by that many bytes of one UTF-8 JSON object. Every object carries "v" (protocol version), "type"
// (one of the kinds below) and "id".
//
// Conversation (agent's requests, each answered by exactly one reply carrying the same id):
//   hello        -> welcome | error     first message; anything before it is out of order
//   model_call   -> model_result | error   a provider-neutral conversation in, one neutral
//                                          assistant turn out; the broker alone builds the
//                                          provider's request (model, tools, max_tokens...)
//   tool_request -> decision | error    a decision with pending=true is followed later by one
//                                       approval message with the same id
//   tool_result  -> result_ack | error
//   progress     -> ack | error
//   finish       -> ack                 after which the broker closes the connection
// The broker may also send, unsolicited, one `shutdown` (id 0) before closing: a budget was
// reached, wall time expired, the operator cancelled, or the peer misbehaved too often.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/result.h"

namespace cagent::protocol {

// Version 2: model_call carries a neutral conversation and model_result a neutral turn (version 1
// carried provider-specific bodies both ways); tool_request must name a call id of the model's
// latest turn.
inline constexpr int kVersion = 2;
// Largest payload accepted, in bytes. A model call carries the whole conversation; 16 MiB holds a
// 1M-token context with room to spare. Anything larger is refused before it is buffered.
inline constexpr std::uint32_t kMaxFrameBytes = 16U << 20;
inline constexpr std::size_t kHeaderBytes = 4;
// Environment variable naming the agent's inherited socket fd.
inline constexpr const char* kBrokerFdEnv = "CAGENT_BROKER_FD";

// ---- framing ----

// Header + payload, ready to write. Fails only if the payload is larger than kMaxFrameBytes.
Result<std::string> EncodeFrame(std::string_view payload);
// Serialises `message` and frames it (invalid UTF-8 in strings is replaced, never thrown on).
Result<std::string> EncodeJsonFrame(const nlohmann::json& message);
// The frame of `message`: the bytes JsonText(ToJson(message)) would give, framed. The messages of
// the decision round trip (tool_request, decision, tool_result, result_ack) and the other small
// kinds are written as text directly, without building a json value; hello, welcome, model_call
// and model_result go through ToJson.
Result<std::string> EncodeMessage(const struct Message& message);
// EncodeMessage into `frame` (its contents replaced, its capacity kept, so a caller that sends one
// frame at a time can reuse one buffer). On failure (above kMaxFrameBytes) `frame` is cleared.
Status EncodeMessageInto(const struct Message& message, std::string& frame);

// Incremental frame splitter for a byte stream. Feed whatever read() returned; take complete
// payloads out. After an oversized or zero-length header the stream cannot be resynchronised:
// the decoder enters the failed state and the connection must be closed.
class FrameDecoder {
 public:
  explicit FrameDecoder(std::uint32_t max_frame_bytes = kMaxFrameBytes) : max_(max_frame_bytes) {}

  // Appends received bytes. Refused (and the decoder fails) when a header announces zero bytes
  // (Error::Code::kMalformed) or more than the maximum (kTooLarge); refused with kFailed once the
  // decoder has failed.
  Status Feed(std::string_view bytes);
  // The next complete payload, if one is buffered.
  std::optional<std::string> Next();
  // Bytes buffered that do not yet form a whole frame (a half frame at EOF is a protocol error).
  [[nodiscard]] std::size_t Pending() const { return buffer_.size() - start_; }
  [[nodiscard]] bool failed() const { return failed_; }

 private:
  Status CheckHeader();
  std::uint32_t max_;
  std::string buffer_;
  std::size_t start_ = 0;
  bool failed_ = false;
};

// ---- messages ----

enum class Kind : std::uint8_t {
  // agent -> broker
  kHello,
  kModelCall,
  kToolRequest,
  kToolResult,
  kProgress,
  kNextCall,  // a served session (welcome.mode "serve"): the next calls of the MCP client
  kFinish,
  // broker -> agent
  kWelcome,
  kModelResult,
  kDecision,
  kApproval,
  kResultAck,
  kAck,
  kError,
  kShutdown,
  kCancel,  // unsolicited: stop the tool call of tool_request `id` (a served session)
};
std::string_view KindName(Kind kind);
std::optional<Kind> ParseKind(std::string_view name);
bool IsAgentKind(Kind kind);

// Error codes carried by `error` replies (stable strings; the agent maps them to words).
enum class ErrorCode : std::uint8_t {
  kMalformed,        // not JSON, not an object, a field missing or of the wrong type
  kTooLarge,         // frame above the limit (the connection is then closed)
  kUnknownType,      // "type" not in the closed set, or a broker-only kind sent by the agent
  kBadVersion,       // "v" is not a version this side speaks
  kOutOfOrder,       // e.g. anything before hello, a second hello, a result for an unknown request
  kDuplicateId,      // an id reused while its request is outstanding, or not increasing
  kBudgetExhausted,  // the run's budget for this kind of request is spent (the run ends)
  kLoopDetected,     // the same call repeated / a short cycle; the reply explains
  kProviderError,    // the model provider failed (after retries); message says how
  kProviderAuth,     // 401/403 from the provider; message names the credential to check
  kUnavailable,      // the broker is shutting down
  kInternal,         // a broker bug; recorded
};
std::string_view ErrorCodeName(ErrorCode code);
std::optional<ErrorCode> ParseErrorCode(std::string_view name);

// What every message has.
struct Header {
  int version = kVersion;
  Kind kind = Kind::kError;
  std::uint64_t id = 0;
};

// -- agent -> broker --

struct Hello {
  std::string agent;           // "cagent-agent/0.1.0"
  std::vector<int> protocols;  // versions the agent speaks, e.g. [2]
};

// ---- the provider-neutral conversation ----
//
// What the agent may say to a model is message content and nothing else: which model, which
// parameters, which tools (and their schemas), how many tokens, streaming and credentials are the
// broker's. The broker builds each provider's request from these values and an allow-list.

// A tool call the model made. In a model_result the broker has filled every id (it makes one up
// when the provider gave none) and has parsed the arguments: `arguments` is always an object, and
// when the provider's arguments were unusable (not JSON, not an object) `arguments_error` says why
// and `arguments` is {}; such a call must not be executed (the agent answers it with an error).
struct ToolCall {
  std::string id;
  std::string name;
  nlohmann::json arguments = nlohmann::json::object();
  std::string arguments_error;
};

enum class Role : std::uint8_t { kUser, kAssistant, kTool };
std::string_view RoleName(Role role);  // "user" | "assistant" | "tool"
std::optional<Role> ParseRole(std::string_view name);

// One message of the conversation after the system text.
//   user:      text (the task, a nudge, a compaction summary)
//   assistant: text and/or tool_calls, exactly as a model_result gave them (the broker checks that
//              every call id, name and arguments are ones the model issued in this session)
//   tool:      call_id (a call of the assistant message before it), text (the result as the
//              model sees it), is_error
struct ChatMessage {
  Role role = Role::kUser;
  std::string text;
  std::vector<ToolCall> tool_calls;  // assistant only
  std::string call_id;               // tool only
  bool is_error = false;             // tool only
};

// Limits the decoder enforces on a model_call (beyond the frame size).
inline constexpr std::size_t kMaxMessages = 65536;
inline constexpr std::size_t kMaxToolCallsPerTurn = 512;
inline constexpr std::size_t kMaxIdBytes = 256;  // call ids and tool names

struct ModelCall {
  std::string system;                 // the system prompt (content)
  std::vector<ChatMessage> messages;  // in order; the first is normally the task (user)
};

// Why the model stopped, in neutral words:
//   end        it answered (OpenAI "stop", Anthropic "end_turn"/"stop_sequence", replay text only)
//   tool_calls it asked for tools
//   max_tokens it hit the output limit (the answer is cut off)
//   refused    the provider refused or filtered the answer (OpenAI "content_filter", Anthropic
//              "refusal")
//   other      anything else (the provider's own word is in the audit log)
enum class StopReason : std::uint8_t { kEnd, kToolCalls, kMaxTokens, kRefused, kOther };
std::string_view StopReasonName(StopReason reason);
std::optional<StopReason> ParseStopReason(std::string_view name);

// One assistant turn, provider-neutral.
struct AssistantTurn {
  std::string text;                  // the answer's text parts, concatenated
  std::vector<ToolCall> tool_calls;  // in the order the model made them; ids unique in the turn
  StopReason stop_reason = StopReason::kEnd;
};

// A tool call the model made, asked before it is executed. `call_id` must name a call of the
// model's latest turn that has not been asked about yet, and `tool` and `args` must be that call's
// name and arguments: anything else is denied (rule "model turn"). `paths` are the
// workspace-relative paths the agent resolved beneath the workspace (symlinks followed), which the
// broker decides on in addition to the path in `args`.
struct ToolRequest {
  std::string call_id;  // the model's id for the call (required)
  std::string tool;  // read_file, write_file, edit_file, list_dir, glob, grep, run_command, finish
  nlohmann::json args;  // the model's arguments (an object)
  std::vector<std::string> paths;
};

// The outcome of an executed (or refused-by-the-agent) tool call. The broker counts `output`'s
// bytes against the output budget, redacts it, and returns the text to give the model.
struct ToolResult {
  // Id of the tool_request this answers. 0 together with `call_id`: the agent refused the call
  // itself before asking (a served session; the toolbox could not prepare it), and `output` says
  // why; `ok` must then be false.
  std::uint64_t request = 0;
  bool ok = false;
  std::string error_code;                  // "" when ok; e.g. "not_found", "stale_read", "timeout"
  std::string output;                      // what the model will see (before redaction)
  std::vector<std::string> changed_paths;  // files the call wrote (workspace-relative)
  std::string call_id;                     // with request 0 (see above); "" otherwise
};

struct Progress {
  std::string state;  // "thinking", "tool", "compacting", ...
  std::string text;   // one line for the operator's display ("run_command: pytest -q")
};

// Asks for the next calls of a served session; answered by a model_result whose tool_calls are
// what the MCP client asked for (no fields).
struct NextCall {};

struct Finish {
  std::string outcome;  // "done" (the model called finish / answered) | "gave_up" | "error"
  std::string summary;  // for the human; never trusted as the run's outcome
};

// -- broker -> agent --

struct ModelInfo {
  std::string provider;                 // "openai" | "anthropic" | "replay"
  std::string name;                     // model name, informational inside the sandbox
  std::uint64_t context_window = 0;     // tokens
  std::uint64_t max_output_tokens = 0;  // tokens per response
};

struct Welcome {
  int protocol = kVersion;
  std::string run_id;
  std::string workspace;  // absolute path of the workspace inside the sandbox
  // What the profile's "~" means in this run (policy::Binding::home: the caller's home, bound at
  // the same path inside); "" when the caller has none. Not the sandbox's own HOME.
  std::string home;
  std::string task;  // the task text (untrusted data; for the first user message)
  // "task" (the agent's own model loop; also when absent) or "serve" (cagent mcp serve: the calls
  // come from an MCP client through next_call, and there is no model).
  std::string mode;
  std::string policy_name;
  std::string policy_digest;
  std::string policy_summary;  // a few lines the system prompt quotes (what is allowed)
  // The compiled policy in the language itself (policy::Dump); the agent compiles it to apply the
  // same path rules to files its tools meet (grep, glob, list_dir skip denied paths; reads and
  // writes refuse them naming the rule). Not a trust boundary: the broker decides every request.
  std::string policy_source;
  std::vector<std::string> tools;  // the tools this run enables, in schema order
  ModelInfo model;
  std::uint64_t max_turns = 0;             // 0 = unlimited
  std::uint64_t command_timeout_ms = 0;    // run_command ceiling
  std::uint64_t command_output_bytes = 0;  // run_command output cap
};

// What one model call used, as the provider counted it. input_tokens is all the input, cached or
// not; output_tokens all the output, reasoning included. The other three are parts of those that
// the provider reports separately (0 when it does not): on the wire they are written only when
// not 0.
struct Usage {
  std::uint64_t input_tokens = 0;
  std::uint64_t output_tokens = 0;
  std::uint64_t cache_read_tokens = 0;   // input read from the provider's prompt cache
  std::uint64_t cache_write_tokens = 0;  // input written to the prompt cache (Anthropic)
  std::uint64_t reasoning_tokens = 0;    // output spent on reasoning (OpenAI reports it)
};
// The usage as JSON: input_tokens and output_tokens always, the parts when not 0.
nlohmann::json UsageJson(const Usage& usage);

struct ModelResult {
  AssistantTurn answer;  // wire: "text", "tool_calls", "stop_reason" at the top level
  Usage usage;
  std::uint64_t turn = 0;        // 1-based, counted by the broker
  std::uint64_t max_turns = 0;   // 0 = unlimited
  std::uint64_t max_tokens = 0;  // the output-token cap the broker sent for this call
};

enum class Verdict : std::uint8_t { kAllow, kAsk, kDeny };
std::string_view VerdictName(Verdict v);
std::optional<Verdict> ParseVerdict(std::string_view name);

struct Decision {
  Verdict verdict = Verdict::kDeny;
  bool pending = false;  // ask: an approval message follows
  std::string rule;      // the deciding rule as written ("deny write **/.env")
  std::string location;  // "backend.cagent:12:5"
  std::string reason;    // short, for the log
  std::string message;   // for the model: what was refused and what to do instead
};

struct Approval {
  Verdict verdict = Verdict::kDeny;  // allow or deny
  std::string scope;                 // "once" | "run" | "denied" | "headless"
  std::string message;               // for the model when denied
};

struct ResultAck {
  std::string output;  // redacted output to give the model
  bool truncated = false;
};

struct ErrorReply {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

struct Shutdown {
  std::string status;  // "failed" | "cancelled"
  std::string reason;  // "tool-call budget (200) reached"
};

struct Ack {};

struct Cancel {
  std::string reason;  // "the client cancelled the call"
};

using Body =
    std::variant<Hello, ModelCall, ToolRequest, ToolResult, Progress, NextCall, Finish, Welcome,
                 ModelResult, Decision, Approval, ResultAck, Ack, ErrorReply, Shutdown, Cancel>;

struct Message {
  Header header;
  Body body;
};

// Builds the JSON object for `message` (header fields + the body's fields).
nlohmann::json ToJson(const Message& message);

// Parses and validates one payload. Failure carries the ErrorCode to reply with and a message
// naming the offending field. `from_agent` restricts the accepted kinds to the agent's (the
// broker's decoder) or to the broker's (the agent's decoder). Never throws.
struct DecodeError {
  ErrorCode code = ErrorCode::kMalformed;
  std::string message;
  std::optional<std::uint64_t> id;  // when the id could be read, for the error reply
};
std::variant<Message, DecodeError> Decode(std::string_view payload, bool from_agent);

// Convenience for building messages.
Message Make(Kind kind, std::uint64_t id, Body body);

}  // namespace cagent::protocol
