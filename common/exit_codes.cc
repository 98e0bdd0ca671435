#include "common/exit_codes.h"

namespace cagent {

std::string_view ExitCodeName(int status) {
  switch (static_cast<ExitCode>(status)) {
    case ExitCode::kOk:
      return "ok";
    case ExitCode::kFailed:
      return "failed";
    case ExitCode::kUsage:
      return "usage";
    case ExitCode::kRunFailed:
      return "run-failed";
    case ExitCode::kNeedsApproval:
      return "needs-approval";
    case ExitCode::kDenied:
      return "denied";
    case ExitCode::kAsk:
      return "ask";
    case ExitCode::kNoChange:
      return "no-change";
    case ExitCode::kTimedOut:
      return "timed-out";
    case ExitCode::kSetupFailed:
      return "setup-failed";
    case ExitCode::kCannotExecute:
      return "cannot-execute";
    case ExitCode::kNotFound:
      return "not-found";
    case ExitCode::kCancelled:
      return "cancelled";
  }
  return "";
}

ExitCode ExitCodeFor(const Error& error, ExitCode otherwise) {
  switch (error.code) {
    case Error::Code::kInvalidInput:
      return ExitCode::kUsage;
    case Error::Code::kUnsupported:
    case Error::Code::kSetup:
      return ExitCode::kSetupFailed;
    case Error::Code::kCancelled:
      return ExitCode::kCancelled;
    case Error::Code::kFailed:
    case Error::Code::kMalformed:
    case Error::Code::kTooLarge:
      break;
  }
  return otherwise;
}

}  // namespace cagent
