// libFuzzer target for what a model server answers (launcher/model): a whole response body or an
// SSE stream, in the OpenAI or the Anthropic format, through the same steps the provider takes
// (ParseJsonWithin, or SseParser + the stream assembler; then the dialect's parser and
// FinishTurn), and on to the model_result frame the broker sends the agent.
//
// Input: one byte choosing the format (bit 0: Anthropic, bit 1: streamed), two seeding the chunk
// sizes of a stream, then the body or the stream. Invariants, for every turn accepted:
//   - every tool call has a non-empty id of at most kMaxIdBytes, unique in the turn, a name, and
//     arguments that are an object nested at most kMaxArgumentsDepth deep (or {} with an error);
//   - at most kMaxToolCallsPerTurn calls;
//   - the raw body serialises (JsonText), and the model_result frame the broker builds from the
//     turn decodes on the agent's side: the broker never sends the agent a frame it refuses.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <variant>

#include "common/json_text.h"
#include "common/protocol.h"
#include "launcher/model/anthropic_provider.h"
#include "launcher/model/http_model_provider.h"
#include "launcher/model/openai_provider.h"
#include "launcher/model/sse.h"
#include "launcher/model/turn_rules.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/json_value_depth.h"

namespace {

using cagent::fuzz::Check;
using cagent::fuzz::JsonValueDepth;
namespace model = cagent::launcher::model;
namespace protocol = cagent::protocol;
using nlohmann::json;

void CheckResponse(model::ModelResponse& response) {
  const auto& calls = response.turn.tool_calls;
  Check(calls.size() <= protocol::kMaxToolCallsPerTurn);
  std::set<std::string> ids;
  for (const protocol::ToolCall& call : calls) {
    Check(!call.id.empty() && call.id.size() <= protocol::kMaxIdBytes);
    Check(ids.insert(call.id).second);
    Check(!call.name.empty() && call.name.size() <= protocol::kMaxIdBytes);
    Check(call.arguments.is_object());
    Check(JsonValueDepth(call.arguments) <= model::kMaxArgumentsDepth);
    if (!call.arguments_error.empty()) Check(call.arguments.empty());
  }
  (void)cagent::JsonText(response.raw);

  protocol::Message message;
  message.header.kind = protocol::Kind::kModelResult;
  message.header.id = 7;
  protocol::ModelResult result;
  result.answer = std::move(response.turn);
  result.usage = response.usage;
  result.turn = 1;
  message.body = std::move(result);
  auto frame = protocol::EncodeMessage(message);
  Check(frame.ok());
  const std::string_view payload = std::string_view(*frame).substr(protocol::kHeaderBytes);
  const auto decoded = protocol::Decode(payload, /*from_agent=*/false);
  Check(std::holds_alternative<protocol::Message>(decoded));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cagent::fuzz::InputReader in(data, size);
  const std::uint8_t mode = in.Byte();
  const bool anthropic = (mode & 1U) != 0;
  const bool streamed = (mode & 2U) != 0;
  const std::string_view seed = in.Take(2);
  const std::string_view bytes = in.Rest();
  const std::string display = "the fuzzed provider";

  json body;
  if (streamed) {
    std::unique_ptr<model::StreamAssembler> assembler =
        anthropic ? model::NewAnthropicStreamAssembler(display, "m")
                  : model::NewOpenAiStreamAssembler(display, "m");
    model::SseParser parser;
    std::vector<model::SseEvent> events;
    for (const std::string_view piece : cagent::fuzz::Pieces(bytes, seed, 64)) {
      if (!parser.Feed(piece, events).ok()) return 0;
      for (const model::SseEvent& event : events) {
        if (assembler->OnEvent(event)) return 0;
      }
      events.clear();
    }
    auto assembled = assembler->Finish();
    if (!std::holds_alternative<json>(assembled)) return 0;
    body = std::move(std::get<json>(assembled));
  } else {
    body = cagent::ParseJsonWithin(bytes, model::kMaxAnswerDepth);
    if (body.is_discarded()) return 0;
  }
  model::CallIdSource ids;
  model::AttemptOutcome outcome = anthropic
                                      ? model::ParseAnthropicResponse(display, std::move(body), ids)
                                      : model::ParseOpenAiResponse(display, std::move(body), ids);
  if (auto* response = std::get_if<model::ModelResponse>(&outcome)) CheckResponse(*response);
  return 0;
}
