#include "launcher/model/sse.h"

namespace cagent::launcher::model {

Status SseParser::Feed(std::string_view bytes, std::vector<SseEvent>& out) {
  if (failed_) return PlainError("server-sent events", "the stream already failed");
  if (at_start_ && !bytes.empty()) {
    // A UTF-8 BOM may open the stream; it can arrive split across chunks, so hold the bytes in
    // line_ until three are known.
    static constexpr std::string_view kBom = "\xEF\xBB\xBF";
    std::size_t take = 0;
    while (take < bytes.size() && line_.size() < kBom.size() && bytes[take] == kBom[line_.size()]) {
      line_.push_back(bytes[take]);
      ++take;
    }
    if (line_.size() == kBom.size()) {
      line_.clear();
      at_start_ = false;
      bytes.remove_prefix(take);
    } else if (take < bytes.size()) {
      // Not a BOM: the held bytes are ordinary content.
      at_start_ = false;
      bytes.remove_prefix(take);
    } else {
      return Ok{};  // all of `bytes` matched a BOM prefix so far
    }
  }
  std::size_t i = 0;
  if (after_cr_ && !bytes.empty()) {
    after_cr_ = false;
    if (bytes[0] == '\n') i = 1;
  }
  while (i < bytes.size()) {
    const std::size_t end = bytes.find_first_of("\r\n", i);
    if (end == std::string_view::npos) {
      if (line_.size() + (bytes.size() - i) > max_) {
        failed_ = true;
        return PlainError("server-sent events",
                          "a line is longer than " + std::to_string(max_) + " bytes");
      }
      line_.append(bytes.substr(i));
      break;
    }
    std::string_view line = bytes.substr(i, end - i);
    // The limit holds for every line, however the stream was cut into chunks: once it was only
    // checked for a line begun in an earlier chunk, so the same bytes passed in one chunk and
    // failed in two (issue #33, found by the sse fuzz target).
    if (line_.size() + line.size() > max_) {
      failed_ = true;
      return PlainError("server-sent events",
                        "a line is longer than " + std::to_string(max_) + " bytes");
    }
    if (!line_.empty()) {
      line_.append(line);
      line = line_;
    }
    Status st = Line(line, out);
    line_.clear();
    if (!st.ok()) {
      failed_ = true;
      return st;
    }
    if (bytes[end] == '\r') {
      if (end + 1 < bytes.size()) {
        i = bytes[end + 1] == '\n' ? end + 2 : end + 1;
      } else {
        after_cr_ = true;
        i = end + 1;
      }
    } else {
      i = end + 1;
    }
  }
  return Ok{};
}

Status SseParser::Line(std::string_view line, std::vector<SseEvent>& out) {
  if (line.empty()) {
    if (have_data_) {
      SseEvent ev;
      ev.event = std::move(event_);
      ev.data = std::move(data_);
      ev.id = id_;
      out.push_back(std::move(ev));
    }
    event_.clear();
    data_.clear();
    have_data_ = false;
    pending_fields_ = false;
    return Ok{};
  }
  if (line.front() == ':') return Ok{};  // comment (providers send these as keep-alives)
  pending_fields_ = true;
  std::string_view field = line;
  std::string_view value;
  if (const auto colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (data_.size() + value.size() + 1 > max_) {
      return PlainError("server-sent events",
                        "an event's data is longer than " + std::to_string(max_) + " bytes");
    }
    if (have_data_) data_.push_back('\n');
    data_.append(value);
    have_data_ = true;
  } else if (field == "event") {
    event_.assign(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) id_.assign(value);
  }
  // "retry" and unknown fields are ignored, as the standard says.
  return Ok{};
}

bool SseParser::HasPending() const { return !line_.empty() || pending_fields_; }

}  // namespace cagent::launcher::model
