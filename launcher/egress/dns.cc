#include "launcher/egress/dns.h"

#include "launcher/egress/http_head.h"

namespace cagent::launcher::egress {
namespace {

constexpr std::size_t kHeader = 12;
constexpr std::uint16_t kTypeA = 1;
constexpr std::uint16_t kClassIn = 1;
constexpr std::uint8_t kNoError = 0;
constexpr std::uint8_t kFormErr = 1;
constexpr std::uint8_t kServFail = 2;
constexpr std::uint8_t kNxDomain = 3;
constexpr std::uint8_t kNotImp = 4;
constexpr std::uint8_t kRefused = 5;

std::uint16_t U16(std::string_view d, std::size_t at) {
  return static_cast<std::uint16_t>((static_cast<std::uint8_t>(d[at]) << 8U) |
                                    static_cast<std::uint8_t>(d[at + 1]));
}

void Put16(std::string& out, std::uint32_t v) {
  out.push_back(static_cast<char>((v >> 8U) & 0xffU));
  out.push_back(static_cast<char>(v & 0xffU));
}

// A reply header: the query's id, QR=1, its opcode and RD, AA and RA set, `rcode`.
std::string ReplyHeader(std::string_view q, std::uint8_t rcode, bool question, bool answer) {
  std::string out;
  out.reserve(64);
  out.append(q.substr(0, 2));
  const auto flags1 = static_cast<std::uint8_t>(q[2]);
  const std::uint8_t opcode_rd = flags1 & 0x79U;  // opcode bits and RD
  out.push_back(static_cast<char>(0x80U | 0x04U | opcode_rd));
  out.push_back(static_cast<char>(0x80U | rcode));  // RA, rcode
  Put16(out, question ? 1 : 0);
  Put16(out, answer ? 1 : 0);
  Put16(out, 0);
  Put16(out, 0);
  return out;
}

}  // namespace

Result<SyntheticAddresses> SyntheticAddresses::Create(std::string_view prefix) {
  const std::string text = std::string(prefix) + ".0.0";
  boost::system::error_code ec;
  const auto base = boost::asio::ip::make_address_v4(text, ec);
  if (ec || prefix.find('.') == std::string_view::npos || prefix.find('.') != prefix.rfind('.')) {
    return PlainError("synthetic address prefix " + std::string(prefix),
                      "it must be two octets, like 127.77")
        .WithCode(Error::Code::kInvalidInput);
  }
  return SyntheticAddresses(base.to_uint());
}

std::optional<boost::asio::ip::address_v4> SyntheticAddresses::Assign(const std::string& name) {
  const auto it = by_name_.find(name);
  if (it != by_name_.end()) {
    return boost::asio::ip::address_v4(base_ + it->second);
  }
  if (names_.size() >= 65534) {
    return std::nullopt;
  }
  names_.push_back(name);
  const auto n = static_cast<std::uint32_t>(names_.size());
  by_name_.emplace(name, n);
  return boost::asio::ip::address_v4(base_ + n);
}

std::optional<std::string> SyntheticAddresses::NameOf(
    const boost::asio::ip::address_v4& address) const {
  if (!InRange(address)) {
    return std::nullopt;
  }
  const std::uint32_t n = address.to_uint() - base_;
  if (n == 0 || n > names_.size()) {
    return std::nullopt;
  }
  return names_[n - 1];
}

bool SyntheticAddresses::InRange(const boost::asio::ip::address_v4& address) const {
  return (address.to_uint() & 0xffff0000U) == base_;
}

std::optional<std::string> AnswerDnsQuery(std::string_view q,
                                          const std::function<bool(std::string_view)>& may_resolve,
                                          SyntheticAddresses& table) {
  if (q.size() < kHeader || (static_cast<std::uint8_t>(q[2]) & 0x80U) != 0) {
    return std::nullopt;
  }
  const std::uint8_t opcode = (static_cast<std::uint8_t>(q[2]) >> 3U) & 0x0fU;
  if (opcode != 0) {
    return ReplyHeader(q, kNotImp, false, false);
  }
  if (U16(q, 4) != 1 || U16(q, 6) != 0 || U16(q, 8) != 0) {
    return ReplyHeader(q, kFormErr, false, false);
  }
  // QNAME: uncompressed labels.
  std::size_t pos = kHeader;
  std::string name;
  while (true) {
    if (pos >= q.size()) {
      return ReplyHeader(q, kFormErr, false, false);
    }
    const auto len = static_cast<std::uint8_t>(q[pos]);
    if (len == 0) {
      ++pos;
      break;
    }
    if (len > 63 || pos + 1 + len > q.size() || name.size() + len + 1 > 254) {
      return ReplyHeader(q, kFormErr, false, false);
    }
    if (!name.empty()) {
      name.push_back('.');
    }
    name.append(q.substr(pos + 1, len));
    pos += 1 + len;
  }
  if (pos + 4 > q.size()) {
    return ReplyHeader(q, kFormErr, false, false);
  }
  const std::uint16_t qtype = U16(q, pos);
  const std::uint16_t qclass = U16(q, pos + 2);
  pos += 4;
  if (U16(q, 10) == 0 && pos != q.size()) {
    return ReplyHeader(q, kFormErr, false, false);
  }
  const std::string_view question = q.substr(kHeader, pos - kHeader);
  auto reply = [&](std::uint8_t rcode, const std::optional<boost::asio::ip::address_v4>& a) {
    std::string out = ReplyHeader(q, rcode, true, a.has_value());
    out.append(question);
    if (a) {
      Put16(out, 0xc00cU);  // a pointer to the question's name
      Put16(out, kTypeA);
      Put16(out, kClassIn);
      Put16(out, kDnsTtlSeconds >> 16U);
      Put16(out, kDnsTtlSeconds & 0xffffU);
      Put16(out, 4);
      for (unsigned char b : a->to_bytes()) {
        out.push_back(static_cast<char>(b));
      }
    }
    return out;
  };
  if (qclass != kClassIn) {
    return reply(kRefused, std::nullopt);
  }
  const auto host = NormalizeHost(name);
  if (!host || !may_resolve(*host)) {
    return reply(kNxDomain, std::nullopt);
  }
  if (qtype != kTypeA) {
    return reply(kNoError, std::nullopt);
  }
  const auto address = table.Assign(*host);
  if (!address) {
    return reply(kServFail, std::nullopt);
  }
  return reply(kNoError, address);
}

}  // namespace cagent::launcher::egress
