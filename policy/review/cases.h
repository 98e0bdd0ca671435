// The `cagent policy test` cases file: a table of requests and the verdicts a profile must give
// them, for CI of profiles. Pure: parses text already read; no I/O.
//
//   # comment
//   case    = VERDICT REQUEST
//   VERDICT = allow | ask | deny        (the profile's verdict, before the approval mode)
//   REQUEST = command "LINE"            a shell command line (what run_command runs)
//           | argv WORD...              an argv as executed, without a shell
//           | read PATH | write PATH
//           | tool TOOL [PATH | "LINE"]
//           | host HOST[:PORT]          a connection through the egress proxy (no port: 443)
//           | mcp-tool NAME             a tools/call of a server run by `cagent mcp wrap`
//           | shell "LINE"              the former spelling of command "LINE"; still read
// One case per line. Words are separated by blanks; "..." (with \" \\ \n \t escapes) and '...'
// quote; '#' at the start of a word starts a comment. The request grammar is the one a profile's
// `examples` section uses (ParseRequestWords in request.h), so a line means the same in both.
#pragma once

#include <cstdint>
#include <vector>

#include "policy/language/diagnostics.h"
#include "policy/language/ir.h"
#include "policy/language/request.h"
#include "policy/language/source.h"

namespace cagent::policy {

struct Case {
  std::uint32_t line = 0;  // 1-based, in the cases file
  Verdict expect = Verdict::kDeny;
  Request request;
};

// Parses file `file` of `sources`. Every malformed line is reported in `diags` (as
// file:line:col with the offending word) and skipped; the well-formed cases are returned in
// file order. A caller runs nothing when `diags` has errors.
[[nodiscard]] std::vector<Case> ParseCases(const SourceSet& sources, std::uint32_t file,
                                           Diagnostics& diags);

}  // namespace cagent::policy
