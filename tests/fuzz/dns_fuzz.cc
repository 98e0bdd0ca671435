// libFuzzer target for the egress proxy's DNS stub (launcher/egress/dns.h): AnswerDnsQuery on a
// datagram the sandboxed code sends to its only resolver.
//
// Input: one byte choosing which names the policy lets resolve, then the query datagram.
// Invariants: no reply exactly for a datagram shorter than a header or one that is a response;
// a reply is a response echoing the query's id, opcode and RD bit; a reply with a question echoes
// the query's question; an answer is one A record of the synthetic range whose address maps back
// to the asked name as NormalizeHost writes it, for a name the policy allowed, and asking again
// gives the same reply (addresses are stable); the policy is only ever asked about clean hosts.
#include <boost/asio/ip/address_v4.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "launcher/egress/dns.h"
#include "launcher/egress/http_head.h"
#include "tests/fuzz/egress_host_check.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;
namespace egress = cagent::launcher::egress;

std::uint16_t U16(std::string_view s, std::size_t at) {
  return static_cast<std::uint16_t>((static_cast<std::uint8_t>(s[at]) << 8U) |
                                    static_cast<std::uint8_t>(s[at + 1]));
}

// The question of a well-formed query: its bytes and its name (labels joined with '.').
struct Question {
  std::string_view bytes;
  std::string name;
};
std::optional<Question> ReadQuestion(std::string_view q) {
  std::size_t pos = 12;
  std::string name;
  while (pos < q.size()) {
    const auto len = static_cast<std::uint8_t>(q[pos]);
    if (len == 0) {
      if (pos + 5 > q.size()) return std::nullopt;
      return Question{q.substr(12, pos + 5 - 12), name};
    }
    if (len > 63 || pos + 1 + len > q.size()) return std::nullopt;
    if (!name.empty()) name.push_back('.');
    name.append(q.substr(pos + 1, len));
    pos += 1 + len;
  }
  return std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cagent::fuzz::InputReader in(data, size);
  const std::uint8_t policy = in.Byte();
  const std::string_view query = in.Rest();

  auto table = egress::SyntheticAddresses::Create("127.77");
  Check(table.ok());
  std::size_t asked = 0;
  const auto may_resolve = [&](std::string_view host) {
    ++asked;
    Check(cagent::fuzz::CheckedNormalizeHost(host) == host);
    return ((host.size() + policy) & 1U) == 0 || (policy & 0x80U) != 0;
  };

  const std::optional<std::string> reply = egress::AnswerDnsQuery(query, may_resolve, *table);
  const bool dropped = query.size() < 12 || (static_cast<std::uint8_t>(query[2]) & 0x80U) != 0;
  Check(reply.has_value() != dropped);
  if (!reply) return 0;
  const std::string& r = *reply;
  Check(r.size() >= 12);
  Check(r[0] == query[0] && r[1] == query[1]);
  Check((static_cast<std::uint8_t>(r[2]) & 0x80U) != 0);  // QR
  Check((static_cast<std::uint8_t>(r[2]) & 0x79U) ==
        (static_cast<std::uint8_t>(query[2]) & 0x79U));  // opcode, RD
  const unsigned rcode = static_cast<std::uint8_t>(r[3]) & 0x0fU;
  Check(rcode <= 5);
  const std::uint16_t qdcount = U16(r, 4);
  const std::uint16_t ancount = U16(r, 6);
  Check(qdcount <= 1 && ancount <= 1 && U16(r, 8) == 0 && U16(r, 10) == 0);
  if (qdcount == 0) {
    Check(r.size() == 12 && ancount == 0 && asked == 0);
    return 0;
  }
  const auto question = ReadQuestion(query);
  Check(question.has_value());
  // The policy was asked about the name only if the name, as sent, is a clean host (issue #33:
  // "1.2.3.4\0evil" once passed as 1.2.3.4).
  if (asked > 0) Check(cagent::fuzz::CheckedNormalizeHost(question->name).has_value());
  Check(r.substr(12, question->bytes.size()) == question->bytes);
  const std::size_t after = 12 + question->bytes.size();
  if (ancount == 0) {
    Check(r.size() == after);
    return 0;
  }
  Check(rcode == 0 && r.size() == after + 16);
  Check(U16(r, after) == 0xc00c && U16(r, after + 2) == 1 && U16(r, after + 4) == 1);
  boost::asio::ip::address_v4::bytes_type b{};
  for (std::size_t i = 0; i < 4; ++i) b[i] = static_cast<unsigned char>(r[after + 12 + i]);
  const boost::asio::ip::address_v4 address(b);
  Check(table->InRange(address));
  const auto host = egress::NormalizeHost(question->name);
  Check(host.has_value() && table->NameOf(address) == host);
  Check(egress::AnswerDnsQuery(query, may_resolve, *table) == reply);
  return 0;
}
