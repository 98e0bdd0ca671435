#include "policy/language/source.h"

#include <utility>

namespace cagent::policy {

std::string_view SourceFile::Line(std::uint32_t line) const {
  if (line == 0) return {};
  const std::string_view all(text);
  std::size_t start = 0;
  for (std::uint32_t current = 1; current < line; ++current) {
    const std::size_t newline = all.find('\n', start);
    if (newline == std::string_view::npos) return {};
    start = newline + 1;
  }
  std::size_t end = all.find('\n', start);
  if (end == std::string_view::npos) end = all.size();
  std::string_view out = all.substr(start, end - start);
  // "\r\n" is a newline too (lexer.h), so the '\r' is not part of the line's text.
  if (!out.empty() && out.back() == '\r') out.remove_suffix(1);
  return out;
}

std::uint32_t SourceSet::Add(std::string display_name, std::string text) {
  files_.push_back(SourceFile{std::move(display_name), std::move(text)});
  return static_cast<std::uint32_t>(files_.size() - 1);
}

std::string SourceSet::Format(const Location& loc) const {
  if (!loc.valid() || loc.file >= files_.size()) return "<none>";
  return files_[loc.file].display_name + ":" + std::to_string(loc.line) + ":" +
         std::to_string(loc.col);
}

}  // namespace cagent::policy
