// The scrolling transcript of `cagent run --verbose` and `cagent agent --verbose`: each entry of
// the run's event log (audit_log.h), with the content the log keeps only as digests attached
// (AuditEvent::transcript: a model turn's text and calls, a tool call's arguments, a tool's
// output), as lines for the operator's terminal. Runs in cagent (trusted).
//
// Every string shown comes from the hostile side (the model, the agent, the repository through a
// tool's output) or quotes it: each is passed through TerminalSafe() (common/terminal_text.h), one
// line at a time, so an escape sequence, a carriage return, an OSC 8 link, a bidirectional
// override or invalid UTF-8 is shown as a visible escape and cannot move the cursor, rewrite an
// earlier line or make the transcript say what did not happen. Long texts are cut: a line at
// kTranscriptLineBytes, a text at a few lines with "… N more lines".
#pragma once

#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace cagent::launcher::cli {

inline constexpr std::size_t kTranscriptLineBytes = 200;  // of one shown line, after escaping
inline constexpr std::size_t kTranscriptTextLines = 12;   // of a model turn's text or a summary
inline constexpr std::size_t kTranscriptOutputLines = 8;  // of a tool's output

// The lines (without newlines) that show one entry: `entry` is a parsed events.jsonl line, with
// an optional member "transcript" (the event's AuditEvent::transcript). Entries the transcript
// does not show (model_call, welcome, progress, ...) and damaged ones give no lines. Pure; every
// line is terminal-safe text (printable ASCII and printable UTF-8 only).
[[nodiscard]] std::vector<std::string> TranscriptLines(const nlohmann::json& entry);

// Prints TranscriptLines of every entry it is given to `out`, whole entries at a time (entries
// come from the broker's thread and the run's). Use Observer() as the run's
// AuditLog::SetObserver.
class TranscriptPrinter {
 public:
  explicit TranscriptPrinter(std::ostream& out) : out_(out) {}
  // Parses `line`, attaches `transcript` (unless null) and prints the entry's lines.
  void Print(std::string_view line, const nlohmann::json& transcript);

 private:
  std::ostream& out_;
  std::mutex mu_;
};

}  // namespace cagent::launcher::cli
