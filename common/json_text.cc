#include "common/json_text.h"

#include <algorithm>

#include "common/text.h"

namespace cagent {

std::string JsonText(const nlohmann::json& value, int indent) noexcept {
  try {
    return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception&) {
    // With error_handler_t::replace dump() has nothing left to throw on; should a future version
    // find something, the caller still gets valid JSON rather than an abort.
    return "null";
  }
}

void AppendJsonString(std::string& out, std::string_view text) noexcept {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::size_t start = out.size();
  out += '"';
  std::size_t plain = 0;  // start of the run of bytes copied as they are
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      const std::size_t n = Utf8SequenceLength(text, i);
      if (n == 0) {
        // Invalid UTF-8: nlohmann's replacement (how many bytes one U+FFFD stands for) is the
        // reference, and this is rare, so let it write the whole string.
        out.resize(start);
        out += JsonText(nlohmann::json(text));
        return;
      }
      i += n;
      continue;
    }
    out.append(text.data() + plain, i - plain);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
    }
    plain = ++i;
  }
  out.append(text.data() + plain, text.size() - plain);
  out += '"';
}

std::size_t JsonDepth(std::string_view text, std::size_t limit) noexcept {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return limit + 1;
      deepest = std::max(deepest, depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json ParseJsonText(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) {
    return nlohmann::json::value_t::discarded;
  }
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

nlohmann::json ParseJsonWithin(std::string_view text, std::size_t max_depth, bool* too_deep) {
  const bool deep = JsonDepth(text, max_depth) > max_depth;
  if (too_deep != nullptr) {
    *too_deep = deep;
  }
  if (deep) {
    return nlohmann::json::value_t::discarded;
  }
  return ParseJsonText(text);
}

}  // namespace cagent
