#include "launcher/model/model_config.h"
#include "launcher/model/model_provider.h"

namespace cagent::launcher::model {

Result<ModelSpec> ParseModelSpec(const std::string& spec) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size()) {
    return PlainError("--model " + spec,
                      "expected PROVIDER:MODEL, e.g. openai:gpt-4o-mini, "
                      "anthropic:claude-sonnet-4-5 or replay:session.jsonl");
  }
  ModelSpec out;
  out.provider = spec.substr(0, colon);
  out.model = spec.substr(colon + 1);
  if (out.provider != "openai" && out.provider != "anthropic" && out.provider != "replay") {
    return PlainError("--model " + spec,
                      "unknown provider \"" + out.provider + "\" (openai, anthropic or replay)");
  }
  out.family = DefaultFamily(out.provider, out.model);
  return out;
}

}  // namespace cagent::launcher::model
