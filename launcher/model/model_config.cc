#include "launcher/model/model_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <sstream>
#include <utility>
#include <variant>

#include "common/unique_fd.h"

namespace cagent::launcher::model {
namespace {

constexpr std::size_t kMaxConfigBytes = 1 << 20;

using Value = std::variant<std::string, std::uint64_t, double, bool>;

// One line of the file, read left to right; every error names the column.
class LineReader {
 public:
  explicit LineReader(std::string_view line) : line_(line) {}

  void SkipSpace() {
    while (pos_ < line_.size() && (line_[pos_] == ' ' || line_[pos_] == '\t')) ++pos_;
  }
  // True when only spaces and a comment are left.
  bool AtEnd() {
    SkipSpace();
    return pos_ == line_.size() || line_[pos_] == '#';
  }
  bool Take(char c) {
    SkipSpace();
    if (pos_ < line_.size() && line_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  [[nodiscard]] std::size_t column() const { return pos_ + 1; }

  // A bare key (letters, digits, '_', '-') or a basic string.
  std::optional<std::string> Key(std::string* why) {
    SkipSpace();
    if (pos_ < line_.size() && line_[pos_] == '"') return String(why);
    const std::size_t start = pos_;
    while (pos_ < line_.size() && IsBare(line_[pos_])) ++pos_;
    if (pos_ == start) {
      *why = "expected a key (letters, digits, _ and -) or a quoted name";
      return std::nullopt;
    }
    return std::string(line_.substr(start, pos_ - start));
  }

  // A basic string: "..." with the escapes \" \\ \n \t; no control characters.
  std::optional<std::string> String(std::string* why) {
    ++pos_;  // the opening quote
    std::string out;
    while (pos_ < line_.size()) {
      const char c = line_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        *why = "a control character in a string";
        return std::nullopt;
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      const char e = pos_ < line_.size() ? line_[pos_++] : '\0';
      if (e == '"' || e == '\\') {
        out += e;
      } else if (e == 'n') {
        out += '\n';
      } else if (e == 't') {
        out += '\t';
      } else {
        *why = "an escape other than \\\" \\\\ \\n \\t in a string";
        return std::nullopt;
      }
    }
    *why = "a string without its closing quote";
    return std::nullopt;
  }

  std::optional<Value> ReadValue(std::string* why) {
    SkipSpace();
    if (pos_ >= line_.size()) {
      *why = "expected a value after '='";
      return std::nullopt;
    }
    if (line_[pos_] == '"') {
      auto s = String(why);
      if (!s) return std::nullopt;
      return Value{std::move(*s)};
    }
    const std::size_t start = pos_;
    while (pos_ < line_.size() && line_[pos_] != ' ' && line_[pos_] != '\t' && line_[pos_] != '#') {
      ++pos_;
    }
    const std::string_view word = line_.substr(start, pos_ - start);
    if (word == "true") return Value{true};
    if (word == "false") return Value{false};
    const bool digits_only =
        std::all_of(word.begin(), word.end(), [](char c) { return (c >= '0' && c <= '9'); });
    if (digits_only && word.size() <= 18) {
      std::uint64_t n = 0;
      std::from_chars(word.data(), word.data() + word.size(), n);
      return Value{n};
    }
    // A decimal: digits '.' digits.
    const std::size_t dot = word.find('.');
    const auto all_digits = [](std::string_view s) {
      return !s.empty() &&
             std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (dot != std::string_view::npos && all_digits(word.substr(0, dot)) &&
        all_digits(word.substr(dot + 1)) && word.size() <= 24) {
      std::istringstream in{std::string(word)};
      in.imbue(std::locale::classic());
      double d = 0;
      in >> d;
      return Value{d};
    }
    pos_ = start;
    *why = "expected a value: a \"string\", a number (12, 0.30) or true/false";
    return std::nullopt;
  }

 private:
  static bool IsBare(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  }
  std::string_view line_;
  std::size_t pos_ = 0;
};

std::string TypeName(const Value& v) {
  return std::holds_alternative<std::string>(v)     ? "a string"
         : std::holds_alternative<std::uint64_t>(v) ? "a whole number"
         : std::holds_alternative<double>(v)        ? "a decimal number"
                                                    : "true/false";
}

// Stores `value` under `key` in `entry`; the error when the key is unknown or the type wrong.
std::optional<std::string> SetKey(ModelEntry& entry, const std::string& key, const Value& value) {
  const auto count = [&](std::optional<std::uint64_t>& field) -> std::optional<std::string> {
    if (const auto* n = std::get_if<std::uint64_t>(&value)) {
      field = *n;
      return std::nullopt;
    }
    return key + " must be a whole number, not " + TypeName(value);
  };
  const auto price = [&](std::optional<double>& field) -> std::optional<std::string> {
    if (const auto* n = std::get_if<std::uint64_t>(&value)) {
      field = static_cast<double>(*n);
    } else if (const auto* d = std::get_if<double>(&value)) {
      field = *d;
    } else {
      return key + " must be a number (a price per million tokens), not " + TypeName(value);
    }
    return std::nullopt;
  };
  const auto text = [&](std::optional<std::string>& field) -> std::optional<std::string> {
    if (const auto* s = std::get_if<std::string>(&value)) {
      field = *s;
      return std::nullopt;
    }
    return key + " must be a \"string\", not " + TypeName(value);
  };
  if (key == "family") {
    std::optional<std::string> name;
    if (auto err = text(name)) return err;
    entry.family = ParseFamily(*name);
    if (!entry.family) {
      return "family \"" + *name + "\" is not one of openai-chat, openai-reasoning, anthropic";
    }
    return std::nullopt;
  }
  if (key == "context_window") return count(entry.context_window);
  if (key == "max_output_tokens") return count(entry.max_output_tokens);
  if (key == "thinking_budget") return count(entry.thinking_budget);
  if (key == "prompt_caching") {
    if (const auto* b = std::get_if<bool>(&value)) {
      entry.prompt_caching = *b;
      return std::nullopt;
    }
    return key + " must be true or false, not " + TypeName(value);
  }
  if (key == "reasoning_effort") {
    if (auto err = text(entry.reasoning_effort)) return err;
    if (!IsReasoningEffort(*entry.reasoning_effort)) {
      return "reasoning_effort \"" + *entry.reasoning_effort +
             "\" is not one of minimal, low, medium, high";
    }
    return std::nullopt;
  }
  if (key == "currency") {
    if (auto err = text(entry.currency)) return err;
    if (!IsCurrencyCode(*entry.currency)) {
      return "currency \"" + *entry.currency + "\" is not a code of three capital letters (USD)";
    }
    return std::nullopt;
  }
  if (key == "input_per_mtok") return price(entry.input_per_mtok);
  if (key == "cached_input_per_mtok") return price(entry.cached_input_per_mtok);
  if (key == "cache_write_per_mtok") return price(entry.cache_write_per_mtok);
  if (key == "output_per_mtok") return price(entry.output_per_mtok);
  return "unknown key " + key +
         " (family, context_window, max_output_tokens, thinking_budget, prompt_caching, "
         "reasoning_effort, currency, input_per_mtok, cached_input_per_mtok, "
         "cache_write_per_mtok, output_per_mtok)";
}

bool PatternMatches(std::string_view pattern, std::string_view text) {
  // '*' matches any run of characters; iterative with one backtrack point.
  std::size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace

const ModelEntry* ModelConfig::Find(std::string_view label) const {
  const ModelEntry* best = nullptr;
  for (const ModelEntry& e : entries) {
    if (e.name == label) return &e;
    if (e.name.find('*') != std::string::npos && PatternMatches(e.name, label) &&
        (best == nullptr || e.name.size() > best->name.size())) {
      best = &e;
    }
  }
  return best;
}

Result<ModelConfig> ParseModelConfig(std::string_view text, const std::string& path) {
  ModelConfig config;
  config.path = path;
  ModelEntry* current = nullptr;
  std::vector<std::string> seen_keys;
  std::size_t number = 0;
  while (!text.empty()) {
    ++number;
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    LineReader r(line);
    const auto fail = [&](const std::string& why) {
      return PlainError(path + ":" + std::to_string(number) + ":" + std::to_string(r.column()), why)
          .WithCode(Error::Code::kInvalidInput);
    };
    std::string why;
    if (r.AtEnd()) continue;
    if (r.Take('[')) {
      auto table = r.Key(&why);
      if (!table) return fail(why);
      if (*table != "model" || !r.Take('.')) {
        return fail("expected a table [model.\"PROVIDER:MODEL\"]");
      }
      auto name = r.Key(&why);
      if (!name) return fail(why);
      if (!r.Take(']') || !r.AtEnd()) return fail("expected ']' and the end of the line");
      if (name->empty()) return fail("an empty model name");
      for (const ModelEntry& e : config.entries) {
        if (e.name == *name) {
          return fail("model \"" + *name + "\" is described twice (" + e.where + ")");
        }
      }
      config.entries.push_back(ModelEntry{});
      current = &config.entries.back();
      current->name = std::move(*name);
      current->where = path + ":" + std::to_string(number);
      seen_keys.clear();
      continue;
    }
    auto key = r.Key(&why);
    if (!key) return fail(why);
    if (!r.Take('=')) return fail("expected '=' after " + *key);
    auto value = r.ReadValue(&why);
    if (!value) return fail(why);
    if (!r.AtEnd()) return fail("expected the end of the line after the value");
    if (current == nullptr) {
      return fail("a key before any table: start with [model.\"PROVIDER:MODEL\"]");
    }
    if (std::find(seen_keys.begin(), seen_keys.end(), *key) != seen_keys.end()) {
      return fail(*key + " is set twice in [model.\"" + current->name + "\"]");
    }
    seen_keys.push_back(*key);
    if (auto err = SetKey(*current, *key, *value)) return fail(*err);
  }
  return config;
}

Result<ModelConfig> LoadModelConfig(const std::string& explicit_path, const Environment& env) {
  const auto var = [&](const char* name) {
    const auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  std::string path = explicit_path;
  bool must_exist = !path.empty();
  if (path.empty() && !var("CAGENT_MODELS_CONFIG").empty()) {
    path = var("CAGENT_MODELS_CONFIG");
    must_exist = true;
  }
  if (path.empty() && !var("XDG_CONFIG_HOME").empty()) {
    path = var("XDG_CONFIG_HOME") + "/cagent/models.toml";
  }
  if (path.empty() && !var("HOME").empty()) path = var("HOME") + "/.config/cagent/models.toml";
  if (path.empty()) return ModelConfig{};
  // The user's own file: a link is followed (dotfiles are often links), a FIFO is not waited on.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) {
    const int err = errno;
    // Not there, or in a directory this user cannot look into (a HOME that is not theirs, as
    // under `sudo -u`): there is no configuration. A file that is there but unreadable is an
    // error, as is a named file that is missing.
    const std::string parent = path.substr(0, path.find_last_of('/'));
    const bool unseen =
        err == ENOENT || err == ENOTDIR || (err == EACCES && ::access(parent.c_str(), X_OK) != 0);
    if (!must_exist && unseen) return ModelConfig{};
    return ErrnoError("reading the model configuration " + path, err)
        .WithCode(Error::Code::kInvalidInput);
  }
  // A regular file, or /dev/null (`--models-config /dev/null`: no configuration at all).
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 ||
      !(S_ISREG(st.st_mode) || (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)))) {
    return PlainError("reading the model configuration " + path, "it is not a regular file")
        .WithCode(Error::Code::kInvalidInput);
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return ErrnoError("reading the model configuration " + path)
          .WithCode(Error::Code::kInvalidInput);
    }
    if (n == 0 || text.size() > kMaxConfigBytes) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  if (text.size() > kMaxConfigBytes) {
    return PlainError("reading the model configuration " + path, "it is larger than 1 MiB")
        .WithCode(Error::Code::kInvalidInput);
  }
  return ParseModelConfig(text, path);
}

ModelFamily DefaultFamily(const std::string& provider, const std::string& model) {
  if (provider == "anthropic") return ModelFamily::kAnthropic;
  if (provider == "replay") return ModelFamily::kReplay;
  for (std::string_view prefix : {"o1", "o3", "o4", "gpt-5"}) {
    if (model.rfind(prefix, 0) == 0) return ModelFamily::kOpenAiReasoning;
  }
  return ModelFamily::kOpenAiChat;
}

std::string_view FamilyName(ModelFamily family) {
  switch (family) {
    case ModelFamily::kOpenAiChat:
      return "openai-chat";
    case ModelFamily::kOpenAiReasoning:
      return "openai-reasoning";
    case ModelFamily::kAnthropic:
      return "anthropic";
    case ModelFamily::kReplay:
      return "replay";
  }
  return "openai-chat";
}

std::optional<ModelFamily> ParseFamily(std::string_view name) {
  for (ModelFamily f :
       {ModelFamily::kOpenAiChat, ModelFamily::kOpenAiReasoning, ModelFamily::kAnthropic}) {
    if (FamilyName(f) == name) return f;
  }
  return std::nullopt;
}

bool IsReasoningEffort(std::string_view effort) {
  return effort == "minimal" || effort == "low" || effort == "medium" || effort == "high";
}

std::uint64_t ThinkingBudgetFor(std::string_view effort) {
  if (effort == "minimal") return 1024;
  if (effort == "low") return 2048;
  if (effort == "high") return 24576;
  return 8192;
}

Status ApplyModelConfig(ModelSpec& spec, const std::string& label, const ModelConfig& config,
                        const std::string& reasoning_effort) {
  const ModelEntry* entry = config.Find(label);
  const std::string from = entry != nullptr ? " (" + entry->where + ")" : std::string();
  const auto refuse = [&](const std::string& why) {
    return PlainError("model " + label + from, why).WithCode(Error::Code::kInvalidInput);
  };
  std::string effort = reasoning_effort;
  if (entry != nullptr) {
    spec.config_entry = entry->where;
    if (entry->family) {
      const bool fits = spec.provider == "openai" ? *entry->family != ModelFamily::kAnthropic
                                                  : spec.provider == "anthropic" &&
                                                        *entry->family == ModelFamily::kAnthropic;
      if (!fits && spec.provider != "replay") {
        return refuse("family " + std::string(FamilyName(*entry->family)) +
                      " is not a family of the " + spec.provider + " provider");
      }
      if (spec.provider != "replay") spec.family = *entry->family;
    }
    if (entry->context_window && spec.context_window == 0) {
      spec.context_window = *entry->context_window;
    }
    if (entry->max_output_tokens && spec.max_output_tokens == 0) {
      spec.max_output_tokens = *entry->max_output_tokens;
    }
    if (entry->prompt_caching) spec.prompt_caching = *entry->prompt_caching;
    if (effort.empty() && entry->reasoning_effort) effort = *entry->reasoning_effort;
    if (entry->thinking_budget) spec.thinking_budget = *entry->thinking_budget;
    const bool any_price = entry->currency || entry->input_per_mtok ||
                           entry->cached_input_per_mtok || entry->cache_write_per_mtok ||
                           entry->output_per_mtok;
    if (any_price) {
      if (!entry->currency || !entry->input_per_mtok || !entry->output_per_mtok) {
        return refuse(
            "a price needs currency, input_per_mtok and output_per_mtok (cached_input_per_mtok "
            "and cache_write_per_mtok default to input_per_mtok)");
      }
      TokenPrices p;
      p.currency = *entry->currency;
      p.input = *entry->input_per_mtok;
      p.output = *entry->output_per_mtok;
      p.cached_input = entry->cached_input_per_mtok.value_or(p.input);
      p.cache_write = entry->cache_write_per_mtok.value_or(p.input);
      spec.prices = p;
    }
  }
  if (!effort.empty()) {
    if (!IsReasoningEffort(effort)) {
      return refuse("reasoning effort \"" + effort + "\" is not one of minimal, low, medium, high");
    }
    switch (spec.family) {
      case ModelFamily::kOpenAiReasoning:
        spec.reasoning_effort = effort;
        break;
      case ModelFamily::kAnthropic:
        if (spec.thinking_budget == 0 || !reasoning_effort.empty()) {
          spec.thinking_budget = ThinkingBudgetFor(effort);
        }
        break;
      case ModelFamily::kOpenAiChat:
        return refuse(
            "it is an openai-chat model, which takes no reasoning effort (if it is a reasoning "
            "model, say family = \"openai-reasoning\" in its models.toml entry)");
      case ModelFamily::kReplay:
        break;  // a recording has no effort to set
    }
  }
  if (spec.temperature && spec.family == ModelFamily::kOpenAiReasoning) {
    return refuse("OpenAI reasoning models take no temperature; leave --temperature out");
  }
  if (spec.temperature && spec.family == ModelFamily::kAnthropic && spec.thinking_budget > 0) {
    return refuse("Anthropic's extended thinking takes no temperature; leave --temperature out");
  }
  return Ok{};
}

}  // namespace cagent::launcher::model
