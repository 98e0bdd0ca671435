#include "launcher/broker/redactor.h"

#include <string.h>  // memmem (GNU)

#include <algorithm>
#include <array>
#include <cstring>
#include <set>

#include "policy/match/glob.h"

namespace cagent::launcher::broker {
namespace {

// Why a hand-written scanner and not std::regex: libstdc++'s std::regex backtracks (time and stack
// grow with the input; a few MB of tool output can take seconds or overflow the stack), and model
// traffic and tool output are attacker-influenced text. Every check below starts only at the start
// of a word and reads at most that word (or the three words of a JWT, or one PEM block), so a scan
// is linear in the input.

constexpr std::size_t kMinSecretLength = 6;

struct Span {
  std::size_t begin;
  std::size_t end;
  std::string label;
};

bool IsAlnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool IsUpperAlnum(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
// Characters of a token: letters, digits, '_' and '-' (base64url and the usual key alphabets).
bool IsWordChar(char c) { return IsAlnum(c) || c == '_' || c == '-'; }
char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool StartsWith(std::string_view text, std::size_t at, std::string_view prefix) {
  return text.size() - at >= prefix.size() && text.compare(at, prefix.size(), prefix) == 0;
}

// Length of the run of characters satisfying `pred` starting at `at`.
template <typename Pred>
std::size_t RunLength(std::string_view text, std::size_t at, Pred pred) {
  std::size_t n = 0;
  while (at + n < text.size() && pred(text[at + n])) ++n;
  return n;
}

// A credential with a well-known shape starting at `at` (a word start). Returns its end, or 0.
std::size_t MatchShape(std::string_view text, std::size_t at, std::string& label) {
  const char c = text[at];
  if (c == 's' && StartsWith(text, at, "sk-")) {
    // OpenAI "sk-..." / "sk-proj-..." and Anthropic "sk-ant-...": 20+ key characters, at least one
    // a digit (real keys are random; a 20-letter slug like "sk-learning-resources" is not one).
    const bool anthropic = StartsWith(text, at, "sk-ant-");
    const std::size_t body = at + (anthropic ? 7 : 3);
    const std::size_t n = RunLength(text, body, IsWordChar);
    if (n >= 20 && std::any_of(text.begin() + static_cast<std::ptrdiff_t>(body),
                               text.begin() + static_cast<std::ptrdiff_t>(body + n), IsDigit)) {
      label = anthropic ? "anthropic_key" : "openai_key";
      return body + n;
    }
    return 0;
  }
  if (c == 'g') {
    // GitHub: classic tokens gh[pousr]_ + 36 alphanumerics; fine-grained github_pat_ + 82.
    if (StartsWith(text, at, "github_pat_")) {
      const std::size_t n = RunLength(text, at + 11, IsWordChar);
      if (n >= 30) {
        label = "github_token";
        return at + 11 + n;
      }
      return 0;
    }
    if (text.size() - at >= 4 && text[at + 1] == 'h' &&
        std::strchr("pousr", text[at + 2]) != nullptr && text[at + 2] != '\0' &&
        text[at + 3] == '_') {
      const std::size_t n = RunLength(text, at + 4, IsAlnum);
      if (n >= 30 && !IsWordChar(at + 4 + n < text.size() ? text[at + 4 + n] : ' ')) {
        label = "github_token";
        return at + 4 + n;
      }
    }
    return 0;
  }
  if (c == 'A') {
    // AWS access key ids: AKIA (long-term) or ASIA (temporary) + exactly 16 of [A-Z0-9].
    if (StartsWith(text, at, "AKIA") || StartsWith(text, at, "ASIA")) {
      const std::size_t n = RunLength(text, at + 4, IsUpperAlnum);
      const std::size_t end = at + 4 + n;
      if (n == 16 && (end == text.size() || !IsAlnum(text[end]))) {
        label = "aws_access_key_id";
        return end;
      }
      return 0;
    }
    // Google API keys: "AIza" + 35 of [A-Za-z0-9_-].
    if (StartsWith(text, at, "AIza")) {
      const std::size_t n = RunLength(text, at + 4, IsWordChar);
      if (n >= 35) {
        label = "google_api_key";
        return at + 4 + n;
      }
    }
    return 0;
  }
  if (c == 'x' && StartsWith(text, at, "xox") && text.size() - at >= 5 &&
      std::strchr("abprs", text[at + 3]) != nullptr && text[at + 3] != '\0' &&
      text[at + 4] == '-') {
    // Slack: xoxb- (bot), xoxp- (user), xoxa-, xoxr-, xoxs-.
    const std::size_t n = RunLength(text, at + 5, [](char ch) { return IsAlnum(ch) || ch == '-'; });
    if (n >= 10) {
      label = "slack_token";
      return at + 5 + n;
    }
    return 0;
  }
  if (c == 'e' && StartsWith(text, at, "eyJ")) {
    // JWT: base64url(header) "." base64url(payload) "." base64url(signature); the header is a JSON
    // object, so it starts "eyJ" ('{"'). The signature may be empty (alg "none").
    const std::size_t h = RunLength(text, at, IsWordChar);
    if (h < 10 || at + h >= text.size() || text[at + h] != '.') return 0;
    const std::size_t p_at = at + h + 1;
    const std::size_t p = RunLength(text, p_at, IsWordChar);
    if (p < 4 || p_at + p >= text.size() || text[p_at + p] != '.') return 0;
    const std::size_t s_at = p_at + p + 1;
    label = "jwt";
    return s_at + RunLength(text, s_at, IsWordChar);
  }
  return 0;
}

// A PEM private key block starting at `at` ("-----BEGIN ... PRIVATE KEY-----"), through its END
// line; to the end of the text when the END line is missing (a cut-off key is still a secret).
std::size_t MatchPem(std::string_view text, std::size_t at) {
  constexpr std::string_view kBegin = "-----BEGIN ";
  if (!StartsWith(text, at, kBegin)) return 0;
  const std::size_t label_at = at + kBegin.size();
  // The label is short and on the BEGIN line: look no further than 64 bytes for its end, so that
  // many unterminated BEGIN lines cannot make the scan quadratic.
  const std::string_view head = text.substr(label_at, 64 + 5);
  const std::size_t dashes_rel = head.find("-----");
  if (dashes_rel == std::string_view::npos ||
      head.substr(0, dashes_rel).find('\n') != std::string_view::npos) {
    return 0;
  }
  const std::size_t dashes = label_at + dashes_rel;
  const std::string_view pem_label = text.substr(label_at, dashes - label_at);
  if (pem_label.find("PRIVATE KEY") == std::string_view::npos) return 0;
  const std::size_t end_line = text.find("-----END ", dashes + 5);
  if (end_line == std::string_view::npos) return text.size();
  const std::size_t closing = text.find("-----", end_line + 9);
  if (closing == std::string_view::npos) return text.size();
  return closing + 5;
}

// Names whose value is a secret in an assignment ("DB_PASSWORD=...", "api_key: ...",
// "\"client_secret\": \"...\""). Matched case-insensitively as a suffix of the name.
constexpr std::array<std::string_view, 13> kSecretNameSuffixes = {
    "password", "passwd",     "passphrase", "secret",      "token",       "api_key", "apikey",
    "api-key",  "secret_key", "access_key", "private_key", "signing_key", "auth"};

bool NameLooksSecret(std::string_view name) {
  for (std::string_view suffix : kSecretNameSuffixes) {
    if (name.size() < suffix.size()) continue;
    const std::string_view tail = name.substr(name.size() - suffix.size());
    if (std::equal(tail.begin(), tail.end(), suffix.begin(),
                   [](char a, char b) { return Lower(a) == b; })) {
      return true;
    }
  }
  return false;
}

// Remembers quoted-value scans that found no closing quote: a later scan for the same quote
// character that starts inside such a stretch would walk the same bytes and fail the same way (it
// starts right after an opening quote the earlier scan stepped over, so it sees the same escapes),
// so it is answered at once. Without this, "password:\"password:\"..." would be quadratic.
struct QuoteMemo {
  std::array<std::size_t, 3> fail_begin{};
  std::array<std::size_t, 3> fail_end{};
  static int Index(char q) { return q == '"' ? 0 : q == '\'' ? 1 : 2; }
};

// After a secret-looking name ending at `at`: [quote] blanks ('=' | ':') blanks value. Sets the
// value's span; the name, the separator and any quotes around the value stay.
bool MatchAssignmentValue(std::string_view text, std::size_t at, QuoteMemo& memo,
                          std::size_t& value_begin, std::size_t& value_end) {
  std::size_t i = at;
  if (i < text.size() && (text[i] == '"' || text[i] == '\'')) ++i;  // "password": ...
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i >= text.size() || (text[i] != '=' && text[i] != ':')) return false;
  if (text[i] == ':' && i + 1 < text.size() && text[i + 1] == '=') ++i;  // :=
  ++i;
  if (i < text.size() && text[i] == '=') return false;  // "==": a comparison, not an assignment
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i >= text.size()) return false;
  const char q = text[i];
  const bool quoted = q == '"' || q == '\'' || q == '`';
  const std::size_t first_at = quoted ? i + 1 : i;
  // References to a secret rather than the secret itself: $VAR, ${VAR}, %VAR%, {{ var }}.
  if (first_at >= text.size() || text[first_at] == '$' || text[first_at] == '%' ||
      text[first_at] == '{') {
    return false;
  }
  if (quoted) {
    const int m = QuoteMemo::Index(q);
    if (first_at >= memo.fail_begin[m] && first_at < memo.fail_end[m]) return false;
    std::size_t j = first_at;
    while (j < text.size() && text[j] != q && text[j] != '\n') {
      if (text[j] == '\\' && j + 1 < text.size() && text[j + 1] != '\n') ++j;
      ++j;
    }
    if (j >= text.size() || text[j] != q) {
      memo.fail_begin[m] = first_at;
      memo.fail_end[m] = j;
      return false;
    }
    if (j == first_at) return false;
    value_begin = first_at;
    value_end = j;
    return true;
  }
  std::size_t j = i;
  while (j < text.size() && std::strchr(" \t\r\n,;&\"'`)]}<>", text[j]) == nullptr) ++j;
  if (j == i) return false;
  value_begin = i;
  value_end = j;
  return true;
}

}  // namespace

Redactor::Redactor(std::vector<std::pair<std::string, std::string>> secrets) {
  std::set<std::string> seen;
  for (std::pair<std::string, std::string>& secret : secrets) {
    if (secret.second.size() < kMinSecretLength || !seen.insert(secret.second).second) continue;
    secrets_.push_back(std::move(secret));
  }
  // Longest first, so a secret that contains another is replaced as a whole.
  std::stable_sort(secrets_.begin(), secrets_.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
}

Redactor Redactor::FromEnvironment(const std::vector<std::string>& environ,
                                   const std::vector<std::string>& scrub_patterns) {
  std::vector<policy::WordGlob> globs;
  for (const std::string& p : scrub_patterns) {
    Result<policy::WordGlob> g = policy::WordGlob::Compile(p);
    if (g.ok()) globs.push_back(std::move(*g));  // the loader already rejected bad patterns
  }
  std::vector<std::pair<std::string, std::string>> secrets;
  for (const std::string& kv : environ) {
    const std::size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string_view name(kv.data(), eq);
    if (std::none_of(globs.begin(), globs.end(),
                     [&](const policy::WordGlob& g) { return g.Match(name); })) {
      continue;
    }
    secrets.emplace_back("env:" + std::string(name), kv.substr(eq + 1));
  }
  return Redactor(std::move(secrets));
}

Redactor Redactor::With(std::vector<std::pair<std::string, std::string>> more) const {
  more.insert(more.end(), secrets_.begin(), secrets_.end());
  return Redactor(std::move(more));
}

std::string Redactor::Redact(std::string_view text) const {
  std::vector<Span> spans;
  // 1. The caller's own secret values, found wherever they appear (glibc memmem: linear).
  for (const auto& [label, value] : secrets_) {
    std::size_t from = 0;
    while (from < text.size()) {
      const void* hit = memmem(text.data() + from, text.size() - from, value.data(), value.size());
      if (hit == nullptr) break;
      const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
      spans.push_back({at, at + value.size(), label});
      from = at + value.size();
    }
  }
  // 2. Shapes and assignments, one left-to-right pass.
  std::string label;
  QuoteMemo memo;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '-') {
      const std::size_t end = MatchPem(text, i);
      if (end != 0) {
        spans.push_back({i, end, "private_key"});
        i = end;
        continue;
      }
    }
    const bool word_start = IsWordChar(c) && (i == 0 || !IsWordChar(text[i - 1]));
    if (!word_start) {
      ++i;
      continue;
    }
    const std::size_t shape_end = MatchShape(text, i, label);
    if (shape_end != 0) {
      spans.push_back({i, shape_end, label});
      i = shape_end;
      continue;
    }
    const std::size_t word_end = i + RunLength(text, i, IsWordChar);
    std::size_t value_begin = 0;
    std::size_t value_end = 0;
    if (NameLooksSecret(text.substr(i, word_end - i)) &&
        MatchAssignmentValue(text, word_end, memo, value_begin, value_end)) {
      // Unless the value is itself a recognised shape (then that label is more telling).
      std::string shape_label;
      const std::size_t inner = MatchShape(text, value_begin, shape_label);
      if (inner == value_end) {
        spans.push_back({value_begin, value_end, shape_label});
      } else {
        spans.push_back({value_begin, value_end, "assignment"});
      }
      i = value_end;
      continue;
    }
    i = word_end;
  }
  if (spans.empty()) return std::string(text);

  // Overlapping or touching findings become one replacement, labelled by the one starting first
  // (the longest of those starting at the same place).
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::string out;
  out.reserve(text.size());
  std::size_t copied = 0;
  std::size_t k = 0;
  while (k < spans.size()) {
    const Span& first = spans[k];
    std::size_t end = first.end;
    ++k;
    while (k < spans.size() && spans[k].begin < end) {
      end = std::max(end, spans[k].end);
      ++k;
    }
    out.append(text.substr(copied, first.begin - copied));
    out += "[REDACTED:";
    out += first.label;
    out += ']';
    copied = end;
  }
  out.append(text.substr(copied));
  return out;
}

std::size_t Redactor::RedactMember(std::string_view name, std::string& value) const {
  // {"password": "hunter2"}: the member's name says what its string value is, which the text scan
  // of the value alone cannot see.
  if (NameLooksSecret(name) && !value.empty()) {
    const char first = value[0];
    if (first != '$' && first != '%' && first != '{' && value.rfind("[REDACTED:", 0) != 0) {
      value = "[REDACTED:assignment]";
      return 1;
    }
  }
  std::string redacted = Redact(value);
  if (redacted == value) return 0;
  value = std::move(redacted);
  return 1;
}

std::size_t Redactor::RedactJson(nlohmann::json& value) const {
  std::size_t changed = 0;
  if (value.is_string()) {
    std::string& s = value.get_ref<std::string&>();
    std::string redacted = Redact(s);
    if (redacted != s) {
      s = std::move(redacted);
      ++changed;
    }
  } else if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (it.value().is_string()) {
        changed += RedactMember(it.key(), it.value().get_ref<std::string&>());
        continue;
      }
      changed += RedactJson(it.value());
    }
  } else if (value.is_array()) {
    for (auto& element : value) changed += RedactJson(element);
  }
  return changed;
}

}  // namespace cagent::launcher::broker
