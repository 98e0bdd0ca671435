// Redactor: replaces secret-shaped values in text before it goes to the model or into a log.
// Runs in cagent (trusted). Two sources: the literal values of the caller's environment variables
// whose names match the profile's scrub patterns (the strongest signal: those are the caller's
// secrets), and shapes of well-known credentials (API keys, tokens, private key blocks, JWTs,
// "password=..." assignments). Replacement: "[REDACTED:<what>]", e.g. "[REDACTED:env:AWS_SECRET]".
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace cagent::launcher::broker {

class Redactor {
 public:
  // `secrets`: (label, value) pairs; values shorter than 6 bytes are ignored (too many false hits).
  explicit Redactor(std::vector<std::pair<std::string, std::string>> secrets = {});

  // From the caller's environment (`environ`-style "NAME=value" strings) and the profile's scrub
  // patterns (policy::Policy::env_scrub, glob syntax as in the language).
  static Redactor FromEnvironment(const std::vector<std::string>& environ,
                                  const std::vector<std::string>& scrub_patterns);

  [[nodiscard]] std::string Redact(std::string_view text) const;
  // Redacts every string (values and keys left alone) in place; returns how many were replaced.
  std::size_t RedactJson(nlohmann::json& value) const;

 private:
  std::vector<std::pair<std::string, std::string>> secrets_;
};

}  // namespace cagent::launcher::broker
