// Context management: keeps the conversation within the model's context window
// (cagent-agent, inside the sandbox; no I/O).
//
// Token counts are ESTIMATES (EstimateTokens in conversation.h: ~bytes/4 plus per-message
// overhead), so compaction starts well before the window is full: when the estimate exceeds
// `threshold` (75%) of (context_window - max_output_tokens). Two stages, each only as far as
// needed to get back under that budget:
//   1. Stubs: large tool outputs of OLD turns (not the last `keep_recent_turns`), oldest first,
//      are replaced by "[output of read_file src/x.py (4,120 bytes) dropped to save context; call
//      the tool again if needed]".
//   2. Summary: the old turns are folded into one user message, a mechanical record of which tools
//      were called on what and with which outcome (no model call). A turn is cut only before an
//      assistant message, so a tool call is never separated from its result; the system prompt
//      and the task (pinned) always stay. If still too large, fewer recent turns are kept (at
//      least one).
// Whenever a file's contents leave the context (a read_file output stubbed or summarised away, or
// a write/edit folded into the summary) and no intact read_file output of that file remains, the
// file is invalidated in the read-before-edit ledger, so the model must read it again before
// editing it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/conversation.h"
#include "agent/ledger.h"

namespace cagent::agent {

struct ContextLimits {
  std::uint64_t context_window = 0;     // tokens; 0 = unknown: never compact
  std::uint64_t max_output_tokens = 0;  // reserved for the answer
  double threshold = 0.75;
  std::size_t keep_recent_turns = 3;  // the last N assistant turns (and results) stay intact
  std::size_t stub_min_bytes = 1024;  // smaller outputs are not worth a stub

  // threshold * (context_window - max_output_tokens), in estimated tokens; 0 = no budget.
  [[nodiscard]] std::uint64_t Budget() const;
};

struct CompactionReport {
  std::uint64_t tokens_before = 0;
  std::uint64_t tokens_after = 0;
  std::size_t stubbed = 0;               // tool outputs replaced by stubs
  std::size_t summarised = 0;            // messages folded into the summary
  std::vector<std::string> invalidated;  // ledger paths invalidated, sorted
  bool still_over = false;  // nothing more could be dropped and the estimate is still over budget

  [[nodiscard]] bool compacted() const { return stubbed > 0 || summarised > 0; }
};

// Compacts `conversation` in place when its estimate is over `limits.Budget()`; does nothing
// otherwise. `ledger` may be null (then nothing is invalidated).
CompactionReport Compact(Conversation& conversation, const ContextLimits& limits, Ledger* ledger);

// The stub that replaces a dropped tool output (exposed for tests):
// "[output of TOOL SUBJECT (N bytes) dropped to save context; call the tool again if needed]".
std::string DroppedOutputStub(const std::string& tool, const std::string& subject,
                              std::uint64_t bytes);

}  // namespace cagent::agent
