#include "tests/launcher/mcp/protocol/http_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace cagent::testing {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

}  // namespace

std::string HttpReply::Header(const std::string& lowercase_name) const {
  const auto it = headers.find(lowercase_name);
  return it == headers.end() ? std::string() : it->second;
}

std::string BuildRequest(std::string_view method, std::string_view path,
                         const std::vector<std::pair<std::string, std::string>>& headers,
                         std::string_view body) {
  std::string out(method);
  out += " ";
  out += path;
  out += " HTTP/1.1\r\n";
  bool framed = false;
  for (const auto& [name, value] : headers) {
    out += name + ": " + value + "\r\n";
    framed = framed || Lower(name) == "content-length" || Lower(name) == "transfer-encoding";
  }
  if (!framed && (!body.empty() || method == "POST")) {
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  out += "\r\n";
  out += body;
  return out;
}

RawHttpClient::RawHttpClient(std::uint16_t port, std::chrono::milliseconds timeout)
    : timeout_(timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return;
  }
  const int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fd_ = fd;
}

RawHttpClient::~RawHttpClient() { Close(); }

void RawHttpClient::Close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

bool RawHttpClient::Send(std::string_view bytes) {
  while (!bytes.empty() && fd_ >= 0) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return bytes.empty();
}

bool RawHttpClient::Fill(std::chrono::milliseconds wait) {
  if (fd_ < 0) {
    return false;
  }
  pollfd pfd{fd_, POLLIN, 0};
  const int ready = ::poll(&pfd, 1, static_cast<int>(wait.count()));
  if (ready <= 0) {
    return false;
  }
  std::array<char, 16384> chunk{};
  const ssize_t n = ::recv(fd_, chunk.data(), chunk.size(), 0);
  if (n <= 0) {
    return false;
  }
  buffer_.append(chunk.data(), static_cast<std::size_t>(n));
  return true;
}

bool RawHttpClient::ReadLine(std::string& line) {
  for (;;) {
    const std::size_t end = buffer_.find("\r\n");
    if (end != std::string::npos) {
      line = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      return true;
    }
    if (!Fill(timeout_)) {
      return false;
    }
  }
}

std::optional<HttpReply> RawHttpClient::ReadHead() {
  std::string line;
  if (!ReadLine(line) || line.rfind("HTTP/1.1 ", 0) != 0 || line.size() < 12) {
    return std::nullopt;
  }
  HttpReply reply;
  reply.status = std::atoi(line.substr(9, 3).c_str());
  for (;;) {
    if (!ReadLine(line)) {
      return std::nullopt;
    }
    if (line.empty()) {
      break;
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) {
      return std::nullopt;
    }
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') {
      value.erase(0, 1);
    }
    reply.headers[Lower(line.substr(0, colon))] = value;
  }
  events_.clear();
  stream_ended_ = false;
  return reply;
}

std::optional<std::string> RawHttpClient::ReadChunk() {
  std::string size_line;
  if (!ReadLine(size_line)) {
    return std::nullopt;
  }
  char* end = nullptr;
  const unsigned long size = std::strtoul(size_line.c_str(), &end, 16);
  if (end == size_line.c_str()) {
    return std::nullopt;
  }
  while (buffer_.size() < size + 2) {
    if (!Fill(timeout_)) {
      return std::nullopt;
    }
  }
  std::string data = buffer_.substr(0, size);
  buffer_.erase(0, size + 2);
  if (size == 0) {
    // The last chunk: its CRLF was the empty trailer line.
    return std::string();
  }
  return data;
}

bool RawHttpClient::ReadBody(HttpReply& reply) {
  if (Lower(reply.Header("transfer-encoding")) == "chunked") {
    for (;;) {
      std::optional<std::string> chunk = ReadChunk();
      if (!chunk) {
        return false;
      }
      if (chunk->empty()) {
        return true;
      }
      reply.body += *chunk;
    }
  }
  const std::string length = reply.Header("content-length");
  if (length.empty()) {
    while (Fill(timeout_)) {
    }
    reply.body = std::move(buffer_);
    buffer_.clear();
    return true;
  }
  const std::size_t size = std::strtoul(length.c_str(), nullptr, 10);
  while (buffer_.size() < size) {
    if (!Fill(timeout_)) {
      return false;
    }
  }
  reply.body = buffer_.substr(0, size);
  buffer_.erase(0, size);
  return true;
}

std::optional<HttpReply> RawHttpClient::ReadResponse() {
  std::optional<HttpReply> reply = ReadHead();
  if (!reply || !ReadBody(*reply)) {
    return std::nullopt;
  }
  return reply;
}

std::optional<std::string> RawHttpClient::NextEvent() {
  for (;;) {
    const std::size_t end = events_.find("\n\n");
    if (end != std::string::npos) {
      const std::string event = events_.substr(0, end);
      events_.erase(0, end + 2);
      std::string data;
      std::size_t pos = 0;
      while (pos < event.size()) {
        std::size_t eol = event.find('\n', pos);
        if (eol == std::string::npos) {
          eol = event.size();
        }
        const std::string field = event.substr(pos, eol - pos);
        if (field.rfind("data: ", 0) == 0) {
          data += field.substr(6);
        }
        pos = eol + 1;
      }
      return data;
    }
    if (stream_ended_) {
      return std::nullopt;
    }
    std::optional<std::string> chunk = ReadChunk();
    if (!chunk) {
      return std::nullopt;
    }
    if (chunk->empty()) {
      stream_ended_ = true;
    }
    events_ += *chunk;
  }
}

bool RawHttpClient::ClosedByPeer(std::chrono::milliseconds wait) {
  if (fd_ < 0) {
    return true;
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return false;
    }
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) {
      return false;
    }
    std::array<char, 4096> chunk{};
    const ssize_t n = ::recv(fd_, chunk.data(), chunk.size(), 0);
    if (n <= 0) {
      return true;
    }
    buffer_.append(chunk.data(), static_cast<std::size_t>(n));  // an answer before the close
  }
}

}  // namespace cagent::testing
