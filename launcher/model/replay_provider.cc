#include "launcher/model/replay_provider.h"

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <variant>

#include "common/json_text.h"
#include "launcher/model/turn_rules.h"

namespace cagent::launcher::model {
namespace {

using nlohmann::json;

bool Blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// The turn on one line, or what is wrong with it.
std::variant<ModelResponse, std::string> ReadTurn(json line, CallIdSource& ids,
                                                  const std::string& name) {
  if (!line.is_object()) return std::string("a turn must be a JSON object");
  ModelResponse r;
  const auto text = line.find("text");
  if (text != line.end() && !text->is_string()) return std::string("\"text\" must be a string");
  if (text != line.end()) r.turn.text = text->get<std::string>();
  const auto calls = line.find("tool_calls");
  if (text == line.end() && calls == line.end()) {
    return std::string("a turn needs \"text\", \"tool_calls\" or both");
  }
  if (calls != line.end()) {
    if (!calls->is_array()) return std::string("\"tool_calls\" must be a list");
    if (calls->size() > protocol::kMaxToolCallsPerTurn) {
      return "\"tool_calls\" has " + std::to_string(calls->size()) + " calls (at most " +
             std::to_string(protocol::kMaxToolCallsPerTurn) + ")";
    }
    for (std::size_t i = 0; i < calls->size(); ++i) {
      const json& c = (*calls)[i];
      const std::string where = "tool_calls[" + std::to_string(i) + "]";
      if (!c.is_object()) return where + " must be an object";
      protocol::ToolCall call;
      if (const auto id = c.find("id"); id != c.end()) {
        if (!id->is_string() || id->get_ref<const std::string&>().size() > protocol::kMaxIdBytes) {
          return where + ": \"id\" must be a string of at most " +
                 std::to_string(protocol::kMaxIdBytes) + " bytes";
        }
        call.id = id->get<std::string>();
        for (const protocol::ToolCall& seen : r.turn.tool_calls) {
          if (!call.id.empty() && seen.id == call.id) {
            return where + ": the id \"" + call.id + "\" is used twice in the turn";
          }
        }
      }
      const auto tool = c.find("name");
      if (tool == c.end() || !tool->is_string() || tool->get_ref<const std::string&>().empty() ||
          tool->get_ref<const std::string&>().size() > protocol::kMaxIdBytes) {
        return where + " needs a \"name\": a string of 1 to " +
               std::to_string(protocol::kMaxIdBytes) + " bytes";
      }
      call.name = tool->get<std::string>();
      if (const auto args = c.find("arguments"); args != c.end()) {
        if (args->is_string()) {
          SetArgumentsFromText(call, args->get_ref<const std::string&>());
        } else {
          SetArgumentsFromJson(call, *args);
        }
      }
      r.turn.tool_calls.push_back(std::move(call));
    }
  }
  r.turn.stop_reason =
      r.turn.tool_calls.empty() ? protocol::StopReason::kEnd : protocol::StopReason::kToolCalls;
  if (const auto stop = line.find("stop_reason"); stop != line.end()) {
    const auto reason =
        stop->is_string() ? protocol::ParseStopReason(stop->get<std::string>()) : std::nullopt;
    if (!reason) {
      return std::string("\"stop_reason\" must be end, tool_calls, max_tokens, refused or other");
    }
    r.turn.stop_reason = *reason;
  }
  if (const auto usage = line.find("usage"); usage != line.end()) {
    if (!usage->is_object()) return std::string("\"usage\" must be an object");
    const std::pair<const char*, std::uint64_t*> counts[] = {
        {"input_tokens", &r.usage.input_tokens},
        {"output_tokens", &r.usage.output_tokens},
        {"cache_read_tokens", &r.usage.cache_read_tokens},
        {"cache_write_tokens", &r.usage.cache_write_tokens},
        {"reasoning_tokens", &r.usage.reasoning_tokens}};
    for (const auto& [key, field] : counts) {
      const auto v = usage->find(key);
      if (v == usage->end()) continue;
      if (!v->is_number_unsigned()) {
        return std::string("usage.") + key + " must be a non-negative integer";
      }
      *field = v->get<std::uint64_t>();
    }
  }
  if (Status st = FinishTurn(r.turn, ids, name); !st.ok()) return st.error().Message();
  r.provider_stop_reason = std::string(protocol::StopReasonName(r.turn.stop_reason));
  r.raw = std::move(line);
  return r;
}

std::string BaseName(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

class ReplayProvider final : public ModelProvider {
 public:
  ReplayProvider(boost::asio::io_context& io, std::string path, std::vector<ModelResponse> turns,
                 protocol::ModelInfo info)
      : io_(io), path_(std::move(path)), turns_(std::move(turns)), info_(std::move(info)) {}

  ~ReplayProvider() override { Cancel(); }

  [[nodiscard]] protocol::ModelInfo Info() const override { return info_; }

  void Call(ModelRequest /*request*/, std::function<void(ModelOutcome)> done) override {
    ModelOutcome outcome;
    if (next_ >= turns_.size()) {
      outcome = ModelError{protocol::ErrorCode::kProviderError,
                           "the replay file " + path_ + " has " + std::to_string(turns_.size()) +
                               " turn" + (turns_.size() == 1 ? "" : "s") +
                               "; the agent asked for turn " + std::to_string(next_ + 1) +
                               " (record a longer session or give the agent fewer steps)"};
    } else {
      outcome = turns_[next_];
    }
    ++next_;
    // `done` runs from the io_context, never inline; a Cancel() before then drops it.
    boost::asio::post(io_, [alive = std::weak_ptr<bool>(alive_), outcome = std::move(outcome),
                            done = std::move(done)]() mutable {
      if (alive.expired()) return;
      done(std::move(outcome));
    });
  }

  void Cancel() override { alive_ = std::make_shared<bool>(true); }

 private:
  boost::asio::io_context& io_;
  std::string path_;
  std::vector<ModelResponse> turns_;
  protocol::ModelInfo info_;
  std::size_t next_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // replaced by Cancel()
};

}  // namespace

Result<std::vector<ModelResponse>> ParseReplayTurns(const std::string& text,
                                                    const std::string& name) {
  std::vector<ModelResponse> turns;
  CallIdSource ids;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (Blank(line)) continue;
    const std::string where = name + ":" + std::to_string(number);
    bool too_deep = false;
    json turn = ParseJsonWithin(line, kMaxAnswerDepth, &too_deep);
    if (too_deep) {
      return PlainError(where, "nests deeper than " + std::to_string(kMaxAnswerDepth) + " levels");
    }
    if (turn.is_discarded()) {
      return PlainError(where, "not valid JSON (one turn, a JSON object, per line)");
    }
    auto read = ReadTurn(std::move(turn), ids, where);
    if (auto* why = std::get_if<std::string>(&read)) return PlainError(where, *why);
    turns.push_back(std::move(std::get<ModelResponse>(read)));
  }
  if (turns.empty()) return PlainError(name, "the replay file has no turns");
  return turns;
}

Result<std::unique_ptr<ModelProvider>> MakeReplayProvider(boost::asio::io_context& io,
                                                          const ModelSpec& spec) {
  std::ifstream in(spec.model, std::ios::binary);
  if (!in) {
    return ErrnoError("cannot read the replay file " + spec.model, errno != 0 ? errno : ENOENT);
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto turns = ParseReplayTurns(text.str(), spec.model);
  if (!turns.ok()) return turns.error();
  protocol::ModelInfo info;
  info.provider = "replay";
  info.name = BaseName(spec.model);
  info.context_window = spec.context_window != 0 ? spec.context_window : 32768;
  info.max_output_tokens = spec.max_output_tokens != 0 ? spec.max_output_tokens : 4096;
  return std::unique_ptr<ModelProvider>(
      std::make_unique<ReplayProvider>(io, spec.model, std::move(*turns), std::move(info)));
}

}  // namespace cagent::launcher::model
