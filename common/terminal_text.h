// Untrusted text on the operator's terminal.
//
// Everything cagent prints that came from the workspace, the agent or the model (file names, the
// agent's summary, failure reasons that quote them, approval prompts, the runs table, `cagent log`,
// the progress line) goes through TerminalSafe() first. A terminal interprets bytes, not text: ESC
// starts a control sequence that can move the cursor and rewrite earlier lines (a forged "verify
// passed"), BEL/BS/CR overwrite, C1 controls (U+0080..U+009F) are CSI/OSC on some terminals, and
// bidirectional overrides or invisible code points make a line read differently from what it is
// ("a.py\u202e" shown as something else, a zero-width space inside a path). Each of those is
// replaced by a visible escape; invalid UTF-8 bytes become \xNN. The result is plain printable
// text.
//
// Pure functions, no allocation beyond the result; safe on any thread.
#pragma once

#include <string>
#include <string_view>

namespace cagent {

enum class TerminalLines : unsigned char {
  kOne,       // newline and tab are escaped too: the text stays on one line
  kMultiple,  // newline and tab are kept (a log excerpt, a multi-line reason)
};

// `text` with every control character, ESC, C1 control, bidirectional control, invisible or
// line-separating code point and invalid UTF-8 byte written as a visible escape: \n \t \r as
// themselves in backslash form, other bytes below 0x80 as \xNN, code points as \u{XXXX}. A
// backslash is kept as it is (the output is for reading, not for parsing back).
std::string TerminalSafe(std::string_view text, TerminalLines lines = TerminalLines::kOne);

// True when TerminalSafe(text, lines) would change nothing.
bool IsTerminalSafe(std::string_view text, TerminalLines lines = TerminalLines::kOne);

// True for a code point that TerminalSafe escapes (controls, bidi, invisible, separators).
bool IsUnsafeCodePoint(char32_t cp);

}  // namespace cagent
