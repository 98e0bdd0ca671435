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
