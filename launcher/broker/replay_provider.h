// The replay provider (`--model replay:FILE`): plays a recorded session, one assistant turn per
// call, for tests, demos and reproducing a run. The file format is described in
// model_provider.h. Runs in cagent (trusted), on the broker's io_context thread; no network.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/broker/model_provider.h"

namespace cagent::launcher::broker {

// Parses a replay file's text into its turns. `name` is used in messages
// ("session.jsonl:3: ..."). Fails at the first bad line with its number, or when there are no
// turns.
Result<std::vector<nlohmann::json>> ParseReplayTurns(const std::string& text,
                                                     const std::string& name);

// Reads and parses spec.model (the file's path) now, so a bad file fails before the run starts.
Result<std::unique_ptr<ModelProvider>> MakeReplayProvider(boost::asio::io_context& io,
                                                          const ModelSpec& spec);

}  // namespace cagent::launcher::broker
