// Result<T>: the error-carrying return type used across module boundaries (STYLE.md "Errors").
//
// Shaped like std::expected (C++23): a Result holds either a value or an Error. The failing call
// records what it tried (the syscall or operation) and the errno; each caller on the way up adds
// the step it was performing with Context(); the top level renders it once.
#pragma once

#include <cerrno>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace cagent {

// Describes one failure. `op` is the operation that failed ("mount", "open /etc/x"), `err` the
// errno if the failure came from the kernel (0 otherwise), `context` the chain of callers' steps,
// outermost first once rendered, and `code` what kind of failure it is: callers decide by the
// code (an exit status, a reply to a peer), never by the text.
struct Error {
  enum class Code : unsigned char {
    kFailed,        // an operation failed: a syscall, I/O, a program cagent ran (the default)
    kInvalidInput,  // what the user gave is wrong: a flag value, a malformed or unreadable file,
                    // a profile that does not compile, an override that would widen
    kUnsupported,   // this kernel or machine lacks what is required (a restriction, a feature)
    kSetup,         // a step of building the sandbox failed
    kMalformed,     // a peer's or a file's data is not in the expected shape
    kTooLarge,      // a size or count limit was hit
    kCancelled,     // the operation was interrupted on request
  };

  std::string op;
  int err = 0;
  std::string detail;         // free text for failures that are not syscalls
  std::string context;        // "step: step: " prefix added by callers
  Code code = Code::kFailed;  // last: `Error{op, err, detail, context}` keeps its meaning

  // Human-readable: "<context><op>: <strerror(err)> (<detail>)".
  [[nodiscard]] std::string Message() const;
  // Prefixes the caller's step name.
  [[nodiscard]] Error Context(const std::string& step) && {
    context = step + ": " + context;
    return std::move(*this);
  }
  // Sets the code (builders default to kFailed): `return PlainError(...).WithCode(kInvalidInput)`.
  [[nodiscard]] Error WithCode(Code c) && {
    code = c;
    return std::move(*this);
  }
};

// The code's name ("invalid-input"), for logs and --json output.
[[nodiscard]] const char* CodeName(Error::Code code);

// Builds an Error from the current errno.
[[nodiscard]] Error ErrnoError(std::string op, int err = errno);
// Builds an Error that is not a syscall failure.
[[nodiscard]] Error PlainError(std::string op, std::string detail = {});

// What a check that may refuse something returns: std::nullopt when it lets it be, else why not,
// in one line for a person. The validators that answer "may this be?" with a reason (a budget, a
// model_call's conversation, a git identity, a patch path, a batch task's result) return it, so
// an empty string never has to mean "fine".
using Refusal = std::optional<std::string>;

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }
  Error& error() { return std::get<1>(v_); }

  // Prefixes the error (if any) with the caller's step name.
  [[nodiscard]] Result Context(const std::string& step) && {
    if (!ok()) error().context = step + ": " + error().context;
    return std::move(*this);
  }

 private:
  std::variant<T, Error> v_;
};

// Result<void> equivalent.
struct Ok {};
using Status = Result<Ok>;

}  // namespace cagent
