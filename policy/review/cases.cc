#include "policy/review/cases.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace cagent::policy {
namespace {

struct Token {
  std::string text;
  std::uint32_t col = 1;
  std::uint32_t length = 1;
};

bool Blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Splits one line into words; on an unterminated quote reports it and returns nullopt.
std::optional<std::vector<Token>> Tokenize(std::string_view line, std::uint32_t file,
                                           std::uint32_t lineno, Diagnostics& diags) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && Blank(line[i])) ++i;
    if (i >= line.size() || line[i] == '#') break;
    Token t;
    t.col = static_cast<std::uint32_t>(i + 1);
    const std::size_t start = i;
    while (i < line.size() && !Blank(line[i])) {
      const char c = line[i];
      if (c != '"' && c != '\'') {
        t.text += c;
        ++i;
        continue;
      }
      const std::size_t open = i++;
      bool closed = false;
      while (i < line.size()) {
        if (line[i] == c) {
          closed = true;
          ++i;
          break;
        }
        if (c == '"' && line[i] == '\\' && i + 1 < line.size()) {
          const char e = line[i + 1];
          t.text += e == 'n' ? '\n' : e == 't' ? '\t' : e;
          i += 2;
          continue;
        }
        t.text += line[i++];
      }
      if (!closed) {
        diags.Error({file, lineno, static_cast<std::uint32_t>(open + 1)},
                    static_cast<std::uint32_t>(line.size() - open), "unterminated quote",
                    std::string("close it with ") + c);
        return std::nullopt;
      }
    }
    t.length = static_cast<std::uint32_t>(i - start);
    out.push_back(std::move(t));
  }
  return out;
}

std::optional<Verdict> VerdictWord(std::string_view w) {
  if (w == "allow") return Verdict::kAllow;
  if (w == "ask") return Verdict::kAsk;
  if (w == "deny") return Verdict::kDeny;
  return std::nullopt;
}

}  // namespace

std::vector<Case> ParseCases(const SourceSet& sources, std::uint32_t file, Diagnostics& diags) {
  std::vector<Case> cases;
  const std::string& text = sources.file(file).text;
  std::uint32_t lineno = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view line(text.data() + pos, nl - pos);
    ++lineno;
    pos = nl + 1;
    auto tokens = Tokenize(line, file, lineno, diags);
    if (!tokens || tokens->empty()) continue;
    const std::vector<Token>& tk = *tokens;
    auto err = [&](const Token& t, std::string message, std::string hint) {
      diags.Error({file, lineno, t.col}, t.length, std::move(message), std::move(hint));
    };
    const auto verdict = VerdictWord(tk[0].text);
    if (!verdict) {
      err(tk[0], "expected a verdict (allow, ask or deny), found '" + tk[0].text + "'",
          "start each case with its verdict: allow command \"git status\"");
      continue;
    }
    if (tk.size() < 2) {
      err(tk[0], "'" + tk[0].text + "' needs a request", std::string(RequestUsage()));
      continue;
    }
    // The request's words, as a profile's `examples` section reads them.
    std::vector<std::string> words;
    words.reserve(tk.size() - 1);
    for (std::size_t i = 1; i < tk.size(); ++i) words.push_back(tk[i].text);
    auto parsed = ParseRequestWords(words);
    if (auto* bad = std::get_if<RequestWordsError>(&parsed)) {
      const std::size_t at = std::min(bad->word + 1, tk.size() - 1);
      err(tk[at], std::move(bad->message), std::move(bad->hint));
      continue;
    }
    cases.push_back(Case{lineno, *verdict, std::get<Request>(std::move(parsed))});
  }
  return cases;
}

}  // namespace cagent::policy
