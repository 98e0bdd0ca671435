// libFuzzer target for the replay provider's file reader (launcher/model/replay_provider.h):
// ParseReplayTurns on a replay file's text. A replay file is often someone else's (a recorded
// session shared with a bug report, a task file's replay: path), and its turns become what the
// broker treats as the model's answers.
//
// Invariants: a parse that succeeds has at least one turn; every turn passed FinishTurn: each tool
// call has a name and a non-empty id, unique in its turn, both at most kMaxIdBytes; arguments are
// an object or come with an arguments_error; a failure names the file; parsing is deterministic.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "common/protocol.h"
#include "launcher/model/replay_provider.h"
#include "tests/fuzz/fuzz_util.h"

using cagent::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto turns = cagent::launcher::model::ParseReplayTurns(text, "session.jsonl");
  const auto again = cagent::launcher::model::ParseReplayTurns(text, "session.jsonl");
  Check(turns.ok() == again.ok());
  if (!turns.ok()) {
    Check(turns.error().Message().find("session.jsonl") != std::string::npos);
    Check(turns.error().Message() == again.error().Message());
    return 0;
  }
  Check(!turns->empty() && turns->size() == again->size());
  for (std::size_t i = 0; i < turns->size(); ++i) {
    const auto& turn = (*turns)[i].turn;
    Check(turn.text == (*again)[i].turn.text);
    Check(turn.tool_calls.size() == (*again)[i].turn.tool_calls.size());
    std::set<std::string> ids;
    for (const auto& call : turn.tool_calls) {
      Check(!call.id.empty() && call.id.size() <= cagent::protocol::kMaxIdBytes);
      Check(!call.name.empty() && call.name.size() <= cagent::protocol::kMaxIdBytes);
      Check(ids.insert(call.id).second);
      Check(call.arguments.is_object() || !call.arguments_error.empty());
    }
  }
  return 0;
}
