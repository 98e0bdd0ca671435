// Source text and positions for the policy language.
//
// Every diagnostic and every compiled rule points back into a profile file by (file, line, col).
// Files are held by a SourceSet and referred to by index so locations stay small and copyable.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cagent::policy {

// A position in a profile. `line` and `col` are 1-based; `col` counts bytes. file == kNoFile means
// "not from a file" (built-in defaults, command-line overrides).
struct Location {
  static constexpr std::uint32_t kNoFile = UINT32_MAX;
  std::uint32_t file = kNoFile;
  std::uint32_t line = 0;
  std::uint32_t col = 0;

  [[nodiscard]] bool valid() const { return file != kNoFile; }
  friend bool operator==(const Location&, const Location&) = default;
};

// One loaded profile file: the name it is shown under in diagnostics ("profiles/backend.cagent",
// "<builtin>/base.cagent") and its full text.
struct SourceFile {
  std::string display_name;
  std::string text;

  // The text of line `line` (1-based) without its newline; empty if out of range.
  [[nodiscard]] std::string_view Line(std::uint32_t line) const;
};

// All files read while loading one profile and its parents/includes. Indices are stable.
class SourceSet {
 public:
  std::uint32_t Add(std::string display_name, std::string text);
  [[nodiscard]] const SourceFile& file(std::uint32_t index) const { return files_.at(index); }
  [[nodiscard]] std::size_t size() const { return files_.size(); }
  // "file:line:col", or "<none>" for an invalid location.
  [[nodiscard]] std::string Format(const Location& loc) const;

 private:
  std::vector<SourceFile> files_;
};

}  // namespace cagent::policy
