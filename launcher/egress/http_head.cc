#include "launcher/egress/http_head.h"

#include <algorithm>

#include "common/host_name.h"

namespace cagent::launcher::egress {
namespace {

constexpr std::size_t kMaxHeaders = 128;

bool TokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
    return true;
  }
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), TokenChar);
}

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) {
      return false;
    }
  }
  return true;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

HttpHeadParse Malformed(std::string error) {
  HttpHeadParse p;
  p.status = HttpHeadParse::Status::kMalformed;
  p.error = std::move(error);
  return p;
}

}  // namespace

HttpHeadParse ParseHttpHead(std::string_view data, std::size_t limit) {
  const std::size_t end = data.find("\r\n\r\n");
  if (end == std::string_view::npos || end + 4 > limit) {
    HttpHeadParse p;
    if (data.size() >= limit || (end != std::string_view::npos && end + 4 > limit)) {
      p.status = HttpHeadParse::Status::kTooLarge;
      p.error = "the request head is longer than " + std::to_string(limit) + " bytes";
    }
    return p;
  }
  const std::string_view text = data.substr(0, end + 2);  // every line with its CRLF
  HttpHeadParse p;
  p.head.size = end + 4;
  std::size_t pos = 0;
  bool first = true;
  while (pos < text.size()) {
    const std::size_t eol = text.find("\r\n", pos);
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 2;
    for (char c : line) {
      if (c == '\n' || c == '\r' || c == '\0') {
        return Malformed("the request head has a bare CR, LF or NUL byte");
      }
    }
    if (first) {
      first = false;
      const std::size_t sp1 = line.find(' ');
      const std::size_t sp2 =
          sp1 == std::string_view::npos ? std::string_view::npos : line.find(' ', sp1 + 1);
      if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
        return Malformed("the request line is not METHOD TARGET VERSION");
      }
      p.head.method = line.substr(0, sp1);
      p.head.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
      p.head.version = line.substr(sp2 + 1);
      if (!IsToken(p.head.method)) {
        return Malformed("the request method is not a token");
      }
      if (p.head.target.empty() ||
          std::any_of(p.head.target.begin(), p.head.target.end(),
                      [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
        return Malformed("the request target is empty or has control bytes");
      }
      if (p.head.version != "HTTP/1.1" && p.head.version != "HTTP/1.0") {
        return Malformed("the request is not HTTP/1.0 or HTTP/1.1");
      }
      continue;
    }
    if (line.empty()) {
      return Malformed("the request head has an empty line before its end");
    }
    if (line.front() == ' ' || line.front() == '\t') {
      return Malformed("the request head has a folded header line");
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
      return Malformed("a header line is not NAME: VALUE");
    }
    const std::string_view value = TrimOws(line.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(), [](char c) {
          return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f;
        })) {
      return Malformed("a header value has control bytes");
    }
    if (p.head.headers.size() >= kMaxHeaders) {
      return Malformed("the request has more than " + std::to_string(kMaxHeaders) + " headers");
    }
    p.head.headers.push_back({std::string(line.substr(0, colon)), std::string(value)});
  }
  if (first) {
    return Malformed("the request head is empty");
  }
  p.status = HttpHeadParse::Status::kComplete;
  return p;
}

std::optional<Authority> ParseAuthority(std::string_view text, std::uint16_t default_port) {
  std::string_view host;
  std::string_view port;
  bool has_port = false;
  if (text.find('@') != std::string_view::npos) {
    return std::nullopt;
  }
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return std::nullopt;
    }
    host = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return std::nullopt;
      }
      port = rest.substr(1);
      has_port = true;
    }
    if (host.find(':') == std::string_view::npos) {
      return std::nullopt;  // brackets are for IPv6 only
    }
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon != std::string_view::npos) {
      if (text.find(':') != colon) {
        return std::nullopt;  // an IPv6 literal needs brackets
      }
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
      has_port = true;
    } else {
      host = text;
    }
  }
  Authority a;
  if (has_port) {
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
    std::uint32_t value = 0;
    for (char c : port) {
      value = value * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (value == 0 || value > 65535) {
      return std::nullopt;
    }
    a.port = static_cast<std::uint16_t>(value);
  } else if (default_port == 0) {
    return std::nullopt;
  } else {
    a.port = default_port;
  }
  auto normalized = NormalizeHost(host);
  if (!normalized) {
    return std::nullopt;
  }
  a.host = std::move(*normalized);
  return a;
}

std::optional<HttpUrl> ParseHttpUrl(std::string_view target) {
  constexpr std::string_view kScheme = "http://";
  if (target.size() < kScheme.size() || !EqualsNoCase(target.substr(0, kScheme.size()), kScheme)) {
    return std::nullopt;
  }
  const std::string_view rest = target.substr(kScheme.size());
  const std::size_t end = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, end);
  auto parsed = ParseAuthority(authority, 80);
  if (!parsed) {
    return std::nullopt;
  }
  HttpUrl url;
  url.authority = std::move(*parsed);
  url.authority_text = authority;
  std::string_view path = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  const std::size_t fragment = path.find('#');
  if (fragment != std::string_view::npos) {
    path = path.substr(0, fragment);
  }
  if (path.empty()) {
    url.path = "/";
  } else if (path.front() == '?') {
    url.path = "/" + std::string(path);
  } else {
    url.path = path;
  }
  return url;
}

namespace {

// Adds the lowercase names a Connection header's value lists (RFC 9110 7.6.1) to `hop`.
void AddConnectionOptions(std::string_view list, std::vector<std::string>* hop) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = TrimOws(list.substr(0, comma));
    std::string lower;
    for (char c : item) {
      lower.push_back(Lower(c));
    }
    if (!lower.empty()) {
      hop->push_back(std::move(lower));
    }
    if (comma == std::string_view::npos) {
      break;
    }
    list.remove_prefix(comma + 1);
  }
}

bool InList(const std::vector<std::string>& names, std::string_view name) {
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return EqualsNoCase(name, n); });
}

}  // namespace

std::string OriginFormHead(const HttpHead& head, const HttpUrl& url) {
  // The headers the Connection header names are hop-by-hop too.
  std::vector<std::string> hop = {"connection",       "keep-alive", "proxy-authorization",
                                  "proxy-connection", "te",         "upgrade",
                                  "trailer",          "host",       "proxy-authenticate"};
  for (const auto& h : head.headers) {
    if (EqualsNoCase(h.name, "connection")) {
      AddConnectionOptions(h.value, &hop);
    }
  }
  std::string out;
  out.reserve(head.size + 64);
  out.append(head.method).append(" ").append(url.path).append(" ").append(head.version);
  out.append("\r\nHost: ").append(url.authority_text).append("\r\n");
  for (const auto& h : head.headers) {
    if (!InList(hop, h.name)) {
      out.append(h.name).append(": ").append(h.value).append("\r\n");
    }
  }
  out.append("Connection: close\r\n\r\n");
  return out;
}

ResponseHead RewriteResponseHead(std::string_view data, std::size_t limit) {
  ResponseHead r;
  const std::string_view window = data.substr(0, limit);
  const std::size_t end = window.find("\r\n\r\n");
  // "HTTP/1.x NNN": the status line's fixed start. Judged as soon as those bytes are here.
  constexpr std::string_view kVersion = "HTTP/1.";
  const std::string_view start = window.substr(0, kVersion.size());
  if (start != kVersion.substr(0, start.size())) {
    r.status = ResponseHead::Status::kPassThrough;
    return r;
  }
  if (end == std::string_view::npos) {
    r.status = data.size() >= limit ? ResponseHead::Status::kPassThrough
                                    : ResponseHead::Status::kIncomplete;
    return r;
  }
  const std::string_view text = window.substr(0, end + 2);  // every line with its CRLF
  const std::size_t first_eol = text.find("\r\n");
  const std::string_view status_line = text.substr(0, first_eol);
  // "HTTP/1.x" SP 3DIGIT ...
  if (status_line.size() < 12 || status_line[8] != ' ' ||
      !std::all_of(status_line.begin() + 9, status_line.begin() + 12,
                   [](char c) { return c >= '0' && c <= '9'; }) ||
      (status_line.size() > 12 && status_line[12] != ' ')) {
    r.status = ResponseHead::Status::kPassThrough;
    return r;
  }
  r.size = end + 4;
  const std::string_view code = status_line.substr(9, 3);
  if (code == "101") {
    r.status = ResponseHead::Status::kPassThrough;
    return r;
  }
  if (code.front() == '1') {
    r.status = ResponseHead::Status::kInterim;
    return r;
  }
  // The header lines: "NAME:" starts each; anything else (a folded line, a line without a colon)
  // stays where it is.
  std::vector<std::string_view> lines;
  std::vector<std::string> hop = {"connection", "keep-alive", "proxy-connection"};
  for (std::size_t pos = first_eol + 2; pos < text.size();) {
    const std::size_t eol = text.find("\r\n", pos);
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 2;
    lines.push_back(line);
    const std::size_t colon = line.find(':');
    if (colon != std::string_view::npos && EqualsNoCase(line.substr(0, colon), "connection")) {
      AddConnectionOptions(TrimOws(line.substr(colon + 1)), &hop);
    }
  }
  r.head.reserve(r.size + 20);
  r.head.append(status_line).append("\r\n");
  for (const std::string_view line : lines) {
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || !InList(hop, line.substr(0, colon))) {
      r.head.append(line).append("\r\n");
    }
  }
  r.head.append("Connection: close\r\n\r\n");
  r.status = ResponseHead::Status::kRewritten;
  return r;
}

}  // namespace cagent::launcher::egress
