// Diagnostics: policy mistakes are values, collected and rendered together (STYLE.md "Errors").
//
// Rendering, one per diagnostic:
//
//   profiles/x.cagent:3:9: error: unknown key 'wal-time' in limits
//     wal-time 10m
//     ^~~~~~~~
//   hint: did you mean 'wall-time'?
//
// The caret line underlines `length` bytes starting at the column (at least one caret).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/language/source.h"

namespace cagent::policy {

enum class Severity : std::uint8_t { kError, kWarning, kNote };

struct Diagnostic {
  Severity severity = Severity::kError;
  Location loc;
  std::uint32_t length = 1;  // bytes to underline from loc.col
  std::string message;       // no trailing period, no "error:" prefix
  std::string hint;          // optional, one line
};

// Collects diagnostics in the order they are reported; Sorted() orders them by file, line, col.
class Diagnostics {
 public:
  void Error(Location loc, std::uint32_t length, std::string message, std::string hint = {});
  void Warning(Location loc, std::uint32_t length, std::string message, std::string hint = {});
  void Add(Diagnostic d) { list_.push_back(std::move(d)); }

  [[nodiscard]] bool HasErrors() const;
  [[nodiscard]] std::size_t ErrorCount() const;
  [[nodiscard]] const std::vector<Diagnostic>& list() const { return list_; }
  // Stable sort by (file index, line, col); diagnostics without a file come first.
  [[nodiscard]] std::vector<Diagnostic> Sorted() const;

 private:
  std::vector<Diagnostic> list_;
};

// Renders one diagnostic as above (with a trailing newline). Tabs in the source line are kept and
// mirrored in the caret line's indentation so the caret lines up.
std::string Render(const SourceSet& sources, const Diagnostic& d);
// Renders all of them sorted, followed by nothing else (callers print the summary line).
std::string RenderAll(const SourceSet& sources, const Diagnostics& diags);

}  // namespace cagent::policy
