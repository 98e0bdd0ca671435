// Helpers shared by the fuzz targets (tests/fuzz/*_fuzz.cc): the invariant check, and a reader
// that takes parameters (a limit, where to cut a stream) from the front of the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace cagent::fuzz {

// A violated invariant aborts, so that libFuzzer keeps the input (and the replay binary fails).
inline void Check(bool ok) {
  if (!ok) std::abort();
}

// Consumes the input from the front: parameters first, then the text to parse.
class InputReader {
 public:
  InputReader(const std::uint8_t* data, std::size_t size)
      : rest_(reinterpret_cast<const char*>(data), size) {}

  // The next byte, or 0 when the input is used up.
  std::uint8_t Byte() {
    if (rest_.empty()) return 0;
    const auto b = static_cast<std::uint8_t>(rest_.front());
    rest_.remove_prefix(1);
    return b;
  }
  // Up to `n` bytes (fewer at the end).
  std::string_view Take(std::size_t n) {
    const std::string_view out = rest_.substr(0, n);
    rest_.remove_prefix(out.size());
    return out;
  }
  // Everything not consumed yet.
  std::string_view Rest() {
    const std::string_view out = rest_;
    rest_ = {};
    return out;
  }
  [[nodiscard]] std::string_view Peek() const { return rest_; }

 private:
  std::string_view rest_;
};

// `text` cut into pieces whose sizes come from `seed` (1..`max_piece` bytes each, cycled), so a
// stream parser can be fed the same bytes in a different way each run.
inline std::vector<std::string_view> Pieces(std::string_view text, std::string_view seed,
                                            std::size_t max_piece) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (!text.empty()) {
    const std::size_t n =
        seed.empty() ? 1 : 1 + static_cast<unsigned char>(seed[i++ % seed.size()]) % max_piece;
    out.push_back(text.substr(0, n));
    text.remove_prefix(out.back().size());
  }
  return out;
}

}  // namespace cagent::fuzz
