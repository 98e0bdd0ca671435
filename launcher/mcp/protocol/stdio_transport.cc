#include "launcher/mcp/protocol/stdio_transport.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json_text.h"
#include "launcher/mcp/protocol/jsonrpc.h"

namespace cagent::launcher::mcp {
namespace {

using boost::asio::posix::stream_descriptor;

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::size_t kMaxPauseBytes = std::size_t{1} << 20;

// Whether epoll refuses `fd` (EPERM: a regular file, /dev/null and other files whose reads and
// writes never wait). Asio's reactor accepts such a descriptor and then performs each operation
// at once, or fails it with operation_not_supported when it would have to wait; asking epoll
// directly makes the choice explicit instead.
bool EpollRefuses(int fd) {
  const UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) {
    return false;
  }
  epoll_event event{};
  event.events = EPOLLIN;
  return ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &event) != 0 && errno == EPERM;
}

// One descriptor of the transport: asynchronous through epoll when it can be registered, plain
// blocking calls otherwise (a regular file or /dev/null, where they never block). Remembers the
// file status flags it found, to put them back.
class Endpoint {
 public:
  Endpoint(boost::asio::io_context& io, UniqueFd fd) : stream_(io) {
    flags_ = ::fcntl(fd.get(), F_GETFL);
    if (EpollRefuses(fd.get())) {
      sync_fd_ = std::move(fd);
      return;
    }
    boost::system::error_code ec;
    stream_.assign(fd.get(), ec);
    if (!ec) {
      static_cast<void>(fd.Release());  // the stream owns it now
    }
    // Otherwise `fd` closes here and the first read or write fails with "bad descriptor".
  }
  ~Endpoint() { Close(); }
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  [[nodiscard]] bool synchronous() const { return sync_fd_.valid(); }
  [[nodiscard]] bool open() const { return sync_fd_.valid() || stream_.is_open(); }
  stream_descriptor& stream() { return stream_; }
  [[nodiscard]] int sync_fd() const { return sync_fd_.get(); }

  void Cancel() {
    if (stream_.is_open()) {
      boost::system::error_code ignored;
      stream_.cancel(ignored);
    }
  }
  // Restores the flags and closes the descriptor (pending operations complete aborted).
  void Close() {
    const int fd =
        synchronous() ? sync_fd_.get() : (stream_.is_open() ? stream_.native_handle() : -1);
    if (fd >= 0 && flags_ >= 0) {
      // The open file description may be shared (a terminal, a pipe's other users): leave it as
      // it was found. Failure changes nothing that could be done about it.
      static_cast<void>(::fcntl(fd, F_SETFL, flags_));
    }
    if (stream_.is_open()) {
      boost::system::error_code ignored;
      stream_.close(ignored);
    }
    sync_fd_.Reset();
  }

 private:
  stream_descriptor stream_;
  UniqueFd sync_fd_;
  int flags_ = -1;
};

}  // namespace

class StdioTransport::State : public std::enable_shared_from_this<State> {
 public:
  State(boost::asio::io_context& io, UniqueFd in, UniqueFd out, ToolHandler& handler,
        SessionOptions options)
      : io_(io),
        max_frame_bytes_(options.max_frame_bytes),
        in_(io, std::move(in)),
        out_(io, std::move(out)),
        session_(
            std::make_unique<Session>(io, handler, std::move(options),
                                      [this](const Outgoing& sent) { Enqueue(sent.message); })) {}

  void Start(std::function<void(std::string)> on_closed) {
    on_closed_ = std::move(on_closed);
    reading_ = true;
    ReadMore();
  }

  void Shutdown(int code, std::string message, std::function<void()> flushed) {
    StopReading();
    idle_end_.reset();  // not waiting for the calls any more
    for (auto& waiting : std::exchange(idle_flushed_, {})) {
      flushed_.push_back(std::move(waiting));
    }
    if (flushed) {
      flushed_.push_back(std::move(flushed));
    }
    shutting_down_ = true;
    session_->End(code, std::move(message));
    MaybeFinishShutdown();
  }

  void ShutdownWhenIdle(int code, std::string message, std::function<void()> flushed) {
    StopReading();
    idle_end_.emplace(code, std::move(message));
    if (flushed) {
      idle_flushed_.push_back(std::move(flushed));
    }
    // Weak: the session (owned here) keeps the callback.
    session_->set_on_idle([weak = weak_from_this()] {
      if (auto self = weak.lock(); self && !self->destroyed_ && self->idle_end_) {
        auto [end_code, end_message] = *std::exchange(self->idle_end_, std::nullopt);
        self->Shutdown(end_code, std::move(end_message), nullptr);
      }
    });
  }

  void Destroy() {
    destroyed_ = true;
    reading_ = false;
    session_.reset();
    in_.Close();
    out_.Close();
    queue_.clear();
  }

  Session& session() { return *session_; }
  std::size_t max_queued_bytes_ = kDefaultMaxQueuedBytes;
  [[nodiscard]] bool reads_synchronously() const { return in_.synchronous(); }

 private:
  // Output queued beyond which input is not read until the queue drains: a client that writes
  // requests faster than it reads the answers is slowed down (as a pipe would), instead of
  // growing the queue into the failure bound.
  [[nodiscard]] std::size_t PauseBytes() const {
    return std::min(max_queued_bytes_ / 4, kMaxPauseBytes);
  }

  void ReadMore() {
    if (!reading_ || destroyed_) {
      return;
    }
    if (queued_bytes_ > PauseBytes()) {
      paused_ = true;  // OnWritten resumes
      return;
    }
    if (in_.synchronous()) {
      // Posted, one chunk at a time, so output and other work interleave with a large file.
      boost::asio::post(io_, [self = shared_from_this()] { self->ReadSynchronously(); });
      return;
    }
    in_.stream().async_read_some(
        boost::asio::buffer(buffer_),
        [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
          self->OnRead(ec, n);
        });
  }

  void ReadSynchronously() {
    if (!reading_ || destroyed_) {
      return;
    }
    ssize_t n = 0;
    do {
      n = ::read(in_.sync_fd(), buffer_.data(), buffer_.size());
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      OnRead(boost::system::error_code(errno, boost::system::system_category()), 0);
    } else if (n == 0) {
      OnRead(boost::asio::error::eof, 0);
    } else {
      OnRead({}, static_cast<std::size_t>(n));
    }
  }

  void OnRead(const boost::system::error_code& ec, std::size_t n) {
    if (destroyed_ || !reading_) {
      return;
    }
    if (ec == boost::asio::error::eof) {
      // A last line without its newline is still a frame.
      if (!line_.empty() || discarding_) {
        EndLine();
      }
      Close("the client closed its input (end of file)");
      return;
    }
    if (ec) {
      Close("reading the client's input failed: " + ec.message());
      return;
    }
    Consume(std::string_view(buffer_.data(), n));
    ReadMore();
  }

  // Splits `data` into lines. A line is kept until it exceeds max_frame_bytes (plus a '\r');
  // from then on its bytes only go through the id scanner.
  void Consume(std::string_view data) {
    while (!data.empty() && reading_ && !destroyed_) {
      const std::size_t newline = data.find('\n');
      const std::string_view piece = data.substr(0, newline);
      if (discarding_) {
        scanner_.Feed(piece);
      } else if (line_.size() + piece.size() > max_frame_bytes_ + 1) {
        discarding_ = true;
        scanner_ = RpcIdScanner();
        scanner_.Feed(line_);
        scanner_.Feed(piece);
        std::string().swap(line_);  // give the memory back
      } else {
        line_.append(piece);
      }
      if (newline == std::string_view::npos) {
        return;
      }
      EndLine();
      data.remove_prefix(newline + 1);
    }
  }

  void EndLine() {
    if (discarding_) {
      discarding_ = false;
      session_->ReceiveOversized(scanner_.id().value_or(nlohmann::json()), scanner_.saw_method());
      return;
    }
    std::string line = std::exchange(line_, {});
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      return;  // blank
    }
    if (line.size() > max_frame_bytes_) {
      RpcIdScanner scanner;
      scanner.Feed(line);
      session_->ReceiveOversized(scanner.id().value_or(nlohmann::json()), scanner.saw_method());
      return;
    }
    session_->Receive(line);
  }

  void StopReading() {
    reading_ = false;
    in_.Cancel();
  }

  void Enqueue(const nlohmann::json& message) {
    if (destroyed_ || failed_ || !out_.open()) {
      return;
    }
    std::string text = JsonText(message);
    text.push_back('\n');
    queued_bytes_ += text.size();
    if (queued_bytes_ > max_queued_bytes_) {
      Fail("the client is not reading cagent's output: more than " +
           std::to_string(max_queued_bytes_) + " bytes are queued");
      return;
    }
    queue_.push_back(std::move(text));
    if (!writing_) {
      WriteNext();
    }
  }

  void WriteNext() {
    if (queue_.empty() || failed_ || destroyed_) {
      writing_ = false;
      MaybeFinishShutdown();
      return;
    }
    writing_ = true;
    if (out_.synchronous()) {
      // A regular file or /dev/null: write(2) does not wait for a reader.
      while (!queue_.empty()) {
        std::string_view rest = queue_.front();
        while (!rest.empty()) {
          const ssize_t n = ::write(out_.sync_fd(), rest.data(), rest.size());
          if (n < 0 && errno == EINTR) {
            continue;
          }
          if (n <= 0) {
            Fail(std::string("writing to the client failed: ") +
                 (n < 0 ? std::strerror(errno) : "nothing was written"));
            return;
          }
          rest.remove_prefix(static_cast<std::size_t>(n));
        }
        queued_bytes_ -= queue_.front().size();
        queue_.pop_front();
      }
      writing_ = false;
      MaybeFinishShutdown();
      return;
    }
    boost::asio::async_write(
        out_.stream(), boost::asio::buffer(queue_.front()),
        [self = shared_from_this()](const boost::system::error_code& ec, std::size_t /*n*/) {
          self->OnWritten(ec);
        });
  }

  void OnWritten(const boost::system::error_code& ec) {
    if (destroyed_ || failed_) {
      return;
    }
    if (ec) {
      Fail("writing to the client failed: " + ec.message());
      return;
    }
    queued_bytes_ -= queue_.front().size();
    queue_.pop_front();
    if (paused_ && queued_bytes_ <= PauseBytes()) {
      paused_ = false;
      ReadMore();
    }
    WriteNext();
  }

  // The output is gone: nothing more is written, the input is not read any more.
  void Fail(std::string reason) {
    failed_ = true;
    writing_ = false;
    // Closed before the queue is dropped: an asynchronous write in flight still points into the
    // queue's front (closing aborts it; its handler sees failed_).
    out_.Close();
    queue_.clear();
    queued_bytes_ = 0;
    StopReading();
    Close(std::move(reason));
    MaybeFinishShutdown();
  }

  void Close(std::string reason) {
    reading_ = false;
    if (closed_) {
      return;
    }
    closed_ = true;
    if (on_closed_ && !shutting_down_) {
      boost::asio::post(io_, [self = shared_from_this(), reason = std::move(reason)] {
        if (!self->destroyed_ && self->on_closed_) {
          auto on_closed = std::exchange(self->on_closed_, nullptr);
          on_closed(reason);
        }
      });
    }
  }

  void MaybeFinishShutdown() {
    if (!shutting_down_ || writing_ || (!queue_.empty() && !failed_)) {
      return;
    }
    out_.Close();
    for (auto& flushed : std::exchange(flushed_, {})) {
      boost::asio::post(io_, [self = shared_from_this(), flushed = std::move(flushed)] {
        if (!self->destroyed_) {
          flushed();
        }
      });
    }
  }

  boost::asio::io_context& io_;
  std::size_t max_frame_bytes_;
  Endpoint in_;
  Endpoint out_;
  std::unique_ptr<Session> session_;
  std::function<void(std::string)> on_closed_;
  std::vector<std::function<void()>> flushed_;
  // ShutdownWhenIdle: the End to make once no call is in progress, and its callbacks.
  std::optional<std::pair<int, std::string>> idle_end_;
  std::vector<std::function<void()>> idle_flushed_;

  std::array<char, kReadChunk> buffer_{};
  std::string line_;
  bool discarding_ = false;
  RpcIdScanner scanner_;

  std::deque<std::string> queue_;
  std::size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool paused_ = false;
  bool reading_ = false;
  bool closed_ = false;
  bool failed_ = false;
  bool shutting_down_ = false;
  bool destroyed_ = false;
};

StdioTransport::StdioTransport(boost::asio::io_context& io, UniqueFd in, UniqueFd out,
                               ToolHandler& handler, SessionOptions options)
    : state_(std::make_shared<State>(io, std::move(in), std::move(out), handler,
                                     std::move(options))) {}

StdioTransport::~StdioTransport() { state_->Destroy(); }

void StdioTransport::Start(std::function<void(std::string reason)> on_closed) {
  state_->Start(std::move(on_closed));
}

Session& StdioTransport::session() { return state_->session(); }

void StdioTransport::Shutdown(int code, std::string message, std::function<void()> flushed) {
  state_->Shutdown(code, std::move(message), std::move(flushed));
}

void StdioTransport::set_max_queued_bytes(std::size_t bytes) { state_->max_queued_bytes_ = bytes; }

void StdioTransport::ShutdownWhenIdle(int code, std::string message,
                                      std::function<void()> flushed) {
  state_->ShutdownWhenIdle(code, std::move(message), std::move(flushed));
}

bool StdioTransport::reads_synchronously() const { return state_->reads_synchronously(); }

}  // namespace cagent::launcher::mcp
