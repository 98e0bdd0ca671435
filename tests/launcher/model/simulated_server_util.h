// SimulatedModelServer: the server side of a multi-turn session, for tests that need more than one
// scripted reply — it plays a script of assistant turns and answers each request in the wire
// format its path implies, simulating what the real providers do with caching and reasoning, and
// refusing with the real providers' 400 answers what they refuse:
//
// Anthropic (/v1/messages):
//   - cache_control: at most 4 breakpoints, each {"type": "ephemeral"}; the prompt is the tools,
//     the system blocks and the message blocks in order, compared with cache_control removed. A
//     prefix ending at a breakpoint (at least kMinCacheTokens) is written to the cache; a later
//     request reads the longest cached prefix ending at one of its breakpoints or up to 20 blocks
//     before one. usage reports input_tokens (neither read nor written),
//     cache_creation_input_tokens and cache_read_input_tokens.
//   - thinking {type: enabled, budget_tokens}: budget_tokens at least 1024 and below max_tokens,
//     no temperature; every thinking block sent back must carry the signature this server made
//     for its text, and when the last user message holds tool results the assistant message
//     before it must start with a thinking block. The answer starts with a signed thinking block.
// OpenAI (/chat/completions):
//   - the models in `reasoning_models` refuse max_tokens and temperature (as o-series models do)
//     and report completion_tokens_details.reasoning_tokens;
//   - cached_tokens: the longest prefix (the tools, then whole messages, byte for byte) shared
//     with an earlier request, in 128-token steps from 1024 tokens, as prompt_tokens_details.
// Tokens are counted as bytes / 4. Streamed when the request says "stream": true.
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/launcher/model/fake_provider_util.h"

namespace cagent::testing {

struct ScriptedTurn {
  std::string text;
  std::vector<std::pair<std::string, nlohmann::json>> calls;  // tool name, arguments
};

struct SimulatedRequest {
  int status = 200;
  std::string error;  // the 400's message
  std::uint64_t prompt_tokens = 0;
  std::uint64_t cache_read = 0;
  std::uint64_t cache_write = 0;
  std::size_t breakpoints = 0;
  bool thinking = false;
  std::size_t thinking_blocks_received = 0;  // verified thinking blocks sent back
};

class SimulatedModelServer {
 public:
  static constexpr std::uint64_t kMinCacheTokens = 1024;

  explicit SimulatedModelServer(std::vector<ScriptedTurn> turns,
                                std::set<std::string> reasoning_models = {});

  // The FakeProvider responder.
  FakeReply Answer(const RecordedRequest& request);
  [[nodiscard]] std::vector<SimulatedRequest> Seen() const;
  // The signature this server gives a thinking text.
  static std::string Sign(const std::string& thinking);

 private:
  FakeReply Anthropic(const nlohmann::json& body, SimulatedRequest& seen);
  FakeReply OpenAi(const nlohmann::json& body, SimulatedRequest& seen);
  [[nodiscard]] ScriptedTurn NextTurn();

  mutable std::mutex mu_;
  std::vector<ScriptedTurn> turns_;
  std::size_t next_turn_ = 0;
  std::set<std::string> reasoning_models_;
  std::set<std::string> anthropic_cache_;                 // cached prompt prefixes
  std::vector<std::vector<std::string>> openai_prompts_;  // earlier requests' units
  std::vector<SimulatedRequest> seen_;
  int ids_ = 0;
};

}  // namespace cagent::testing
