#include "agent/context.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <utility>

#include "common/json_text.h"

namespace cagent::agent {
namespace {

constexpr std::size_t kExcerptBytes = 160;
constexpr std::size_t kMaxSummaryLines = 200;
constexpr std::size_t kMaxChangedFiles = 300;
constexpr const char* kSummaryHeader =
    "[Earlier turns were compacted to save context; this message stands for them.]";
constexpr const char* kHistoryHeader = "What happened in the compacted turns, oldest first:";
constexpr const char* kSummaryFooter =
    "Files read or written in those turns are no longer in context: read them again before "
    "editing them.";

// 4120 -> "4,120".
std::string Grouped(std::uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string OneLine(std::string_view text, std::size_t max_bytes) {
  std::string out;
  for (char c : text) {
    if (out.size() >= max_bytes) {
      out += "...";
      break;
    }
    out.push_back(c == '\n' || c == '\r' || c == '\t' ? ' ' : c);
  }
  return out;
}

// Whether a tool result carries (part of) a file's contents the model relies on for editing.
bool CarriesFileContents(const Message& m, bool summarised) {
  if (m.result.is_error) return false;
  if (m.info.tool == "read_file") return true;
  // Written content lives in the call's arguments; once the turn is summarised it is gone.
  return summarised && (m.info.tool == "write_file" || m.info.tool == "edit_file");
}

std::vector<std::string> LedgerPaths(const Message& m) {
  if (!m.info.paths.empty()) return m.info.paths;
  if (!m.info.subject.empty()) return {m.info.subject};
  return {};
}

// Index of the first message that may be compacted (after the pinned ones at the front).
std::size_t FirstUnpinned(const std::vector<Message>& messages) {
  std::size_t i = 0;
  while (i < messages.size() && messages[i].pinned) ++i;
  return i;
}

// Index where the last `keep` assistant turns begin (messages.size() when keep is 0; the first
// unpinned index when there are not more turns than that).
std::size_t RecentStart(const std::vector<Message>& messages, std::size_t first, std::size_t keep) {
  if (keep == 0) return messages.size();
  std::size_t seen = 0;
  for (std::size_t i = messages.size(); i > first; --i) {
    if (messages[i - 1].role == Role::kAssistant && ++seen == keep) return i - 1;
  }
  return first;
}

// The summary's text: the pinned state (the latest plan, the files changed), then `entries`.
std::string SummaryText(const Conversation& conversation, const std::vector<std::string>& entries) {
  std::string text = kSummaryHeader;
  text += "\n\n";
  if (conversation.plan().empty()) {
    text +=
        "Your plan: none stated yet. Write one as a \"Plan:\" block of steps with their status "
        "(see the system prompt).\n";
  } else {
    text += "Your plan, as you last stated it (turn " + std::to_string(conversation.plan_turn()) +
            "; write a new \"Plan:\" block when it changes):\n" + conversation.plan() + "\n";
  }
  text += "\n";
  const std::set<std::string>& files = conversation.changed_files();
  if (files.empty()) {
    text += "Files changed by your file tools (write_file, edit_file): none so far.";
  } else {
    text += "Files changed by your file tools (write_file, edit_file) so far:";
    std::size_t listed = 0;
    for (const std::string& path : files) {
      if (listed++ == kMaxChangedFiles) {
        text += "\n- (" + std::to_string(files.size() - kMaxChangedFiles) + " more)";
        break;
      }
      text += "\n- " + OneLine(path, kExcerptBytes);
    }
  }
  text +=
      "\nCommands you ran (run_command) may have changed other files; this list cannot show "
      "them.\n\n";
  text += kHistoryHeader;
  for (const std::string& line : entries) text += "\n" + line;
  text += "\n";
  text += kSummaryFooter;
  return text;
}

class Compactor {
 public:
  Compactor(Conversation& conversation, const ContextLimits& limits)
      : conversation_(conversation),
        limits_(limits),
        budget_(limits.Budget()),
        target_(limits.Target()) {}

  CompactionReport Run(Ledger* ledger) {
    report_.tokens_before = conversation_.EstimateTokens();
    report_.tokens_after = report_.tokens_before;
    // Under the trigger nothing is touched: the conversation stays a byte-stable prefix.
    if (budget_ == 0 || report_.tokens_before <= budget_) return report_;
    report_.target = target_;

    for (std::size_t keep = std::max<std::size_t>(limits_.keep_recent_turns, 1);; --keep) {
      if (Stub(keep) || Summarise(keep) || keep == 1) break;
    }
    report_.tokens_after = conversation_.EstimateTokens();
    report_.still_over = report_.tokens_after > budget_;
    Invalidate(ledger);
    return report_;
  }

 private:
  [[nodiscard]] bool UnderTarget() const { return conversation_.EstimateTokens() <= target_; }

  // Stage 1. Returns true once under the target.
  bool Stub(std::size_t keep) {
    auto& messages = conversation_.mutable_messages();
    const std::size_t first = FirstUnpinned(messages);
    const std::size_t end = RecentStart(messages, first, keep);
    for (std::size_t i = first; i < end; ++i) {
      Message& m = messages[i];
      if (m.role != Role::kTool || m.info.stubbed ||
          m.result.content.size() < limits_.stub_min_bytes) {
        continue;
      }
      if (CarriesFileContents(m, false)) Drop(m);
      m.result.content = DroppedOutputStub(m.info.tool, m.info.subject, m.result.content.size());
      m.info.stubbed = true;
      ++report_.stubbed;
      if (UnderTarget()) return true;
    }
    return UnderTarget();
  }

  // Stage 2. Returns true once under the target.
  bool Summarise(std::size_t keep) {
    auto& messages = conversation_.mutable_messages();
    const std::size_t first = FirstUnpinned(messages);
    const std::size_t end = RecentStart(messages, first, keep);
    // Nothing to fold, or only an earlier summary.
    if (end <= first || (end == first + 1 && messages[first].summary)) return UnderTarget();

    std::deque<std::string> lines;
    std::size_t folded = 0;
    std::map<std::string, const ToolCall*> calls;  // call id -> call, for results without info
    for (std::size_t i = first; i < end; ++i) {
      const Message& m = messages[i];
      switch (m.role) {
        case Role::kSystem:
          break;
        case Role::kUser:
          if (m.summary) {
            lines.insert(lines.end(), m.summary_entries.begin(), m.summary_entries.end());
          } else if (!m.text.empty()) {
            lines.push_back("- user: " + OneLine(m.text, kExcerptBytes));
          }
          break;
        case Role::kAssistant:
          if (!m.text.empty()) lines.push_back("- you said: " + OneLine(m.text, kExcerptBytes));
          for (const ToolCall& call : m.tool_calls) calls[call.id] = &call;
          break;
        case Role::kTool:
          lines.push_back(ResultLine(m, calls));
          if (CarriesFileContents(m, true)) Drop(m);
          break;
      }
      if (!m.summary) ++folded;
    }
    if (lines.size() > kMaxSummaryLines) {
      const std::size_t omitted = lines.size() - kMaxSummaryLines + 1;
      lines.erase(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(omitted));
      lines.push_front("- (" + std::to_string(omitted) + " earlier entries omitted)");
    }
    Message summary;
    summary.role = Role::kUser;
    summary.summary_entries.assign(lines.begin(), lines.end());
    summary.text = SummaryText(conversation_, summary.summary_entries);
    summary.summary = true;
    messages.erase(messages.begin() + static_cast<std::ptrdiff_t>(first),
                   messages.begin() + static_cast<std::ptrdiff_t>(end));
    messages.insert(messages.begin() + static_cast<std::ptrdiff_t>(first), std::move(summary));
    report_.summarised += folded;
    return UnderTarget();
  }

  static std::string ResultLine(const Message& m,
                                const std::map<std::string, const ToolCall*>& calls) {
    std::string tool = m.info.tool;
    std::string subject = m.info.subject;
    if (auto it = calls.find(m.result.call_id); it != calls.end()) {
      if (tool.empty()) tool = it->second->name;
      if (subject.empty()) {
        subject = JsonText(it->second->arguments);
      }
    }
    std::string line = "- " + (tool.empty() ? std::string("tool") : tool);
    if (!subject.empty()) line += " " + OneLine(subject, kExcerptBytes);
    if (!m.result.is_error) {
      line += " -> ok";
    } else {
      line += " -> error";
      if (!m.info.error_code.empty()) line += " [" + m.info.error_code + "]";
      // The first line of an error says what went wrong; keep it.
      if (!m.info.stubbed) {
        line +=
            ": " + OneLine(m.result.content.substr(0, m.result.content.find('\n')), kExcerptBytes);
      }
    }
    return line;
  }

  void Drop(const Message& m) {
    for (std::string& path : LedgerPaths(m)) dropped_.insert(std::move(path));
  }

  // Invalidates dropped files unless an intact read_file output of the file is still in context.
  void Invalidate(Ledger* ledger) {
    std::set<std::string> intact;
    for (const Message& m : conversation_.messages()) {
      if (m.role == Role::kTool && !m.info.stubbed && !m.result.is_error &&
          m.info.tool == "read_file") {
        for (std::string& path : LedgerPaths(m)) intact.insert(std::move(path));
      }
    }
    for (const std::string& path : dropped_) {
      if (intact.count(path) != 0) continue;
      if (ledger != nullptr) ledger->Invalidate(path);
      report_.invalidated.push_back(path);
    }
  }

  Conversation& conversation_;
  const ContextLimits& limits_;
  std::uint64_t budget_;
  std::uint64_t target_;
  CompactionReport report_;
  std::set<std::string> dropped_;
};

}  // namespace

std::uint64_t ContextLimits::Budget() const {
  if (context_window == 0) return 0;
  const std::uint64_t usable =
      context_window > max_output_tokens ? context_window - max_output_tokens : 0;
  return static_cast<std::uint64_t>(static_cast<double>(usable) * threshold);
}

std::uint64_t ContextLimits::Target() const {
  const double share = target > 0 && target <= 1 ? target : 1.0;
  return static_cast<std::uint64_t>(static_cast<double>(Budget()) * share);
}

std::string DroppedOutputStub(const std::string& tool, const std::string& subject,
                              std::uint64_t bytes) {
  std::string out = "[output of " + tool;
  if (!subject.empty()) out += " " + OneLine(subject, kExcerptBytes);
  out += " (" + Grouped(bytes) + " bytes) dropped to save context; call the tool again if needed]";
  return out;
}

CompactionReport Compact(Conversation& conversation, const ContextLimits& limits, Ledger* ledger) {
  return Compactor(conversation, limits).Run(ledger);
}

}  // namespace cagent::agent
