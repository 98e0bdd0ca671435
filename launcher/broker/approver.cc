#include "launcher/broker/approver.h"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <cstdio>
#include <deque>
#include <fstream>
#include <string_view>
#include <utility>
#include <variant>

#include "common/terminal_text.h"
#include "common/text.h"
#include "policy/language/ir.h"
#include "policy/match/glob.h"
#include "policy/match/hosts.h"
#include "policy/match/shell.h"

namespace cagent::launcher::broker {

std::string_view ApprovalScopeName(ApprovalScope scope) {
  switch (scope) {
    case ApprovalScope::kOnce:
      return "once";
    case ApprovalScope::kRunExact:
      return "run";
    case ApprovalScope::kRunPattern:
      return "pattern";
    case ApprovalScope::kDenied:
      return "denied";
    case ApprovalScope::kHeadless:
      return "headless";
    case ApprovalScope::kPreApproved:
      return "pre-approved";
  }
  return "denied";
}

namespace {

namespace asio = boost::asio;

bool IsLowerHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Splits an approval pattern into words the way the policy language writes them (ir.h QuoteWord):
// bare words separated by blanks, or "..." with \" \\ \n \t escapes. Each word is a word glob.
Result<std::vector<std::string>> SplitPatternWords(std::string_view text) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ' || text[i] == '\t') {
      ++i;
      continue;
    }
    std::string word;
    if (text[i] == '"') {
      ++i;
      bool closed = false;
      while (i < text.size()) {
        const char c = text[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\' && i < text.size()) {
          const char e = text[i++];
          word += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        } else {
          word += c;
        }
      }
      if (!closed) return PlainError("pattern", "unterminated \" in \"" + std::string(text) + "\"");
      if (word.empty()) return PlainError("pattern", "empty quoted word");
    } else {
      while (i < text.size() && text[i] != ' ' && text[i] != '\t') word += text[i++];
    }
    words.push_back(std::move(word));
  }
  if (words.empty()) return PlainError("pattern", "empty pattern");
  return words;
}

bool IsPathTool(policy::Tool t) {
  return t != policy::Tool::kRunCommand && t != policy::Tool::kFinish;
}

// Checks that `pattern` compiles for `tool`; the error says what is wrong with it.
Status CheckPattern(policy::Tool tool, const std::string& pattern) {
  if (tool == policy::Tool::kFinish) {
    return PlainError("pattern", "finish takes no arguments; nothing to approve");
  }
  if (!IsPathTool(tool)) {
    Result<std::vector<std::string>> words = SplitPatternWords(pattern);
    if (!words.ok()) return std::move(words.error());
    for (const std::string& w : *words) {
      Result<policy::WordGlob> g = policy::WordGlob::Compile(w);
      if (!g.ok()) return PlainError("pattern", "\"" + w + "\": " + g.error().Message());
    }
    return Ok{};
  }
  Result<policy::PathGlob> g = policy::PathGlob::Compile(pattern);
  if (!g.ok()) return PlainError("pattern", "\"" + pattern + "\": " + g.error().Message());
  return Ok{};
}

// Lexically normalised relative or absolute path ("./a//b" -> "a/b"); nullopt when it has a ".."
// component (an approval never covers a path by way of climbing out of somewhere).
std::optional<std::string> NormalisePath(std::string_view path) {
  std::string out = !path.empty() && path[0] == '/' ? "/" : "";
  std::size_t i = 0;
  bool first = true;
  while (i <= path.size()) {
    std::size_t slash = path.find('/', i);
    if (slash == std::string_view::npos) slash = path.size();
    const std::string_view part = path.substr(i, slash - i);
    i = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") return std::nullopt;
    if (!first) out += '/';
    out += part;
    first = false;
  }
  if (out.empty()) out = ".";
  return out;
}

// Whether the command pattern `pattern` covers `command`. Unlike profile rules (prefix matches),
// an approval covers exactly what its words describe: one word of the pattern per argv word, so
// "npm install *" covers "npm install left-pad" but not "npm install left-pad evil-pkg". Only a
// command line that is one plain simple command qualifies: no ; && | or nested sh -c (the other
// commands would ride along), no leading VAR=value (LD_PRELOAD=...), no redirections, nothing
// opaque. A command name with a '/' is covered only by a pattern word with a '/' (as for allow
// rules: a workspace script ./npm is not npm).
bool CommandPatternCovers(const std::string& pattern, const std::string& command) {
  const policy::ShellParse parsed = policy::ParseShell(command);
  if (parsed.opaque || parsed.commands.size() != 1) return false;
  const policy::SimpleCommand& cmd = parsed.commands[0];
  if (!cmd.assignments.empty() || !cmd.writes.empty() || !cmd.reads.empty()) return false;
  Result<std::vector<std::string>> words = SplitPatternWords(pattern);
  if (!words.ok() || words->size() != cmd.argv.size()) return false;
  if (cmd.argv[0].find('/') != std::string::npos && (*words)[0].find('/') == std::string::npos) {
    return false;
  }
  for (std::size_t i = 0; i < cmd.argv.size(); ++i) {
    Result<policy::WordGlob> g = policy::WordGlob::Compile((*words)[i]);
    if (!g.ok() || !g->Match(cmd.argv[i])) return false;
  }
  return true;
}

// The path of a path tool's action ("write_file docs/a.md", as tool_mapping.h builds it).
std::optional<std::string> ActionPath(const ApprovalRequest& request) {
  const std::string prefix = request.tool + " ";
  if (request.action.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  return NormalisePath(std::string_view{request.action}.substr(prefix.size()));
}

bool PathPatternCovers(const std::string& pattern, const ApprovalRequest& request) {
  const std::optional<std::string> path = ActionPath(request);
  if (!path) return false;
  Result<policy::PathGlob> g = policy::PathGlob::Compile(pattern);
  if (!g.ok()) return false;
  const auto matches = [&g](const std::string& p) {
    return g->IsAbsolute() == (!p.empty() && p[0] == '/') && g->Match(p);
  };
  if (!matches(*path)) return false;
  // What the call really touches must be covered as well: the path the model named may be a
  // symlink to a file the operator never approved.
  for (const std::string& resolved : request.resolved_paths) {
    const std::optional<std::string> norm = NormalisePath(resolved);
    if (!norm || !matches(*norm)) return false;
  }
  return true;
}

// Shows text from the agent (an action, a path) or the profile so that it cannot steer the
// terminal or read as something else: one line, every control character, ESC, C1 control, bidi
// override and invisible code point escaped (common/terminal_text.h).
std::string Printable(std::string_view s) { return TerminalSafe(s, TerminalLines::kOne); }

// The normalised path of the action ("edit_file ./a.py" -> "a.py"), for comparing with where it
// resolved to; the raw text when it climbs.
std::string NamedPath(const ApprovalRequest& r);

// "  paths:   a.py" lines for a path tool; when the resolution differs from the path the action
// names (a symlink on the way), it says so, since that is what the approval is for.
std::string ResolvedLines(const ApprovalRequest& r) {
  if (r.resolved_paths.empty()) return {};
  constexpr std::size_t kShown = 10;
  const std::string named = NamedPath(r);
  if (r.resolved_paths.size() == 1 && r.resolved_paths[0] == named) {
    return "  path:    " + Printable(named) + "\n";
  }
  std::string out = "  resolves to (symlinks followed; this is what would be touched):\n";
  for (std::size_t i = 0; i < r.resolved_paths.size() && i < kShown; ++i) {
    out += "           " + Printable(r.resolved_paths[i]) + "\n";
  }
  if (r.resolved_paths.size() > kShown) {
    out += "           and " + std::to_string(r.resolved_paths.size() - kShown) + " more\n";
  }
  return out;
}

std::string NamedPath(const ApprovalRequest& r) {
  const std::string prefix = r.tool + " ";
  if (r.action.compare(0, prefix.size(), prefix) != 0) return r.action;
  const std::string_view raw = std::string_view{r.action}.substr(prefix.size());
  return NormalisePath(raw).value_or(std::string(raw));
}

std::string Choices(const ApprovalRequest& r) {
  std::string out = "[o]nce  [r]un (this exact action for the rest of the run)  ";
  if (!r.narrower_pattern.empty()) {
    out += "[p]attern " + Printable(r.narrower_pattern) + "  ";
  }
  out += "[d]eny";
  return out;
}

std::string Prompt(const ApprovalRequest& r, std::size_t waiting) {
  std::string out =
      r.tool == "host"
          ? "\ncagent: the sandbox asks to connect to a host the policy wants a person to "
            "approve\n"
          : "\ncagent: the agent asks to run something the policy wants a person to approve\n";
  out += ApprovalDetails(r);
  if (waiting > 0) out += "  (" + std::to_string(waiting) + " more waiting after this one)\n";
  out += Choices(r) + "\n> ";
  return out;
}

// One operator answer; nullopt when the line is not a valid answer for this request.
std::optional<ApprovalScope> ParseAnswer(std::string_view line, bool pattern_offered) {
  line = TrimSpace(line);
  std::string lower;
  for (char c : line) lower += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  // y / yes approve once, the narrowest approval, and n / no deny: what a reflexive answer to a
  // yes/no question should mean.
  if (lower == "o" || lower == "once" || lower == "y" || lower == "yes") {
    return ApprovalScope::kOnce;
  }
  if (lower == "r" || lower == "run") return ApprovalScope::kRunExact;
  if (pattern_offered && (lower == "p" || lower == "pattern")) return ApprovalScope::kRunPattern;
  if (lower == "d" || lower == "deny" || lower == "n" || lower == "no") {
    return ApprovalScope::kDenied;
  }
  return std::nullopt;
}

class HeadlessApprover final : public Approver {
 public:
  void Ask(const ApprovalRequest& /*request*/, std::function<void(ApprovalOutcome)> done) override {
    done(ApprovalOutcome{.approved = false, .scope = ApprovalScope::kHeadless, .by = "headless"});
  }
  void Cancel() override {}
};

// The terminal approver's state lives in a shared_ptr that every pending handler holds, so a
// handler that runs after the approver was destroyed (Asio completes cancelled operations later)
// finds its state alive and `closed` set, and does nothing.
class TerminalState : public std::enable_shared_from_this<TerminalState> {
 public:
  TerminalState(asio::io_context& io, int fd) : io_(io), tty_(io, fd), fd_(fd) {}

  void Ask(const ApprovalRequest& request, std::function<void(ApprovalOutcome)> done) {
    if (closed_) {
      Complete(std::move(done), Denied("cancelled: the run is ending"));
      return;
    }
    queue_.push_back(Pending{request, std::move(done)});
    if (!busy_) {
      // Started from the io_context rather than here, so asks made together are all queued when
      // the first prompt is drawn (it says how many wait) and `done` never runs inside Ask().
      busy_ = true;
      auto self = shared_from_this();
      const std::uint64_t gen = generation_;
      asio::post(io_, [self, gen] {
        if (!self->closed_ && gen == self->generation_) self->StartNext();
      });
    }
  }

  // Completes every pending ask as denied (posted, so `done` never runs inside Cancel's caller).
  void Cancel() {
    boost::system::error_code ignored;
    tty_.cancel(ignored);
    ++generation_;  // handlers of the cancelled read/write are stale now
    busy_ = false;
    while (!queue_.empty()) {
      Complete(std::move(queue_.front().done), Denied("cancelled: the run is ending"));
      queue_.pop_front();
    }
    buffer_.clear();
  }

  void Close() {
    Cancel();
    closed_ = true;
    boost::system::error_code ignored;
    tty_.close(ignored);
  }

 private:
  struct Pending {
    ApprovalRequest request;
    std::function<void(ApprovalOutcome)> done;
  };

  static ApprovalOutcome Denied(std::string by) {
    return ApprovalOutcome{.approved = false, .scope = ApprovalScope::kDenied, .by = std::move(by)};
  }

  void Complete(std::function<void(ApprovalOutcome)> done, ApprovalOutcome outcome) {
    asio::post(io_, [done = std::move(done), outcome = std::move(outcome)]() mutable {
      done(std::move(outcome));
    });
  }

  void StartNext() {
    if (queue_.empty() || closed_) {
      busy_ = false;
      return;
    }
    busy_ = true;
    // Typeahead is discarded before a new question: keys pressed before the operator could see
    // this action (say, an Enter meant for something else, or a stray "o") must not answer it.
    if (isatty(fd_)) tcflush(fd_, TCIFLUSH);
    buffer_.clear();
    Write(Prompt(queue_.front().request, queue_.size() - 1));
  }

  void Write(std::string text) {
    auto self = shared_from_this();
    auto data = std::make_shared<std::string>(std::move(text));
    const std::uint64_t gen = generation_;
    asio::async_write(
        tty_, asio::buffer(*data),
        [self, data, gen](const boost::system::error_code& ec, std::size_t) {
          if (self->closed_ || gen != self->generation_) return;
          if (ec) {
            self->Finish(Denied("terminal (cannot write the prompt: " + ec.message() + ")"));
            return;
          }
          self->Read();
        });
  }

  void Read() {
    auto self = shared_from_this();
    const std::uint64_t gen = generation_;
    asio::async_read_until(tty_, asio::dynamic_buffer(buffer_, kMaxLine), '\n',
                           [self, gen](const boost::system::error_code& ec, std::size_t n) {
                             if (self->closed_ || gen != self->generation_) return;
                             self->OnLine(ec, n);
                           });
  }

  void OnLine(const boost::system::error_code& ec, std::size_t n) {
    if (ec == asio::error::not_found) {  // a line longer than kMaxLine: not an answer
      buffer_.clear();
      Write("cagent: that line is too long to be an answer.\n" + Choices(queue_.front().request) +
            "\n> ");
      return;
    }
    if (ec) {
      // End of input (Ctrl-D, or the terminal went away: EIO on a hung-up tty) means nobody is
      // there to approve: deny.
      Finish(Denied(ec == asio::error::eof ? "terminal (end of input)"
                                           : "terminal (" + ec.message() + ")"));
      return;
    }
    const std::string line = buffer_.substr(0, n);
    buffer_.erase(0, n);
    const ApprovalRequest& request = queue_.front().request;
    const std::optional<ApprovalScope> scope = ParseAnswer(line, !request.narrower_pattern.empty());
    if (!scope) {
      Write("cagent: please answer with one of: " + Choices(request) + "\n> ");
      return;
    }
    Finish(ApprovalOutcome{
        .approved = *scope != ApprovalScope::kDenied, .scope = *scope, .by = "terminal"});
  }

  void Finish(ApprovalOutcome outcome) {
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    Complete(std::move(p.done), std::move(outcome));
    StartNext();
  }

  static constexpr std::size_t kMaxLine = 4096;

  asio::io_context& io_;
  asio::posix::stream_descriptor tty_;
  int fd_;  // owned by tty_; kept for isatty/tcflush
  std::deque<Pending> queue_;
  std::string buffer_;
  std::uint64_t generation_ = 0;
  bool busy_ = false;
  bool closed_ = false;
};

class TerminalApprover final : public Approver {
 public:
  explicit TerminalApprover(std::shared_ptr<TerminalState> state) : state_(std::move(state)) {}
  ~TerminalApprover() override { state_->Close(); }
  TerminalApprover(const TerminalApprover&) = delete;
  TerminalApprover& operator=(const TerminalApprover&) = delete;

  void Ask(const ApprovalRequest& request, std::function<void(ApprovalOutcome)> done) override {
    state_->Ask(request, std::move(done));
  }
  void Cancel() override { state_->Cancel(); }

 private:
  std::shared_ptr<TerminalState> state_;
};

// A file description of our own for the terminal: Asio switches the descriptor it reads to
// O_NONBLOCK, which is a property of the open file description; on a plain dup() that would leak
// into the caller's stdin/stdout. Re-opening the terminal through /proc/self/fd gives a separate
// description; dup() is the fallback when /proc is not there.
int OwnTerminalFd(int tty_fd) {
  const std::string proc = "/proc/self/fd/" + std::to_string(tty_fd);
  const int fd = open(proc.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0) return fd;
  return fcntl(tty_fd, F_DUPFD_CLOEXEC, 3);
}

}  // namespace

std::string ApprovalDetails(const ApprovalRequest& request) {
  std::string out = "  tool:    " + Printable(request.tool) + "\n";
  out += "  action:  " + Printable(request.action) + "\n";
  out += ResolvedLines(request);
  out += "  rule:    " + Printable(request.rule);
  if (!request.location.empty()) out += "  (" + Printable(request.location) + ")";
  out += "\n";
  if (!request.reason.empty()) out += "  reason:  " + Printable(request.reason) + "\n";
  return out;
}

std::string NeedsApprovalReason(const ApprovalRequest& request) {
  constexpr std::size_t kMaxAction = 200;
  const std::string_view whole = request.action;
  std::string action = Printable(whole.substr(0, kMaxAction));
  if (request.action.size() > kMaxAction) action += "...";
  std::string out =
      Printable(request.tool) + " " + action + " needs approval (rule " + Printable(request.rule);
  if (!request.location.empty()) out += " at " + Printable(request.location);
  return out + ")";
}

std::string TerminalPrompt(const ApprovalRequest& request, std::size_t waiting) {
  return Prompt(request, waiting);
}

std::unique_ptr<Approver> MakeTerminalApprover(boost::asio::io_context& io, int tty_fd) {
  const int fd = OwnTerminalFd(tty_fd);
  if (fd < 0) {
    // No usable terminal: fail closed, as headless.
    return MakeHeadlessApprover();
  }
  return std::make_unique<TerminalApprover>(std::make_shared<TerminalState>(io, fd));
}

std::unique_ptr<Approver> MakeHeadlessApprover() { return std::make_unique<HeadlessApprover>(); }

namespace {

// A `host:` pre-approval's pattern against an egress ask's action, "HOST:PORT".
bool HostPatternCovers(const std::string& pattern, const std::string& action) {
  const std::size_t colon = action.rfind(':');
  if (colon == std::string::npos) return false;
  std::uint16_t port = 0;
  std::string_view digits = action;
  digits.remove_prefix(colon + 1);
  if (std::from_chars(digits.data(), digits.data() + digits.size(), port).ec != std::errc()) {
    return false;
  }
  auto host = policy::NormalizeHost(action.substr(0, colon));
  auto parsed = policy::ParseHostPattern(pattern);
  const auto* p = std::get_if<policy::HostPattern>(&parsed);
  return host && p != nullptr && p->MatchesHost(*host) && p->MatchesPort(port);
}

}  // namespace

Status ApprovalBook::AddPreApproval(const std::string& line, const std::string& source) {
  const std::string_view text = TrimSpace(line);
  constexpr std::string_view kDigestPrefix = "sha256:";
  if (text.substr(0, kDigestPrefix.size()) == kDigestPrefix) {
    const std::string_view digest = TrimSpace(text.substr(kDigestPrefix.size()));
    if (!IsLowerHex64(digest)) {
      return PlainError(source,
                        "\"sha256:\" needs the 64 lowercase hex digits of an action's "
                        "digest (as shown in the audit log's \"args\" field)");
    }
    entries_.push_back(Entry{.tool = {},
                             .pattern = {},
                             .digest = std::string(digest),
                             .source = source,
                             .scope = ApprovalScope::kPreApproved});
    return Ok{};
  }
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return PlainError(source,
                      "expected \"TOOL: PATTERN\" (e.g. \"run_command: npm install *\") "
                      "or \"sha256:DIGEST\", got \"" +
                          std::string(text) + "\"");
  }
  const std::string tool_name(TrimSpace(text.substr(0, colon)));
  const std::string pattern(TrimSpace(text.substr(colon + 1)));
  if (tool_name == "host") {
    // A hosts pattern (policy/match/hosts.h): the egress proxy's asks (EgressGate).
    auto parsed = policy::ParseHostPattern(pattern);
    if (const auto* err = std::get_if<policy::HostPatternError>(&parsed)) {
      return PlainError(source, "host pattern \"" + pattern + "\": " + err->message);
    }
  } else {
    const std::optional<policy::Tool> tool = policy::ParseTool(tool_name);
    if (!tool) {
      return PlainError(source, "unknown tool \"" + tool_name +
                                    "\" (one of read_file, write_file, edit_file, list_dir, glob, "
                                    "grep, run_command)");
    }
    if (pattern.empty()) return PlainError(source, "no pattern after \"" + tool_name + ":\"");
    if (Status ok = CheckPattern(*tool, pattern); !ok.ok()) {
      return PlainError(source,
                        ok.error().detail.empty() ? ok.error().Message() : ok.error().detail);
    }
  }
  entries_.push_back(Entry{.tool = tool_name,
                           .pattern = pattern,
                           .digest = {},
                           .source = source,
                           .scope = ApprovalScope::kPreApproved});
  return Ok{};
}

Status ApprovalBook::LoadPreApprovals(const std::string& file) {
  std::ifstream in(file);
  if (!in) return ErrnoError("read pre-approvals " + file);
  std::string line;
  std::size_t line_no = 0;
  std::vector<std::string> errors;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string_view text = TrimSpace(line);
    if (text.empty() || text[0] == '#') continue;
    Status ok = AddPreApproval(std::string(text), file + ":" + std::to_string(line_no));
    if (!ok.ok()) errors.push_back(ok.error().op + ": " + ok.error().detail);
  }
  if (in.bad()) return ErrnoError("read pre-approvals " + file);
  if (!errors.empty()) {
    // Every bad line, not just the first; nothing from a file with errors is half-applied beyond
    // the good lines, and the caller refuses to start the run on this error anyway.
    std::string all;
    for (const std::string& e : errors) all += (all.empty() ? "" : "\n") + e;
    return PlainError("pre-approvals", all);
  }
  return Ok{};
}

std::optional<ApprovalOutcome> ApprovalBook::Lookup(const ApprovalRequest& request) const {
  const std::optional<policy::Tool> tool = policy::ParseTool(request.tool);
  for (const Entry& e : entries_) {
    bool covers = false;
    if (!e.digest.empty()) {
      covers = !request.digest.empty() && e.digest == request.digest;
    } else if (tool && e.tool == request.tool) {
      covers = IsPathTool(*tool) ? PathPatternCovers(e.pattern, request)
                                 : CommandPatternCovers(e.pattern, request.action);
    } else if (e.tool == "host" && request.tool == "host") {
      covers = HostPatternCovers(e.pattern, request.action);
    }
    if (!covers) continue;
    const std::string by = e.scope == ApprovalScope::kPreApproved
                               ? "pre-approval " + e.source
                               : e.source + ", approved for the rest of the run";
    return ApprovalOutcome{.approved = true, .scope = e.scope, .by = by};
  }
  return std::nullopt;
}

void ApprovalBook::Record(const ApprovalRequest& request, const ApprovalOutcome& outcome) {
  if (!outcome.approved) return;
  const std::string source = outcome.by.empty() ? "operator" : outcome.by;
  if (outcome.scope == ApprovalScope::kRunPattern && !request.narrower_pattern.empty()) {
    const std::optional<policy::Tool> tool = policy::ParseTool(request.tool);
    if (tool && CheckPattern(*tool, request.narrower_pattern).ok()) {
      entries_.push_back(Entry{.tool = request.tool,
                               .pattern = request.narrower_pattern,
                               .digest = {},
                               .source = source,
                               .scope = ApprovalScope::kRunPattern});
      return;
    }
    // A pattern that does not compile falls back to the exact action: never wider than shown.
  }
  if ((outcome.scope == ApprovalScope::kRunExact || outcome.scope == ApprovalScope::kRunPattern) &&
      !request.digest.empty()) {
    entries_.push_back(Entry{.tool = request.tool,
                             .pattern = {},
                             .digest = request.digest,
                             .source = source,
                             .scope = ApprovalScope::kRunExact});
  }
}

}  // namespace cagent::launcher::broker
