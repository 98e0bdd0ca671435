#include "common/terminal_text.h"

#include <array>
#include <cstdint>
#include <cstdio>

namespace cagent {
namespace {

// Decodes one UTF-8 sequence at text[i]; returns its length, or 0 when the bytes there are not
// a well-formed, shortest-form, non-surrogate sequence.
std::size_t DecodeUtf8(std::string_view text, std::size_t i, char32_t* out) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  std::size_t len = 0;
  char32_t cp = 0;
  if (b0 < 0x80) {
    *out = b0;
    return 1;
  }
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    cp = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr std::array<char32_t, 5> kMin = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  *out = cp;
  return len;
}

void AppendHexByte(std::string& out, unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\x%02x", b);
  out += buf;
}

void AppendCodePoint(std::string& out, char32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\u{%04x}", static_cast<unsigned>(cp));
  out += buf;
}

}  // namespace

bool IsUnsafeCodePoint(char32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return true;         // C0 controls, ESC, DEL
  if (cp >= 0x80 && cp <= 0x9F) return true;        // C1 controls (CSI, OSC, ...)
  if (cp == 0xAD) return true;                      // soft hyphen (invisible)
  if (cp == 0x034F) return true;                    // combining grapheme joiner
  if (cp == 0x061C) return true;                    // Arabic letter mark (bidi)
  if (cp == 0x115F || cp == 0x1160) return true;    // Hangul fillers (blank)
  if (cp == 0x17B4 || cp == 0x17B5) return true;    // Khmer invisible vowels
  if (cp >= 0x180B && cp <= 0x180F) return true;    // Mongolian selectors / vowel separator
  if (cp >= 0x200B && cp <= 0x200F) return true;    // zero-width space/joiners, LRM, RLM
  if (cp >= 0x2028 && cp <= 0x202E) return true;    // line/para separators, LRE..RLO
  if (cp >= 0x2060 && cp <= 0x206F) return true;    // word joiner, invisible ops, LRI..PDI
  if (cp == 0x3164 || cp == 0xFFA0) return true;    // Hangul fillers
  if (cp >= 0xFE00 && cp <= 0xFE0F) return true;    // variation selectors
  if (cp == 0xFEFF) return true;                    // BOM / zero-width no-break space
  if (cp >= 0xFFF0 && cp <= 0xFFFB) return true;    // interlinear annotation, specials
  if (cp >= 0x1D173 && cp <= 0x1D17A) return true;  // musical formatting (invisible)
  if (cp >= 0xE0000 && cp <= 0xE0FFF) return true;  // tags, variation selectors supplement
  if ((cp & 0xFFFE) == 0xFFFE) return true;         // noncharacters
  return false;
}

std::string TerminalSafe(std::string_view text, TerminalLines lines) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    char32_t cp = 0;
    const std::size_t len = DecodeUtf8(text, i, &cp);
    if (len == 0) {
      AppendHexByte(out, static_cast<unsigned char>(text[i]));
      ++i;
      continue;
    }
    if (lines == TerminalLines::kMultiple && (cp == '\n' || cp == '\t')) {
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x80 && IsUnsafeCodePoint(cp)) {
      AppendHexByte(out, static_cast<unsigned char>(cp));
    } else if (IsUnsafeCodePoint(cp)) {
      AppendCodePoint(out, cp);
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

bool IsTerminalSafe(std::string_view text, TerminalLines lines) {
  return TerminalSafe(text, lines) == text;
}

}  // namespace cagent
