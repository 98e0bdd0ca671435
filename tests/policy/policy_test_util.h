// Shared helpers for the policy tests: compile profile text, and the ExpectAllow / ExpectDeny
// harness (STYLE.md "Tests": policy tests go through the engine, naming the rule that decides).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "policy/language/engine.h"
#include "policy/language/loader.h"

namespace cagent::policy::testing {

// Compiles `text` as profile "test.cagent" (extends resolve to the built-in profiles). Fails the
// test, printing the diagnostics, when it does not compile.
inline std::shared_ptr<const Policy> MustCompile(std::string_view text,
                                                 std::string_view name = "test.cagent") {
  SearchPath search;
  Compiled c = CompileText(name, text, search);
  EXPECT_TRUE(c.ok()) << RenderAll(*c.sources, c.diags);
  return c.policy;
}

// The rendered diagnostics of text that must not compile.
inline std::string MustFail(std::string_view text, std::string_view name = "test.cagent") {
  SearchPath search;
  Compiled c = CompileText(name, text, search);
  EXPECT_FALSE(c.ok()) << "compiled, but should not have:\n" << text;
  return RenderAll(*c.sources, c.diags);
}

inline std::vector<std::string> Argv(std::initializer_list<const char*> words) {
  return {words.begin(), words.end()};
}

// Each expectation names the verdict and the rule (as Decision::rule shows it) that must decide.
inline ::testing::AssertionResult Decides(const Decision& d, Verdict verdict,
                                          std::string_view rule) {
  if (d.verdict == verdict && d.rule == rule) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << VerdictName(d.verdict) << " by '" << d.rule << "' (" << d.reason
         << "), expected " << VerdictName(verdict) << " by '" << rule << "'";
}

#define EXPECT_ALLOW(decision, rule) \
  EXPECT_TRUE(::cagent::policy::testing::Decides((decision), Verdict::kAllow, (rule)))
#define EXPECT_ASK(decision, rule) \
  EXPECT_TRUE(::cagent::policy::testing::Decides((decision), Verdict::kAsk, (rule)))
#define EXPECT_DENY(decision, rule) \
  EXPECT_TRUE(::cagent::policy::testing::Decides((decision), Verdict::kDeny, (rule)))

}  // namespace cagent::policy::testing
