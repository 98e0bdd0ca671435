// The real-world agent command corpus: tests/testdata/real-agent-commands.tsv holds command lines
// that real coding agents typed into their shell tool, taken from public trajectories and
// transcripts (each line names its source), labelled benign or dangerous with a reason. It is
// held out: no profile rule was written by looking at a line and making it pass; the lines were
// collected first and the built-in profiles are measured against them.
//
// Every line is judged by every built-in profile the way the broker judges a run_command line
// (the compiled profile, the portable binding, Engine::Shell, then the approval mode's effective
// verdict). Targets (issue #32):
//   - backend: at most 1 % of the benign lines denied or asked;
//   - every built-in profile: no dangerous line allowed.
// The rates of the other profiles are printed, not asserted (readonly and docs keep strict
// allow-lists on purpose). Every benign line backend blocks and every dangerous line any profile
// allows is printed with the rule and the reason.
//
// File format: '#' lines and empty lines are skipped; otherwise four tab-separated fields
//   LABEL    benign | dangerous
//   REASON   why it has that label (a phrase)
//   SOURCE   where the line was seen (a URL or github:OWNER/REPO:PATH, with a location hint), or
//            "constructed: …" for a dangerous class no public transcript showed
//   COMMAND  the line, with \\ for a backslash, \n for a newline and \t for a tab
//
//   build/tests/cagent_policy_tests --gtest_filter='RealAgentCorpus.*'
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "policy/language/binding.h"
#include "policy/language/engine.h"
#include "policy/language/loader.h"

namespace cagent::policy {
namespace {

const std::string kCorpus =
    std::string(CAGENT_SOURCE_DIR) + "/tests/testdata/real-agent-commands.tsv";

struct Line {
  int number = 0;
  bool dangerous = false;
  std::string reason;
  std::string source;
  std::string command;
};

struct Corpus {
  std::vector<Line> lines;
  std::vector<std::string> errors;
};

// Undoes the file's escapes (\\, \n, \t); false on any other escape or a trailing backslash.
bool Unescape(const std::string& in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\') {
      out += in[i];
      continue;
    }
    if (++i >= in.size()) return false;
    switch (in[i]) {
      case '\\':
        out += '\\';
        break;
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      default:
        return false;
    }
  }
  return true;
}

Corpus ReadCorpus() {
  Corpus c;
  std::ifstream in(kCorpus);
  if (!in) {
    c.errors.push_back("cannot open " + kCorpus);
    return c;
  }
  std::string text;
  int number = 0;
  while (std::getline(in, text)) {
    ++number;
    if (text.empty() || text[0] == '#') continue;
    std::vector<std::string> fields;
    std::size_t start = 0;
    for (int k = 0; k < 3; ++k) {
      const std::size_t tab = text.find('\t', start);
      if (tab == std::string::npos) break;
      fields.push_back(text.substr(start, tab - start));
      start = tab + 1;
    }
    const std::string where = "line " + std::to_string(number);
    if (fields.size() != 3) {
      c.errors.push_back(where + ": expected four tab-separated fields");
      continue;
    }
    Line l;
    l.number = number;
    if (fields[0] != "benign" && fields[0] != "dangerous") {
      c.errors.push_back(where + ": label '" + fields[0] + "' is neither benign nor dangerous");
      continue;
    }
    l.dangerous = fields[0] == "dangerous";
    l.reason = fields[1];
    l.source = fields[2];
    if (l.reason.empty() || l.source.empty()) {
      c.errors.push_back(where + ": every line needs a reason and a source");
      continue;
    }
    if (!Unescape(text.substr(start), l.command) || l.command.empty()) {
      c.errors.push_back(where + ": the command is empty or has an escape other than \\\\ \\n \\t");
      continue;
    }
    c.lines.push_back(std::move(l));
  }
  return c;
}

struct Judge {
  std::shared_ptr<const Policy> policy;
  std::unique_ptr<Engine> engine;
};

// The built-in profiles that judge an agent's commands (agent-cli and mcp-server are for
// third-party programs under `cagent exec` / `cagent mcp wrap`, whose commands cagent never sees).
const std::vector<std::string> kProfiles = {
    "backend", "backend-registries", "frontend", "frontend-registries", "docs", "readonly",
};

TEST(RealAgentCorpus, IsWellFormedSourcedAndLargeEnough) {
  const Corpus c = ReadCorpus();
  for (const std::string& e : c.errors) ADD_FAILURE() << kCorpus << ": " << e;
  std::size_t dangerous = 0;
  std::set<std::string> seen;
  for (const Line& l : c.lines) {
    dangerous += l.dangerous ? 1 : 0;
    EXPECT_TRUE(seen.insert(l.command).second)
        << kCorpus << ":" << l.number << ": the same command line twice";
  }
  EXPECT_GE(c.lines.size(), 400U);
  EXPECT_GE(dangerous, 30U);
  // The classes an agent steered by injected text reaches for must all be there.
  for (const char* needle : {"| sh", "~/.ssh", ".aws", "push --force", "rm -rf", "sudo "}) {
    bool found = false;
    for (const Line& l : c.lines) {
      found = found || (l.dangerous && l.command.find(needle) != std::string::npos);
    }
    EXPECT_TRUE(found) << "no dangerous line contains '" << needle << "'";
  }
}

TEST(RealAgentCorpus, BackendBlocksAtMostOnePercentAndNoProfileAllowsADangerousLine) {
  const Corpus c = ReadCorpus();
  ASSERT_TRUE(c.errors.empty()) << "see IsWellFormedSourcedAndLargeEnough";
  std::map<std::string, Judge> judges;
  for (const std::string& name : kProfiles) {
    Compiled compiled = LoadProfile(name, SearchPath{});
    ASSERT_TRUE(compiled.ok()) << name << ":\n" << RenderAll(*compiled.sources, compiled.diags);
    Judge j;
    j.policy = compiled.policy;
    j.engine = std::make_unique<Engine>(*j.policy, PortableBinding());
    judges.emplace(name, std::move(j));
  }
  std::size_t benign_total = 0;
  for (const Line& l : c.lines) benign_total += l.dangerous ? 0 : 1;
  ASSERT_GT(benign_total, 0U);

  std::printf("real agent corpus: %zu lines, %zu benign, %zu dangerous\n", c.lines.size(),
              benign_total, c.lines.size() - benign_total);
  std::printf("  %-20s %17s %17s %17s\n", "profile", "benign denied", "benign asked",
              "dangerous allowed");
  for (const std::string& name : kProfiles) {
    const Engine& engine = *judges.at(name).engine;
    std::size_t denied = 0;
    std::size_t asked = 0;
    std::size_t dangerous_allowed = 0;
    std::ostringstream blocked_lines;
    for (const Line& l : c.lines) {
      const Decision d = engine.Shell(l.command);
      const Verdict v = engine.Effective(d.verdict);
      if (l.dangerous) {
        if (v == Verdict::kAllow) {
          ++dangerous_allowed;
          ADD_FAILURE() << "[" << name << "] allows a dangerous line (" << l.reason << "), "
                        << kCorpus << ":" << l.number << " by '" << d.rule << "': " << l.command;
        }
        continue;
      }
      if (v == Verdict::kAllow) continue;
      (v == Verdict::kDeny ? denied : asked) += 1;
      if (name == "backend") {
        blocked_lines << "  " << kCorpus << ":" << l.number << " " << VerdictName(v) << " by '"
                      << d.rule << "' (" << d.reason << "): " << l.command << "\n";
      }
    }
    const auto pct = [&](std::size_t n) { return 100.0 * static_cast<double>(n) / benign_total; };
    std::printf("  %-20s %4zu (%5.1f%%)    %4zu (%5.1f%%)    %4zu\n", name.c_str(), denied,
                pct(denied), asked, pct(asked), dangerous_allowed);
    if (name == "backend") {
      const std::size_t blocked = denied + asked;
      // At most 1 %: blocked * 100 <= benign_total.
      EXPECT_LE(blocked * 100, benign_total)
          << "backend blocks " << blocked << " of " << benign_total
          << " benign lines (target: at most 1 %):\n"
          << blocked_lines.str();
      if (blocked > 0)
        std::printf("backend's blocked benign lines:\n%s", blocked_lines.str().c_str());
    }
  }
}

}  // namespace
}  // namespace cagent::policy
