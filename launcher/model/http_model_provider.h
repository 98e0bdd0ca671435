// HttpModelProvider: what the OpenAI-compatible and Anthropic providers share — the request body
// built by a provider-specific ProviderDialect from the broker's ModelRequest, one request per
// attempt over HttpClient, SSE assembly through a provider-specific StreamAssembler into the
// provider's non-streaming body, which the dialect then parses into a neutral turn; retries with
// exponential backoff and jitter, the mapping of HTTP failures to ModelError, and the rule that a
// credential never appears in an error text or a log line. Runs in cagent (trusted), on the
// broker's io_context thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "launcher/model/http_client.h"
#include "launcher/model/model_provider.h"
#include "launcher/model/sse.h"
#include "launcher/model/turn_rules.h"

namespace cagent::launcher::model {

// Why one attempt failed, and whether another attempt may help.
struct AttemptError {
  protocol::ErrorCode code = protocol::ErrorCode::kProviderError;
  std::string message;
  bool retryable = false;
  std::optional<std::chrono::milliseconds> retry_after;  // the server's Retry-After
};
using AttemptOutcome = std::variant<ModelResponse, AttemptError>;
// An assembled non-streaming response body, or why the stream did not give one.
using AssembleOutcome = std::variant<nlohmann::json, AttemptError>;

// Turns a provider's event stream into its non-streaming response body. One per attempt.
class StreamAssembler {
 public:
  virtual ~StreamAssembler() = default;
  // One event; an error when the stream reports a failure or carries malformed data.
  virtual std::optional<AttemptError> OnEvent(const SseEvent& event) = 0;
  // The HTTP response ended: the assembled body (in the provider's non-streaming format), or why
  // it is incomplete.
  virtual AssembleOutcome Finish() = 0;
};

// The provider-specific part of a request and a response.
class ProviderDialect {
 public:
  virtual ~ProviderDialect() = default;
  // The provider's request body for `request`, serialised: built from an allow-list of keys only
  // (the spec's model and parameters, the request's messages, tools and max_tokens). Fails when
  // the request is unusable (max_tokens 0, a malformed tool schema); nothing is sent then.
  [[nodiscard]] virtual Result<std::string> BuildBody(const ModelRequest& request) const = 0;
  // Content type and credential headers (the only place the credential is used).
  [[nodiscard]] virtual std::vector<std::pair<std::string, std::string>> Headers() const = 0;
  [[nodiscard]] virtual std::unique_ptr<StreamAssembler> NewAssembler() const = 0;
  // Parses a non-streaming response body (as received, or as the assembler built it) into a
  // neutral turn that has passed FinishTurn (turn_rules.h), with usage, the provider's stop word
  // and the body itself as ModelResponse.raw. Not const: generated call ids are counted per
  // provider.
  [[nodiscard]] virtual AttemptOutcome ParseWhole(nlohmann::json body) = 0;
};

// What a provider is, beyond its dialect.
struct HttpProviderConfig {
  ModelSpec spec;
  Url endpoint;                // the full request URL (path = request target)
  std::string display;         // "the OpenAI-compatible provider at api.openai.com"
  std::string credential_var;  // "OPENAI_API_KEY"
  std::string credential;      // kept only to scrub it from provider error texts
  protocol::ModelInfo info;
};

class HttpModelProvider final : public ModelProvider {
 public:
  HttpModelProvider(boost::asio::io_context& io, HttpProviderConfig config,
                    std::shared_ptr<HttpClient> client, std::shared_ptr<ProviderDialect> dialect);
  // Cancels outstanding calls (their `done` is not called).
  ~HttpModelProvider() override;

  [[nodiscard]] protocol::ModelInfo Info() const override { return config_->info; }
  void Call(ModelRequest request, std::function<void(ModelOutcome)> done) override;
  void Cancel() override;

  struct CallState;  // one Call(), across its attempts

 private:
  boost::asio::io_context& io_;
  std::shared_ptr<const HttpProviderConfig> config_;
  std::shared_ptr<HttpClient> client_;
  std::shared_ptr<ProviderDialect> dialect_;
  std::vector<std::weak_ptr<CallState>> calls_;
};

// The context window assumed for `model` when the spec does not set one: gpt-4o* 128000,
// gpt-4.1* 1047576, claude-* 200000, otherwise 32768.
std::uint64_t DefaultContextWindow(const std::string& model);
// Info() for a spec: provider, model, context window (spec's or the default), max output tokens
// (spec's or 4096).
protocol::ModelInfo InfoFor(const ModelSpec& spec, std::string name);

// The base URL for `spec`: spec.base_url, else env[env_var], else `fallback`; parsed.
Result<Url> ResolveBaseUrl(const ModelSpec& spec, const Environment& env,
                           const std::string& env_var, const std::string& fallback);

// What distinguishes one HTTP provider's construction from another's.
struct HttpProviderKind {
  const char* base_var;      // "OPENAI_BASE_URL"
  const char* default_base;  // "https://api.openai.com/v1"
  const char* key_var;       // "OPENAI_API_KEY"
  const char* path;     // appended to the base URL's path (before a query): "/chat/completions"
  const char* display;  // "the OpenAI-compatible provider at " (the host follows)
  // A plain-http loopback base URL may go without a key (a local server).
  bool key_optional_on_loopback = false;
  // Makes the dialect from the spec, the key and the display name.
  std::function<std::shared_ptr<ProviderDialect>(const ModelSpec&, const std::string& key,
                                                 const std::string& display)>
      dialect;
};
// Builds an HttpModelProvider of `kind`: the base URL is spec.base_url, else $base_var, else the
// default; fails when the key is unset or empty (unless allowed on loopback), or the base URL or
// spec.ca_file is unusable.
Result<std::unique_ptr<ModelProvider>> MakeHttpProvider(boost::asio::io_context& io,
                                                        const ModelSpec& spec,
                                                        const Environment& env,
                                                        const HttpProviderKind& kind);

// Helpers shared by the dialects.

// One neutral tool schema, read from ModelRequest.tools.
struct ToolSchema {
  std::string name;
  std::string description;
  nlohmann::json parameters;  // a JSON Schema object
};
// Reads ModelRequest.tools ({"name", "description", "parameters"} each; description defaults to
// "", parameters to {"type": "object"}) and checks request.max_tokens > 0. Fails naming the
// offending entry: the request is the broker's, so a bad one is a broker bug and nothing is sent.
Result<std::vector<ToolSchema>> CheckModelRequest(const ModelRequest& request);
std::uint64_t JsonCount(const nlohmann::json& object, const char* key);
// The provider's error text in `body` ({"error": {"message": ...}} or plain text), cleaned of
// control characters and cut to about 300 bytes.
std::string ProviderErrorText(const std::string& body);

}  // namespace cagent::launcher::model
