// The checker: one profile's statements (AST) to typed declarations, with diagnostics.
//
// It knows every key of the language: what may appear where, how many arguments of which type
// (durations, sizes, paths, globs, argv patterns), and which combinations conflict within one
// profile. Unknown keys are errors (with a "did you mean" hint). It checks each rule's own inline
// examples (`match` / `not_match`); examples about the whole profile (the `examples` section) need
// the merged policy and are run by the compiler. `extends` and `include` are resolved before this
// stage by the loader and are not accepted here.
#pragma once

#include <string>
#include <vector>

#include "policy/language/ast.h"
#include "policy/language/diagnostics.h"
#include "policy/language/ir.h"
#include "policy/language/request.h"

namespace cagent::policy {

// An `examples` entry: a request (request.h, the same grammar as a `policy test` cases file) and
// the verdict the whole profile must give it, before the approval mode.
struct Example {
  Request request;
  Verdict expect = Verdict::kDeny;
  Location loc;  // the request's kind word
  std::uint32_t length = 1;
};

// One profile's own declarations. `layer` uses Policy's types; only what this profile writes is
// set (Setting::set, LimitValue::set); lists hold only its own entries. `layer.sources` is unset.
struct CheckedProfile {
  Policy layer;
  std::vector<Example> examples;
  Location description_loc;
};

// Checks `statements` (a profile's top-level statements, includes already spliced in).
CheckedProfile Check(const std::vector<const Statement*>& statements, Diagnostics& diags);

// Parses one argv-pattern element ("git", "pytest*", a group of alternatives) into an ArgPattern.
// Exposed for tests and for `cagent policy` tooling.
Result<ArgPattern> CompileArgPattern(const Value& value);

// `...`, a bare word in a command pattern: any run of arguments (ArgPattern::any_run). A quoted
// "..." is the literal word.
inline constexpr std::string_view kAnyRun = "...";
[[nodiscard]] bool IsAnyRun(const Value& v);
// `workspace:GLOB` (bare or quoted, or as an alternative of a group, which is refused): a program
// inside the workspace (ArgPattern::workspace).
inline constexpr std::string_view kWorkspacePrefix = "workspace:";
[[nodiscard]] bool IsWorkspaceProgram(const Value& v);
// Compiles a `workspace:GLOB` element at `position` in its pattern; fails unless it is the first
// element, outside a group, with a relative glob without empty, "." or ".." components.
Result<ArgPattern> CompileWorkspaceProgram(const Value& v, std::size_t position);

// Parses a path as written in a profile ("/usr", "~/.cargo", "src", ".") into a PathRef; fails on
// "..", empty components, "~user", NUL bytes, wildcards.
Result<PathRef> ParsePathRef(std::string_view text);

// Closest candidate to `word` by edit distance (at most 2 edits, or 3 for long words), or "".
std::string DidYouMean(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace cagent::policy
