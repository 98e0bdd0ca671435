#include "agent/unified_diff.h"

#include <algorithm>
#include <cstdint>

namespace cagent::agent {
namespace {

// Myers' forward search with a snapshot of V per step for the backtrack. `a`/`b` are the middle
// parts after prefix/suffix trimming; indices in the result are relative to them. Returns false
// when the edit distance exceeds `max_d`.
bool Myers(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b,
           std::size_t max_d, std::vector<DiffEdit>* out) {
  const auto n = static_cast<std::int64_t>(a.size());
  const auto m = static_cast<std::int64_t>(b.size());
  const std::int64_t max = n + m;
  const std::int64_t limit = std::min<std::int64_t>(max, static_cast<std::int64_t>(max_d));
  const std::int64_t offset = limit + 1;
  std::vector<std::int64_t> v(static_cast<std::size_t>(2 * limit + 3), 0);
  // trace[d] holds V[-d-1 .. d+1] as it was before step d.
  std::vector<std::vector<std::int64_t>> trace;
  auto at = [&](std::int64_t k) -> std::int64_t& {
    return v[static_cast<std::size_t>(k + offset)];
  };
  std::int64_t found_d = -1;
  for (std::int64_t d = 0; d <= limit && found_d < 0; ++d) {
    trace.emplace_back(v.begin() + (offset - d - 1), v.begin() + (offset + d + 2));
    for (std::int64_t k = -d; k <= d; k += 2) {
      std::int64_t x = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? at(k + 1) : at(k - 1) + 1;
      std::int64_t y = x - k;
      while (x < n && y < m && a[static_cast<std::size_t>(x)] == b[static_cast<std::size_t>(y)]) {
        ++x;
        ++y;
      }
      at(k) = x;
      if (x >= n && y >= m) {
        found_d = d;
        break;
      }
    }
  }
  if (found_d < 0) return false;
  std::vector<DiffEdit> rev;
  std::int64_t x = n;
  std::int64_t y = m;
  for (std::int64_t d = found_d; d >= 0; --d) {
    const auto& snap = trace[static_cast<std::size_t>(d)];
    auto sv = [&](std::int64_t k) { return snap[static_cast<std::size_t>(k + d + 1)]; };
    const std::int64_t k = x - y;
    const std::int64_t prev_k = (k == -d || (k != d && sv(k - 1) < sv(k + 1))) ? k + 1 : k - 1;
    const std::int64_t prev_x = d == 0 ? 0 : sv(prev_k);
    const std::int64_t prev_y = d == 0 ? 0 : prev_x - prev_k;
    while (x > prev_x && y > prev_y) {
      --x;
      --y;
      rev.push_back({DiffOp::kEqual, static_cast<std::size_t>(x), static_cast<std::size_t>(y)});
    }
    if (d > 0) {
      if (x == prev_x) {
        rev.push_back(
            {DiffOp::kInsert, static_cast<std::size_t>(prev_x), static_cast<std::size_t>(prev_y)});
      } else {
        rev.push_back(
            {DiffOp::kDelete, static_cast<std::size_t>(prev_x), static_cast<std::size_t>(prev_y)});
      }
    }
    x = prev_x;
    y = prev_y;
  }
  out->insert(out->end(), rev.rbegin(), rev.rend());
  return true;
}

void AppendLine(std::string* out, char mark, std::string_view line) {
  out->push_back(mark);
  if (!line.empty() && line.back() == '\n') {
    out->append(line);
  } else {
    out->append(line);
    out->append("\n\\ No newline at end of file\n");
  }
}

std::string Range(std::size_t start, std::size_t count) {
  // GNU diff: a zero-length range names the line before it.
  std::string s = std::to_string(count == 0 ? start : start + 1);
  if (count != 1) s += "," + std::to_string(count);
  return s;
}

}  // namespace

std::vector<std::string_view> SplitLinesKeepEnds(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    std::size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    lines.push_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

std::vector<DiffEdit> DiffLines(const std::vector<std::string_view>& a,
                                const std::vector<std::string_view>& b,
                                std::size_t max_edit_distance) {
  std::vector<DiffEdit> out;
  std::size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) {
    out.push_back({DiffOp::kEqual, prefix, prefix});
    ++prefix;
  }
  std::size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) {
    ++suffix;
  }
  std::vector<std::string_view> mid_a(a.begin() + static_cast<std::ptrdiff_t>(prefix),
                                      a.end() - static_cast<std::ptrdiff_t>(suffix));
  std::vector<std::string_view> mid_b(b.begin() + static_cast<std::ptrdiff_t>(prefix),
                                      b.end() - static_cast<std::ptrdiff_t>(suffix));
  std::vector<DiffEdit> mid;
  if (!Myers(mid_a, mid_b, max_edit_distance, &mid)) {
    mid.clear();
    for (std::size_t i = 0; i < mid_a.size(); ++i) mid.push_back({DiffOp::kDelete, i, 0});
    for (std::size_t j = 0; j < mid_b.size(); ++j) {
      mid.push_back({DiffOp::kInsert, mid_a.size(), j});
    }
  }
  for (const auto& e : mid) out.push_back({e.op, e.old_index + prefix, e.new_index + prefix});
  for (std::size_t i = 0; i < suffix; ++i) {
    out.push_back({DiffOp::kEqual, a.size() - suffix + i, b.size() - suffix + i});
  }
  return out;
}

std::string UnifiedDiff(std::string_view old_text, std::string_view new_text,
                        std::string_view old_label, std::string_view new_label, int context,
                        std::size_t max_edit_distance) {
  if (old_text == new_text) return {};
  const auto a = SplitLinesKeepEnds(old_text);
  const auto b = SplitLinesKeepEnds(new_text);
  const auto edits = DiffLines(a, b, max_edit_distance);
  const std::size_t ctx = context < 0 ? 0 : static_cast<std::size_t>(context);

  std::string out;
  out += "--- ";
  out += old_label;
  out += "\n+++ ";
  out += new_label;
  out += "\n";

  std::size_t i = 0;
  while (i < edits.size()) {
    // Find the next change.
    while (i < edits.size() && edits[i].op == DiffOp::kEqual) ++i;
    if (i == edits.size()) break;
    std::size_t begin = i >= ctx ? i - ctx : 0;
    // Extend while the gap of equal lines to the next change is at most 2 * ctx.
    std::size_t last_change = i;
    std::size_t j = i;
    while (j < edits.size()) {
      if (edits[j].op != DiffOp::kEqual) {
        last_change = j;
        ++j;
        continue;
      }
      std::size_t k = j;
      while (k < edits.size() && edits[k].op == DiffOp::kEqual) ++k;
      if (k == edits.size() || k - j > 2 * ctx) break;
      j = k;
    }
    std::size_t end = std::min(edits.size(), last_change + 1 + ctx);
    std::size_t old_start = edits[begin].old_index;
    std::size_t new_start = edits[begin].new_index;
    std::size_t old_count = 0;
    std::size_t new_count = 0;
    for (std::size_t e = begin; e < end; ++e) {
      if (edits[e].op != DiffOp::kInsert) ++old_count;
      if (edits[e].op != DiffOp::kDelete) ++new_count;
    }
    out += "@@ -" + Range(old_start, old_count) + " +" + Range(new_start, new_count) + " @@\n";
    for (std::size_t e = begin; e < end; ++e) {
      switch (edits[e].op) {
        case DiffOp::kEqual:
          AppendLine(&out, ' ', a[edits[e].old_index]);
          break;
        case DiffOp::kDelete:
          AppendLine(&out, '-', a[edits[e].old_index]);
          break;
        case DiffOp::kInsert:
          AppendLine(&out, '+', b[edits[e].new_index]);
          break;
      }
    }
    i = end;
  }
  return out;
}

}  // namespace cagent::agent
