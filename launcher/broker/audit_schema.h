// The audit log's schema: the one list of event kinds the run's events.jsonl may contain, who may
// record each, which envelope fields it sets and its detail fields (name, JSON type, required or
// optional, meaning); a typed builder per kind, so a call site cannot misspell a kind or a field;
// a validator over a parsed line (used by `cagent log check` and the tests); and the Markdown
// rendering of the schema that docs/audit-log.md embeds (a test keeps the two equal).
//
// Pure data and functions: no I/O except ValidateAuditLogFile(), which reads one file. Runs in
// cagent (trusted); the broker, the run and `cagent log` all include it. Security teams read the
// log, so a change here is a change of a product surface: add a field as optional, never change a
// field's type or meaning, and update docs/audit-log.md (the schema test says how).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/protocol.h"
#include "common/result.h"

namespace cagent::launcher::broker {

// The deepest an audit entry read back may nest (cagent writes arguments that fit the protocol's
// 128 levels, inside an entry of a few); a line nested deeper is refused before it is parsed, as a
// tampered log must not take `cagent log` down (common/json_text.h, ParseJsonWithin).
inline constexpr std::size_t kMaxAuditEntryDepth = 256;

// Who did what an entry records. The broker writes the entries of a session and cagent those of
// the run around it; `actor` names the party whose action it is (an agent's malformed frame is
// the agent's, even though the broker records it).
enum class AuditActor : std::uint8_t {
  kAgent,     // the confined agent (untrusted): its requests as it sent them
  kBroker,    // the policy broker: its decisions, budgets, the model's answers it relayed
  kOperator,  // a person (or the headless approver) answering an approval
  kCagent,    // the run itself: state changes, workspace, patch capture, verification
  kCount,
};
std::string_view AuditActorName(AuditActor actor);  // "agent" | "broker" | "operator" | "cagent"
std::optional<AuditActor> ParseAuditActor(std::string_view name);

// Every kind of entry. The order is the order of the documentation (roughly the order of a run).
enum class AuditKind : std::uint8_t {
  kState,          // cagent: the run changed state
  kWorkspace,      // cagent: the disposable workspace was made
  kHello,          // agent: first message of the session
  kWelcome,        // broker: the session's terms given to the agent
  kModelCall,      // agent: a model call, as the broker will send it
  kModelResult,    // broker: the model's turn
  kModelError,     // broker: the provider failed
  kToolRequest,    // agent: a tool call it wants to make
  kDecision,       // broker: the verdict on a tool request
  kLoop,           // broker: loop detection refused a request
  kLoopState,      // broker: loop detection sees only part of the workspace
  kApproval,       // operator: an answer to an ask
  kToolResult,     // agent: the outcome of an allowed tool call
  kProgress,       // agent: a status line for the operator
  kFinish,         // agent: it says it is done (or gives up)
  kProtocolError,  // agent: a message the broker refused
  kBudget,         // broker: a budget ran out
  kShutdown,       // broker: the session ended
  kPatch,          // cagent: the change set git observed
  kVerifyTree,     // cagent: the fresh checkout verification runs on
  kVerify,         // cagent: one verification command's outcome
  kEgress,         // broker: a connection through the egress proxy, when it ended or was refused
  kMcpCall,        // broker: an MCP client's tools/call and its decision (mcp wrap / serve)
  kMcpResult,      // broker: what the MCP server answered to an allowed tools/call
  kMcpList,        // broker: a tools/list response as filtered for the client (mcp wrap)
  kSetup,          // cagent: one setup command's outcome (before the agent, or before verifying)
  kCount,
};
std::string_view AuditKindName(AuditKind kind);  // the "event" value on disk, e.g. "tool_request"
std::optional<AuditKind> ParseAuditKind(std::string_view name);

// The JSON types a field may have, as a bit set (a field of several types lists each).
enum AuditType : std::uint8_t {
  kAuditString = 1U << 0,
  kAuditCount = 1U << 1,    // a non-negative integer
  kAuditInteger = 1U << 2,  // any integer (e.g. an exit status, -1 when none)
  kAuditBoolean = 1U << 3,
  kAuditObject = 1U << 4,       // any JSON object
  kAuditStringList = 1U << 5,   // an array of strings
  kAuditIntegerList = 1U << 6,  // an array of integers
  kAuditObjectList = 1U << 7,   // an array of objects
};
using AuditTypes = std::uint8_t;
// "string", "count | string", ... as the documentation writes it.
std::string AuditTypesName(AuditTypes types);

struct AuditField {
  std::string_view name;
  AuditTypes types = kAuditString;
  bool required = true;
  std::string_view meaning;  // one line, Markdown allowed (backticks)
};

// Whether a kind sets one of the envelope's string fields (tool, args, verdict, rule, result).
// kNever: always "" for this kind. kOptional: set in some variants. kRequired: never "".
enum class AuditPresence : std::uint8_t { kNever, kOptional, kRequired };

struct AuditEnvelopeUse {
  AuditPresence presence = AuditPresence::kNever;
  std::string_view meaning;  // what the field holds for this kind
};

struct AuditEventSpec {
  AuditKind kind = AuditKind::kCount;
  std::string_view name;
  std::vector<AuditActor> actors;
  std::string_view meaning;  // one line
  AuditEnvelopeUse tool, args, verdict, rule, result;
  std::vector<AuditField> detail;
};

// The schema of one kind / of all kinds in AuditKind order. Static data; never fails.
const AuditEventSpec& AuditSpec(AuditKind kind);
std::span<const AuditEventSpec> AuditSpecs();

// The envelope: the fields every line has, in the order AuditLog writes them.
std::span<const AuditField> AuditEnvelope();

// ---- the event every writer hands to AuditLog::Append ----

// Built by the typed builders below, never by hand: kind and actor are the schema's enums (a kind
// or an actor cannot be misspelt) and the builders name every detail field. AuditLog::Append
// writes their names. Every member has a default initializer (-Wmissing-field-initializers stays
// quiet).
// One detail field kept as a typed value instead of a json member: the kinds written once per
// tool call (decision, tool_result) use these, so AuditLog::Append writes the line without
// building a json value per field. `name` is a schema field name (static text).
struct AuditDetailField {
  enum class Type : std::uint8_t { kCount, kBoolean, kString, kStringList };
  std::string_view name{};
  Type type = Type::kCount;
  std::uint64_t count = 0;          // kCount; kBoolean: 0 or 1
  std::string text{};               // kString
  std::vector<std::string> list{};  // kStringList
};

struct AuditEvent {
  AuditKind kind = AuditKind::kCount;     // kCount is no kind: written as "invalid"
  AuditActor actor = AuditActor::kCount;  // kCount is no actor: written as "invalid"
  std::string tool{};
  std::string args_digest{};
  std::string verdict{};
  std::string rule{};
  std::string result_digest{};
  nlohmann::json detail = nlohmann::json::object();
  // Set instead of `detail` by the per-call builders (Decision, ToolResult): the same fields in
  // the order a json object writes its keys (sorted bytewise), so the line is the same either way.
  std::vector<AuditDetailField> fields{};
  // Not written to the log: what a transcript (`cagent run --verbose`) shows that the log keeps
  // only as digests or sizes (a model turn's text and calls, a tool call's arguments, a tool's
  // output). Set by the broker only when the log has an observer (AuditLog::SetObserver);
  // redacted like `detail`. null when unset.
  nlohmann::json transcript = nullptr;

  // The detail as one json object, whichever form holds it (for readers and tests; the writer
  // does not need it).
  [[nodiscard]] nlohmann::json DetailJson() const;
};

// ---- typed builders, one per kind (namespace audit) ----
//
// Each takes the kind's fields as a struct (designated initializers name them at the call site)
// and returns an AuditEvent that conforms to AuditSpec(kind): required fields are always written,
// optional ones only when set. Strings are taken as given: callers shorten what the agent sent
// (ShortText) before passing it; the broker's Audit() redacts the detail afterwards.
namespace audit {

// Lists longer than these are recorded as a count ("40 paths") instead of the names.
inline constexpr std::size_t kMaxLoggedPaths = 32;
inline constexpr std::size_t kMaxLoggedChangedPaths = 64;

struct StateFields {
  std::string state{};   // a run state: created, preparing, running, verifying, completed, ...
  std::string reason{};  // "" = none
  std::optional<std::string> profile{};  // with created
  std::optional<std::string> model{};    // with created
};
AuditEvent State(StateFields f);

struct WorkspaceFields {
  std::string repo{};
  std::string base_commit{};
  bool carried_dirty = false;
  std::vector<std::string> carried_paths{};
};
AuditEvent Workspace(WorkspaceFields f);

struct HelloFields {
  std::uint64_t id = 0;
  std::string agent{};
  std::vector<int> protocols{};
};
AuditEvent Hello(HelloFields f);

struct WelcomeFields {
  std::uint64_t id = 0;
  std::vector<std::string> tools{};
  std::uint64_t max_turns = 0;
};
AuditEvent Welcome(WelcomeFields f);

struct ModelCallFields {
  std::uint64_t id = 0;
  std::string conversation_digest{};  // envelope args
  std::uint64_t turn = 0;
  std::uint64_t messages = 0;
  std::uint64_t redactions = 0;
  std::uint64_t input_estimate = 0;
  std::uint64_t max_tokens = 0;
  std::vector<std::string> tools{};
};
AuditEvent ModelCall(ModelCallFields f);

// One tool call of a model turn as the log records it (the arguments as their digest).
struct LoggedToolCall {
  std::string id{};
  std::string name{};
  std::string args_digest{};
  std::string arguments_error{};
};
struct ModelResultFields {
  std::uint64_t id = 0;
  std::string raw_digest{};  // envelope result: CanonicalDigest of `body`
  std::uint64_t turn = 0;
  protocol::Usage usage{};
  std::string stop_reason{};           // protocol::StopReasonName
  std::string provider_stop_reason{};  // the provider's own word
  std::uint64_t text_bytes = 0;
  std::vector<LoggedToolCall> tool_calls{};
  nlohmann::json body = nlohmann::json::object();  // the provider's response body
};
AuditEvent ModelResult(ModelResultFields f);

struct ModelErrorFields {
  std::uint64_t id = 0;
  std::uint64_t turn = 0;
  std::string code{};  // protocol::ErrorCodeName
  std::string message{};
};
AuditEvent ModelError(ModelErrorFields f);

struct ToolRequestFields {
  std::uint64_t id = 0;
  std::string tool{};  // as the agent named it (shortened)
  std::string args_digest{};
  std::string call_id{};
  std::uint64_t turn = 0;            // the model's latest turn when the request came
  std::vector<std::string> paths{};  // recorded as "N paths" above kMaxLoggedPaths
};
AuditEvent ToolRequest(ToolRequestFields f);

struct DecisionFields {
  std::uint64_t id = 0;
  std::string tool{};
  std::string args_digest{};
  std::string verdict{};  // protocol::VerdictName: allow | deny | ask
  std::string rule{};
  std::string call_id{};
  std::uint64_t turn = 0;
  std::vector<std::string> paths{};  // the request's paths; as in ToolRequestFields
  std::string reason{};
  std::optional<std::string> location{};  // the rule's file:line:col ("" when none)
  std::optional<bool> pending{};          // true: an approval message follows
  std::optional<std::string> note{};      // how an ask was settled without asking
};
AuditEvent Decision(DecisionFields f);

struct LoopFields {
  std::uint64_t id = 0;
  std::string tool{};
  std::string args_digest{};
  std::string reason{};
};
AuditEvent Loop(LoopFields f);

struct LoopStateFields {
  std::uint64_t entries = 0;
  std::uint64_t max_entries = 0;
  bool truncated = false;
  std::uint64_t not_walked = 0;
  std::string error{};
};
AuditEvent LoopState(LoopStateFields f);

struct ApprovalFields {
  std::uint64_t id = 0;
  std::string tool{};
  std::string args_digest{};
  bool approved = false;  // envelope verdict: allow | deny
  std::string rule{};
  std::string call_id{};
  std::uint64_t turn = 0;
  std::string scope{};  // ApprovalScopeName
  std::string by{};
};
AuditEvent Approval(ApprovalFields f);

struct ToolResultFields {
  std::uint64_t id = 0;
  std::string tool{};
  std::string output_digest{};  // envelope result: of the redacted output
  std::uint64_t request = 0;
  std::string call_id{};
  std::uint64_t turn = 0;
  bool ok = false;
  std::string error_code{};
  std::uint64_t bytes = 0;
  bool redacted = false;
  std::vector<std::string> changed_paths{};  // recorded as "N" above kMaxLoggedChangedPaths
};
AuditEvent ToolResult(ToolResultFields f);
// A tool_result naming no allowed request awaiting its result (a protocol error follows).
AuditEvent UnmatchedToolResult(std::uint64_t id, std::uint64_t request);

struct ProgressFields {
  std::uint64_t id = 0;
  std::string state{};
  std::string text{};
};
AuditEvent Progress(ProgressFields f);

struct FinishFields {
  std::uint64_t id = 0;
  std::string outcome{};
  std::string summary{};
};
AuditEvent Finish(FinishFields f);

struct ProtocolErrorFields {
  std::uint64_t id = 0;
  std::string code{};  // protocol::ErrorCodeName
  std::string message{};
};
AuditEvent ProtocolError(ProtocolErrorFields f);

struct BudgetFields {
  std::optional<std::uint64_t> id{};    // the request that hit it; none for wall time
  std::optional<std::string> budget{};  // which budget, when not said by the request ("wall-time")
  std::string reason{};
};
AuditEvent Budget(BudgetFields f);

struct ShutdownFields {
  std::string status{};  // BrokerStatusName
  std::string reason{};
};
AuditEvent Shutdown(ShutdownFields f);

struct PatchFields {
  std::string patch_digest{};  // envelope result: sha256 of patch.diff
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
  std::uint64_t violations = 0;
  // What the git config guard dropped from configs the agent's sandbox changed, one "FILE: KEY"
  // each, recorded only when there is any (launcher/guard/git_config_guard.h).
  std::vector<std::string> git_config_dropped{};
};
AuditEvent Patch(PatchFields f);

struct VerifyTreeFields {
  std::string tree{};
  std::string base_commit{};
  std::string path{};
};
AuditEvent VerifyTree(VerifyTreeFields f);

struct VerifyFields {
  std::string command{};
  std::string status{};  // VerifyStatusName
  std::int64_t exit_code = -1;
  std::int64_t duration_ms = 0;
  std::string tree{};
  // What its sandbox's network refused and the hint lines (network_hint.h); only when it failed.
  std::vector<std::string> refused{};
  std::vector<std::string> network_hints{};
};
AuditEvent Verify(VerifyFields f);

struct SetupFields {
  std::string command{};
  std::string status{};  // VerifyStatusName
  std::int64_t exit_code = -1;
  std::int64_t duration_ms = 0;
  std::string where{};  // "workspace" (before the agent) or "verify-tree" (before verifying)
  std::string log{};    // the log file, relative to the run directory
  std::vector<std::string> refused{};        // as VerifyFields
  std::vector<std::string> network_hints{};  // as VerifyFields
};
AuditEvent Setup(SetupFields f);

struct EgressFields {
  std::string host{};  // the name (or IP literal) the sandbox asked for
  std::uint64_t port = 0;
  std::string address{};  // the address cagent connected to ("" when none)
  std::string via{};      // "connect", "http", "socks5", "transparent"
  bool allowed = false;   // envelope verdict: allow / deny
  std::string rule{};     // envelope rule ("" = no rule: the default, or the proxy's own refusal)
  std::string reason{};
  std::string error{};  // upstream or relay error ("" when none)
  std::uint64_t bytes_up = 0;
  std::uint64_t bytes_down = 0;
  std::int64_t duration_ms = 0;
  std::string phase{};  // "agent", "verify", "exec", "setup"
};
AuditEvent Egress(EgressFields f);

struct McpCallFields {
  std::string mode{};         // "wrap" | "serve"
  std::string request{};      // the client's JSON-RPC id, as JSON text ("7", "\"a\"")
  std::string tool{};         // envelope tool: the MCP tool name (shortened)
  std::string args_digest{};  // envelope args: CanonicalDigest of the arguments
  std::string verdict{};      // envelope verdict: allow | deny (the final one, after any ask)
  std::string rule{};         // envelope rule ("" = none: the default)
  std::string location{};     // the rule's file:line:col ("" = none)
  std::string reason{};
  std::optional<std::string> note{};  // how an ask was settled, or why the broker refused
};
AuditEvent McpCall(McpCallFields f);

struct McpResultFields {
  std::string mode{};
  std::string request{};
  std::string tool{};           // envelope tool
  std::string result_digest{};  // envelope result: CanonicalDigest of the result or error ("")
  bool ok = false;              // a JSON-RPC result (not an error, not a failure)
  bool is_error = false;        // the result's isError
  std::uint64_t bytes = 0;
  std::string error{};  // "" when ok
};
AuditEvent McpResult(McpResultFields f);

struct McpListFields {
  std::string mode{};
  std::vector<std::string> offered{};
  std::vector<std::string> hidden{};
};
AuditEvent McpList(McpListFields f);

}  // namespace audit

// ---- validation ----

// What is wrong with one parsed line, one message per problem ("detail.turn: missing (required)");
// empty when the line conforms: an object with exactly the envelope's fields of the right types,
// a known event, an actor that kind allows, the envelope strings the kind sets (and no others),
// verdict one of allow | deny | ask, digests 64 lowercase hex digits, every required detail field
// present with an allowed type and no detail field the kind does not declare. The chain (seq,
// prev, run) is VerifyAuditLog's.
std::vector<std::string> ValidateAuditEntry(const nlohmann::json& entry);

struct AuditSchemaProblem {
  std::uint64_t line = 0;  // 1-based
  std::string message;     // "detail.turn: missing (required)"
};
struct AuditSchemaReport {
  std::uint64_t entries = 0;                 // lines read
  std::vector<AuditSchemaProblem> problems;  // in line order; a line may have several
  [[nodiscard]] bool ok() const { return problems.empty(); }
};
// Validates every line of `path` (a line that is not JSON is one problem). Fails only when the
// file cannot be opened or read.
Result<AuditSchemaReport> ValidateAuditLogFile(const std::string& path);
// The problems of one line of a log (its text, without the newline): not JSON, nested deeper
// than kMaxAuditEntryDepth, or ValidateAuditEntry's. Pure.
std::vector<std::string> ValidateAuditLine(std::string_view line);

// ---- documentation ----

// The schema as Markdown: the envelope table, the actors, then one section per kind (meaning,
// actors, envelope fields it sets, a table of its detail fields). docs/audit-log.md embeds exactly
// this text between its "generated" markers; `cagent log schema` prints it.
std::string AuditSchemaMarkdown();
// The schema as JSON ({"envelope": [...], "events": [...]}) for tools: `cagent log schema --json`.
nlohmann::json AuditSchemaJson();

}  // namespace cagent::launcher::broker
