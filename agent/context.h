// Context management: keeps the conversation within the model's context window
// (cagent-agent, inside the sandbox; no I/O).
//
// When. Token counts are ESTIMATES (EstimateTokens in conversation.h: ~bytes/4 plus per-message
// overhead). Compaction triggers only when the estimate exceeds Budget(): `threshold` (75%) of
// (context_window - max_output_tokens). It then compacts down to Target(), a lower mark (`target`,
// half the budget by default), so that many turns pass before the next one: in a long session
// compaction is a rare event, not a per-turn trim. The loop reports each one (progress
// "compacting", with the estimate before and after).
//
// Why rarely, and why nothing changes in between: providers cache a stable PREFIX of the
// conversation (the system prompt, then the messages in order) and charge less and answer sooner
// for it. Compaction rewrites early messages and so breaks that prefix; everything else only
// appends. So between two compactions every model_call's messages are the previous call's plus
// new ones, byte for byte: no earlier message is ever rewritten, the pinned state below included
// (it is NOT re-rendered into an early message each turn; it is written once, into the summary,
// when a compaction happens).
//
// How. Two stages, each only as far as needed to get under Target():
//   1. Stubs: large tool outputs of OLD turns (not the last `keep_recent_turns`), oldest first,
//      are replaced by "[output of read_file src/x.py (4,120 bytes) dropped to save context; call
//      the tool again if needed]".
//   2. Summary: the old turns are folded into one user message right after the task (no model
//      call): the pinned state, then a mechanical record of which tools were called on what and
//      with which outcome (an earlier summary's record is carried forward). A turn is cut only
//      before an assistant message, so a tool call is never separated from its result. If still
//      too large, fewer recent turns are kept (at least one). When even the pinned parts and the
//      last turn stay over the budget (a huge last output), nothing more can go: the report says
//      still_over, and the next turn compacts again.
//
// What stays pinned across every compaction:
//   - the system prompt and the task (the first user message): never touched, so they stay the
//     cached prefix;
//   - the model's plan: the last "Plan:" block it wrote (ExtractPlan, conversation.h). Until its
//     turn is folded it is in the model's own message; the summary repeats the latest plan;
//   - the files changed by the agent's file tools (write_file, edit_file); the summary lists them
//     all and says that commands (run_command) may have changed others, which the agent cannot
//     see.
//
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
  double threshold = 0.75;              // compaction triggers above this share of the window
  double target = 0.5;                  // and compacts down to this share of Budget()
  std::size_t keep_recent_turns = 3;    // the last N assistant turns (and results) stay intact
  std::size_t stub_min_bytes = 1024;    // smaller outputs are not worth a stub

  // threshold * (context_window - max_output_tokens), in estimated tokens; 0 = no budget.
  [[nodiscard]] std::uint64_t Budget() const;
  // target * Budget() (target clamped to (0, 1]): what a compaction aims for.
  [[nodiscard]] std::uint64_t Target() const;
};

struct CompactionReport {
  std::uint64_t tokens_before = 0;
  std::uint64_t tokens_after = 0;
  std::uint64_t target = 0;              // Target() when it compacted
  std::size_t stubbed = 0;               // tool outputs replaced by stubs
  std::size_t summarised = 0;            // messages folded into the summary
  std::vector<std::string> invalidated;  // ledger paths invalidated, sorted
  bool still_over = false;  // nothing more could be dropped and the estimate is still over budget

  [[nodiscard]] bool compacted() const { return stubbed > 0 || summarised > 0; }
};

// Compacts `conversation` in place down to `limits.Target()` when its estimate is over
// `limits.Budget()`; does nothing (and changes no message) otherwise. `ledger` may be null (then
// nothing is invalidated).
CompactionReport Compact(Conversation& conversation, const ContextLimits& limits, Ledger* ledger);

// The stub that replaces a dropped tool output (exposed for tests):
// "[output of TOOL SUBJECT (N bytes) dropped to save context; call the tool again if needed]".
std::string DroppedOutputStub(const std::string& tool, const std::string& subject,
                              std::uint64_t bytes);

}  // namespace cagent::agent
