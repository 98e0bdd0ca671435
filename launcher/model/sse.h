// SseParser: an incremental parser for Server-Sent Events (the WHATWG "event stream" format), as
// model providers stream their answers. Runs in cagent (trusted), on the broker's io_context
// thread; the bytes it parses come from the provider over the network.
//
// Accepted: lines ending in LF, CRLF or a lone CR (a CR at the end of one chunk followed by an LF
// at the start of the next counts once); a UTF-8 byte-order mark at the very start; comment lines
// starting with ':'; fields "event", "data" (several data lines join with "\n"), "id" and "retry"
// (the last two are recorded / ignored); a field without ':' has an empty value; one space after
// the ':' is dropped. A blank line dispatches the event; an event with no data line is not
// dispatched (per the standard). Bytes after the last blank line at end of stream are discarded
// (Finish reports whether any were pending).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace cagent::launcher::model {

struct SseEvent {
  std::string event;  // the "event:" name; empty means the default ("message")
  std::string data;   // data lines joined with "\n" (no trailing newline)
  std::string id;     // the last "id:" seen (sticky across events, per the standard)
};

class SseParser {
 public:
  // `max_event_bytes` bounds one line and one event's data: a stream that exceeds it fails
  // instead of growing without limit.
  explicit SseParser(std::size_t max_event_bytes = 16U << 20) : max_(max_event_bytes) {}

  // Parses `bytes` and appends each complete event to `out`. Fails (and keeps failing) when a line
  // or an event's data exceeds the limit.
  Status Feed(std::string_view bytes, std::vector<SseEvent>& out);
  // End of stream: true when a partial event (or line) was pending and is discarded.
  [[nodiscard]] bool HasPending() const;

 private:
  Status Line(std::string_view line, std::vector<SseEvent>& out);

  std::size_t max_;
  std::string line_;       // the current, not yet terminated line
  bool after_cr_ = false;  // the previous chunk ended with CR: skip one leading LF
  bool at_start_ = true;   // nothing consumed yet (a BOM may follow)
  bool failed_ = false;
  bool have_data_ = false;  // at least one data line in the current event
  std::string event_;
  std::string data_;
  std::string id_;
  bool pending_fields_ = false;  // a field line was seen since the last dispatch
};

}  // namespace cagent::launcher::model
