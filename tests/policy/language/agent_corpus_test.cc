// The agent command corpus: tests/testdata/agent-commands.tsv holds command lines of the shapes
// coding agents send to run_command (exploring, building, testing, git, package managers, sed
// edits, pipes, cd && ...), each with its category and the verdict every built-in profile must
// give it. Every line is judged by the compiled built-ins under the portable binding, as the
// broker judges a run_command line; every mismatch is printed, with the rule and the reason.
//
// It also prints the false-block rate per profile: of the harmless lines a profile is expected to
// allow, how many it does not (denied or asked; with `never-ask` an ask is a denial too). The rate
// is computed from the engine's actual verdicts, so the same test built against an older tree
// measures that tree (docs/performance.md, "False blocks", says how the figures there were made):
//   build/tests/cagent_policy_tests --gtest_filter='AgentCorpus.*'
//
// File format: one line per command, three tab-separated fields; '#' lines and empty lines are
// skipped.
//   CATEGORY  harmless (an idiom that must be allowed where expected) | denied (denied on
//             purpose) | ask (asked on purpose)
//   EXPECT    a verdict (allow, ask, deny) for every profile, then PROFILE=VERDICT overrides;
//             PROFILE may end in '*' for every profile whose name starts with the rest
//             ("backend*=allow" is backend and backend-registries). Later words win.
//   COMMAND   the line, exactly as run_command would pass it to /bin/sh -c.
// The line "#profiles: NAME..." names the profiles the expectations are written for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "policy/language/binding.h"
#include "policy/language/engine.h"
#include "policy/language/loader.h"

namespace cagent::policy {
namespace {

const std::string kCorpus = std::string(CAGENT_SOURCE_DIR) + "/tests/testdata/agent-commands.tsv";

struct CorpusLine {
  int number = 0;
  std::string category;
  std::string expect;
  std::string command;
};

struct Corpus {
  std::vector<std::string> profiles;
  std::vector<CorpusLine> lines;
  std::vector<std::string> errors;  // malformed lines
};

std::optional<Verdict> ParseVerdictWord(const std::string& w) {
  if (w == "allow") return Verdict::kAllow;
  if (w == "ask") return Verdict::kAsk;
  if (w == "deny") return Verdict::kDeny;
  return std::nullopt;
}

Corpus ReadCorpus() {
  Corpus c;
  std::ifstream in(kCorpus);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.starts_with("#profiles:")) {
      std::istringstream words(line.substr(10));
      std::string w;
      while (words >> w) c.profiles.push_back(w);
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const std::size_t t1 = line.find('\t');
    const std::size_t t2 = t1 == std::string::npos ? t1 : line.find('\t', t1 + 1);
    if (t2 == std::string::npos) {
      c.errors.push_back("line " + std::to_string(number) +
                         ": expected three tab-separated fields");
      continue;
    }
    CorpusLine l{number, line.substr(0, t1), line.substr(t1 + 1, t2 - t1 - 1), line.substr(t2 + 1)};
    if (l.category != "harmless" && l.category != "denied" && l.category != "ask") {
      c.errors.push_back("line " + std::to_string(number) + ": unknown category '" + l.category +
                         "'");
      continue;
    }
    c.lines.push_back(std::move(l));
  }
  return c;
}

// The verdict `expect` gives `profile`, or nullopt (with `error`) when it does not parse.
std::optional<Verdict> Expected(const std::string& expect, const std::string& profile,
                                std::string& error) {
  std::istringstream words(expect);
  std::string w;
  std::optional<Verdict> out;
  bool first = true;
  while (words >> w) {
    if (first) {
      out = ParseVerdictWord(w);
      if (!out) error = "the first word of EXPECT must be allow, ask or deny, not '" + w + "'";
      first = false;
      continue;
    }
    const std::size_t eq = w.find('=');
    const std::optional<Verdict> v =
        eq == std::string::npos ? std::nullopt : ParseVerdictWord(w.substr(eq + 1));
    if (!v) {
      error = "override '" + w + "' is not PROFILE=allow|ask|deny";
      return std::nullopt;
    }
    std::string who = w.substr(0, eq);
    const bool prefix = who.ends_with('*');
    if (prefix) who.pop_back();
    if (prefix ? profile.starts_with(who) : profile == who) out = v;
  }
  if (!error.empty()) return std::nullopt;
  return out;
}

struct Judged {
  std::shared_ptr<const Policy> policy;
  std::unique_ptr<Engine> engine;
};

std::map<std::string, Judged> LoadAll(const std::vector<std::string>& names) {
  std::map<std::string, Judged> out;
  for (const std::string& name : names) {
    SearchPath search;  // built-ins only
    Compiled c = LoadProfile(name, search);
    EXPECT_TRUE(c.ok()) << name << ":\n" << RenderAll(*c.sources, c.diags);
    if (!c.ok()) continue;
    Judged j;
    j.policy = c.policy;
    j.engine = std::make_unique<Engine>(*j.policy, PortableBinding());
    out.emplace(name, std::move(j));
  }
  return out;
}

TEST(AgentCorpus, IsWellFormedAndLargeEnough) {
  const Corpus c = ReadCorpus();
  ASSERT_FALSE(c.profiles.empty()) << kCorpus << ": no '#profiles:' line (or the file is missing)";
  for (const std::string& e : c.errors) ADD_FAILURE() << kCorpus << ": " << e;
  EXPECT_GE(c.lines.size(), 200U);
  for (const CorpusLine& l : c.lines) {
    for (const std::string& p : c.profiles) {
      std::string error;
      if (!Expected(l.expect, p, error)) {
        ADD_FAILURE() << kCorpus << ":" << l.number << ": " << error;
        break;
      }
    }
  }
}

// Every built-in profile has expectations: a new built-in must be added to the '#profiles:' line
// (and its verdicts checked line by line).
TEST(AgentCorpus, CoversEveryBuiltinProfile) {
  const Corpus c = ReadCorpus();
  for (const BuiltinProfile& b : BuiltinProfiles()) {
    // A profile with no command rules (agent-cli, for `cagent exec` of a third-party CLI) judges
    // no agent's commands: every line would be denied, and there is no false-block rate to keep.
    Compiled compiled = LoadProfile(std::string(b.name), SearchPath{});
    if (compiled.ok() && compiled.policy->commands.empty()) continue;
    EXPECT_NE(std::find(c.profiles.begin(), c.profiles.end(), std::string(b.name)),
              c.profiles.end())
        << "built-in profile '" << b.name << "' is not in the '#profiles:' line of " << kCorpus;
  }
}

TEST(AgentCorpus, EveryLineGetsItsExpectedVerdict) {
  const Corpus c = ReadCorpus();
  const std::map<std::string, Judged> engines = LoadAll(c.profiles);
  ASSERT_EQ(engines.size(), c.profiles.size());
  std::ostringstream mismatches;
  std::size_t count = 0;
  // Per profile: harmless lines expected to be allowed, and how many of them are not.
  std::map<std::string, std::pair<std::size_t, std::size_t>> harmless;
  for (const CorpusLine& l : c.lines) {
    for (const std::string& p : c.profiles) {
      std::string error;
      const std::optional<Verdict> want = Expected(l.expect, p, error);
      if (!want) continue;  // reported by IsWellFormedAndLargeEnough
      const Decision d = engines.at(p).engine->Shell(l.command);
      if (l.category == "harmless" && *want == Verdict::kAllow) {
        ++harmless[p].first;
        if (d.verdict != Verdict::kAllow) ++harmless[p].second;
      }
      if (d.verdict == *want) continue;
      ++count;
      mismatches << "  " << kCorpus << ":" << l.number << " [" << p << "] expected "
                 << VerdictName(*want) << ", got " << VerdictName(d.verdict) << " by '" << d.rule
                 << "' (" << d.reason << "): " << l.command << "\n";
    }
  }
  std::printf(
      "false-block rate (harmless lines expected allowed, but denied or asked), %zu lines:\n",
      c.lines.size());
  std::size_t all = 0, blocked = 0;
  for (const std::string& p : c.profiles) {
    const auto [n, b] = harmless[p];
    all += n;
    blocked += b;
    std::printf("  %-22s %3zu / %3zu  %5.1f%%\n", p.c_str(), b, n, n ? 100.0 * b / n : 0.0);
  }
  std::printf("  %-22s %3zu / %3zu  %5.1f%%\n", "all", blocked, all,
              all ? 100.0 * blocked / all : 0.0);
  EXPECT_EQ(count, 0U) << count << " corpus verdicts differ from the expected ones:\n"
                       << mismatches.str();
}

}  // namespace
}  // namespace cagent::policy
