#include "common/money.h"

#include <algorithm>
#include <cmath>

namespace cagent {
namespace {

constexpr std::uint64_t kMicrosPerUnit = 1000000;
constexpr std::uint64_t kMaxUnits = 1000000;

std::uint64_t CeilMicros(double micros) {
  if (!(micros > 0)) return 0;  // written so that NaN gives 0
  const double up = std::ceil(micros);
  return up >= 1.8e19 ? UINT64_MAX : static_cast<std::uint64_t>(up);
}

}  // namespace

bool IsCurrencyCode(std::string_view code) {
  return code.size() == 3 &&
         std::all_of(code.begin(), code.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

Result<Money> ParseMoney(std::string_view amount, std::string_view currency) {
  const std::string shown =
      std::string(amount) + (currency.empty() ? "" : " ") + std::string(currency);
  const auto bad = [&](const std::string& why) {
    return PlainError("amount " + shown, why).WithCode(Error::Code::kInvalidInput);
  };
  if (!currency.empty() && !IsCurrencyCode(currency)) {
    return bad("the currency must be a code of three capital letters, e.g. USD or EUR");
  }
  const std::size_t dot = amount.find('.');
  const std::string_view whole = amount.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view{} : amount.substr(dot + 1);
  const auto digits = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (whole.empty() || !digits(whole) || !digits(fraction) ||
      (dot != std::string_view::npos && fraction.empty())) {
    return bad("write a number with at most six decimals, e.g. 2.50");
  }
  if (fraction.size() > 6) return bad("at most six decimals (millionths) are counted");
  std::uint64_t units = 0;
  for (char c : whole) {
    units = units * 10 + static_cast<std::uint64_t>(c - '0');
    if (units > kMaxUnits) return bad("at most 1000000 is accepted");
  }
  std::uint64_t micros = 0;
  for (std::size_t i = 0; i < 6; ++i) {
    micros =
        micros * 10 + (i < fraction.size() ? static_cast<std::uint64_t>(fraction[i] - '0') : 0);
  }
  return Money{units * kMicrosPerUnit + micros, std::string(currency)};
}

Result<Money> ParseMoneyWord(std::string_view text, std::string_view default_currency) {
  std::size_t end = text.size();
  while (end > 0 && text[end - 1] >= 'A' && text[end - 1] <= 'Z') --end;
  const std::string_view code = text.substr(end);
  std::string_view amount = text.substr(0, end);
  if (!code.empty() && !amount.empty() && amount.back() == ' ') amount.remove_suffix(1);
  return ParseMoney(amount, code.empty() ? default_currency : code);
}

std::string FormatMoney(std::uint64_t micros, const std::string& currency) {
  std::string fraction = std::to_string(micros % kMicrosPerUnit);
  fraction.insert(0, 6 - fraction.size(), '0');
  while (fraction.size() > 2 && fraction.back() == '0') fraction.pop_back();
  std::string out = std::to_string(micros / kMicrosPerUnit) + "." + fraction;
  if (!currency.empty()) out += " " + currency;
  return out;
}

std::string FormatMoney(const Money& money) { return FormatMoney(money.micros, money.currency); }

std::uint64_t TokenPrices::CostMicros(std::uint64_t input_tokens, std::uint64_t cache_read,
                                      std::uint64_t cache_write_tokens,
                                      std::uint64_t output_tokens) const {
  const std::uint64_t cached = std::min(cache_read, input_tokens);
  const std::uint64_t written = std::min(cache_write_tokens, input_tokens - cached);
  const std::uint64_t plain = input_tokens - cached - written;
  return CeilMicros(
      static_cast<double>(plain) * input + static_cast<double>(cached) * cached_input +
      static_cast<double>(written) * cache_write + static_cast<double>(output_tokens) * output);
}

std::uint64_t TokenPrices::WorstInputMicros(std::uint64_t input_tokens) const {
  return CeilMicros(static_cast<double>(input_tokens) * std::max(input, cache_write));
}

}  // namespace cagent
