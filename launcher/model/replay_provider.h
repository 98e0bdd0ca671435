// The replay provider (`--model replay:FILE`): plays a recorded session, one neutral assistant
// turn per call, for tests, demos and reproducing a run. The file format is described in
// model_provider.h. Runs in cagent (trusted), on the broker's io_context thread; no network. The
// request is ignored: a replay answers the same whatever the conversation says.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <vector>

#include "launcher/model/model_provider.h"

namespace cagent::launcher::model {

// Parses a replay file's text into its turns, each as the ModelResponse a call returns: the
// neutral turn (text; tool_calls with id, name and arguments — an object, or JSON text, which is
// parsed; unusable arguments give an arguments_error; a missing id is generated), the stop reason
// (the line's "stop_reason" in neutral words, else tool_calls when there are calls and end
// otherwise; provider_stop_reason is that word), usage, and the line's JSON as raw. The turns have
// passed FinishTurn (turn_rules.h). `name` is used in messages ("session.jsonl:3: ..."). Fails at
// the first bad line with its number (not JSON, a field of the wrong type, a call without a name,
// a name or id longer than protocol::kMaxIdBytes, an id used twice in the turn, too many calls), or
// when there are no turns.
Result<std::vector<ModelResponse>> ParseReplayTurns(const std::string& text,
                                                    const std::string& name);

// Reads and parses spec.model (the file's path) now, so a bad file fails before the run starts.
Result<std::unique_ptr<ModelProvider>> MakeReplayProvider(boost::asio::io_context& io,
                                                          const ModelSpec& spec);

}  // namespace cagent::launcher::model
