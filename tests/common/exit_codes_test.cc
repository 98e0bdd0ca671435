// Tests of the exit-status table (common/exit_codes.h): every status has its name, the numbers
// are distinct, ExitCodeFor maps every Error::Code, and the man page's EXIT STATUS section
// (docs/cagent.1) lists exactly the table's numbers and names.
#include "common/exit_codes.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

#ifndef CAGENT_SOURCE_DIR
#error "CAGENT_SOURCE_DIR must name the source tree (tests/CMakeLists.txt)"
#endif

namespace cagent {
namespace {

// Every status of the table with its name, written out here independently of exit_codes.cc, so a
// wrong name or number there shows.
const std::vector<std::pair<ExitCode, std::string>>& Table() {
  static const auto* table = new std::vector<std::pair<ExitCode, std::string>>{
      {ExitCode::kOk, "ok"},
      {ExitCode::kFailed, "failed"},
      {ExitCode::kUsage, "usage"},
      {ExitCode::kRunFailed, "run-failed"},
      {ExitCode::kNeedsApproval, "needs-approval"},
      {ExitCode::kDenied, "denied"},
      {ExitCode::kAsk, "ask"},
      {ExitCode::kNoChange, "no-change"},
      {ExitCode::kTimedOut, "timed-out"},
      {ExitCode::kSetupFailed, "setup-failed"},
      {ExitCode::kCannotExecute, "cannot-execute"},
      {ExitCode::kNotFound, "not-found"},
      {ExitCode::kCancelled, "cancelled"},
  };
  return *table;
}

TEST(ExitCodes, EveryStatusHasItsName) {
  for (const auto& [code, name] : Table()) {
    EXPECT_EQ(ExitCodeName(ToInt(code)), name) << ToInt(code);
  }
}

TEST(ExitCodes, TheNumbersAreTheDocumentedOnes) {
  // The numbers are a public interface (scripts test them): a change here is a breaking change.
  EXPECT_EQ(ToInt(ExitCode::kOk), 0);
  EXPECT_EQ(ToInt(ExitCode::kFailed), 1);
  EXPECT_EQ(ToInt(ExitCode::kUsage), 2);
  EXPECT_EQ(ToInt(ExitCode::kRunFailed), 3);
  EXPECT_EQ(ToInt(ExitCode::kNeedsApproval), 4);
  EXPECT_EQ(ToInt(ExitCode::kDenied), 5);
  EXPECT_EQ(ToInt(ExitCode::kAsk), 6);
  EXPECT_EQ(ToInt(ExitCode::kNoChange), 7);
  EXPECT_EQ(ToInt(ExitCode::kTimedOut), 124);
  EXPECT_EQ(ToInt(ExitCode::kSetupFailed), 125);
  EXPECT_EQ(ToInt(ExitCode::kCannotExecute), 126);
  EXPECT_EQ(ToInt(ExitCode::kNotFound), 127);
  EXPECT_EQ(ToInt(ExitCode::kCancelled), 130);
}

TEST(ExitCodes, NumbersAndNamesAreDistinct) {
  std::set<int> numbers;
  std::set<std::string> names;
  for (const auto& [code, name] : Table()) {
    EXPECT_TRUE(numbers.insert(ToInt(code)).second) << "status " << ToInt(code) << " twice";
    EXPECT_TRUE(names.insert(name).second) << "name " << name << " twice";
  }
}

TEST(ExitCodes, NumbersOutsideTheTableHaveNoName) {
  std::set<int> reserved;
  for (const auto& [code, name] : Table()) reserved.insert(ToInt(code));
  for (int status = 0; status < 256; ++status) {
    if (reserved.count(status) != 0) continue;
    EXPECT_EQ(ExitCodeName(status), "") << status;
  }
  EXPECT_EQ(ExitCodeName(-1), "");
  EXPECT_EQ(ExitCodeName(1000), "");
}

Error WithCode(Error::Code code) { return PlainError("op", "detail").WithCode(code); }

TEST(ExitCodes, ExitCodeForMapsEveryErrorCode) {
  // `otherwise` is used for the codes that do not decide a status by themselves; two different
  // values show it is passed through, not a constant.
  for (ExitCode otherwise : {ExitCode::kFailed, ExitCode::kRunFailed}) {
    EXPECT_EQ(ExitCodeFor(WithCode(Error::Code::kFailed), otherwise), otherwise);
    EXPECT_EQ(ExitCodeFor(WithCode(Error::Code::kInvalidInput), otherwise), ExitCode::kUsage);
    EXPECT_EQ(ExitCodeFor(WithCode(Error::Code::kUnsupported), otherwise), ExitCode::kSetupFailed);
    EXPECT_EQ(ExitCodeFor(WithCode(Error::Code::kSetup), otherwise), ExitCode::kSetupFailed);
    EXPECT_EQ(ExitCodeFor(WithCode(Error::Code::kMalformed), otherwise), otherwise);
    EXPECT_EQ(ExitCodeFor(WithCode(Error::Code::kTooLarge), otherwise), otherwise);
    EXPECT_EQ(ExitCodeFor(WithCode(Error::Code::kCancelled), otherwise), ExitCode::kCancelled);
  }
  // A builder's default is kFailed, so an error nobody classified takes `otherwise`.
  EXPECT_EQ(ExitCodeFor(PlainError("op"), ExitCode::kRunFailed), ExitCode::kRunFailed);
  EXPECT_EQ(ExitCodeFor(ErrnoError("open", 2), ExitCode::kFailed), ExitCode::kFailed);
}

TEST(ExitCodes, TheCodeSurvivesContext) {
  Result<int> r = PlainError("read x").WithCode(Error::Code::kInvalidInput);
  r = std::move(r).Context("load profile");
  EXPECT_EQ(r.error().code, Error::Code::kInvalidInput);
  EXPECT_EQ(ExitCodeFor(r.error(), ExitCode::kFailed), ExitCode::kUsage);
}

TEST(ErrorCodes, EveryCodeHasADistinctName) {
  const std::map<Error::Code, std::string> names = {
      {Error::Code::kFailed, "failed"},           {Error::Code::kInvalidInput, "invalid-input"},
      {Error::Code::kUnsupported, "unsupported"}, {Error::Code::kSetup, "setup"},
      {Error::Code::kMalformed, "malformed"},     {Error::Code::kTooLarge, "too-large"},
      {Error::Code::kCancelled, "cancelled"},
  };
  std::set<std::string> seen;
  for (const auto& [code, name] : names) {
    EXPECT_EQ(CodeName(code), name);
    EXPECT_TRUE(seen.insert(name).second) << name;
  }
}

// ---- the man page ----

// The entries of docs/cagent.1's EXIT STATUS section: each status is a ".TP" paragraph whose tag
// line is ".B <number> <name>". Other tag lines (the per-command list) are not numbers.
std::map<int, std::string> ManPageStatuses(std::string* error) {
  const std::string path = std::string(CAGENT_SOURCE_DIR) + "/docs/cagent.1";
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read " + path;
    return {};
  }
  std::map<int, std::string> out;
  const std::regex entry(R"(^\.B ([0-9]+) ([a-z][a-z-]*)$)");
  std::string line;
  bool in_section = false;
  bool after_tp = false;
  int sections = 0;
  while (std::getline(in, line)) {
    if (line.starts_with(".SH ")) {
      in_section = line == ".SH EXIT STATUS";
      if (in_section) ++sections;
      continue;
    }
    if (!in_section) continue;
    if (line == ".TP") {
      after_tp = true;
      continue;
    }
    std::smatch m;
    if (after_tp && std::regex_match(line, m, entry)) {
      const int status = std::stoi(m[1]);
      if (!out.emplace(status, m[2]).second) *error += "status " + m[1].str() + " listed twice; ";
    }
    after_tp = false;
  }
  if (sections != 1)
    *error += "expected one .SH EXIT STATUS section, found " + std::to_string(sections);
  return out;
}

TEST(ExitCodesManPage, TheExitStatusSectionListsExactlyTheTable) {
  std::string error;
  const std::map<int, std::string> documented = ManPageStatuses(&error);
  ASSERT_TRUE(error.empty()) << error;
  std::map<int, std::string> table;
  for (const auto& [code, name] : Table()) table.emplace(ToInt(code), name);
  EXPECT_EQ(documented, table) << "docs/cagent.1 EXIT STATUS and common/exit_codes.h differ";
}

}  // namespace
}  // namespace cagent
