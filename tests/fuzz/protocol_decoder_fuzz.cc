// libFuzzer target for the agent <-> broker wire protocol (common/protocol.h): the frame splitter
// and the message decoder, in both directions.
//
// The broker decodes whatever a possibly compromised agent writes, and the agent decodes what the
// broker writes; neither may crash, and what the decoder accepts must mean one thing. The input
// is used twice:
//   1. as one payload, decoded as from the agent and as from the broker;
//   2. as a byte stream, split into frames by a FrameDecoder fed all at once, byte by byte, and in
//      chunks whose sizes come from the input; each way must yield the same frames and the same
//      failed/pending state, and every frame is decoded as in 1.
// For each decoded message: ToJson -> EncodeMessage -> FrameDecoder -> Decode must succeed and give
// the same JSON (decoding is a function of the wire object, and re-encoding loses nothing). For
// each refusal: the error reply the broker would send encodes and decodes back to the same code
// and message. A violated invariant aborts so the fuzzer keeps the input.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/protocol.h"

namespace {

namespace protocol = cagent::protocol;

void Check(bool ok) {
  if (!ok) std::abort();
}

// A small limit so that the oversized-frame path and frames exactly at the limit are reachable
// with the short inputs libFuzzer tries (run_libfuzzer.sh: -max_len=4096).
constexpr std::uint32_t kFuzzMaxFrame = 1024;

// Re-encodes `m` and decodes it again; the result must be the same wire object.
void CheckReencodes(const protocol::Message& m, bool from_agent) {
  Check(protocol::IsAgentKind(m.header.kind) == from_agent);
  Check(m.header.version == protocol::kVersion);
  const nlohmann::json first = protocol::ToJson(m);
  // Strict dump: a decoded message holds only valid UTF-8 (the parser rejects anything else).
  const std::string first_text = first.dump();
  auto frame = protocol::EncodeMessage(m);
  if (!frame.ok()) {
    // Only possible when the re-encoded object is above the limit (defaults added for missing
    // optional fields can make it larger than the input).
    Check(first_text.size() > protocol::kMaxFrameBytes);
    return;
  }
  protocol::FrameDecoder decoder;
  Check(decoder.Feed(*frame).ok());
  std::optional<std::string> payload = decoder.Next();
  Check(payload.has_value());
  Check(decoder.Pending() == 0);
  Check(*payload == first_text);
  auto again = protocol::Decode(*payload, from_agent);
  Check(std::holds_alternative<protocol::Message>(again));
  const auto& m2 = std::get<protocol::Message>(again);
  Check(m2.header.kind == m.header.kind);
  Check(m2.header.id == m.header.id);
  Check(protocol::ToJson(m2).dump() == first_text);
}

// The error reply built from a refusal survives the wire unchanged.
void CheckErrorReply(const protocol::DecodeError& e) {
  Check(!e.message.empty());
  Check(protocol::ParseErrorCode(protocol::ErrorCodeName(e.code)) == e.code);
  const protocol::Message reply = protocol::Make(protocol::Kind::kError, e.id.value_or(0),
                                                 protocol::ErrorReply{e.code, e.message});
  auto frame = protocol::EncodeMessage(reply);
  Check(frame.ok());
  auto back = protocol::Decode(std::string_view(*frame).substr(protocol::kHeaderBytes),
                               /*from_agent=*/false);
  Check(std::holds_alternative<protocol::Message>(back));
  const auto& r = std::get<protocol::ErrorReply>(std::get<protocol::Message>(back).body);
  Check(r.code == e.code);
  Check(r.message == e.message);  // fails if the message carried invalid UTF-8
}

void DecodeBothWays(std::string_view payload) {
  for (bool from_agent : {true, false}) {
    auto decoded = protocol::Decode(payload, from_agent);
    if (auto* m = std::get_if<protocol::Message>(&decoded)) {
      CheckReencodes(*m, from_agent);
    } else {
      CheckErrorReply(std::get<protocol::DecodeError>(decoded));
    }
  }
}

struct Split {
  std::vector<std::string> frames;
  bool failed = false;
  std::size_t pending = 0;
};

// Feeds `stream` in pieces of the sizes `sizes` yields (cycled), draining after every piece.
template <typename SizeFn>
Split SplitStream(std::string_view stream, SizeFn next_size) {
  protocol::FrameDecoder decoder(kFuzzMaxFrame);
  Split out;
  std::size_t pos = 0;
  while (pos < stream.size()) {
    const std::size_t n = std::min(next_size(), stream.size() - pos);
    const bool fed = decoder.Feed(stream.substr(pos, n)).ok();
    pos += n;
    while (auto frame = decoder.Next()) {
      Check(!frame->empty() && frame->size() <= kFuzzMaxFrame);
      out.frames.push_back(std::move(*frame));
    }
    if (!fed || decoder.failed()) break;
  }
  out.failed = decoder.failed();
  // A failed decoder refuses everything from then on.
  if (out.failed) {
    Check(!decoder.Feed("x").ok());
    Check(!decoder.Next().has_value());
  } else {
    out.pending = decoder.Pending();
    Check(out.pending < protocol::kHeaderBytes + kFuzzMaxFrame);
  }
  return out;
}

bool SameSplit(const Split& a, const Split& b) {
  return a.frames == b.frames && a.failed == b.failed && a.pending == b.pending;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  // 1. The whole input as one payload.
  DecodeBothWays(input);

  // 2. The input as a stream of frames, three ways.
  const Split whole = SplitStream(input, [&] { return input.size(); });
  const Split bytes = SplitStream(input, [] { return std::size_t{1}; });
  Check(SameSplit(whole, bytes));
  std::size_t i = 0;
  const Split chunks = SplitStream(input, [&] {
    const std::size_t n = input.empty() ? 1 : 1 + static_cast<unsigned char>(input[i % size]) % 17;
    ++i;
    return n;
  });
  Check(SameSplit(whole, chunks));
  for (const std::string& frame : whole.frames) DecodeBothWays(frame);

  // 3. Framing what was read reproduces the stream's prefix.
  std::string reframed;
  for (const std::string& frame : whole.frames) {
    auto f = protocol::EncodeFrame(frame);
    Check(f.ok());
    reframed += *f;
  }
  Check(input.substr(0, reframed.size()) == reframed);
  if (!whole.failed) Check(reframed.size() + whole.pending == input.size());
  return 0;
}
