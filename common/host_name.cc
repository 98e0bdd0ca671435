#include "common/host_name.h"

#include <arpa/inet.h>

#include <algorithm>

namespace cagent {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsLabelByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c) || c == '-';
}
char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Whether inet_aton would read `label`, the last part of a dotted text, as a number: decimal or
// octal digits, or 0x with hex digits (none at all included: inet_aton takes "0x" as 0).
bool IsNumberLabel(std::string_view label) {
  if (label.size() >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X')) {
    return std::all_of(label.begin() + 2, label.end(), IsHexDigit);
  }
  return !label.empty() && std::all_of(label.begin(), label.end(), IsDigit);
}

// inet_pton over `text` as a C string. A NUL inside `text` would end the C string early
// ("10.0.0.1\0.evil.com" read as 10.0.0.1), so a text with one is no literal.
template <std::size_t kBytes>
std::optional<std::array<unsigned char, kBytes>> Pton(int family, std::string_view text,
                                                      std::size_t max_text) {
  if (text.empty() || text.size() > max_text || text.find('\0') != std::string_view::npos) {
    return std::nullopt;
  }
  std::array<char, 64> buf{};
  std::copy(text.begin(), text.end(), buf.begin());
  std::array<unsigned char, kBytes> out{};
  if (inet_pton(family, buf.data(), out.data()) != 1) return std::nullopt;
  return out;
}

}  // namespace

std::optional<HostNameProblem> CheckHostName(std::string_view name) {
  std::string_view body = name;
  if (body.ends_with('.')) body.remove_suffix(1);
  if (body.empty()) {
    return HostNameProblem{HostNameFault::kEmpty, 0, std::max<std::size_t>(name.size(), 1)};
  }
  if (body.size() > kMaxHostNameBytes) {
    return HostNameProblem{HostNameFault::kTooLong, 0, name.size()};
  }
  std::size_t start = 0;
  while (true) {
    std::size_t end = body.find('.', start);
    if (end == std::string_view::npos) end = body.size();
    const std::string_view label = body.substr(start, end - start);
    if (label.empty()) return HostNameProblem{HostNameFault::kEmptyLabel, start, 1};
    for (std::size_t i = 0; i < label.size(); ++i) {
      if (!IsLabelByte(label[i])) return HostNameProblem{HostNameFault::kBadByte, start + i, 1};
    }
    if (label.size() > kMaxHostLabelBytes) {
      return HostNameProblem{HostNameFault::kLabelTooLong, start, label.size()};
    }
    if (label.front() == '-' || label.back() == '-') {
      return HostNameProblem{HostNameFault::kHyphenAtEdge, start, label.size()};
    }
    if (end == body.size()) {
      if (IsNumberLabel(label)) return HostNameProblem{HostNameFault::kNumericLast, 0, name.size()};
      return std::nullopt;
    }
    start = end + 1;
  }
}

std::optional<std::array<unsigned char, 4>> ParseIpv4Literal(std::string_view text) {
  return Pton<4>(AF_INET, text, 15);
}

std::optional<std::array<unsigned char, 16>> ParseIpv6Literal(std::string_view text) {
  return Pton<16>(AF_INET6, text, 45);
}

std::string Ipv4LiteralText(const std::array<unsigned char, 4>& bytes) {
  return std::to_string(bytes[0]) + "." + std::to_string(bytes[1]) + "." +
         std::to_string(bytes[2]) + "." + std::to_string(bytes[3]);
}

std::string Ipv6LiteralText(const std::array<unsigned char, 16>& bytes) {
  std::array<char, INET6_ADDRSTRLEN> buf{};
  if (inet_ntop(AF_INET6, bytes.data(), buf.data(), buf.size()) == nullptr) return {};
  return {buf.data()};
}

std::optional<std::string> NormalizeHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (host.find(':') == std::string_view::npos) return std::nullopt;  // brackets: IPv6 only
  }
  if (host.find(':') != std::string_view::npos) {
    const auto bytes = ParseIpv6Literal(host);
    if (!bytes) return std::nullopt;
    return Ipv6LiteralText(*bytes);
  }
  if (const auto v4 = ParseIpv4Literal(host)) return Ipv4LiteralText(*v4);
  if (CheckHostName(host)) return std::nullopt;
  if (host.ends_with('.')) host.remove_suffix(1);
  std::string out(host);
  std::transform(out.begin(), out.end(), out.begin(), Lower);
  return out;
}

bool IsAddressLiteral(std::string_view normalized) {
  if (normalized.find(':') != std::string_view::npos) return true;
  const std::size_t dot = normalized.rfind('.');
  return IsNumberLabel(dot == std::string_view::npos ? normalized : normalized.substr(dot + 1));
}

}  // namespace cagent
