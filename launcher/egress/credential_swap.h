// Credential placeholders and their swap (issue 36): inside the sandbox a credential's variable
// (or file) holds a random placeholder; in a request cagent's proxy reads in clear (TLS it
// terminated for a bound host, or plain HTTP), the placeholder of a credential bound to that host
// is replaced by the real value, and a placeholder of any other credential makes the request
// refused (an attempt to send it where it is not bound). Runs in cagent (trusted) on bytes the
// sandbox chose: everything here is bounded and never throws. Pure: no I/O.
//
// What is looked at: the request target (a query string, or a URL's user-info in a forward
// proxy's absolute form) and every header value, including inside `Authorization: Basic` (the
// base64 of user:password is decoded, swapped and encoded again). Bodies are not rewritten.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cagent::launcher::egress {

// One credential of a sandbox.
struct SandboxCredential {
  std::string name;         // the profile's name for it ("gh")
  std::string placeholder;  // what the sandbox sees
  std::string value;        // the real value (never logged, never in an error text)
};

// A placeholder for `value`: its leading letters and the separator after them kept ("ghp_",
// "npm_", "sk-ant-", "glpat-"), so that tools checking a token's form accept it, followed by
// random letters and digits (at least 32, so at least 190 bits) up to the value's length. Two
// calls never give the same placeholder. `random` supplies the randomness (tests); empty = the
// kernel's getrandom(2).
std::string MakePlaceholder(std::string_view value, const std::vector<unsigned char>& random = {});

struct RequestHead {
  std::string method;
  std::string target;  // as sent: origin form ("/a?b") or absolute form ("http://h/a")
  std::vector<std::pair<std::string, std::string>> headers;  // in order, as sent
};

struct SwapResult {
  // The credentials whose real value went in, by name, sorted, unique.
  std::vector<std::string> used;
  // Set when the request carries the placeholder of a credential not bound to its host: the
  // request must be refused. Names the credential (never its value or placeholder).
  std::optional<std::string> misdirected;
};

// Swaps, in `head`, each placeholder of `bound` (the credentials bound to the request's host) for
// its value; reports a placeholder of `all` that is not in `bound`. On a misdirected placeholder
// `head` is left as it was.
SwapResult SwapCredentials(RequestHead& head, const std::vector<const SandboxCredential*>& bound,
                           const std::vector<SandboxCredential>& all);

// Base64 (RFC 4648, with padding) for Basic credentials; decoding refuses anything that is not
// canonical base64 (nullopt).
std::string Base64Encode(std::string_view bytes);
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace cagent::launcher::egress
