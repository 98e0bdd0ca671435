#include "tests/launcher/model/fake_provider_util.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace cagent::testing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using nlohmann::json;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 529:
      return "Overloaded";
    default:
      return "Status";
  }
}

FakeReply DefaultReply(const RecordedRequest& req) {
  const json body = req.Json();
  const bool stream = body.is_object() && body.value("stream", false);
  const std::string model = body.is_object() && body.contains("model") && body["model"].is_string()
                                ? body["model"].get<std::string>()
                                : "fake-model";
  const std::string path = req.target.substr(0, req.target.find('?'));
  auto ends_with = [&](const std::string& suffix) {
    return path.size() >= suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with("/chat/completions")) {
    if (stream) {
      json base = {{"id", "chatcmpl-fake"}, {"object", "chat.completion.chunk"}, {"model", model}};
      json c1 = base, c2 = base, c3 = base, c4 = base;
      c1["choices"] = {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", "Hello"}}}}};
      c2["choices"] = {{{"index", 0}, {"delta", {{"content", " from the fake"}}}}};
      c3["choices"] = {{{"index", 0}, {"delta", json::object()}, {"finish_reason", "stop"}}};
      c4["choices"] = json::array();
      c4["usage"] = {{"prompt_tokens", 7}, {"completion_tokens", 4}, {"total_tokens", 11}};
      return OpenAiStream({c1, c2, c3, c4});
    }
    return FakeReply::Json(
        200, {{"id", "chatcmpl-fake"},
              {"object", "chat.completion"},
              {"model", model},
              {"choices",
               {{{"index", 0},
                 {"message", {{"role", "assistant"}, {"content", "Hello from the fake"}}},
                 {"finish_reason", "stop"}}}},
              {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 4}, {"total_tokens", 11}}}});
  }
  if (ends_with("/v1/messages")) {
    if (stream) {
      return AnthropicStream(
          {{{"type", "message_start"},
            {"message",
             {{"id", "msg_fake"},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model},
              {"content", json::array()},
              {"usage", {{"input_tokens", 9}, {"output_tokens", 1}}}}}},
           {{"type", "content_block_start"},
            {"index", 0},
            {"content_block", {{"type", "text"}, {"text", ""}}}},
           {{"type", "content_block_delta"},
            {"index", 0},
            {"delta", {{"type", "text_delta"}, {"text", "Hello from the fake"}}}},
           {{"type", "content_block_stop"}, {"index", 0}},
           {{"type", "message_delta"},
            {"delta", {{"stop_reason", "end_turn"}}},
            {"usage", {{"output_tokens", 5}}}},
           {{"type", "message_stop"}}});
    }
    return FakeReply::Json(200, {{"id", "msg_fake"},
                                 {"type", "message"},
                                 {"role", "assistant"},
                                 {"model", model},
                                 {"content", {{{"type", "text"}, {"text", "Hello from the fake"}}}},
                                 {"stop_reason", "end_turn"},
                                 {"usage", {{"input_tokens", 9}, {"output_tokens", 5}}}});
  }
  return FakeReply::Json(404, {{"error", {{"message", "no such endpoint: " + path}}}});
}

bool Run(const std::string& command) { return std::system(command.c_str()) == 0; }

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

}  // namespace

struct FakeProvider::Impl {
  asio::io_context io;
  ssl::context tls{ssl::context::tls_server};
  tcp::acceptor acceptor{io};
};

std::string RecordedRequest::Header(const std::string& lower_name) const {
  const auto it = headers.find(lower_name);
  return it == headers.end() ? std::string{} : it->second;
}

json RecordedRequest::Json() const {
  return json::parse(body, nullptr, /*allow_exceptions=*/false);
}

FakeReply FakeReply::Json(int status, const json& body,
                          std::vector<std::pair<std::string, std::string>> headers) {
  FakeReply r;
  r.status = status;
  r.headers = std::move(headers);
  r.headers.emplace_back("Content-Type", "application/json");
  r.pieces = {body.dump()};
  return r;
}

FakeReply FakeReply::Text(int status, std::string body, std::string content_type) {
  FakeReply r;
  r.status = status;
  r.headers = {{"Content-Type", std::move(content_type)}};
  r.pieces = {std::move(body)};
  return r;
}

FakeReply FakeReply::Sse(std::vector<std::string> pieces) {
  FakeReply r;
  r.headers = {{"Content-Type", "text/event-stream; charset=utf-8"}, {"Cache-Control", "no-cache"}};
  r.pieces = std::move(pieces);
  r.chunked = true;
  return r;
}

std::string SseEventText(const json& data, const std::string& event) {
  return (event.empty() ? std::string{} : "event: " + event + "\n") + "data: " + data.dump() +
         "\n\n";
}

FakeReply OpenAiStream(const std::vector<json>& chunks) {
  std::vector<std::string> pieces;
  for (const json& c : chunks) pieces.push_back(SseEventText(c));
  pieces.emplace_back("data: [DONE]\n\n");
  return FakeReply::Sse(std::move(pieces));
}

FakeReply AnthropicStream(const std::vector<json>& events) {
  std::vector<std::string> pieces;
  for (const json& e : events) pieces.push_back(SseEventText(e, e.value("type", "")));
  return FakeReply::Sse(std::move(pieces));
}

FakeReply SplitPieces(FakeReply reply, std::size_t n) {
  std::vector<std::string> out;
  for (const std::string& p : reply.pieces) {
    for (std::size_t i = 0; i < p.size(); i += n) out.push_back(p.substr(i, n));
  }
  reply.pieces = std::move(out);
  return reply;
}

std::optional<TestPki> MakeTestPki(std::string* why_not) {
  if (!Run("openssl version >/dev/null 2>&1")) {
    *why_not = "the openssl command-line tool is not installed";
    return std::nullopt;
  }
  char tmpl[] = "/tmp/cagent-pki-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    *why_not = "cannot make a temporary directory";
    return std::nullopt;
  }
  TestPki pki;
  pki.dir = tmpl;
  pki.ca_file = pki.dir + "/ca.pem";
  pki.cert_file = pki.dir + "/server.pem";
  pki.key_file = pki.dir + "/server.key";
  pki.wrong_cert_file = pki.dir + "/wrong.pem";
  pki.wrong_key_file = pki.dir + "/wrong.key";
  const std::string d = pki.dir;
  const std::string quiet = " >/dev/null 2>&1";
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  if (!WriteFile(d + "/server.ext",
                 "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                 "extendedKeyUsage=serverAuth\n") ||
      !WriteFile(d + "/wrong.ext",
                 "subjectAltName=DNS:wrong.example\nbasicConstraints=CA:FALSE\n"
                 "extendedKeyUsage=serverAuth\n")) {
    *why_not = "cannot write the certificate extension files";
    return std::nullopt;
  }
  const bool ok =
      Run("openssl req -x509" + ec + " -keyout " + d + "/ca.key -out " + pki.ca_file +
          " -days 2 -subj '/CN=cagent test CA' -addext basicConstraints=critical,CA:TRUE"
          " -addext keyUsage=critical,keyCertSign,cRLSign" +
          quiet) &&
      Run("openssl req" + ec + " -keyout " + pki.key_file + " -out " + d +
          "/server.csr -subj /CN=localhost" + quiet) &&
      Run("openssl x509 -req -in " + d + "/server.csr -CA " + pki.ca_file + " -CAkey " + d +
          "/ca.key -CAcreateserial -days 2 -out " + pki.cert_file + " -extfile " + d +
          "/server.ext" + quiet) &&
      Run("openssl req" + ec + " -keyout " + pki.wrong_key_file + " -out " + d +
          "/wrong.csr -subj /CN=wrong.example" + quiet) &&
      Run("openssl x509 -req -in " + d + "/wrong.csr -CA " + pki.ca_file + " -CAkey " + d +
          "/ca.key -CAcreateserial -days 2 -out " + pki.wrong_cert_file + " -extfile " + d +
          "/wrong.ext" + quiet);
  if (!ok) {
    *why_not = "the openssl command-line tool failed to make the test certificates";
    return std::nullopt;
  }
  return pki;
}

FakeProvider::FakeProvider(Options options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  if (options_.tls) {
    impl_->tls.use_certificate_chain_file(options_.cert_file);
    impl_->tls.use_private_key_file(options_.key_file, ssl::context::pem);
  }
  const tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen();
  port_ = impl_->acceptor.local_endpoint().port();
  acceptor_thread_ = std::thread([this] { AcceptLoop(); });
}

FakeProvider::~FakeProvider() {
  stopping_ = true;
  {
    // Wake the blocking accept().
    asio::io_context io;
    tcp::socket wake(io);
    boost::system::error_code ec;
    wake.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
  }
  acceptor_thread_.join();
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(mu_);
    workers.swap(workers_);
  }
  for (auto& t : workers) t.join();
}

std::string FakeProvider::BaseUrl(const std::string& path) const {
  return (options_.tls ? "https://localhost:" : "http://127.0.0.1:") + std::to_string(port_) + path;
}

void FakeProvider::Enqueue(FakeReply reply) {
  std::lock_guard lock(mu_);
  replies_.push_back(std::move(reply));
}

std::vector<RecordedRequest> FakeProvider::Requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

std::optional<FakeReply> FakeProvider::NextReply() {
  std::lock_guard lock(mu_);
  if (replies_.empty()) return std::nullopt;
  FakeReply r = std::move(replies_.front());
  replies_.pop_front();
  return r;
}

bool FakeProvider::Sleep(std::chrono::milliseconds d) const {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
    if (stopping_) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return !stopping_;
}

void FakeProvider::AcceptLoop() {
  while (true) {
    tcp::socket socket(impl_->io);
    boost::system::error_code ec;
    impl_->acceptor.accept(socket, ec);
    if (stopping_) break;
    if (ec) continue;
    ++connections_;
    const int fd = socket.release(ec);
    if (ec) continue;
    std::lock_guard lock(mu_);
    workers_.emplace_back([this, fd] { Serve(fd); });
  }
}

void FakeProvider::Serve(int fd) {
  // A client that never sends its request must not hang the test's teardown.
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  tcp::socket socket(impl_->io, tcp::v4(), fd);
  boost::system::error_code ec;

  auto handle = [&](auto& stream) {
    beast::flat_buffer buffer;
    http::request<http::string_body> req;
    http::read(stream, buffer, req, ec);
    if (ec) return;
    RecordedRequest rec;
    rec.method = std::string(req.method_string());
    rec.target = std::string(req.target());
    for (const auto& field : req) {
      rec.headers[Lower(std::string(field.name_string()))] = std::string(field.value());
    }
    rec.body = req.body();
    {
      std::lock_guard lock(mu_);
      requests_.push_back(rec);
    }
    std::optional<FakeReply> scripted = NextReply();
    if (!scripted && options_.responder) {
      std::lock_guard lock(responder_mu_);
      scripted = options_.responder(rec);
    }
    FakeReply reply = scripted ? std::move(*scripted) : DefaultReply(rec);
    if (!Sleep(reply.delay)) return;
    if (reply.close_without_reply) return;
    std::string head =
        "HTTP/1.1 " + std::to_string(reply.status) + " " + Reason(reply.status) + "\r\n";
    for (const auto& [name, value] : reply.headers) head += name + ": " + value + "\r\n";
    if (reply.chunked) {
      head += "Transfer-Encoding: chunked\r\n";
    } else {
      std::size_t total = 0;
      for (const auto& p : reply.pieces) total += p.size();
      head += "Content-Length: " + std::to_string(total) + "\r\n";
    }
    head += "Connection: close\r\n\r\n";
    asio::write(stream, asio::buffer(head), ec);
    for (const std::string& piece : reply.pieces) {
      if (ec) return;
      if (reply.chunked) {
        char size[32];
        std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
        asio::write(stream, asio::buffer(std::string(size) + piece + "\r\n"), ec);
      } else {
        asio::write(stream, asio::buffer(piece), ec);
      }
      if (reply.piece_delay.count() > 0 && !Sleep(reply.piece_delay)) return;
    }
    if (ec) return;
    if (reply.reset_after_pieces) {
      socket.set_option(asio::socket_base::linger(true, 0), ec);
      socket.close(ec);
      return;
    }
    if (reply.chunked) asio::write(stream, asio::buffer(std::string("0\r\n\r\n")), ec);
    // Let the client read to the end before the socket goes away.
    socket.shutdown(tcp::socket::shutdown_send, ec);
    char drain[256];
    while (!stopping_) {
      socket.read_some(asio::buffer(drain), ec);
      if (ec) break;
    }
  };

  if (options_.tls) {
    ssl::stream<tcp::socket&> tls(socket, impl_->tls);
    tls.handshake(ssl::stream_base::server, ec);
    if (ec) {
      ++failed_handshakes_;
      return;
    }
    handle(tls);
  } else {
    handle(socket);
  }
}

}  // namespace cagent::testing
