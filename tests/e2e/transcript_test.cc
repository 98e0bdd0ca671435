// `cagent run --verbose` and `cagent agent --verbose` (issue #20): a scrolling transcript on
// stderr instead of the progress line, with the model's text, the tool calls, the broker's
// decisions and the results; and what the hostile side wrote (a file the agent cats, the model's
// own text) reaches the terminal only escaped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// A repository file that tries to clear the screen, forge a line with a carriage return and plant
// an OSC 8 link, for the replayed agent to `cat`; and a secret-shaped value, which the transcript
// shows redacted as the event log would.
const std::string kHostile =
    "\x1b[2J\x1b[HFAKE: verification passed\r"
    "\x1b]8;;https://evil.example/\x07"
    "click\x1b]8;;\x07 \xe2\x80\xae"
    "evil\n"
    "aws key AKIAZ7Q2M4X9W3K8P6R1\n";

class TranscriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& h = Harness::Get();
    if (!h.skip_reason().empty()) GTEST_SKIP() << h.skip_reason();
    if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
    dir_ = h.MakeDir("transcript");
    repo_ = dir_ + "/repo";
    state_ = dir_ + "/state";
    fs::copy(std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/repo", repo_,
             fs::copy_options::recursive);
    WriteFile(repo_ + "/NOTES.txt", kHostile);
    h.MakeDemoRepo(repo_, /*copy=*/false);
    WriteFile(dir_ + "/session.jsonl", ReadFile(std::string(CAGENT_SOURCE_DIR) +
                                                "/tests/testdata/replay/verbose_transcript.jsonl"));
    h.GiveToRunUser(dir_);
    ASSERT_FALSE(HasFailure());
  }

  RunOptions Env() const {
    RunOptions o;
    o.extra_env = {"XDG_STATE_HOME=" + state_};
    o.timeout = std::chrono::seconds(120);
    return o;
  }

  RunResult Run(bool verbose) {
    std::vector<std::string> args = {
        "run",  "--profile", repo_ + "/.cagent/fix-add.cagent",   "--repo",
        repo_,  "--model",   "replay:" + dir_ + "/session.jsonl", "--approve",
        "never"};
    if (verbose) args.emplace_back("--verbose");
    args.push_back(std::string(CAGENT_SOURCE_DIR) + "/examples/fix-add/task.md");
    return Harness::Get().Run(args, Env());
  }

  // The run's events.jsonl, parsed, of the only run there is.
  std::vector<json> Events() {
    std::vector<json> out;
    for (const auto& e : fs::directory_iterator(state_ + "/cagent/runs")) {
      if (!e.is_directory()) continue;
      std::istringstream in(ReadFile(e.path().string() + "/events.jsonl"));
      for (std::string line; std::getline(in, line);)
        out.push_back(json::parse(line, nullptr, false));
    }
    return out;
  }

  std::string dir_, repo_, state_;
};

TEST_F(TranscriptTest, VerboseRunShowsTextCallsDecisionsAndResultsAllEscaped) {
  const RunResult r = Run(true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string& t = r.err;
  // The run's state changes, the model's text, each call with its arguments, the verdict and
  // rule, and the results with their first lines.
  EXPECT_THAT(t, HasSubstr("--- running"));
  EXPECT_THAT(t, HasSubstr("--- verifying"));
  EXPECT_THAT(t, HasSubstr("--- completed"));
  EXPECT_THAT(t, HasSubstr("model, turn 1 (tool_calls, 1200 tokens in, 30 out):\n"
                           "  Reading the notes first."));
  EXPECT_THAT(t, HasSubstr("  add() subtracts instead of adding; fixing it.\n"));
  EXPECT_THAT(t, HasSubstr("tool run_command [call_1]: cat NOTES.txt\n  allow by "));
  EXPECT_THAT(t, HasSubstr("tool read_file [call_2]: calc.py\n"));
  EXPECT_THAT(t, HasSubstr("tool edit_file [call_3]: calc.py (replace 16 bytes with 16 bytes)\n"));
  EXPECT_THAT(t, HasSubstr("tool run_command [call_4]: python3 -m unittest -q\n"));
  EXPECT_THAT(t, HasSubstr("  result: ok, "));
  EXPECT_THAT(t, HasSubstr("  | exit code 0\n"));
  EXPECT_THAT(t, HasSubstr("agent finished (done):\n  Fixed add() in calc.py.\n"));
  EXPECT_THAT(t, HasSubstr("--- verify passed: python3 -m unittest -q"));
  // The transcript replaces the progress lines.
  EXPECT_THAT(t, Not(HasSubstr("cagent: [running]")));

  // The hostile file's bytes came through, escaped: its text is there, its controls are not.
  EXPECT_THAT(t, HasSubstr("  | \\x1b[2J\\x1b[HFAKE: verification passed\\r\\x1b]8;;"
                           "https://evil.example/\\x07click"));
  EXPECT_THAT(t, HasSubstr("\\u{202e}evil"));
  EXPECT_THAT(t, Not(HasSubstr("AKIAZ7Q2M4X9W3K8P6R1")));
  EXPECT_THAT(t, HasSubstr("  | aws key [REDACTED"));
  EXPECT_EQ(t.find('\x1b'), std::string::npos) << "a raw ESC reached the terminal";
  EXPECT_EQ(t.find('\x07'), std::string::npos);
  EXPECT_EQ(t.find('\r'), std::string::npos);
  EXPECT_EQ(t.find("\xe2\x80\xae"), std::string::npos);

  // The twin: the same bytes are there raw on the other side of the transcript. The model's text
  // is in the event log (the replayed turn's body) with its OSC title sequence; the tool's
  // output is the file's, whose digest the log records.
  bool raw_text = false;
  bool output_logged = false;
  for (const json& e : Events()) {
    if (!e.is_object()) continue;
    if (e.value("event", "") == "model_result" &&
        e["detail"]["body"].value("text", "").find("\x1b]0;owned\x07") != std::string::npos) {
      raw_text = true;
    }
    if (e.value("event", "") == "tool_result" && e["detail"].value("call_id", "") == "call_1") {
      output_logged = e["detail"].value("bytes", 0U) > kHostile.size();  // "exit code 0\n" + file
    }
  }
  EXPECT_TRUE(raw_text) << "the replayed text with its escape sequence is in events.jsonl";
  EXPECT_TRUE(output_logged);
  EXPECT_EQ(ReadFile(repo_ + "/NOTES.txt"), kHostile);
  EXPECT_THAT(t, HasSubstr("Reading the notes first.\\x1b]0;owned\\x07"));
}

TEST_F(TranscriptTest, WithoutVerboseTheTranscriptIsNotPrinted) {
  // The twin of the test above: the same run without --verbose prints progress lines, not the
  // model's text or the tool's output.
  const RunResult r = Run(false);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("Reading the notes first.")));
  EXPECT_THAT(r.err, Not(HasSubstr("FAKE: verification passed")));
}

TEST_F(TranscriptTest, VerboseAgentSessionShowsTheTranscript) {
  const std::string ws = dir_ + "/ws";
  fs::create_directories(ws);
  WriteFile(ws + "/calc.py", "def add(a, b):\n    return a - b\n");
  WriteFile(ws + "/NOTES.txt", kHostile);
  WriteFile(dir_ + "/task.md", "# Fix add\n");
  Harness::Get().GiveToRunUser(dir_);
  const std::string session = ToolTurn("run_command", {{"command", "cat NOTES.txt"}}) +
                              ToolTurn("finish", {{"summary", "Looked at the notes."}});
  WriteFile(dir_ + "/agent-session.jsonl", session);
  Harness::Get().GiveToRunUser(dir_);
  const RunResult r = Harness::Get().Run({"agent", "--profile", "backend", "--workspace", ws,
                                          "--model", "replay:" + dir_ + "/agent-session.jsonl",
                                          "--approve", "never", "--verbose", dir_ + "/task.md"},
                                         Env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("]: cat NOTES.txt\n  allow by "));
  EXPECT_THAT(r.err, HasSubstr("  | \\x1b[2J\\x1b[HFAKE: verification passed\\r"));
  EXPECT_THAT(r.err, HasSubstr("session ended: finished"));
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
  // Instead of the one-line broker events of a plain session.
  EXPECT_THAT(r.err, Not(HasSubstr("decision: allow")));
}

}  // namespace
}  // namespace cagent::testing
