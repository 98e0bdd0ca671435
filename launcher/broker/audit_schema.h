// The audit log's schema, made from the one table of event kinds in audit_events.h: who may
// record each kind, which envelope fields it sets and its detail fields (name, JSON type, required
// or optional, meaning); a typed builder per kind, so a call site cannot misspell a kind or a
// field; the field names readers use; a validator over a parsed line (used by `cagent log check`
// and the tests); and the Markdown rendering of the schema that docs/audit-log.md embeds (a test
// keeps the two equal).
//
// Pure data and functions: no I/O except ValidateAuditLogFile(), which reads one file. Runs in
// cagent (trusted); the broker, the run and `cagent log` all include it. Security teams read the
// log, so a change of the table is a change of a product surface (audit_events.h says the rules).
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/protocol.h"
#include "common/result.h"
#include "launcher/broker/audit_events.h"

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

// Every kind of entry, in the table's order (audit_events.h), which is the documentation's
// (roughly the order of a run): kState, kWorkspace, kHello ... kSetup.
// clang-format off
enum class AuditKind : std::uint8_t {
#define CAGENT_AUDIT_ENUM(Kind, name, actor, writer, meaning) k##Kind,
#define CAGENT_AUDIT_NONE(...)
  CAGENT_AUDIT_EVENTS(CAGENT_AUDIT_ENUM, CAGENT_AUDIT_NONE, CAGENT_AUDIT_NONE, CAGENT_AUDIT_NONE)
#undef CAGENT_AUDIT_ENUM
  kCount,  // not a kind
};
// clang-format on
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

// ---- the table's types, builders and field names (namespace audit) ----
//
// For every kind of audit_events.h: a struct <Kind>Fields whose members are the kind's rows (its
// envelope members and detail fields, in the table's order, so designated initializers name them
// at the call site), a builder <Kind>(<Kind>Fields) that returns an AuditEvent conforming to
// AuditSpec(kind) (required fields always written, optional ones as their type says), and a
// struct names::<Kind> of the detail fields' names for readers. Strings are taken as given:
// callers shorten what the agent sent (ShortText) before passing it; the broker's Audit() redacts
// the detail afterwards.
namespace audit {

// Lists longer than these are recorded as a count ("40 paths") instead of the names.
inline constexpr std::size_t kMaxLoggedPaths = 32;
inline constexpr std::size_t kMaxLoggedChangedPaths = 64;

// Field types the table names (single tokens: the preprocessor splits macro arguments on commas).
using StringList = std::vector<std::string>;
using IntList = std::vector<int>;

// A value written only when it is not empty (a string, a list).
template <typename T>
struct OmitEmpty {
  T value{};
  OmitEmpty() = default;
  // Implicit, so a call site writes `.reason = why` as for a plain member.
  template <std::convertible_to<T> U>
  // NOLINTNEXTLINE(google-explicit-constructor,bugprone-forwarding-reference-overload)
  OmitEmpty(U&& v) : value(std::forward<U>(v)) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  OmitEmpty(
      std::initializer_list<std::string> v) requires std::is_same_v<T, std::vector<std::string>>
      : value(v) {}
};

// A list of names recorded as the names, or above kCap as the string "<count><kUnit>".
template <std::size_t kCap, bool kPathsUnit>
struct CappedList {
  static constexpr std::size_t kCapacity = kCap;
  static constexpr std::string_view kUnit = kPathsUnit ? " paths" : "";
  StringList items{};
  CappedList() = default;
  template <std::convertible_to<StringList> U>
  // NOLINTNEXTLINE(google-explicit-constructor,bugprone-forwarding-reference-overload)
  CappedList(U&& v) : items(std::forward<U>(v)) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  CappedList(std::initializer_list<std::string> v) : items(v) {}
};
using PathList = CappedList<kMaxLoggedPaths, true>;                 // "40 paths"
using ChangedPathList = CappedList<kMaxLoggedChangedPaths, false>;  // "70"

// One tool call of a model turn as the log records it (the arguments as their digest): written
// as {id, name, args, arguments_error}.
struct LoggedToolCall {
  std::string id{};
  std::string name{};
  std::string args_digest{};
  std::string arguments_error{};
};
using ToolCallList = std::vector<LoggedToolCall>;

// The JSON type a field of C++ type T has in the log.
template <typename T>
struct FieldType;
template <>
struct FieldType<std::uint64_t> : std::integral_constant<AuditTypes, kAuditCount> {};
template <>
struct FieldType<std::int64_t> : std::integral_constant<AuditTypes, kAuditInteger> {};
template <>
struct FieldType<bool> : std::integral_constant<AuditTypes, kAuditBoolean> {};
template <>
struct FieldType<std::string> : std::integral_constant<AuditTypes, kAuditString> {};
template <>
struct FieldType<StringList> : std::integral_constant<AuditTypes, kAuditStringList> {};
template <>
struct FieldType<IntList> : std::integral_constant<AuditTypes, kAuditIntegerList> {};
template <>
struct FieldType<protocol::Usage> : std::integral_constant<AuditTypes, kAuditObject> {};
template <>
struct FieldType<nlohmann::json> : std::integral_constant<AuditTypes, kAuditObject> {};
template <>
struct FieldType<ToolCallList> : std::integral_constant<AuditTypes, kAuditObjectList> {};
template <std::size_t kCap, bool kPathsUnit>
struct FieldType<CappedList<kCap, kPathsUnit>>
    : std::integral_constant<AuditTypes, kAuditStringList | kAuditString> {};
template <typename T>
struct FieldType<std::optional<T>> : FieldType<T> {};
template <typename T>
struct FieldType<OmitEmpty<T>> : FieldType<T> {};

// Whether a field of type T is written on every entry of its kind (else it must be kOptional).
template <typename T>
inline constexpr bool kAlwaysWritten = true;
template <typename T>
inline constexpr bool kAlwaysWritten<std::optional<T>> = false;
template <typename T>
inline constexpr bool kAlwaysWritten<OmitEmpty<T>> = false;

#define CAGENT_AUDIT_STRUCT_BEGIN(Kind, name, actor, writer, meaning) struct Kind##Fields {
#define CAGENT_AUDIT_STRUCT_ENVELOPE(Kind, slot, member, Type, presence, meaning) Type member{};
#define CAGENT_AUDIT_STRUCT_FIELD(Kind, member, Type, need, meaning)                         \
  static_assert(kAlwaysWritten<Type> || AuditPresence::need == AuditPresence::kOptional,     \
                #Kind "." #member ": a field that is not always written must be kOptional"); \
  Type member{};
#define CAGENT_AUDIT_STRUCT_END(Kind) \
  }                                   \
  ;                                   \
  AuditEvent Kind(Kind##Fields f);
CAGENT_AUDIT_EVENTS(CAGENT_AUDIT_STRUCT_BEGIN, CAGENT_AUDIT_STRUCT_ENVELOPE,
                    CAGENT_AUDIT_STRUCT_FIELD, CAGENT_AUDIT_STRUCT_END)
#undef CAGENT_AUDIT_STRUCT_BEGIN
#undef CAGENT_AUDIT_STRUCT_ENVELOPE
#undef CAGENT_AUDIT_STRUCT_FIELD
#undef CAGENT_AUDIT_STRUCT_END

// A tool_result naming no allowed request awaiting its result (a protocol error follows): the
// kind's other variant, with only id, request and unmatched.
AuditEvent UnmatchedToolResult(std::uint64_t id, std::uint64_t request);

// The detail fields' names, per kind: names::Decision::reason is "reason". Readers of a log use
// them, so a name the table does not declare for that kind does not compile.
namespace names {
#define CAGENT_AUDIT_NAMES_BEGIN(Kind, name, actor, writer, meaning) struct Kind {
#define CAGENT_AUDIT_NAMES_FIELD(Kind, member, Type, need, meaning) \
  static constexpr std::string_view member = #member;
#define CAGENT_AUDIT_NAMES_END(Kind) \
  }                                  \
  ;
CAGENT_AUDIT_EVENTS(CAGENT_AUDIT_NAMES_BEGIN, CAGENT_AUDIT_NONE, CAGENT_AUDIT_NAMES_FIELD,
                    CAGENT_AUDIT_NAMES_END)
#undef CAGENT_AUDIT_NAMES_BEGIN
#undef CAGENT_AUDIT_NAMES_FIELD
#undef CAGENT_AUDIT_NAMES_END
}  // namespace names

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
