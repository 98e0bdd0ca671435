// End-to-end tests of `cagent exec --tty`: the command's own pseudo-terminal.
//
// CI has no terminal, so each test makes one: a pty pair whose slave is cagent's stdin, stdout and
// controlling terminal (as a shell would start it) and whose master plays the person typing and
// the screen. The suite runs as the caller and as nobody like the other e2e tests.
//
// The guard these tests are about is "the caller's terminal never enters the sandbox": TIOCSTI
// from inside lands in the caller's input queue when the terminal is passed through (the twin,
// --no-tty with the session and seccomp layers off), and never with --tty, even with seccomp off.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

bool SameModes(const termios& a, const termios& b) {
  return a.c_iflag == b.c_iflag && a.c_oflag == b.c_oflag && a.c_cflag == b.c_cflag &&
         a.c_lflag == b.c_lflag && std::memcmp(a.c_cc, b.c_cc, sizeof(a.c_cc)) == 0;
}

// cagent running on a terminal of the test's: the "caller's terminal".
class OnTerminal {
 public:
  // `background`: cagent runs as a background job of the terminal's session (`cagent ... &` in a
  // shell), in a process group of its own that is not the terminal's foreground group.
  OnTerminal(const Harness& h, const std::vector<std::string>& args, unsigned short rows = 24,
             unsigned short cols = 80, bool background = false) {
    struct winsize ws {};
    ws.ws_row = rows;
    ws.ws_col = cols;
    if (::openpty(&master_, &slave_, nullptr, nullptr, &ws) != 0) {
      ADD_FAILURE() << "openpty: " << std::strerror(errno);
      return;
    }
    ::fcntl(master_, F_SETFD, FD_CLOEXEC);
    ::fcntl(slave_, F_SETFD, FD_CLOEXEC);
    ::tcgetattr(slave_, &before_);
    int err_pipe[2];
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe2";
      return;
    }
    std::vector<std::string> argv = h.CagentArgv(args);
    auto cargv = CStrings(argv);
    pid_ = ::fork();
    if (pid_ == 0) {
      // As a login shell starts a program: its own session, the terminal as controlling
      // terminal, stdin and stdout; stderr apart so cagent's own messages can be told apart.
      ::setsid();
      ::ioctl(slave_, TIOCSCTTY, 0);
      ::dup2(slave_, 0);
      ::dup2(slave_, 1);
      ::dup2(err_pipe[1], 2);
      if (background) {
        // The session leader stays in the foreground and waits, as the shell would.
        const pid_t job = ::fork();
        if (job == 0) {
          ::setpgid(0, 0);
          ::execv(cargv[0], cargv.data());
          ::_exit(127);
        }
        int status = 0;
        if (job < 0 || ::waitpid(job, &status, 0) != job) ::_exit(126);
        ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
      }
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
    ::close(err_pipe[1]);
    err_fd_ = err_pipe[0];
    start_ = Clock::now();
  }
  ~OnTerminal() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    for (int fd : {master_, slave_, err_fd_}) {
      if (fd >= 0) ::close(fd);
    }
  }
  OnTerminal(const OnTerminal&) = delete;
  OnTerminal& operator=(const OnTerminal&) = delete;

  pid_t pid() const { return pid_; }
  int master() const { return master_; }
  int slave() const { return slave_; }
  const termios& before() const { return before_; }
  const std::string& screen() const { return screen_; }
  const std::string& err() const { return err_; }
  std::chrono::milliseconds elapsed() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start_);
  }
  termios Now() const {
    termios t{};
    ::tcgetattr(slave_, &t);
    return t;
  }

  void Type(const std::string& bytes) const {
    ASSERT_EQ(::write(master_, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }

  // Reads the screen (and cagent's stderr) until `needle` shows up after `from`; false on
  // timeout or when cagent exits first.
  bool WaitFor(const std::string& needle,
               std::chrono::milliseconds timeout = std::chrono::seconds(20), std::size_t from = 0) {
    const auto deadline = Clock::now() + timeout;
    while (screen_.find(needle, from) == std::string::npos) {
      if (Clock::now() > deadline || !Pump(100)) {
        return screen_.find(needle, from) != std::string::npos;
      }
    }
    return true;
  }

  // Waits for cagent to exit, reading the screen meanwhile; its exit code (128+N for signal N),
  // or -1 on timeout.
  int Wait(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto deadline = Clock::now() + timeout;
    while (!exited_ && Clock::now() < deadline) Pump(50);
    if (!exited_) return -1;
    while (Pump(0, /*after_exit=*/true)) {
    }
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }

 private:
  // One poll round; false once cagent has exited (or, after exit, nothing is left to read).
  bool Pump(int ms, bool after_exit = false) {
    struct pollfd fds[2] = {{master_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    const int n = ::poll(fds, 2, ms);
    bool got = false;
    char buf[4096];
    if (n > 0 && (fds[0].revents & POLLIN)) {
      const ssize_t r = ::read(master_, buf, sizeof(buf));
      if (r > 0) {
        screen_.append(buf, static_cast<std::size_t>(r));
        got = true;
      }
    }
    if (n > 0 && (fds[1].revents & (POLLIN | POLLHUP))) {
      const ssize_t r = ::read(err_fd_, buf, sizeof(buf));
      if (r > 0) {
        err_.append(buf, static_cast<std::size_t>(r));
        got = true;
      }
    }
    if (after_exit) return got;
    if (!exited_ && ::waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
    return !exited_;
  }

  int master_ = -1, slave_ = -1, err_fd_ = -1;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
  termios before_{};
  std::string screen_, err_;
  Clock::time_point start_;
};

class TtyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    ws_ = h_.MakeDir("tty");
  }
  std::vector<std::string> Args(const std::vector<std::string>& extra,
                                const std::vector<std::string>& argv) const {
    std::vector<std::string> args = {"exec", "--workspace", ws_, "--ro", h_.bin_dir()};
    args.insert(args.end(), extra.begin(), extra.end());
    args.emplace_back("--");
    args.insert(args.end(), argv.begin(), argv.end());
    return args;
  }
  std::vector<std::string> Sh(const std::vector<std::string>& extra, const std::string& script) {
    return Args(extra, {"/bin/sh", "-c", script});
  }

  Harness& h_ = Harness::Get();
  std::string ws_;
};

// ---- the terminal inside ----

TEST_F(TtyTest, CommandGetsItsOwnPtsAsControllingTerminalWithTheCallersSize) {
  OnTerminal t(h_,
               Sh({"--tty"},
                  "tty; stty size; test -t 0 && test -t 1 && test -t 2 && echo all-tty; "
                  ": </dev/tty && echo ctty-ok"),
               33, 101);
  ASSERT_EQ(t.Wait(), 0) << t.screen() << t.err();
  EXPECT_THAT(t.screen(), HasSubstr("/dev/pts/0\r\n"));  // the sandbox's own devpts instance
  EXPECT_THAT(t.screen(), HasSubstr("33 101\r\n"));
  EXPECT_THAT(t.screen(), HasSubstr("all-tty"));
  EXPECT_THAT(t.screen(), HasSubstr("ctty-ok"));
}

TEST_F(TtyTest, OnByDefaultWhenStdinAndStdoutAreTerminalsAndOffWithNoTty) {
  {
    OnTerminal t(h_, Sh({}, "tty; : </dev/tty && echo ctty-ok"));
    ASSERT_EQ(t.Wait(), 0) << t.screen() << t.err();
    EXPECT_THAT(t.screen(), HasSubstr("/dev/pts/0\r\n"));
    EXPECT_THAT(t.screen(), HasSubstr("ctty-ok"));
  }
  {
    // --no-tty: the caller's terminal as plain stdio, and no controlling terminal at all.
    OnTerminal t(h_, Sh({"--no-tty"},
                        "test -t 0 && echo stdin-is-a-tty; (: </dev/tty) 2>/dev/null || "
                        "echo no-ctty"));
    ASSERT_EQ(t.Wait(), 0) << t.screen() << t.err();
    EXPECT_THAT(t.screen(), HasSubstr("stdin-is-a-tty"));
    EXPECT_THAT(t.screen(), HasSubstr("no-ctty"));
  }
}

TEST_F(TtyTest, OffByDefaultForABackgroundJobOfTheTerminal) {
  // Twin: OnByDefaultWhenStdinAndStdoutAreTerminalsAndOffWithNoTty (the same command in the
  // foreground gets a terminal of its own). Here raw mode would stop cagent with SIGTTOU, and the
  // run would hang stopped instead of printing.
  OnTerminal t(h_, Sh({}, "(: </dev/tty) 2>/dev/null || echo no-ctty; echo bg-done"), 24, 80,
               /*background=*/true);
  ASSERT_EQ(t.Wait(), 0) << t.screen() << t.err();
  EXPECT_THAT(t.screen(), HasSubstr("no-ctty"));
  EXPECT_THAT(t.screen(), HasSubstr("bg-done"));
  EXPECT_TRUE(SameModes(t.Now(), t.before())) << "a background cagent changed the terminal";
}

TEST_F(TtyTest, ExitStatusIsTheCommands) {
  OnTerminal t(h_, Sh({"--tty"}, "exit 7"));
  EXPECT_EQ(t.Wait(), 7) << t.screen() << t.err();
}

TEST_F(TtyTest, InteractiveBashHasJobControl) {
  if (::access("/bin/bash", X_OK) != 0) GTEST_SKIP() << "no /bin/bash on this machine";
  OnTerminal t(h_, Args({"--tty"}, {"/bin/bash", "--norc", "--noprofile", "-i"}));
  t.Type("echo jc=$-; sleep 30 & jobs; kill %1; exit\n");
  ASSERT_EQ(t.Wait(), 0) << t.screen() << t.err();
  EXPECT_THAT(t.screen(), Not(HasSubstr("no job control"))) << t.screen();
  EXPECT_THAT(t.screen(), MatchesRegex("(.|\r|\n)*jc=[a-zA-Z]*m[a-zA-Z]*\r\n(.|\r|\n)*"))
      << t.screen();
  EXPECT_THAT(t.screen(), HasSubstr("[1]")) << t.screen();
}

TEST_F(TtyTest, WindowSizeChangeReachesTheCommand) {
  OnTerminal t(h_,
               Sh({"--tty"},
                  "trap 'stty size; exit 0' WINCH; echo ready; "
                  "i=0; while [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done; exit 3"),
               24, 80);
  ASSERT_TRUE(t.WaitFor("ready")) << t.screen() << t.err();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  struct winsize ws {};
  ws.ws_row = 40;
  ws.ws_col = 120;
  // As a terminal emulator does on a resize: the kernel sends SIGWINCH to cagent.
  ASSERT_EQ(::ioctl(t.master(), TIOCSWINSZ, &ws), 0);
  EXPECT_EQ(t.Wait(), 0) << t.screen() << t.err();
  EXPECT_THAT(t.screen(), HasSubstr("40 120\r\n"));
}

TEST_F(TtyTest, CtrlCKillsTheForegroundJobInside) {
  if (::access("/bin/bash", X_OK) != 0) GTEST_SKIP() << "no /bin/bash on this machine";
  OnTerminal t(h_, Args({"--tty"}, {"/bin/bash", "--norc", "--noprofile", "-i"}));
  // The echo of the typed line must not contain what is waited for: printf assembles it.
  t.Type("printf 'sl%sng\\n' eepi; sleep 30\n");
  ASSERT_TRUE(t.WaitFor("sleeping")) << t.screen() << t.err();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // sleep is the foreground job
  t.Type("\x03");
  // bash, back at its prompt, reports how the job ended: SIGINT, from the pty's line discipline.
  t.Type("echo rc=$?\n");
  ASSERT_TRUE(t.WaitFor("rc=130", std::chrono::seconds(10))) << t.screen() << t.err();
  t.Type("exit\n");
  EXPECT_EQ(t.Wait(), 0) << t.screen() << t.err();
  EXPECT_LT(t.elapsed(), std::chrono::seconds(25)) << "the sleep was not interrupted";
}

TEST_F(TtyTest, StdinFromAPipeIsRelayedAndEndsWithEof) {
  // No terminal at all (as in CI): --tty still makes one; stdin (/dev/null here) ends, which is
  // sent as Ctrl-D, and stderr comes out on stdout with the rest.
  const RunResult r = h_.Run(Sh({"--tty"},
                                "test -t 0 && test -t 1 && echo both-tty; cat; echo cat-ended; "
                                "echo to-stderr >&2"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("both-tty"));
  EXPECT_THAT(r.out, HasSubstr("cat-ended"));
  EXPECT_THAT(r.out, HasSubstr("to-stderr"));
  EXPECT_THAT(r.err, Not(HasSubstr("to-stderr")));
}

TEST_F(TtyTest, FloodOfOutputArrivesWhole) {
  // 8 MiB through the pty's 64 KiB buffers: back-pressure, nothing lost at the end.
  const RunResult r = h_.Run(Sh({"--tty"}, "head -c 8388608 /dev/zero | tr '\\0' x"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.size(), 8388608U);
  EXPECT_EQ(r.out.find_first_not_of('x'), std::string::npos);
}

TEST_F(TtyTest, TtyWithoutTheSessionLayerIsRefusedClearly) {
  const RunResult r = h_.Run(Sh({"--tty", "--disable-layer", "session"}, "true"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tty needs the session layer"));
}

// ---- the caller's terminal ----

TEST_F(TtyTest, CallerTerminalIsRawDuringTheRunAndRestoredAfter) {
  OnTerminal t(h_, Sh({"--tty"}, "echo ready; read x; echo got=$x"));
  ASSERT_TRUE(t.WaitFor("ready")) << t.screen() << t.err();
  const termios during = t.Now();
  EXPECT_EQ(during.c_lflag & (ECHO | ICANON | ISIG), 0U) << "cagent did not make it raw";
  t.Type("abc\r");
  EXPECT_EQ(t.Wait(), 0) << t.screen() << t.err();
  EXPECT_THAT(t.screen(), HasSubstr("got=abc"));
  EXPECT_TRUE(SameModes(t.Now(), t.before())) << "the caller's modes were not restored";
}

TEST_F(TtyTest, CallerTerminalIsRestoredWhenCagentGetsSigterm) {
  OnTerminal t(h_, Sh({"--tty"}, "echo ready; sleep 30"));
  ASSERT_TRUE(t.WaitFor("ready")) << t.screen() << t.err();
  ASSERT_EQ(t.Now().c_lflag & ECHO, 0U);
  ::kill(t.pid(), SIGTERM);  // forwarded to the command, which dies of it
  EXPECT_EQ(t.Wait(std::chrono::seconds(15)), 128 + SIGTERM) << t.screen() << t.err();
  EXPECT_TRUE(SameModes(t.Now(), t.before())) << "the caller's modes were not restored";
}

TEST_F(TtyTest, SigtstpToCagentHandsTheTerminalBackAndSigcontTakesItAgain) {
  OnTerminal t(h_, Sh({"--tty"}, "echo ready; read x; echo got=$x"));
  ASSERT_TRUE(t.WaitFor("ready")) << t.screen() << t.err();
  ::kill(t.pid(), SIGTSTP);
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  pid_t w = 0;
  while ((w = ::waitpid(t.pid(), &status, WUNTRACED | WNOHANG)) == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(w, t.pid());
  ASSERT_TRUE(WIFSTOPPED(status)) << "cagent did not stop";
  EXPECT_TRUE(SameModes(t.Now(), t.before())) << "stopped with the terminal still raw";
  ::kill(t.pid(), SIGCONT);
  // Raw again once it runs in the foreground.
  bool raw_again = false;
  for (int i = 0; i < 100 && !raw_again; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    raw_again = (t.Now().c_lflag & ECHO) == 0;
  }
  EXPECT_TRUE(raw_again);
  t.Type("xyz\r");
  EXPECT_EQ(t.Wait(), 0) << t.screen() << t.err();
  EXPECT_THAT(t.screen(), HasSubstr("got=xyz"));
  EXPECT_TRUE(SameModes(t.Now(), t.before()));
}

// ---- keystroke injection: the twin ----

// What is waiting in the caller's terminal's input queue (what its shell would read next); a
// canonical read returns one line at a time.
std::string PendingInput(int slave) {
  std::string s;
  const int flags = ::fcntl(slave, F_GETFL);
  ::fcntl(slave, F_SETFL, flags | O_NONBLOCK);
  char buf[256];
  ssize_t r;
  while ((r = ::read(slave, buf, sizeof(buf))) > 0) s.append(buf, static_cast<std::size_t>(r));
  ::fcntl(slave, F_SETFL, flags);
  return s;
}

int LegacyTiocsti() {
  std::ifstream legacy("/proc/sys/dev/tty/legacy_tiocsti");
  int v = 1;
  legacy >> v;
  return v;
}

TEST_F(TtyTest, InjectionTwinPassingTheCallersTerminalThroughLetsKeystrokesIn) {
  if (LegacyTiocsti() == 0) {
    GTEST_SKIP() << "dev.tty.legacy_tiocsti=0: this kernel refuses TIOCSTI to everyone, so the "
                    "attack cannot be shown succeeding";
  }
  // Guard off: the caller's terminal goes in as stdin and controlling terminal (--no-tty, no new
  // session) and seccomp, which refuses TIOCSTI on its own, is off too.
  OnTerminal t(h_, Args({"--no-tty", "--disable-layer", "session", "--disable-layer", "seccomp"},
                        {h_.probe(), "inject"}));
  ASSERT_EQ(t.Wait(), 0) << t.screen() << t.err();
  EXPECT_THAT(t.screen(), HasSubstr("ok injected fd0"));
  EXPECT_THAT(t.screen(), HasSubstr("ok injected /dev/tty"));
  // The caller's shell would now run `id` twice.
  EXPECT_EQ(PendingInput(t.slave()), "id\nid\n");
}

TEST_F(TtyTest, InjectionWithTtyNeverReachesTheCallersTerminal) {
  // Guard on, seccomp off: TIOCSTI works, but only on the sandbox's own terminal.
  OnTerminal t(h_, Args({"--tty", "--disable-layer", "seccomp"}, {h_.probe(), "inject"}));
  ASSERT_EQ(t.Wait(), 0) << t.screen() << t.err();
  if (LegacyTiocsti() != 0) {
    EXPECT_THAT(t.screen(), HasSubstr("ok injected fd0"));
    EXPECT_THAT(t.screen(), HasSubstr("ok injected /dev/tty"));
  }
  EXPECT_EQ(PendingInput(t.slave()), "");
}

TEST_F(TtyTest, InjectionWithTtyAndSeccompIsRefusedOutright) {
  OnTerminal t(h_, Args({"--tty"}, {h_.probe(), "inject"}));
  ASSERT_EQ(t.Wait(), 0) << t.screen() << t.err();
  EXPECT_THAT(t.screen(), HasSubstr("fail EPERM TIOCSTI fd0"));
  EXPECT_THAT(t.screen(), HasSubstr("fail EPERM TIOCSTI /dev/tty"));
  EXPECT_EQ(PendingInput(t.slave()), "");
}

}  // namespace
}  // namespace cagent::testing

// ---- the agent-cli profile: a stand-in CLI on its own terminal ----

namespace cagent::testing {
namespace {

// What an agent CLI does at start: checks it has a terminal, reads its API key, keeps state in its
// directory under HOME, works on the workspace. The profile must let all of that happen and
// nothing around it.
constexpr char kFakeCli[] =
    "test -t 0 && test -t 1 && echo on-a-terminal; "
    "test \"$ANTHROPIC_API_KEY\" = sk-test && echo key-passed; "
    "echo other-credential=${GITHUB_TOKEN:-scrubbed}; "
    "echo state > \"$CLAUDE_CONFIG_DIR/session\" && echo state-kept; "
    "(echo '{\"hooks\":1}' > \"$HOME/.claude/settings.json\") 2>/dev/null || echo "
    "settings-read-only; "
    "echo work > \"$PWD/out.txt\" && echo workspace-written; "
    "grep -q SECRET \"$PWD/.env\" 2>/dev/null || echo dotenv-hidden; "
    "ls \"$HOME/.ssh\" >/dev/null 2>&1 || echo rest-of-home-absent; "
    "test -n \"$HTTPS_PROXY\" && echo egress-proxy";

class AgentCliTest : public TtyTest {};

TEST_F(AgentCliTest, FakeCliGetsItsKeyStateAndTerminalAndNothingElse) {
  const std::string home = h_.MakeDir("home");
  WriteFile(home + "/.claude/settings.json", "{}\n");
  WriteFile(home + "/.ssh/id_ed25519", "not for the sandbox\n");
  WriteFile(ws_ + "/.env", "SECRET=1\n");
  h_.GiveToRunUser(home);
  h_.GiveToRunUser(ws_);
  RunOptions o;
  o.extra_env = {"HOME=" + home, "ANTHROPIC_API_KEY=sk-test", "GITHUB_TOKEN=ghp-test"};
  const RunResult r = h_.Run({"exec", "--profile", "agent-cli", "--workspace", ws_, "--tty", "--",
                              "/bin/sh", "-c", kFakeCli},
                             o);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* line : {"on-a-terminal", "key-passed", "other-credential=scrubbed", "state-kept",
                           "settings-read-only", "workspace-written", "dotenv-hidden",
                           "rest-of-home-absent", "egress-proxy"}) {
    EXPECT_THAT(r.out, HasSubstr(line)) << r.out << r.err;
  }
  EXPECT_EQ(ReadFile(home + "/.claude/session"), "state\n");
  EXPECT_EQ(ReadFile(home + "/.claude/settings.json"), "{}\n");
  EXPECT_EQ(ReadFile(ws_ + "/out.txt"), "work\n");
}

TEST_F(AgentCliTest, BaseProfilesKeepTheKeyOut) {
  // The twin of key-passed: a profile extending base scrubs the key, so agent-cli must restate.
  RunOptions o;
  o.extra_env = {"ANTHROPIC_API_KEY=sk-test"};
  h_.GiveToRunUser(ws_);
  const RunResult r = h_.Run({"exec", "--profile", "backend", "--workspace", ws_, "--", "/bin/sh",
                              "-c", "echo key=${ANTHROPIC_API_KEY:-absent}"},
                             o);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("key=absent"));
}

}  // namespace
}  // namespace cagent::testing
