// The SARIF rendering of an audit (policy/review/sarif.h): the SARIF 2.1.0 shape code-scanning
// tools require, the level of each risk, locations as URI references, and file names that are
// hostile (spaces, '%', '#', '?', control bytes, non-ASCII) still giving valid, unambiguous URIs.
#include "policy/review/sarif.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "policy/language/loader.h"
#include "policy/review/audit.h"
#include "tests/policy/policy_test_util.h"

namespace cagent::policy {
namespace {

using nlohmann::json;
using ::testing::AnyOf;

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

SarifOptions Options() {
  SarifOptions o;
  o.version = "9.9.9";
  o.source_root = "/src/repo";
  return o;
}

// The parts of SARIF 2.1.0 that GitHub code scanning and other readers require (the whole schema
// is checked by tests/policy/review/sarif_schema_test.mjs).
void ExpectSarifShape(const json& s) {
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s["version"], "2.1.0");
  EXPECT_EQ(s["$schema"], "https://json.schemastore.org/sarif-2.1.0.json");
  ASSERT_TRUE(s["runs"].is_array());
  ASSERT_EQ(s["runs"].size(), 1u);
  const json& run = s["runs"][0];
  const json& driver = run["tool"]["driver"];
  EXPECT_EQ(driver["name"], "cagent");
  EXPECT_EQ(driver["version"], "9.9.9");
  ASSERT_TRUE(driver["rules"].is_array());
  ASSERT_EQ(driver["rules"].size(), AuditRules().size());
  std::set<std::string> unique;
  for (std::size_t i = 0; i < driver["rules"].size(); ++i) {
    const json& rule = driver["rules"][i];
    EXPECT_EQ(rule["id"], std::string(AuditRules()[i].id));
    unique.insert(rule["id"].get<std::string>());
    EXPECT_TRUE(rule["name"].is_string());
    EXPECT_TRUE(rule["shortDescription"]["text"].is_string());
    EXPECT_THAT(rule["defaultConfiguration"]["level"].get<std::string>(),
                AnyOf("error", "warning", "note"));
    // What GitHub code scanning shows: the help, a link to it, and the severity.
    EXPECT_FALSE(rule["help"]["text"].get<std::string>().empty()) << rule.dump();
    EXPECT_EQ(rule["helpUri"], "file:///usr/share/doc/cagent/auditing-profiles.md#" +
                                   ToLower(AuditRules()[i].id) + "-" +
                                   std::string(AuditRules()[i].name));
    EXPECT_EQ(rule["properties"]["security-severity"],
              std::string(SecuritySeverity(AuditRules()[i].default_risk)));
    EXPECT_THAT(rule["properties"]["tags"], ::testing::Contains("security"));
  }
  EXPECT_EQ(run["originalUriBaseIds"]["SRCROOT"]["uri"], "file:///src/repo/");
  EXPECT_EQ(unique.size(), driver["rules"].size());
  ASSERT_TRUE(run["results"].is_array());
  for (const json& res : run["results"]) {
    const std::size_t index = res["ruleIndex"].get<std::size_t>();
    ASSERT_LT(index, driver["rules"].size()) << res.dump();
    EXPECT_EQ(driver["rules"][index]["id"], res["ruleId"]);
    EXPECT_THAT(res["level"].get<std::string>(), AnyOf("error", "warning", "note"));
    EXPECT_TRUE(res["message"]["text"].is_string());
    EXPECT_THAT(res["properties"]["severity"].get<std::string>(),
                AnyOf("high", "medium", "low", "info"));
    const double score = std::stod(res["properties"]["security-severity"].get<std::string>());
    EXPECT_GE(score, 0.1);
    EXPECT_LE(score, 10.0);
    ASSERT_TRUE(res["locations"].is_array());
    for (const json& loc : res["locations"]) {
      const json& phys = loc["physicalLocation"];
      const std::string uri = phys["artifactLocation"]["uri"];
      // A relative reference names its base; an absolute one has a scheme and no base.
      if (phys["artifactLocation"].contains("uriBaseId")) {
        EXPECT_EQ(phys["artifactLocation"]["uriBaseId"], "SRCROOT");
        EXPECT_FALSE(uri.starts_with("/")) << uri;
        EXPECT_EQ(uri.find(':'), std::string::npos) << uri;
      } else {
        EXPECT_TRUE(uri.starts_with("cagent-builtin:") || uri.starts_with("file:///")) << uri;
      }
      EXPECT_GE(phys["region"]["startLine"].get<int>(), 1);
      EXPECT_GE(phys["region"]["startColumn"].get<int>(), 1);
    }
  }
}

TEST(Sarif, LevelsFollowTheRisk) {
  EXPECT_EQ(SarifLevel(Risk::kHigh), "error");
  EXPECT_EQ(SarifLevel(Risk::kMedium), "warning");
  EXPECT_EQ(SarifLevel(Risk::kLow), "note");
  EXPECT_EQ(SarifLevel(Risk::kInfo), "note");
}

TEST(Sarif, SecuritySeverityFollowsTheRiskInGitHubsBands) {
  EXPECT_EQ(SecuritySeverity(Risk::kHigh), "8.0");    // 7.0-8.9: high
  EXPECT_EQ(SecuritySeverity(Risk::kMedium), "5.5");  // 4.0-6.9: medium
  EXPECT_EQ(SecuritySeverity(Risk::kLow), "3.0");     // 0.1-3.9: low
  EXPECT_EQ(SecuritySeverity(Risk::kInfo), "1.0");
}

TEST(Sarif, ArtifactsAreBuiltInsRepositoryPathsOrFiles) {
  EXPECT_EQ(ArtifactOf("<built-in>/backend.cagent", "/src/repo"),
            json({{"uri", "cagent-builtin:backend.cagent"}}));
  EXPECT_EQ(ArtifactOf("./.cagent/project.cagent", "/src/repo"),
            json({{"uri", ".cagent/project.cagent"}, {"uriBaseId", "SRCROOT"}}));
  EXPECT_EQ(ArtifactOf("p.cagent", ""), json({{"uri", "p.cagent"}, {"uriBaseId", "SRCROOT"}}));
  EXPECT_EQ(ArtifactOf("/src/repo/.cagent/x y.cagent", "/src/repo/"),
            json({{"uri", ".cagent/x%20y.cagent"}, {"uriBaseId", "SRCROOT"}}));
  // Outside the root (a profile under ~/.config), and a root that is a prefix but not a parent.
  EXPECT_EQ(ArtifactOf("/home/u/.config/cagent/a.cagent", "/src/repo"),
            json({{"uri", "file:///home/u/.config/cagent/a.cagent"}}));
  EXPECT_EQ(ArtifactOf("/src/repository/a.cagent", "/src/repo"),
            json({{"uri", "file:///src/repository/a.cagent"}}));
  EXPECT_EQ(ArtifactOf("/etc/a.cagent", "/"), json({{"uri", "file:///etc/a.cagent"}}));
}

TEST(Sarif, UriKeepsPathCharactersAndEncodesTheRest) {
  EXPECT_EQ(UriOf("<built-in>/base.cagent"), "%3Cbuilt-in%3E/base.cagent");
  EXPECT_EQ(UriOf("./.cagent/project.cagent"), "./.cagent/project.cagent");
  EXPECT_EQ(UriOf("/a b/c%d#e?f"), "/a%20b/c%25d%23e%3Ff");
  EXPECT_EQ(UriOf("x\n\x1b[2J\"y\\"), "x%0A%1B%5B2J%22y%5C");
  EXPECT_EQ(UriOf("caf\xc3\xa9"), "caf%C3%A9");
  EXPECT_EQ(UriOf("A-z_0.9~:@!$&'()*+,;="), "A-z_0.9~:@!$&'()*+,;=");
  EXPECT_EQ(UriOf(""), "");
}

TEST(Sarif, BuiltInProfileAuditHasTheShape) {
  auto p = testing::MustCompile("extends backend\nnetwork loopback\n");
  ASSERT_NE(p, nullptr);
  const auto findings = Audit(*p);
  ASSERT_FALSE(findings.empty());
  const json s = AuditSarif(*p, findings, Options());
  ExpectSarifShape(s);
  const json& results = s["runs"][0]["results"];
  ASSERT_EQ(results.size(), findings.size());
  bool network = false;
  for (std::size_t i = 0; i < findings.size(); ++i) {
    EXPECT_EQ(results[i]["ruleId"], std::string(findings[i].rule_id));
    EXPECT_EQ(results[i]["level"], std::string(SarifLevel(findings[i].risk)));
    EXPECT_EQ(results[i]["message"]["text"], findings[i].message);
    if (findings[i].rule_id != "CAGENT001") continue;
    network = true;
    // Located at the `network loopback` statement, in the profile's own file.
    ASSERT_EQ(results[i]["locations"].size(), 1u);
    const json& phys = results[i]["locations"][0]["physicalLocation"];
    EXPECT_EQ(phys["artifactLocation"]["uri"], "test.cagent");
    EXPECT_EQ(phys["artifactLocation"]["uriBaseId"], "SRCROOT");
    EXPECT_EQ(phys["region"]["startLine"], 2);
    EXPECT_EQ(phys["region"]["startColumn"], 1);
  }
  EXPECT_TRUE(network);
  // Findings in base and backend point into cagent itself, not at a file named "<built-in>".
  bool built_in = false;
  for (const json& res : results) {
    for (const json& loc : res["locations"]) {
      const std::string uri = loc["physicalLocation"]["artifactLocation"]["uri"];
      if (uri.starts_with("cagent-builtin:")) built_in = true;
      EXPECT_EQ(uri.find("built-in%3E"), std::string::npos) << uri;
    }
  }
  EXPECT_TRUE(built_in);
}

// A file name anyone can give a profile in a repository's .cagent/ reaches the SARIF log only as
// a percent-encoded URI; the message text stays a JSON string whatever it holds.
TEST(Sarif, HostileFileNamesGiveValidUris) {
  const std::string name = "./.cagent/a b%#?\x1b[31m\xff.cagent";
  SearchPath search;
  Compiled c = CompileText(name, "network loopback\n", search);
  ASSERT_TRUE(c.ok()) << RenderAll(*c.sources, c.diags);
  const auto findings = Audit(*c.policy);
  const json s = AuditSarif(*c.policy, findings, Options());
  ExpectSarifShape(s);
  bool located = false;
  for (const json& res : s["runs"][0]["results"]) {
    for (const json& loc : res["locations"]) {
      located = true;
      const std::string uri = loc["physicalLocation"]["artifactLocation"]["uri"];
      EXPECT_EQ(uri, ".cagent/a%20b%25%23%3F%1B%5B31m%FF.cagent");
      for (const unsigned char ch : uri) {
        EXPECT_TRUE(ch > 0x20 && ch < 0x7f && ch != '#' && ch != '?') << uri;
      }
    }
  }
  EXPECT_TRUE(located);
  // The whole log serialises (invalid UTF-8 in a name never reaches it raw).
  EXPECT_NO_THROW((void)s.dump());
}

TEST(Sarif, NoFindingsIsAnEmptyResultList) {
  auto p = testing::MustCompile("extends base\n");
  ASSERT_NE(p, nullptr);
  const json s = AuditSarif(*p, {}, Options());
  ExpectSarifShape(s);
  EXPECT_TRUE(s["runs"][0]["results"].is_array());
  EXPECT_TRUE(s["runs"][0]["results"].empty());
}

// A finding without a location (a policy with no sources) has an empty location list, never a
// location pointing nowhere.
TEST(Sarif, UnlocatedFindingHasNoLocation) {
  Policy bare;
  const Finding f{"CAGENT001", Risk::kHigh, "network is on", {}};
  const json s = AuditSarif(bare, std::span<const Finding>(&f, 1), Options());
  ExpectSarifShape(s);
  ASSERT_EQ(s["runs"][0]["results"].size(), 1u);
  EXPECT_TRUE(s["runs"][0]["results"][0]["locations"].empty());
  EXPECT_EQ(s["runs"][0]["results"][0]["ruleIndex"], 0);
  EXPECT_EQ(s["runs"][0]["results"][0]["level"], "error");
}

}  // namespace
}  // namespace cagent::policy
