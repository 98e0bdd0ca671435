// Helpers for the egress proxy's tests: loopback sockets, a scriptable Policy, fake upstream
// servers on threads, a record sink, and a ClientHello built field by field.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "launcher/egress/proxy.h"

namespace cagent::launcher::egress {

inline std::string FromHex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

inline void Put16(std::string& s, std::size_t v) {
  s.push_back(static_cast<char>((v >> 8U) & 0xffU));
  s.push_back(static_cast<char>(v & 0xffU));
}

// A TLS 1.2-framed ClientHello with one cipher suite, the SNI extension naming `name` (none when
// empty; a second host_name entry when `second` is set) and one more extension after it.
inline std::string BuildClientHello(const std::string& name, const std::string& second = "") {
  std::string body;
  Put16(body, 0x0303);
  body.append(32, 'r');
  body.push_back(0);  // session id
  Put16(body, 2);
  Put16(body, 0x1301);
  body.push_back(1);
  body.push_back(0);  // compression: null
  std::string extensions;
  if (!name.empty()) {
    std::string list;
    list.push_back(0);
    Put16(list, name.size());
    list += name;
    if (!second.empty()) {
      list.push_back(0);
      Put16(list, second.size());
      list += second;
    }
    std::string ext;
    Put16(ext, list.size());
    ext += list;
    Put16(extensions, 0);
    Put16(extensions, ext.size());
    extensions += ext;
  }
  Put16(extensions, 0x000b);  // ec_point_formats
  Put16(extensions, 2);
  extensions.push_back(1);
  extensions.push_back(0);
  Put16(body, extensions.size());
  body += extensions;
  std::string handshake;
  handshake.push_back(1);
  handshake.push_back(static_cast<char>(body.size() >> 16U));
  Put16(handshake, body.size() & 0xffffU);
  handshake += body;
  std::string record = {22, 3, 1};
  Put16(record, handshake.size());
  return record + handshake;
}

inline ::sockaddr_in Addr(const char* ip, std::uint16_t port) {
  ::sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

inline std::uint16_t PortOf(int fd) {
  ::sockaddr_in a{};
  ::socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<::sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// A listening TCP socket on ip:port (port 0: any); -1 on failure.
inline int ListenTcp(const char* ip, std::uint16_t port = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const auto a = Addr(ip, port);
  if (::bind(fd, reinterpret_cast<const ::sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(fd, 512) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline int BindUdp(const char* ip) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const auto a = Addr(ip, 0);
  if (::bind(fd, reinterpret_cast<const ::sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline void SetTimeout(int fd, int ms) {
  ::timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

// A blocking client socket connected to ip:port with 5 s timeouts; -1 on failure.
inline int ConnectTcp(const char* ip, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  SetTimeout(fd, 5000);
  const auto a = Addr(ip, port);
  if (::connect(fd, reinterpret_cast<const ::sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Reads until EOF, an error or the timeout; *err gets the errno of a failed read (0 at EOF).
inline std::string ReadAll(int fd, int* err = nullptr, std::size_t max = 1U << 30U) {
  std::string out;
  std::vector<char> buf(65536);
  if (err != nullptr) {
    *err = 0;
  }
  while (out.size() < max) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      if (n < 0 && err != nullptr) {
        *err = errno;
      }
      break;
    }
    out.append(buf.data(), static_cast<std::size_t>(n));
  }
  return out;
}

// Reads until `needle` has arrived (or EOF / timeout).
inline std::string ReadUntil(int fd, std::string_view needle) {
  std::string out;
  char c = 0;
  while (out.find(needle) == std::string::npos) {
    const ssize_t n = ::recv(fd, &c, 1, 0);
    if (n <= 0) {
      break;
    }
    out.push_back(c);
  }
  return out;
}

// A Policy scripted by the test: allowed hosts with their rule, the rest denied.
// A SOCKS5 CONNECT by name: greeting and request, then the tunnel.
inline std::string Socks5Connect(int fd, const std::string& host, std::uint16_t port) {
  SendAll(fd, std::string("\x05\x01\x00", 3));
  std::string reply(2, '\0');
  ::recv(fd, reply.data(), 2, MSG_WAITALL);
  if (reply != std::string("\x05\x00", 2)) {
    return reply;
  }
  std::string req("\x05\x01\x00\x03", 4);
  req.push_back(static_cast<char>(host.size()));
  req += host;
  Put16(req, port);
  SendAll(fd, req);
  std::string r(10, '\0');
  const ssize_t n = ::recv(fd, r.data(), r.size(), MSG_WAITALL);
  r.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return r;
}

class FakePolicy : public Policy {
 public:
  void Decide(const Destination& dest, std::function<void(Decision)> done) override {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      asked_.push_back(dest);
      if (hold_) {
        held_.push_back(std::move(done));
        cv_.notify_all();
        return;
      }
    }
    Decision d = DecisionFor(dest.host);
    if (async_) {
      std::thread([done = std::move(done), d = std::move(d)]() {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        done(d);
      }).detach();
      return;
    }
    done(d);
  }
  [[nodiscard]] bool AddressNamed(std::string_view address, std::uint16_t port) const override {
    const std::lock_guard<std::mutex> lock(mu_);
    return named_.count(std::string(address) + ":" + std::to_string(port)) != 0;
  }
  [[nodiscard]] bool MayResolve(std::string_view host) const override {
    const std::lock_guard<std::mutex> lock(mu_);
    return allowed_.count(std::string(host)) != 0;
  }

  void Allow(const std::string& host) {
    const std::lock_guard<std::mutex> lock(mu_);
    allowed_[host] = "allow " + host;
  }
  void NameAddress(const std::string& address, std::uint16_t port) {
    const std::lock_guard<std::mutex> lock(mu_);
    named_.insert(address + ":" + std::to_string(port));
  }
  void set_async(bool on) { async_ = on; }
  void set_hold(bool on) {
    const std::lock_guard<std::mutex> lock(mu_);
    hold_ = on;
  }
  // Waits for a held decision and takes its callback.
  std::function<void(Decision)> TakeHeld() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return !held_.empty(); });
    if (held_.empty()) {
      return nullptr;
    }
    auto f = std::move(held_.front());
    held_.erase(held_.begin());
    return f;
  }
  std::vector<Destination> asked() const {
    const std::lock_guard<std::mutex> lock(mu_);
    return asked_;
  }
  Decision DecisionFor(const std::string& host) const {
    const std::lock_guard<std::mutex> lock(mu_);
    const auto it = allowed_.find(host);
    if (it != allowed_.end()) {
      return {true, it->second, "allowed by " + it->second};
    }
    return {false, "deny *", host + " is not on the allow-list"};
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> allowed_;
  std::set<std::string> named_;
  std::vector<Destination> asked_;
  std::vector<std::function<void(Decision)>> held_;
  std::atomic<bool> async_{false};
  bool hold_ = false;
};

// Collects the proxy's records.
// Collects what the proxy reports (connection records, or intercepted requests' records).
template <typename Record>
class Sink {
 public:
  std::function<void(const Record&)> Callback() {
    return [this](const Record& r) {
      const std::lock_guard<std::mutex> lock(mu_);
      records_.push_back(r);
      cv_.notify_all();
    };
  }
  // Waits for the n-th record (1-based) for up to 5 s.
  Record Wait(std::size_t n = 1) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return records_.size() >= n; });
    return records_.size() >= n ? records_[n - 1] : Record{};
  }
  std::size_t size() {
    const std::lock_guard<std::mutex> lock(mu_);
    return records_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Record> records_;
};
using RecordSink = Sink<ConnectionRecord>;

// A fake upstream server on 127.0.0.1 (or `ip`): each accepted connection runs `handler(fd)` on
// its own thread, which closes the fd afterwards.
class FakeUpstream {
 public:
  explicit FakeUpstream(std::function<void(int)> handler, const char* ip = "127.0.0.1",
                        std::uint16_t port = 0)
      : handler_(std::move(handler)), fd_(ListenTcp(ip, port)) {
    if (fd_ >= 0) {
      port_ = PortOf(fd_);
      thread_ = std::thread([this] { Loop(); });
    }
  }
  ~FakeUpstream() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) {
      thread_.join();
    }
    for (auto& t : workers_) {
      t.join();
    }
    ::close(fd_);
  }
  FakeUpstream(const FakeUpstream&) = delete;
  FakeUpstream& operator=(const FakeUpstream&) = delete;
  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] bool ok() const { return fd_ >= 0; }
  [[nodiscard]] int accepted() const { return accepted_.load(); }

 private:
  void Loop() {
    while (!stop_) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (stop_) {
          return;
        }
        continue;
      }
      accepted_++;
      SetTimeout(c, 5000);
      workers_.emplace_back([this, c] {
        handler_(c);
        ::close(c);
      });
    }
  }
  std::function<void(int)> handler_;
  int fd_;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
  std::vector<std::thread> workers_;
};

}  // namespace cagent::launcher::egress
