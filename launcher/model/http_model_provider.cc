#include "launcher/model/http_model_provider.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cmath>
#include <random>

#include "common/json_text.h"
#include "launcher/model/turn_rules.h"

namespace cagent::launcher::model {
namespace {

using protocol::ErrorCode;

constexpr std::size_t kMaxProviderErrorBytes = 300;

std::string Seconds(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  const auto tenths = (ms + 50) / 100;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " s";
}

// Cuts `text` to at most `max` bytes without splitting a UTF-8 sequence.
std::string CutUtf8(std::string text, std::size_t max) {
  if (text.size() <= max) return text;
  std::size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  text.resize(end);
  return text + "...";
}

// Replaces every occurrence of `secret` in `text`.
std::string Scrub(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (std::size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
    text.replace(at, secret.size(), "[redacted]");
  }
  return text;
}

// Retry-After as seconds (integer or decimal), or OpenAI's retry-after-ms. HTTP dates are not
// honoured (the computed backoff is used instead).
std::optional<std::chrono::milliseconds> RetryAfter(const HttpHead& head) {
  auto number = [](const std::string& s) -> std::optional<double> {
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0' || !std::isfinite(v) || v < 0) return std::nullopt;
    return v;
  };
  if (auto ms = number(head.Header("retry-after-ms"))) {
    return std::chrono::milliseconds(static_cast<std::int64_t>(std::min(*ms, 86400000.0)));
  }
  if (auto s = number(head.Header("retry-after"))) {
    return std::chrono::milliseconds(static_cast<std::int64_t>(std::min(*s, 86400.0) * 1000));
  }
  return std::nullopt;
}

bool RetryableStatus(int status) {
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504 ||
         status == 529;
}

}  // namespace

struct HttpModelProvider::CallState : std::enable_shared_from_this<CallState> {
  CallState(boost::asio::io_context& io_context, std::shared_ptr<const HttpProviderConfig> cfg,
            std::shared_ptr<HttpClient> http, std::shared_ptr<ProviderDialect> d,
            std::function<void(ModelOutcome)> on_done)
      : io(io_context),
        config(std::move(cfg)),
        client(std::move(http)),
        dialect(std::move(d)),
        done(std::move(on_done)),
        timer(io_context),
        rng(std::random_device{}()) {}

  boost::asio::io_context& io;
  std::shared_ptr<const HttpProviderConfig> config;
  std::shared_ptr<HttpClient> client;
  std::shared_ptr<ProviderDialect> dialect;
  std::function<void(ModelOutcome)> done;
  boost::asio::steady_timer timer;
  std::mt19937_64 rng;
  HttpRequest request;  // template for each attempt
  int attempt = 0;      // 1-based once started
  bool cancelled = false;
  bool finished = false;
  std::shared_ptr<HttpExchange> exchange;
  // This attempt's response.
  HttpHead head;
  bool streaming = false;
  SseParser sse;
  std::unique_ptr<StreamAssembler> assembler;
  std::string collected;
  std::vector<SseEvent> events;
  bool attempt_failed = false;

  [[nodiscard]] std::string Url() const { return config->endpoint.ToString(); }

  void StartAttempt() {
    ++attempt;
    head = {};
    streaming = false;
    sse = SseParser();
    assembler.reset();
    collected.clear();
    events.clear();
    attempt_failed = false;
    auto self = shared_from_this();
    HttpHandlers handlers;
    handlers.on_head = [self](const HttpHead& h) { self->OnHead(h); };
    handlers.on_body = [self](std::string_view bytes) { self->OnBody(bytes); };
    handlers.on_done = [self](const HttpFailure* failure) { self->OnDone(failure); };
    exchange = client->Start(request, config->spec.request_timeout, std::move(handlers));
  }

  void OnHead(const HttpHead& h) {
    head = h;
    if (head.status == 200 &&
        head.Header("content-type").find("text/event-stream") != std::string::npos) {
      streaming = true;
      assembler = dialect->NewAssembler();
    }
  }

  void OnBody(std::string_view bytes) {
    if (attempt_failed) return;
    if (!streaming) {
      collected.append(bytes);
      return;
    }
    events.clear();
    if (Status st = sse.Feed(bytes, events); !st.ok()) {
      FailAttemptMidStream(
          AttemptError{ErrorCode::kProviderError,
                       config->display + " sent a malformed event stream: " + st.error().Message(),
                       false, std::nullopt});
      return;
    }
    for (const SseEvent& ev : events) {
      if (auto err = assembler->OnEvent(ev)) {
        FailAttemptMidStream(std::move(*err));
        return;
      }
    }
  }

  void FailAttemptMidStream(AttemptError err) {
    attempt_failed = true;
    if (exchange) exchange->Cancel();
    exchange.reset();
    AttemptFailed(std::move(err));
  }

  void OnDone(const HttpFailure* failure) {
    exchange.reset();
    if (cancelled || finished || attempt_failed) return;
    if (failure != nullptr) {
      spdlog::warn("model provider {}: {}", Url(),
                   failure->kind == HttpFailure::Kind::kTimeout ? "timed out"
                   : failure->kind == HttpFailure::Kind::kTls   ? "TLS handshake failed"
                                                                : "connection failed");
      // A refused connection to a loopback address means no local server is running: the
      // answer is immediate and final, so the call fails at once instead of backing off for
      // seconds. Elsewhere a refusal can be a load balancer or a restart passing, and is retried.
      if (failure->kind == HttpFailure::Kind::kConnect && failure->refused &&
          IsLoopbackHost(config->endpoint.host)) {
        AttemptFailed(AttemptError{
            ErrorCode::kProviderError,
            config->display + ": nothing is listening at " + config->endpoint.ToString() + " (" +
                failure->message +
                "); start the local model server, or fix the base URL (the model's base_url, or "
                "the provider's *_BASE_URL variable)",
            false, std::nullopt});
        return;
      }
      const bool retryable =
          failure->kind != HttpFailure::Kind::kTls && failure->kind != HttpFailure::Kind::kTooLarge;
      AttemptFailed(AttemptError{ErrorCode::kProviderError,
                                 config->display + ": " + failure->message, retryable,
                                 std::nullopt});
      return;
    }
    spdlog::debug("model provider {}: HTTP {}", Url(), head.status);
    if (head.status != 200) {
      AttemptFailed(FromStatus());
      return;
    }
    if (streaming) {
      AssembleOutcome assembled = assembler->Finish();
      if (auto* err = std::get_if<AttemptError>(&assembled)) {
        AttemptFailed(std::move(*err));
        return;
      }
      Complete(dialect->ParseWhole(std::move(std::get<nlohmann::json>(assembled))));
      return;
    }
    bool too_deep = false;
    auto parsed = ParseJsonWithin(collected, kMaxAnswerDepth, &too_deep);
    if (parsed.is_discarded()) {
      AttemptFailed(AttemptError{ErrorCode::kProviderError,
                                 config->display +
                                     (too_deep ? " sent an answer nested deeper than " +
                                                     std::to_string(kMaxAnswerDepth) + " levels ("
                                               : " sent an answer that is not valid JSON (") +
                                     std::to_string(collected.size()) + " bytes)",
                                 false, std::nullopt});
      return;
    }
    Complete(dialect->ParseWhole(std::move(parsed)));
  }

  void Complete(AttemptOutcome outcome) {
    if (auto* err = std::get_if<AttemptError>(&outcome)) {
      AttemptFailed(std::move(*err));
      return;
    }
    Finish(std::move(std::get<ModelResponse>(outcome)));
  }

  AttemptError FromStatus() const {
    const int status = head.status;
    const std::string text = Scrub(ProviderErrorText(collected), config->credential);
    const std::string detail = "HTTP " + std::to_string(status) + (text.empty() ? "" : ": " + text);
    AttemptError err;
    err.retryable = RetryableStatus(status);
    if (err.retryable) err.retry_after = RetryAfter(head);
    if (status == 401 || status == 403) {
      err.code = ErrorCode::kProviderAuth;
      err.message = config->display + " rejected the credential: check " + config->credential_var +
                    (config->credential.empty() ? ", which is not set" : "") + " (" + detail + ")";
    } else if (status == 429) {
      err.message = config->display + " is limiting the request rate (" + detail + ")";
    } else if (status == 404) {
      err.message = config->display + " answered " + detail + "; check the model name \"" +
                    config->spec.model + "\" and the base URL " + config->endpoint.ToString();
    } else if (status >= 500) {
      err.message = config->display + " failed (" + detail + ")";
    } else {
      err.message = config->display + " refused the request (" + detail + ")";
    }
    return err;
  }

  void AttemptFailed(AttemptError err) {
    if (cancelled || finished) return;
    const int max_retries = std::max(0, config->spec.max_retries);
    if (err.retryable && attempt <= max_retries) {
      const auto delay = Backoff(err.retry_after);
      spdlog::warn("model provider {}: {}; retry {} of {} in {}", Url(),
                   head.status != 0 ? "HTTP " + std::to_string(head.status) : "no answer", attempt,
                   max_retries, Seconds(delay));
      auto self = shared_from_this();
      timer.expires_after(delay);
      timer.async_wait([self](boost::system::error_code ec) {
        if (ec || self->cancelled || self->finished) return;
        self->StartAttempt();
      });
      return;
    }
    if (attempt > 1) {
      err.message += " (gave up after " + std::to_string(attempt) + " attempts)";
    }
    spdlog::warn("model provider {}: the call failed{}", Url(),
                 head.status != 0 ? " with HTTP " + std::to_string(head.status) : "");
    Finish(ModelError{err.code, Scrub(std::move(err.message), config->credential)});
  }

  std::chrono::milliseconds Backoff(std::optional<std::chrono::milliseconds> retry_after) {
    const auto cap = std::max(config->spec.retry_max_backoff, std::chrono::milliseconds(0));
    if (retry_after) return std::min(*retry_after, cap);
    const auto initial = std::max(config->spec.retry_initial_backoff, std::chrono::milliseconds(1));
    const int shift = std::min(attempt - 1, 20);
    const auto full = std::min<std::int64_t>(initial.count() << shift, cap.count());
    // Jitter: a uniform delay in [full/2, full], so that many runs rate-limited together do not
    // come back in lockstep.
    std::uniform_int_distribution<std::int64_t> dist(full / 2, full);
    return std::chrono::milliseconds(dist(rng));
  }

  void Finish(ModelOutcome outcome) {
    if (finished || cancelled) return;
    finished = true;
    auto on_done = std::move(done);
    done = nullptr;
    if (on_done) on_done(std::move(outcome));
  }

  void Cancel() {
    if (finished || cancelled) return;
    cancelled = true;
    timer.cancel();
    if (exchange) exchange->Cancel();
    exchange.reset();
    done = nullptr;
  }
};

HttpModelProvider::HttpModelProvider(boost::asio::io_context& io, HttpProviderConfig config,
                                     std::shared_ptr<HttpClient> client,
                                     std::shared_ptr<ProviderDialect> dialect)
    : io_(io),
      config_(std::make_shared<const HttpProviderConfig>(std::move(config))),
      client_(std::move(client)),
      dialect_(std::move(dialect)) {}

HttpModelProvider::~HttpModelProvider() { Cancel(); }

void HttpModelProvider::Call(ModelRequest request, std::function<void(ModelOutcome)> done) {
  std::erase_if(calls_, [](const std::weak_ptr<CallState>& w) { return w.expired(); });
  auto state = std::make_shared<CallState>(io_, config_, client_, dialect_, std::move(done));
  calls_.push_back(state);
  auto body = dialect_->BuildBody(request);
  if (!body.ok()) {
    ModelError err{ErrorCode::kProviderError,
                   "the model request was not sent: " + body.error().Message()};
    boost::asio::post(io_, [state, err = std::move(err)]() mutable { state->Finish(err); });
    return;
  }
  state->request.url = config_->endpoint;
  state->request.method = "POST";
  state->request.target = config_->endpoint.path.empty() ? "/" : config_->endpoint.path;
  state->request.headers = dialect_->Headers();
  state->request.headers.emplace_back(
      "accept", config_->spec.stream ? "text/event-stream" : "application/json");
  state->request.headers.emplace_back("user-agent", "cagent/0.1");
  state->request.body = std::move(*body);
  spdlog::debug("model provider {}: sending a request", config_->endpoint.ToString());
  state->StartAttempt();
}

void HttpModelProvider::Cancel() {
  for (auto& weak : calls_) {
    if (auto state = weak.lock()) state->Cancel();
  }
  calls_.clear();
}

std::uint64_t DefaultContextWindow(const std::string& model) {
  if (model.rfind("gpt-4.1", 0) == 0) return 1047576;
  if (model.rfind("gpt-4o", 0) == 0) return 128000;
  if (model.rfind("claude-", 0) == 0) return 200000;
  return 32768;
}

protocol::ModelInfo InfoFor(const ModelSpec& spec, std::string name) {
  protocol::ModelInfo info;
  info.provider = spec.provider;
  info.context_window =
      spec.context_window != 0 ? spec.context_window : DefaultContextWindow(spec.model);
  info.max_output_tokens = spec.max_output_tokens != 0 ? spec.max_output_tokens : 4096;
  info.name = std::move(name);
  return info;
}

Result<Url> ResolveBaseUrl(const ModelSpec& spec, const Environment& env,
                           const std::string& env_var, const std::string& fallback) {
  if (!spec.base_url.empty()) return ParseUrl(spec.base_url).Context("the model's base URL");
  if (const auto it = env.find(env_var); it != env.end() && !it->second.empty()) {
    return ParseUrl(it->second).Context(env_var);
  }
  return ParseUrl(fallback);
}

Result<std::vector<ToolSchema>> CheckModelRequest(const ModelRequest& request) {
  if (request.max_tokens == 0) {
    return PlainError("the model request", "max_tokens is 0 (the broker must set the output cap)");
  }
  if (!request.tools.is_array()) {
    return PlainError("the model request", "the tool schemas are not a list");
  }
  std::vector<ToolSchema> out;
  out.reserve(request.tools.size());
  for (std::size_t i = 0; i < request.tools.size(); ++i) {
    const nlohmann::json& t = request.tools[i];
    const std::string where = "tool schema " + std::to_string(i);
    if (!t.is_object()) return PlainError("the model request", where + " is not an object");
    const auto name = t.find("name");
    if (name == t.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      return PlainError("the model request", where + " has no name");
    }
    ToolSchema schema;
    schema.name = name->get<std::string>();
    if (const auto d = t.find("description"); d != t.end()) {
      if (!d->is_string()) {
        return PlainError("the model request",
                          where + " (" + schema.name + ") has a description that is not a string");
      }
      schema.description = d->get<std::string>();
    }
    schema.parameters = {{"type", "object"}};
    if (const auto p = t.find("parameters"); p != t.end()) {
      if (!p->is_object()) {
        return PlainError("the model request",
                          where + " (" + schema.name + ") has parameters that are not an object");
      }
      schema.parameters = *p;
    }
    out.push_back(std::move(schema));
  }
  return out;
}

Result<std::unique_ptr<ModelProvider>> MakeHttpProvider(boost::asio::io_context& io,
                                                        const ModelSpec& spec,
                                                        const Environment& env,
                                                        const HttpProviderKind& kind) {
  auto base = ResolveBaseUrl(spec, env, kind.base_var, kind.default_base);
  if (!base.ok()) return base.error();
  std::string key;
  if (const auto it = env.find(kind.key_var); it != env.end()) key = it->second;
  const bool may_go_without = kind.key_optional_on_loopback && base->IsLoopbackHttp();
  if (key.empty() && !may_go_without) {
    return PlainError(std::string(kind.key_var) + " is not set",
                      "export the API key for " + base->ToString() +
                          " in the environment cagent runs in (it stays outside the sandbox)" +
                          (kind.key_optional_on_loopback
                               ? "; only a local http://127.0.0.1 server may go without one"
                               : ""));
  }
  Url endpoint = *base;
  const std::size_t query = endpoint.path.find('?');
  if (query == std::string::npos) {
    endpoint.path += kind.path;
  } else {
    endpoint.path.insert(query, kind.path);
  }
  auto client = HttpClient::Make(io, spec.ca_file);
  if (!client.ok()) return client.error();
  HttpProviderConfig config;
  config.spec = spec;
  config.endpoint = endpoint;
  config.display = kind.display + base->HostHeader();
  config.credential_var = kind.key_var;
  config.credential = key;
  config.info = InfoFor(spec, spec.model);
  auto dialect = kind.dialect(spec, key, config.display);
  return std::unique_ptr<ModelProvider>(std::make_unique<HttpModelProvider>(
      io, std::move(config), std::shared_ptr<HttpClient>(std::move(*client)), std::move(dialect)));
}

std::uint64_t JsonCount(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return 0;
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return 0;
  if (it->is_number_unsigned()) return it->get<std::uint64_t>();
  if (it->is_number_integer()) {
    return static_cast<std::uint64_t>(std::max<std::int64_t>(0, it->get<std::int64_t>()));
  }
  const double d = it->get<double>();
  return d > 0 && d < 1e18 ? static_cast<std::uint64_t>(d) : 0;
}

std::string ProviderErrorText(const std::string& body) {
  std::string text;
  const auto json = ParseJsonWithin(body, kMaxAnswerDepth);
  if (!json.is_discarded()) {
    if (json.is_object()) {
      const auto err = json.find("error");
      if (err != json.end() && err->is_object()) {
        if (auto m = err->find("message"); m != err->end() && m->is_string()) text = *m;
      } else if (err != json.end() && err->is_string()) {
        text = *err;
      } else if (auto m = json.find("message"); m != json.end() && m->is_string()) {
        text = *m;
      }
    }
  } else {
    text = body.substr(0, 4096);
  }
  std::string clean;
  clean.reserve(std::min<std::size_t>(text.size(), kMaxProviderErrorBytes + 8));
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      if (!clean.empty() && clean.back() != ' ') clean.push_back(' ');
    } else {
      clean.push_back(c);
    }
    if (clean.size() > kMaxProviderErrorBytes + 8) break;
  }
  while (!clean.empty() && clean.back() == ' ') clean.pop_back();
  return CutUtf8(std::move(clean), kMaxProviderErrorBytes);
}

}  // namespace cagent::launcher::model
