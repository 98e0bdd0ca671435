#include "launcher/egress/credential_swap.h"

#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace cagent::launcher::egress {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
constexpr std::size_t kMinRandom = 32;
constexpr std::string_view kBase64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Replaces every occurrence of `from` in `text` with `to`; whether any was.
bool ReplaceAll(std::string& text, std::string_view from, std::string_view to) {
  if (from.empty()) return false;
  bool any = false;
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
    any = true;
  }
  return any;
}

bool Contains(std::string_view text, std::string_view what) {
  return !what.empty() && text.find(what) != std::string_view::npos;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The texts of a request a placeholder may hide in: the target, each header value, and the
// decoded user:password of each Basic authorization.
std::vector<std::string> Texts(const RequestHead& head) {
  std::vector<std::string> out = {head.target};
  for (const auto& [name, value] : head.headers) {
    out.push_back(value);
    if (EqualsNoCase(name, "authorization") || EqualsNoCase(name, "proxy-authorization")) {
      const std::string_view v = value;
      if (v.size() > 6 && EqualsNoCase(v.substr(0, 6), "basic ")) {
        std::string_view b64 = v.substr(6);
        while (!b64.empty() && b64.front() == ' ') b64.remove_prefix(1);
        if (auto decoded = Base64Decode(b64)) out.push_back(*decoded);
      }
    }
  }
  return out;
}

// Swaps in one header value, decoding a Basic authorization first.
bool SwapValue(const std::string& name, std::string& value, const SandboxCredential& c) {
  const bool auth =
      EqualsNoCase(name, "authorization") || EqualsNoCase(name, "proxy-authorization");
  const std::string_view view = value;
  if (auth && view.size() > 6 && EqualsNoCase(view.substr(0, 6), "basic ")) {
    std::size_t start = 6;
    while (start < value.size() && value[start] == ' ') ++start;
    if (auto decoded = Base64Decode(view.substr(start))) {
      if (ReplaceAll(*decoded, c.placeholder, c.value)) {
        value = value.substr(0, start) + Base64Encode(*decoded);
        return true;
      }
    }
  }
  return ReplaceAll(value, c.placeholder, c.value);
}

}  // namespace

std::string MakePlaceholder(std::string_view value, const std::vector<unsigned char>& random) {
  // The prefix: leading letters (and digits after the first letter) up to a '_' or '-', kept
  // with the separator when it is short and the value is longer: "ghp_", "sk-ant-", "npm_".
  std::size_t prefix = 0;
  for (std::size_t i = 0; i < value.size() && i < 12; ++i) {
    const char c = value[i];
    if (c == '_' || c == '-') {
      prefix = i + 1;
      continue;
    }
    if (!std::isalnum(static_cast<unsigned char>(c))) break;
  }
  if (prefix >= value.size()) prefix = 0;
  const std::size_t length = std::max(value.size() - prefix, kMinRandom);
  std::vector<unsigned char> bytes = random;
  if (bytes.size() < length) {
    const std::size_t have = bytes.size();
    bytes.resize(length);
    for (std::size_t got = have; got < length;) {
      const ssize_t n = ::getrandom(bytes.data() + got, length - got, 0);
      if (n > 0) got += static_cast<std::size_t>(n);
    }
  }
  std::string out(value.substr(0, prefix));
  // 62 letters: 256 mod 62 skews slightly; at >= 32 characters it is still far above 128 bits.
  for (std::size_t i = 0; i < length; ++i) out += kAlphabet[bytes[i] % kAlphabet.size()];
  return out;
}

SwapResult SwapCredentials(RequestHead& head, const std::vector<const SandboxCredential*>& bound,
                           const std::vector<SandboxCredential>& all) {
  SwapResult result;
  const std::vector<std::string> texts = Texts(head);
  for (const SandboxCredential& c : all) {
    const bool here = std::any_of(bound.begin(), bound.end(),
                                  [&](const SandboxCredential* b) { return b->name == c.name; });
    if (here) continue;
    for (const std::string& t : texts) {
      if (Contains(t, c.placeholder)) {
        result.misdirected = c.name;
        return result;
      }
    }
  }
  for (const SandboxCredential* c : bound) {
    // A value that could end a header line or a request target is never written into one (the
    // loader refuses such values; this keeps the guarantee local).
    if (c->value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) continue;
    bool used = ReplaceAll(head.target, c->placeholder, c->value);
    for (auto& [name, value] : head.headers) used = SwapValue(name, value, *c) || used;
    if (used) result.used.push_back(c->name);
  }
  std::sort(result.used.begin(), result.used.end());
  result.used.erase(std::unique(result.used.begin(), result.used.end()), result.used.end());
  return result;
}

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 3; ++k) {
      v = (v << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0U);
    }
    for (std::size_t k = 0; k < 4; ++k) {
      out += k <= n ? kBase64[(v >> (18 - 6 * k)) & 0x3F] : '=';
    }
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0 || text.size() > (1U << 16)) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 4) {
    std::uint32_t v = 0;
    std::size_t pad = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=') {
        // Padding only at the end of the last group, and at most two.
        if (i + 4 != text.size() || k < 2) return std::nullopt;
        ++pad;
        v <<= 6;
        continue;
      }
      if (pad != 0) return std::nullopt;
      const std::size_t at = kBase64.find(c);
      if (at == std::string_view::npos) return std::nullopt;
      v = (v << 6) | static_cast<std::uint32_t>(at);
    }
    const std::size_t n = 3 - pad;
    for (std::size_t k = 0; k < n; ++k) out += static_cast<char>((v >> (16 - 8 * k)) & 0xFF);
  }
  // Canonical only: what decodes must encode back to the same text.
  if (Base64Encode(out) != text) return std::nullopt;
  return out;
}

}  // namespace cagent::launcher::egress
