// Redactor: replaces secret-shaped values in text before it goes to the model or into a log.
// Runs in cagent (trusted). Two sources: the literal values of the caller's environment variables
// whose names match the profile's scrub patterns (the strongest signal: those are the caller's
// secrets), and shapes of well-known credentials (API keys, tokens, private key blocks, JWTs,
// "password=..." assignments). Replacement: "[REDACTED:<what>]", e.g. "[REDACTED:env:AWS_SECRET]".
//
// Labels: env:NAME, openai_key (sk-, sk-proj-), anthropic_key (sk-ant-), github_token (gh[pousr]_,
// github_pat_), aws_access_key_id (AKIA/ASIA + 16), slack_token (xox[abprs]-), google_api_key
// (AIza + 35), jwt (eyJ... three base64url parts), private_key (PEM "-----BEGIN ... PRIVATE
// KEY-----" through its END line, or to the end of the text when the END is missing), assignment
// (the value after a name ending in password, passwd, passphrase, secret, token, api_key, apikey,
// api-key, secret_key, access_key, private_key, signing_key or auth, followed by '=' or ':'; the
// name, separator and quotes stay; "$VAR", "${...}", "%VAR%" references and "==" comparisons are
// left alone). Shapes are matched only at the start of a word. Overlapping findings become one
// replacement.
//
// The scan is a hand-written, linear-time pass (no std::regex: model traffic and tool output are
// attacker-influenced and can be megabytes). Not caught, by design: a secret split across two
// strings or reassembled by the reader, secrets in prose ("the password is hunter2"), encodings
// (base64 of a key), and environment values shorter than 6 bytes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cagent::launcher::broker {

class Redactor {
 public:
  // `secrets`: (label, value) pairs; values shorter than 6 bytes are ignored (too many false hits).
  explicit Redactor(std::vector<std::pair<std::string, std::string>> secrets = {});

  // From the caller's environment (`environ`-style "NAME=value" strings) and the profile's scrub
  // patterns (policy::Policy::env_scrub, glob syntax as in the language).
  static Redactor FromEnvironment(const std::vector<std::string>& environ,
                                  const std::vector<std::string>& scrub_patterns);

  // This redactor with `more` (label, value) pairs added ahead of its own, e.g. the sandbox's
  // credentials ("credential:gh", issue 36): a value both have is labelled as in `more`. The same
  // minimum length applies.
  [[nodiscard]] Redactor With(std::vector<std::pair<std::string, std::string>> more) const;

  // `text` with every finding replaced. Thread-compatible (const, no shared state).
  [[nodiscard]] std::string Redact(std::string_view text) const;
  // Redacts every string value in place (object keys are left alone); a string member whose key
  // names a secret ({"password": "..."}) is replaced as a whole with "[REDACTED:assignment]".
  // Returns how many strings were changed.
  std::size_t RedactJson(nlohmann::json& value) const;
  // The same for one string member `name` of an object, in place (the audit log's typed detail
  // fields): replaced as a whole when `name` names a secret, else its findings. Returns 1 when
  // changed, else 0.
  std::size_t RedactMember(std::string_view name, std::string& value) const;

 private:
  std::vector<std::pair<std::string, std::string>> secrets_;
};

}  // namespace cagent::launcher::broker
