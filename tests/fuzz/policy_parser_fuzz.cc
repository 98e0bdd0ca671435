// libFuzzer target for the policy language front end: lexer, parser and diagnostic rendering.
//
// Any byte string is a possible profile (profiles come from the user's repository, which an agent
// may have written). Besides "no crash, no sanitizer report", it checks invariants the rest of
// cagent relies on; a violated invariant aborts so the fuzzer keeps the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "policy/language/ast.h"
#include "policy/language/diagnostics.h"
#include "policy/language/lexer.h"
#include "policy/language/parser.h"
#include "policy/language/source.h"

namespace {

using cagent::policy::Diagnostics;
using cagent::policy::Location;
using cagent::policy::Statement;
using cagent::policy::Value;

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckLocation(const Location& loc, std::uint32_t file) {
  Check(loc.file == file);
  Check(loc.line >= 1 && loc.col >= 1);
}

void CheckValue(const Value& v, std::uint32_t file, bool in_group) {
  CheckLocation(v.loc, file);
  Check(v.length >= 1);
  if (v.kind == Value::Kind::kGroup) {
    Check(!in_group);  // groups cannot be nested
    Check(!v.alternatives.empty());
    Check(v.text.empty());
    for (const Value& alt : v.alternatives) CheckValue(alt, file, true);
  } else {
    Check(v.alternatives.empty());
  }
}

void CheckStatements(const std::vector<Statement>& statements, std::uint32_t file, int depth) {
  Check(depth <= cagent::policy::kMaxBlockDepth);
  for (const Statement& s : statements) {
    CheckLocation(s.loc, file);
    Check(!s.keyword.empty());
    Check(s.keyword_length == s.keyword.size());
    for (const Value& v : s.args) CheckValue(v, file, false);
    if (s.has_block) {
      CheckLocation(s.block_loc, file);
      CheckStatements(s.block, file, depth + 1);
    } else {
      Check(s.block.empty());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cagent::policy::SourceSet sources;
  sources.Add("<builtin>/base.cagent", "");  // so the fuzzed file's index is not 0
  const std::uint32_t file =
      sources.Add("fuzz.cagent", std::string(reinterpret_cast<const char*>(data), size));

  // The lexer alone: it terminates, and every token but EOF consumes at least one byte.
  {
    Diagnostics diags;
    cagent::policy::Lexer lexer(sources.file(file), file, diags);
    std::size_t tokens = 0;
    for (;;) {
      const cagent::policy::Token t = lexer.Next();
      if (t.kind == cagent::policy::TokenKind::kEof) break;
      Check(t.length >= 1);
      Check(++tokens <= size);
    }
    (void)cagent::policy::RenderAll(sources, diags);
  }

  Diagnostics diags;
  const cagent::policy::File parsed = cagent::policy::Parse(sources, file, diags);
  Check(parsed.file == file);
  CheckStatements(parsed.statements, file, 0);
  for (const cagent::policy::Diagnostic& d : diags.list()) {
    CheckLocation(d.loc, file);
    Check(!d.message.empty());
    Check(d.message.find('\n') == std::string::npos);
  }
  const std::string rendered = cagent::policy::RenderAll(sources, diags);
  Check(rendered.empty() == diags.list().empty());
  return 0;
}
