#include "common/result.h"

#include <cstring>

namespace cagent {

std::string Error::Message() const {
  std::string out = context + op;
  if (err != 0) {
    out += ": ";
    out += std::strerror(err);
  }
  if (!detail.empty()) {
    out += err != 0 ? " (" + detail + ")" : ": " + detail;
  }
  return out;
}

const char* CodeName(Error::Code code) {
  switch (code) {
    case Error::Code::kFailed:
      return "failed";
    case Error::Code::kInvalidInput:
      return "invalid-input";
    case Error::Code::kUnsupported:
      return "unsupported";
    case Error::Code::kSetup:
      return "setup";
    case Error::Code::kMalformed:
      return "malformed";
    case Error::Code::kTooLarge:
      return "too-large";
    case Error::Code::kCancelled:
      return "cancelled";
  }
  return "failed";
}

Error ErrnoError(std::string op, int err) {
  Error e;
  e.op = std::move(op);
  e.err = err;
  return e;
}

Error PlainError(std::string op, std::string detail) {
  Error e;
  e.op = std::move(op);
  e.detail = std::move(detail);
  return e;
}

}  // namespace cagent
