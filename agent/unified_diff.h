// Line diffs for edit_file and write_file results (cagent-agent, inside the sandbox). Pure: no I/O.
//
// Myers' O((N+M)D) algorithm ("An O(ND) Difference Algorithm and Its Variations", 1986) on lines,
// after trimming the common prefix and suffix. When the two texts differ in more than
// `max_edit_distance` lines the middle is reported as one replacement (all old lines removed, all
// new lines added): correct, just not minimal, and bounded in time and memory for hostile inputs.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cagent::agent {

enum class DiffOp : unsigned char { kEqual, kDelete, kInsert };

// One step of an edit script turning `old` lines into `new` lines.
struct DiffEdit {
  DiffOp op;
  std::size_t old_index;  // kEqual/kDelete: the old line; kInsert: old lines consumed so far
  std::size_t new_index;  // kEqual/kInsert: the new line; kDelete: new lines consumed so far
};

// Splits text into lines, each keeping its '\n' (the last one may lack it). "" -> no lines.
std::vector<std::string_view> SplitLinesKeepEnds(std::string_view text);

// Edit script from `a` to `b` (lines compared as bytes, terminators included).
std::vector<DiffEdit> DiffLines(const std::vector<std::string_view>& a,
                                const std::vector<std::string_view>& b,
                                std::size_t max_edit_distance = 2000);

// Unified diff ("--- old_label", "+++ new_label", "@@ -l,n +l,n @@" hunks with `context` lines
// of context; "\ No newline at end of file" where it applies). "" when the texts are equal.
std::string UnifiedDiff(std::string_view old_text, std::string_view new_text,
                        std::string_view old_label, std::string_view new_label, int context = 3,
                        std::size_t max_edit_distance = 2000);

}  // namespace cagent::agent
