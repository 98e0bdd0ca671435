#include "launcher/mcp/protocol/relay.h"

#include <array>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <utility>

#include "common/json_text.h"
#include "common/sha256.h"

namespace cagent::launcher::mcp {
namespace {

using nlohmann::json;
using stream = boost::asio::posix::stream_descriptor;

constexpr int kParseErrorCode = -32700;
constexpr int kInvalidRequestCode = -32600;
constexpr int kMethodNotFoundCode = -32601;
constexpr int kInvalidParamsCode = -32602;
constexpr int kInternalErrorCode = -32603;

// Bytes of an oversized line kept to look for its id.
constexpr std::size_t kHintBytes = 64 * 1024;
// How long the relay waits for a queue to drain after one side closed.
constexpr std::chrono::seconds kDrainTimeout{5};
constexpr std::size_t kReadChunk = 64 * 1024;

json ErrorResponse(const json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

bool UsableId(const json& id) { return id.is_string() || id.is_number_integer(); }

// The key an id is tracked under: its JSON text, so 1 and "1" are different ids.
std::string IdKey(const json& id) { return JsonText(id); }

}  // namespace

std::string_view RelayEndName(RelayEnd end) {
  switch (end) {
    case RelayEnd::kClientClosed:
      return "client closed";
    case RelayEnd::kServerClosed:
      return "server closed";
    case RelayEnd::kClientGone:
      return "client gone";
    case RelayEnd::kServerGone:
      return "server gone";
    case RelayEnd::kStopped:
      return "stopped";
  }
  return "stopped";
}

FrameHint ScanFrameHint(std::string_view text) {
  FrameHint hint;
  std::size_t depth = 0;
  std::size_t i = 0;
  const std::size_t n = text.size();
  // A string starting at text[i] == '"': its raw contents, i moved past the closing quote; nullopt
  // when the text ends inside it.
  const auto read_string = [&]() -> std::optional<std::string> {
    std::string out;
    ++i;
    while (i < n) {
      const char c = text[i];
      if (c == '\\') {
        if (i + 1 >= n) return std::nullopt;
        out += c;
        out += text[i + 1];
        i += 2;
        continue;
      }
      if (c == '"') {
        ++i;
        return out;
      }
      out += c;
      ++i;
    }
    return std::nullopt;
  };
  const auto skip_space = [&] {
    while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) {
      ++i;
    }
  };
  bool expect_key = false;  // at depth 1, the next string is a key
  while (i < n) {
    const char c = text[i];
    if (c == '"') {
      const bool is_key = depth == 1 && expect_key;
      auto s = read_string();
      if (!s) break;
      expect_key = false;
      if (!is_key) continue;
      skip_space();
      if (i >= n || text[i] != ':') continue;
      ++i;
      skip_space();
      if (*s == "method") hint.has_method = true;
      if (*s != "id" || i >= n) continue;
      if (text[i] == '"') {
        const std::size_t start = i;
        if (auto value = read_string()) {
          const json parsed = json::parse(text.substr(start, i - start), nullptr, false);
          if (parsed.is_string()) hint.id = parsed;
        }
        continue;
      }
      const std::size_t start = i;
      while (i < n && (text[i] == '-' || (text[i] >= '0' && text[i] <= '9'))) ++i;
      // A number cut by the end of the text is not trusted: it may be the prefix of another.
      if (i > start && i < n) {
        const json parsed = json::parse(text.substr(start, i - start), nullptr, false);
        if (parsed.is_number_integer()) hint.id = parsed;
      }
      continue;
    }
    if (c == '{' || c == '[') {
      ++depth;
      expect_key = depth == 1 && c == '{';
    } else if (c == '}' || c == ']') {
      if (depth > 0) --depth;
    } else if (c == ',' && depth == 1) {
      expect_key = true;
    }
    ++i;
  }
  return hint;
}

ClientMethod ClassifyClientMethod(std::string_view method, bool has_id) {
  // The MCP client -> server methods of the revisions the relay speaks (2024-11-05 to 2025-11-25).
  // None of them runs a tool but tools/call; each is forwarded only in the form the specification
  // gives it (a request with an id, or a notification without one).
  static constexpr std::array<std::string_view, 16> kRequests = {
      "initialize",
      "ping",
      "tools/list",
      "resources/list",
      "resources/templates/list",
      "resources/read",
      "resources/subscribe",
      "resources/unsubscribe",
      "prompts/list",
      "prompts/get",
      "completion/complete",
      "logging/setLevel",
      "tasks/get",
      "tasks/list",
      "tasks/result",
      "tasks/cancel",
  };
  static constexpr std::array<std::string_view, 5> kNotifications = {
      "notifications/initialized",        "notifications/cancelled",    "notifications/progress",
      "notifications/roots/list_changed", "notifications/tasks/status",
  };
  if (method == "tools/call") return ClientMethod::kToolsCall;
  const std::span<const std::string_view> known =
      has_id ? std::span<const std::string_view>(kRequests)
             : std::span<const std::string_view>(kNotifications);
  for (const std::string_view m : known) {
    if (m == method) return ClientMethod::kForwarded;
  }
  return ClientMethod::kRefused;
}

class Relay::Impl : public std::enable_shared_from_this<Relay::Impl> {
 public:
  Impl(boost::asio::io_context& io, RelayGate& gate, RelayOptions options)
      : gate_(gate),
        options_(options),
        drain_timer_(io),
        readers_{Reader(io), Reader(io)},
        writers_{Writer(io), Writer(io)} {}

  bool Start(RelayEnds ends, std::function<void(RelayEnd, std::string)> on_end, std::string* error);
  void End(RelayEnd why, const std::string& text);
  void SetOnClientClosed(std::function<void()> f) { on_client_closed_ = std::move(f); }
  // Ends without calling on_end (the owner is going away).
  void Abandon() {
    on_end_ = nullptr;
    on_client_closed_ = nullptr;
    End(RelayEnd::kStopped, "the relay was destroyed");
  }
  [[nodiscard]] RelayStats stats() const { return stats_; }

 private:
  enum Side : std::uint8_t { kClient = 0, kServer = 1 };

  struct Reader {
    explicit Reader(boost::asio::io_context& io) : desc(io) {}
    stream desc;
    std::array<char, kReadChunk> buf{};
    std::string line;
    bool oversized = false;
    bool reading = false;
    bool eof = false;
    bool paused = false;
  };
  struct Writer {
    explicit Writer(boost::asio::io_context& io) : desc(io) {}
    stream desc;
    std::deque<std::string> queue;
    std::size_t queued = 0;
    bool writing = false;
    bool close_when_drained = false;
    bool closed = false;
    // How the relay ends once this writer is drained and closed (CloseWhenDrained), if it does.
    bool end_when_closed = false;
    RelayEnd end_why = RelayEnd::kStopped;
    std::string end_text;
  };
  // A client request forwarded to the server and not yet answered.
  struct Forwarded {
    std::string method;
    std::string tool;  // tools/call
    json id;
  };
  // A tools/call waiting for the gate.
  struct Checking {
    json message;
    std::string tool;
    std::uint64_t serial = 0;
    bool cancelled = false;
  };

  void Read(Side side);
  void OnRead(Side side, const boost::system::error_code& ec, std::size_t n);
  void Feed(Side side, std::string_view bytes);
  void Line(Side side, std::string_view line, bool oversized);
  void OnEof(Side side);
  [[nodiscard]] bool OverBound(std::size_t bound) const;

  void Send(Side to, const json& message);
  void Write(Side to);
  void ResumeReads();
  void CloseWhenDrained(Side to, RelayEnd why, const std::string& text);
  void DrainPoll(Side to, RelayEnd why, const std::string& text,
                 std::chrono::steady_clock::time_point deadline);

  void FromClient(std::string_view line, bool oversized);
  void RefuseClient(const FrameHint& hint, int code, const std::string& message);
  void ClientRequest(const json& message, const std::string& method);
  void ClientToolsCall(const json& message, const std::string& key);
  void ClientToolsCallNotification(const json& message);
  void ClientNotification(const json& message, const std::string& method);
  void ClientResponse(const json& message);
  void Verdict(const std::string& key, std::uint64_t serial, const GateVerdict& verdict);

  void FromServer(std::string_view line, bool oversized);
  void DropServer(const FrameHint& hint, const std::string& what);
  void ServerRequest(const json& message);
  void ServerResponse(json message);
  void FilterToolsList(json& message);
  void ReportCall(const Forwarded& call, const json& response, std::uint64_t bytes);
  void ReportFailedCall(const Forwarded& call, const std::string& error);

  RelayGate& gate_;
  RelayOptions options_;
  boost::asio::steady_timer drain_timer_;
  std::array<Reader, 2> readers_;  // [kClient] = client_in, [kServer] = server_out
  std::array<Writer, 2> writers_;  // [kClient] = client_out, [kServer] = server_in
  std::map<std::string, Forwarded> client_pending_;    // client requests the server has
  std::map<std::string, Checking> checking_;           // tools/call awaiting the gate
  std::map<std::string, std::string> server_pending_;  // server requests the client has
  std::uint64_t next_serial_ = 1;
  std::uint64_t current_bytes_ = 0;  // the size of the line being handled
  std::function<void(RelayEnd, std::string)> on_end_;
  std::function<void()> on_client_closed_;
  bool client_eof_ = false;
  bool started_ = false;
  bool ended_ = false;
  RelayStats stats_;
};

bool Relay::Impl::Start(RelayEnds ends, std::function<void(RelayEnd, std::string)> on_end,
                        std::string* error) {
  if (started_) {
    if (error != nullptr) *error = "the relay was already started";
    return false;
  }
  started_ = true;
  struct Assign {
    stream* desc;
    UniqueFd* fd;
    const char* name;
  };
  const std::array<Assign, 4> all = {
      {{&readers_[kClient].desc, &ends.client_in, "client input"},
       {&writers_[kClient].desc, &ends.client_out, "client output"},
       {&writers_[kServer].desc, &ends.server_in, "server input"},
       {&readers_[kServer].desc, &ends.server_out, "server output"}}};
  for (const Assign& a : all) {
    boost::system::error_code ec;
    // Asio accepts a regular file or /dev/null here (epoll refuses them with EPERM; Asio then
    // performs each operation directly, which never blocks on such a file).
    a.desc->assign(a.fd->get(), ec);
    if (ec) {
      if (error != nullptr) *error = std::string("register the ") + a.name + ": " + ec.message();
      // The ones already taken are closed with their streams, the rest with `ends`.
      End(RelayEnd::kStopped, "the relay could not start");
      return false;
    }
    [[maybe_unused]] const int released = a.fd->Release();
    a.desc->non_blocking(true, ec);
  }
  on_end_ = std::move(on_end);
  Read(kClient);
  Read(kServer);
  return true;
}

// ---- reading and line splitting ----

bool Relay::Impl::OverBound(std::size_t bound) const {
  // The client's lines fill the server's queue and (with the relay's own answers) the client's;
  // the server's fill the client's and (answers to refused requests) its own: either side waits
  // for both queues.
  return writers_[kClient].queued > bound || writers_[kServer].queued > bound;
}

void Relay::Impl::Read(Side side) {
  Reader& r = readers_[side];
  if (ended_ || r.reading || r.eof) return;
  if (r.paused) {
    if (OverBound(options_.max_queued_bytes / 2)) return;
    r.paused = false;
  } else if (OverBound(options_.max_queued_bytes)) {
    r.paused = true;
    return;
  }
  r.reading = true;
  r.desc.async_read_some(
      boost::asio::buffer(r.buf),
      [self = shared_from_this(), side](const boost::system::error_code& ec, std::size_t n) {
        self->OnRead(side, ec, n);
      });
}

void Relay::Impl::OnRead(Side side, const boost::system::error_code& ec, std::size_t n) {
  Reader& r = readers_[side];
  r.reading = false;
  if (ended_) return;
  if (ec == boost::asio::error::eof || (!ec && n == 0)) {
    OnEof(side);
    return;
  }
  if (ec) {
    End(side == kClient ? RelayEnd::kClientGone : RelayEnd::kServerGone,
        std::string("reading from the ") + (side == kClient ? "client" : "server") +
            " failed: " + ec.message());
    return;
  }
  Feed(side, std::string_view(r.buf.data(), n));
  Read(side);
}

void Relay::Impl::Feed(Side side, std::string_view bytes) {
  Reader& r = readers_[side];
  while (!bytes.empty() && !ended_) {
    const std::size_t nl = bytes.find('\n');
    const std::string_view part = bytes.substr(0, nl);
    if (!r.oversized) {
      if (r.line.size() + part.size() > options_.max_frame_bytes) {
        // Keep only the beginning, for the id; the rest of the line is skipped unbuffered.
        const std::size_t keep = std::min(kHintBytes, options_.max_frame_bytes);
        if (r.line.size() < keep) r.line.append(part.substr(0, keep - r.line.size()));
        r.line.resize(std::min(r.line.size(), keep));
        r.oversized = true;
      } else {
        r.line.append(part);
      }
    }
    if (nl == std::string_view::npos) return;
    bytes.remove_prefix(nl + 1);
    std::string line = std::move(r.line);
    r.line.clear();
    const bool oversized = std::exchange(r.oversized, false);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    Line(side, line, oversized);
  }
}

void Relay::Impl::Line(Side side, std::string_view line, bool oversized) {
  if (!oversized && line.find_first_not_of(" \t\r") == std::string_view::npos) return;
  current_bytes_ = line.size();
  if (side == kClient) {
    FromClient(line, oversized);
  } else {
    FromServer(line, oversized);
  }
}

void Relay::Impl::OnEof(Side side) {
  Reader& r = readers_[side];
  r.eof = true;
  if (!r.line.empty() || r.oversized) {
    // A last line without its newline: handled as a line.
    std::string line = std::move(r.line);
    r.line.clear();
    Line(side, line, std::exchange(r.oversized, false));
    if (ended_) return;
  }
  if (side == kClient) {
    // The client is done: the server gets what is queued for it, then EOF on its stdin. Its
    // answers still reach the client until it closes its output (or the owner stops it).
    client_eof_ = true;
    writers_[kServer].close_when_drained = true;
    Write(kServer);
    if (on_client_closed_ && !ended_) on_client_closed_();
  } else {
    // The server is done: every request it still had is answered for it, then the client gets
    // what is queued and EOF.
    auto pending = std::exchange(client_pending_, {});
    for (auto& [key, call] : pending) {
      if (call.method == "tools/call") ReportFailedCall(call, "the server exited before answering");
      Send(kClient, ErrorResponse(call.id, kInternalErrorCode,
                                  "the wrapped MCP server exited before answering"));
    }
    if (client_eof_) {
      CloseWhenDrained(kClient, RelayEnd::kClientClosed,
                       "the client closed its input, and then the server its output");
    } else {
      CloseWhenDrained(kClient, RelayEnd::kServerClosed, "the server closed its output");
    }
  }
}

// ---- writing ----

void Relay::Impl::Send(Side to, const json& message) {
  Writer& w = writers_[to];
  if (ended_ || w.closed || w.close_when_drained) return;
  std::string line = JsonText(message);
  line += '\n';
  w.queued += line.size();
  w.queue.push_back(std::move(line));
  Write(to);
}

void Relay::Impl::Write(Side to) {
  Writer& w = writers_[to];
  if (ended_ || w.writing || w.closed) return;
  if (w.queue.empty()) {
    if (w.close_when_drained) {
      boost::system::error_code ignored;
      w.desc.close(ignored);
      w.closed = true;
      if (w.end_when_closed) End(w.end_why, w.end_text);
    }
    return;
  }
  w.writing = true;
  boost::asio::async_write(
      w.desc, boost::asio::buffer(w.queue.front()),
      [self = shared_from_this(), to](const boost::system::error_code& ec, std::size_t) {
        Writer& writer = self->writers_[to];
        writer.writing = false;
        if (self->ended_) return;
        if (ec) {
          self->End(to == kClient ? RelayEnd::kClientGone : RelayEnd::kServerGone,
                    std::string("writing to the ") + (to == kClient ? "client" : "server") +
                        " failed: " + ec.message());
          return;
        }
        writer.queued -= writer.queue.front().size();
        writer.queue.pop_front();
        self->Write(to);
        self->ResumeReads();
      });
}

void Relay::Impl::ResumeReads() {
  Read(kClient);
  Read(kServer);
}

void Relay::Impl::CloseWhenDrained(Side to, RelayEnd why, const std::string& text) {
  Writer& w = writers_[to];
  w.close_when_drained = true;
  w.end_when_closed = true;
  w.end_why = why;
  w.end_text = text;
  Write(to);
  if (ended_) return;
  // Ends once the queue is written and closed, or after the drain timeout (a peer that does not
  // read must not keep cagent waiting).
  DrainPoll(to, why, text, std::chrono::steady_clock::now() + kDrainTimeout);
}

void Relay::Impl::DrainPoll(Side to, RelayEnd why, const std::string& text,
                            std::chrono::steady_clock::time_point deadline) {
  if (ended_) return;
  if (std::chrono::steady_clock::now() >= deadline) {
    End(why, text + " (" + std::string(to == kClient ? "the client" : "the server") +
                 " did not read what was left for it)");
    return;
  }
  drain_timer_.expires_at(deadline);
  drain_timer_.async_wait(
      [weak = weak_from_this(), to, why, text, deadline](const boost::system::error_code& ec) {
        auto self = weak.lock();
        if (!ec && self) self->DrainPoll(to, why, text, deadline);
      });
}

// ---- the client's messages ----

void Relay::Impl::RefuseClient(const FrameHint& hint, int code, const std::string& message) {
  ++stats_.client_refused;
  if (!hint.has_method && !hint.id.is_null()) {
    // Looks like the client's answer to a request of the server: the server hears that it failed.
    const auto it = server_pending_.find(IdKey(hint.id));
    if (it != server_pending_.end()) {
      server_pending_.erase(it);
      Send(kServer, ErrorResponse(hint.id, kInternalErrorCode,
                                  "the client's response was refused by cagent: " + message));
      return;
    }
  }
  // A response-like line gets its error without an id: the id is the server's, not one of the
  // client's requests.
  Send(kClient, ErrorResponse(hint.has_method ? hint.id : json(), code, message));
}

void Relay::Impl::FromClient(std::string_view line, bool oversized) {
  if (oversized) {
    RefuseClient(ScanFrameHint(line), kInvalidRequestCode,
                 "message refused by cagent: larger than " +
                     std::to_string(options_.max_frame_bytes) + " bytes");
    return;
  }
  if (JsonDepth(line, options_.max_depth) > options_.max_depth) {
    RefuseClient(ScanFrameHint(line), kInvalidRequestCode,
                 "message refused by cagent: nested deeper than " +
                     std::to_string(options_.max_depth) + " levels");
    return;
  }
  json message = ParseJsonText(line);
  if (message.is_discarded()) {
    RefuseClient(ScanFrameHint(line), kParseErrorCode, "parse error: the line is not valid JSON");
    return;
  }
  if (message.is_array()) {
    RefuseClient({}, kInvalidRequestCode, "JSON-RPC batches are not supported");
    return;
  }
  if (!message.is_object()) {
    RefuseClient({}, kInvalidRequestCode, "a JSON-RPC message must be an object");
    return;
  }
  ++stats_.client_messages;
  const auto id = message.find("id");
  FrameHint hint;
  hint.has_method = message.contains("method");
  if (id != message.end() && UsableId(*id)) hint.id = *id;
  const auto version = message.find("jsonrpc");
  if (version == message.end() || *version != "2.0") {
    RefuseClient(hint, kInvalidRequestCode, "\"jsonrpc\" must be \"2.0\"");
    return;
  }
  if (const auto method = message.find("method"); method != message.end()) {
    if (!method->is_string()) {
      RefuseClient(hint, kInvalidRequestCode, "\"method\" must be a string");
      return;
    }
    if (const auto params = message.find("params");
        params != message.end() && !params->is_object() && !params->is_array()) {
      RefuseClient(hint, kInvalidRequestCode, "\"params\" must be an object");
      return;
    }
    const std::string name = method->get<std::string>();
    if (id != message.end() && !UsableId(*id)) {
      RefuseClient({}, kInvalidRequestCode, "a request id must be a string or an integer");
      return;
    }
    // Gated by what the message is (its method), never by whether it has an id: an id-less
    // tools/call reaches a server that dispatches by method just as a request does.
    switch (ClassifyClientMethod(name, id != message.end())) {
      case ClientMethod::kToolsCall:
        if (id == message.end()) {
          ClientToolsCallNotification(message);
        } else {
          ClientRequest(message, name);
        }
        return;
      case ClientMethod::kRefused:
        ++stats_.methods_refused;
        if (id == message.end()) {
          ++stats_.client_refused;  // a notification gets no answer: dropped
          ++stats_.notifications_dropped;
          return;
        }
        RefuseClient(hint, kMethodNotFoundCode,
                     "method not found: cagent forwards only the MCP methods it knows to the "
                     "wrapped server (\"" +
                         name + "\" is not one of them" +
                         (ClassifyClientMethod(name, false) == ClientMethod::kForwarded
                              ? ", as a request: it is a notification"
                              : "") +
                         ")");
        return;
      case ClientMethod::kForwarded:
        break;
    }
    if (id == message.end()) {
      ClientNotification(message, name);
      return;
    }
    ClientRequest(message, name);
    return;
  }
  const bool has_result = message.contains("result");
  const bool has_error = message.contains("error");
  if (id != message.end() && UsableId(*id) && has_result != has_error) {
    ClientResponse(message);
    return;
  }
  RefuseClient(hint, kInvalidRequestCode,
               "not a JSON-RPC request, notification or response (no method; an id with exactly "
               "one of result or error is a response)");
}

void Relay::Impl::ClientRequest(const json& message, const std::string& method) {
  const json& id = message["id"];
  const std::string key = IdKey(id);
  if (client_pending_.count(key) != 0 || checking_.count(key) != 0) {
    ++stats_.client_refused;
    Send(kClient, ErrorResponse(id, kInvalidRequestCode,
                                "id " + key + " is already used by a request in progress"));
    return;
  }
  if (client_pending_.size() + checking_.size() >= options_.max_outstanding) {
    ++stats_.client_refused;
    Send(kClient, ErrorResponse(id, kInternalErrorCode,
                                "too many requests in progress (" +
                                    std::to_string(options_.max_outstanding) + "); retry later"));
    return;
  }
  if (method == "tools/call") {
    ClientToolsCall(message, key);
    return;
  }
  client_pending_[key] = Forwarded{method, "", id};
  Send(kServer, message);
}

namespace {

// The tool name and the arguments of a tools/call; nullopt (with `why`) when params has no string
// name or its arguments are not an object.
std::optional<std::pair<std::string, json>> ToolsCallParams(const json& message, std::string& why) {
  const auto params = message.find("params");
  const json* name = nullptr;
  const json* arguments = nullptr;
  if (params != message.end() && params->is_object()) {
    if (auto n = params->find("name"); n != params->end()) name = &*n;
    if (auto a = params->find("arguments"); a != params->end()) arguments = &*a;
  }
  if (name == nullptr || !name->is_string()) {
    why = "tools/call needs params.name (a string)";
    return std::nullopt;
  }
  if (arguments != nullptr && !arguments->is_object()) {
    why = "tools/call params.arguments must be an object";
    return std::nullopt;
  }
  return std::make_pair(name->get<std::string>(),
                        arguments != nullptr ? *arguments : json::object());
}

}  // namespace

void Relay::Impl::ClientToolsCall(const json& message, const std::string& key) {
  const json& id = message["id"];
  std::string why;
  auto call = ToolsCallParams(message, why);
  if (!call) {
    ++stats_.client_refused;
    Send(kClient, ErrorResponse(id, kInvalidParamsCode, why));
    return;
  }
  if (checking_.size() >= options_.max_checks) {
    ++stats_.client_refused;
    Send(kClient, ErrorResponse(id, kInternalErrorCode,
                                "too many tool calls awaiting a decision (" +
                                    std::to_string(options_.max_checks) + "); retry later"));
    return;
  }
  const std::uint64_t serial = next_serial_++;
  const std::string tool = call->first;
  checking_[key] = Checking{message, tool, serial, false};
  const json args = std::move(call->second);
  gate_.Check(tool, args, id, [weak = weak_from_this(), key, serial](const GateVerdict& verdict) {
    auto self = weak.lock();
    if (!self) return;
    // The gate may answer from a handler posted to the io_context or from inside
    // Check; either way on the io thread.
    self->Verdict(key, serial, verdict);
  });
}

void Relay::Impl::ClientToolsCallNotification(const json& message) {
  // A tools/call without an id: not a request MCP knows, but a server that dispatches by method
  // runs it all the same. So the gate decides it as any tools/call; allowed, it is forwarded as it
  // came (the server's answer, if any, has no id to go back to and is dropped as unmatched);
  // denied or malformed it is dropped, and with no id nobody can be told.
  std::string why;
  auto call = ToolsCallParams(message, why);
  if (!call || checking_.size() >= options_.max_checks) {
    ++stats_.client_refused;
    ++stats_.notifications_dropped;
    return;
  }
  const std::uint64_t serial = next_serial_++;
  // Not a JSON text, so it never collides with the key of a client id, and a
  // notifications/cancelled cannot name it.
  const std::string key = "#notification " + std::to_string(serial);
  checking_[key] = Checking{message, call->first, serial, false};
  gate_.Check(call->first, call->second, json(),
              [weak = weak_from_this(), key, serial](const GateVerdict& verdict) {
                auto self = weak.lock();
                if (!self) return;
                self->Verdict(key, serial, verdict);
              });
}

void Relay::Impl::Verdict(const std::string& key, std::uint64_t serial,
                          const GateVerdict& verdict) {
  if (ended_) return;
  const auto it = checking_.find(key);
  if (it == checking_.end() || it->second.serial != serial) return;  // a second answer
  Checking check = std::move(it->second);
  checking_.erase(it);
  if (verdict.allow) ++stats_.calls_allowed;
  if (!verdict.allow) ++stats_.calls_denied;
  if (check.cancelled) return;  // the client no longer wants an answer
  if (!check.message.contains("id")) {
    // An id-less tools/call: forwarded when allowed (nothing to track), dropped when denied.
    if (verdict.allow && !readers_[kServer].eof) {
      Send(kServer, check.message);
    } else {
      ++stats_.client_refused;
      ++stats_.notifications_dropped;
    }
    return;
  }
  const json& id = check.message.at("id");
  if (!verdict.allow) {
    json result = {{"content", json::array({{{"type", "text"}, {"text", verdict.message}}})},
                   {"isError", true}};
    Send(kClient, {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}});
    return;
  }
  if (readers_[kServer].eof) {
    ReportFailedCall({"tools/call", check.tool, id}, "the server exited before the call");
    Send(kClient, ErrorResponse(id, kInternalErrorCode,
                                "the wrapped MCP server exited before the call could be made"));
    return;
  }
  client_pending_[key] = Forwarded{"tools/call", check.tool, id};
  Send(kServer, check.message);
}

void Relay::Impl::ClientNotification(const json& message, const std::string& method) {
  if (method == "notifications/cancelled") {
    const json* params = message.contains("params") ? &message["params"] : nullptr;
    if (params != nullptr && params->is_object() && params->contains("requestId")) {
      const json& request = (*params)["requestId"];
      if (UsableId(request)) {
        const std::string key = IdKey(request);
        if (auto c = checking_.find(key); c != checking_.end()) {
          // The server never saw this id: nothing to forward, and no answer is sent.
          c->second.cancelled = true;
          return;
        }
        if (auto f = client_pending_.find(key); f != client_pending_.end()) {
          // The server should not answer a cancelled request; stop waiting for it (a late
          // answer is then dropped as unmatched).
          if (f->second.method == "tools/call") {
            ReportFailedCall(f->second, "cancelled by the client");
          }
          client_pending_.erase(f);
        }
      }
    }
  }
  Send(kServer, message);
}

void Relay::Impl::ClientResponse(const json& message) {
  const auto it = server_pending_.find(IdKey(message["id"]));
  if (it == server_pending_.end()) {
    ++stats_.client_refused;  // answers nothing the server asked: dropped
    return;
  }
  server_pending_.erase(it);
  Send(kServer, message);
}

// ---- the server's messages ----

void Relay::Impl::ReportCall(const Forwarded& call, const json& response, std::uint64_t bytes) {
  CallOutcome outcome;
  outcome.request_id = call.id;
  outcome.tool = call.tool;
  outcome.bytes = bytes;
  if (const auto result = response.find("result"); result != response.end()) {
    outcome.ok = true;
    if (result->is_object()) {
      const auto is_error = result->find("isError");
      outcome.is_error = is_error != result->end() && *is_error == true;
    }
    outcome.digest = Sha256Hex(JsonText(*result));
  } else {
    const json& error = response["error"];
    outcome.digest = Sha256Hex(JsonText(error));
    outcome.error = error.is_object() && error.contains("message") && error["message"].is_string()
                        ? error["message"].get<std::string>()
                        : "the server answered with an error";
  }
  gate_.Result(outcome);
}

void Relay::Impl::ReportFailedCall(const Forwarded& call, const std::string& error) {
  CallOutcome outcome;
  outcome.request_id = call.id;
  outcome.tool = call.tool;
  outcome.error = error;
  gate_.Result(outcome);
}

void Relay::Impl::DropServer(const FrameHint& hint, const std::string& what) {
  ++stats_.server_dropped;
  if (hint.has_method || hint.id.is_null()) return;
  const auto it = client_pending_.find(IdKey(hint.id));
  if (it == client_pending_.end()) return;
  Forwarded call = std::move(it->second);
  client_pending_.erase(it);
  if (call.method == "tools/call") ReportFailedCall(call, "the server sent " + what);
  Send(kClient, ErrorResponse(call.id, kInternalErrorCode,
                              "the wrapped server sent " + what +
                                  " for this request; cagent "
                                  "dropped it"));
}

void Relay::Impl::FromServer(std::string_view line, bool oversized) {
  if (oversized) {
    DropServer(ScanFrameHint(line), "an oversized message (over " +
                                        std::to_string(options_.max_frame_bytes) + " bytes)");
    return;
  }
  if (JsonDepth(line, options_.max_depth) > options_.max_depth) {
    DropServer(ScanFrameHint(line),
               "a message nested deeper than " + std::to_string(options_.max_depth) + " levels");
    return;
  }
  json message = ParseJsonText(line);
  if (message.is_discarded()) {
    DropServer(ScanFrameHint(line), "a malformed message");
    return;
  }
  if (!message.is_object()) {
    DropServer({}, "a message that is not a JSON object");
    return;
  }
  ++stats_.server_messages;
  const auto id = message.find("id");
  FrameHint hint;
  hint.has_method = message.contains("method");
  if (id != message.end() && UsableId(*id)) hint.id = *id;
  if (const auto version = message.find("jsonrpc"); version == message.end() || *version != "2.0") {
    DropServer(hint, "a malformed message (\"jsonrpc\" is not \"2.0\")");
    return;
  }
  if (const auto method = message.find("method"); method != message.end()) {
    if (!method->is_string()) {
      DropServer(hint, "a malformed message");
      return;
    }
    if (id == message.end()) {
      Send(kClient, message);  // a notification
      return;
    }
    if (!UsableId(*id)) {
      DropServer(hint, "a request with an unusable id");
      return;
    }
    ServerRequest(message);
    return;
  }
  const bool has_result = message.contains("result");
  const bool has_error = message.contains("error");
  if (id != message.end() && UsableId(*id) && has_result != has_error) {
    ServerResponse(std::move(message));
    return;
  }
  DropServer(hint, "a malformed message");
}

void Relay::Impl::ServerRequest(const json& message) {
  const json& id = message["id"];
  const std::string key = IdKey(id);
  if (server_pending_.count(key) != 0) {
    ++stats_.server_dropped;
    Send(kServer, ErrorResponse(id, kInvalidRequestCode,
                                "id " + key + " is already used by a request in progress"));
    return;
  }
  if (server_pending_.size() >= options_.max_outstanding) {
    ++stats_.server_dropped;
    Send(kServer, ErrorResponse(id, kInternalErrorCode, "too many requests in progress"));
    return;
  }
  server_pending_[key] = message["method"].get<std::string>();
  Send(kClient, message);
}

void Relay::Impl::ServerResponse(json message) {
  const auto it = client_pending_.find(IdKey(message["id"]));
  if (it == client_pending_.end()) {
    // An id the client never sent, one the relay answered itself (a denied or still-checked
    // tools/call), or one already answered: the server cannot answer it.
    ++stats_.server_dropped;
    ++stats_.unmatched_responses;
    return;
  }
  Forwarded call = std::move(it->second);
  client_pending_.erase(it);
  if (call.method == "tools/call") ReportCall(call, message, current_bytes_);
  if (call.method == "tools/list") FilterToolsList(message);
  Send(kClient, message);
}

void Relay::Impl::FilterToolsList(json& message) {
  auto result = message.find("result");
  if (result == message.end() || !result->is_object()) return;
  auto tools = result->find("tools");
  if (tools == result->end() || !tools->is_array()) return;
  json kept = json::array();
  std::vector<std::string> offered;
  std::vector<std::string> hidden;
  for (json& tool : *tools) {
    const auto name = tool.is_object() ? tool.find("name") : tool.end();
    if (!tool.is_object() || name == tool.end() || !name->is_string()) {
      hidden.emplace_back("(a tool without a name)");
      continue;
    }
    const std::string n = name->get<std::string>();
    if (gate_.Listed(n)) {
      offered.push_back(n);
      kept.push_back(std::move(tool));
    } else {
      hidden.push_back(n);
    }
  }
  *tools = std::move(kept);
  stats_.tools_hidden += hidden.size();
  if (!hidden.empty()) {
    auto meta = result->find("_meta");
    if (meta == result->end()) {
      (*result)["_meta"] = json::object();
      meta = result->find("_meta");
    }
    if (meta->is_object()) (*meta)["cagent/hiddenTools"] = hidden;
  }
  gate_.ListFiltered(offered, hidden);
}

// ---- the end ----

void Relay::Impl::End(RelayEnd why, const std::string& text) {
  if (ended_) return;
  ended_ = true;
  boost::system::error_code ignored;
  drain_timer_.cancel();
  for (auto& [key, call] : client_pending_) {
    if (call.method == "tools/call") {
      ReportFailedCall(call, "the relay ended (" + std::string(RelayEndName(why)) +
                                 ") before the server answered");
    }
  }
  client_pending_.clear();
  checking_.clear();
  server_pending_.clear();
  for (Reader& r : readers_) r.desc.close(ignored);
  for (Writer& w : writers_) {
    w.desc.close(ignored);
    w.closed = true;
  }
  if (auto done = std::exchange(on_end_, nullptr)) done(why, text);
}

Relay::Relay(boost::asio::io_context& io, RelayGate& gate, RelayOptions options)
    : impl_(std::make_shared<Impl>(io, gate, options)) {}

Relay::~Relay() { impl_->Abandon(); }

bool Relay::Start(RelayEnds ends, std::function<void(RelayEnd, std::string)> on_end,
                  std::string* error) {
  return impl_->Start(std::move(ends), std::move(on_end), error);
}

void Relay::Stop() { impl_->End(RelayEnd::kStopped, "stopped"); }

void Relay::SetOnClientClosed(std::function<void()> on_client_closed) {
  impl_->SetOnClientClosed(std::move(on_client_closed));
}

RelayStats Relay::stats() const { return impl_->stats(); }

}  // namespace cagent::launcher::mcp
