#include "policy/review/sarif.h"

#include <nlohmann/json.hpp>

namespace cagent::policy {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

}  // namespace

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

std::string_view SecuritySeverity(Risk risk) {
  switch (risk) {
    case Risk::kHigh:
      return "8.0";
    case Risk::kMedium:
      return "5.5";
    case Risk::kLow:
      return "3.0";
    case Risk::kInfo:
      return "1.0";
  }
  return "1.0";
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

json ArtifactOf(std::string_view name, std::string_view root) {
  constexpr std::string_view kBuiltIn = "<built-in>/";
  if (name.starts_with(kBuiltIn)) {
    return {{"uri", "cagent-builtin:" + UriOf(name.substr(kBuiltIn.size()))}};
  }
  if (name.starts_with('/')) {
    std::string_view dir = root;
    while (dir.size() > 1 && dir.ends_with('/')) dir.remove_suffix(1);
    const bool inside = !dir.empty() && dir != "/" && name.size() > dir.size() + 1 &&
                        name.starts_with(dir) && name[dir.size()] == '/';
    if (!inside) return {{"uri", "file://" + UriOf(name)}};
    name.remove_prefix(dir.size() + 1);
  }
  while (name.starts_with("./")) name.remove_prefix(2);
  return {{"uri", UriOf(name)}, {"uriBaseId", kSarifSourceRoot}};
}

json AuditSarif(const Policy& policy, std::span<const Finding> findings,
                const SarifOptions& options) {
  const auto rules = AuditRules();
  json rule_list = json::array();
  for (const AuditRule& r : rules) {
    // The section "### CAGENT001 network" of docs/auditing-profiles.md, as Markdown renderers
    // name its anchor.
    const std::string anchor = Lower(std::string(r.id)) + "-" + std::string(r.name);
    rule_list.push_back({{"id", r.id},
                         {"name", r.name},
                         {"shortDescription", {{"text", r.short_description}}},
                         {"fullDescription", {{"text", r.short_description}}},
                         {"help", {{"text", r.help}}},
                         {"helpUri", std::string(options.help_base) + "#" + anchor},
                         {"defaultConfiguration", {{"level", SarifLevel(r.default_risk)}}},
                         {"properties",
                          {{"security-severity", SecuritySeverity(r.default_risk)},
                           {"tags", json::array({"security", "cagent-policy", r.name})}}}});
  }
  json results = json::array();
  for (const Finding& f : findings) {
    std::size_t index = 0;
    while (index < rules.size() && rules[index].id != f.rule_id) ++index;
    json result = {
        {"ruleId", f.rule_id},
        {"ruleIndex", index},
        {"level", SarifLevel(f.risk)},
        {"message", {{"text", f.message}}},
        {"properties",
         {{"severity", RiskName(f.risk)}, {"security-severity", SecuritySeverity(f.risk)}}},
        {"locations", json::array()}};
    const bool located = policy.sources && f.loc.valid() && f.loc.file < policy.sources->size();
    const std::string file = located ? policy.sources->file(f.loc.file).display_name : "";
    if (!file.empty()) {
      result["locations"].push_back(
          {{"physicalLocation",
            {{"artifactLocation", ArtifactOf(file, options.source_root)},
             {"region", {{"startLine", f.loc.line}, {"startColumn", f.loc.col}}}}}});
    }
    results.push_back(std::move(result));
  }
  json run;
  run["tool"]["driver"] = {{"name", "cagent"},
                           {"version", options.version},
                           {"informationUri", std::string(options.help_base)},
                           {"rules", rule_list}};
  if (options.source_root.starts_with('/')) {
    std::string root(options.source_root);
    if (!root.ends_with('/')) root += '/';
    run["originalUriBaseIds"][std::string(kSarifSourceRoot)] = {{"uri", "file://" + UriOf(root)}};
  }
  run["results"] = std::move(results);
  json sarif;
  sarif["$schema"] = "https://json.schemastore.org/sarif-2.1.0.json";
  sarif["version"] = "2.1.0";
  sarif["runs"] = json::array({std::move(run)});
  return sarif;
}

}  // namespace cagent::policy
