// ModelTurns: what the broker remembers of the model's turns, so that what the agent sends can be
// held against what the model actually said. Runs in cagent (trusted), on the broker's thread;
// pure (no I/O).
//
// Two checks rest on it:
//   - A model_call's conversation (CheckConversation): every tool call in an assistant message is
//     one the model issued in this session (same id, name and arguments), and every tool message
//     answers a call of the nearest assistant message before it, each call at most once. The agent
//     may drop old turns or fold them into a user message (compaction); it cannot put a tool call
//     in the model's mouth or answer a call that was never made. Assistant and user texts are the
//     agent's to choose: they are message content.
//   - A tool_request (Bind): its call id names a call of the model's latest turn that no request
//     has named before, with that call's tool name and arguments. A call the model did not make,
//     a call of an earlier turn and a replayed id are refused.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/protocol.h"
#include "common/result.h"

namespace cagent::launcher::broker {

class ModelTurns {
 public:
  // Records turn `turn` (1-based) and makes its calls the ones tool requests may name.
  void Record(std::uint64_t turn, const std::vector<protocol::ToolCall>& calls);

  // Nothing when `call`'s messages pass the check above, else what is wrong, naming the message
  // ("messages[4] (assistant): tool call \"call_9\" (read_file) is not one the model made").
  [[nodiscard]] Refusal CheckConversation(const protocol::ModelCall& call) const;

  struct Binding {
    bool ok = false;
    std::uint64_t turn = 0;  // the latest turn (0 before the first)
    std::string reason;      // when refused: why, in one line
  };
  // Checks a tool request against the latest turn and, when the id is one of its calls, marks
  // that call as asked about (also when the name or arguments differ: an id is named once).
  // `args_digest` is CanonicalDigest of the request's arguments (the broker has it already).
  Binding Bind(const std::string& call_id, const std::string& tool, const std::string& args_digest);

  [[nodiscard]] std::uint64_t latest_turn() const { return latest_turn_; }

 private:
  struct Latest {
    std::string name;
    std::string digest;  // CanonicalDigest of the arguments
    bool asked = false;
  };
  struct Issued {
    std::string name;
    nlohmann::json arguments;
  };
  // call id -> every call with that id in this session (a provider may reuse ids across turns;
  // the replay files do). The arguments are kept as they came, so checking a conversation
  // compares values instead of hashing every call of the history again on every model call.
  std::map<std::string, std::vector<Issued>> issued_;
  std::map<std::string, Latest> latest_;
  std::uint64_t latest_turn_ = 0;
};

// An estimate of the input tokens a conversation and its tool schemas (`tools_bytes` of JSON
// text) will cost: a quarter of their bytes plus 4 per message, rounded up; a call's arguments
// count as the bytes of their strings and keys plus 4 per value (about their JSON size). Providers
// tokenise differently (code runs denser); the estimate keeps a call from being made when the
// budget clearly cannot pay for its input, and lowers max_tokens so input + output fit in what is
// left.
std::uint64_t EstimateInputTokens(const protocol::ModelCall& call, std::size_t tools_bytes);

}  // namespace cagent::launcher::broker
