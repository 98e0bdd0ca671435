#include "launcher/broker/audit_schema.h"

#include <array>
#include <cstdio>
#include <fstream>
#include <utility>

#include "common/json_text.h"

namespace cagent::launcher::broker {
namespace {

using nlohmann::json;

constexpr AuditPresence kOptional = AuditPresence::kOptional;
constexpr AuditPresence kRequired = AuditPresence::kRequired;

constexpr std::array<std::string_view, static_cast<std::size_t>(AuditActor::kCount)> kActorNames = {
    "agent", "broker", "operator", "cagent"};

constexpr std::array<std::string_view, static_cast<std::size_t>(AuditActor::kCount)>
    kActorMeanings = {
        "the confined agent (untrusted): what it asked for, as it sent it",
        "the policy broker: its decisions, budgets, and the model's answers it relayed",
        "a person at the terminal (or the headless approver) answering an approval",
        "the run around the session: state changes, workspace, patch capture, verification",
};

// The envelope, in the order AuditLog::Append writes it.
const std::vector<AuditField>& EnvelopeFields() {
  static const std::vector<AuditField> fields = {
      {"run", kAuditString, true, "the run id; the same on every line of a log"},
      {"seq", kAuditCount, true, "0 for the first line, then +1 per line"},
      {"time", kAuditString, true, "when it was written: RFC 3339, UTC, milliseconds"},
      {"actor", kAuditString, true, "whose action it records (see Actors)"},
      {"event", kAuditString, true, "the kind of entry (see Events)"},
      {"policy", kAuditString, true, "digest of the compiled profile the run is under"},
      {"tool", kAuditString, true, "the tool concerned, or \"\" (see each event)"},
      {"args", kAuditString, true,
       "SHA-256 of the canonical JSON of the arguments (keys sorted, no whitespace), or \"\""},
      {"verdict", kAuditString, true, "`allow`, `deny` or `ask`, or \"\""},
      {"rule", kAuditString, true,
       "the profile rule (or the broker's own check) that decided, or \"\""},
      {"result", kAuditString, true, "SHA-256 of what the entry's action produced, or \"\""},
      {"detail", kAuditObject, true, "the event's own fields (see each event); already redacted"},
      {"lost", kAuditCount, false,
       "entries that could not be written so far (full disk ...); only present when > 0"},
      {"prev", kAuditString, true,
       "SHA-256 (hex) of the previous line's bytes without its newline; 64 zeros on the first"},
  };
  return fields;
}

std::vector<AuditEventSpec> BuildSpecs() {
  using A = AuditActor;
  using K = AuditKind;
  // Shared field texts.
  const AuditField id{"id", kAuditCount, true, "the protocol request id of the agent's message"};
  const AuditField call_id{"call_id", kAuditString, true,
                           "the model's id of the tool call (what the agent named)"};
  const AuditField turn{"turn", kAuditCount, true,
                        "the model turn (1-based) the call belongs to; 0 before the first turn"};
  const AuditEnvelopeUse tool_named{kRequired, "the tool, as the agent named it"};
  const AuditEnvelopeUse tool_known{kRequired, "the tool"};
  const AuditEnvelopeUse args_digest{kRequired, "digest of the call's arguments"};

  return {
      {K::kState,
       "state",
       {A::kCagent},
       "the run changed state (created, preparing, running, verifying, completed, failed, "
       "cancelled, needs-approval)",
       {},
       {},
       {},
       {},
       {},
       {{"state", kAuditString, true, "the new state"},
        {"reason", kAuditString, false, "why, in words (ends and failures)"},
        {"profile", kAuditString, false, "with `created`: the profile the run uses"},
        {"model", kAuditString, false, "with `created`: the model spec (`--model`)"}}},
      {K::kWorkspace,
       "workspace",
       {A::kCagent},
       "the disposable workspace was made from the pinned base commit",
       {},
       {},
       {},
       {},
       {},
       {{"repo", kAuditString, true, "the caller's repository (never written by the run)"},
        {"base_commit", kAuditString, true, "the commit the workspace was made from"},
        {"carried_dirty", kAuditBoolean, true,
         "uncommitted changes were carried in (`--allow-dirty`)"},
        {"carried_paths", kAuditStringList, true, "the paths carried in"}}},
      {K::kHello,
       "hello",
       {A::kAgent},
       "the agent's first message",
       {},
       {},
       {},
       {},
       {},
       {id,
        {"agent", kAuditString, true, "the agent's name and version, as it says (shortened)"},
        {"protocols", kAuditIntegerList, true, "the protocol versions it speaks"}}},
      {K::kWelcome,
       "welcome",
       {A::kBroker},
       "the broker accepted the agent and sent its terms",
       {},
       {},
       {},
       {},
       {},
       {id,
        {"tools", kAuditStringList, true, "the tools the policy enables"},
        {"max_turns", kAuditCount, true, "the model-turn budget (0 = unlimited)"}}},
      {K::kModelCall,
       "model_call",
       {A::kAgent},
       "the agent asked for a model turn; the broker built the provider request from its own "
       "allow-list and sent only the conversation's content",
       {},
       {kRequired,
        "SHA-256 of the model_call payload exactly as the agent sent it (before redaction)"},
       {},
       {},
       {},
       {id,
        {"turn", kAuditCount, true, "this call's turn number (1-based)"},
        {"messages", kAuditCount, true, "messages in the conversation"},
        {"redactions", kAuditCount, true, "secrets replaced in texts and tool-call arguments"},
        {"input_estimate", kAuditCount, true, "the broker's estimate of the input tokens"},
        {"max_tokens", kAuditCount, true,
         "the output cap sent to the provider (within the token budget left)"},
        {"tools", kAuditStringList, true, "the tool schemas offered to the model, by name"}}},
      {K::kModelResult,
       "model_result",
       {A::kBroker},
       "the model's turn, as the agent gets it, with the provider's response body",
       {},
       {},
       {},
       {},
       {kRequired, "digest of `detail.body` before redaction"},
       {id,
        {"turn", kAuditCount, true, "the turn number"},
        {"usage", kAuditObject, true, "`{input_tokens, output_tokens}` as the provider counted"},
        {"stop_reason", kAuditString, true,
         "`end`, `tool_calls`, `max_tokens`, `refused` or `other`"},
        {"provider_stop_reason", kAuditString, true,
         "the provider's own word (`stop`, `end_turn` ...), or \"\""},
        {"text_bytes", kAuditCount, true, "bytes of the turn's text"},
        {"tool_calls", kAuditObjectList, true,
         "the calls the model made: `{id, name, args, arguments_error}` (`args`: digest of the "
         "arguments; `arguments_error`: why they were unusable, or \"\")"},
        {"body", kAuditObject, true,
         "the provider's response body (for replay: the recorded turn), redacted"}}},
      {K::kModelError,
       "model_error",
       {A::kBroker},
       "the model provider failed (after retries); the run fails",
       {},
       {},
       {},
       {},
       {},
       {id,
        {"turn", kAuditCount, true, "the turn that failed"},
        {"code", kAuditString, true, "`provider_error` or `provider_auth`"},
        {"message", kAuditString, true, "what failed and what to check"}}},
      {K::kToolRequest,
       "tool_request",
       {A::kAgent},
       "a tool call the agent asked for that got no decision: the broker answered it with an error "
       "(too many allowed calls awaiting their result, or a tool-call budget exhausted); every "
       "other request is recorded in its `decision` (logs before issue 18 have one per request)",
       tool_named,
       args_digest,
       {},
       {},
       {},
       {id,
        call_id,
        {"turn", kAuditCount, true, "the model's latest turn when the request came"},
        {"paths", kAuditStringList | kAuditString, true,
         "the workspace paths the agent resolved the call to (symlinks followed); above 32, the "
         "string \"N paths\""}}},
      {K::kDecision,
       "decision",
       {A::kBroker},
       "a tool call the agent asked for and the broker's verdict on it, in one entry (one per "
       "decided request; logs before issue 18 have a `tool_request` entry before each)",
       tool_named,
       args_digest,
       {kRequired, "allow, deny, or ask (an approval follows)"},
       {kRequired,
        "the deciding rule: a profile rule, or the broker's own check (`model turn`, "
        "`unknown tool`, `arguments`, `loop detection`)"},
       {},
       {id,
        call_id,
        turn,
        {"paths", kAuditStringList | kAuditString, false,
         "the workspace paths the agent resolved the call to (symlinks followed); above 32, the "
         "string \"N paths\" (always written since issue 18; absent in older logs)"},
        {"reason", kAuditString, true, "why, in words"},
        {"location", kAuditString, false, "the rule's `file:line:col`, or \"\""},
        {"pending", kAuditBoolean, false, "true when an approval message follows"},
        {"note", kAuditString, false,
         "how an ask was settled without asking (standing approval, auto, headless)"}}},
      {K::kLoop,
       "loop",
       {A::kBroker},
       "loop detection refused a request: the same call repeated, or a short cycle, with no "
       "workspace change (a decision follows)",
       tool_known,
       args_digest,
       {},
       {},
       {},
       {id, {"reason", kAuditString, true, "what repeated, how often"}}},
      {K::kLoopState,
       "loop_state",
       {A::kBroker},
       "loop detection sees only part of the workspace (said once per session)",
       {},
       {},
       {},
       {},
       {},
       {{"entries", kAuditCount, true, "workspace entries digested"},
        {"max_entries", kAuditCount, true, "the cap on entries"},
        {"truncated", kAuditBoolean, true, "the walk stopped at the cap"},
        {"not_walked", kAuditCount, true, "directories that could not be walked"},
        {"error", kAuditString, true, "the first walk error, or \"\""}}},
      {K::kApproval,
       "approval",
       {A::kOperator},
       "a person (or the headless approver) answered an ask",
       tool_known,
       args_digest,
       {kRequired, "allow or deny"},
       {kRequired, "the asking rule"},
       {},
       {id,
        call_id,
        turn,
        {"scope", kAuditString, true, "`once`, `run`, `pattern`, `denied` or `headless`"},
        {"by", kAuditString, true, "who answered (the terminal, the approver)"}}},
      {K::kToolResult,
       "tool_result",
       {A::kAgent},
       "the agent reported the outcome of an allowed tool call",
       {kOptional, "the tool (absent when unmatched)"},
       {},
       {},
       {},
       {kOptional,
        "digest of the output as the model gets it (redacted); absent when "
        "unmatched"},
       {id,
        {"request", kAuditCount, true, "the id of the tool_request it answers"},
        {"unmatched", kAuditBoolean, false,
         "true: no allowed request awaits this result (a protocol_error follows); the fields "
         "below are then absent"},
        {"call_id", kAuditString, false, "the model's id of the call"},
        {"turn", kAuditCount, false, "the model turn the call came from"},
        {"ok", kAuditBoolean, false, "the tool succeeded"},
        {"error_code", kAuditString, false, "\"\" when ok; e.g. `not_found`, `timeout`"},
        {"bytes", kAuditCount, false, "bytes of output the agent reported (before redaction)"},
        {"redacted", kAuditBoolean, false, "secrets were replaced in the output"},
        {"changed_paths", kAuditStringList | kAuditString, false,
         "files the agent says it wrote; above 64, their number as a string"}}},
      {K::kProgress,
       "progress",
       {A::kAgent},
       "a status line for the operator's display",
       {},
       {},
       {},
       {},
       {},
       {id,
        {"state", kAuditString, true, "e.g. `thinking`, `tool`, `compacting`"},
        {"text", kAuditString, true, "the line (shortened)"}}},
      {K::kFinish,
       "finish",
       {A::kAgent},
       "the agent says it is done or gives up; the session ends",
       {},
       {},
       {},
       {},
       {},
       {id,
        {"outcome", kAuditString, true, "`done`, `gave_up` or `error`"},
        {"summary", kAuditString, true, "its summary (shortened)"}}},
      {K::kProtocolError,
       "protocol_error",
       {A::kAgent},
       "a message from the agent was refused (malformed, out of order, unknown ...)",
       {},
       {},
       {},
       {},
       {},
       {{"id", kAuditCount, true, "the request id (0 when unknown)"},
        {"code", kAuditString, true, "the error code sent back (`malformed`, `out_of_order` ...)"},
        {"message", kAuditString, true, "what was wrong"}}},
      {K::kBudget,
       "budget",
       {A::kBroker},
       "a budget ran out; the run fails",
       {},
       {},
       {},
       {},
       {},
       {{"id", kAuditCount, false, "the request that would have exceeded it"},
        {"budget", kAuditString, false, "which budget, when no request did (`wall-time`)"},
        {"reason", kAuditString, true, "which budget, used and allowed"}}},
      {K::kShutdown,
       "shutdown",
       {A::kBroker},
       "the session ended (always the broker's last entry)",
       {},
       {},
       {},
       {},
       {},
       {{"status", kAuditString, true, "`finished`, `failed`, `cancelled` or `needs-approval`"},
        {"reason", kAuditString, true, "why, or \"\""}}},
      {K::kPatch,
       "patch",
       {A::kCagent},
       "git's view of what the agent changed, captured by cagent",
       {},
       {},
       {},
       {},
       {kRequired, "SHA-256 of patch.diff"},
       {{"files", kAuditCount, true, "files changed"},
        {"bytes", kAuditCount, true, "bytes of the patch"},
        {"violations", kAuditCount, true, "changes that break the profile's path and size rules"},
        {"git_config_dropped", kAuditStringList, false,
         "keys cagent removed from git configs the sandbox changed, before capture, as "
         "\"FILE: KEY\" (a replaced unreadable file as \"FILE: (whole file)\")"}}},
      {K::kVerifyTree,
       "verify_tree",
       {A::kCagent},
       "the fresh checkout of base + patch that verification runs on",
       {},
       {},
       {},
       {},
       {},
       {{"tree", kAuditString, true, "its git tree id"},
        {"base_commit", kAuditString, true, "the base commit"},
        {"path", kAuditString, true, "where it was checked out"}}},
      {K::kVerify,
       "verify",
       {A::kCagent},
       "one of the profile's verification commands ran",
       {},
       {},
       {},
       {},
       {},
       {{"command", kAuditString, true, "the command"},
        {"status", kAuditString, true,
         "`passed`, `failed`, `timed-out`, `infrastructure-error` or `not-run`"},
        {"exit_code", kAuditInteger, true, "its exit status (-1 when none)"},
        {"duration_ms", kAuditInteger, true, "how long it ran"},
        {"tree", kAuditString, true, "the tree it ran on (\"\" = not run on one)"},
        {"refused", kAuditStringList, false,
         "what its sandbox's network refused, when the command did not pass: `HOST:PORT`, or "
         "`NAME (lookup)` for a name lookup answered \"no such name\" (at most 16)"},
        {"network_hints", kAuditStringList, false,
         "with `refused`: cagent's one-line explanations of why and how to allow a host"}}},
      {K::kEgress,
       "egress",
       {A::kBroker},
       "a connection of the sandbox through cagent's egress proxy (hosts rules), when it ended "
       "or was refused",
       {},
       {},
       {kRequired, "`allow` (relayed) or `deny` (refused by a rule, the default or the proxy)"},
       {kOptional,
        "the hosts rule that decided (absent for the default and the proxy's own "
        "refusals)"},
       {},
       {{"host", kAuditString, true, "the name or IP literal the sandbox asked for"},
        {"port", kAuditCount, true, "the port"},
        {"address", kAuditString, true, "the address cagent connected to (\"\" = none)"},
        {"via", kAuditString, true,
         "how the sandbox reached the proxy: `connect`, `http`, `socks5` or `transparent`"},
        {"reason", kAuditString, true, "why it was allowed or refused"},
        {"error", kAuditString, false, "the upstream or relay error"},
        {"bytes_up", kAuditCount, true, "bytes from the sandbox to the host"},
        {"bytes_down", kAuditCount, true, "bytes from the host to the sandbox"},
        {"duration_ms", kAuditInteger, true, "how long the connection lasted"},
        {"phase", kAuditString, true, "`agent`, `setup`, `verify` or `exec`"}}},
      {K::kMcpCall,
       "mcp_call",
       {A::kBroker},
       "an MCP client's tools/call and the broker's decision on it (`cagent mcp wrap`: by MCP tool "
       "name; `cagent mcp serve`: cagent's own tools)",
       {kRequired, "the MCP tool, as the client named it (shortened)"},
       {kRequired, "digest of the call's arguments"},
       {kRequired, "`allow` (the call goes to the server) or `deny` (answered with isError)"},
       {kOptional, "the deciding rule, or the broker's own check (`tool-calls budget`)"},
       {},
       {{"mode", kAuditString, true, "`wrap` or `serve`"},
        {"request", kAuditString, true, "the client's JSON-RPC id of the call, as JSON text"},
        {"reason", kAuditString, true, "why, in words"},
        {"location", kAuditString, false, "the rule's `file:line:col`, or \"\""},
        {"note", kAuditString, false,
         "how an ask was settled (approved, declined, beforehand, headless)"}}},
      {K::kMcpResult,
       "mcp_result",
       {A::kBroker},
       "what the MCP server answered to an allowed tools/call (or that it did not)",
       {kRequired, "the MCP tool"},
       {},
       {},
       {},
       {kOptional, "digest of the result (or of the JSON-RPC error); absent when there was none"},
       {{"mode", kAuditString, true, "`wrap` or `serve`"},
        {"request", kAuditString, true, "the client's JSON-RPC id of the call, as JSON text"},
        {"ok", kAuditBoolean, true, "the server answered with a result (not an error)"},
        {"is_error", kAuditBoolean, true, "the result says `isError`"},
        {"bytes", kAuditCount, true, "bytes of the server's response"},
        {"error", kAuditString, false, "the error, or why there was no answer"}}},
      {K::kMcpList,
       "mcp_list",
       {A::kBroker},
       "a tools/list answer as the client got it: tools the profile denies are not offered",
       {},
       {},
       {},
       {},
       {},
       {{"mode", kAuditString, true, "`wrap` or `serve`"},
        {"offered", kAuditStringList, true, "the tools offered, in the server's order"},
        {"hidden", kAuditStringList, true, "the tools the profile denies, not offered"}}},
      {K::kSetup,
       "setup",
       {A::kCagent},
       "one of the profile's setup commands ran (trusted, in its own sandbox with writable caches "
       "and the setup block's network)",
       {},
       {},
       {},
       {},
       {},
       {{"command", kAuditString, true, "the command"},
        {"status", kAuditString, true,
         "`passed`, `failed`, `timed-out`, `infrastructure-error` or `not-run`"},
        {"exit_code", kAuditInteger, true, "its exit status (-1 when none)"},
        {"duration_ms", kAuditInteger, true, "how long it ran"},
        {"where", kAuditString, true,
         "`workspace` (before the agent) or `verify-tree` (before the verify commands)"},
        {"log", kAuditString, true, "its output, relative to the run directory"},
        {"refused", kAuditStringList, false,
         "what its sandbox's network refused, when the command did not pass: `HOST:PORT`, or "
         "`NAME (lookup)` for a name lookup answered \"no such name\" (at most 16)"},
        {"network_hints", kAuditStringList, false,
         "with `refused`: cagent's one-line explanations of why and how to allow a host"}}},
  };
}

// In AuditKind order (the schema test checks that spec i has kind i).
const std::vector<AuditEventSpec>& Specs() {
  static const std::vector<AuditEventSpec> specs = BuildSpecs();
  return specs;
}

// Fills kind and actor from the schema (every kind has exactly one actor today).
AuditEvent Make(AuditKind kind) {
  const AuditEventSpec& spec = AuditSpec(kind);
  AuditEvent e;
  e.kind = kind;
  e.actor = spec.actors.front();
  return e;
}

json CappedList(const std::vector<std::string>& items, std::size_t cap, std::string_view unit) {
  if (items.size() <= cap) return json(items);
  return json(std::to_string(items.size()) + std::string(unit));
}

// Typed detail fields (AuditDetailField), for the per-call builders.
AuditDetailField CountField(std::string_view name, std::uint64_t value) {
  return {.name = name, .type = AuditDetailField::Type::kCount, .count = value};
}
AuditDetailField BoolField(std::string_view name, bool value) {
  return {.name = name, .type = AuditDetailField::Type::kBoolean, .count = value ? 1U : 0U};
}
AuditDetailField StringField(std::string_view name, std::string value) {
  return {.name = name, .type = AuditDetailField::Type::kString, .text = std::move(value)};
}
// As CappedList: the list, or above `cap` the string "N<unit>".
AuditDetailField CappedListField(std::string_view name, std::vector<std::string> items,
                                 std::size_t cap, std::string_view unit) {
  if (items.size() > cap) {
    return StringField(name, std::to_string(items.size()) + std::string(unit));
  }
  return {.name = name, .type = AuditDetailField::Type::kStringList, .list = std::move(items)};
}

bool IsLowerHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A parsed line holds non-negative integers as unsigned; a value built in memory from an `int` is
// signed whatever its sign, so the sign is looked at, not the storage.
bool IsCount(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
}
bool IsInteger(const json& v) { return v.is_number_integer(); }

bool HasType(const json& v, AuditTypes types) {
  if ((types & kAuditString) && v.is_string()) return true;
  if ((types & kAuditCount) && IsCount(v)) return true;
  if ((types & kAuditInteger) && IsInteger(v)) return true;
  if ((types & kAuditBoolean) && v.is_boolean()) return true;
  if ((types & kAuditObject) && v.is_object()) return true;
  const auto all = [&v](bool (*pred)(const json&)) {
    if (!v.is_array()) return false;
    for (const json& x : v) {
      if (!pred(x)) return false;
    }
    return true;
  };
  if ((types & kAuditStringList) && all([](const json& x) { return x.is_string(); })) return true;
  if ((types & kAuditIntegerList) && all([](const json& x) { return IsInteger(x); })) return true;
  if ((types & kAuditObjectList) && all([](const json& x) { return x.is_object(); })) return true;
  return false;
}

// A JSON value's type in the schema's words, for messages.
std::string TypeOf(const json& v) {
  if (v.is_string()) return "string";
  if (IsCount(v)) return "count";
  if (v.is_number_integer()) return "negative integer";
  if (v.is_number()) return "number";
  if (v.is_boolean()) return "boolean";
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  return "null";
}

std::string EscapeCell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else {
      out += c;
    }
  }
  return out;
}

std::string_view PresenceWord(AuditPresence p) {
  switch (p) {
    case AuditPresence::kNever:
      return "never";
    case AuditPresence::kOptional:
      return "optional";
    case AuditPresence::kRequired:
      return "required";
  }
  return "never";
}

struct EnvelopeSlot {
  std::string_view name;
  AuditEnvelopeUse AuditEventSpec::*use;
};
constexpr std::array<EnvelopeSlot, 5> kSlots = {{{"tool", &AuditEventSpec::tool},
                                                 {"args", &AuditEventSpec::args},
                                                 {"verdict", &AuditEventSpec::verdict},
                                                 {"rule", &AuditEventSpec::rule},
                                                 {"result", &AuditEventSpec::result}}};

}  // namespace

std::string_view AuditActorName(AuditActor actor) {
  const auto i = static_cast<std::size_t>(actor);
  return i < kActorNames.size() ? kActorNames[i] : "invalid";
}

std::optional<AuditActor> ParseAuditActor(std::string_view name) {
  for (std::size_t i = 0; i < kActorNames.size(); ++i) {
    if (kActorNames[i] == name) return static_cast<AuditActor>(i);
  }
  return std::nullopt;
}

std::string_view AuditKindName(AuditKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  return i < Specs().size() ? Specs()[i].name : "invalid";
}

std::optional<AuditKind> ParseAuditKind(std::string_view name) {
  for (const AuditEventSpec& s : Specs()) {
    if (s.name == name) return s.kind;
  }
  return std::nullopt;
}

std::string AuditTypesName(AuditTypes types) {
  static constexpr std::array<std::pair<AuditType, std::string_view>, 8> kNames = {{
      {kAuditString, "string"},
      {kAuditCount, "count"},
      {kAuditInteger, "integer"},
      {kAuditBoolean, "boolean"},
      {kAuditObject, "object"},
      {kAuditStringList, "array of strings"},
      {kAuditIntegerList, "array of integers"},
      {kAuditObjectList, "array of objects"},
  }};
  std::string out;
  // Lists first: "array of strings | string" reads as the usual shape with its fallback.
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [bit, name] : kNames) {
      const bool list = bit >= kAuditStringList;
      if ((pass == 0) != list || (types & bit) == 0) continue;
      if (!out.empty()) out += " | ";
      out += name;
    }
  }
  return out;
}

const AuditEventSpec& AuditSpec(AuditKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  // kCount is not a kind; callers pass enum values only, so this is the last entry at worst.
  return Specs()[i < Specs().size() ? i : Specs().size() - 1];
}

std::span<const AuditEventSpec> AuditSpecs() { return Specs(); }

std::span<const AuditField> AuditEnvelope() { return EnvelopeFields(); }

json AuditEvent::DetailJson() const {
  if (fields.empty()) return detail;
  json out = json::object();
  for (const AuditDetailField& f : fields) {
    json& v = out[std::string(f.name)];
    switch (f.type) {
      case AuditDetailField::Type::kCount:
        v = f.count;
        break;
      case AuditDetailField::Type::kBoolean:
        v = f.count != 0;
        break;
      case AuditDetailField::Type::kString:
        v = f.text;
        break;
      case AuditDetailField::Type::kStringList:
        v = f.list;
        break;
    }
  }
  return out;
}

// ---- builders ----

namespace audit {

AuditEvent State(StateFields f) {
  AuditEvent e = Make(AuditKind::kState);
  e.detail["state"] = std::move(f.state);
  if (!f.reason.empty()) e.detail["reason"] = std::move(f.reason);
  if (f.profile) e.detail["profile"] = std::move(*f.profile);
  if (f.model) e.detail["model"] = std::move(*f.model);
  return e;
}

AuditEvent Workspace(WorkspaceFields f) {
  AuditEvent e = Make(AuditKind::kWorkspace);
  e.detail = {{"repo", std::move(f.repo)},
              {"base_commit", std::move(f.base_commit)},
              {"carried_dirty", f.carried_dirty},
              {"carried_paths", std::move(f.carried_paths)}};
  return e;
}

AuditEvent Hello(HelloFields f) {
  AuditEvent e = Make(AuditKind::kHello);
  e.detail = {{"id", f.id}, {"agent", std::move(f.agent)}, {"protocols", std::move(f.protocols)}};
  return e;
}

AuditEvent Welcome(WelcomeFields f) {
  AuditEvent e = Make(AuditKind::kWelcome);
  e.detail = {{"id", f.id}, {"tools", std::move(f.tools)}, {"max_turns", f.max_turns}};
  return e;
}

AuditEvent ModelCall(ModelCallFields f) {
  AuditEvent e = Make(AuditKind::kModelCall);
  e.args_digest = std::move(f.conversation_digest);
  e.detail = {{"id", f.id},
              {"turn", f.turn},
              {"messages", f.messages},
              {"redactions", f.redactions},
              {"input_estimate", f.input_estimate},
              {"max_tokens", f.max_tokens},
              {"tools", std::move(f.tools)}};
  return e;
}

AuditEvent ModelResult(ModelResultFields f) {
  AuditEvent e = Make(AuditKind::kModelResult);
  e.result_digest = std::move(f.raw_digest);
  json calls = json::array();
  for (LoggedToolCall& c : f.tool_calls) {
    calls.push_back({{"id", std::move(c.id)},
                     {"name", std::move(c.name)},
                     {"args", std::move(c.args_digest)},
                     {"arguments_error", std::move(c.arguments_error)}});
  }
  e.detail = {
      {"id", f.id},
      {"turn", f.turn},
      {"usage", {{"input_tokens", f.usage.input_tokens}, {"output_tokens", f.usage.output_tokens}}},
      {"stop_reason", std::move(f.stop_reason)},
      {"provider_stop_reason", std::move(f.provider_stop_reason)},
      {"text_bytes", f.text_bytes},
      {"tool_calls", std::move(calls)},
      {"body", f.body.is_object() ? std::move(f.body) : json{{"value", std::move(f.body)}}}};
  return e;
}

AuditEvent ModelError(ModelErrorFields f) {
  AuditEvent e = Make(AuditKind::kModelError);
  e.detail = {{"id", f.id},
              {"turn", f.turn},
              {"code", std::move(f.code)},
              {"message", std::move(f.message)}};
  return e;
}

AuditEvent ToolRequest(ToolRequestFields f) {
  AuditEvent e = Make(AuditKind::kToolRequest);
  e.tool = std::move(f.tool);
  e.args_digest = std::move(f.args_digest);
  e.detail = {{"id", f.id},
              {"call_id", std::move(f.call_id)},
              {"turn", f.turn},
              {"paths", CappedList(f.paths, kMaxLoggedPaths, " paths")}};
  return e;
}

AuditEvent Decision(DecisionFields f) {
  AuditEvent e = Make(AuditKind::kDecision);
  e.tool = std::move(f.tool);
  e.args_digest = std::move(f.args_digest);
  e.verdict = std::move(f.verdict);
  e.rule = std::move(f.rule);
  // One per tool call: typed fields, in key order.
  e.fields.reserve(8);
  e.fields.push_back(StringField("call_id", std::move(f.call_id)));
  e.fields.push_back(CountField("id", f.id));
  if (f.location) e.fields.push_back(StringField("location", std::move(*f.location)));
  if (f.note) e.fields.push_back(StringField("note", std::move(*f.note)));
  e.fields.push_back(CappedListField("paths", std::move(f.paths), kMaxLoggedPaths, " paths"));
  if (f.pending) e.fields.push_back(BoolField("pending", *f.pending));
  e.fields.push_back(StringField("reason", std::move(f.reason)));
  e.fields.push_back(CountField("turn", f.turn));
  return e;
}

AuditEvent Loop(LoopFields f) {
  AuditEvent e = Make(AuditKind::kLoop);
  e.tool = std::move(f.tool);
  e.args_digest = std::move(f.args_digest);
  e.detail = {{"id", f.id}, {"reason", std::move(f.reason)}};
  return e;
}

AuditEvent LoopState(LoopStateFields f) {
  AuditEvent e = Make(AuditKind::kLoopState);
  e.detail = {{"entries", f.entries},
              {"max_entries", f.max_entries},
              {"truncated", f.truncated},
              {"not_walked", f.not_walked},
              {"error", std::move(f.error)}};
  return e;
}

AuditEvent Approval(ApprovalFields f) {
  AuditEvent e = Make(AuditKind::kApproval);
  e.tool = std::move(f.tool);
  e.args_digest = std::move(f.args_digest);
  e.verdict = f.approved ? "allow" : "deny";
  e.rule = std::move(f.rule);
  e.detail = {{"id", f.id},
              {"call_id", std::move(f.call_id)},
              {"turn", f.turn},
              {"scope", std::move(f.scope)},
              {"by", std::move(f.by)}};
  return e;
}

AuditEvent ToolResult(ToolResultFields f) {
  AuditEvent e = Make(AuditKind::kToolResult);
  e.tool = std::move(f.tool);
  e.result_digest = std::move(f.output_digest);
  // One per tool call: typed fields, in key order.
  e.fields.reserve(9);
  e.fields.push_back(CountField("bytes", f.bytes));
  e.fields.push_back(StringField("call_id", std::move(f.call_id)));
  e.fields.push_back(
      CappedListField("changed_paths", std::move(f.changed_paths), kMaxLoggedChangedPaths, ""));
  e.fields.push_back(StringField("error_code", std::move(f.error_code)));
  e.fields.push_back(CountField("id", f.id));
  e.fields.push_back(BoolField("ok", f.ok));
  e.fields.push_back(BoolField("redacted", f.redacted));
  e.fields.push_back(CountField("request", f.request));
  e.fields.push_back(CountField("turn", f.turn));
  return e;
}

AuditEvent UnmatchedToolResult(std::uint64_t id, std::uint64_t request) {
  AuditEvent e = Make(AuditKind::kToolResult);
  e.detail = {{"id", id}, {"request", request}, {"unmatched", true}};
  return e;
}

AuditEvent Progress(ProgressFields f) {
  AuditEvent e = Make(AuditKind::kProgress);
  e.detail = {{"id", f.id}, {"state", std::move(f.state)}, {"text", std::move(f.text)}};
  return e;
}

AuditEvent Finish(FinishFields f) {
  AuditEvent e = Make(AuditKind::kFinish);
  e.detail = {{"id", f.id}, {"outcome", std::move(f.outcome)}, {"summary", std::move(f.summary)}};
  return e;
}

AuditEvent ProtocolError(ProtocolErrorFields f) {
  AuditEvent e = Make(AuditKind::kProtocolError);
  e.detail = {{"id", f.id}, {"code", std::move(f.code)}, {"message", std::move(f.message)}};
  return e;
}

AuditEvent Budget(BudgetFields f) {
  AuditEvent e = Make(AuditKind::kBudget);
  if (f.id) e.detail["id"] = *f.id;
  if (f.budget) e.detail["budget"] = std::move(*f.budget);
  e.detail["reason"] = std::move(f.reason);
  return e;
}

AuditEvent Shutdown(ShutdownFields f) {
  AuditEvent e = Make(AuditKind::kShutdown);
  e.detail = {{"status", std::move(f.status)}, {"reason", std::move(f.reason)}};
  return e;
}

AuditEvent Patch(PatchFields f) {
  AuditEvent e = Make(AuditKind::kPatch);
  e.result_digest = std::move(f.patch_digest);
  e.detail = {{"files", f.files}, {"bytes", f.bytes}, {"violations", f.violations}};
  if (!f.git_config_dropped.empty()) e.detail["git_config_dropped"] = f.git_config_dropped;
  return e;
}

AuditEvent VerifyTree(VerifyTreeFields f) {
  AuditEvent e = Make(AuditKind::kVerifyTree);
  e.detail = {{"tree", std::move(f.tree)},
              {"base_commit", std::move(f.base_commit)},
              {"path", std::move(f.path)}};
  return e;
}

AuditEvent Verify(VerifyFields f) {
  AuditEvent e = Make(AuditKind::kVerify);
  e.detail = {{"command", std::move(f.command)},
              {"status", std::move(f.status)},
              {"exit_code", f.exit_code},
              {"duration_ms", f.duration_ms},
              {"tree", std::move(f.tree)}};
  if (!f.refused.empty()) {
    e.detail["refused"] = std::move(f.refused);
    e.detail["network_hints"] = std::move(f.network_hints);
  }
  return e;
}

AuditEvent Setup(SetupFields f) {
  AuditEvent e = Make(AuditKind::kSetup);
  e.detail = {{"command", std::move(f.command)}, {"status", std::move(f.status)},
              {"exit_code", f.exit_code},        {"duration_ms", f.duration_ms},
              {"where", std::move(f.where)},     {"log", std::move(f.log)}};
  if (!f.refused.empty()) {
    e.detail["refused"] = std::move(f.refused);
    e.detail["network_hints"] = std::move(f.network_hints);
  }
  return e;
}

AuditEvent Egress(EgressFields f) {
  AuditEvent e = Make(AuditKind::kEgress);
  e.verdict = f.allowed ? "allow" : "deny";
  e.rule = std::move(f.rule);
  e.detail = {{"host", std::move(f.host)},       {"port", f.port},
              {"address", std::move(f.address)}, {"via", std::move(f.via)},
              {"reason", std::move(f.reason)},   {"bytes_up", f.bytes_up},
              {"bytes_down", f.bytes_down},      {"duration_ms", f.duration_ms},
              {"phase", std::move(f.phase)}};
  if (!f.error.empty()) e.detail["error"] = std::move(f.error);
  return e;
}

AuditEvent McpCall(McpCallFields f) {
  AuditEvent e = Make(AuditKind::kMcpCall);
  e.tool = std::move(f.tool);
  e.args_digest = std::move(f.args_digest);
  e.verdict = std::move(f.verdict);
  e.rule = std::move(f.rule);
  e.detail = {{"mode", std::move(f.mode)},
              {"request", std::move(f.request)},
              {"reason", std::move(f.reason)},
              {"location", std::move(f.location)}};
  if (f.note) e.detail["note"] = std::move(*f.note);
  return e;
}

AuditEvent McpResult(McpResultFields f) {
  AuditEvent e = Make(AuditKind::kMcpResult);
  e.tool = std::move(f.tool);
  e.result_digest = std::move(f.result_digest);
  e.detail = {{"mode", std::move(f.mode)},
              {"request", std::move(f.request)},
              {"ok", f.ok},
              {"is_error", f.is_error},
              {"bytes", f.bytes}};
  if (!f.error.empty()) e.detail["error"] = std::move(f.error);
  return e;
}

AuditEvent McpList(McpListFields f) {
  AuditEvent e = Make(AuditKind::kMcpList);
  e.detail = {{"mode", std::move(f.mode)},
              {"offered", std::move(f.offered)},
              {"hidden", std::move(f.hidden)}};
  return e;
}

}  // namespace audit

// ---- validation ----

std::vector<std::string> ValidateAuditEntry(const json& entry) {
  std::vector<std::string> problems;
  if (!entry.is_object()) {
    problems.push_back("not a JSON object");
    return problems;
  }
  for (const AuditField& f : EnvelopeFields()) {
    const auto it = entry.find(f.name);
    if (it == entry.end()) {
      if (f.required) problems.push_back(std::string(f.name) + ": missing (required)");
      continue;
    }
    if (!HasType(*it, f.types)) {
      problems.push_back(std::string(f.name) + ": " + TypeOf(*it) + ", expected " +
                         AuditTypesName(f.types));
    }
  }
  for (const auto& [key, value] : entry.items()) {
    bool known = false;
    for (const AuditField& f : EnvelopeFields()) known = known || f.name == key;
    if (!known) problems.push_back(key + ": not an envelope field");
  }
  if (const auto prev = entry.find("prev"); prev != entry.end() && prev->is_string()) {
    if (!IsLowerHex64(prev->get<std::string>())) {
      problems.push_back("prev: not 64 lowercase hex digits");
    }
  }
  const auto event = entry.find("event");
  if (event == entry.end() || !event->is_string()) return problems;
  const std::optional<AuditKind> kind = ParseAuditKind(event->get<std::string>());
  if (!kind) {
    problems.push_back("event: \"" + event->get<std::string>() + "\" is not a known event");
    return problems;
  }
  const AuditEventSpec& spec = AuditSpec(*kind);

  if (const auto actor = entry.find("actor"); actor != entry.end() && actor->is_string()) {
    const std::optional<AuditActor> a = ParseAuditActor(actor->get<std::string>());
    bool allowed = false;
    for (AuditActor x : spec.actors) allowed = allowed || (a && *a == x);
    if (!allowed) {
      std::string names;
      for (AuditActor x : spec.actors) {
        names += (names.empty() ? "" : " or ") + std::string(AuditActorName(x));
      }
      problems.push_back("actor: \"" + actor->get<std::string>() + "\" does not record " +
                         std::string(spec.name) + " (only " + names + ")");
    }
  }

  for (const EnvelopeSlot& slot : kSlots) {
    const auto it = entry.find(slot.name);
    if (it == entry.end() || !it->is_string()) continue;  // reported above
    const std::string& value = it->get_ref<const std::string&>();
    const AuditPresence presence = (spec.*slot.use).presence;
    const std::string name(slot.name);
    if (presence == AuditPresence::kNever && !value.empty()) {
      problems.push_back(name + ": set, but " + std::string(spec.name) + " never sets it");
    } else if (presence == AuditPresence::kRequired && value.empty()) {
      problems.push_back(name + ": empty, but " + std::string(spec.name) + " always sets it");
    }
    if (value.empty()) continue;
    if ((slot.name == "args" || slot.name == "result") && !IsLowerHex64(value)) {
      problems.push_back(name + ": not a SHA-256 digest (64 lowercase hex digits)");
    }
    if (slot.name == "verdict" && value != "allow" && value != "deny" && value != "ask") {
      problems.push_back("verdict: \"" + value + "\" is not allow, deny or ask");
    }
  }

  const auto detail = entry.find("detail");
  if (detail == entry.end() || !detail->is_object()) return problems;
  for (const AuditField& f : spec.detail) {
    const auto it = detail->find(f.name);
    if (it == detail->end()) {
      if (f.required) problems.push_back("detail." + std::string(f.name) + ": missing (required)");
      continue;
    }
    if (!HasType(*it, f.types)) {
      problems.push_back("detail." + std::string(f.name) + ": " + TypeOf(*it) + ", expected " +
                         AuditTypesName(f.types));
    }
  }
  for (const auto& [key, value] : detail->items()) {
    bool declared = false;
    for (const AuditField& f : spec.detail) declared = declared || f.name == key;
    if (!declared) {
      problems.push_back("detail." + key + ": not a field of " + std::string(spec.name));
    }
  }
  return problems;
}

std::vector<std::string> ValidateAuditLine(std::string_view line) {
  bool too_deep = false;
  const json entry = ParseJsonWithin(line, kMaxAuditEntryDepth, &too_deep);
  if (too_deep) {
    return {"nested deeper than " + std::to_string(kMaxAuditEntryDepth) + " levels"};
  }
  if (entry.is_discarded()) {
    return {"not valid JSON"};
  }
  return ValidateAuditEntry(entry);
}

Result<AuditSchemaReport> ValidateAuditLogFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError("open " + path);
  AuditSchemaReport report;
  std::string line;
  while (std::getline(in, line)) {
    ++report.entries;
    for (std::string& p : ValidateAuditLine(line)) {
      report.problems.push_back({report.entries, std::move(p)});
    }
  }
  if (in.bad()) return ErrnoError("read " + path);
  return report;
}

// ---- documentation ----

std::string AuditSchemaMarkdown() {
  std::string md;
  md += "### Envelope\n\n";
  md += "Every line has these fields, in this order (`lost` only when entries were lost).\n\n";
  md += "| field | type | required | meaning |\n|---|---|---|---|\n";
  for (const AuditField& f : EnvelopeFields()) {
    md += "| `" + std::string(f.name) + "` | " + EscapeCell(AuditTypesName(f.types)) + " | " +
          (f.required ? "yes" : "no") + " | " + EscapeCell(f.meaning) + " |\n";
  }
  md += "\n### Actors\n\n| actor | who |\n|---|---|\n";
  for (std::size_t i = 0; i < kActorNames.size(); ++i) {
    md += "| `" + std::string(kActorNames[i]) + "` | " + std::string(kActorMeanings[i]) + " |\n";
  }
  md += "\n### Events\n\n| event | actor | meaning |\n|---|---|---|\n";
  for (const AuditEventSpec& s : Specs()) {
    std::string actors;
    for (AuditActor a : s.actors) {
      actors +=
          (actors.empty() ? "" : ", ") + std::string("`") + std::string(AuditActorName(a)) + "`";
    }
    md += "| [`" + std::string(s.name) + "`](#" + std::string(s.name) + ") | " + actors + " | " +
          EscapeCell(s.meaning) + " |\n";
  }
  for (const AuditEventSpec& s : Specs()) {
    std::string sentence(s.meaning);
    if (!sentence.empty() && sentence[0] >= 'a' && sentence[0] <= 'z') sentence[0] -= 'a' - 'A';
    md += "\n#### " + std::string(s.name) + "\n\n" + sentence + ".\n\n";
    std::string actors;
    for (AuditActor a : s.actors) {
      actors +=
          (actors.empty() ? "" : ", ") + std::string("`") + std::string(AuditActorName(a)) + "`";
    }
    md += "Actor: " + actors + ".\n\n";
    std::string envelope;
    for (const EnvelopeSlot& slot : kSlots) {
      const AuditEnvelopeUse& use = s.*slot.use;
      if (use.presence == AuditPresence::kNever) continue;
      envelope += "- `" + std::string(slot.name) + "` (" + std::string(PresenceWord(use.presence)) +
                  "): " + std::string(use.meaning) + "\n";
    }
    if (envelope.empty()) {
      md += "Envelope: `tool`, `args`, `verdict`, `rule` and `result` are \"\".\n\n";
    } else {
      md += "Envelope (the others are \"\"):\n\n" + envelope + "\n";
    }
    md += "| detail field | type | required | meaning |\n|---|---|---|---|\n";
    for (const AuditField& f : s.detail) {
      md += "| `" + std::string(f.name) + "` | " + EscapeCell(AuditTypesName(f.types)) + " | " +
            (f.required ? "yes" : "no") + " | " + EscapeCell(f.meaning) + " |\n";
    }
  }
  return md;
}

json AuditSchemaJson() {
  const auto field = [](const AuditField& f) {
    return json{{"name", std::string(f.name)},
                {"type", AuditTypesName(f.types)},
                {"required", f.required},
                {"meaning", std::string(f.meaning)}};
  };
  json envelope = json::array();
  for (const AuditField& f : EnvelopeFields()) envelope.push_back(field(f));
  json events = json::array();
  for (const AuditEventSpec& s : Specs()) {
    json actors = json::array();
    for (AuditActor a : s.actors) actors.push_back(std::string(AuditActorName(a)));
    json uses = json::object();
    for (const EnvelopeSlot& slot : kSlots) {
      const AuditEnvelopeUse& use = s.*slot.use;
      uses[std::string(slot.name)] = {{"presence", std::string(PresenceWord(use.presence))},
                                      {"meaning", std::string(use.meaning)}};
    }
    json detail = json::array();
    for (const AuditField& f : s.detail) detail.push_back(field(f));
    events.push_back({{"event", std::string(s.name)},
                      {"actors", std::move(actors)},
                      {"meaning", std::string(s.meaning)},
                      {"envelope", std::move(uses)},
                      {"detail", std::move(detail)}});
  }
  return json{{"envelope", std::move(envelope)}, {"events", std::move(events)}};
}

}  // namespace cagent::launcher::broker
