// libFuzzer target for reading an audit log back (launcher/broker/audit_log.h, audit_schema.h):
// `cagent log check` and `log verify` exist to judge logs someone may have tampered with, so
// the log's bytes are hostile here.
//
// Input: the log's text. Invariants:
//   - VerifyAuditLogText never throws or crashes; a log it accepts has one entry per newline,
//     every line complete, a 64-hex head, and no bad line; every prefix of it that ends at a
//     newline is accepted too, with that many entries; a rejected log names a line within it
//     and says so in one line of text;
//   - ValidateAuditLine on each line gives one-line problems, and none for a line of an
//     accepted log that is not JSON (the chain check parsed it already).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "launcher/broker/audit_log.h"
#include "launcher/broker/audit_schema.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;
namespace broker = cagent::launcher::broker;

bool IsLowerHex64(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto lines = static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n'));

  const broker::AuditVerifyReport report = broker::VerifyAuditLogText(text);
  Check(report.message.find('\n') == std::string::npos);
  if (report.ok) {
    Check(text.empty() || text.back() == '\n');
    Check(report.entries == lines && report.first_bad_line == 0);
    Check(IsLowerHex64(report.head));
    // Every prefix ending at a newline is a valid log of that many entries.
    std::uint64_t k = 0;
    for (std::size_t nl = text.find('\n'); nl != std::string_view::npos && k < 8;
         nl = text.find('\n', nl + 1)) {
      ++k;
      const broker::AuditVerifyReport prefix = broker::VerifyAuditLogText(text.substr(0, nl + 1));
      Check(prefix.ok && prefix.entries == k && IsLowerHex64(prefix.head));
    }
  } else {
    Check(report.first_bad_line >= 1 && report.first_bad_line <= lines + 1);
    Check(report.message.starts_with("line " + std::to_string(report.first_bad_line) + ": "));
  }

  std::size_t pos = 0;
  for (int n = 0; n < 64 && pos < text.size(); ++n) {
    const std::size_t nl = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    for (const std::string& problem : broker::ValidateAuditLine(line)) {
      Check(!problem.empty() && problem.find('\n') == std::string::npos);
      if (report.ok) Check(problem != "not valid JSON");
    }
  }
  return 0;
}
