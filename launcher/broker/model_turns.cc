#include "launcher/broker/model_turns.h"

#include <set>

#include "common/json_text.h"
#include "launcher/broker/audit_log.h"

namespace cagent::launcher::broker {
namespace {

using nlohmann::json;

// About the size of `v` as JSON text, without writing it.
std::uint64_t ApproxJsonBytes(const json& v) {
  if (v.is_string()) return v.get_ref<const std::string&>().size() + 2;
  std::uint64_t n = 2;
  if (v.is_object()) {
    for (const auto& [key, item] : v.items()) n += key.size() + 4 + ApproxJsonBytes(item);
  } else if (v.is_array()) {
    for (const json& item : v) n += 1 + ApproxJsonBytes(item);
  } else {
    n += 4;
  }
  return n;
}

std::string Short(const std::string& s, std::size_t max = 64) {
  if (s.size() <= max) return s;
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

}  // namespace

void ModelTurns::Record(std::uint64_t turn, const std::vector<protocol::ToolCall>& calls) {
  latest_turn_ = turn;
  latest_.clear();
  for (const protocol::ToolCall& c : calls) {
    issued_[c.id].push_back(Issued{c.name, c.arguments});
    latest_[c.id] = Latest{c.name, CanonicalDigest(c.arguments), false};
  }
}

Refusal ModelTurns::CheckConversation(const protocol::ModelCall& call) const {
  const protocol::ChatMessage* assistant = nullptr;  // the nearest one so far
  std::set<std::string> answered;                    // call ids of `assistant` answered so far
  for (std::size_t i = 0; i < call.messages.size(); ++i) {
    const protocol::ChatMessage& m = call.messages[i];
    const std::string where =
        "messages[" + std::to_string(i) + "] (" + std::string(protocol::RoleName(m.role)) + ")";
    switch (m.role) {
      case protocol::Role::kUser:
        break;
      case protocol::Role::kAssistant:
        for (const protocol::ToolCall& c : m.tool_calls) {
          const auto it = issued_.find(c.id);
          bool known = false;
          if (it != issued_.end()) {
            for (const Issued& made : it->second) {
              known = known || (made.name == c.name && made.arguments == c.arguments);
            }
          }
          if (!known) {
            return where + ": tool call \"" + Short(c.id) + "\" (" + Short(c.name) +
                   ") is not one the model made in this session, with these arguments";
          }
        }
        assistant = &m;
        answered.clear();
        break;
      case protocol::Role::kTool: {
        bool found = false;
        if (assistant != nullptr) {
          for (const protocol::ToolCall& c : assistant->tool_calls) {
            found = found || c.id == m.call_id;
          }
        }
        if (!found) {
          return where + ": answers call \"" + Short(m.call_id) +
                 "\", which is not a call of the assistant message before it";
        }
        if (!answered.insert(m.call_id).second) {
          return where + ": answers call \"" + Short(m.call_id) + "\" a second time";
        }
        break;
      }
    }
  }
  return {};
}

ModelTurns::Binding ModelTurns::Bind(const std::string& call_id, const std::string& tool,
                                     const std::string& args_digest) {
  Binding b;
  b.turn = latest_turn_;
  if (latest_turn_ == 0) {
    b.reason = "no model turn has been answered yet, so no tool call can be made";
    return b;
  }
  const auto it = latest_.find(call_id);
  const std::string turn = "turn " + std::to_string(latest_turn_);
  if (it == latest_.end()) {
    b.reason = "call id \"" + Short(call_id) + "\" is not a call of the model's latest turn (" +
               turn + ")";
    return b;
  }
  Latest& call = it->second;
  if (call.asked) {
    b.reason = "call id \"" + Short(call_id) + "\" of " + turn + " was already asked about";
    return b;
  }
  call.asked = true;
  if (call.name != tool) {
    b.reason = "call id \"" + Short(call_id) + "\" of " + turn + " is a call of " +
               Short(call.name) + ", not of " + Short(tool);
    return b;
  }
  if (call.digest != args_digest) {
    b.reason =
        "the arguments differ from those the model gave call \"" + Short(call_id) + "\" of " + turn;
    return b;
  }
  b.ok = true;
  return b;
}

std::uint64_t EstimateInputTokens(const protocol::ModelCall& call, std::size_t tools_bytes) {
  std::uint64_t bytes = call.system.size() + tools_bytes;
  std::uint64_t overhead = 4;
  for (const protocol::ChatMessage& m : call.messages) {
    bytes += m.text.size() + m.call_id.size();
    for (const protocol::ToolCall& c : m.tool_calls) {
      bytes += c.id.size() + c.name.size() + ApproxJsonBytes(c.arguments);
    }
    overhead += 4;
  }
  return overhead + (bytes + 3) / 4;
}

}  // namespace cagent::launcher::broker
