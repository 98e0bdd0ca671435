// Where an HTTP/1.1 request's body ends (RFC 9112 section 6), for the requests the egress proxy
// reads in clear on an intercepted connection (issue 36): the proxy relays exactly one body and
// then nothing more from the client, so a second request hidden after the first can never reach
// the upstream undecided. Pure; the client is hostile, so the framing is strict: a request that
// could be read two ways (Content-Length beside Transfer-Encoding, two different lengths) or that
// uses a coding other than chunked is refused, never guessed at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"
#include "launcher/egress/http_head.h"

namespace cagent::launcher::egress {

class RequestBody {
 public:
  // The framing `head` declares. kInvalidInput (the message says why, for a 400 or 501) for
  // Transfer-Encoding other than a lone "chunked", Transfer-Encoding with Content-Length, a
  // Content-Length that is not digits or disagrees with another, or one past 2^53.
  static Result<RequestBody> For(const HttpHead& head);

  // Takes bytes that follow the head (or the bytes before): returns how many of them belong to the
  // body (the rest is not the body's: the proxy drops it). A malformed chunk stops the body with
  // error() set; done() once the body (the chunked terminator and trailers too) is complete.
  std::size_t Feed(std::string_view data);

  [[nodiscard]] bool done() const { return state_ == State::kDone; }
  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] bool chunked() const { return chunked_; }

 private:
  enum class State : std::uint8_t {
    kLength,   // Content-Length: `remaining_` bytes left
    kSize,     // a chunk-size line (hex digits, then extensions until CRLF)
    kData,     // `remaining_` bytes of chunk data
    kDataEnd,  // the CRLF after chunk data
    kTrailer,  // trailer lines until an empty one
    kDone,
  };
  void Fail(std::string why);

  State state_ = State::kDone;
  bool chunked_ = false;
  std::uint64_t remaining_ = 0;
  std::string line_;         // the chunk-size or trailer line read so far (capped)
  std::size_t trailer_ = 0;  // trailer bytes so far (capped)
  std::string error_;
};

}  // namespace cagent::launcher::egress
