// Approvals: the terminal prompt driven through a pseudo-terminal (what the operator sees, each
// answer, invalid input, end of input, queueing, cancel, typeahead), the headless approver, and
// the book of pre-approvals and run-scope approvals.
#include "launcher/broker/approver.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <termios.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "common/terminal_text.h"

namespace cagent::launcher::broker {
namespace {

using namespace std::chrono_literals;

ApprovalRequest NpmRequest() {
  ApprovalRequest r;
  r.tool = "run_command";
  r.action = "npm install left-pad";
  r.digest = std::string(64, 'a');
  r.rule = "ask npm";
  r.location = "backend.cagent:31:5";
  r.reason = "installing packages needs a person's approval";
  return r;
}

// A pseudo-terminal: the approver gets the slave side, the test plays the operator on the master.
class Pty {
 public:
  Pty() {
    if (openpty(&master_, &slave_, nullptr, nullptr, nullptr) != 0) {
      master_ = slave_ = -1;
      return;
    }
    fcntl(master_, F_SETFL, fcntl(master_, F_GETFL) | O_NONBLOCK);
  }
  ~Pty() {
    if (master_ >= 0) close(master_);
    if (slave_ >= 0) close(slave_);
  }
  [[nodiscard]] bool ok() const { return master_ >= 0; }
  [[nodiscard]] int slave() const { return slave_; }

  // Everything the terminal has shown so far (prompts and the echo of what was typed).
  const std::string& screen() {
    char buf[4096];
    for (;;) {
      const ssize_t n = read(master_, buf, sizeof buf);
      if (n <= 0) break;
      screen_.append(buf, static_cast<std::size_t>(n));
    }
    return screen_;
  }
  void Type(const std::string& keys) {
    ASSERT_EQ(write(master_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size()));
  }
  void CloseMaster() {
    close(master_);
    master_ = -1;
  }
  // Forgets what was shown so far (to look for the next prompt only).
  void ClearScreen() {
    screen();
    screen_.clear();
  }

 private:
  int master_ = -1;
  int slave_ = -1;
  std::string screen_;
};

// Runs the io_context until `done()` or `limit` passes; returns done().
bool PumpUntil(boost::asio::io_context& io, const std::function<bool()>& done,
               std::chrono::milliseconds limit = 5000ms) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_one_for(10ms);
  }
  return done();
}

bool ScreenHas(Pty& pty, const std::string& text) {
  return pty.screen().find(text) != std::string::npos;
}

class TerminalApproverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!pty_.ok()) GTEST_SKIP() << "openpty failed: no pseudo-terminals here";
    approver_ = MakeTerminalApprover(io_, pty_.slave());
  }

  // Asks and waits until the prompt is on the screen.
  void AskAndWaitForPrompt(const ApprovalRequest& request,
                           std::optional<ApprovalOutcome>& outcome) {
    approver_->Ask(request, [&outcome](ApprovalOutcome o) { outcome = std::move(o); });
    ASSERT_TRUE(PumpUntil(io_, [&] { return ScreenHas(pty_, "[d]eny\r\n> "); })) << pty_.screen();
  }

  // Types `keys` at the prompt of `request` and returns the outcome.
  ApprovalOutcome Answer(const ApprovalRequest& request, const std::string& keys) {
    std::optional<ApprovalOutcome> outcome;
    AskAndWaitForPrompt(request, outcome);
    pty_.Type(keys);
    EXPECT_TRUE(PumpUntil(io_, [&] { return outcome.has_value(); })) << pty_.screen();
    return outcome.value_or(ApprovalOutcome{
        .approved = true, .scope = ApprovalScope::kOnce, .by = "no answer (test failure)"});
  }

  boost::asio::io_context io_;
  Pty pty_;
  std::unique_ptr<Approver> approver_;
};

TEST_F(TerminalApproverTest, OnceAndThePromptShowsTheActionRuleAndLocationVerbatim) {
  const ApprovalRequest req = NpmRequest();
  const ApprovalOutcome o = Answer(req, "o\n");
  EXPECT_TRUE(o.approved);
  EXPECT_EQ(o.scope, ApprovalScope::kOnce);
  EXPECT_EQ(o.by, "terminal");
  const std::string& screen = pty_.screen();
  EXPECT_NE(screen.find("action:  npm install left-pad\r\n"), std::string::npos) << screen;
  EXPECT_NE(screen.find("tool:    run_command"), std::string::npos) << screen;
  EXPECT_NE(screen.find("rule:    ask npm  (backend.cagent:31:5)"), std::string::npos) << screen;
  EXPECT_NE(screen.find("reason:  installing packages needs a person's approval"),
            std::string::npos)
      << screen;
  EXPECT_NE(screen.find("[o]nce  [r]un (this exact action for the rest of the run)  [d]eny"),
            std::string::npos)
      << screen;
  EXPECT_EQ(screen.find("[p]attern"), std::string::npos) << "no pattern was offered";
}

TEST_F(TerminalApproverTest, RunScope) {
  const ApprovalOutcome o = Answer(NpmRequest(), "r\n");
  EXPECT_TRUE(o.approved);
  EXPECT_EQ(o.scope, ApprovalScope::kRunExact);
}

TEST_F(TerminalApproverTest, PatternShownVerbatimWhenOffered) {
  ApprovalRequest req = NpmRequest();
  req.narrower_pattern = "npm install left-pad*";
  const ApprovalOutcome o = Answer(req, "p\n");
  EXPECT_TRUE(o.approved);
  EXPECT_EQ(o.scope, ApprovalScope::kRunPattern);
  EXPECT_NE(pty_.screen().find("[p]attern npm install left-pad*  [d]eny"), std::string::npos)
      << pty_.screen();
}

TEST_F(TerminalApproverTest, Deny) {
  const ApprovalOutcome o = Answer(NpmRequest(), "d\n");
  EXPECT_FALSE(o.approved);
  EXPECT_EQ(o.scope, ApprovalScope::kDenied);
}

// The yes/no answers people type by reflex: y / yes approve once (never more), n / no deny, in any
// case; and the long forms of the letters in any case too.
TEST_F(TerminalApproverTest, YesAndNoInAnyCase) {
  for (const char* keys : {"y\n", "Y\n", "yes\n", "YES\n", "Yes\n", "  y \n", "ONCE\n"}) {
    pty_.ClearScreen();
    const ApprovalOutcome o = Answer(NpmRequest(), keys);
    EXPECT_TRUE(o.approved) << keys;
    EXPECT_EQ(o.scope, ApprovalScope::kOnce) << keys;
    EXPECT_EQ(o.by, "terminal") << keys;
  }
  for (const char* keys : {"n\n", "N\n", "no\n", "NO\n", "No\n", "Deny\n"}) {
    pty_.ClearScreen();
    const ApprovalOutcome o = Answer(NpmRequest(), keys);
    EXPECT_FALSE(o.approved) << keys;
    EXPECT_EQ(o.scope, ApprovalScope::kDenied) << keys;
    EXPECT_EQ(o.by, "terminal") << keys;
  }
}

// Only the exact words: "yess", "nope" and "ye" are not answers.
TEST_F(TerminalApproverTest, NearYesOrNoIsNotAnAnswer) {
  std::optional<ApprovalOutcome> outcome;
  AskAndWaitForPrompt(NpmRequest(), outcome);
  for (const char* keys : {"yess\n", "nope\n", "ye\n", "y es\n"}) {
    pty_.ClearScreen();
    pty_.Type(keys);
    ASSERT_TRUE(PumpUntil(io_, [&] { return ScreenHas(pty_, "please answer with one of"); }))
        << keys << pty_.screen();
    EXPECT_FALSE(outcome.has_value()) << keys;
  }
  pty_.Type("n\n");
  ASSERT_TRUE(PumpUntil(io_, [&] { return outcome.has_value(); }));
  EXPECT_FALSE(outcome->approved);
}

TEST_F(TerminalApproverTest, InvalidInputRepromptsThenDeny) {
  std::optional<ApprovalOutcome> outcome;
  AskAndWaitForPrompt(NpmRequest(), outcome);
  pty_.ClearScreen();
  pty_.Type("maybe\n");
  ASSERT_TRUE(PumpUntil(io_, [&] { return ScreenHas(pty_, "please answer with one of"); }))
      << pty_.screen();
  EXPECT_FALSE(outcome.has_value());
  // "p" is not an answer when no pattern is offered.
  pty_.ClearScreen();
  pty_.Type("p\n");
  ASSERT_TRUE(PumpUntil(io_, [&] { return ScreenHas(pty_, "please answer with one of"); }))
      << pty_.screen();
  EXPECT_FALSE(outcome.has_value());
  pty_.Type("d\n");
  ASSERT_TRUE(PumpUntil(io_, [&] { return outcome.has_value(); }));
  EXPECT_FALSE(outcome->approved);
  EXPECT_EQ(outcome->scope, ApprovalScope::kDenied);
}

TEST_F(TerminalApproverTest, EndOfInputDenies) {
  const ApprovalOutcome o = Answer(NpmRequest(), "\x04");  // Ctrl-D at the start of a line
  EXPECT_FALSE(o.approved);
  EXPECT_EQ(o.scope, ApprovalScope::kDenied);
  EXPECT_NE(o.by.find("end of input"), std::string::npos) << o.by;
}

TEST_F(TerminalApproverTest, HungUpTerminalDenies) {
  std::optional<ApprovalOutcome> outcome;
  AskAndWaitForPrompt(NpmRequest(), outcome);
  pty_.CloseMaster();
  ASSERT_TRUE(PumpUntil(io_, [&] { return outcome.has_value(); }));
  EXPECT_FALSE(outcome->approved);
}

TEST_F(TerminalApproverTest, TypeaheadDoesNotAnswer) {
  // Keys pressed before the question was shown are discarded, not taken as the answer.
  pty_.Type("o\n");
  std::optional<ApprovalOutcome> outcome;
  AskAndWaitForPrompt(NpmRequest(), outcome);
  PumpUntil(
      io_, [&] { return outcome.has_value(); }, 300ms);  // a stale "o" would answer now
  EXPECT_FALSE(outcome.has_value()) << "typeahead answered the prompt";
  pty_.Type("d\n");
  ASSERT_TRUE(PumpUntil(io_, [&] { return outcome.has_value(); }));
  EXPECT_EQ(outcome->scope, ApprovalScope::kDenied);
}

TEST_F(TerminalApproverTest, ConcurrentAsksAreQueuedOneAtATime) {
  ApprovalRequest first = NpmRequest();
  ApprovalRequest second = NpmRequest();
  second.action = "npm install right-pad";
  std::optional<ApprovalOutcome> a;
  std::optional<ApprovalOutcome> b;
  approver_->Ask(first, [&a](ApprovalOutcome o) { a = std::move(o); });
  approver_->Ask(second, [&b](ApprovalOutcome o) { b = std::move(o); });
  ASSERT_TRUE(PumpUntil(io_, [&] { return ScreenHas(pty_, "[d]eny\r\n> "); })) << pty_.screen();
  EXPECT_NE(pty_.screen().find("(1 more waiting after this one)"), std::string::npos);
  EXPECT_EQ(pty_.screen().find("right-pad"), std::string::npos) << "second prompt shown early";
  pty_.ClearScreen();
  pty_.Type("o\n");
  ASSERT_TRUE(PumpUntil(io_, [&] { return a.has_value() && ScreenHas(pty_, "[d]eny\r\n> "); }))
      << pty_.screen();
  EXPECT_EQ(a->scope, ApprovalScope::kOnce);
  EXPECT_FALSE(b.has_value());
  EXPECT_NE(pty_.screen().find("action:  npm install right-pad"), std::string::npos)
      << pty_.screen();
  pty_.Type("d\n");
  ASSERT_TRUE(PumpUntil(io_, [&] { return b.has_value(); }));
  EXPECT_EQ(b->scope, ApprovalScope::kDenied);
}

TEST_F(TerminalApproverTest, CancelDeniesPendingAndQueued) {
  std::optional<ApprovalOutcome> a;
  std::optional<ApprovalOutcome> b;
  approver_->Ask(NpmRequest(), [&a](ApprovalOutcome o) { a = std::move(o); });
  approver_->Ask(NpmRequest(), [&b](ApprovalOutcome o) { b = std::move(o); });
  ASSERT_TRUE(PumpUntil(io_, [&] { return ScreenHas(pty_, "[d]eny\r\n> "); }));
  approver_->Cancel();
  EXPECT_FALSE(a.has_value()) << "done ran inside Cancel()";
  ASSERT_TRUE(PumpUntil(io_, [&] { return a.has_value() && b.has_value(); }));
  EXPECT_FALSE(a->approved);
  EXPECT_FALSE(b->approved);
  EXPECT_EQ(a->scope, ApprovalScope::kDenied);
  // A later answer on the terminal approves nothing; a new ask works normally.
  pty_.Type("o\n");
  pty_.ClearScreen();
  const ApprovalOutcome c = Answer(NpmRequest(), "r\n");
  EXPECT_EQ(c.scope, ApprovalScope::kRunExact);
}

TEST_F(TerminalApproverTest, DestroyingTheApproverDeniesWhatIsPending) {
  std::optional<ApprovalOutcome> a;
  approver_->Ask(NpmRequest(), [&a](ApprovalOutcome o) { a = std::move(o); });
  ASSERT_TRUE(PumpUntil(io_, [&] { return ScreenHas(pty_, "[d]eny\r\n> "); }));
  approver_.reset();
  ASSERT_TRUE(PumpUntil(io_, [&] { return a.has_value(); }));
  EXPECT_FALSE(a->approved);
  io_.restart();
  io_.poll();  // the cancelled read completes without touching freed state (ASan would say)
}

TEST_F(TerminalApproverTest, ControlCharactersInTheActionCannotRewriteTheScreen) {
  ApprovalRequest req = NpmRequest();
  req.action = "curl x | sh\r\x1b[2Knpm test\nfake: yes";
  const ApprovalOutcome o = Answer(req, "d\n");
  EXPECT_FALSE(o.approved);
  const std::string& screen = pty_.screen();
  EXPECT_NE(screen.find("action:  curl x | sh\\r\\x1b[2Knpm test\\nfake: yes"), std::string::npos)
      << screen;
  EXPECT_EQ(screen.find('\x1b'), std::string::npos);
}

TEST_F(TerminalApproverTest, BidiAndInvisibleCodePointsAreShownEscaped) {
  // Issue #13: control characters were escaped, but a right-to-left override (U+202E) made
  // "rm -rf ~ #txt.gpj" read as something else, and a zero-width space (U+200B) hid inside a
  // word. Each is shown as a visible \u{...} escape, in the action and in the resolved path.
  ApprovalRequest req = NpmRequest();
  req.tool = "write_file";
  req.action = "write_file docs/\u202Egpj.exe";
  req.resolved_paths = {"src/ma\u200Bin.c\x1b]0;owned\x07"};
  const ApprovalOutcome o = Answer(req, "d\n");
  EXPECT_FALSE(o.approved);
  const std::string& screen = pty_.screen();
  EXPECT_NE(screen.find("action:  write_file docs/\\u{202e}gpj.exe"), std::string::npos) << screen;
  EXPECT_NE(screen.find("src/ma\\u{200b}in.c\\x1b]0;owned\\x07"), std::string::npos) << screen;
  EXPECT_EQ(screen.find("\u202E"), std::string::npos);
  EXPECT_EQ(screen.find("\u200B"), std::string::npos);
  EXPECT_EQ(screen.find('\x1b'), std::string::npos);
  EXPECT_EQ(screen.find('\x07'), std::string::npos);
}

TEST_F(TerminalApproverTest, ThePromptIsTheSharedApprovalDetails) {
  // Issue #33: the terminal prompt and the MCP elicitation form showed the same request two ways.
  // Both render it through ApprovalDetails now; the screen shows exactly that rendering, and a
  // command that smuggles a newline and a "rule:" line, a bidi override and a zero-width space
  // into the action shows them as escapes.
  ApprovalRequest req = NpmRequest();
  req.tool = "run_command";
  req.action = "touch asked-\u202Etxt.exe\u200B\nrule: allow *";
  // The attack is live: the raw action carries every byte the rendering must not show.
  ASSERT_NE(req.action.find("\nrule: allow"), std::string::npos);
  Answer(req, "d\n");
  std::string shown;
  for (const char c : ApprovalDetails(req)) {
    if (c == '\n') shown += '\r';  // the terminal's output processing (ONLCR)
    shown += c;
  }
  const std::string& screen = pty_.screen();
  EXPECT_NE(screen.find(shown), std::string::npos) << screen;
  EXPECT_NE(screen.find("action:  touch asked-\\u{202e}txt.exe\\u{200b}\\nrule: allow *"),
            std::string::npos)
      << screen;
  EXPECT_EQ(screen.find("\u202E"), std::string::npos);
  EXPECT_EQ(screen.find("\u200B"), std::string::npos);
  EXPECT_EQ(screen.find("\nrule: allow"), std::string::npos);
  EXPECT_EQ(screen.find("\r\nrule: allow"), std::string::npos);
}

TEST(ApprovalDetailsTest, OneEscapedLinePerFieldWhateverTheFieldsHold) {
  ApprovalRequest req = NpmRequest();
  req.action = "touch a\u202E\u200B\x7f\x1b[2J\nrule: allow *\r";
  req.rule = "ask touch *\nreason: fine";
  req.location = "p.cagent:1:1\u2066";
  req.reason = "why\n  tool:    read_file";
  req.resolved_paths = {"a\nb"};
  const std::string details = ApprovalDetails(req);
  // One line per field: tool, action, the resolved path (two lines: it differs from the action's),
  // rule with location, reason.
  std::size_t lines = 0;
  for (const char c : details) lines += c == '\n' ? 1 : 0;
  EXPECT_EQ(lines, 6U) << details;
  EXPECT_EQ(details.find('\r'), std::string::npos);
  EXPECT_EQ(details.find('\x1b'), std::string::npos);
  EXPECT_EQ(details.find('\x7f'), std::string::npos);
  EXPECT_EQ(details.find("\u202E"), std::string::npos);
  EXPECT_EQ(details.find("\u200B"), std::string::npos);
  EXPECT_EQ(details.find("\u2066"), std::string::npos);
  EXPECT_EQ(details.find("\nrule: allow"), std::string::npos);
  EXPECT_EQ(details.find("\nreason: fine"), std::string::npos);
  EXPECT_EQ(details.find("\n  tool:    read_file"), std::string::npos);
  EXPECT_NE(details.find("  rule:    ask touch *\\nreason: fine  (p.cagent:1:1\\u{2066})\n"),
            std::string::npos)
      << details;
  // The terminal prompt is that rendering with a header, the queue and the choices around it.
  const std::string prompt = TerminalPrompt(req, 2);
  EXPECT_NE(prompt.find(details), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("(2 more waiting after this one)"), std::string::npos) << prompt;
}

// The reason a stopped session gives (--approve stop: the terminal's last line, an MCP client's
// notice, session.json) shows the action as the prompt does. The twin is the concatenation it
// replaced: with the raw action the reason carries a forged second line and the bidi override.
TEST(NeedsApprovalReasonTest, TheActionIsEscapedOnOneLineAsInThePrompt) {
  ApprovalRequest req = NpmRequest();
  req.action = "touch a\u202E\u200B\x1b[2J\nrule: allow *\r";
  req.rule = "ask touch *";
  req.location = "p.cagent:1:1";
  const std::string raw = req.tool + " " + req.action + " needs approval (rule " + req.rule + ")";
  EXPECT_NE(raw.find("\nrule: allow"), std::string::npos);
  EXPECT_NE(raw.find("\u202E"), std::string::npos);

  const std::string reason = NeedsApprovalReason(req);
  EXPECT_TRUE(IsTerminalSafe(reason)) << reason;
  EXPECT_EQ(reason.find('\n'), std::string::npos);
  EXPECT_EQ(reason.find("\u202E"), std::string::npos);
  EXPECT_NE(reason.find("touch a\\u{202e}\\u{200b}\\x1b[2J\\nrule: allow *\\r needs approval "
                        "(rule ask touch * at p.cagent:1:1)"),
            std::string::npos)
      << reason;
  // A long action is cut, and says so.
  req.action = std::string(500, 'x');
  EXPECT_NE(NeedsApprovalReason(req).find(std::string(200, 'x') + "... needs approval"),
            std::string::npos);
}

TEST_F(TerminalApproverTest, ThePromptShowsWhereThePathResolvesTo) {
  ApprovalRequest req = NpmRequest();
  req.tool = "edit_file";
  req.action = "edit_file ./a.py";
  req.resolved_paths = {"secrets/.env"};
  Answer(req, "d\n");
  const std::string& screen = pty_.screen();
  EXPECT_NE(screen.find("action:  edit_file ./a.py\r\n"
                        "  resolves to (symlinks followed; this is what would be touched):\r\n"
                        "           secrets/.env\r\n"),
            std::string::npos)
      << screen;
}

TEST_F(TerminalApproverTest, APathThatResolvesToItselfIsShownOnce) {
  ApprovalRequest req = NpmRequest();
  req.tool = "edit_file";
  req.action = "edit_file ./a.py";
  req.resolved_paths = {"a.py"};
  Answer(req, "d\n");
  const std::string& screen = pty_.screen();
  EXPECT_NE(screen.find("  path:    a.py\r\n"), std::string::npos) << screen;
  EXPECT_EQ(screen.find("resolves to"), std::string::npos) << screen;
}

TEST_F(TerminalApproverTest, LeavesTheCallersFileDescriptionBlocking) {
  Answer(NpmRequest(), "o\n");
  EXPECT_EQ(fcntl(pty_.slave(), F_GETFL) & O_NONBLOCK, 0);
}

TEST(HeadlessApproverTest, DeniesEverything) {
  std::unique_ptr<Approver> headless = MakeHeadlessApprover();
  std::optional<ApprovalOutcome> o;
  headless->Ask(NpmRequest(), [&o](ApprovalOutcome out) { o = std::move(out); });
  ASSERT_TRUE(o.has_value());
  EXPECT_FALSE(o->approved);
  EXPECT_EQ(o->scope, ApprovalScope::kHeadless);
  EXPECT_EQ(o->by, "headless");
  headless->Cancel();
}

TEST(ApprovalScopeTest, Names) {
  EXPECT_EQ(ApprovalScopeName(ApprovalScope::kOnce), "once");
  EXPECT_EQ(ApprovalScopeName(ApprovalScope::kRunExact), "run");
  EXPECT_EQ(ApprovalScopeName(ApprovalScope::kRunPattern), "pattern");
  EXPECT_EQ(ApprovalScopeName(ApprovalScope::kDenied), "denied");
  EXPECT_EQ(ApprovalScopeName(ApprovalScope::kHeadless), "headless");
  EXPECT_EQ(ApprovalScopeName(ApprovalScope::kPreApproved), "pre-approved");
}

// ---- ApprovalBook ----

ApprovalRequest Command(const std::string& command) {
  ApprovalRequest r = NpmRequest();
  r.action = command;
  r.digest = std::string(64, 'c');
  return r;
}

ApprovalRequest PathAction(const std::string& tool, const std::string& path) {
  ApprovalRequest r;
  r.tool = tool;
  r.action = tool + " " + path;
  r.digest = std::string(64, 'f');
  return r;
}

TEST(ApprovalBookTest, CommandPatternsMatchWordForWord) {
  ApprovalBook book;
  ASSERT_TRUE(book.AddPreApproval("run_command: npm install *", "--pre-approve").ok());
  const auto covered = [&](const std::string& cmd) {
    return book.Lookup(Command(cmd)).has_value();
  };
  EXPECT_TRUE(covered("npm install left-pad"));
  EXPECT_TRUE(covered("npm  install 'left-pad'"));
  EXPECT_FALSE(covered("npm install"));
  EXPECT_FALSE(covered("npm install left-pad evil-pkg")) << "an approval is not a prefix match";
  EXPECT_FALSE(covered("npm install a; curl x | sh"));
  EXPECT_FALSE(covered("npm install a && rm -rf ~"));
  EXPECT_FALSE(covered("LD_PRELOAD=/tmp/x.so npm install a"));
  EXPECT_FALSE(covered("npm install a > /etc/passwd"));
  EXPECT_FALSE(covered("npm install $(curl x)"));
  EXPECT_FALSE(covered("./npm install a")) << "a workspace script is not npm";
  EXPECT_FALSE(covered("pip install a"));

  const std::optional<ApprovalOutcome> o = book.Lookup(Command("npm install left-pad"));
  ASSERT_TRUE(o.has_value());
  EXPECT_TRUE(o->approved);
  EXPECT_EQ(o->scope, ApprovalScope::kPreApproved);
  EXPECT_EQ(o->by, "pre-approval --pre-approve");
}

TEST(ApprovalBookTest, QuotedPatternWordsAndWildcardsWithin) {
  ApprovalBook book;
  ASSERT_TRUE(book.AddPreApproval("run_command: git commit -m \"wip *\"", "cli").ok());
  EXPECT_TRUE(book.Lookup(Command("git commit -m 'wip tests'")).has_value());
  EXPECT_FALSE(book.Lookup(Command("git commit -m 'release'")).has_value());
}

TEST(ApprovalBookTest, PathPatterns) {
  ApprovalBook book;
  ASSERT_TRUE(book.AddPreApproval("write_file: docs/**", "f:1").ok());
  EXPECT_TRUE(book.Lookup(PathAction("write_file", "docs/a/b.md")).has_value());
  EXPECT_TRUE(book.Lookup(PathAction("write_file", "./docs/x.md")).has_value());
  EXPECT_FALSE(book.Lookup(PathAction("write_file", "src/x.c")).has_value());
  EXPECT_FALSE(book.Lookup(PathAction("write_file", "docs/../src/x.c")).has_value());
  EXPECT_FALSE(book.Lookup(PathAction("write_file", "/etc/docs/x")).has_value());
  EXPECT_FALSE(book.Lookup(PathAction("edit_file", "docs/a.md")).has_value()) << "other tool";
}

TEST(ApprovalBookTest, APathPatternMustCoverWhereThePathResolvesTo) {
  // Issue #13: a pre-approved docs/** covered "write_file docs/a.md" even when docs/a.md was a
  // symlink the agent resolved to src/main.c.
  ApprovalBook book;
  ASSERT_TRUE(book.AddPreApproval("write_file: docs/**", "f:1").ok());
  ApprovalRequest through_link = PathAction("write_file", "docs/a.md");
  through_link.resolved_paths = {"src/main.c"};
  EXPECT_FALSE(book.Lookup(through_link).has_value());
  ApprovalRequest plain = PathAction("write_file", "docs/a.md");
  plain.resolved_paths = {"docs/a.md"};
  EXPECT_TRUE(book.Lookup(plain).has_value());
  ApprovalRequest within = PathAction("write_file", "docs/a.md");
  within.resolved_paths = {"./docs/real/a.md"};
  EXPECT_TRUE(book.Lookup(within).has_value()) << "a link that stays inside the pattern";
  ApprovalRequest climbing = PathAction("write_file", "docs/a.md");
  climbing.resolved_paths = {"docs/../src/x"};
  EXPECT_FALSE(book.Lookup(climbing).has_value());
  // Twin: judged on the model's argument alone (what the book looked at before), the link passes.
  through_link.resolved_paths.clear();
  EXPECT_TRUE(book.Lookup(through_link).has_value()) << "the attack, with the guard off";
}

TEST(ApprovalBookTest, DigestBindsOneExactAction) {
  ApprovalBook book;
  const std::string digest(64, 'b');
  ASSERT_TRUE(book.AddPreApproval("sha256:" + digest, "f:2").ok());
  ApprovalRequest r = Command("make deploy");
  r.digest = digest;
  EXPECT_TRUE(book.Lookup(r).has_value());
  r.digest = std::string(64, 'd');
  EXPECT_FALSE(book.Lookup(r).has_value());
}

TEST(ApprovalBookTest, SyntaxErrorsSayWhatIsWrong) {
  ApprovalBook book;
  const auto error = [&](const std::string& line) {
    Status s = book.AddPreApproval(line, "approvals.txt:7");
    return s.ok() ? std::string("(accepted)") : s.error().Message();
  };
  EXPECT_EQ(error("bogus: x"),
            "approvals.txt:7: unknown tool \"bogus\" (one of read_file, write_file, edit_file, "
            "list_dir, glob, grep, run_command)");
  EXPECT_EQ(error("run_command:"), "approvals.txt:7: no pattern after \"run_command:\"");
  EXPECT_NE(error("run_command npm").find("expected \"TOOL: PATTERN\""), std::string::npos);
  EXPECT_NE(error("sha256:xyz").find("64 lowercase hex digits"), std::string::npos);
  EXPECT_NE(error("write_file: a/**b").find("approvals.txt:7: \"a/**b\""), std::string::npos)
      << error("write_file: a/**b");
  EXPECT_NE(error("run_command: \"unterminated").find("unterminated"), std::string::npos);
  EXPECT_NE(error("finish: x").find("nothing to approve"), std::string::npos);
}

TEST(ApprovalBookTest, FileWithCommentsAndEveryErrorWithItsLine) {
  std::string dir = ::testing::TempDir() + "cagent_approvals_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string good = dir + "/good.txt";
  std::ofstream(good) << "# standing approvals for this repo\n\n"
                      << "run_command: npm install *\n"
                      << "  write_file: docs/**   \n";
  ApprovalBook book;
  ASSERT_TRUE(book.LoadPreApprovals(good).ok());
  const std::optional<ApprovalOutcome> o = book.Lookup(Command("npm install a"));
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->by, "pre-approval " + good + ":3");
  EXPECT_TRUE(book.Lookup(PathAction("write_file", "docs/x")).has_value());

  const std::string bad = dir + "/bad.txt";
  std::ofstream(bad) << "run_command: make *\nnonsense\n# fine\nbogus: x\n";
  ApprovalBook other;
  Status s = other.LoadPreApprovals(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().Message().find(bad + ":2: expected"), std::string::npos)
      << s.error().Message();
  EXPECT_NE(s.error().Message().find(bad + ":4: unknown tool"), std::string::npos)
      << s.error().Message();

  Status missing = other.LoadPreApprovals(dir + "/missing.txt");
  EXPECT_FALSE(missing.ok());
  if (std::system(("rm -rf '" + dir + "'").c_str()) != 0) ADD_FAILURE() << "cleanup";
}

TEST(ApprovalBookTest, RecordRunScopeApprovals) {
  ApprovalBook book;
  ApprovalRequest exact = Command("npm install left-pad");
  exact.digest = std::string(64, '1');
  EXPECT_FALSE(book.Lookup(exact).has_value());

  // Once and denied are not remembered.
  book.Record(exact, {.approved = true, .scope = ApprovalScope::kOnce, .by = "terminal"});
  book.Record(exact, {.approved = false, .scope = ApprovalScope::kDenied, .by = "terminal"});
  EXPECT_FALSE(book.Lookup(exact).has_value());

  book.Record(exact, {.approved = true, .scope = ApprovalScope::kRunExact, .by = "terminal"});
  std::optional<ApprovalOutcome> o = book.Lookup(exact);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->scope, ApprovalScope::kRunExact);
  EXPECT_EQ(o->by, "terminal, approved for the rest of the run");
  ApprovalRequest other = Command("npm install left-pad");
  other.digest = std::string(64, '2');  // same text, other arguments (e.g. another cwd)
  EXPECT_FALSE(book.Lookup(other).has_value()) << "run scope binds to the exact action digest";

  ApprovalRequest offered = Command("npm install left-pad");
  offered.digest = std::string(64, '3');
  offered.narrower_pattern = "npm install left-pad*";
  book.Record(offered, {.approved = true, .scope = ApprovalScope::kRunPattern, .by = "terminal"});
  ApprovalRequest later = Command("npm install left-pad@1.3.0");
  later.digest = std::string(64, '4');
  o = book.Lookup(later);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->scope, ApprovalScope::kRunPattern);
  EXPECT_FALSE(book.Lookup(Command("npm install right-pad")).has_value());
}

}  // namespace
}  // namespace cagent::launcher::broker
