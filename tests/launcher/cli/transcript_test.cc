// The --verbose transcript's formatter (launcher/cli/transcript.h): what each event-log entry
// shows, how long texts are cut, and that text from the model, the agent or the repository cannot
// reach the terminal as control sequences, whatever it holds.
#include "launcher/cli/transcript.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "common/terminal_text.h"

namespace cagent::launcher::cli {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// Every line is plain printable text: no control character, ESC, C1, bidi or invisible code
// point, no invalid UTF-8 (IsTerminalSafe), and no newline inside a line.
void ExpectSafe(const std::vector<std::string>& lines) {
  for (const auto& l : lines) {
    EXPECT_TRUE(IsTerminalSafe(l, TerminalLines::kOne)) << l;
    EXPECT_EQ(l.find('\x1b'), std::string::npos) << l;
    EXPECT_EQ(l.find('\r'), std::string::npos) << l;
  }
}

json Entry(const std::string& event, json detail, json transcript = nullptr) {
  json e = {{"run", "R"},        {"seq", 1},       {"time", "2026-12-03T10:00:00.000Z"},
            {"actor", "broker"}, {"event", event}, {"policy", ""},
            {"tool", ""},        {"args", ""},     {"verdict", ""},
            {"rule", ""},        {"result", ""},   {"detail", std::move(detail)}};
  if (!transcript.is_null()) e["transcript"] = std::move(transcript);
  return e;
}

json DecisionEntry(const std::string& tool, const std::string& verdict, json args) {
  json e = Entry("decision",
                 {{"id", 3},
                  {"call_id", "call_1"},
                  {"turn", 1},
                  {"reason", "the profile says so"},
                  {"location", "fix-add.cagent:9:3"}},
                 {{"arguments", std::move(args)}});
  e["tool"] = tool;
  e["verdict"] = verdict;
  e["rule"] = "commands: allow python3";
  return e;
}

json ResultEntry(const std::string& output, bool ok = true) {
  json e = Entry("tool_result",
                 {{"id", 4},
                  {"request", 3},
                  {"call_id", "call_1"},
                  {"turn", 1},
                  {"ok", ok},
                  {"error_code", ok ? "" : "timeout"},
                  {"bytes", output.size()},
                  {"redacted", false},
                  {"changed_paths", json::array()}},
                 {{"output", output}});
  e["tool"] = "run_command";
  return e;
}

TEST(TranscriptTest, AModelTurnShowsItsText) {
  const auto lines = TranscriptLines(Entry(
      "model_result",
      {{"turn", 1},
       {"stop_reason", "tool_calls"},
       {"usage", {{"input_tokens", 1480}, {"output_tokens", 31}}},
       {"text_bytes", 44}},
      {{"text", "I'll run the tests first to see the failure."}, {"tool_calls", json::array()}}));
  ASSERT_EQ(lines.size(), 2U) << Joined(lines);
  EXPECT_EQ(lines[0], "model, turn 1 (tool_calls, 1480 tokens in, 31 out):");
  EXPECT_EQ(lines[1], "  I'll run the tests first to see the failure.");
}

TEST(TranscriptTest, AToolCallShowsItsArgumentsTheVerdictAndTheRule) {
  const auto lines = TranscriptLines(
      DecisionEntry("run_command", "allow", {{"command", "python3 -m unittest -q"}}));
  ASSERT_EQ(lines.size(), 2U) << Joined(lines);
  EXPECT_EQ(lines[0], "tool run_command [call_1]: python3 -m unittest -q");
  EXPECT_EQ(lines[1], "  allow by commands: allow python3 (fix-add.cagent:9:3)");
  // A refusal also says why.
  const auto denied =
      TranscriptLines(DecisionEntry("run_command", "deny", {{"command", "curl x"}}));
  ASSERT_EQ(denied.size(), 2U);
  EXPECT_THAT(denied[1], HasSubstr("deny by commands: allow python3"));
  EXPECT_THAT(denied[1], HasSubstr(": the profile says so"));
}

TEST(TranscriptTest, FileToolsAreAbbreviatedToThePathAndSizes) {
  const auto edit = TranscriptLines(DecisionEntry("edit_file", "allow",
                                                  {{"path", "calc.py"},
                                                   {"old_string", "    return a - b"},
                                                   {"new_string", "    return a + b"}}));
  EXPECT_EQ(edit[0], "tool edit_file [call_1]: calc.py (replace 16 bytes with 16 bytes)");
  const auto write = TranscriptLines(DecisionEntry(
      "write_file", "allow", {{"path", "big.txt"}, {"content", std::string(5000, 'x')}}));
  EXPECT_EQ(write[0], "tool write_file [call_1]: big.txt (5000 bytes)");
}

TEST(TranscriptTest, AResultShowsItsStatusAndFirstLinesWithHowManyMore) {
  std::string output = "exit code 1\n";
  for (int i = 1; i <= 19; ++i) output += "line " + std::to_string(i) + "\n";
  const auto lines = TranscriptLines(ResultEntry(output));
  ASSERT_EQ(lines.size(), 1U + kTranscriptOutputLines + 1U) << Joined(lines);
  EXPECT_EQ(lines[0], "  result: ok, " + std::to_string(output.size()) + " bytes");
  EXPECT_EQ(lines[1], "  | exit code 1");
  EXPECT_EQ(lines[2], "  | line 1");
  EXPECT_EQ(lines.back(), "  | \u2026 12 more lines");  // 20 lines, 8 shown
  const auto failed = TranscriptLines(ResultEntry("run_command timed out", false));
  EXPECT_EQ(failed[0], "  result: failed (timeout), 21 bytes");
}

TEST(TranscriptTest, StateChangesAndTheEndAreShown) {
  EXPECT_EQ(TranscriptLines(Entry("state", {{"state", "running"}}))[0], "--- running");
  EXPECT_EQ(TranscriptLines(Entry("state", {{"state", "failed"}, {"reason", "budget"}}))[0],
            "--- failed: budget");
  EXPECT_EQ(TranscriptLines(Entry("shutdown", {{"status", "finished"}, {"reason", ""}}))[0],
            "session ended: finished");
  EXPECT_EQ(TranscriptLines(Entry("verify", {{"command", "make test"},
                                             {"status", "passed"},
                                             {"exit_code", 0},
                                             {"duration_ms", 12},
                                             {"tree", "t"}}))[0],
            "--- verify passed: make test (exit 0, 12 ms)");
}

TEST(TranscriptTest, EntriesItDoesNotShowAndDamagedOnesGiveNoLinesAndNoThrow) {
  EXPECT_TRUE(TranscriptLines(Entry("model_call", {{"turn", 1}})).empty());
  EXPECT_TRUE(TranscriptLines(Entry("progress", {{"text", "x"}})).empty());
  EXPECT_TRUE(TranscriptLines(json::array()).empty());
  EXPECT_TRUE(TranscriptLines(json("decision")).empty());
  // Fields of the wrong type (a damaged or hostile log): shown as their JSON, never thrown on.
  json bad = Entry("decision", json::array(), {{"arguments", 7}});
  bad["tool"] = 12;
  bad["verdict"] = json::object();
  ExpectSafe(TranscriptLines(bad));
  ExpectSafe(TranscriptLines(
      Entry("tool_result", {{"ok", "yes"}, {"changed_paths", 3}}, {{"output", json::array()}})));
  ExpectSafe(TranscriptLines(Entry("model_result", "text", {{"text", 5}})));
}

TEST(TranscriptTest, WithoutATranscriptTheLogsOwnFieldsAreShown) {
  // A log read back afterwards has no transcript: the sizes the log keeps instead.
  const auto turn = TranscriptLines(
      Entry("model_result",
            {{"turn", 2}, {"stop_reason", "end"}, {"usage", json::object()}, {"text_bytes", 35}}));
  EXPECT_THAT(turn[0], HasSubstr("35 bytes of text"));
  json d = DecisionEntry("read_file", "allow", nullptr);
  d.erase("transcript");
  EXPECT_EQ(TranscriptLines(d)[0], "tool read_file [call_1]");
}

// The hostile side's tricks, in each place the transcript quotes it. The inputs hold the raw
// bytes (checked first: the twin of each EXPECT_THAT below); the lines hold only their escapes.
TEST(TranscriptTest, HostileTextIsEscapedEverywhere) {
  const std::string clear = "\x1b[2J\x1b[H";         // clear the screen, home
  const std::string overwrite = "FAILED\rPASSED  ";  // \r: rewrite the line
  const std::string link = "\x1b]8;;https://evil.example/\x07here\x1b]8;;\x07";  // OSC 8
  const std::string bidi = "calc.py\u202etxt.exe";  // right-to-left override
  const std::string bad_utf8 = "caf\xc3 \xff\xfe";  // invalid UTF-8
  const std::string title = "\x1b]0;owned\x07";     // set the window title
  const std::string c1 =
      "\xc2\x9b"
      "31m";  // C1 CSI
  const std::string all = clear + overwrite + link + bidi + bad_utf8 + title + c1;
  ASSERT_NE(all.find('\x1b'), std::string::npos);
  ASSERT_NE(all.find('\r'), std::string::npos);
  ASSERT_NE(all.find('\x07'), std::string::npos);

  std::vector<std::string> lines;
  const auto add = [&lines](const std::vector<std::string>& more) {
    lines.insert(lines.end(), more.begin(), more.end());
  };
  add(TranscriptLines(Entry("model_result",
                            {{"turn", 1}, {"stop_reason", all}, {"usage", json::object()}},
                            {{"text", all + "\n" + all}})));
  json d = DecisionEntry("run_command", "deny", {{"command", all}});
  d["rule"] = all;
  d["detail"]["reason"] = all;
  d["detail"]["call_id"] = all;
  add(TranscriptLines(d));
  add(TranscriptLines(DecisionEntry(all, "allow", {{"path", all}})));
  add(TranscriptLines(DecisionEntry("read_file", "allow", {{"path", all}})));
  add(TranscriptLines(DecisionEntry("edit_file", "allow", {{"path", all}})));
  json r = ResultEntry(all + "\n" + all + "\n");
  r["detail"]["changed_paths"] = json::array({all});
  r["detail"]["error_code"] = all;
  r["detail"]["ok"] = false;
  add(TranscriptLines(r));
  add(TranscriptLines(Entry("finish", {{"outcome", all}, {"summary", all}})));
  add(TranscriptLines(Entry("state", {{"state", all}, {"reason", all}})));
  add(TranscriptLines(Entry("shutdown", {{"status", all}, {"reason", all}})));
  add(TranscriptLines(Entry("model_error", {{"turn", 1}, {"code", all}, {"message", all}})));
  add(TranscriptLines(Entry("protocol_error", {{"code", all}, {"message", all}})));
  add(TranscriptLines(Entry("hello", {{"agent", all}})));
  add(TranscriptLines(
      Entry("egress", {{"host", all}, {"port", 1}, {"via", all}, {"reason", all}})));
  add(TranscriptLines(
      Entry("http_request",
            {{"host", all}, {"port", 1}, {"method", all}, {"path", all}, {"reason", all}})));
  ASSERT_GT(lines.size(), 20U);
  ExpectSafe(lines);
  const std::string text = Joined(lines);
  EXPECT_THAT(text, Not(HasSubstr("\x07")));
  EXPECT_THAT(text, Not(HasSubstr("\u202e")));
  EXPECT_THAT(text, Not(HasSubstr("\xc2\x9b")));
  // What was there is visible: the escapes, not nothing.
  EXPECT_THAT(text, HasSubstr("\\x1b[2J"));
  EXPECT_THAT(text, HasSubstr("FAILED\\rPASSED"));
  EXPECT_THAT(text, HasSubstr("\\x1b]8;;https://evil.example/\\x07here"));
  EXPECT_THAT(text, HasSubstr("\\u{202e}"));
  EXPECT_THAT(text, HasSubstr("\\xff\\xfe"));
}

TEST(TranscriptTest, VeryLongLinesAreCutAtACharacterBoundary) {
  const auto lines = TranscriptLines(ResultEntry(std::string(100000, 'a')));
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_LE(lines[1].size(), 4 + kTranscriptLineBytes + 3);  // "  | " + the cut + "…"
  EXPECT_TRUE(lines[1].ends_with("\u2026"));
  std::string accents;
  for (int i = 0; i < 1000; ++i) accents += "\u00e9";  // 2 bytes each: the cut must not split one
  const auto cut = TranscriptLines(
      DecisionEntry("run_command", "allow", {{"command", "echo " + accents + "\x1b[31m"}}));
  ExpectSafe(cut);
  EXPECT_LE(cut[0].size(), 64 + kTranscriptLineBytes);
  // Many lines: at most the first few, and how many were left out.
  std::string many;
  for (int i = 0; i < 5000; ++i) many += "x\n";
  const auto text = TranscriptLines(
      Entry("model_result", {{"turn", 1}, {"stop_reason", "end"}, {"usage", json::object()}},
            {{"text", many}}));
  EXPECT_EQ(text.size(), 1U + kTranscriptTextLines + 1U);
  EXPECT_EQ(text.back(), "  \u2026 " + std::to_string(5000 - kTranscriptTextLines) + " more lines");
}

TEST(TranscriptTest, ThePrinterPrintsWholeEntriesFromLogLines) {
  std::ostringstream out;
  TranscriptPrinter printer(out);
  printer.Print(R"({"event":"state","detail":{"state":"running"}})", nullptr);
  printer.Print("not json", nullptr);
  printer.Print(R"({"event":"tool_result","tool":"run_command","detail":{"ok":true,"bytes":3}})",
                json{{"output", "hi\x1b[2J\n"}});
  EXPECT_EQ(out.str(), "--- running\n  result: ok, 3 bytes\n  | hi\\x1b[2J\n");
}

}  // namespace
}  // namespace cagent::launcher::cli
