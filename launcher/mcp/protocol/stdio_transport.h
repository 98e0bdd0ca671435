// The MCP stdio transport: newline-delimited JSON-RPC over two descriptors (cagent's stdin and
// stdout when a client starts `cagent mcp serve` as its server). Runs in cagent (trusted), on one
// boost::asio::io_context thread.
//
// Input: each frame is one line ('\n'; a trailing '\r' is stripped; blank lines are ignored). A
// line longer than the session's max_frame_bytes is never buffered whole: its bytes run through
// an RpcIdScanner as they arrive and are dropped, and at its newline the session refuses it to
// the id found (Session::ReceiveOversized; an SDK client writes "id" after "params", so a prefix
// alone would miss it). Reading then goes on with the next line.
//
// The input may be a pipe, a socket or a tty (read asynchronously through epoll), or a regular
// file or /dev/null, which epoll refuses (EPERM): those are read with plain read(2) calls posted
// to the io_context one chunk at a time (they never block), so `cagent mcp serve < requests.jsonl`
// works. The same holds for the output (`> replies.jsonl`).
//
// Output: each outgoing message is one compact line (JsonText, which escapes every control
// character inside strings, so a message never contains a raw newline). Writes never block the
// io thread: asynchronous writes from a queue. A client that stops reading while the queue grows
// past max_queued_bytes is a failure (on_closed), not unbounded memory.
//
// Asio puts the descriptors' open file descriptions in O_NONBLOCK, which the process's other
// holders of them see (a terminal shared with the shell, a pipe's other users): the original
// flags are restored when the output is closed and in the destructor.
//
// A write to a pipe whose reader is gone raises SIGPIPE; the process must ignore it (cagent's
// main does) for that to be the EPIPE failure reported through on_closed.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "common/unique_fd.h"
#include "launcher/mcp/protocol/session.h"

namespace cagent::launcher::mcp {

class StdioTransport {
 public:
  // The queue bound of the output, by default.
  static constexpr std::size_t kDefaultMaxQueuedBytes = std::size_t{64} << 20;

  // Takes ownership of `in` and `out` (distinct descriptors; they may share one open file
  // description, as a terminal's stdin and stdout do). Reads nothing before Start. `handler`
  // must outlive the transport.
  StdioTransport(boost::asio::io_context& io, UniqueFd in, UniqueFd out, ToolHandler& handler,
                 SessionOptions options);
  // Stops reading and writing at once (queued output is dropped; use Shutdown first for a clean
  // end), restores the descriptors' flags and closes them. Runs no callback. On the io thread
  // (or with the io_context not running).
  ~StdioTransport();
  StdioTransport(const StdioTransport&) = delete;
  StdioTransport& operator=(const StdioTransport&) = delete;

  // Starts reading. `on_closed` runs once, on the io thread (posted, never from inside a call
  // into the transport or the session), when the input ends (end of file: the client went away)
  // or reading or writing fails, with the reason in words; not after Shutdown (a failure while
  // flushing ends that with `flushed`). Calls still in progress are not ended
  // by it: the caller decides (Shutdown ends them; waiting for calls_in_progress() to reach 0
  // first lets `serve < file` finish its calls).
  void Start(std::function<void(std::string reason)> on_closed);
  [[nodiscard]] Session& session();
  // Stops reading, Session::End(code, message), writes everything queued, then closes the
  // output; `flushed` runs once (posted, on the io thread) after the last byte is written, or
  // writing failed, or when the output was already closed.
  void Shutdown(int code, std::string message, std::function<void()> flushed);
  // Stops reading, lets the calls in progress finish (their answers are written), then
  // Shutdown(code, message, flushed): for input that ended because it was all there, as with
  // `cagent mcp serve < requests.jsonl`. A later Shutdown still ends the calls at once.
  void ShutdownWhenIdle(int code, std::string message, std::function<void()> flushed);

  // The output queue's bound (default kDefaultMaxQueuedBytes); for tests.
  void set_max_queued_bytes(std::size_t bytes);
  // Whether the input is read without epoll (a regular file or /dev/null); for tests.
  [[nodiscard]] bool reads_synchronously() const;

 private:
  class State;
  std::shared_ptr<State> state_;
};

}  // namespace cagent::launcher::mcp
