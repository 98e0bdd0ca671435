#include "launcher/broker/replay_provider.h"

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace cagent::launcher::broker {
namespace {

using nlohmann::json;

bool Blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// Empty when `turn` is a valid turn, else what is wrong with it.
std::string CheckTurn(const json& turn) {
  if (!turn.is_object()) return "a turn must be a JSON object";
  const auto text = turn.find("text");
  if (text != turn.end() && !text->is_string()) return "\"text\" must be a string";
  const auto calls = turn.find("tool_calls");
  if (calls != turn.end()) {
    if (!calls->is_array()) return "\"tool_calls\" must be a list";
    for (std::size_t i = 0; i < calls->size(); ++i) {
      const json& c = (*calls)[i];
      const std::string where = "tool_calls[" + std::to_string(i) + "]";
      if (!c.is_object()) return where + " must be an object";
      if (!c.contains("id") || !c["id"].is_string() || c["id"].get<std::string>().empty()) {
        return where + " needs a non-empty string \"id\"";
      }
      if (!c.contains("name") || !c["name"].is_string() || c["name"].get<std::string>().empty()) {
        return where + " needs a non-empty string \"name\"";
      }
      if (!c.contains("arguments") || !c["arguments"].is_object()) {
        return where + " needs an object \"arguments\"";
      }
    }
  }
  if (text == turn.end() && calls == turn.end()) {
    return "a turn needs \"text\", \"tool_calls\" or both";
  }
  if (const auto usage = turn.find("usage"); usage != turn.end()) {
    if (!usage->is_object()) return "\"usage\" must be an object";
    for (const char* key : {"input_tokens", "output_tokens"}) {
      if (const auto v = usage->find(key); v != usage->end() && !v->is_number_unsigned()) {
        return std::string("usage.") + key + " must be a non-negative integer";
      }
    }
  }
  return {};
}

std::string BaseName(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

class ReplayProvider final : public ModelProvider {
 public:
  ReplayProvider(boost::asio::io_context& io, std::string path, std::vector<json> turns,
                 protocol::ModelInfo info)
      : io_(io), path_(std::move(path)), turns_(std::move(turns)), info_(std::move(info)) {}

  ~ReplayProvider() override { Cancel(); }

  [[nodiscard]] protocol::ModelInfo Info() const override { return info_; }

  void Call(json /*request_body*/, std::function<void(ModelOutcome)> done) override {
    ModelOutcome outcome;
    if (next_ >= turns_.size()) {
      outcome = ModelError{protocol::ErrorCode::kProviderError,
                           "the replay file " + path_ + " has " + std::to_string(turns_.size()) +
                               " turn" + (turns_.size() == 1 ? "" : "s") +
                               "; the agent asked for turn " + std::to_string(next_ + 1) +
                               " (record a longer session or give the agent fewer steps)"};
    } else {
      const json& turn = turns_[next_];
      ModelResponse r;
      r.body = turn;
      if (const auto usage = turn.find("usage"); usage != turn.end()) {
        r.usage.input_tokens = usage->value("input_tokens", std::uint64_t{0});
        r.usage.output_tokens = usage->value("output_tokens", std::uint64_t{0});
      }
      outcome = std::move(r);
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
  std::vector<json> turns_;
  protocol::ModelInfo info_;
  std::size_t next_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // replaced by Cancel()
};

}  // namespace

Result<std::vector<json>> ParseReplayTurns(const std::string& text, const std::string& name) {
  std::vector<json> turns;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (Blank(line)) continue;
    const std::string where = name + ":" + std::to_string(number);
    json turn;
    try {
      turn = json::parse(line);
    } catch (const json::parse_error& e) {
      return PlainError(where, std::string("not valid JSON (") + e.what() + ")");
    }
    if (std::string why = CheckTurn(turn); !why.empty()) return PlainError(where, why);
    turns.push_back(std::move(turn));
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

}  // namespace cagent::launcher::broker
