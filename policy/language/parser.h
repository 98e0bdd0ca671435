// Recursive-descent parser: tokens to the generic AST (ast.h).
//
// Reports every syntax error it finds (it resynchronises at the next statement end or '}'), never
// throws, and never recurses deeper than kMaxDepth blocks (deeper nesting is an error, so hostile
// input cannot exhaust the stack).
#pragma once

#include "policy/language/ast.h"
#include "policy/language/diagnostics.h"
#include "policy/language/source.h"

namespace cagent::policy {

inline constexpr int kMaxBlockDepth = 8;

// Parses sources.file(file_index). Returns the statements that parsed; diagnostics for the rest.
File Parse(const SourceSet& sources, std::uint32_t file_index, Diagnostics& diags);

}  // namespace cagent::policy
