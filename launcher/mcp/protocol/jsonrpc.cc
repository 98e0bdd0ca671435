#include "launcher/mcp/protocol/jsonrpc.h"

#include <string>
#include <utility>

#include "common/json_text.h"
#include "launcher/mcp/protocol/session.h"

namespace cagent::launcher::mcp {
namespace {

using nlohmann::json;

// Longest id text the scanner keeps (an id is a short string or an integer).
constexpr std::size_t kMaxIdText = 128;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A refusal of `text` that could not be parsed (too large, too deep): its id, found by scanning,
// is answered when the message has a "method" (a request); a response's is not (RpcRefusal).
RpcRefusal ScannedRefusal(std::string_view text, std::string message) {
  RpcIdScanner scanner;
  scanner.Feed(text);
  const json id = scanner.id().value_or(json());
  RpcRefusal r{kInvalidRequest, "invalid request: " + std::move(message), json(), json()};
  (scanner.saw_method() ? r.id : r.answers) = id;
  return r;
}

RpcRefusal Invalid(std::string message, json id = json()) {
  return RpcRefusal{kInvalidRequest, "invalid request: " + std::move(message), std::move(id),
                    json()};
}

// A refused response: answered with id null, `answers` its id.
RpcRefusal InvalidResponse(std::string message, json id) {
  RpcRefusal r = Invalid(std::move(message));
  r.answers = std::move(id);
  return r;
}

}  // namespace

bool IsValidRpcId(const json& id) { return id.is_string() || id.is_number_integer(); }

std::variant<RpcMessage, RpcRefusal> ParseRpcMessage(std::string_view text,
                                                     const RpcLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return ScannedRefusal(text, "message exceeds " + std::to_string(limits.max_bytes) + " bytes");
  }
  if (JsonDepth(text, limits.max_depth) > limits.max_depth) {
    return ScannedRefusal(
        text, "message nests deeper than " + std::to_string(limits.max_depth) + " levels");
  }
  json object = ParseJsonText(text);
  if (object.is_discarded()) {
    return RpcRefusal{kParseError, "parse error: the message is not valid JSON", json(), json()};
  }
  if (object.is_array()) {
    return Invalid("a batch (JSON array) is not supported; send one message per frame");
  }
  if (!object.is_object()) {
    return Invalid("the message is not a JSON object");
  }

  RpcMessage message;
  json readable_id;
  const auto id = object.find("id");
  const bool has_id = id != object.end();
  if (has_id && IsValidRpcId(*id)) {
    readable_id = *id;
  }
  const auto method = object.find("method");
  const auto version = object.find("jsonrpc");
  if (version == object.end() || !version->is_string() ||
      version->get_ref<const std::string&>() != "2.0") {
    return method != object.end() ? Invalid("\"jsonrpc\" must be \"2.0\"", readable_id)
                                  : InvalidResponse("\"jsonrpc\" must be \"2.0\"", readable_id);
  }
  if (method != object.end()) {
    if (!method->is_string()) {
      return Invalid("\"method\" must be a string", readable_id);
    }
    if (has_id && !IsValidRpcId(*id)) {
      return Invalid("\"id\" must be a string or an integer");
    }
    message.kind = has_id ? RpcMessage::Kind::kRequest : RpcMessage::Kind::kNotification;
    message.method = method->get<std::string>();
    if (has_id) {
      message.id = *id;
    }
    if (const auto params = object.find("params"); params != object.end()) {
      if (!params->is_object() && !params->is_array()) {
        return Invalid("\"params\" must be an object", readable_id);
      }
      message.params = std::move(*params);
    }
    return message;
  }

  // A response: to a request this side sent.
  const auto result = object.find("result");
  const auto error = object.find("error");
  if (!has_id) {
    return Invalid("a message needs \"method\" (a request or notification) or \"id\" (a response)");
  }
  if ((result == object.end()) == (error == object.end())) {
    return InvalidResponse("a response has exactly one of \"result\" and \"error\"", readable_id);
  }
  const bool is_error = error != object.end();
  if (!IsValidRpcId(*id) && !(is_error && id->is_null())) {
    return Invalid("\"id\" must be a string or an integer");
  }
  message.kind = RpcMessage::Kind::kResponse;
  message.id = *id;
  message.is_error = is_error;
  if (is_error) {
    const auto code = error->is_object() ? error->find("code") : error->end();
    const auto text_member = error->is_object() ? error->find("message") : error->end();
    if (!error->is_object() || code == error->end() || !code->is_number_integer() ||
        text_member == error->end() || !text_member->is_string()) {
      return InvalidResponse(
          "\"error\" must be an object with an integer \"code\" and a string \"message\"",
          readable_id);
    }
    message.error = std::move(*error);
  } else {
    message.result = std::move(*result);
  }
  return message;
}

void RpcIdScanner::EndValue() {
  if (!value_.empty() && value_.size() <= kMaxIdText) {
    json value = ParseJsonText(value_);
    if (!value.is_discarded() && IsValidRpcId(value)) {
      id_ = std::move(value);
    }
  }
  value_.clear();
}

void RpcIdScanner::Feed(std::string_view chunk) {
  for (const char c : chunk) {
    switch (state_) {
      case State::kDone:
        return;
      case State::kStart:
        if (c == '{') {
          state_ = State::kKey;
        } else if (!IsSpace(c)) {
          state_ = State::kDone;
        }
        break;
      case State::kKey:
        if (c == '"') {
          state_ = State::kKeyText;
          key_.clear();
          key_long_ = false;
          escaped_ = false;
        } else if (!IsSpace(c)) {
          state_ = State::kDone;  // '}' or not JSON
        }
        break;
      case State::kKeyText:
        if (escaped_) {
          escaped_ = false;
        } else if (c == '\\') {
          escaped_ = true;
          key_long_ = true;  // an escaped key is not spelled "id"
        } else if (c == '"') {
          is_id_ = !key_long_ && key_ == "id";
          saw_method_ = saw_method_ || (!key_long_ && key_ == "method");
          state_ = State::kColon;
        } else if (key_.size() < 6) {
          key_.push_back(c);
        } else {
          key_long_ = true;
        }
        break;
      case State::kColon:
        if (c == ':') {
          state_ = State::kValue;
        } else if (!IsSpace(c)) {
          state_ = State::kDone;
        }
        break;
      case State::kValue:
        if (IsSpace(c)) {
          break;
        }
        in_string_ = false;
        escaped_ = false;
        depth_ = 0;
        if (is_id_ && c != '{' && c != '[') {
          value_.assign(1, c);
          value_string_ = c == '"';
          state_ = State::kIdText;
          break;
        }
        state_ = State::kSkip;
        if (c == '"') {
          in_string_ = true;
        } else if (c == '{' || c == '[') {
          depth_ = 1;
        }
        break;
      case State::kIdText:
        if (value_string_) {
          if (value_.size() <= kMaxIdText) {
            value_.push_back(c);
          }
          if (escaped_) {
            escaped_ = false;
          } else if (c == '\\') {
            escaped_ = true;
          } else if (c == '"') {
            EndValue();
            state_ = State::kComma;
          }
        } else if (c == ',') {
          EndValue();
          state_ = State::kKey;
        } else if (c == '}') {
          EndValue();
          state_ = State::kDone;
        } else if (IsSpace(c)) {
          EndValue();
          state_ = State::kComma;
        } else if (value_.size() <= kMaxIdText) {
          value_.push_back(c);
        }
        break;
      case State::kSkip:
        if (in_string_) {
          if (escaped_) {
            escaped_ = false;
          } else if (c == '\\') {
            escaped_ = true;
          } else if (c == '"') {
            in_string_ = false;
            if (depth_ == 0) {
              state_ = State::kComma;
            }
          }
        } else if (c == '"') {
          in_string_ = true;
        } else if (c == '{' || c == '[') {
          ++depth_;
        } else if (c == '}' || c == ']') {
          if (depth_ == 0) {
            state_ = State::kDone;  // the top-level object closed after a scalar
          } else if (--depth_ == 0) {
            state_ = State::kComma;
          }
        } else if (c == ',' && depth_ == 0) {
          state_ = State::kKey;
        }
        break;
      case State::kComma:
        if (c == ',') {
          state_ = State::kKey;
        } else if (!IsSpace(c)) {
          state_ = State::kDone;  // '}' ends the object; anything else is not JSON
        }
        break;
    }
  }
}

json RpcResult(const json& id, json result) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json RpcError(const json& id, int code, std::string message) {
  return json{{"jsonrpc", "2.0"},
              {"id", id},
              {"error", json{{"code", code}, {"message", std::move(message)}}}};
}

json RpcRequest(const json& id, std::string method, json params) {
  json out{{"jsonrpc", "2.0"}, {"id", id}, {"method", std::move(method)}};
  if (!params.is_null()) {
    out["params"] = std::move(params);
  }
  return out;
}

json RpcNotification(std::string method, json params) {
  json out{{"jsonrpc", "2.0"}, {"method", std::move(method)}};
  if (!params.is_null()) {
    out["params"] = std::move(params);
  }
  return out;
}

std::string QuotedPrefix(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) {
    return std::string(text);
  }
  std::size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U) {
    --cut;
  }
  return std::string(text.substr(0, cut)) + "\u2026";
}

}  // namespace cagent::launcher::mcp
