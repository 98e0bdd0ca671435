// libFuzzer target for the egress proxy's HTTP/1.x request head (launcher/egress/http_head.h):
// ParseHttpHead, the target forms (ParseHttpUrl, ParseAuthority), NormalizeHost and the head sent
// upstream (OriginFormHead). The sandboxed client writes these bytes.
//
// Input: one byte choosing the limit, then the bytes the client sent. Invariants:
//   - a complete head ends with CRLF CRLF within the limit and the data, parses the same from
//     exactly its own bytes, is incomplete one byte short and too large under a limit one smaller;
//   - its fields hold no CR, LF or NUL; written out again they parse to the same head;
//   - an absolute-form URL's head for upstream parses as a complete head with the URL's path as
//     its target, the URL's authority as its only Host, and no proxy or hop-by-hop header left;
//   - every host accepted is a clean, idempotently normalized host (egress_host_check.h);
//   - the body after a complete head (RequestBody, the intercepted request's framing): a framing
//     is refused with a reason or counts out a prefix of what follows, the same whether fed at
//     once or in two parts; once done it takes nothing more;
//   - the same bytes as a response head from upstream (RewriteResponseHead): a rewritten head
//     ends within the limit at CRLF CRLF, is incomplete one byte short, says "Connection: close"
//     exactly once and nothing else about the connection, and rewriting it again changes nothing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "launcher/egress/http_body.h"
#include "launcher/egress/http_head.h"
#include "tests/fuzz/egress_host_check.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using cagent::fuzz::Check;
using cagent::fuzz::CheckedNormalizeHost;
namespace egress = cagent::launcher::egress;
using Status = egress::HttpHeadParse::Status;

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool SameHead(const egress::HttpHead& a, const egress::HttpHead& b) {
  if (a.method != b.method || a.target != b.target || a.version != b.version ||
      a.headers.size() != b.headers.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.headers.size(); ++i) {
    if (a.headers[i].name != b.headers[i].name || a.headers[i].value != b.headers[i].value) {
      return false;
    }
  }
  return true;
}

// `text` was accepted as the authority `a`: it named no zone index and held no NUL (issue #33).
void CheckAuthority(std::string_view text, const egress::Authority& a) {
  Check(text.find_first_of(std::string_view("%\0", 2)) == std::string_view::npos);
  Check(a.port != 0);
  Check(CheckedNormalizeHost(a.host) == a.host);
}

void CheckUpstream(const egress::HttpHead& head, const egress::HttpUrl& url) {
  CheckAuthority(url.authority_text, url.authority);
  Check(!url.path.empty() && url.path.front() == '/');
  Check(url.path.find('#') == std::string::npos);
  const std::string out = egress::OriginFormHead(head, url);
  const auto again = egress::ParseHttpHead(out, out.size());
  if (again.status == Status::kMalformed) {
    // Host and Connection are added: a head at the header limit can go over it.
    Check(again.error.find("headers") != std::string::npos);
    return;
  }
  Check(again.status == Status::kComplete && again.head.size == out.size());
  Check(again.head.method == head.method && again.head.version == head.version);
  Check(again.head.target == url.path);
  std::size_t hosts = 0;
  for (const auto& h : again.head.headers) {
    if (EqualsNoCase(h.name, "host")) {
      ++hosts;
      Check(h.value == url.authority_text);
    }
    Check(!EqualsNoCase(h.name, "proxy-authorization") &&
          !EqualsNoCase(h.name, "proxy-connection") && !EqualsNoCase(h.name, "keep-alive") &&
          !EqualsNoCase(h.name, "upgrade"));
  }
  Check(hosts == 1);
}

void CheckBody(const egress::HttpHead& head, std::string_view rest) {
  auto body = egress::RequestBody::For(head);
  if (!body.ok()) {
    Check(!body.error().Message().empty());
    return;
  }
  egress::RequestBody split = *body;
  const std::size_t whole = body->Feed(rest);
  Check(whole <= rest.size());
  if (!body->done()) Check(whole == rest.size() && body->error().empty());
  if (body->done()) Check(body->Feed(rest.substr(whole)) == 0);
  const std::size_t cut = rest.size() / 2;
  std::size_t parts = split.Feed(rest.substr(0, cut));
  if (!split.done()) parts += split.Feed(rest.substr(cut));
  Check(split.done() == body->done() && split.error().empty() == body->error().empty());
  if (body->error().empty()) Check(parts == whole);
}

bool IsConnectionHeader(std::string_view line) {
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view name = line.substr(0, colon);
  return EqualsNoCase(name, "connection") || EqualsNoCase(name, "keep-alive") ||
         EqualsNoCase(name, "proxy-connection");
}

void CheckResponse(std::string_view bytes, std::size_t limit) {
  using RStatus = egress::ResponseHead::Status;
  const egress::ResponseHead r = egress::RewriteResponseHead(bytes, limit);
  switch (r.status) {
    case RStatus::kIncomplete:
      Check(bytes.size() < limit && r.head.empty());
      return;
    case RStatus::kPassThrough:
      Check(r.head.empty());
      return;
    case RStatus::kInterim:
      Check(r.size >= 4 && r.size <= limit && r.size <= bytes.size() && r.head.empty());
      Check(bytes.substr(r.size - 4, 4) == "\r\n\r\n" && bytes[9] == '1');
      return;
    case RStatus::kRewritten:
      break;
  }
  const std::size_t n = r.size;
  Check(n >= 4 && n <= limit && n <= bytes.size());
  Check(bytes.substr(n - 4, 4) == "\r\n\r\n");
  Check(egress::RewriteResponseHead(bytes.substr(0, n - 1), limit).status == RStatus::kIncomplete);
  constexpr std::string_view kClose = "Connection: close\r\n\r\n";
  Check(r.head.size() >= kClose.size() && r.head.ends_with(kClose));
  std::size_t connection_lines = 0;
  for (std::size_t pos = r.head.find("\r\n") + 2; pos < r.head.size() - 2;) {
    const std::size_t eol = r.head.find("\r\n", pos);
    connection_lines += IsConnectionHeader(std::string_view(r.head).substr(pos, eol - pos)) ? 1 : 0;
    pos = eol + 2;
  }
  Check(connection_lines == 1);
  const egress::ResponseHead again = egress::RewriteResponseHead(r.head, r.head.size());
  Check(again.status == RStatus::kRewritten && again.size == r.head.size() && again.head == r.head);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cagent::fuzz::InputReader in(data, size);
  const std::size_t limit = 16 + std::size_t{in.Byte()} * 16;  // 16 .. 4096
  const std::string_view bytes = in.Rest();

  const egress::HttpHeadParse p = egress::ParseHttpHead(bytes, limit);
  switch (p.status) {
    case Status::kIncomplete:
      Check(bytes.size() < limit && p.error.empty());
      break;
    case Status::kTooLarge:
    case Status::kMalformed:
      Check(!p.error.empty() && p.error.find('\n') == std::string::npos);
      break;
    case Status::kComplete: {
      const std::size_t n = p.head.size;
      Check(n >= 4 && n <= limit && n <= bytes.size());
      Check(bytes.substr(n - 4, 4) == "\r\n\r\n");
      const std::string_view own = bytes.substr(0, n);
      const auto exact = egress::ParseHttpHead(own, n);
      Check(exact.status == Status::kComplete && SameHead(exact.head, p.head));
      Check(egress::ParseHttpHead(own.substr(0, n - 1), limit).status == Status::kIncomplete);
      Check(egress::ParseHttpHead(own, n - 1).status == Status::kTooLarge);

      std::string written = p.head.method + " " + p.head.target + " " + p.head.version + "\r\n";
      for (const auto& h : p.head.headers) {
        Check(h.value.find_first_of(std::string_view("\r\n\0", 3)) == std::string::npos);
        written += h.name + ": " + h.value + "\r\n";
      }
      written += "\r\n";
      const auto rewritten = egress::ParseHttpHead(written, written.size());
      Check(rewritten.status == Status::kComplete && SameHead(rewritten.head, p.head));

      if (auto url = egress::ParseHttpUrl(p.head.target)) CheckUpstream(p.head, *url);
      CheckBody(p.head, bytes.substr(n));
      if (auto a = egress::ParseAuthority(p.head.target, 0)) CheckAuthority(p.head.target, *a);
      for (const auto& h : p.head.headers) {
        if (auto a = egress::ParseAuthority(h.value, 80)) CheckAuthority(h.value, *a);
      }
      break;
    }
  }
  // The raw bytes as a host, an authority and a URL too (the CONNECT target and the Host header
  // reach these functions as written).
  (void)CheckedNormalizeHost(bytes);
  if (auto a = egress::ParseAuthority(bytes, 443)) CheckAuthority(bytes, *a);
  if (auto url = egress::ParseHttpUrl(bytes)) CheckAuthority(url->authority_text, url->authority);
  CheckResponse(bytes, limit);
  return 0;
}
