#include "launcher/cli/transcript.h"

#include <cstdint>

#include "common/json_text.h"
#include "common/terminal_text.h"
#include "launcher/broker/audit_schema.h"

namespace cagent::launcher::cli {
namespace {

using nlohmann::json;

// `safe` (TerminalSafe output: ASCII apart from printable UTF-8) cut to `max` bytes before a UTF-8
// lead byte, with "…" when anything was left out.
std::string Cut(std::string safe, std::size_t max = kTranscriptLineBytes) {
  if (safe.size() <= max) return safe;
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(safe[cut]) & 0xC0) == 0x80) --cut;
  safe.resize(cut);
  return safe + "\u2026";
}

// Untrusted text on one line: every control (newline and tab included), ESC, C1, bidi and
// invisible code point and invalid byte escaped, then cut.
std::string One(std::string_view text, std::size_t max = kTranscriptLineBytes) {
  return Cut(TerminalSafe(text, TerminalLines::kOne), max);
}

std::string Str(const json& j, std::string_view key) {
  if (!j.is_object()) return {};
  const auto it = j.find(key);
  if (it == j.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_null()) return {};
  return JsonText(*it);
}

bool Flag(const json& j, std::string_view key) {
  if (!j.is_object()) return false;
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

const json& Member(const json& j, std::string_view key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  const auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

// A multi-line text (the model's, a tool's output), `indent`ed, a line at a time: tabs shown as
// spaces, every other control escaped on its line (a "\r" overwrite stays visible as \r), at most
// `max_lines` lines, then "… N more lines".
void Block(std::vector<std::string>& out, std::string_view text, std::size_t max_lines,
           const std::string& indent) {
  std::vector<std::string_view> lines;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) {
      if (at < text.size()) lines.push_back(text.substr(at));
      break;
    }
    lines.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  const std::size_t shown = std::min(lines.size(), max_lines);
  for (std::size_t i = 0; i < shown; ++i) {
    std::string line(lines[i]);
    for (char& c : line) {
      if (c == '\t') c = ' ';
    }
    out.push_back(indent + One(line));
  }
  if (lines.size() > shown) {
    const std::size_t more = lines.size() - shown;
    out.push_back(indent + "\u2026 " + std::to_string(more) +
                  (more == 1 ? " more line" : " more lines"));
  }
}

// A tool call's arguments, abbreviated for one line: the command of run_command, the path of the
// file tools (with what an edit or a write does), the pattern of a search; any other tool's
// arguments as compact JSON.
std::string Arguments(const std::string& tool, const json& args) {
  if (!args.is_object()) return args.is_null() ? "" : One(JsonText(args));
  const auto bytes = [&](const char* key) {
    const json& v = Member(args, key);
    return v.is_string() ? std::to_string(v.get_ref<const std::string&>().size()) + " bytes"
                         : std::string("?");
  };
  if (tool == "run_command") return One(Str(args, "command"));
  if (tool == "read_file" || tool == "list_dir") {
    std::string s = One(Str(args, "path"));
    for (const char* key : {"offset", "limit", "start_line", "end_line"}) {
      if (args.contains(key)) s += " " + std::string(key) + "=" + One(Str(args, key), 20);
    }
    return s;
  }
  if (tool == "write_file") return One(Str(args, "path")) + " (" + bytes("content") + ")";
  if (tool == "edit_file") {
    return One(Str(args, "path")) + " (replace " + bytes("old_string") + " with " +
           bytes("new_string") + ")";
  }
  if (tool == "glob" || tool == "grep") {
    std::string s = One(Str(args, "pattern"), 120);
    if (args.contains("path")) s += " in " + One(Str(args, "path"), 120);
    return s;
  }
  if (tool == "finish") return One(Str(args, "summary"));
  return One(JsonText(args));
}

void State(std::vector<std::string>& out, const json& d) {
  using N = broker::audit::names::State;
  std::string s = "--- " + One(Str(d, N::state), 40);
  if (d.contains(N::profile)) {
    s += " (profile " + One(Str(d, N::profile), 80) + ", model " + One(Str(d, N::model), 80) + ")";
  }
  if (!Str(d, N::reason).empty()) s += ": " + One(Str(d, N::reason));
  out.push_back(std::move(s));
}

void ModelResult(std::vector<std::string>& out, const json& d, const json& t) {
  using N = broker::audit::names::ModelResult;
  const json& usage = Member(d, N::usage);
  std::string head = "model, turn " + One(Str(d, N::turn), 20) + " (" +
                     One(Str(d, N::stop_reason), 20) + ", " + One(Str(usage, "input_tokens"), 20) +
                     " tokens in";
  if (!Str(usage, "cache_read_tokens").empty()) {
    head += " (" + One(Str(usage, "cache_read_tokens"), 20) + " from cache)";
  }
  head += ", " + One(Str(usage, "output_tokens"), 20) + " out";
  if (!Str(d, N::cost).empty()) head += ", " + One(Str(d, N::cost), 40);
  head += ")";
  const json& text = Member(t, "text");
  if (text.is_string()) {
    if (text.get_ref<const std::string&>().empty()) {
      out.push_back(head + ": no text");
    } else {
      out.push_back(head + ":");
      Block(out, text.get_ref<const std::string&>(), kTranscriptTextLines, "  ");
    }
  } else {
    // No transcript (a log read afterwards): the size only; the text is in the provider's body.
    out.push_back(head + ": " + One(Str(d, N::text_bytes), 20) + " bytes of text");
  }
}

void Decision(std::vector<std::string>& out, const json& e, const json& d, const json& t) {
  using N = broker::audit::names::Decision;
  const std::string tool = Str(e, "tool");
  std::string call = "tool " + One(tool, 64);
  if (!Str(d, N::call_id).empty()) call += " [" + One(Str(d, N::call_id), 64) + "]";
  const json& args = Member(t, "arguments");
  if (!args.is_null()) call += ": " + Arguments(tool, args);
  out.push_back(std::move(call));
  std::string verdict = "  " + One(Str(e, "verdict"), 10);
  if (!Str(e, "rule").empty()) verdict += " by " + One(Str(e, "rule"), 120);
  if (!Str(d, N::location).empty()) verdict += " (" + One(Str(d, N::location), 120) + ")";
  // An allow says its rule; a refusal or an ask also why.
  if (Str(e, "verdict") != "allow" && !Str(d, N::reason).empty()) {
    verdict += ": " + One(Str(d, N::reason));
  }
  if (!Str(d, N::note).empty()) verdict += " [" + One(Str(d, N::note), 120) + "]";
  out.push_back(Cut(std::move(verdict), kTranscriptLineBytes + 40));
}

void ToolResult(std::vector<std::string>& out, const json& d, const json& t) {
  using N = broker::audit::names::ToolResult;
  if (Flag(d, N::unmatched)) {
    out.push_back("  result for request " + One(Str(d, N::request), 20) +
                  ", which awaits none (refused)");
    return;
  }
  std::string s = "  result: ";
  s += Flag(d, N::ok) ? "ok" : "failed (" + One(Str(d, N::error_code), 64) + ")";
  s += ", " + One(Str(d, N::bytes), 20) + " bytes";
  if (Flag(d, N::redacted)) s += ", secrets redacted";
  const json& changed = Member(d, N::changed_paths);
  if (changed.is_array() && !changed.empty()) {
    std::string names;
    for (const json& p : changed) {
      names += (names.empty() ? "" : ", ") + (p.is_string() ? p.get<std::string>() : JsonText(p));
    }
    s += ", wrote " + One(names, 120);
  } else if (changed.is_string()) {
    s += ", wrote " + One(changed.get<std::string>(), 40) + " files";
  }
  out.push_back(std::move(s));
  const json& output = Member(t, "output");
  if (output.is_string()) {
    Block(out, output.get_ref<const std::string&>(), kTranscriptOutputLines, "  | ");
  }
}

}  // namespace

std::vector<std::string> TranscriptLines(const json& e) {
  std::vector<std::string> out;
  if (!e.is_object()) return out;
  const json& d = Member(e, "detail");
  const json& t = Member(e, "transcript");
  const std::optional<broker::AuditKind> kind = broker::ParseAuditKind(Str(e, "event"));
  if (!kind) return out;
  using K = broker::AuditKind;
  switch (*kind) {
    case K::kState: {
      State(out, d);
      break;
    }
    case K::kWorkspace: {
      using N = broker::audit::names::Workspace;
      out.push_back("--- workspace: base " + One(Str(d, N::base_commit).substr(0, 12)) + " of " +
                    One(Str(d, N::repo)) +
                    (Flag(d, N::carried_dirty) ? ", uncommitted changes carried in" : ""));
      break;
    }
    case K::kHello: {
      using N = broker::audit::names::Hello;
      out.push_back("agent connected: " + One(Str(d, N::agent), 120));
      break;
    }
    case K::kModelResult: {
      ModelResult(out, d, t);
      break;
    }
    case K::kModelError: {
      using N = broker::audit::names::ModelError;
      out.push_back("model error, turn " + One(Str(d, N::turn), 20) + ": " +
                    One(Str(d, N::code), 40) + ": " + One(Str(d, N::message)));
      break;
    }
    case K::kToolRequest: {
      using N = broker::audit::names::ToolRequest;
      // Only a request refused before a decision has an entry of its own.
      std::string s = "tool " + One(Str(e, "tool"), 64) + " [" + One(Str(d, N::call_id), 64) + "]";
      const json& args = Member(t, "arguments");
      if (!args.is_null()) s += ": " + Arguments(Str(e, "tool"), args);
      out.push_back(s + " (refused before a decision)");
      break;
    }
    case K::kDecision: {
      Decision(out, e, d, t);
      break;
    }
    case K::kLoop: {
      using N = broker::audit::names::Loop;
      out.push_back("  loop detection: " + One(Str(d, N::reason)));
      break;
    }
    case K::kApproval: {
      using N = broker::audit::names::Approval;
      out.push_back("  " + std::string(Str(e, "verdict") == "allow" ? "approved" : "not approved") +
                    " (" + One(Str(d, N::scope), 20) + ", by " + One(Str(d, N::by), 60) + ")");
      break;
    }
    case K::kToolResult: {
      ToolResult(out, d, t);
      break;
    }
    case K::kFinish: {
      using N = broker::audit::names::Finish;
      out.push_back("agent finished (" + One(Str(d, N::outcome), 20) + "):");
      Block(out, Str(d, N::summary), kTranscriptTextLines, "  ");
      break;
    }
    case K::kProtocolError: {
      using N = broker::audit::names::ProtocolError;
      out.push_back("protocol error: " + One(Str(d, N::code), 40) + ": " + One(Str(d, N::message)));
      break;
    }
    case K::kBudget: {
      using N = broker::audit::names::Budget;
      out.push_back("budget: " + One(Str(d, N::reason)));
      break;
    }
    case K::kShutdown: {
      using N = broker::audit::names::Shutdown;
      std::string s = "session ended: " + One(Str(d, N::status), 40);
      if (!Str(d, N::reason).empty()) s += ": " + One(Str(d, N::reason));
      out.push_back(std::move(s));
      break;
    }
    case K::kPatch: {
      using N = broker::audit::names::Patch;
      out.push_back("--- patch: " + One(Str(d, N::files), 20) + " files, " +
                    One(Str(d, N::bytes), 20) + " bytes, " + One(Str(d, N::violations), 20) +
                    " rule violations");
      break;
    }
    case K::kVerify:
    case K::kSetup: {
      using N = broker::audit::names::Verify;
      out.push_back("--- " + std::string(broker::AuditKindName(*kind)) + " " +
                    One(Str(d, N::status), 40) + ": " + One(Str(d, N::command)) + " (exit " +
                    One(Str(d, N::exit_code), 20) + ", " + One(Str(d, N::duration_ms), 20) +
                    " ms)");
      break;
    }
    case K::kEgress: {
      using N = broker::audit::names::Egress;
      std::string s = "network " + One(Str(e, "verdict"), 10) + " " + One(Str(d, N::host), 120) +
                      ":" + One(Str(d, N::port), 10) + " via " + One(Str(d, N::via), 20);
      if (Str(e, "verdict") != "allow") s += ": " + One(Str(d, N::reason));
      out.push_back(std::move(s));
      break;
    }
    case K::kHttpRequest: {
      using N = broker::audit::names::HttpRequest;
      std::string s = "http " + One(Str(e, "verdict"), 10) + " " + One(Str(d, N::method), 20) +
                      " " + One(Str(d, N::host), 120) + ":" + One(Str(d, N::port), 10) +
                      One(Str(d, N::path), 200);
      if (Str(e, "verdict") != "allow") s += ": " + One(Str(d, N::reason));
      out.push_back(std::move(s));
      break;
    }
    // Left out of a transcript: the terms, the request before its answer, status lines, and what
    // the verification tree and MCP sessions record (no transcript is shown for those).
    case K::kWelcome:
    case K::kModelCall:
    case K::kLoopState:
    case K::kProgress:
    case K::kVerifyTree:
    case K::kMcpCall:
    case K::kMcpResult:
    case K::kMcpList:
    case K::kCount:
      break;
  }
  return out;
}

void TranscriptPrinter::Print(std::string_view line, const json& transcript) {
  json entry = ParseJsonWithin(line, broker::kMaxAuditEntryDepth);
  if (!entry.is_object()) return;
  if (!transcript.is_null()) entry["transcript"] = transcript;
  const std::vector<std::string> lines = TranscriptLines(entry);
  if (lines.empty()) return;
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  const std::lock_guard<std::mutex> lock(mu_);
  out_ << text << std::flush;
}

}  // namespace cagent::launcher::cli
