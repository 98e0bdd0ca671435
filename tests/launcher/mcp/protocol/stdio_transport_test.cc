#include "launcher/mcp/protocol/stdio_transport.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/json_text.h"
#include "tests/launcher/mcp/protocol/mcp_test_util.h"

namespace cagent::launcher::mcp {
namespace {

using nlohmann::json;
using testing::FakeHandler;

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Pipe MakePipe() {
  std::array<int, 2> fds{};
  EXPECT_EQ(::pipe2(fds.data(), O_CLOEXEC), 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

std::string Line(const json& message) { return JsonText(message) + "\n"; }

json Request(const json& id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

std::string Handshake() {
  return Line(Request(0, "initialize",
                      {{"protocolVersion", "2025-11-25"},
                       {"capabilities", json::object()},
                       {"clientInfo", {{"name", "t"}, {"version", "1"}}}})) +
         Line({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// A client on the other ends of two pipes, with the transport run on this thread.
class StdioTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A write to a closed pipe must be EPIPE, not the end of the test binary.
    std::signal(SIGPIPE, SIG_IGN);
  }

  // Builds the transport on pipes (or on `in` when given) and starts it.
  void Begin(SessionOptions options = {}, std::optional<UniqueFd> in = std::nullopt,
             std::optional<UniqueFd> out = std::nullopt) {
    if (!in) {
      Pipe to_server = MakePipe();
      client_out_ = std::move(to_server.write);
      in = std::move(to_server.read);
    }
    if (!out) {
      Pipe to_client = MakePipe();
      client_in_ = std::move(to_client.read);
      out = std::move(to_client.write);
      ASSERT_EQ(::fcntl(client_in_.get(), F_SETFL, O_NONBLOCK), 0);
    }
    transport_ = std::make_unique<StdioTransport>(io_, std::move(*in), std::move(*out), handler_,
                                                  std::move(options));
    transport_->Start([this](std::string reason) { closed_ = std::move(reason); });
  }

  void Write(std::string_view data) { ASSERT_TRUE(WriteAll(client_out_.get(), data)); }

  // Runs the io_context until `done` holds or 10 s pass; reads what the server wrote meanwhile.
  // A bound on liveness, not a timing check: generous, as CI runs this under ASan with both cores
  // busy (20 answers of 50 kB each took over 10 s there once).
  bool RunUntil(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      io_.restart();
      io_.run_for(std::chrono::milliseconds(5));
      Drain();
      if (done()) {
        return true;
      }
    }
    return false;
  }

  void Drain() {
    if (!client_in_.valid()) {
      return;
    }
    std::array<char, 65536> buffer{};
    for (;;) {
      const ssize_t n = ::read(client_in_.get(), buffer.data(), buffer.size());
      if (n == 0) {
        output_eof_ = true;
      }
      if (n <= 0) {
        return;
      }
      output_.append(buffer.data(), static_cast<std::size_t>(n));
    }
  }

  // The complete lines the server wrote, parsed.
  std::vector<json> Lines() const {
    std::vector<json> lines;
    std::size_t start = 0;
    for (std::size_t end = output_.find('\n'); end != std::string::npos;
         end = output_.find('\n', start)) {
      lines.push_back(json::parse(output_.substr(start, end - start), nullptr, false));
      start = end + 1;
    }
    return lines;
  }

  void FinishCallsOneByOne(bool client_reads);
  void ServeFileOfSlowCalls(bool when_idle);

  bool WaitForLines(std::size_t n) {
    return RunUntil([&] { return Lines().size() >= n; });
  }

  boost::asio::io_context io_;
  FakeHandler handler_;
  std::unique_ptr<StdioTransport> transport_;
  UniqueFd client_out_;  // the client writes requests here
  UniqueFd client_in_;   // and reads responses here
  std::string output_;
  bool output_eof_ = false;
  std::optional<std::string> closed_;
};

TEST_F(StdioTransportTest, HandshakeListAndCallOverPipes) {
  Begin();
  EXPECT_FALSE(transport_->reads_synchronously());
  Write(Handshake() + Line(Request(1, "tools/list")) +
        Line(Request(2, "tools/call", {{"name", "echo"}, {"arguments", {{"text", "hi\nthere"}}}})));
  ASSERT_TRUE(WaitForLines(3)) << output_;
  const auto lines = Lines();
  EXPECT_EQ(lines[0]["result"]["protocolVersion"], "2025-11-25");
  EXPECT_EQ(lines[1]["result"]["tools"].size(), 2U);
  EXPECT_EQ(lines[2]["id"], 2);
  EXPECT_EQ(lines[2]["result"]["content"][0]["text"], "hi\nthere");  // escaped, not a raw newline
  EXPECT_TRUE(transport_->session().initialized());
  EXPECT_FALSE(closed_);
}

TEST_F(StdioTransportTest, CarriageReturnsAndBlankLines) {
  Begin();
  Write("\n\r\n   \n" + Handshake());
  Write(JsonText(Request(1, "ping")) + "\r\n\n");
  ASSERT_TRUE(WaitForLines(2)) << output_;
  EXPECT_EQ(Lines().size(), 2U);  // blank lines got nothing, not even an error
  EXPECT_EQ(Lines()[1]["result"], json::object());
}

TEST_F(StdioTransportTest, EndOfInputClosesAfterTheLastLineEvenWithoutNewline) {
  Begin();
  Write(Handshake() + JsonText(Request(1, "ping")));
  client_out_.Reset();
  ASSERT_TRUE(RunUntil([&] { return closed_.has_value(); }));
  EXPECT_NE(closed_->find("end of file"), std::string::npos) << *closed_;
  ASSERT_TRUE(WaitForLines(2));
  EXPECT_EQ(Lines()[1]["id"], 1);
}

TEST_F(StdioTransportTest, MalformedLinesAreAnsweredAndTheSessionGoesOn) {
  Begin();
  Write(Handshake() + "not json\n" + "[1,2]\n" +
        R"({"jsonrpc":"2.0","id":{"x":1},"method":"ping"})" + "\n" + std::string(100, '[') +
        std::string(100, ']') + "\n" + Line(Request(5, "ping")));
  ASSERT_TRUE(WaitForLines(6)) << output_;
  const auto lines = Lines();
  EXPECT_EQ(lines[1]["error"]["code"], kParseError);
  EXPECT_EQ(lines[2]["error"]["code"], kInvalidRequest);
  EXPECT_EQ(lines[3]["error"]["code"], kInvalidRequest);
  EXPECT_EQ(lines[4]["error"]["code"], kInvalidRequest);
  EXPECT_EQ(lines[5]["id"], 5);
  EXPECT_EQ(lines[5]["result"], json::object());
}

// A 5 MiB tools/call whose id comes last (as the SDK writes it), then a good request.
std::string BigCall(std::size_t text_bytes) {
  return R"({"method":"tools/call","params":{"name":"echo","arguments":{"text":")" +
         std::string(text_bytes, 'x') + R"("}},"jsonrpc":"2.0","id":77})" + "\n";
}

TEST_F(StdioTransportTest, OverlongLineIsRefusedToItsIdAndTheNextRequestIsAnswered) {
  Begin();  // max_frame_bytes: 4 MiB
  Write(Handshake());
  ASSERT_TRUE(WaitForLines(1));
  std::thread writer([fd = client_out_.get()] {
    EXPECT_TRUE(WriteAll(fd, BigCall(5U << 20) + Line(Request(78, "ping"))));
  });
  const bool answered = WaitForLines(3);
  writer.join();
  ASSERT_TRUE(answered) << output_.substr(0, 500);
  const auto lines = Lines();
  EXPECT_EQ(lines[1]["id"], 77);
  EXPECT_EQ(lines[1]["error"]["code"], kInvalidRequest);
  EXPECT_NE(lines[1]["error"]["message"].get<std::string>().find("exceeds"), std::string::npos);
  EXPECT_EQ(lines[2]["id"], 78);
  EXPECT_TRUE(handler_.calls.empty());
  EXPECT_FALSE(closed_);
}

TEST_F(StdioTransportTest, TheSameLineWithinALargerLimitIsServed) {
  SessionOptions options;
  options.max_frame_bytes = 8U << 20;
  Begin(options);
  Write(Handshake());
  ASSERT_TRUE(WaitForLines(1));
  std::thread writer([fd = client_out_.get()] { EXPECT_TRUE(WriteAll(fd, BigCall(5U << 20))); });
  const bool answered = WaitForLines(2);
  writer.join();
  ASSERT_TRUE(answered);
  const auto lines = Lines();
  EXPECT_EQ(lines[1]["id"], 77);
  EXPECT_EQ(lines[1]["result"]["content"][0]["text"].get<std::string>().size(), 5U << 20);
}

TEST_F(StdioTransportTest, SocketInput) {
  std::array<int, 2> fds{};
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds.data()), 0);
  client_out_ = UniqueFd(fds[0]);
  Begin({}, UniqueFd(fds[1]));
  EXPECT_FALSE(transport_->reads_synchronously());
  Write(Handshake() + Line(Request(1, "ping")));
  ASSERT_TRUE(WaitForLines(2));
  EXPECT_EQ(Lines()[1]["id"], 1);
  client_out_.Reset();
  ASSERT_TRUE(RunUntil([&] { return closed_.has_value(); }));
}

TEST_F(StdioTransportTest, TerminalInput) {
  UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master.valid() || ::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0) {
    GTEST_SKIP() << "no pseudo-terminal here: " << std::strerror(errno);
  }
  std::array<char, 128> name{};
  ASSERT_EQ(::ptsname_r(master.get(), name.data(), name.size()), 0);
  UniqueFd terminal(::open(name.data(), O_RDWR | O_NOCTTY | O_CLOEXEC));
  ASSERT_TRUE(terminal.valid());
  termios mode{};
  ASSERT_EQ(::tcgetattr(terminal.get(), &mode), 0);
  ::cfmakeraw(&mode);  // no echo, no line editing: bytes through as written
  ASSERT_EQ(::tcsetattr(terminal.get(), TCSANOW, &mode), 0);
  client_out_ = std::move(master);
  Begin({}, std::move(terminal));
  EXPECT_FALSE(transport_->reads_synchronously());
  Write(Handshake() + Line(Request(1, "ping")));
  ASSERT_TRUE(WaitForLines(2));
  EXPECT_EQ(Lines()[1]["id"], 1);
}

TEST_F(StdioTransportTest, DevNullInputEndsAtOnce) {
  UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(null.valid());
  Begin({}, std::move(null));
  EXPECT_TRUE(transport_->reads_synchronously());
  ASSERT_TRUE(RunUntil([&] { return closed_.has_value(); }));
  EXPECT_NE(closed_->find("end of file"), std::string::npos);
  EXPECT_TRUE(output_.empty());
}

// A temporary file with `content`, opened for reading (unlinked at once).
UniqueFd FileWith(const std::string& content) {
  std::string path = ::testing::TempDir() + "mcp_stdio_XXXXXX";
  UniqueFd fd(::mkostemp(path.data(), O_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  EXPECT_TRUE(WriteAll(fd.get(), content));
  EXPECT_EQ(::lseek(fd.get(), 0, SEEK_SET), 0);
  EXPECT_EQ(::unlink(path.c_str()), 0);
  return fd;
}

TEST_F(StdioTransportTest, RegularFileInputIsServedToTheEnd) {
  std::string requests = Handshake();
  for (int i = 1; i <= 200; ++i) {
    requests += Line(Request(i, "tools/call", {{"name", "echo"}, {"arguments", {{"text", "n"}}}}));
  }
  Begin({}, FileWith(requests));
  EXPECT_TRUE(transport_->reads_synchronously());
  ASSERT_TRUE(RunUntil([&] { return closed_.has_value() && Lines().size() >= 201; }));
  EXPECT_EQ(Lines().back()["id"], 200);
}

TEST_F(StdioTransportTest, RegularFileOutput) {
  UniqueFd out = FileWith("");
  const int out_fd = out.get();
  UniqueFd reader(::fcntl(out_fd, F_DUPFD_CLOEXEC, 0));
  Begin({}, FileWith(Handshake() + Line(Request(1, "ping"))), std::move(out));
  ASSERT_TRUE(RunUntil([&] { return closed_.has_value(); }));
  bool flushed = false;
  transport_->Shutdown(kInternalError, "bye", [&flushed] { flushed = true; });
  ASSERT_TRUE(RunUntil([&] { return flushed; }));
  std::string written(4096, '\0');
  const ssize_t n = ::pread(reader.get(), written.data(), written.size(), 0);
  ASSERT_GT(n, 0);
  written.resize(static_cast<std::size_t>(n));
  EXPECT_NE(written.find(R"("id":1,"jsonrpc":"2.0","result":{})"), std::string::npos) << written;
}

TEST_F(StdioTransportTest, ShutdownEndsCallsFlushesAndClosesTheOutput) {
  Begin();
  Write(Handshake() + Line(Request(1, "tools/call", {{"name", "slow"}})));
  ASSERT_TRUE(RunUntil([&] { return handler_.calls.size() == 1; }));
  bool flushed = false;
  transport_->Shutdown(kInternalError, "the broker stopped", [&flushed] { flushed = true; });
  ASSERT_TRUE(RunUntil([&] { return flushed && output_eof_; }));
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[1]["id"], 1);
  EXPECT_EQ(lines[1]["error"]["message"], "the broker stopped");
  EXPECT_TRUE(handler_.calls[0]->done());
}

std::string SlowCalls() {
  std::string calls = Handshake();
  for (int i = 1; i <= 20; ++i) {
    calls += Line(Request(i, "tools/call", {{"name", "slow"}}));
  }
  return calls;
}

// 20 calls in progress, finished one after the other with a 50 kB result each, the io_context
// run in between; the client reads the answers or not.
void StdioTransportTest::FinishCallsOneByOne(bool client_reads) {
  SessionOptions options;
  options.max_calls_in_progress = 20;
  Begin(options);
  transport_->set_max_queued_bytes(256U << 10);
  Write(SlowCalls());
  ASSERT_TRUE(RunUntil([&] { return handler_.calls.size() == 20; }));
  for (const auto& call : handler_.calls) {
    call->Finish(ToolResult::Text(std::string(50000, 'y')));
    for (int i = 0; i < 4; ++i) {
      io_.restart();
      io_.run_for(std::chrono::milliseconds(5));
      if (client_reads) {
        Drain();
      }
    }
  }
}

// `requests.jsonl` with two slow calls; at its end the transport is shut down either when the
// calls are done or at once.
void StdioTransportTest::ServeFileOfSlowCalls(bool when_idle) {
  Begin({}, FileWith(Handshake() + Line(Request(1, "tools/call", {{"name", "slow"}})) +
                     Line(Request(2, "tools/call", {{"name", "slow"}}))));
  ASSERT_TRUE(RunUntil([&] { return closed_.has_value(); }));
  ASSERT_EQ(handler_.calls.size(), 2U);
  bool flushed = false;
  if (when_idle) {
    transport_->ShutdownWhenIdle(kInternalError, "input ended", [&flushed] { flushed = true; });
  } else {
    transport_->Shutdown(kInternalError, "input ended", [&flushed] { flushed = true; });
  }
  RunUntil([] { return true; });
  for (const auto& call : handler_.calls) {
    call->Finish(ToolResult::Text("finished"));
  }
  ASSERT_TRUE(RunUntil([&] { return flushed && output_eof_; }));
}

TEST_F(StdioTransportTest, ShutdownWhenIdleLetsTheCallsOfAFileFinish) {
  ServeFileOfSlowCalls(/*when_idle=*/true);
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_EQ(lines[1]["result"]["content"][0]["text"], "finished");
  EXPECT_EQ(lines[2]["result"]["content"][0]["text"], "finished");
}

TEST_F(StdioTransportTest, ShutdownEndsTheCallsOfAFileAtOnce) {
  // The twin: a plain Shutdown answers both with the error.
  ServeFileOfSlowCalls(/*when_idle=*/false);
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_EQ(lines[1]["error"]["message"], "input ended");
  EXPECT_EQ(lines[2]["error"]["message"], "input ended");
}

TEST_F(StdioTransportTest, AClientThatStopsReadingIsAFailureNotUnboundedMemory) {
  FinishCallsOneByOne(/*client_reads=*/false);
  ASSERT_TRUE(closed_.has_value());
  EXPECT_NE(closed_->find("not reading"), std::string::npos) << *closed_;
}

TEST_F(StdioTransportTest, AClientThatReadsGetsAllOfIt) {
  // The twin of the bound above: the same 1 MB of answers, read as they come.
  FinishCallsOneByOne(/*client_reads=*/true);
  ASSERT_TRUE(WaitForLines(21));
  EXPECT_FALSE(closed_) << *closed_;
  EXPECT_EQ(Lines().size(), 21U);
}

TEST_F(StdioTransportTest, AClientWritingFasterThanItReadsIsSlowedDownNotFailed) {
  // Input is not read while too much output waits: 20 echo calls of 50 kB each written while
  // the client reads nothing, then read: every answer arrives.
  Begin();
  transport_->set_max_queued_bytes(256U << 10);
  std::string calls = Handshake();
  for (int i = 1; i <= 20; ++i) {
    calls += Line(Request(i, "tools/call",
                          {{"name", "echo"}, {"arguments", {{"text", std::string(50000, 'y')}}}}));
  }
  std::thread writer([fd = client_out_.get(), calls] { WriteAll(fd, calls); });
  for (int i = 0; i < 100; ++i) {  // half a second without reading
    io_.restart();
    io_.run_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(closed_);
  const bool all = WaitForLines(21);
  const std::size_t lines = Lines().size();
  transport_.reset();  // a writer still blocked on a full pipe gets EPIPE
  writer.join();
  EXPECT_TRUE(all) << lines << " lines; closed: " << closed_.value_or("");
  EXPECT_FALSE(closed_);
}

TEST_F(StdioTransportTest, AClosedOutputIsReported) {
  Begin();
  client_in_.Reset();  // the client went away without closing its end of our input
  Write(Handshake());
  ASSERT_TRUE(RunUntil([&] { return closed_.has_value(); }));
  EXPECT_NE(closed_->find("writing to the client failed"), std::string::npos) << *closed_;
}

TEST_F(StdioTransportTest, TheDescriptorsFlagsAreRestored) {
  Pipe to_server = MakePipe();
  Pipe to_client = MakePipe();
  UniqueFd in_view(::fcntl(to_server.read.get(), F_DUPFD_CLOEXEC, 0));
  UniqueFd out_view(::fcntl(to_client.write.get(), F_DUPFD_CLOEXEC, 0));
  client_out_ = std::move(to_server.write);
  client_in_ = std::move(to_client.read);
  ASSERT_EQ(::fcntl(client_in_.get(), F_SETFL, O_NONBLOCK), 0);
  ASSERT_EQ(::fcntl(in_view.get(), F_GETFL) & O_NONBLOCK, 0);
  Begin({}, std::move(to_server.read), std::move(to_client.write));
  Write(Handshake());
  ASSERT_TRUE(WaitForLines(1));
  // While the transport runs, asio has the shared descriptions non-blocking (what the
  // restoration undoes: without it these would stay so after the transport is gone).
  EXPECT_NE(::fcntl(in_view.get(), F_GETFL) & O_NONBLOCK, 0);
  EXPECT_NE(::fcntl(out_view.get(), F_GETFL) & O_NONBLOCK, 0);
  transport_.reset();
  EXPECT_EQ(::fcntl(in_view.get(), F_GETFL) & O_NONBLOCK, 0);
  EXPECT_EQ(::fcntl(out_view.get(), F_GETFL) & O_NONBLOCK, 0);
}

TEST_F(StdioTransportTest, DestroyedWithWorkPendingRunsNothing) {
  Begin();
  Write(Handshake() + Line(Request(1, "tools/call", {{"name", "slow"}})));
  ASSERT_TRUE(RunUntil([&] { return handler_.calls.size() == 1; }));
  auto call = handler_.calls[0];
  client_out_.Reset();  // an EOF is about to be read
  transport_.reset();
  io_.restart();
  io_.run_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(closed_);
  call->Finish(ToolResult::Text("late"));  // a no-op, not a crash
  EXPECT_TRUE(call->done());
}

}  // namespace
}  // namespace cagent::launcher::mcp
