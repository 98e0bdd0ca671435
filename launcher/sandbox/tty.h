// The sandbox's own terminal (`cagent exec --tty`).
//
// The command gets a new pseudo-terminal, never the caller's: its stdin, stdout and stderr are the
// pty's slave and it is the command's controlling terminal, so job control, Ctrl-C and Ctrl-Z work
// inside through the pty's line discipline. cagent holds the only master and relays bytes between
// the caller's terminal (or pipes) and it. The caller's terminal descriptor never enters the
// sandbox, so nothing inside can inject keystrokes into it (TIOCSTI), change its modes or read
// from it behind cagent's back: whatever the command does to a terminal, it does to its own.
//
// The pty is allocated in the sandbox's own devpts instance (the view's /dev/pts, mounted with
// newinstance), so ttyname() inside finds it at /dev/pts/N. The child opens it after the mount
// view is built and before anything untrusted runs, keeps only the slave, and hands the master to
// cagent over a socket; the command never holds a master descriptor.
//
// prepare (parent):          CallerTerminal::Capture, TerminalPlan
// apply-in-child:            OpenSandboxTerminal (after the mount view, before exec)
// parent, after the clone:   ReceiveSandboxTerminal, then TerminalRelay on its own thread
#pragma once

#include <sys/ioctl.h>
#include <termios.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <optional>

#include "common/result.h"
#include "common/unique_fd.h"
#include "launcher/sandbox/child_report.h"

namespace cagent::launcher {

// What the child needs to set up the sandbox's terminal: plain data, read after clone.
struct TerminalPlan {
  // The initial window size (the caller's, or 24x80 when cagent has no terminal).
  struct winsize size {};
  // The caller's terminal modes before raw mode, copied to the new terminal so erase characters,
  // IUTF8 and the like match; the kernel's defaults when the caller has no terminal.
  bool has_modes = false;
  struct termios modes {};
};

// Apply-in-child, async-signal-safe, no allocation. Opens /dev/ptmx of the view (a new pty in the
// sandbox's devpts), unlocks it, applies `plan`, opens the slave through the master
// (TIOCGPTPEER, no path lookup), makes it fds 0, 1 and 2, sends the master on `channel`
// (SCM_RIGHTS) and closes every copy of the master. The slave becomes the controlling terminal
// later, in the command's own session (ExecPlan::controlling_terminal).
ChildResult OpenSandboxTerminal(const TerminalPlan& plan, int channel);

// Parent: waits up to `timeout` for the master the child sends on `channel`. The descriptor is
// close-on-exec and owned by the caller.
Result<UniqueFd> ReceiveSandboxTerminal(int channel, std::chrono::milliseconds timeout);

// The caller's side: cagent's stdin and stdout. Runs in cagent's main thread.
//
// Capture() blocks, in the calling thread, the signals the relay handles (SIGWINCH, SIGTSTP,
// SIGCONT) and those RunSandbox forwards (SIGINT, SIGTERM, SIGHUP, SIGQUIT), so every thread made
// afterwards (the relay, the egress proxy's) inherits the block and none of them is killed by, or
// swallows, a signal meant for the session. Call it before making any thread. EnterRaw() puts the
// caller's terminal (if stdin is one) in raw mode; Restore() puts the saved modes back and is
// called by the destructor on every path. The saved signal mask comes back in the destructor,
// after the modes, so a SIGINT/SIGTERM/SIGTSTP still pending then acts on a restored terminal.
class CallerTerminal {
 public:
  static std::unique_ptr<CallerTerminal> Capture(int in_fd, int out_fd);
  ~CallerTerminal();
  CallerTerminal(const CallerTerminal&) = delete;
  CallerTerminal& operator=(const CallerTerminal&) = delete;

  [[nodiscard]] const TerminalPlan& plan() const { return plan_; }
  [[nodiscard]] int in_fd() const { return in_fd_; }
  [[nodiscard]] int out_fd() const { return out_fd_; }
  [[nodiscard]] bool in_is_terminal() const { return saved_.has_value(); }
  // The caller's terminal whose size is forwarded: stdout when it is a terminal, else stdin; -1.
  [[nodiscard]] int size_fd() const { return size_fd_; }

  // Raw mode on stdin's terminal (nothing when stdin is not one). Only from the foreground: a
  // background cagent leaves the terminal alone.
  Status EnterRaw();
  // The modes saved by Capture, when raw mode is on. Safe to call more than once.
  void Restore();
  [[nodiscard]] bool raw() const { return raw_; }

 private:
  CallerTerminal() = default;
  int in_fd_ = -1;
  int out_fd_ = -1;
  int size_fd_ = -1;
  std::optional<struct termios> saved_;
  bool raw_ = false;
  sigset_t old_mask_{};
  TerminalPlan plan_;
};

// True when both descriptors are terminals and cagent is not a background job on them: the default
// for `cagent exec` without --tty/--no-tty.
bool IsInteractive(int in_fd, int out_fd);

// The relay between the caller and the sandbox's terminal, on a thread of its own.
//
// Bytes from the caller's stdin go to the master; bytes from the master go to the caller's
// stdout. Each direction has a fixed 64 KiB buffer and reads only while it has room, so a command
// that floods its terminal (or a caller that floods stdin) is slowed by back-pressure, never
// buffered without bound. SIGWINCH copies the caller's window size to the master (the kernel then
// signals the sandbox's foreground job); SIGTSTP restores the caller's modes and stops cagent,
// SIGCONT puts raw mode back when cagent is in the foreground again. When stdin ends and is not
// a terminal, the terminal's end-of-file character is written once, so a reader in canonical mode
// sees the end. The master reading EIO means every slave is closed: output is over.
class TerminalRelay {
 public:
  // Starts the thread. `caller` must outlive the relay; `master` is the sandbox's pty master.
  static Result<std::unique_ptr<TerminalRelay>> Start(CallerTerminal& caller, UniqueFd master);
  // Finish() if not yet.
  ~TerminalRelay();
  TerminalRelay(const TerminalRelay&) = delete;
  TerminalRelay& operator=(const TerminalRelay&) = delete;

  // After the sandbox ended: reads what the command wrote until the master reports EIO (bounded
  // by `drain`), writes it out (bounded likewise), and joins the thread.
  void Finish(std::chrono::milliseconds drain = std::chrono::milliseconds(2000));

  struct Impl;

 private:
  explicit TerminalRelay(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cagent::launcher
