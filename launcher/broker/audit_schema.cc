#include "launcher/broker/audit_schema.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <utility>

#include "common/json_text.h"

namespace cagent::launcher::broker {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, static_cast<std::size_t>(AuditActor::kCount)> kActorNames = {
    "agent", "broker", "operator", "cagent"};

constexpr std::array<std::string_view, static_cast<std::size_t>(AuditActor::kCount)>
    kActorMeanings = {
        "the confined agent (untrusted): what it asked for, as it sent it",
        "the policy broker: its decisions, budgets, and the model's answers it relayed",
        "a person at the terminal (or the headless approver) answering an approval",
        "the run around the session: state changes, workspace, patch capture, verification",
};

// The envelope, in the order AuditLog::Append writes it.
const std::vector<AuditField>& EnvelopeFields() {
  static const std::vector<AuditField> fields = {
      {"run", kAuditString, true, "the run id; the same on every line of a log"},
      {"seq", kAuditCount, true, "0 for the first line, then +1 per line"},
      {"time", kAuditString, true, "when it was written: RFC 3339, UTC, milliseconds"},
      {"actor", kAuditString, true, "whose action it records (see Actors)"},
      {"event", kAuditString, true, "the kind of entry (see Events)"},
      {"policy", kAuditString, true, "digest of the compiled profile the run is under"},
      {"tool", kAuditString, true, "the tool concerned, or \"\" (see each event)"},
      {"args", kAuditString, true,
       "SHA-256 of the canonical JSON of the arguments (keys sorted, no whitespace), or \"\""},
      {"verdict", kAuditString, true, "`allow`, `deny` or `ask`, or \"\""},
      {"rule", kAuditString, true,
       "the profile rule (or the broker's own check) that decided, or \"\""},
      {"result", kAuditString, true, "SHA-256 of what the entry's action produced, or \"\""},
      {"detail", kAuditObject, true, "the event's own fields (see each event); already redacted"},
      {"lost", kAuditCount, false,
       "entries that could not be written so far (full disk ...); only present when > 0"},
      {"prev", kAuditString, true,
       "SHA-256 (hex) of the previous line's bytes without its newline; 64 zeros on the first"},
  };
  return fields;
}

// The table of audit_events.h as the schema, in AuditKind order.
std::vector<AuditEventSpec> BuildSpecs() {
  // The table's type names.
  using audit::ChangedPathList;
  using audit::IntList;
  using audit::OmitEmpty;
  using audit::PathList;
  using audit::StringList;
  using audit::ToolCallList;
  std::vector<AuditEventSpec> specs;
#define CAGENT_AUDIT_SPEC_BEGIN(Kind, kName, kActor, kWriter, kMeaning) \
  specs.push_back(                                                      \
      {AuditKind::k##Kind, kName, {AuditActor::kActor}, kMeaning, {}, {}, {}, {}, {}, {}});
#define CAGENT_AUDIT_SPEC_ENVELOPE(Kind, kSlot, kMember, Type, kPresence, kMeaning) \
  specs.back().kSlot = {AuditPresence::kPresence, kMeaning};
#define CAGENT_AUDIT_SPEC_FIELD(Kind, kMember, Type, kNeed, kMeaning)     \
  specs.back().detail.push_back({#kMember, audit::FieldType<Type>::value, \
                                 AuditPresence::kNeed == AuditPresence::kRequired, kMeaning});
  CAGENT_AUDIT_EVENTS(CAGENT_AUDIT_SPEC_BEGIN, CAGENT_AUDIT_SPEC_ENVELOPE, CAGENT_AUDIT_SPEC_FIELD,
                      CAGENT_AUDIT_NONE)
#undef CAGENT_AUDIT_SPEC_BEGIN
#undef CAGENT_AUDIT_SPEC_ENVELOPE
#undef CAGENT_AUDIT_SPEC_FIELD
  return specs;
}

// In AuditKind order (the schema test checks that spec i has kind i).
const std::vector<AuditEventSpec>& Specs() {
  static const std::vector<AuditEventSpec> specs = BuildSpecs();
  return specs;
}

// Fills kind and actor from the schema (every kind has exactly one actor today).
AuditEvent Make(AuditKind kind) {
  const AuditEventSpec& spec = AuditSpec(kind);
  AuditEvent e;
  e.kind = kind;
  e.actor = spec.actors.front();
  return e;
}

json CappedJson(const std::vector<std::string>& items, std::size_t cap, std::string_view unit) {
  if (items.size() <= cap) return json(items);
  return json(std::to_string(items.size()) + std::string(unit));
}

// Typed detail fields (AuditDetailField), for the per-call builders.
AuditDetailField CountField(std::string_view name, std::uint64_t value) {
  return {.name = name, .type = AuditDetailField::Type::kCount, .count = value};
}
AuditDetailField BoolField(std::string_view name, bool value) {
  return {.name = name, .type = AuditDetailField::Type::kBoolean, .count = value ? 1U : 0U};
}
AuditDetailField StringField(std::string_view name, std::string value) {
  return {.name = name, .type = AuditDetailField::Type::kString, .text = std::move(value)};
}
// As CappedList: the list, or above `cap` the string "N<unit>".
AuditDetailField CappedListField(std::string_view name, std::vector<std::string> items,
                                 std::size_t cap, std::string_view unit) {
  if (items.size() > cap) {
    return StringField(name, std::to_string(items.size()) + std::string(unit));
  }
  return {.name = name, .type = AuditDetailField::Type::kStringList, .list = std::move(items)};
}

bool IsLowerHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A parsed line holds non-negative integers as unsigned; a value built in memory from an `int` is
// signed whatever its sign, so the sign is looked at, not the storage.
bool IsCount(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
}
bool IsInteger(const json& v) { return v.is_number_integer(); }

bool HasType(const json& v, AuditTypes types) {
  if ((types & kAuditString) && v.is_string()) return true;
  if ((types & kAuditCount) && IsCount(v)) return true;
  if ((types & kAuditInteger) && IsInteger(v)) return true;
  if ((types & kAuditBoolean) && v.is_boolean()) return true;
  if ((types & kAuditObject) && v.is_object()) return true;
  const auto all = [&v](bool (*pred)(const json&)) {
    if (!v.is_array()) return false;
    for (const json& x : v) {
      if (!pred(x)) return false;
    }
    return true;
  };
  if ((types & kAuditStringList) && all([](const json& x) { return x.is_string(); })) return true;
  if ((types & kAuditIntegerList) && all([](const json& x) { return IsInteger(x); })) return true;
  if ((types & kAuditObjectList) && all([](const json& x) { return x.is_object(); })) return true;
  return false;
}

// A JSON value's type in the schema's words, for messages.
std::string TypeOf(const json& v) {
  if (v.is_string()) return "string";
  if (IsCount(v)) return "count";
  if (v.is_number_integer()) return "negative integer";
  if (v.is_number()) return "number";
  if (v.is_boolean()) return "boolean";
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  return "null";
}

std::string EscapeCell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else {
      out += c;
    }
  }
  return out;
}

std::string_view PresenceWord(AuditPresence p) {
  switch (p) {
    case AuditPresence::kNever:
      return "never";
    case AuditPresence::kOptional:
      return "optional";
    case AuditPresence::kRequired:
      return "required";
  }
  return "never";
}

struct EnvelopeSlot {
  std::string_view name;
  AuditEnvelopeUse AuditEventSpec::*use;
};
constexpr std::array<EnvelopeSlot, 5> kSlots = {{{"tool", &AuditEventSpec::tool},
                                                 {"args", &AuditEventSpec::args},
                                                 {"verdict", &AuditEventSpec::verdict},
                                                 {"rule", &AuditEventSpec::rule},
                                                 {"result", &AuditEventSpec::result}}};

}  // namespace

std::string_view AuditActorName(AuditActor actor) {
  const auto i = static_cast<std::size_t>(actor);
  return i < kActorNames.size() ? kActorNames[i] : "invalid";
}

std::optional<AuditActor> ParseAuditActor(std::string_view name) {
  for (std::size_t i = 0; i < kActorNames.size(); ++i) {
    if (kActorNames[i] == name) return static_cast<AuditActor>(i);
  }
  return std::nullopt;
}

std::string_view AuditKindName(AuditKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  return i < Specs().size() ? Specs()[i].name : "invalid";
}

std::optional<AuditKind> ParseAuditKind(std::string_view name) {
  for (const AuditEventSpec& s : Specs()) {
    if (s.name == name) return s.kind;
  }
  return std::nullopt;
}

std::string AuditTypesName(AuditTypes types) {
  static constexpr std::array<std::pair<AuditType, std::string_view>, 8> kNames = {{
      {kAuditString, "string"},
      {kAuditCount, "count"},
      {kAuditInteger, "integer"},
      {kAuditBoolean, "boolean"},
      {kAuditObject, "object"},
      {kAuditStringList, "array of strings"},
      {kAuditIntegerList, "array of integers"},
      {kAuditObjectList, "array of objects"},
  }};
  std::string out;
  // Lists first: "array of strings | string" reads as the usual shape with its fallback.
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [bit, name] : kNames) {
      const bool list = bit >= kAuditStringList;
      if ((pass == 0) != list || (types & bit) == 0) continue;
      if (!out.empty()) out += " | ";
      out += name;
    }
  }
  return out;
}

const AuditEventSpec& AuditSpec(AuditKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  // kCount is not a kind; callers pass enum values only, so this is the last entry at worst.
  return Specs()[i < Specs().size() ? i : Specs().size() - 1];
}

std::span<const AuditEventSpec> AuditSpecs() { return Specs(); }

std::span<const AuditField> AuditEnvelope() { return EnvelopeFields(); }

json AuditEvent::DetailJson() const {
  if (fields.empty()) return detail;
  json out = json::object();
  for (const AuditDetailField& f : fields) {
    json& v = out[std::string(f.name)];
    switch (f.type) {
      case AuditDetailField::Type::kCount:
        v = f.count;
        break;
      case AuditDetailField::Type::kBoolean:
        v = f.count != 0;
        break;
      case AuditDetailField::Type::kString:
        v = f.text;
        break;
      case AuditDetailField::Type::kStringList:
        v = f.list;
        break;
    }
  }
  return out;
}

// ---- builders ----

namespace audit {

namespace {

// Where a kind's detail goes (the table's `writer` column).
enum class Writer : std::uint8_t { kJson, kTyped };

template <Writer>
class Detail;

// kJson: into AuditEvent::detail, a json object.
template <>
class Detail<Writer::kJson> {
 public:
  explicit Detail(AuditEvent& e) : d_(e.detail) {}
  template <typename T>
  void Put(std::string_view name, T value) {
    d_[std::string(name)] = Value(std::move(value));
  }
  void Finish() {}

 private:
  template <typename T>
  static json Value(T value) {
    return json(std::move(value));
  }
  static json Value(protocol::Usage u) { return protocol::UsageJson(u); }
  static json Value(json body) {
    return body.is_object() ? std::move(body) : json{{"value", std::move(body)}};
  }
  static json Value(ToolCallList calls) {
    json out = json::array();
    for (LoggedToolCall& c : calls) {
      out.push_back({{"id", std::move(c.id)},
                     {"name", std::move(c.name)},
                     {"args", std::move(c.args_digest)},
                     {"arguments_error", std::move(c.arguments_error)}});
    }
    return out;
  }
  template <std::size_t kCap, bool kPathsUnit>
  static json Value(CappedList<kCap, kPathsUnit> list) {
    return CappedJson(list.items, kCap, CappedList<kCap, kPathsUnit>::kUnit);
  }

  json& d_;
};

// kTyped: into AuditEvent::fields, sorted by name at the end (the key order a json object has),
// so the line is the same as kJson would write. Only the types a per-call kind needs.
template <>
class Detail<Writer::kTyped> {
 public:
  explicit Detail(AuditEvent& e) : f_(e.fields) { f_.reserve(12); }
  void Put(std::string_view name, std::uint64_t v) { f_.push_back(CountField(name, v)); }
  void Put(std::string_view name, bool v) { f_.push_back(BoolField(name, v)); }
  void Put(std::string_view name, std::string v) { f_.push_back(StringField(name, std::move(v))); }
  template <std::size_t kCap, bool kPathsUnit>
  void Put(std::string_view name, CappedList<kCap, kPathsUnit> list) {
    f_.push_back(
        CappedListField(name, std::move(list.items), kCap, CappedList<kCap, kPathsUnit>::kUnit));
  }
  void Finish() {
    std::sort(f_.begin(), f_.end(),
              [](const AuditDetailField& a, const AuditDetailField& b) { return a.name < b.name; });
  }

 private:
  std::vector<AuditDetailField>& f_;
};

// A field into either writer: an optional one only when set, an OmitEmpty one only when not
// empty, any other always.
template <typename W, typename T>
void PutField(W& w, std::string_view name, T value) {
  w.Put(name, std::move(value));
}
template <typename W, typename T>
void PutField(W& w, std::string_view name, std::optional<T> value) {
  if (value) w.Put(name, std::move(*value));
}
template <typename W, typename T>
void PutField(W& w, std::string_view name, OmitEmpty<T> value) {
  if (!value.value.empty()) w.Put(name, std::move(value.value));
}

// The envelope's string slots, by the table's slot names.
// NOLINTBEGIN(readability-identifier-naming): named as the table's slots
struct EnvelopeMember {
  static constexpr auto tool = &AuditEvent::tool;
  static constexpr auto args = &AuditEvent::args_digest;
  static constexpr auto verdict = &AuditEvent::verdict;
  static constexpr auto rule = &AuditEvent::rule;
  static constexpr auto result = &AuditEvent::result_digest;
};
// NOLINTEND(readability-identifier-naming)
void SetSlot(std::string& slot, std::string value) { slot = std::move(value); }
void SetSlot(std::string& slot, bool allowed) { slot = allowed ? "allow" : "deny"; }

}  // namespace

#define CAGENT_AUDIT_BUILDER_BEGIN(Kind, kName, kActor, kWriter, kMeaning) \
  AuditEvent Kind(Kind##Fields f) {                                        \
    AuditEvent e = Make(AuditKind::k##Kind);                               \
    Detail<Writer::kWriter> w(e);
#define CAGENT_AUDIT_BUILDER_ENVELOPE(Kind, kSlot, kMember, Type, kPresence, kMeaning) \
  SetSlot(e.*EnvelopeMember::kSlot, std::move(f.kMember));
#define CAGENT_AUDIT_BUILDER_FIELD(Kind, kMember, Type, kNeed, kMeaning) \
  PutField(w, #kMember, std::move(f.kMember));
#define CAGENT_AUDIT_BUILDER_END(Kind) \
  w.Finish();                          \
  return e;                            \
  }
CAGENT_AUDIT_EVENTS(CAGENT_AUDIT_BUILDER_BEGIN, CAGENT_AUDIT_BUILDER_ENVELOPE,
                    CAGENT_AUDIT_BUILDER_FIELD, CAGENT_AUDIT_BUILDER_END)
#undef CAGENT_AUDIT_BUILDER_BEGIN
#undef CAGENT_AUDIT_BUILDER_ENVELOPE
#undef CAGENT_AUDIT_BUILDER_FIELD
#undef CAGENT_AUDIT_BUILDER_END

AuditEvent UnmatchedToolResult(std::uint64_t id, std::uint64_t request) {
  AuditEvent e = Make(AuditKind::kToolResult);
  e.detail = {{"id", id}, {"request", request}, {"unmatched", true}};
  return e;
}

}  // namespace audit

// ---- validation ----

std::vector<std::string> ValidateAuditEntry(const json& entry) {
  std::vector<std::string> problems;
  if (!entry.is_object()) {
    problems.push_back("not a JSON object");
    return problems;
  }
  for (const AuditField& f : EnvelopeFields()) {
    const auto it = entry.find(f.name);
    if (it == entry.end()) {
      if (f.required) problems.push_back(std::string(f.name) + ": missing (required)");
      continue;
    }
    if (!HasType(*it, f.types)) {
      problems.push_back(std::string(f.name) + ": " + TypeOf(*it) + ", expected " +
                         AuditTypesName(f.types));
    }
  }
  for (const auto& [key, value] : entry.items()) {
    bool known = false;
    for (const AuditField& f : EnvelopeFields()) known = known || f.name == key;
    if (!known) problems.push_back(key + ": not an envelope field");
  }
  if (const auto prev = entry.find("prev"); prev != entry.end() && prev->is_string()) {
    if (!IsLowerHex64(prev->get<std::string>())) {
      problems.push_back("prev: not 64 lowercase hex digits");
    }
  }
  const auto event = entry.find("event");
  if (event == entry.end() || !event->is_string()) return problems;
  const std::optional<AuditKind> kind = ParseAuditKind(event->get<std::string>());
  if (!kind) {
    problems.push_back("event: \"" + event->get<std::string>() + "\" is not a known event");
    return problems;
  }
  const AuditEventSpec& spec = AuditSpec(*kind);

  if (const auto actor = entry.find("actor"); actor != entry.end() && actor->is_string()) {
    const std::optional<AuditActor> a = ParseAuditActor(actor->get<std::string>());
    bool allowed = false;
    for (AuditActor x : spec.actors) allowed = allowed || (a && *a == x);
    if (!allowed) {
      std::string names;
      for (AuditActor x : spec.actors) {
        names += (names.empty() ? "" : " or ") + std::string(AuditActorName(x));
      }
      problems.push_back("actor: \"" + actor->get<std::string>() + "\" does not record " +
                         std::string(spec.name) + " (only " + names + ")");
    }
  }

  for (const EnvelopeSlot& slot : kSlots) {
    const auto it = entry.find(slot.name);
    if (it == entry.end() || !it->is_string()) continue;  // reported above
    const std::string& value = it->get_ref<const std::string&>();
    const AuditPresence presence = (spec.*slot.use).presence;
    const std::string name(slot.name);
    if (presence == AuditPresence::kNever && !value.empty()) {
      problems.push_back(name + ": set, but " + std::string(spec.name) + " never sets it");
    } else if (presence == AuditPresence::kRequired && value.empty()) {
      problems.push_back(name + ": empty, but " + std::string(spec.name) + " always sets it");
    }
    if (value.empty()) continue;
    if ((slot.name == "args" || slot.name == "result") && !IsLowerHex64(value)) {
      problems.push_back(name + ": not a SHA-256 digest (64 lowercase hex digits)");
    }
    if (slot.name == "verdict" && value != "allow" && value != "deny" && value != "ask") {
      problems.push_back("verdict: \"" + value + "\" is not allow, deny or ask");
    }
  }

  const auto detail = entry.find("detail");
  if (detail == entry.end() || !detail->is_object()) return problems;
  for (const AuditField& f : spec.detail) {
    const auto it = detail->find(f.name);
    if (it == detail->end()) {
      if (f.required) problems.push_back("detail." + std::string(f.name) + ": missing (required)");
      continue;
    }
    if (!HasType(*it, f.types)) {
      problems.push_back("detail." + std::string(f.name) + ": " + TypeOf(*it) + ", expected " +
                         AuditTypesName(f.types));
    }
  }
  for (const auto& [key, value] : detail->items()) {
    bool declared = false;
    for (const AuditField& f : spec.detail) declared = declared || f.name == key;
    if (!declared) {
      problems.push_back("detail." + key + ": not a field of " + std::string(spec.name));
    }
  }
  return problems;
}

std::vector<std::string> ValidateAuditLine(std::string_view line) {
  bool too_deep = false;
  const json entry = ParseJsonWithin(line, kMaxAuditEntryDepth, &too_deep);
  if (too_deep) {
    return {"nested deeper than " + std::to_string(kMaxAuditEntryDepth) + " levels"};
  }
  if (entry.is_discarded()) {
    return {"not valid JSON"};
  }
  return ValidateAuditEntry(entry);
}

Result<AuditSchemaReport> ValidateAuditLogFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError("open " + path);
  AuditSchemaReport report;
  std::string line;
  while (std::getline(in, line)) {
    ++report.entries;
    for (std::string& p : ValidateAuditLine(line)) {
      report.problems.push_back({report.entries, std::move(p)});
    }
  }
  if (in.bad()) return ErrnoError("read " + path);
  return report;
}

// ---- documentation ----

std::string AuditSchemaMarkdown() {
  std::string md;
  md += "### Envelope\n\n";
  md += "Every line has these fields, in this order (`lost` only when entries were lost).\n\n";
  md += "| field | type | required | meaning |\n|---|---|---|---|\n";
  for (const AuditField& f : EnvelopeFields()) {
    md += "| `" + std::string(f.name) + "` | " + EscapeCell(AuditTypesName(f.types)) + " | " +
          (f.required ? "yes" : "no") + " | " + EscapeCell(f.meaning) + " |\n";
  }
  md += "\n### Actors\n\n| actor | who |\n|---|---|\n";
  for (std::size_t i = 0; i < kActorNames.size(); ++i) {
    md += "| `" + std::string(kActorNames[i]) + "` | " + std::string(kActorMeanings[i]) + " |\n";
  }
  md += "\n### Events\n\n| event | actor | meaning |\n|---|---|---|\n";
  for (const AuditEventSpec& s : Specs()) {
    std::string actors;
    for (AuditActor a : s.actors) {
      actors +=
          (actors.empty() ? "" : ", ") + std::string("`") + std::string(AuditActorName(a)) + "`";
    }
    md += "| [`" + std::string(s.name) + "`](#" + std::string(s.name) + ") | " + actors + " | " +
          EscapeCell(s.meaning) + " |\n";
  }
  for (const AuditEventSpec& s : Specs()) {
    std::string sentence(s.meaning);
    if (!sentence.empty() && sentence[0] >= 'a' && sentence[0] <= 'z') sentence[0] -= 'a' - 'A';
    md += "\n#### " + std::string(s.name) + "\n\n" + sentence + ".\n\n";
    std::string actors;
    for (AuditActor a : s.actors) {
      actors +=
          (actors.empty() ? "" : ", ") + std::string("`") + std::string(AuditActorName(a)) + "`";
    }
    md += "Actor: " + actors + ".\n\n";
    std::string envelope;
    for (const EnvelopeSlot& slot : kSlots) {
      const AuditEnvelopeUse& use = s.*slot.use;
      if (use.presence == AuditPresence::kNever) continue;
      envelope += "- `" + std::string(slot.name) + "` (" + std::string(PresenceWord(use.presence)) +
                  "): " + std::string(use.meaning) + "\n";
    }
    if (envelope.empty()) {
      md += "Envelope: `tool`, `args`, `verdict`, `rule` and `result` are \"\".\n\n";
    } else {
      md += "Envelope (the others are \"\"):\n\n" + envelope + "\n";
    }
    md += "| detail field | type | required | meaning |\n|---|---|---|---|\n";
    for (const AuditField& f : s.detail) {
      md += "| `" + std::string(f.name) + "` | " + EscapeCell(AuditTypesName(f.types)) + " | " +
            (f.required ? "yes" : "no") + " | " + EscapeCell(f.meaning) + " |\n";
    }
  }
  return md;
}

json AuditSchemaJson() {
  const auto field = [](const AuditField& f) {
    return json{{"name", std::string(f.name)},
                {"type", AuditTypesName(f.types)},
                {"required", f.required},
                {"meaning", std::string(f.meaning)}};
  };
  json envelope = json::array();
  for (const AuditField& f : EnvelopeFields()) envelope.push_back(field(f));
  json events = json::array();
  for (const AuditEventSpec& s : Specs()) {
    json actors = json::array();
    for (AuditActor a : s.actors) actors.push_back(std::string(AuditActorName(a)));
    json uses = json::object();
    for (const EnvelopeSlot& slot : kSlots) {
      const AuditEnvelopeUse& use = s.*slot.use;
      uses[std::string(slot.name)] = {{"presence", std::string(PresenceWord(use.presence))},
                                      {"meaning", std::string(use.meaning)}};
    }
    json detail = json::array();
    for (const AuditField& f : s.detail) detail.push_back(field(f));
    events.push_back({{"event", std::string(s.name)},
                      {"actors", std::move(actors)},
                      {"meaning", std::string(s.meaning)},
                      {"envelope", std::move(uses)},
                      {"detail", std::move(detail)}});
  }
  return json{{"envelope", std::move(envelope)}, {"events", std::move(events)}};
}

}  // namespace cagent::launcher::broker
