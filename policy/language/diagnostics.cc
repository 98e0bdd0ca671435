#include "policy/language/diagnostics.h"

#include <algorithm>
#include <string_view>
#include <tuple>
#include <utility>

namespace cagent::policy {
namespace {

std::string_view SeverityWord(Severity s) {
  switch (s) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kNote:
      return "note";
  }
  return "error";
}

// A UTF-8 continuation byte takes no column of its own on a terminal, so the caret line skips
// it; everything else (ASCII, lead bytes, invalid bytes) counts as one column.
bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Control bytes other than tab are shown as '?': a hostile profile must not be able to send
// terminal escape sequences through an error message.
bool IsUnprintableControl(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && u != '\t') || u == 0x7F;
}

// Sort key: diagnostics without a file first, then by (file index, line, col).
auto SortKey(const Diagnostic& d) {
  return std::make_tuple(d.loc.valid() ? 1 : 0, d.loc.file, d.loc.line, d.loc.col);
}

}  // namespace

void Diagnostics::Error(Location loc, std::uint32_t length, std::string message, std::string hint) {
  list_.push_back(Diagnostic{Severity::kError, loc, length, std::move(message), std::move(hint)});
}

void Diagnostics::Warning(Location loc, std::uint32_t length, std::string message,
                          std::string hint) {
  list_.push_back(Diagnostic{Severity::kWarning, loc, length, std::move(message), std::move(hint)});
}

bool Diagnostics::HasErrors() const { return ErrorCount() > 0; }

std::size_t Diagnostics::ErrorCount() const {
  return static_cast<std::size_t>(
      std::count_if(list_.begin(), list_.end(),
                    [](const Diagnostic& d) { return d.severity == Severity::kError; }));
}

std::vector<Diagnostic> Diagnostics::Sorted() const {
  std::vector<Diagnostic> out = list_;
  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return SortKey(a) < SortKey(b);
  });
  return out;
}

std::string Render(const SourceSet& sources, const Diagnostic& d) {
  std::string out;
  // A location naming a file the set does not hold is rendered like one without a file rather
  // than trusted.
  const bool has_file = d.loc.valid() && d.loc.file < sources.size();
  if (has_file) {
    out += sources.Format(d.loc);
    out += ": ";
  }
  out += SeverityWord(d.severity);
  out += ": ";
  out += d.message;
  out += '\n';

  if (has_file && d.loc.line > 0) {
    const std::string_view line = sources.file(d.loc.file).Line(d.loc.line);
    out += "  ";
    for (const char c : line) out += IsUnprintableControl(c) ? '?' : c;
    out += '\n';

    // The caret goes under byte col-1; a column past the end of the line (an error "at the end
    // of the line", e.g. a missing token) puts one caret right after the last byte.
    const std::size_t col = d.loc.col == 0 ? 1 : d.loc.col;
    const std::size_t start = std::min<std::size_t>(col - 1, line.size());
    const std::size_t length = d.length == 0 ? 1 : d.length;
    // Clamp the underline to the line: a span that continues on later lines is shown up to the
    // end of its first line.
    const std::size_t end =
        std::min<std::size_t>(start + std::min<std::size_t>(length, line.size()), line.size());
    out += "  ";
    for (std::size_t i = 0; i < start; ++i) {
      if (line[i] == '\t') {
        out += '\t';
      } else if (!IsContinuationByte(line[i])) {
        out += ' ';
      }
    }
    std::size_t width = 0;
    for (std::size_t i = start; i < end; ++i) {
      if (!IsContinuationByte(line[i])) ++width;
    }
    out += '^';
    if (width > 1) out.append(width - 1, '~');
    out += '\n';
  }

  if (!d.hint.empty()) {
    out += "  hint: ";
    out += d.hint;
    out += '\n';
  }
  return out;
}

std::string RenderAll(const SourceSet& sources, const Diagnostics& diags) {
  std::string out;
  for (const Diagnostic& d : diags.Sorted()) out += Render(sources, d);
  return out;
}

}  // namespace cagent::policy
