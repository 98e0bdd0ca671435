// The egress proxy's DNS stub: the sandbox's only resolver. It never asks an upstream server; a
// name the policy may reach gets a synthetic IPv4 address (PREFIX.x.y, stable for the proxy's
// life) that the transparent listeners map back to the name; any other name is NXDOMAIN. Pure.
#pragma once

#include <boost/asio/ip/address_v4.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"

namespace cagent::launcher::egress {

// The two-way map between names and synthetic addresses. Not thread-safe (the proxy's io thread
// owns it).
class SyntheticAddresses {
 public:
  // `prefix`: two octets, "127.77": addresses PREFIX.0.1 .. PREFIX.255.254, in order.
  static Result<SyntheticAddresses> Create(std::string_view prefix);
  // The address of `name` (a normalized host name), given one on first use; nullopt when all
  // 65534 are given.
  std::optional<boost::asio::ip::address_v4> Assign(const std::string& name);
  // The name `address` was given to; nullopt if none.
  [[nodiscard]] std::optional<std::string> NameOf(const boost::asio::ip::address_v4& address) const;
  // Whether `address` lies in PREFIX/16.
  [[nodiscard]] bool InRange(const boost::asio::ip::address_v4& address) const;

 private:
  explicit SyntheticAddresses(std::uint32_t base) : base_(base) {}
  std::uint32_t base_;
  std::unordered_map<std::string, std::uint32_t> by_name_;
  std::vector<std::string> names_;  // index n-1 holds the name of base_ + n
};

inline constexpr std::uint32_t kDnsTtlSeconds = 5;

// The reply to one query datagram, or nullopt when it is to be dropped (shorter than a header, or
// itself a response). A query that is malformed (not one question, a compressed or overlong name,
// trailing junk before the additional section) gets FORMERR, an opcode other than QUERY NOTIMP, a
// class other than IN REFUSED. For a name with `may_resolve`: type A gets its synthetic address,
// any other type NOERROR with no answers; otherwise NXDOMAIN. The id, the RD bit and the question
// are echoed.
[[nodiscard]] std::optional<std::string> AnswerDnsQuery(
    std::string_view query, const std::function<bool(std::string_view)>& may_resolve,
    SyntheticAddresses& table);

}  // namespace cagent::launcher::egress
