// libFuzzer target for the JSON nesting pre-scan (common/json_text.h: JsonDepth, ParseJsonWithin)
// that stands before every parse of JSON someone else wrote: model answers, MCP frames, the
// agent's protocol frames, audit lines and records read back.
//
// Input: one byte choosing the limit (0..63), then the text. Invariants:
//   - JsonDepth never reports more than limit + 1;
//   - ParseJsonWithin refuses exactly the texts JsonDepth puts over the limit, and a value it
//     returns nests no deeper than JsonDepth counted (the scan agrees with the parser about
//     strings, escapes and brackets), so no value deeper than the limit gets through. (Not
//     exactly as deep: of a key given twice the parser keeps the last value, so a deeper first
//     one is counted in the text and gone from the value.)
//   - such a value serialises (JsonText) and parses back to itself.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/json_text.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/json_value_depth.h"

namespace {

using cagent::fuzz::Check;
using cagent::fuzz::JsonValueDepth;
using nlohmann::json;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cagent::fuzz::InputReader in(data, size);
  const std::size_t limit = in.Byte() % 64U;
  const std::string_view text = in.Rest();

  const std::size_t depth = cagent::JsonDepth(text, limit);
  Check(depth <= limit + 1);
  bool too_deep = false;
  const json value = cagent::ParseJsonWithin(text, limit, &too_deep);
  Check(too_deep == (depth > limit));
  if (too_deep) {
    Check(value.is_discarded());
    return 0;
  }
  if (value.is_discarded()) return 0;
  const std::size_t value_depth = JsonValueDepth(value);
  Check(value_depth <= depth);
  const std::string written = cagent::JsonText(value);
  const json again = json::parse(written, nullptr, /*allow_exceptions=*/false);
  Check(!again.is_discarded() && JsonValueDepth(again) == value_depth);
  Check(cagent::JsonDepth(written, 64) == value_depth);
  return 0;
}
