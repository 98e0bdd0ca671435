#include "launcher/egress/http_body.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace cagent::launcher::egress {

namespace {

constexpr std::size_t kMaxChunkLine = 4096;  // a chunk-size line with its extensions
constexpr std::size_t kMaxTrailers = 16384;  // every trailer line together
constexpr std::uint64_t kMaxLength = 1ULL << 53;

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) {
             return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
           };
           return lower(x) == lower(y);
         });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Error Refusal(std::string why) {
  return PlainError(std::move(why)).WithCode(Error::Code::kInvalidInput);
}

}  // namespace

Result<RequestBody> RequestBody::For(const HttpHead& head) {
  std::vector<std::string_view> codings;
  std::vector<std::string_view> lengths;
  for (const HttpHeader& h : head.headers) {
    if (EqualsNoCase(h.name, "transfer-encoding")) {
      std::string_view rest = h.value;
      while (true) {
        const std::size_t comma = rest.find(',');
        codings.push_back(Trim(rest.substr(0, comma)));
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
    } else if (EqualsNoCase(h.name, "content-length")) {
      lengths.push_back(Trim(h.value));
    }
  }
  RequestBody body;
  if (!codings.empty()) {
    if (!lengths.empty()) {
      return Refusal("the request has both Transfer-Encoding and Content-Length");
    }
    if (codings.size() != 1 || !EqualsNoCase(codings.front(), "chunked")) {
      return Refusal("only the chunked transfer coding is served");
    }
    body.chunked_ = true;
    body.state_ = State::kSize;
    return body;
  }
  if (lengths.empty()) return body;  // no body
  for (const std::string_view l : lengths) {
    if (l != lengths.front()) return Refusal("the request has two different Content-Length values");
  }
  const std::string_view digits = lengths.front();
  if (digits.empty() || digits.size() > 16 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Refusal("the request's Content-Length is not a number of bytes");
  }
  std::uint64_t n = 0;
  for (const char c : digits) n = n * 10 + static_cast<std::uint64_t>(c - '0');
  if (n > kMaxLength) return Refusal("the request's Content-Length is too large");
  body.remaining_ = n;
  body.state_ = n == 0 ? State::kDone : State::kLength;
  return body;
}

void RequestBody::Fail(std::string why) {
  error_ = std::move(why);
  state_ = State::kDone;
}

std::size_t RequestBody::Feed(std::string_view data) {
  std::size_t used = 0;
  while (used < data.size() && state_ != State::kDone) {
    const std::string_view rest = data.substr(used);
    switch (state_) {
      case State::kLength:
      case State::kData: {
        const std::size_t take =
            static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, rest.size()));
        used += take;
        remaining_ -= take;
        if (remaining_ == 0) {
          state_ = state_ == State::kLength ? State::kDone : State::kDataEnd;
        }
        break;
      }
      case State::kDataEnd:
        line_.push_back(rest.front());
        used++;
        if (line_.size() == 2) {
          if (line_ != "\r\n") {
            Fail("a chunk's data is not followed by CRLF");
            return used;
          }
          line_.clear();
          state_ = State::kSize;
        }
        break;
      case State::kSize:
      case State::kTrailer: {
        const std::size_t eol = rest.find('\n');
        const std::size_t take = eol == std::string_view::npos ? rest.size() : eol + 1;
        const std::size_t cap = state_ == State::kSize ? kMaxChunkLine : kMaxTrailers - trailer_;
        if (line_.size() + take > cap) {
          Fail(state_ == State::kSize ? "a chunk-size line is too long"
                                      : "the request's trailers are too long");
          return used;
        }
        line_.append(rest.substr(0, take));
        used += take;
        if (eol == std::string_view::npos) break;
        if (line_.size() < 2 || line_[line_.size() - 2] != '\r') {
          Fail("a chunked body's line does not end with CRLF");
          return used;
        }
        const std::string_view line(line_.data(), line_.size() - 2);
        if (state_ == State::kTrailer) {
          trailer_ += line_.size();
          const bool end = line.empty();
          line_.clear();
          if (end) state_ = State::kDone;
          break;
        }
        std::uint64_t size = 0;
        std::size_t i = 0;
        for (; i < line.size() && HexValue(line[i]) >= 0; i++) {
          if (size > (kMaxLength >> 4)) {
            Fail("a chunk is too large");
            return used;
          }
          size = size * 16 + static_cast<std::uint64_t>(HexValue(line[i]));
        }
        // After the digits: nothing, or whitespace and/or ';' extensions.
        if (i == 0 || (i < line.size() && line[i] != ';' && line[i] != ' ' && line[i] != '\t')) {
          Fail("a chunk-size line is not a hexadecimal size");
          return used;
        }
        line_.clear();
        remaining_ = size;
        state_ = size == 0 ? State::kTrailer : State::kData;
        break;
      }
      case State::kDone:
        break;
    }
  }
  return used;
}

}  // namespace cagent::launcher::egress
