// The rules every parsed model turn passes before it leaves the model module, whatever the
// provider: the turn goes to the untrusted agent, and its call ids are what the broker binds tool
// requests to. Runs in cagent (trusted), on the broker's io_context thread; pure (no I/O).
//
//   - every tool call has an id that is non-empty, at most protocol::kMaxIdBytes bytes and unique
//     in the turn; a missing, duplicate or oversize id is replaced by a generated "call_<n>"
//     (unique within the CallIdSource's lifetime and within the turn);
//   - a name that is empty or longer than kMaxIdBytes makes the call unusable: arguments {} and
//     arguments_error saying why; the name becomes "unnamed" or is cut to the limit;
//   - arguments are always an object; unusable ones (not JSON, not an object) are {} with
//     arguments_error (SetArgumentsFromText / SetArgumentsFromJson);
//   - at most protocol::kMaxToolCallsPerTurn calls (more is an error for the caller to report);
//   - a turn with calls whose stop reason is "end" is "tool_calls".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/protocol.h"
#include "common/result.h"

namespace cagent::launcher::model {

// Makes "call_1", "call_2", ... One per provider (so generated ids never repeat in a session).
// Not thread-safe (used on the io_context's thread).
class CallIdSource {
 public:
  std::string Next() { return "call_" + std::to_string(++next_); }

 private:
  std::uint64_t next_ = 0;
};

// How deep the JSON a model sends may nest: a whole answer or stream event (kMaxAnswerDepth,
// parsed with cagent::ParseJsonWithin), and a tool call's arguments within it. A turn with
// arguments at the limit still fits, with the protocol's envelope, in the 128 levels the agent
// accepts; deeper text is refused before it is parsed (json_text.h says why).
inline constexpr std::size_t kMaxAnswerDepth = 100;
inline constexpr std::size_t kMaxArgumentsDepth = 64;

// Arguments that arrived as JSON text (OpenAI's function.arguments). Sets call.arguments to the
// object, or to {} with call.arguments_error (quoting the start of the text) when the text is not
// a JSON object. Empty or blank text means no arguments ({}), which some servers send for
// parameterless calls.
void SetArgumentsFromText(protocol::ToolCall& call, std::string_view text);
// Arguments that arrived as JSON already: an object is taken, anything else is {} with
// call.arguments_error; null means no arguments ({}). Either way, arguments nested deeper than
// kMaxArgumentsDepth are {} with call.arguments_error.
void SetArgumentsFromJson(protocol::ToolCall& call, const nlohmann::json& value);

// Applies the rules above to `turn` in place. Fails (naming `display`, the provider) only when the
// turn has more than kMaxToolCallsPerTurn calls.
Status FinishTurn(protocol::AssistantTurn& turn, CallIdSource& ids, const std::string& display);

// `text` cut to at most `max` bytes without splitting a UTF-8 sequence.
std::string CutUtf8Bytes(std::string_view text, std::size_t max);

}  // namespace cagent::launcher::model
