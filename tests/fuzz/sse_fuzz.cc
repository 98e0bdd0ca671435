// libFuzzer target for the Server-Sent Events parser (launcher/model/sse.h) that reads a model
// provider's streamed answer.
//
// Input: one byte choosing the limit (small, so the limit paths are reached), one seeding the
// chunk sizes, then the stream. Invariants: the verdict (failed or not), the events and the
// pending state do not depend on how the stream is cut into chunks (all at once, byte by byte,
// in pieces from the input: issue #33 found the line limit did); no event's data is over the
// limit; a failed parser keeps failing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/model/sse.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;
using cagent::launcher::model::SseEvent;
using cagent::launcher::model::SseParser;

struct Outcome {
  std::vector<SseEvent> events;
  bool failed = false;
  bool pending = false;
};

Outcome Run(const std::vector<std::string_view>& pieces, std::size_t limit) {
  SseParser parser(limit);
  Outcome out;
  for (std::string_view piece : pieces) {
    if (!parser.Feed(piece, out.events).ok()) {
      out.failed = true;
      Check(!parser.Feed("\n\n", out.events).ok());  // stays failed
      return out;
    }
  }
  out.pending = parser.HasPending();
  return out;
}

bool Same(const Outcome& a, const Outcome& b) {
  // Events dispatched before a failure may differ in number (a chunk is parsed up to where it
  // fails); the verdict may not, and without a failure neither may anything else.
  if (a.failed != b.failed) return false;
  if (a.failed) return true;
  if (a.pending != b.pending || a.events.size() != b.events.size()) return false;
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    if (a.events[i].event != b.events[i].event || a.events[i].data != b.events[i].data ||
        a.events[i].id != b.events[i].id) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cagent::fuzz::InputReader in(data, size);
  const std::size_t limit = 1 + in.Byte();
  const std::string_view seed = in.Take(2);
  const std::string_view stream = in.Rest();

  const Outcome whole = Run({stream}, limit);
  for (const SseEvent& e : whole.events) Check(e.data.size() <= limit);
  const Outcome bytes = Run(cagent::fuzz::Pieces(stream, {}, 1), limit);
  Check(Same(whole, bytes));
  const Outcome pieces = Run(cagent::fuzz::Pieces(stream, seed, 17), limit);
  Check(Same(whole, pieces));
  return 0;
}
