#include "launcher/egress/sni.h"

#include <cstddef>

namespace cagent::launcher::egress {
namespace {

using Status = ClientHelloScan::Status;

constexpr std::uint8_t kHandshakeRecord = 22;
constexpr std::uint8_t kClientHelloType = 1;
constexpr std::size_t kRecordHeader = 5;
constexpr std::size_t kMaxRecord = 16384 + 2048;  // TLSPlaintext may not exceed 2^14 (+ slack)
constexpr std::size_t kMaxHello = 65536;

// A bounded reader over one buffer: every read checks the length first.
class Reader {
 public:
  explicit Reader(std::string_view d) : d_(d) {}
  bool U8(std::size_t& out) {
    if (d_.size() - pos_ < 1) {
      return false;
    }
    out = static_cast<std::uint8_t>(d_[pos_++]);
    return true;
  }
  bool U16(std::size_t& out) {
    std::size_t hi = 0;
    std::size_t lo = 0;
    if (d_.size() - pos_ < 2 || !U8(hi) || !U8(lo)) {
      return false;
    }
    out = (hi << 8U) | lo;
    return true;
  }
  bool Bytes(std::size_t n, std::string_view& out) {
    if (d_.size() - pos_ < n) {
      return false;
    }
    out = d_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool Skip(std::size_t n) {
    std::string_view ignored;
    return Bytes(n, ignored);
  }
  [[nodiscard]] bool empty() const { return pos_ == d_.size(); }

 private:
  std::string_view d_;
  std::size_t pos_ = 0;
};

bool HostByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

// The SNI extension's body: server_name_list.
bool ParseServerNameExtension(std::string_view body, std::string& name) {
  Reader r(body);
  std::size_t list_len = 0;
  std::string_view list;
  if (!r.U16(list_len) || !r.Bytes(list_len, list) || !r.empty()) {
    return false;
  }
  Reader l(list);
  bool have = false;
  while (!l.empty()) {
    std::size_t type = 0;
    std::size_t len = 0;
    std::string_view value;
    if (!l.U8(type) || !l.U16(len) || !l.Bytes(len, value)) {
      return false;
    }
    if (type != 0) {
      continue;  // not host_name
    }
    if (have || value.empty() || value.size() > 255) {
      return false;
    }
    for (char c : value) {
      if (!HostByte(c)) {
        return false;
      }
    }
    name.assign(value);
    have = true;
  }
  if (!have) {
    return false;
  }
  for (char& c : name) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  if (name.back() == '.') {
    name.pop_back();
  }
  // "a.test.." is no host name: with one dot stripped it would still end in one (found by the sni
  // fuzz target, issue #33).
  return !name.empty() && name.back() != '.';
}

// The ClientHello body (after the 4-byte handshake header).
ClientHelloScan ParseHelloBody(std::string_view body) {
  ClientHelloScan bad;
  Reader r(body);
  std::size_t len = 0;
  if (!r.Skip(2 + 32)) {  // legacy_version, random
    return bad;
  }
  if (!r.U8(len) || len > 32 || !r.Skip(len)) {  // legacy_session_id
    return bad;
  }
  if (!r.U16(len) || len < 2 || len % 2 != 0 || !r.Skip(len)) {  // cipher_suites
    return bad;
  }
  if (!r.U8(len) || len < 1 || !r.Skip(len)) {  // legacy_compression_methods
    return bad;
  }
  ClientHelloScan out;
  out.status = Status::kClientHello;
  if (r.empty()) {
    return out;  // no extensions at all
  }
  std::string_view extensions;
  if (!r.U16(len) || !r.Bytes(len, extensions) || !r.empty()) {
    return bad;
  }
  Reader e(extensions);
  bool seen_sni = false;
  while (!e.empty()) {
    std::size_t type = 0;
    std::string_view ext;
    if (!e.U16(type) || !e.U16(len) || !e.Bytes(len, ext)) {
      return bad;
    }
    if (type == 0) {
      if (seen_sni || !ParseServerNameExtension(ext, out.server_name)) {
        return bad;
      }
      seen_sni = true;
    }
  }
  return out;
}

}  // namespace

ClientHelloScan ScanClientHello(std::string_view data) {
  ClientHelloScan incomplete;
  incomplete.status = Status::kIncomplete;
  ClientHelloScan bad;
  // Gather the handshake bytes from consecutive handshake records until the ClientHello's
  // declared length is there.
  std::string handshake;
  std::size_t pos = 0;
  while (true) {
    if (data.size() - pos < kRecordHeader) {
      // What is there must look like the start of a record.
      if (data.size() > pos && static_cast<std::uint8_t>(data[pos]) != kHandshakeRecord) {
        return bad;
      }
      if (data.size() > pos + 1 && data[pos + 1] != 3) {
        return bad;
      }
      return incomplete;
    }
    const auto type = static_cast<std::uint8_t>(data[pos]);
    const auto major = static_cast<std::uint8_t>(data[pos + 1]);
    const std::size_t rec_len = (std::size_t{static_cast<std::uint8_t>(data[pos + 3])} << 8U) |
                                static_cast<std::uint8_t>(data[pos + 4]);
    if (type != kHandshakeRecord || major != 3 || rec_len == 0 || rec_len > kMaxRecord) {
      return bad;
    }
    const std::size_t avail = data.size() - pos - kRecordHeader;
    handshake.append(data.substr(pos + kRecordHeader, rec_len < avail ? rec_len : avail));
    if (handshake.size() >= 1 && static_cast<std::uint8_t>(handshake[0]) != kClientHelloType) {
      return bad;
    }
    if (handshake.size() >= 4) {
      const std::size_t hello_len = (std::size_t{static_cast<std::uint8_t>(handshake[1])} << 16U) |
                                    (std::size_t{static_cast<std::uint8_t>(handshake[2])} << 8U) |
                                    static_cast<std::uint8_t>(handshake[3]);
      if (hello_len > kMaxHello) {
        return bad;
      }
      if (handshake.size() >= 4 + hello_len) {
        const std::string_view whole = handshake;
        return ParseHelloBody(whole.substr(4, hello_len));
      }
    }
    if (rec_len > avail) {
      return incomplete;
    }
    pos += kRecordHeader + rec_len;
  }
}

}  // namespace cagent::launcher::egress
