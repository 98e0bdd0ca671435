// Money for cost budgets: amounts in millionths of a currency unit (so a run's spend adds up
// exactly), prices per million tokens as the providers publish them, and the text forms a person
// writes and reads ("2.50 USD"). Pure: no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace cagent {

// An amount of money: `micros` millionths of `currency` (an ISO 4217-style code of three capital
// letters, "USD").
struct Money {
  std::uint64_t micros = 0;
  std::string currency;
};

// Parses "2.50" (digits, at most one '.', at most 6 decimals, at most 1,000,000 units) with the
// currency code "USD" (three capital letters). The error says what is wrong in a sentence.
Result<Money> ParseMoney(std::string_view amount, std::string_view currency);
// Parses "2.50USD", "2.50 USD" or "2.50" (then `default_currency`, which may be empty: then the
// currency is unknown until a price supplies it).
Result<Money> ParseMoneyWord(std::string_view text, std::string_view default_currency);
// "2.50 USD", "0.004321 USD": at least two decimals, more only as needed.
std::string FormatMoney(std::uint64_t micros, const std::string& currency);
std::string FormatMoney(const Money& money);
// Whether `code` is three capital letters.
bool IsCurrencyCode(std::string_view code);

// A model's prices per million tokens, in one currency, as the user's configuration gives them.
// A price per million tokens is, numerically, millionths of the currency unit per token.
struct TokenPrices {
  std::string currency;
  double input = 0;         // input not read from or written to a cache
  double cached_input = 0;  // input read from the provider's prompt cache
  double cache_write = 0;   // input written to the prompt cache
  double output = 0;        // output, reasoning included

  // The cost in micros, rounded up: `input` tokens of which `cache_read` were read from the cache
  // and `cache_write` written to it, and `output` tokens.
  [[nodiscard]] std::uint64_t CostMicros(std::uint64_t input_tokens, std::uint64_t cache_read,
                                         std::uint64_t cache_write,
                                         std::uint64_t output_tokens) const;
  // The most `input_tokens` of input can cost: each at the dearer of the input and cache-write
  // prices.
  [[nodiscard]] std::uint64_t WorstInputMicros(std::uint64_t input_tokens) const;
};

}  // namespace cagent
