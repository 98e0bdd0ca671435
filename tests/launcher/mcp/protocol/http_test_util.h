// A blocking HTTP/1.1 test client over one loopback TCP connection, written against the bytes on
// the wire (no HTTP library), so the tests see exactly what the transport sends: status line,
// header fields, a Content-Length or chunked body, SSE events one at a time. Every read waits at
// most a few seconds, so a server that hangs fails a test instead of hanging it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cagent::testing {

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;                            // de-chunked
  // The header's value, "" if absent.
  [[nodiscard]] std::string Header(const std::string& lowercase_name) const;
};

// One request's bytes: `method path HTTP/1.1`, the given header fields in order, Content-Length
// when there is a body or the method is POST (unless the headers frame the body themselves:
// Content-Length or Transfer-Encoding), then the body.
std::string BuildRequest(std::string_view method, std::string_view path,
                         const std::vector<std::pair<std::string, std::string>>& headers,
                         std::string_view body = {});

class RawHttpClient {
 public:
  // Connects to 127.0.0.1:port (ok() tells whether it did).
  explicit RawHttpClient(std::uint16_t port,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds{5000});
  ~RawHttpClient();
  RawHttpClient(const RawHttpClient&) = delete;
  RawHttpClient& operator=(const RawHttpClient&) = delete;

  [[nodiscard]] bool ok() const { return fd_ >= 0; }
  bool Send(std::string_view bytes);
  // A response's status line and header fields; nullopt when the connection ended or timed out
  // first.
  std::optional<HttpReply> ReadHead();
  // The whole body that `reply`'s head announces (Content-Length, chunked, or up to EOF).
  bool ReadBody(HttpReply& reply);
  // ReadHead then ReadBody.
  std::optional<HttpReply> ReadResponse();
  // For a chunked text/event-stream body after ReadHead: the next event's data (the JSON of an
  // `event: message`); nullopt at the end of the stream (the last chunk), EOF or timeout.
  std::optional<std::string> NextEvent();
  // Whether the SSE body's last chunk came (so a nullopt from NextEvent was the end of the
  // stream, not a timeout or a dropped connection).
  [[nodiscard]] bool stream_ended() const { return stream_ended_; }
  // Whether the server closed the connection within `wait` (a read returns EOF or a reset).
  bool ClosedByPeer(std::chrono::milliseconds wait);
  void Close();

 private:
  // Reads more bytes into buffer_; false on EOF, error or timeout.
  bool Fill(std::chrono::milliseconds wait);
  bool ReadLine(std::string& line);
  // The next chunk's data of a chunked body; nullopt on error; "" for the last chunk.
  std::optional<std::string> ReadChunk();

  int fd_ = -1;
  std::chrono::milliseconds timeout_;
  std::string buffer_;
  std::string events_;  // SSE text received but not yet split into events
  bool stream_ended_ = false;
};

}  // namespace cagent::testing
