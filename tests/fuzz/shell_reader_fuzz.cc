// libFuzzer target for the policy engine's shell-line reader (policy/match/shell.h): ParseShell and
// ParseShellView on a command line the agent chose.
//
// Invariants: the two parses agree exactly (the engine judges the view, the audit records the
// strings); an opaque parse says why, and a parse that is not opaque lists only commands with a
// name; a line longer than kMaxShellScript is opaque; parsing is deterministic; pipeline stages
// are only numbered inside a pipeline.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "policy/match/shell.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;
namespace policy = cagent::policy;

bool SameWords(const std::vector<std::string>& a, const std::vector<std::string_view>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

bool SameCommand(const policy::SimpleCommand& a, const policy::SimpleCommand& b) {
  return a.argv == b.argv && a.assignments == b.assignments && a.writes == b.writes &&
         a.reads == b.reads && a.run_by == b.run_by && a.pipeline == b.pipeline &&
         a.stage == b.stage && a.stdin_from == b.stdin_from && a.stdin_is_code == b.stdin_is_code &&
         a.more_args == b.more_args && a.code_from_output == b.code_from_output;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view script(reinterpret_cast<const char*>(data), size);
  const policy::ShellParse parse = policy::ParseShell(script);
  Check(parse.opaque != parse.opaque_reason.empty());
  if (script.size() > policy::kMaxShellScript) Check(parse.opaque);
  for (const policy::SimpleCommand& c : parse.commands) {
    Check(!c.argv.empty());
    if (c.pipeline == 0) Check(c.stage == 0);
    for (const std::string& a : c.assignments) Check(a.find('=') != std::string::npos);
  }

  const policy::ShellParseView view = policy::ParseShellView(script);
  Check(view.opaque == parse.opaque && view.opaque_reason == parse.opaque_reason);
  Check(view.commands.size() == parse.commands.size());
  for (std::size_t i = 0; i < parse.commands.size(); ++i) {
    const policy::SimpleCommand& c = parse.commands[i];
    const policy::SimpleCommandView& v = view.commands[i];
    Check(SameWords(c.argv, v.argv) && SameWords(c.assignments, v.assignments) &&
          SameWords(c.writes, v.writes) && SameWords(c.reads, v.reads));
    Check(c.run_by == v.run_by && c.pipeline == v.pipeline && c.stage == v.stage &&
          c.stdin_from == v.stdin_from && c.stdin_is_code == v.stdin_is_code &&
          c.more_args == v.more_args && c.code_from_output == v.code_from_output);
  }

  const policy::ShellParse again = policy::ParseShell(std::string(script));
  Check(again.opaque == parse.opaque && again.opaque_reason == parse.opaque_reason &&
        again.commands.size() == parse.commands.size());
  for (std::size_t i = 0; i < parse.commands.size(); ++i) {
    Check(SameCommand(again.commands[i], parse.commands[i]));
  }
  return 0;
}
