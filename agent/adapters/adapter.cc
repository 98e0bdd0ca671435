#include "agent/adapters/adapter.h"

#include "common/json_text.h"
#include "agent/adapters/anthropic.h"
#include "agent/adapters/openai.h"
#include "agent/adapters/replay.h"

namespace cagent::agent {
namespace {

constexpr std::size_t kQuoteBytes = 200;

std::string Excerpt(std::string_view text) {
  if (text.size() <= kQuoteBytes) return std::string(text);
  return std::string(text.substr(0, kQuoteBytes)) + "...";
}

}  // namespace

Result<std::unique_ptr<Adapter>> MakeAdapter(std::string_view provider, AdapterOptions options) {
  if (options.max_output_tokens == 0) options.max_output_tokens = 4096;
  if (provider == "openai") return std::unique_ptr<Adapter>(new OpenAiAdapter(options));
  if (provider == "anthropic") return std::unique_ptr<Adapter>(new AnthropicAdapter(options));
  if (provider == "replay") return std::unique_ptr<Adapter>(new ReplayAdapter());
  return PlainError("model adapter", "unknown provider \"" + std::string(provider) +
                                         "\" (the agent speaks openai, anthropic and replay)");
}

void SetArgumentsFromString(ToolCall& call, std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    call.arguments = nlohmann::json::object();
    return;
  }
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    call.arguments = nlohmann::json::object();
    call.arguments_error = "the arguments are not valid JSON: " + Excerpt(text);
    return;
  }
  SetArgumentsFromJson(call, parsed);
}

void SetArgumentsFromJson(ToolCall& call, const nlohmann::json& value) {
  if (value.is_object()) {
    call.arguments = value;
    return;
  }
  call.arguments = nlohmann::json::object();
  call.arguments_error =
      "the arguments must be a JSON object, got: " +
      Excerpt(JsonText(value));
}

}  // namespace cagent::agent
