#include "policy/sarif.h"

#include <nlohmann/json.hpp>

namespace cagent::policy {

using nlohmann::json;

std::string_view SarifLevel(Risk risk) {
  switch (risk) {
    case Risk::kHigh:
      return "error";
    case Risk::kMedium:
      return "warning";
    case Risk::kLow:
    case Risk::kInfo:
      return "note";
  }
  return "note";
}

std::string UriOf(std::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  static constexpr std::string_view kKept = "-._~/:@!$&'()*+,;=";
  std::string out;
  out.reserve(name.size());
  for (const unsigned char c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       kKept.find(static_cast<char>(c)) != std::string_view::npos;
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

json AuditSarif(const Policy& policy, std::span<const Finding> findings, std::string_view version) {
  const auto rules = AuditRules();
  json rule_list = json::array();
  for (const AuditRule& r : rules) {
    rule_list.push_back({{"id", r.id},
                         {"name", r.name},
                         {"shortDescription", {{"text", r.short_description}}},
                         {"defaultConfiguration", {{"level", SarifLevel(r.default_risk)}}}});
  }
  json results = json::array();
  for (const Finding& f : findings) {
    std::size_t index = 0;
    while (index < rules.size() && rules[index].id != f.rule_id) ++index;
    json result = {{"ruleId", f.rule_id},
                   {"ruleIndex", index},
                   {"level", SarifLevel(f.risk)},
                   {"message", {{"text", f.message}}},
                   {"properties", {{"severity", RiskName(f.risk)}}},
                   {"locations", json::array()}};
    const bool located = policy.sources && f.loc.valid() && f.loc.file < policy.sources->size();
    const std::string file = located ? policy.sources->file(f.loc.file).display_name : "";
    if (!file.empty()) {
      result["locations"].push_back(
          {{"physicalLocation",
            {{"artifactLocation", {{"uri", UriOf(file)}}},
             {"region", {{"startLine", f.loc.line}, {"startColumn", f.loc.col}}}}}});
    }
    results.push_back(std::move(result));
  }
  json run;
  run["tool"]["driver"] = {{"name", "cagent"}, {"version", version}, {"rules", rule_list}};
  run["results"] = std::move(results);
  json sarif;
  sarif["$schema"] = "https://json.schemastore.org/sarif-2.1.0.json";
  sarif["version"] = "2.1.0";
  sarif["runs"] = json::array({std::move(run)});
  return sarif;
}

}  // namespace cagent::policy
