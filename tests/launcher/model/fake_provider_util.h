// FakeProvider: a local model provider for tests — an HTTP/1.1 server (Boost.Beast, optionally
// TLS) on 127.0.0.1 with an ephemeral port, run on its own threads, that answers each connection
// with the next scripted FakeReply (or, when none is queued, a default answer in the wire format
// the request path implies: /chat/completions -> OpenAI, /v1/messages -> Anthropic; streamed when
// the request body says "stream": true). Scripts can fail on purpose: any status with any headers
// (429 + Retry-After, 5xx, 401/403), malformed bodies, a connection reset mid-stream, slow replies.
// Every request is recorded (method, target, headers, body) for the test to inspect.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cagent::testing {

struct RecordedRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  [[nodiscard]] std::string Header(const std::string& lower_name) const;
  // The body parsed as JSON (discarded value when it is not JSON).
  [[nodiscard]] nlohmann::json Json() const;
};

struct FakeReply {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  // Body pieces, each written (and so usually received) separately.
  std::vector<std::string> pieces;
  bool chunked = false;                      // Transfer-Encoding: chunked, one chunk per piece
  std::chrono::milliseconds delay{0};        // before the status line
  std::chrono::milliseconds piece_delay{0};  // between pieces
  bool reset_after_pieces = false;   // send a TCP RST after the pieces instead of ending the body
  bool close_without_reply = false;  // read the request, then close the connection

  static FakeReply Json(int status, const nlohmann::json& body,
                        std::vector<std::pair<std::string, std::string>> headers = {});
  static FakeReply Text(int status, std::string body, std::string content_type = "text/plain");
  // A streamed answer: text/event-stream, chunked, one piece per entry.
  static FakeReply Sse(std::vector<std::string> pieces);
};

// "data: <json>\n\n" (with "event: NAME\n" first when `event` is not empty).
std::string SseEventText(const nlohmann::json& data, const std::string& event = "");
// An OpenAI stream: each chunk as a data event, then "data: [DONE]".
FakeReply OpenAiStream(const std::vector<nlohmann::json>& chunks);
// An Anthropic stream: each JSON event as "event: <its type>" + data.
FakeReply AnthropicStream(const std::vector<nlohmann::json>& events);
// Splits every piece into pieces of at most `n` bytes (to exercise reassembly).
FakeReply SplitPieces(FakeReply reply, std::size_t n);

// Files for a TLS test: a CA, a server certificate it signed for localhost/127.0.0.1, and one for
// another host name. Made with the openssl CLI in a fresh temporary directory.
struct TestPki {
  std::string dir;
  std::string ca_file;
  std::string cert_file;  // CN/SAN localhost, IP 127.0.0.1
  std::string key_file;
  std::string wrong_cert_file;  // SAN DNS:wrong.example only
  std::string wrong_key_file;
};
// Empty (and `why_not` set) when the openssl CLI is missing or fails.
std::optional<TestPki> MakeTestPki(std::string* why_not);

class FakeProvider {
 public:
  struct Options {
    bool tls = false;
    std::string cert_file;  // PEM chain and key for TLS
    std::string key_file;
    // Answers a request when no scripted reply is queued (before the default answer); called on
    // the connection's thread, one request at a time. Empty = the default answer.
    std::function<FakeReply(const RecordedRequest&)> responder = nullptr;
  };
  // Listens on 127.0.0.1:0 and serves on background threads until destroyed.
  FakeProvider() : FakeProvider(Options()) {}
  explicit FakeProvider(Options options);
  ~FakeProvider();
  FakeProvider(const FakeProvider&) = delete;
  FakeProvider& operator=(const FakeProvider&) = delete;

  [[nodiscard]] int port() const { return port_; }
  // "http://127.0.0.1:PORT" or "https://localhost:PORT" (TLS certificates name localhost).
  [[nodiscard]] std::string BaseUrl(const std::string& path = "") const;

  // Queues the reply for the next connection.
  void Enqueue(FakeReply reply);
  [[nodiscard]] std::vector<RecordedRequest> Requests() const;
  // Connections accepted so far (including ones whose TLS handshake failed).
  [[nodiscard]] int Connections() const { return connections_.load(); }
  // TLS handshakes that failed (the client rejected the certificate, for instance).
  [[nodiscard]] int FailedHandshakes() const { return failed_handshakes_.load(); }

 private:
  struct Impl;
  void AcceptLoop();
  void Serve(int fd);
  std::optional<FakeReply> NextReply();
  bool Sleep(std::chrono::milliseconds d) const;  // false when stopping

  Options options_;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> failed_handshakes_{0};
  mutable std::mutex mu_;
  std::mutex responder_mu_;
  std::deque<FakeReply> replies_;
  std::vector<RecordedRequest> requests_;
  std::vector<std::thread> workers_;
  std::thread acceptor_thread_;
};

}  // namespace cagent::testing
