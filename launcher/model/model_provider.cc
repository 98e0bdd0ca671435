#include "launcher/model/model_provider.h"

#include "launcher/model/anthropic_provider.h"
#include "launcher/model/openai_provider.h"
#include "launcher/model/replay_provider.h"

namespace cagent::launcher::model {

Result<std::unique_ptr<ModelProvider>> MakeModelProvider(boost::asio::io_context& io,
                                                         const ModelSpec& spec,
                                                         const Environment& env) {
  if (spec.provider == "openai") return MakeOpenAiProvider(io, spec, env);
  if (spec.provider == "anthropic") return MakeAnthropicProvider(io, spec, env);
  if (spec.provider == "replay") return MakeReplayProvider(io, spec);
  return PlainError("model provider \"" + spec.provider + "\"",
                    "unknown (openai, anthropic or replay)");
}

}  // namespace cagent::launcher::model
