// The audit log's event kinds, declared once. Each kind is one block of rows in
// CAGENT_AUDIT_EVENTS; audit_schema.h and audit_schema.cc expand the table into
//
//   - the AuditKind enum (in this order, which is also the documentation's),
//   - the kind's field struct (audit::StateFields ...) and its typed builder (audit::State ...),
//   - the field-name constants the readers use (audit::names::State::reason ...), so `cagent log`'s
//     describer and the run transcript cannot name a field the kind does not have,
//   - the schema (AuditSpec) that the validator (`cagent log check`), the generated
//     docs/audit-log.md and `cagent log schema` are made from.
//
// Adding a field to a kind is one FIELD row here (and its test): the struct member, the builder's
// write, the schema row and the name constant all follow. Security teams read the log, so a row is
// a product surface: add a field as optional, never change a field's type or meaning, and
// regenerate docs/audit-log.md (tests/launcher/broker/audit_schema_test.cc says how).
//
// The rows, each a macro the including file defines:
//
//   EVENT(Kind, "name", actor, writer, "meaning")
//       Starts a kind: its enum value is k<Kind>, its struct <Kind>Fields and its builder <Kind>.
//       `actor` is an AuditActor enumerator; `writer` is kJson (the detail built as a json object)
//       or kTyped (kept as typed fields and written without a json value per field: the kinds
//       written once per tool call).
//   ENVELOPE(Kind, slot, member, Type, presence, "meaning")
//       The kind sets the envelope's `slot` (tool, args, verdict, rule or result) from the struct
//       member `member`: a std::string, or a bool for a verdict (true: allow, false: deny).
//       `presence` is kRequired (never "") or kOptional (set in some variants); a slot with no
//       row is always "".
//   FIELD(Kind, member, Type, need, "meaning")
//       A detail field named as its member. Type decides its JSON type and when it is written:
//         std::uint64_t count, std::int64_t integer, bool, std::string, StringList, IntList,
//         protocol::Usage (an object), ToolCallList (an array of objects), nlohmann::json (an
//         object; any other value is wrapped as {"value": ...}): always written;
//         std::optional<T>: only when set; OmitEmpty<T>: only when not empty;
//         PathList / ChangedPathList: the list, or above its cap the count as a string.
//       `need` is kRequired or kOptional, as a reader of any log (older versions' included) may
//       count on it; a field that is not always written must be kOptional (checked at compile
//       time).
//   END(Kind)
//       Ends the kind.
//
// Member order is the struct's, so call sites' designated initializers follow it; envelope rows
// sit among the fields where the struct has them. Types are single tokens or templates without a
// comma (the preprocessor splits on commas): the aliases in audit_schema.h exist for that.
#pragma once

#include <string_view>

namespace cagent::launcher::broker {

// Meanings several kinds share.
inline constexpr std::string_view kAuditIdMeaning =
    "the protocol request id of the agent's message";
inline constexpr std::string_view kAuditCallIdMeaning =
    "the model's id of the tool call (what the agent named)";
inline constexpr std::string_view kAuditTurnMeaning =
    "the model turn (1-based) the call belongs to; 0 before the first turn";
inline constexpr std::string_view kAuditStatusMeaning =
    "`passed`, `failed`, `timed-out`, `infrastructure-error` or `not-run`";
inline constexpr std::string_view kAuditRefusedMeaning =
    "what its sandbox's network refused, when the command did not pass: `HOST:PORT`, or "
    "`NAME (lookup)` for a name lookup answered \"no such name\" (at most 16)";
inline constexpr std::string_view kAuditHintsMeaning =
    "with `refused`: cagent's one-line explanations of why and how to allow a host";

}  // namespace cagent::launcher::broker

// clang-format off
#define CAGENT_AUDIT_EVENTS(EVENT, ENVELOPE, FIELD, END)                                           \
  EVENT(State, "state", kCagent, kJson,                                                            \
        "the run changed state (created, preparing, running, verifying, completed, failed, "       \
        "cancelled, needs-approval)")                                                              \
  FIELD(State, state, std::string, kRequired, "the new state")                                     \
  FIELD(State, reason, OmitEmpty<std::string>, kOptional, "why, in words (ends and failures)")     \
  FIELD(State, profile, std::optional<std::string>, kOptional,                                     \
        "with `created`: the profile the run uses")                                                \
  FIELD(State, model, std::optional<std::string>, kOptional,                                       \
        "with `created`: the model spec (`--model`)")                                              \
  END(State)                                                                                       \
                                                                                                   \
  EVENT(Workspace, "workspace", kCagent, kJson,                                                    \
        "the disposable workspace was made from the pinned base commit")                           \
  FIELD(Workspace, repo, std::string, kRequired,                                                   \
        "the caller's repository (never written by the run)")                                      \
  FIELD(Workspace, base_commit, std::string, kRequired, "the commit the workspace was made from")  \
  FIELD(Workspace, carried_dirty, bool, kRequired,                                                 \
        "uncommitted changes were carried in (`--allow-dirty`)")                                   \
  FIELD(Workspace, carried_paths, StringList, kRequired, "the paths carried in")                   \
  END(Workspace)                                                                                   \
                                                                                                   \
  EVENT(Hello, "hello", kAgent, kJson, "the agent's first message")                                \
  FIELD(Hello, id, std::uint64_t, kRequired, kAuditIdMeaning)                                      \
  FIELD(Hello, agent, std::string, kRequired,                                                      \
        "the agent's name and version, as it says (shortened)")                                    \
  FIELD(Hello, protocols, IntList, kRequired, "the protocol versions it speaks")                   \
  END(Hello)                                                                                       \
                                                                                                   \
  EVENT(Welcome, "welcome", kBroker, kJson, "the broker accepted the agent and sent its terms")    \
  FIELD(Welcome, id, std::uint64_t, kRequired, kAuditIdMeaning)                                    \
  FIELD(Welcome, tools, StringList, kRequired, "the tools the policy enables")                     \
  FIELD(Welcome, max_turns, std::uint64_t, kRequired, "the model-turn budget (0 = unlimited)")     \
  END(Welcome)                                                                                     \
                                                                                                   \
  EVENT(ModelCall, "model_call", kAgent, kJson,                                                    \
        "the agent asked for a model turn; the broker built the provider request from its own "    \
        "allow-list and sent only the conversation's content")                                     \
  FIELD(ModelCall, id, std::uint64_t, kRequired, kAuditIdMeaning)                                  \
  ENVELOPE(ModelCall, args, conversation_digest, std::string, kRequired,                           \
           "SHA-256 of the model_call payload exactly as the agent sent it (before redaction)")    \
  FIELD(ModelCall, turn, std::uint64_t, kRequired, "this call's turn number (1-based)")            \
  FIELD(ModelCall, messages, std::uint64_t, kRequired, "messages in the conversation")             \
  FIELD(ModelCall, redactions, std::uint64_t, kRequired,                                           \
        "secrets replaced in texts and tool-call arguments")                                       \
  FIELD(ModelCall, input_estimate, std::uint64_t, kRequired,                                       \
        "the broker's estimate of the input tokens")                                               \
  FIELD(ModelCall, max_tokens, std::uint64_t, kRequired,                                           \
        "the output cap sent to the provider (within the token budget left)")                      \
  FIELD(ModelCall, tools, StringList, kRequired, "the tool schemas offered to the model, by name") \
  END(ModelCall)                                                                                   \
                                                                                                   \
  EVENT(ModelResult, "model_result", kBroker, kJson,                                               \
        "the model's turn, as the agent gets it, with the provider's response body")               \
  FIELD(ModelResult, id, std::uint64_t, kRequired, kAuditIdMeaning)                                \
  ENVELOPE(ModelResult, result, raw_digest, std::string, kRequired,                                \
           "digest of `detail.body` before redaction")                                             \
  FIELD(ModelResult, turn, std::uint64_t, kRequired, "the turn number")                            \
  FIELD(ModelResult, usage, protocol::Usage, kRequired,                                            \
        "`{input_tokens, output_tokens}` as the provider counted (all input, cached or not; all "  \
        "output, reasoning included), with the parts it reported separately when not 0: "          \
        "`cache_read_tokens`, `cache_write_tokens`, `reasoning_tokens`")                           \
  FIELD(ModelResult, cost, OmitEmpty<std::string>, kOptional,                                      \
        "what the call cost at the model's prices (`0.0123 USD`); left out without prices")        \
  FIELD(ModelResult, stop_reason, std::string, kRequired,                                          \
        "`end`, `tool_calls`, `max_tokens`, `refused` or `other`")                                 \
  FIELD(ModelResult, provider_stop_reason, std::string, kRequired,                                 \
        "the provider's own word (`stop`, `end_turn` ...), or \"\"")                               \
  FIELD(ModelResult, text_bytes, std::uint64_t, kRequired, "bytes of the turn's text")             \
  FIELD(ModelResult, tool_calls, ToolCallList, kRequired,                                          \
        "the calls the model made: `{id, name, args, arguments_error}` (`args`: digest of the "    \
        "arguments; `arguments_error`: why they were unusable, or \"\")")                          \
  FIELD(ModelResult, body, nlohmann::json, kRequired,                                              \
        "the provider's response body (for replay: the recorded turn), redacted")                  \
  END(ModelResult)                                                                                 \
                                                                                                   \
  EVENT(ModelError, "model_error", kBroker, kJson,                                                 \
        "the model provider failed (after retries); the run fails")                                \
  FIELD(ModelError, id, std::uint64_t, kRequired, kAuditIdMeaning)                                 \
  FIELD(ModelError, turn, std::uint64_t, kRequired, "the turn that failed")                        \
  FIELD(ModelError, code, std::string, kRequired, "`provider_error` or `provider_auth`")           \
  FIELD(ModelError, message, std::string, kRequired, "what failed and what to check")              \
  END(ModelError)                                                                                  \
                                                                                                   \
  EVENT(ToolRequest, "tool_request", kAgent, kJson,                                                \
        "a tool call the agent asked for that got no decision: the broker answered it with an "    \
        "error (too many allowed calls awaiting their result, or a tool-call budget exhausted); "  \
        "every other request is recorded in its `decision` (logs before issue 18 have one per "    \
        "request)")                                                                                \
  FIELD(ToolRequest, id, std::uint64_t, kRequired, kAuditIdMeaning)                                \
  ENVELOPE(ToolRequest, tool, tool, std::string, kRequired, "the tool, as the agent named it")     \
  ENVELOPE(ToolRequest, args, args_digest, std::string, kRequired,                                 \
           "digest of the call's arguments")                                                       \
  FIELD(ToolRequest, call_id, std::string, kRequired, kAuditCallIdMeaning)                         \
  FIELD(ToolRequest, turn, std::uint64_t, kRequired,                                               \
        "the model's latest turn when the request came")                                           \
  FIELD(ToolRequest, paths, PathList, kRequired,                                                   \
        "the workspace paths the agent resolved the call to (symlinks followed); above 32, the "   \
        "string \"N paths\"")                                                                      \
  END(ToolRequest)                                                                                 \
                                                                                                   \
  EVENT(Decision, "decision", kBroker, kTyped,                                                     \
        "a tool call the agent asked for and the broker's verdict on it, in one entry (one per "   \
        "decided request; logs before issue 18 have a `tool_request` entry before each)")          \
  FIELD(Decision, id, std::uint64_t, kRequired, kAuditIdMeaning)                                   \
  ENVELOPE(Decision, tool, tool, std::string, kRequired, "the tool, as the agent named it")        \
  ENVELOPE(Decision, args, args_digest, std::string, kRequired, "digest of the call's arguments")  \
  ENVELOPE(Decision, verdict, verdict, std::string, kRequired,                                     \
           "allow, deny, or ask (an approval follows)")                                            \
  ENVELOPE(Decision, rule, rule, std::string, kRequired,                                           \
           "the deciding rule: a profile rule, or the broker's own check (`model turn`, "          \
           "`unknown tool`, `arguments`, `loop detection`)")                                       \
  FIELD(Decision, call_id, std::string, kRequired, kAuditCallIdMeaning)                            \
  FIELD(Decision, turn, std::uint64_t, kRequired, kAuditTurnMeaning)                               \
  FIELD(Decision, paths, PathList, kOptional,                                                      \
        "the workspace paths the agent resolved the call to (symlinks followed); above 32, the "   \
        "string \"N paths\" (always written since issue 18; absent in older logs)")                \
  FIELD(Decision, reason, std::string, kRequired, "why, in words")                                 \
  FIELD(Decision, location, std::optional<std::string>, kOptional,                                 \
        "the rule's `file:line:col`, or \"\"")                                                     \
  FIELD(Decision, pending, std::optional<bool>, kOptional, "true when an approval message follows")\
  FIELD(Decision, note, std::optional<std::string>, kOptional,                                     \
        "how an ask was settled without asking (standing approval, auto, headless)")               \
  END(Decision)                                                                                    \
                                                                                                   \
  EVENT(Loop, "loop", kBroker, kJson,                                                              \
        "loop detection refused a request: the same call repeated, or a short cycle, with no "     \
        "workspace change (a decision follows)")                                                   \
  FIELD(Loop, id, std::uint64_t, kRequired, kAuditIdMeaning)                                       \
  ENVELOPE(Loop, tool, tool, std::string, kRequired, "the tool")                                   \
  ENVELOPE(Loop, args, args_digest, std::string, kRequired, "digest of the call's arguments")      \
  FIELD(Loop, reason, std::string, kRequired, "what repeated, how often")                          \
  END(Loop)                                                                                        \
                                                                                                   \
  EVENT(LoopState, "loop_state", kBroker, kJson,                                                   \
        "loop detection sees only part of the workspace (said once per session)")                  \
  FIELD(LoopState, entries, std::uint64_t, kRequired, "workspace entries digested")                \
  FIELD(LoopState, max_entries, std::uint64_t, kRequired, "the cap on entries")                    \
  FIELD(LoopState, truncated, bool, kRequired, "the walk stopped at the cap")                      \
  FIELD(LoopState, not_walked, std::uint64_t, kRequired, "directories that could not be walked")   \
  FIELD(LoopState, error, std::string, kRequired, "the first walk error, or \"\"")                 \
  END(LoopState)                                                                                   \
                                                                                                   \
  EVENT(Approval, "approval", kOperator, kJson,                                                    \
        "a person (or the headless approver) answered an ask")                                     \
  FIELD(Approval, id, std::uint64_t, kRequired, kAuditIdMeaning)                                   \
  ENVELOPE(Approval, tool, tool, std::string, kRequired, "the tool")                               \
  ENVELOPE(Approval, args, args_digest, std::string, kRequired, "digest of the call's arguments")  \
  ENVELOPE(Approval, verdict, approved, bool, kRequired, "allow or deny")                          \
  ENVELOPE(Approval, rule, rule, std::string, kRequired, "the asking rule")                        \
  FIELD(Approval, call_id, std::string, kRequired, kAuditCallIdMeaning)                            \
  FIELD(Approval, turn, std::uint64_t, kRequired, kAuditTurnMeaning)                               \
  FIELD(Approval, scope, std::string, kRequired,                                                   \
        "`once`, `run`, `pattern`, `denied` or `headless`")                                        \
  FIELD(Approval, by, std::string, kRequired, "who answered (the terminal, the approver)")         \
  END(Approval)                                                                                    \
                                                                                                   \
  EVENT(ToolResult, "tool_result", kAgent, kTyped,                                                 \
        "the agent reported the outcome of an allowed tool call")                                  \
  FIELD(ToolResult, id, std::uint64_t, kRequired, kAuditIdMeaning)                                 \
  ENVELOPE(ToolResult, tool, tool, std::string, kOptional, "the tool (absent when unmatched)")     \
  ENVELOPE(ToolResult, result, output_digest, std::string, kOptional,                              \
           "digest of the output as the model gets it (redacted); absent when unmatched")          \
  FIELD(ToolResult, request, std::uint64_t, kRequired, "the id of the tool_request it answers")    \
  FIELD(ToolResult, unmatched, std::optional<bool>, kOptional,                                     \
        "true: no allowed request awaits this result (a protocol_error follows); the fields "      \
        "below are then absent")                                                                   \
  FIELD(ToolResult, call_id, std::string, kOptional, "the model's id of the call")                 \
  FIELD(ToolResult, turn, std::uint64_t, kOptional, "the model turn the call came from")           \
  FIELD(ToolResult, ok, bool, kOptional, "the tool succeeded")                                     \
  FIELD(ToolResult, error_code, std::string, kOptional,                                            \
        "\"\" when ok; e.g. `not_found`, `timeout`")                                               \
  FIELD(ToolResult, bytes, std::uint64_t, kOptional,                                               \
        "bytes of output the agent reported (before redaction)")                                   \
  FIELD(ToolResult, redacted, bool, kOptional, "secrets were replaced in the output")              \
  FIELD(ToolResult, changed_paths, ChangedPathList, kOptional,                                     \
        "files the agent says it wrote; above 64, their number as a string")                       \
  END(ToolResult)                                                                                  \
                                                                                                   \
  EVENT(Progress, "progress", kAgent, kJson, "a status line for the operator's display")           \
  FIELD(Progress, id, std::uint64_t, kRequired, kAuditIdMeaning)                                   \
  FIELD(Progress, state, std::string, kRequired, "e.g. `thinking`, `tool`, `compacting`")          \
  FIELD(Progress, text, std::string, kRequired, "the line (shortened)")                            \
  END(Progress)                                                                                    \
                                                                                                   \
  EVENT(Finish, "finish", kAgent, kJson, "the agent says it is done or gives up; the session ends")\
  FIELD(Finish, id, std::uint64_t, kRequired, kAuditIdMeaning)                                     \
  FIELD(Finish, outcome, std::string, kRequired, "`done`, `gave_up` or `error`")                   \
  FIELD(Finish, summary, std::string, kRequired, "its summary (shortened)")                        \
  END(Finish)                                                                                      \
                                                                                                   \
  EVENT(ProtocolError, "protocol_error", kAgent, kJson,                                            \
        "a message from the agent was refused (malformed, out of order, unknown ...)")             \
  FIELD(ProtocolError, id, std::uint64_t, kRequired, "the request id (0 when unknown)")            \
  FIELD(ProtocolError, code, std::string, kRequired,                                               \
        "the error code sent back (`malformed`, `out_of_order` ...)")                              \
  FIELD(ProtocolError, message, std::string, kRequired, "what was wrong")                          \
  END(ProtocolError)                                                                               \
                                                                                                   \
  EVENT(Budget, "budget", kBroker, kJson, "a budget ran out; the run fails")                       \
  FIELD(Budget, id, std::optional<std::uint64_t>, kOptional,                                       \
        "the request that would have exceeded it")                                                 \
  FIELD(Budget, budget, std::optional<std::string>, kOptional,                                     \
        "which budget, when no request did (`wall-time`)")                                         \
  FIELD(Budget, reason, std::string, kRequired, "which budget, used and allowed")                  \
  END(Budget)                                                                                      \
                                                                                                   \
  EVENT(Shutdown, "shutdown", kBroker, kJson,                                                      \
        "the session ended (always the broker's last entry)")                                      \
  FIELD(Shutdown, status, std::string, kRequired,                                                  \
        "`finished`, `failed`, `cancelled` or `needs-approval`")                                   \
  FIELD(Shutdown, reason, std::string, kRequired, "why, or \"\"")                                  \
  END(Shutdown)                                                                                    \
                                                                                                   \
  EVENT(Patch, "patch", kCagent, kJson, "git's view of what the agent changed, captured by cagent")\
  ENVELOPE(Patch, result, patch_digest, std::string, kRequired, "SHA-256 of patch.diff")           \
  FIELD(Patch, files, std::uint64_t, kRequired, "files changed")                                   \
  FIELD(Patch, bytes, std::uint64_t, kRequired, "bytes of the patch")                              \
  FIELD(Patch, violations, std::uint64_t, kRequired,                                               \
        "changes that break the profile's path and size rules")                                    \
  FIELD(Patch, git_config_dropped, OmitEmpty<StringList>, kOptional,                               \
        "keys cagent removed from git configs the sandbox changed, before capture, as "            \
        "\"FILE: KEY\" (a replaced unreadable file as \"FILE: (whole file)\")")                    \
  END(Patch)                                                                                       \
                                                                                                   \
  EVENT(VerifyTree, "verify_tree", kCagent, kJson,                                                 \
        "the fresh checkout of base + patch that verification runs on")                            \
  FIELD(VerifyTree, tree, std::string, kRequired, "its git tree id")                               \
  FIELD(VerifyTree, base_commit, std::string, kRequired, "the base commit")                        \
  FIELD(VerifyTree, path, std::string, kRequired, "where it was checked out")                      \
  END(VerifyTree)                                                                                  \
                                                                                                   \
  EVENT(Verify, "verify", kCagent, kJson, "one of the profile's verification commands ran")        \
  FIELD(Verify, command, std::string, kRequired, "the command")                                    \
  FIELD(Verify, status, std::string, kRequired, kAuditStatusMeaning)                               \
  FIELD(Verify, exit_code, std::int64_t, kRequired, "its exit status (-1 when none)")              \
  FIELD(Verify, duration_ms, std::int64_t, kRequired, "how long it ran")                           \
  FIELD(Verify, tree, std::string, kRequired, "the tree it ran on (\"\" = not run on one)")        \
  FIELD(Verify, refused, OmitEmpty<StringList>, kOptional, kAuditRefusedMeaning)                   \
  FIELD(Verify, network_hints, OmitEmpty<StringList>, kOptional, kAuditHintsMeaning)               \
  END(Verify)                                                                                      \
                                                                                                   \
  EVENT(Egress, "egress", kBroker, kJson,                                                          \
        "a connection of the sandbox through cagent's egress proxy (hosts rules), when it ended "  \
        "or was refused")                                                                          \
  FIELD(Egress, host, std::string, kRequired, "the name or IP literal the sandbox asked for")      \
  FIELD(Egress, port, std::uint64_t, kRequired, "the port")                                        \
  FIELD(Egress, address, std::string, kRequired, "the address cagent connected to (\"\" = none)")  \
  FIELD(Egress, via, std::string, kRequired,                                                       \
        "how the sandbox reached the proxy: `connect`, `http`, `socks5` or `transparent`")         \
  ENVELOPE(Egress, verdict, allowed, bool, kRequired,                                              \
           "`allow` (relayed) or `deny` (refused by a rule, the default or the proxy)")            \
  ENVELOPE(Egress, rule, rule, std::string, kOptional,                                             \
           "the hosts rule that decided (absent for the default and the proxy's own refusals)")    \
  FIELD(Egress, reason, std::string, kRequired, "why it was allowed or refused")                   \
  FIELD(Egress, error, OmitEmpty<std::string>, kOptional, "the upstream or relay error")           \
  FIELD(Egress, bytes_up, std::uint64_t, kRequired, "bytes from the sandbox to the host")          \
  FIELD(Egress, bytes_down, std::uint64_t, kRequired, "bytes from the host to the sandbox")        \
  FIELD(Egress, duration_ms, std::int64_t, kRequired, "how long the connection lasted")            \
  FIELD(Egress, phase, std::string, kRequired, "`agent`, `setup`, `verify` or `exec`")             \
  END(Egress)                                                                                      \
                                                                                                   \
  EVENT(HttpRequest, "http_request", kBroker, kJson,                                               \
        "one request the egress proxy read on a connection it intercepts (a host a credential is " \
        "bound to, issue 36), when its response ended or it was refused; never a credential's "    \
        "value, never the query string")                                                           \
  FIELD(HttpRequest, phase, std::string, kRequired, "`agent`, `setup`, `verify` or `exec`")        \
  FIELD(HttpRequest, host, std::string, kRequired, "the name or IP literal of the connection")     \
  FIELD(HttpRequest, port, std::uint64_t, kRequired, "the port")                                   \
  FIELD(HttpRequest, method, std::string, kRequired, "the request's method, as sent")              \
  FIELD(HttpRequest, path, std::string, kRequired, "the request target's path, without the query") \
  FIELD(HttpRequest, credentials, StringList, kRequired,                                           \
        "the names of the credentials whose value cagent put into the request (never a value)")    \
  ENVELOPE(HttpRequest, verdict, allowed, bool, kRequired,                                         \
           "`allow` (sent upstream) or `deny` (refused by a rule, the default or the proxy)")      \
  ENVELOPE(HttpRequest, rule, rule, std::string, kOptional,                                        \
           "the hosts rule that decided (absent for the default and the proxy's own refusals)")    \
  FIELD(HttpRequest, reason, std::string, kRequired, "why it was allowed or refused")              \
  FIELD(HttpRequest, misdirected, OmitEmpty<std::string>, kOptional,                               \
        "the credential whose placeholder the request carried to a host it is not bound to (an "   \
        "attempted exfiltration; the request was refused)")                                        \
  FIELD(HttpRequest, status, std::int64_t, kRequired,                                              \
        "the upstream's final status code; 0 when none (refused, failed, or no response head)")    \
  FIELD(HttpRequest, bytes_up, std::uint64_t, kRequired, "the request as sent upstream, in bytes") \
  FIELD(HttpRequest, bytes_down, std::uint64_t, kRequired,                                         \
        "the response as relayed to the sandbox, in bytes")                                        \
  FIELD(HttpRequest, duration_ms, std::int64_t, kRequired, "how long the exchange lasted")         \
  FIELD(HttpRequest, error, OmitEmpty<std::string>, kOptional, "the upstream TLS or relay error")  \
  END(HttpRequest)                                                                                 \
                                                                                                   \
  EVENT(McpCall, "mcp_call", kBroker, kJson,                                                       \
        "an MCP client's tools/call and the broker's decision on it (`cagent mcp wrap`: by MCP "   \
        "tool name; `cagent mcp serve`: cagent's own tools)")                                      \
  FIELD(McpCall, mode, std::string, kRequired, "`wrap` or `serve`")                                \
  FIELD(McpCall, request, std::string, kRequired,                                                  \
        "the client's JSON-RPC id of the call, as JSON text")                                      \
  ENVELOPE(McpCall, tool, tool, std::string, kRequired,                                            \
           "the MCP tool, as the client named it (shortened)")                                     \
  ENVELOPE(McpCall, args, args_digest, std::string, kRequired, "digest of the call's arguments")   \
  ENVELOPE(McpCall, verdict, verdict, std::string, kRequired,                                      \
           "`allow` (the call goes to the server) or `deny` (answered with isError)")              \
  ENVELOPE(McpCall, rule, rule, std::string, kOptional,                                            \
           "the deciding rule, or the broker's own check (`tool-calls budget`)")                   \
  FIELD(McpCall, location, std::string, kOptional, "the rule's `file:line:col`, or \"\"")          \
  FIELD(McpCall, reason, std::string, kRequired, "why, in words")                                  \
  FIELD(McpCall, note, std::optional<std::string>, kOptional,                                      \
        "how an ask was settled (approved, declined, beforehand, headless)")                       \
  END(McpCall)                                                                                     \
                                                                                                   \
  EVENT(McpResult, "mcp_result", kBroker, kJson,                                                   \
        "what the MCP server answered to an allowed tools/call (or that it did not)")              \
  FIELD(McpResult, mode, std::string, kRequired, "`wrap` or `serve`")                              \
  FIELD(McpResult, request, std::string, kRequired,                                                \
        "the client's JSON-RPC id of the call, as JSON text")                                      \
  ENVELOPE(McpResult, tool, tool, std::string, kRequired, "the MCP tool")                          \
  ENVELOPE(McpResult, result, result_digest, std::string, kOptional,                               \
           "digest of the result (or of the JSON-RPC error); absent when there was none")          \
  FIELD(McpResult, ok, bool, kRequired, "the server answered with a result (not an error)")        \
  FIELD(McpResult, is_error, bool, kRequired, "the result says `isError`")                         \
  FIELD(McpResult, bytes, std::uint64_t, kRequired, "bytes of the server's response")              \
  FIELD(McpResult, error, OmitEmpty<std::string>, kOptional,                                       \
        "the error, or why there was no answer")                                                   \
  END(McpResult)                                                                                   \
                                                                                                   \
  EVENT(McpList, "mcp_list", kBroker, kJson,                                                       \
        "a tools/list answer as the client got it: tools the profile denies are not offered")      \
  FIELD(McpList, mode, std::string, kRequired, "`wrap` or `serve`")                                \
  FIELD(McpList, offered, StringList, kRequired, "the tools offered, in the server's order")       \
  FIELD(McpList, hidden, StringList, kRequired, "the tools the profile denies, not offered")       \
  END(McpList)                                                                                     \
                                                                                                   \
  EVENT(Setup, "setup", kCagent, kJson,                                                            \
        "one of the profile's setup commands ran (trusted, in its own sandbox with writable "      \
        "caches and the setup block's network)")                                                   \
  FIELD(Setup, command, std::string, kRequired, "the command")                                     \
  FIELD(Setup, status, std::string, kRequired, kAuditStatusMeaning)                                \
  FIELD(Setup, exit_code, std::int64_t, kRequired, "its exit status (-1 when none)")               \
  FIELD(Setup, duration_ms, std::int64_t, kRequired, "how long it ran")                            \
  FIELD(Setup, where, std::string, kRequired,                                                      \
        "`workspace` (before the agent) or `verify-tree` (before the verify commands)")            \
  FIELD(Setup, log, std::string, kRequired, "its output, relative to the run directory")           \
  FIELD(Setup, refused, OmitEmpty<StringList>, kOptional, kAuditRefusedMeaning)                    \
  FIELD(Setup, network_hints, OmitEmpty<StringList>, kOptional, kAuditHintsMeaning)                \
  END(Setup)
// clang-format on
