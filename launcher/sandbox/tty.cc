#include "launcher/sandbox/tty.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/fd_passing.h"

namespace cagent::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// The signals the session keeps from every thread: those the relay reads from its signalfd and
// those RunSandbox forwards to the sandbox (its own signalfd reads them).
constexpr int kRelaySignals[] = {SIGWINCH, SIGTSTP, SIGCONT};
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// Each direction's buffer. A fixed size is the whole memory bound of the relay.
constexpr std::size_t kBufferSize = 64 * 1024;
// The most written to the caller at once: at most one pipe buffer, so a write after POLLOUT does
// not block on a pipe even when the descriptor could not be made non-blocking.
constexpr std::size_t kWriteChunk = 4096;

ChildResult Fail(int err) { return ChildResult::Failure(ChildStep::kTerminal, err); }

// A fixed buffer with a read and a write offset; compacted when it runs out of room at the end.
class Buffer {
 public:
  [[nodiscard]] bool Empty() const { return begin_ == end_; }
  [[nodiscard]] std::size_t Size() const { return end_ - begin_; }
  // Room at the end, compacting first when the front is free.
  std::size_t Room() {
    if (begin_ == end_) begin_ = end_ = 0;
    if (end_ == data_.size() && begin_ > 0) {
      std::memmove(data_.data(), data_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    return data_.size() - end_;
  }
  char* Tail() { return data_.data() + end_; }
  void Commit(std::size_t n) { end_ += n; }
  [[nodiscard]] const char* Head() const { return data_.data() + begin_; }
  void Consume(std::size_t n) { begin_ += n; }
  void Clear() { begin_ = end_ = 0; }

 private:
  std::array<char, kBufferSize> data_{};
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

// A descriptor of the caller's that the relay may make non-blocking: a new open file description
// of the same terminal or pipe (through /proc/self/fd), so O_NONBLOCK never reaches the
// description the caller's shell shares. Regular files, sockets and anything that cannot be
// reopened are used as they are (a regular file never blocks; the relay writes at most one pipe
// buffer after POLLOUT otherwise).
UniqueFd ReopenNonBlocking(int fd, int access) {
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
    return UniqueFd();
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  return UniqueFd(::open(path.c_str(), access | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
}

}  // namespace

// ---- the child ----

ChildResult OpenSandboxTerminal(const TerminalPlan& plan, int channel) {
  // /dev/ptmx of the view is a symlink to pts/ptmx, the sandbox's own devpts instance.
  const int master = ::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) return Fail(errno);
  int unlock = 0;
  if (::ioctl(master, TIOCSPTLCK, &unlock) != 0) {
    const int e = errno;
    ::close(master);
    return Fail(e);
  }
  // The slave through the master itself (Linux 4.13): no path is looked up, so nothing in the
  // view can stand in for it.
  const int slave = ::ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) {
    const int e = errno;
    ::close(master);
    return Fail(e);
  }
  if ((plan.has_modes && ::tcsetattr(slave, TCSANOW, &plan.modes) != 0) ||
      ::ioctl(slave, TIOCSWINSZ, &plan.size) != 0) {
    const int e = errno;
    ::close(slave);
    ::close(master);
    return Fail(e);
  }
  // The caller's stdio is replaced here; from now on this process holds no descriptor of the
  // caller's terminal (the other fds were closed at step 2).
  for (int fd = 0; fd < 3; ++fd) {
    if (::dup2(slave, fd) < 0) {
      const int e = errno;
      ::close(slave);
      ::close(master);
      return Fail(e);
    }
  }
  ::close(slave);

  union {
    cmsghdr align;
    std::array<char, CMSG_SPACE(sizeof(int))> buf;
  } control{};
  char byte = 'T';
  struct iovec iov {
    &byte, 1
  };
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf.data();
  msg.msg_controllen = CMSG_SPACE(sizeof(int));
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &master, sizeof(int));
  ssize_t n;
  do {
    n = ::sendmsg(channel, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  const int e = errno;
  // The sandbox never keeps a master: the command must not read what cagent writes.
  ::close(master);
  if (n != 1) return Fail(n < 0 ? e : EIO);
  return ChildResult::Success();
}

// ---- the parent ----

Result<UniqueFd> ReceiveSandboxTerminal(int channel, std::chrono::milliseconds timeout) {
  // Room for more than one, so that a second descriptor is seen and refused, not dropped.
  auto fds = ReceiveDescriptors(channel, 4, timeout, "its terminal");
  if (!fds) return fds.error();
  if (fds->size() != 1 || ::isatty((*fds)[0].get()) != 1) {
    return PlainError("the sandbox did not send one terminal descriptor");
  }
  return std::move((*fds)[0]);
}

bool IsInteractive(int in_fd, int out_fd) {
  if (::isatty(in_fd) != 1 || ::isatty(out_fd) != 1) return false;
  // A background job of the caller's shell (`cagent exec -- make &`) must leave the terminal
  // alone: raw mode from there would stop cagent with SIGTTOU. A terminal that is not cagent's
  // controlling terminal (tcgetpgrp fails) has no foreground to take.
  const pid_t fg = ::tcgetpgrp(in_fd);
  return fg < 0 || fg == ::getpgrp();
}

std::unique_ptr<CallerTerminal> CallerTerminal::Capture(int in_fd, int out_fd) {
  std::unique_ptr<CallerTerminal> t(new CallerTerminal());
  t->in_fd_ = in_fd;
  t->out_fd_ = out_fd;
  sigset_t block;
  ::sigemptyset(&block);
  for (int sig : kRelaySignals) ::sigaddset(&block, sig);
  for (int sig : kForwardedSignals) ::sigaddset(&block, sig);
  ::pthread_sigmask(SIG_BLOCK, &block, &t->old_mask_);

  struct termios modes {};
  if (::isatty(in_fd) == 1 && ::tcgetattr(in_fd, &modes) == 0) {
    t->saved_ = modes;
    t->plan_.has_modes = true;
    t->plan_.modes = modes;
  }
  if (::isatty(out_fd) == 1) {
    t->size_fd_ = out_fd;
  } else if (::isatty(in_fd) == 1) {
    t->size_fd_ = in_fd;
  }
  struct winsize ws {};
  if (t->size_fd_ >= 0 && ::ioctl(t->size_fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 &&
      ws.ws_col > 0) {
    t->plan_.size = ws;
  } else {
    t->plan_.size.ws_row = 24;
    t->plan_.size.ws_col = 80;
  }
  return t;
}

CallerTerminal::~CallerTerminal() {
  Restore();
  ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

Status CallerTerminal::EnterRaw() {
  if (!saved_ || raw_) return Ok{};
  // A background cagent (started with &, or continued with bg) leaves the terminal to the shell.
  if (::tcgetpgrp(in_fd_) != ::getpgrp()) return Ok{};
  struct termios raw = *saved_;
  ::cfmakeraw(&raw);
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  int r;
  do {
    r = ::tcsetattr(in_fd_, TCSADRAIN, &raw);
  } while (r != 0 && errno == EINTR);
  if (r != 0) return ErrnoError("put the terminal in raw mode (tcsetattr)");
  raw_ = true;
  return Ok{};
}

void CallerTerminal::Restore() {
  if (!raw_) return;
  // SIGTTOU blocked: a cagent moved to the background while raw (SIGSTOP, then bg) restores the
  // modes instead of being stopped by the terminal for trying.
  sigset_t ttou, old;
  ::sigemptyset(&ttou);
  ::sigaddset(&ttou, SIGTTOU);
  ::pthread_sigmask(SIG_BLOCK, &ttou, &old);
  int r;
  do {
    r = ::tcsetattr(in_fd_, TCSADRAIN, &*saved_);
  } while (r != 0 && errno == EINTR);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  raw_ = false;
}

// ---- the relay ----

struct TerminalRelay::Impl {
  CallerTerminal& caller;
  UniqueFd master;
  UniqueFd stop;     // eventfd: the sandbox has ended
  UniqueFd signals;  // signalfd: SIGWINCH, SIGTSTP, SIGCONT
  UniqueFd in_reopened, out_reopened;
  std::atomic<std::int64_t> drain_ms{2000};
  std::thread thread;
  bool finished = false;

  Impl(CallerTerminal& c, UniqueFd m) : caller(c), master(std::move(m)) {}

  void CopyWindowSize() const {
    struct winsize ws {};
    if (caller.size_fd() >= 0 && ::ioctl(caller.size_fd(), TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 &&
        ws.ws_col > 0) {
      (void)::ioctl(master.get(), TIOCSWINSZ, &ws);
    }
  }

  // A signal to cagent itself, read from the relay's signalfd.
  void OnSignal(int sig, bool want_raw) {
    switch (sig) {
      case SIGWINCH:
        CopyWindowSize();
        break;
      case SIGTSTP:
        // Ctrl-Z typed at the caller's terminal goes into the sandbox as a byte; this is a
        // SIGTSTP sent to cagent itself. Hand the terminal back in its own modes, then stop.
        caller.Restore();
        ::kill(::getpid(), SIGSTOP);
        break;
      case SIGCONT:
        if (want_raw) (void)caller.EnterRaw();
        CopyWindowSize();
        break;
      default:
        break;
    }
  }

  // Writes the sandbox terminal's end-of-file character (^D unless it was changed) to the master:
  // true once written, or when writing fails for good.
  bool SendEof() {
    struct termios t {};
    const char eof = ::tcgetattr(master.get(), &t) == 0 && t.c_cc[VEOF] != 0
                         ? static_cast<char>(t.c_cc[VEOF])
                         : '\x04';
    return ::write(master.get(), &eof, 1) == 1 || (errno != EINTR && errno != EAGAIN);
  }

  void Run() {
    // SIGPIPE stays pending for this thread instead of killing cagent: a gone stdout is EPIPE.
    sigset_t pipe_set;
    ::sigemptyset(&pipe_set);
    ::sigaddset(&pipe_set, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);

    const bool want_raw = caller.in_is_terminal();
    const int in = in_reopened.valid() ? in_reopened.get() : caller.in_fd();
    const int out = out_reopened.valid() ? out_reopened.get() : caller.out_fd();
    Buffer to_master, to_out;
    bool in_open = in >= 0;
    bool master_open = true;
    bool out_open = out >= 0;
    bool send_eof = false;
    bool stopping = false;
    Clock::time_point deadline{};
    CopyWindowSize();

    for (;;) {
      const auto now = Clock::now();
      if (stopping) {
        const bool late = now >= deadline;
        if ((!master_open || late) && (to_out.Empty() || !out_open || late)) break;
      }
      decltype(pollfd::events) master_events = 0;
      if (master_open) {
        if (to_out.Room() > 0) master_events |= POLLIN;
        if (!to_master.Empty() || send_eof) master_events |= POLLOUT;
      }
      // A descriptor that is listed reports POLLHUP even with no events asked, so one with
      // nothing to do is left out (-1) rather than spin on a closed peer.
      struct pollfd fds[5] = {
          {in_open && !stopping && to_master.Room() > 0 ? in : -1, POLLIN, 0},
          {master_events != 0 ? master.get() : -1, master_events, 0},
          {out_open && !to_out.Empty() ? out : -1, POLLOUT, 0},
          {signals.get(), POLLIN, 0},
          {stopping ? -1 : stop.get(), POLLIN, 0},
      };
      int timeout = -1;
      if (stopping) {
        timeout = static_cast<int>(std::max<std::int64_t>(
            0, std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count()));
      }
      const int ready = ::poll(fds, 5, timeout);
      if (ready < 0) {
        if (errno == EINTR) continue;
        break;  // cannot happen with valid descriptors; the sandbox is not held by the relay
      }
      if (fds[3].revents & POLLIN) {
        struct signalfd_siginfo si {};
        if (::read(signals.get(), &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
          OnSignal(static_cast<int>(si.ssi_signo), want_raw);
        }
        // After a stop the caller may have typed to the shell; start over with fresh revents.
        continue;
      }
      if (fds[4].revents & POLLIN) {
        std::uint64_t v = 0;
        (void)::read(stop.get(), &v, sizeof(v));
        stopping = true;
        deadline = Clock::now() + std::chrono::milliseconds(drain_ms.load());
      }
      // The caller's input.
      if (fds[0].revents != 0) {
        const ssize_t n = ::read(in, to_master.Tail(), to_master.Room());
        if (n > 0) {
          to_master.Commit(static_cast<std::size_t>(n));
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          // The end of a pipe or file: the terminal's end-of-file character once, for a reader in
          // canonical mode. A terminal that reads 0 or EIO in raw mode was hung up (or cagent
          // is in the background): nothing more is read, nothing is sent.
          in_open = false;
          if (!caller.in_is_terminal()) send_eof = true;
        }
      }
      // The sandbox's terminal.
      if (fds[1].revents & POLLOUT) {
        if (!to_master.Empty()) {
          const ssize_t n = ::write(master.get(), to_master.Head(), to_master.Size());
          if (n > 0) {
            to_master.Consume(static_cast<std::size_t>(n));
          } else if (n < 0 && errno != EINTR && errno != EAGAIN) {
            master_open = false;
          }
        } else if (send_eof && SendEof()) {
          send_eof = false;
        }
      }
      if (master_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
          to_out.Room() > 0) {
        const ssize_t n = ::read(master.get(), to_out.Tail(), to_out.Room());
        if (n > 0) {
          to_out.Commit(static_cast<std::size_t>(n));
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          master_open = false;  // EIO: every slave is closed, the command's output is over
        }
      }
      // The caller's output.
      if (fds[2].revents != 0) {
        if (fds[2].revents & POLLOUT) {
          const ssize_t n =
              ::write(out, to_out.Head(), std::min<std::size_t>(to_out.Size(), kWriteChunk));
          if (n > 0) {
            to_out.Consume(static_cast<std::size_t>(n));
          } else if (n < 0 && errno != EINTR && errno != EAGAIN) {
            out_open = false;
          }
        } else {
          out_open = false;  // POLLHUP/POLLERR without room: nobody reads any more
        }
      }
      // Output nobody can take is dropped, so the command is never blocked by a gone stdout.
      if (!out_open) to_out.Clear();
    }
  }
};

TerminalRelay::TerminalRelay(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<TerminalRelay>> TerminalRelay::Start(CallerTerminal& caller,
                                                            UniqueFd master) {
  auto impl = std::make_unique<Impl>(caller, std::move(master));
  const int flags = ::fcntl(impl->master.get(), F_GETFL);
  if (flags < 0 || ::fcntl(impl->master.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return ErrnoError("make the terminal's master non-blocking");
  }
  impl->stop.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->stop.valid()) return ErrnoError("eventfd");
  sigset_t set;
  ::sigemptyset(&set);
  for (int sig : kRelaySignals) ::sigaddset(&set, sig);
  impl->signals.Reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!impl->signals.valid()) return ErrnoError("signalfd");
  impl->in_reopened = ReopenNonBlocking(caller.in_fd(), O_RDONLY);
  impl->out_reopened = ReopenNonBlocking(caller.out_fd(), O_WRONLY);
  // The thread inherits this thread's mask: CallerTerminal::Capture blocked every signal the
  // session handles, RunSandbox the ones it forwards.
  Impl* raw = impl.get();
  try {
    impl->thread = std::thread([raw] { raw->Run(); });
  } catch (const std::system_error& e) {
    return PlainError("start the terminal relay", e.what());
  }
  return std::unique_ptr<TerminalRelay>(new TerminalRelay(std::move(impl)));
}

void TerminalRelay::Finish(std::chrono::milliseconds drain) {
  if (impl_ == nullptr || impl_->finished) return;
  impl_->finished = true;
  impl_->drain_ms.store(drain.count());
  const std::uint64_t one = 1;
  (void)::write(impl_->stop.get(), &one, sizeof(one));
  if (impl_->thread.joinable()) impl_->thread.join();
}

TerminalRelay::~TerminalRelay() { Finish(); }

}  // namespace cagent::launcher
